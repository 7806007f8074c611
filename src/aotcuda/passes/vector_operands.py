"""StoreVectorOperandsPass: compute the vector of a matrix-vector product once, not once per output row.

With ``coordinate_descent_tuning`` (on for CUDA in lower()), Inductor writes a product whose left side
has one row (``mm(v [1, K], W [K, N])``, every linear layer of a decode step at batch 1) as
``(v[:, :, None] * W[None]).sum(1)``: one reduction kernel over K per block of outputs. A vector made by
pointwise ops is not stored first: its expression is inlined into that reduction, so each of the N
output rows recomputes all K elements of it. For a SwiGLU MLP's down projection, ``w2(silu(w1 x) * w3 x)``
at K = 8192, N = 2048, that is 2048 × 8192 sigmoids and the two float32 vectors read from L2 by every
program: on the H200 the kernel took 17 µs where its 32 MB of weight take 8 µs at copy speed
(benchmarks/NOTES.md, 2026-12-02).

This pass stores such a vector before the product: ``prims.inductor_force_stride_order(v, strides)``
(Inductor's own layout constraint, which makes it a buffer with those strides, i.e. the layout v has
anyway) on the last pointwise node of the vector's expression. It does so only where the inlined
expression is costly per element: it applies a transcendental function (sigmoid, exp, tanh, erf, ...)
to a tensor of the vector's size. On the decode step above, Inductor then computes the product in the
epilogue of the w1/w3 kernel (no extra kernel) and w2's kernel takes 9.4 µs. A vector that is a normalization of a stored tensor (RMSNorm's
``x · rsqrt(mean(x²)) · w``: one rsqrt per row, the rest multiplies) stays inlined, where it costs
nothing (the same kernel time with and without it, in the profile that found this).

Values are unchanged: the op only fixes a layout. The program passed in is not changed; a new
ExportedProgram is returned when anything was stored (sharing its weights). The op is Inductor's, for
inference programs: it has no autograd formula (the returned program's ``module()`` computes values, not
gradients), and ``torch.export.load`` of a saved program that holds it needs ``torch._inductor.inductor_prims``
(or ``aotcuda.lowering``) imported first, which registers it.

Not covered: a one-row ``bmm`` (Inductor decomposes those too), a vector reached through a transpose,
products inside control-flow subgraphs (``torch.cond``): none appears in the programs measured.
"""

from __future__ import annotations


import torch
from torch._inductor import inductor_prims  # registers prims.inductor_force_stride_order (torch 2.11-2.14)
from torch.export import ExportedProgram

from aotcuda.passes.program_copy import copied_graph_module, with_graph
from aotcuda.passes.result import PassResult

aten = torch.ops.aten
STORE = inductor_prims.force_stride_order  # prims.inductor_force_stride_order(input, stride) -> Tensor

# Ops whose output element is one input element's function, costly to recompute (a transcendental).
_COSTLY = {
    aten.silu.default, aten.sigmoid.default, aten.gelu.default, aten.tanh.default, aten.exp.default,
    aten.exp2.default, aten.expm1.default, aten.erf.default, aten.erfc.default, aten.log.default,
    aten.log1p.default, aten.log2.default, aten.sin.default, aten.cos.default, aten.elu.default,
    aten.softplus.default, aten.mish.default, aten.hardswish.default,
}
_VIEWS = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.unsqueeze.default,
          aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default}
# The elementwise ops and views the walk back from the vector goes through (the costly ones too).
_ELEMENTWISE = _COSTLY | _VIEWS | {
    aten.mul.Tensor, aten.mul.Scalar, aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar,
    aten.div.Tensor, aten.div.Scalar, aten.neg.default, aten._to_copy.default, aten.clone.default,
    aten.expand.default,
}


class StoreVectorOperandsPass:
    """``pass(ep) → ep``: store costly pointwise vectors of one-row matrix products (module docstring).

    A GraphPass (passes/result.py): ``result`` counts the vectors the last call stored."""

    def __init__(self) -> None:
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        names = [head.name for head in _vectors_to_store(ep.graph_module.graph)]
        if not names:
            self.result = PassResult(type(self).__name__, False, {"stored": 0})
            return ep
        graph_module = copied_graph_module(ep)
        copied = {node.name: node for node in graph_module.graph.nodes}
        for name in names:
            _store(graph_module.graph, copied[name])
        graph_module.graph.lint()
        graph_module.recompile()
        self.result = PassResult(type(self).__name__, True, {"stored": len(names)})
        return with_graph(ep, graph_module)


def _vectors_to_store(graph) -> list:
    """The last elementwise node of each costly vector operand of a one-row product, once each."""
    heads = {}
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not aten.mm.default:
            continue
        vector = _vector_operand(node)
        head = None if vector is None else _pointwise_head(vector)
        if head is not None and _static_layout(head) and _costly(head, _numel(head)):
            heads[head] = None
    return list(heads)


def _static_layout(node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and all(type(s) is int for s in (*value.shape, *value.stride()))


def _numel(node) -> int | None:
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    numel = value.numel()
    return numel if type(numel) is int else None  # a symbolic size: not a case this pass decides


def _vector_operand(mm):
    """The operand with one row or one column that Inductor's decomposition reduces against, or None."""
    left, right = mm.args[0], mm.args[1]
    left_val, right_val = left.meta.get("val"), right.meta.get("val")
    if not isinstance(left_val, torch.Tensor) or not isinstance(right_val, torch.Tensor):
        return None
    # Inductor decomposes only where the size is statically 1; a symbolic size (a SymInt) is left alone.
    if type(left_val.shape[0]) is int and left_val.shape[0] == 1:
        return left
    if type(right_val.shape[1]) is int and right_val.shape[1] == 1:
        return right
    return None


def _pointwise_head(vector):
    """The last non-view node of the vector's expression, when it is an elementwise op; else None."""
    node = vector
    while node.op == "call_function" and node.target in _VIEWS:
        node = node.args[0]
    if node.op != "call_function" or node.target not in _ELEMENTWISE:
        return None
    return node


def _costly(head, numel: int | None) -> bool:
    """Whether a transcendental is applied, within the elementwise expression ending at ``head``, to a
    tensor as large as the vector (not to a per-row statistic).

    The walk stops at a value with users besides the expression (a residual stream ``h`` that a norm and
    the next residual add both read): such a value is stored on its own, and what made it is not the
    vector's expression. So an RMSNorm's vector is not taken for costly because a tanh or a SwiGLU sits
    upstream, and the walk stays short in deep programs.
    """
    if numel is None:
        return False
    seen, stack = set(), [head]
    while stack:
        node = stack.pop()
        if node in seen or node.op != "call_function":
            continue
        seen.add(node)
        if node is not head and len(node.users) > 1:
            continue
        if node.target in _COSTLY and _numel(node) == numel:
            return True
        if node.target in _ELEMENTWISE:
            stack.extend(arg for arg in node.args if isinstance(arg, torch.fx.Node))
    return False


def _store(graph, head) -> None:
    value = head.meta["val"]
    with graph.inserting_after(head):
        stored = graph.call_function(STORE, (head, list(value.stride())))
    stored.meta = {**head.meta, "val": value}
    # The graph's outputs keep naming ``head``: the graph signature refers to outputs by node name.
    head.replace_all_uses_with(stored, delete_user_cb=lambda user: user is not stored and user.op != "output")
