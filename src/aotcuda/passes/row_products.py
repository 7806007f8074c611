"""RowProductsPass: matrix products with a few rows on the left as one aotcuda::row_product call each.

A decode step multiplies a few rows (its tokens) by every weight of the model: ``mm(x [M, K], W [K, N])``
with M of 1 to 16. Such a product is bound by reading W, and Inductor's kernels for it reached 28% of
the copy's speed for the small projections of the H200 decode step and 55% for the LM head
(benchmarks/NOTES.md, 2026-12-02), where issue 29 asks 85%. The Triton op (kernels/row_product.py)
reads each weight element once for all the rows, with block sizes tuned for the shape at compile time.

What it rewrites, after lower()'s decompositions: ``mm(x, w)`` and ``addmm(bias [N], x, w)`` (beta and alpha
1) where x has a static number of rows at most ``max_rows``, w is [K, N] of static sizes with at least
``min_weight_elements`` elements, and x, w (and bias) share a floating dtype. Everything else is kept. The
op is opaque to Inductor: a pointwise prologue (an RMSNorm) or epilogue of the product is computed in
its own kernel, one more launch each; the measurement decides whether the pass is on (the switch
AOTCUDA_ROW_PRODUCTS, off by default).
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram

from aotcuda import switches
from aotcuda.passes.emit import emit, replace_uses
from aotcuda.passes.program_copy import copied_graph_module, with_graph
from aotcuda.passes.result import PassResult

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


class RowProductsPass:
    """``pass(ep) → ep``: few-row matrix products as aotcuda::row_product (module docstring).

    A GraphPass (passes/result.py): ``result.counts`` has ``rewritten`` and ``kept`` (products of the
    right form outside the limits: too many rows, a dynamic row count, a small weight)."""

    # The default limits (the switches AOTCUDA_ROW_PRODUCTS_MAX_ROWS and _MIN_WEIGHT, 4 and 1 << 23) from
    # benchmarks/row_products.py on the H200 (torch 2.11, bf16, 2026-12-03), with the kernel before its
    # split-K form: at one row the op read a weight of 16M elements or more 1.3-1.8x faster than Inductor's
    # kernel (LM head 34.4 vs 62.6 µs, w1/w3 18.3 vs 25.2, w2 11.5 vs 15.5), and tied or lost on 4M-6M
    # weights (wq 4.6 vs 4.0 µs); at eight rows Inductor tied it or won (w2 9.9 vs 12.4 µs). With the split-K
    # form (session 15, benchmarks/scripts/row_product_sweep.py, 8 rows) its best plans tied cuBLAS or lost
    # (w2 9.0 vs 9.8 µs, q/k/v 6.7 vs 5.3), and in the batch-8 decode step with products of 16M elements or
    # more rewritten the kernels it replaced took the same time (538.6 vs 540.9 µs a step): the pass stays
    # off (docs/performance.md). Arguments override the switches; 0 lifts a limit.
    def __init__(self, max_rows: int | None = None, min_weight_elements: int | None = None) -> None:
        self.max_rows = switches.number("AOTCUDA_ROW_PRODUCTS_MAX_ROWS") if max_rows is None else max_rows
        self.min_weight_elements = (switches.number("AOTCUDA_ROW_PRODUCTS_MIN_WEIGHT") if min_weight_elements is None
                                    else min_weight_elements)
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        import aotcuda.kernels.row_product  # noqa: F401 - registers the op

        graph_module = copied_graph_module(ep)
        graph = graph_module.graph
        products = [node for node in graph.nodes if _operands(node) is not None]
        wanted = [node for node in products if self._wanted(*_operands(node)[1:])]
        counts = {"rewritten": len(wanted), "kept": len(products) - len(wanted)}
        if not wanted:
            self.result = PassResult(type(self).__name__, False, counts)
            return ep
        signature = copy.deepcopy(ep.graph_signature)
        for node in wanted:
            bias, x, w = _operands(node)
            with graph.inserting_before(node):
                out = emit(graph, torch.ops.aotcuda.row_product.default, (x, w, bias), like=node)
            replace_uses(node, out, signature)
            graph.erase_node(node)
        graph.lint()
        graph_module.recompile()
        self.result = PassResult(type(self).__name__, True, counts)
        return with_graph(ep, graph_module, graph_signature=signature)

    def _wanted(self, x: torch.fx.Node, w: torch.fx.Node) -> bool:
        rows = x.meta["val"].shape[0]
        k, n = w.meta["val"].shape
        if not all(type(size) is int for size in (rows, k, n)):
            return False
        return (self.max_rows == 0 or rows <= self.max_rows) and k * n >= self.min_weight_elements


def _operands(node: torch.fx.Node):
    """(bias or None, x, w) of a product of the form the pass rewrites, else None."""
    if node.op != "call_function":
        return None
    if node.target is aten.mm.default:
        bias, (x, w) = None, node.args
    elif node.target is aten.addmm.default and node.kwargs.get("beta", 1) == 1 and node.kwargs.get("alpha", 1) == 1:
        bias, x, w = node.args[:3]
        if len(node.args) > 3 or not isinstance(bias, torch.fx.Node) or bias.meta["val"].dim() != 1:
            return None
    else:
        return None
    values = [t.meta.get("val") for t in (x, w, bias) if isinstance(t, torch.fx.Node)]
    if len(values) != (2 if bias is None else 3) or any(not isinstance(v, torch.Tensor) for v in values):
        return None
    if len({v.dtype for v in values}) != 1 or values[0].dtype not in _FLOATS or values[0].dim() != 2:
        return None
    return bias, x, w
