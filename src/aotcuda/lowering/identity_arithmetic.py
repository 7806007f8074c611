"""Inductor's removal of ``x * 1``, ``x + 0``, ``x - 0``, ``x / 1`` kept where it would change the layout
(a row of aotcuda.lowering.torch_fixes, entered around the compile step).

torch 2.14 extended Inductor's joint-graph pass ``remove_no_ops`` (torch/_inductor/fx_passes/joint_graph.py,
pytorch/pytorch#166552) from identities with a tensor of zeros/ones to identities with a Python scalar. It
replaces the node by its operand when shape, dtype and device agree, without comparing strides or storage
offset, and then copies the node's metadata onto the operand (``replacement.meta.update(node.meta)``). Where
the operand is a view at another layout, the graph is left with a view that claims the removed node's
layout. Inside a ``torch.cond`` branch this is fatal: Inductor's fake-tensor propagation recomputes the view
and cond's ``_merge_output`` (torch/_higher_order_ops/cond.py) refuses branches whose outputs differ in
storage offset: ``InductorError: RuntimeError: When merging two branches' output in torch.cond, expected same
storage_offset but got 0 and 1``. The complex pass writes ``(z * z).imag * 1.0`` as ``select(pair, -1, 1) * 1.0``,
a view at offset 1, so tests/passes/complex_to_real/test_control_flow.py's cond failed to compile on torch 2.14.1
and 2.15.0; a real-valued cond (``(p * p)[..., 1] * 1.0``) fails the same way with plain torch.export and
``aoti_compile_and_package``.

``identity_arithmetic_keeps_layout`` wraps ``remove_no_ops`` for one compile: before it runs, every
add/sub/mul/div whose result has a tensor operand of the same shape and dtype at another layout is noted; after
it runs, each such node the pass removed is put back (the same op on the same operands, its own metadata), its
operand gets its own metadata back, and the uses the pass moved to the operand go to the restored node. These
are the nodes torch 2.13 kept (it removed no identity with a scalar operand); every other removal stands.
Entered only where a probe (a one-node graph: ``select(x, 1, 1) * 1.0``) shows the installed pass removing a
node whose layout differs from its operand's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

aten = torch.ops.aten
_IDENTITY_CANDIDATES = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor)


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.layout != torch.strided or b.layout != torch.strided) or (
        statically_known_true(sym_eq(a.stride(), b.stride()))
        and statically_known_true(sym_eq(a.storage_offset(), b.storage_offset())))


def _layout_changing_operands(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The tensor operands of ``node`` that removing it as an identity would substitute at another layout."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return []
    found = []
    for operand in node.args:
        other = operand.meta.get("val") if isinstance(operand, torch.fx.Node) else None
        if (isinstance(other, torch.Tensor) and other.dtype == value.dtype
                and statically_known_true(sym_eq(other.shape, value.shape)) and not _same_layout(other, value)):
            found.append(operand)
    return found


@dataclass
class _Kept:
    node: torch.fx.Node
    args: tuple
    kwargs: dict
    meta: dict
    operands: dict  # operand node -> (its meta, its users) before the pass


def _note(graph: torch.fx.Graph) -> list[_Kept]:
    kept = []
    for target in _IDENTITY_CANDIDATES:
        for node in graph.find_nodes(op="call_function", target=target):
            operands = _layout_changing_operands(node)
            if operands:
                kept.append(_Kept(node, node.args, dict(node.kwargs), dict(node.meta),
                                  {o: (dict(o.meta), set(o.users)) for o in operands}))
    return kept


def _restore(graph: torch.fx.Graph, kept: _Kept) -> None:
    """Put back ``kept.node``, which the pass replaced by one of its operands: the one whose metadata it
    overwrote (with this node's, or, along a chain such as ``x * 1 * 1``, a later node's)."""
    for operand, (meta, users_before) in kept.operands.items():
        if operand.meta.get("val") is meta.get("val"):
            continue
        operand.meta.clear()
        operand.meta.update(meta)
        with graph.inserting_after(operand):
            restored = graph.call_function(kept.node.target, kept.args, kept.kwargs)
        restored.meta.update(kept.meta)
        for user in [u for u in operand.users if u not in users_before and u is not restored]:
            user.replace_input_with(operand, restored)
        return


def _keeping_layout(remove_no_ops):
    @functools.wraps(remove_no_ops)
    def wrapper(gm: torch.fx.GraphModule, *args, **kwargs):
        kept = _note(gm.graph)
        result = remove_no_ops(gm, *args, **kwargs)
        for entry in kept:
            if getattr(entry.node, "_erased", False):
                _restore(gm.graph, entry)
        return result

    return wrapper


def _probe_graph() -> torch.fx.GraphModule:
    """``select(x, 1, 1) * 1.0`` with real tensors as metadata: the select is a view at offset 1, stride 2."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    view = graph.call_function(aten.select.int, (x, 1, 1))
    product = graph.call_function(aten.mul.Tensor, (view, 1.0))
    graph.output((product,))
    base = torch.zeros(4, 2)
    x.meta["val"], view.meta["val"] = base, base.select(1, 1)
    product.meta["val"] = base.select(1, 1) * 1.0
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@functools.cache
def removes_layout_changing_identities() -> bool:
    """Whether the installed Inductor's remove_no_ops drops ``view * 1.0`` though the view's layout differs
    (torch 2.14, 2.15); once per process."""
    from torch._inductor.fx_passes import joint_graph

    remove_no_ops = getattr(joint_graph, "remove_no_ops", None)
    if remove_no_ops is None:
        return False
    gm = _probe_graph()
    remove_no_ops(gm, set(), set())
    return not gm.graph.find_nodes(op="call_function", target=aten.mul.Tensor)


@contextlib.contextmanager
def identity_arithmetic_keeps_layout() -> Iterator[None]:
    """For one compile, Inductor's remove_no_ops keeps the identities whose removal changes the layout (see
    the module doc); a no-op where the installed pass keeps them itself."""
    from torch._inductor.fx_passes import joint_graph

    if not removes_layout_changing_identities():
        yield
        return
    original = joint_graph.__dict__["remove_no_ops"]
    joint_graph.remove_no_ops = _keeping_layout(original)
    try:
        yield
    finally:
        joint_graph.remove_no_ops = original
