"""Rotary-embedding patterns of public models, each a small module of our own (not the models' code).

Each pattern stands for what one family of models does with complex numbers; PATTERNS lists them as
Case records (aotcuda.models.case), and aotcuda.models.catalogue.CASES lists them with the other built-in
programs: `case.build(dtype)` gives (model, args, kwargs, dynamic_shapes) for torch.export.export, and
`case.make_inputs(length, dtype)` fresh random (args, kwargs).
"""

from __future__ import annotations

import torch

from aotcuda.models.case import Case
from aotcuda.models.patterns import (
    centered_freqs,
    complex_arith,
    deepseek_mla,
    llama2,
    llama3,
    lumina,
    mistral_packed,
    wan,
)

_BOTH = (torch.float32, torch.bfloat16)
_VIEW_MUL = "view_as_complex, mul, view_as_real"

PATTERNS: dict[str, Case] = {
    case.name: case
    for case in [
        Case.positional("llama2", "Llama-2", f"complex constant, slice, view, {_VIEW_MUL}",
             llama2.build, llama2.make_inputs, (12, 40), _BOTH),
        Case.positional("llama3", "Llama-3", f"complex buffer, index_select, unsqueeze, {_VIEW_MUL}",
             llama3.build, llama3.make_inputs, (12, 33), _BOTH),
        Case.positional("deepseek_mla", "DeepSeek-V2/V3 MLA", f"non-persistent complex buffer, slice, view, {_VIEW_MUL}",
             deepseek_mla.build, deepseek_mla.make_inputs, (12, 29), (torch.bfloat16, torch.float32)),
        Case.positional("mistral_packed", "Mistral (packed tokens)", f"complex buffer, index.Tensor, slice, unsqueeze, {_VIEW_MUL}",
             mistral_packed.build, mistral_packed.make_inputs, (20, 57), _BOTH),
        Case.positional("wan", "Wan 2.1", f"complex128 buffer, split_with_sizes, slice, view, expand, cat, {_VIEW_MUL}",
             wan.build, wan.make_inputs, (24,)),
        Case.positional("lumina", "Lumina-Next / Lumina-Image 2", f"complex constants, unsqueeze, repeat, gather, cat, {_VIEW_MUL}",
             lumina.build, lumina.make_inputs, (10,)),
        Case.positional("centered_freqs", "Qwen-Image (centred frequencies)",
             f"complex constants, split_with_sizes, slice, view, expand, cat, clone, {_VIEW_MUL}",
             centered_freqs.build, centered_freqs.make_inputs, (24,)),
        Case.positional("complex_arith", "complex arithmetic beyond the product",
             "complex buffer, view_as_complex, mul, add, mul by real scalar, conj, sub, abs, angle, view_as_real",
             complex_arith.build, complex_arith.make_inputs, (8,)),
    ]
}

__all__ = ["PATTERNS"]
