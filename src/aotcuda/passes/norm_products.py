"""FoldRMSNormIntoProductPass: a one-row product of an RMSNorm's output scales its outputs by the row's factor.

RMSNorm(h) = h · rsqrt(mean(h², -1) + eps) · g (Zhang and Sennrich, 2019; Llama, Qwen, Mistral, DeepSeek),
and a linear layer after it: y = RMSNorm(h) Wᵀ. The factor r = rsqrt(mean(h²) + eps) is one number per row,
so y = r · ((h · g) Wᵀ): the product can run on the unnormalized row and be scaled afterwards. In a batch-1
decode step this matters because of when r is known. As written, r needs all of h before the product's first
multiply; Inductor computes it in a kernel of its own (one program: the H200 profile of benchmarks/decode.py
shows two per layer, 2.0 and 2.4 µs, between the products; docs/performance.md, session 17) or in a first loop
of each product's kernel. Rewritten, the product and the mean of h² are two reductions over the same K for
the same N outputs, reading the same h: ``mm(h·g, Wᵀ)``, and ``mean(expand(h², [1, K, N]), 1)`` (the same
value in every column, so that Inductor sees a reduction of N outputs like the product's, decomposed from a
one-row mm, and computes both in one loop); the scale is the epilogue.

Measured, it loses (H200, torch 2.11, session 18, docs/performance.md): the norm kernels go, but Inductor's
product with the sum of squares in its loop took 29.9 µs for w1/w3 against 17.3 and 14.5 for w2 against 9.3,
and the batch-1 step 1052.5 µs against 936.3. So it is off by default (switches.py: AOTCUDA_NORM_PRODUCTS);
the same fusion needs a product kernel that reads h once for its sum of squares, which Inductor's generated
reduction does not do.

Matched: ``mm(view(y), Wᵀ)`` (views, and slices that keep every element) with one row on the left (a
static 1, as Inductor decomposes one-row products only then) that is the norm's whole row, y = ``[g ·] cast?(hf · rsqrt(mean(pow(hf, 2), [-1], keepdim) + eps)) [· g]`` with hf =
``cast?(h)``, as torch.export writes Meta's and transformers' RMSNorm after lower()'s decompositions. Other
consumers of y keep reading y.

Not rewritten: a norm whose rows a view flattens into the product's one row, an eps scaled by add's alpha,
casts to or products in float16 or integers (the unnormalized row and its product need float32's range: only
float32, bfloat16 and float64 are taken), programs exported with ``preserve_module_call_signature``.

Values: the same math in another order. Where the model runs in bfloat16, the original rounds the
normalized row to bfloat16 before the product and this rounds the product before the scale, so results
differ at bfloat16's rounding (tests: 1e-2 against float32 eager, as the original; float32 1e-5). The
program passed in is not changed; a new ExportedProgram is returned when anything was rewritten.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram

from aotcuda.passes.emit import emit, replace_uses
from aotcuda.passes.program_copy import copied_graph_module, preserves_call_signatures, with_graph
from aotcuda.passes.result import PassResult

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.alias.default)


@dataclass(frozen=True)
class _Norm:
    """The parts of one RMSNorm's graph: hf (the float row), square (pow(hf, 2)), eps, the weight g (or
    None), whether g multiplies from the left, and the cast node from the float row to y's dtype (or None)."""

    hf: torch.fx.Node
    square: torch.fx.Node
    eps: float
    weight: torch.fx.Node | None
    weight_first: bool
    cast: torch.fx.Node | None


class FoldRMSNormIntoProductPass:
    """``pass(ep) → ep``: one-row products of an RMSNorm's output as scaled products of the unnormalized row
    (module docstring). A GraphPass (passes/result.py): ``result.counts`` has ``rewritten`` (products) and
    ``kept`` (one-row products of a normalization this pass does not read, e.g. a symbolic size)."""

    def __init__(self) -> None:
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        found = [mm.name for mm in ep.graph_module.graph.nodes if _one_row_product_of_norm(mm) is not None]
        if not found or preserves_call_signatures(ep):  # its module call graph names nodes this would remove
            self.result = PassResult(type(self).__name__, False, {"rewritten": 0})
            return ep
        graph_module = copied_graph_module(ep)
        signature = copy.deepcopy(ep.graph_signature)
        copied = {node.name: node for node in graph_module.graph.nodes}
        for name in found:
            mm = copied[name]
            _rewrite(graph_module.graph, mm, _one_row_product_of_norm(mm), signature)
        graph_module.graph.eliminate_dead_code()
        graph_module.graph.lint()
        graph_module.recompile()
        self.result = PassResult(type(self).__name__, True, {"rewritten": len(found)})
        return with_graph(ep, graph_module, graph_signature=signature)


def _is(node, *targets) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _static(node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and all(type(size) is int for size in value.shape)


def _one_row_product_of_norm(mm) -> _Norm | None:
    """The RMSNorm whose output (through views) is the left operand of ``mm``, a one-row product; else None."""
    if not _is(mm, aten.mm.default) or not all(_static(arg) for arg in mm.args[:2]) or not _static(mm):
        return None
    if mm.args[0].meta["val"].shape[0] != 1:
        return None
    y = mm.args[0]
    while _is(y, *_VIEWS) or _whole_slice(y):
        y = y.args[0]
    norm = _rms_norm(y)
    k = mm.args[0].meta["val"].shape[1]
    row = norm.hf.meta.get("val") if norm is not None else None
    # The norm's one row must be the product's whole row (a view may flatten several normalized rows into one).
    if not isinstance(row, torch.Tensor) or row.shape[-1] != k or row.numel() != k:
        return None
    return norm


def _whole_slice(node) -> bool:
    """A slice that keeps every element (transformers' ``hidden_states[:, -1:, :]`` of a one-token step)."""
    if not _is(node, aten.slice.Tensor) or not isinstance(node.args[0], torch.fx.Node):
        return False
    source, value = node.args[0].meta.get("val"), node.meta.get("val")
    return (isinstance(source, torch.Tensor) and isinstance(value, torch.Tensor)
            and tuple(source.shape) == tuple(value.shape) and all(type(size) is int for size in value.shape))


def _cast_only(node) -> bool:
    """A ``_to_copy`` that changes the dtype only: no memory format, a strided layout, the input's device
    (``type_as`` writes the last two out)."""
    if not _is(node, aten._to_copy.default) or len(node.args) != 1:
        return False
    if not set(node.kwargs) <= {"dtype", "layout", "device"}:
        return False
    source = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    device = node.kwargs.get("device")
    return (node.kwargs.get("layout") in (None, torch.strided) and isinstance(source, torch.Tensor)
            and (device is None or torch.device(device) == source.device))


# Moving the factor past a cast and the product keeps float32's range only for these: the unnormalized row
# (and the product) may be far larger or smaller than the normalized one, which float16 or an integer would not hold.
_WIDE = (torch.float32, torch.bfloat16, torch.float64)


def _rms_norm(y) -> _Norm | None:
    value = y.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype not in _WIDE:
        return None
    weight, weight_first, normalized = None, False, y
    if _is(y, aten.mul.Tensor) and all(isinstance(arg, torch.fx.Node) for arg in y.args):
        for index in (0, 1):
            row, other = y.args[1 - index], y.args[index]
            if _normalized_row(row) is not None and _is_weight(other, row):
                weight, weight_first, normalized = other, index == 0, row
                break
    parts = _normalized_row(normalized)
    if parts is None:
        return None
    hf, square, eps, cast = parts
    dtypes = [node.meta["val"].dtype for node in (hf, normalized) if isinstance(node.meta.get("val"), torch.Tensor)]
    if len(dtypes) != 2 or not all(dtype in _WIDE for dtype in dtypes):
        return None
    return _Norm(hf, square, eps, weight, weight_first, cast)


def _is_weight(node, row) -> bool:
    """A 1-d tensor of the row's last size (RMSNorm's g)."""
    value, row_value = node.meta.get("val"), row.meta.get("val")
    return (isinstance(value, torch.Tensor) and value.dim() == 1 and isinstance(row_value, torch.Tensor)
            and value.shape[0] == row_value.shape[-1])


def _normalized_row(node):
    """(hf, pow(hf, 2), eps, cast or None) when node is ``cast?(hf · rsqrt(mean(hf², -1, keepdim) + eps))``."""
    cast = None
    if _cast_only(node):
        cast, node = node, node.args[0]
    if not _is(node, aten.mul.Tensor):
        return None
    for hf, rsqrt in (node.args, node.args[::-1]):
        if not _is(rsqrt, aten.rsqrt.default) or not isinstance(hf, torch.fx.Node):
            continue
        add = rsqrt.args[0]
        if (not _is(add, aten.add.Tensor, aten.add.Scalar) or add.kwargs or len(add.args) != 2
                or isinstance(add.args[1], bool) or not isinstance(add.args[1], (int, float))):
            continue  # add's alpha scales eps: not this form
        mean = add.args[0]
        if not _is(mean, aten.mean.dim) or len(mean.args) < 3 or mean.args[2] is not True or mean.kwargs:
            continue
        square, dims = mean.args[0], mean.args[1]
        row = hf.meta.get("val")
        if not isinstance(row, torch.Tensor) or not isinstance(dims, (list, tuple)):
            continue
        if list(dims) not in ([-1], [row.dim() - 1]):
            continue
        if _is(square, aten.pow.Tensor_Scalar) and _same_value(square.args[0], hf) and square.args[1] == 2:
            return hf, square, float(add.args[1]), cast
    return None


def _same_value(a, b) -> bool:
    """a and b are one node, or the same cast of one node (``x.float()`` written twice)."""
    return a is b or (_cast_only(a) and _cast_only(b) and a.args[0] is b.args[0] and a.kwargs == b.kwargs)


def _rewrite(graph, mm, norm: _Norm, signature) -> None:
    """mm's uses read ``cast(mm(view(row · g), Wᵀ) · rsqrt(mean(expand(hf², [1, K, N]), 1) + eps))``."""
    weight_t = mm.args[1]
    k, n = weight_t.meta["val"].shape
    with graph.inserting_before(mm):
        row = norm.hf if norm.cast is None else emit(graph, aten._to_copy.default, (norm.hf,), dict(norm.cast.kwargs),
                                                      like=norm.cast)
        if norm.weight is not None:
            pair = (norm.weight, row) if norm.weight_first else (row, norm.weight)
            row = emit(graph, aten.mul.Tensor, pair, like=mm)
        left = emit(graph, aten.view.default, (row, [1, k]), like=mm)
        product = emit(graph, aten.mm.default, (left, weight_t), like=mm)
        square = emit(graph, aten.view.default, (norm.square, [1, k, 1]), like=mm)
        square = emit(graph, aten.expand.default, (square, [1, k, n]), like=mm)
        mean = emit(graph, aten.mean.dim, (square, [1]), like=mm)
        factor = emit(graph, aten.rsqrt.default, (emit(graph, aten.add.Tensor, (mean, norm.eps), like=mm),), like=mm)
        out_dtype = mm.meta["val"].dtype
        scaled = product
        if out_dtype != factor.meta["val"].dtype:
            scaled = emit(graph, aten._to_copy.default, (product,), {"dtype": factor.meta["val"].dtype}, like=mm)
        scaled = emit(graph, aten.mul.Tensor, (scaled, factor), like=mm)
        if out_dtype != scaled.meta["val"].dtype:
            scaled = emit(graph, aten._to_copy.default, (scaled,), {"dtype": out_dtype}, like=mm)
    replace_uses(mm, scaled, signature)
