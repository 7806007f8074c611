"""Custom ops of model libraries, traced through an implementation in plain torch instead of being left to
AOTInductor, which has no C shim for them: a custom op in the compiled program is a call through AOTI's
proxy executor, which aotcuda's runtime does not have.

A custom op (``torch.library.custom_op``) keeps its Python implementation beside it (the CustomOpDef).
Where that implementation is plain torch with static control flow, the decompositions trace through it
(``custom_op_decompositions``). Where it is not, a rule here gives the same computation in plain torch
with static shapes (LIBRARY_OP_RULES): transformers' ``grouped_mm_fallback`` (its MoE experts for
non-bfloat16 weights under export) loops over ``offs.tolist()`` and skips empty groups with a Python
``if``, which no tracer can follow on data.

A custom op that keeps neither is refused before compiling (lowering/proxy_ops.py).

A Triton op (``torch.library.triton_op``: a custom op whose implementation launches Triton kernels through
``wrap_triton``) is left as it is: AOTInductor's functionalization traces it into its kernels, which the
package compiles and launches itself (no proxy executor), on devices where Triton runs (CUDA).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.export import ExportedProgram

# Python-level rules, by the op's qualified name (the op exists only once its library has been imported).
LIBRARY_OP_RULES: dict[str, Callable] = {}


def rule(qualname: str):
    def register(fn: Callable) -> Callable:
        LIBRARY_OP_RULES[qualname] = fn
        return fn

    return register


@rule("transformers::grouped_mm_fallback")
def grouped_mm(input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """input [S, K] (rows sorted by group), weight [G, K, N], offs [G] the groups' cumulative ends: row r of
    group g is input[r] @ weight[g]; rows past offs[-1] are zero, as in transformers' loop.

    Each row finds its group by counting the ends at or before it, and is multiplied by its group's
    matrix in one batched matmul over gathered weights (the work and memory of transformers'
    experts_implementation="batched_mm")."""
    rows = torch.arange(input.shape[0], device=input.device)
    group = (rows.unsqueeze(1) >= offs.unsqueeze(0)).sum(1)  # [S]: G past the last group
    inside = group < weight.shape[0]
    gathered = weight[group.clamp(max=weight.shape[0] - 1)]  # [S, K, N]
    product = torch.bmm(input.unsqueeze(1), gathered).squeeze(1)
    return torch.where(inside.unsqueeze(1), product, torch.zeros((), dtype=product.dtype, device=product.device))


def custom_ops_in(ep: ExportedProgram) -> list[torch._ops.OpOverload]:
    """The custom ops (not aten, prims or a higher-order op) the program calls, in first-use order."""
    ops: dict = {}
    for node in ep.graph.nodes:
        if node.op == "call_function" and is_custom_op(node.target):
            ops.setdefault(node.target, None)
    return list(ops)


def is_custom_op(target) -> bool:
    return isinstance(target, torch._ops.OpOverload) and target.namespace not in ("aten", "prims", "_quantized")


def is_triton_op(op: torch._ops.OpOverload) -> bool:
    """Whether op was made by torch.library.triton_op (its registry, the same in torch 2.11 through 2.15)."""
    from torch._library import triton

    return is_custom_op(op) and op._schema.name in getattr(triton, "triton_ops_to_kernels", {})


def has_inductor_lowering(op: torch._ops.OpOverload) -> bool:
    """Whether Inductor has a lowering of its own for custom op `op` that is not a fallback (aotcuda's
    fft_rows_cpu: a C++ template, kernels/fft_cpu_template.py): Inductor generates its code, so the op is
    kept, neither traced into its implementation nor refused."""
    from torch._inductor import lowering

    return is_custom_op(op) and op in lowering.lowerings and op not in lowering.fallbacks


def implementation(op: torch._ops.OpOverload) -> Callable | None:
    """The plain-torch implementation to trace for a custom op: aotcuda's rule for it, else the Python
    function it was defined with (torch.library.custom_op); None when it has neither."""
    qualname = op._schema.name
    if qualname in LIBRARY_OP_RULES:
        return LIBRARY_OP_RULES[qualname]
    from torch._library.custom_ops import _maybe_get_opdef

    opdef = _maybe_get_opdef(qualname)
    return getattr(opdef, "_init_fn", None) if opdef is not None else None


def custom_op_decompositions(ep: ExportedProgram) -> dict[torch._ops.OpOverload, Callable]:
    """{custom op of ep: the implementation to trace} for each custom op that has one and writes none of its
    arguments (an op that does is functionalized by torch.export as it is, and kept). Triton ops are kept:
    their implementation launches kernels, which AOTInductor compiles (is_triton_op); so are ops Inductor
    lowers itself (has_inductor_lowering)."""
    table = {}
    for op in custom_ops_in(ep):
        if op._schema.is_mutable or is_triton_op(op) or has_inductor_lowering(op):
            continue
        fn = implementation(op)
        if fn is not None:
            table[op] = fn
    return table
