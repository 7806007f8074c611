"""The programs lowered through ExecuTorch in these tests and in benchmarks/executorch_cuda.py.

llama2 and wan are aotcuda's own patterns (aotcuda.models.patterns); twice is Llama-2's rotation whose
result is returned in two output slots, the case where AOTInductor writes one output handle into
several slots.

Each keeps its table so that ``model.to(device)`` (or the model's own forward) puts it beside the inputs,
as benchmarks/executorch_cuda.py exports on the GPU: llama2 holds a plain attribute and moves it in forward
(as Llama-2 does), twice a persistent buffer, wan a non-persistent one; between them the three ways a
complex table reaches the program (lifted constant, buffer in the state dict, buffer outside it).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.export import Dim

from aotcuda.models import Case
from aotcuda.models.patterns import PATTERNS, llama2
from aotcuda.models.patterns._common import as_complex_pairs, inverse_frequencies, polar_table


class TwiceRope(nn.Module):
    """forward(x [B, S, H, D]) → (rotated, x + 1, rotated): one tensor in output slots 0 and 2."""

    def __init__(self, head_dim: int = llama2.HEAD_DIM, max_seq: int = llama2.MAX_SEQ):
        super().__init__()
        # A buffer follows model.to(device); a plain attribute would stay where it was made.
        self.register_buffer("freqs_cis", polar_table(torch.arange(max_seq), inverse_frequencies(head_dim)))

    def forward(self, x: torch.Tensor):
        seq = x.shape[1]
        rotated = torch.view_as_real(as_complex_pairs(x) * self.freqs_cis[:seq].view(1, seq, 1, -1)).flatten(3)
        return rotated, x + 1, rotated


def _twice_inputs(seq: int = 12, dtype: torch.dtype = torch.float32):
    return (torch.randn(llama2.BATCH, seq, llama2.HEADS, llama2.HEAD_DIM).to(dtype),)


def _twice_build(dtype: torch.dtype = torch.float32):
    return TwiceRope(), _twice_inputs(12, dtype), ({1: Dim("seq", min=2, max=llama2.MAX_SEQ)},)


TWICE = Case.positional("twice", "one tensor in several output slots", "complex constant, slice, view, "
                        "view_as_complex, mul, view_as_real", _twice_build, _twice_inputs, (12, 5, 64))

PROGRAMS: dict[str, Case] = {"llama2": PATTERNS["llama2"], "twice": TWICE, "wan": PATTERNS["wan"]}


def export(case: Case) -> tuple[nn.Module, torch.export.ExportedProgram]:
    """The case's model and its float32 ExportedProgram (non-strict, as aotcuda.lower exports)."""
    model, args, kwargs, dynamic_shapes = case.build(torch.float32)
    return model, torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
