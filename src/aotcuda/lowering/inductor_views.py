"""What Inductor does with an ``aten.view`` of the program before it lowers anything, read on the ExportedProgram.

Why: every op on a complex tensor is a fallback kernel (Inductor generates no code for complex values), and the
fallback-kernel checks name those from the program's nodes (``fallbacks.complex_value_nodes``, and before the
compile ``known_fallbacks.complex_fallback_kernels``). A view is not lowered as written: Inductor first drops a view
to the shape its operand already has (``remove_noop_ops`` of the joint graph, ``fx_passes/post_grad.py``), then
turns every other ``aten.view`` into ``aten.reshape`` (``compile_fx``'s ``view_to_reshape``, "unconditionally").
A complex ``F.bilinear`` (``aten._trilinear``, which has no rule) showed both (fix39, torch 2.13): its views of the
inputs, ``view(z, [-1, 4])``, run as ``aoti_torch_cpu_reshape``, which the check before the compile did not name,
and its view of the result to the shape it has is called by no code, yet was listed after the compile as
``aten.view.default on complex values``. torch 2.11 has both passes alike.

``remove_noop_ops`` drops more than views (fix40a): a ``clone`` or ``alias``, a ``slice`` over a whole dim, a
``slice_scatter`` of a whole tensor, a ``repeat`` by ones, a pad by zeros, a one-tensor ``cat``... (its
``noop_registry``), each where the result has its operand's size, strides, dtype and device (``same_meta``) and
dropping it would not make an output share an input's or another output's memory. A complex ``z.clone()``,
``aten.alias(z)`` or ``z[0:n]`` of a program the pass refused was listed after the compile as ``aten.clone.default
on complex values`` (and the slice before it as ``aoti_torch_cpu_slice_Tensor``), though no code calls them.
``dropped_nodes`` runs Inductor's own pass on a copy of the graph: the pass changes the graph as it goes (each node it
drops has its uses given to its operand first), so whether a later node is dropped depends on what was dropped before
it (review40a: in ``clone(clone(z))`` returned, with ``z`` made of an input, the first clone goes and then the second,
whose operand is now the input's, stays: an output may not share an input's memory; reading each node on the
original graph dropped both, and the check before the compile missed the ``aten::clone`` proxy-executor kernel). Where
the pass cannot be imported or raises, each node is asked Inductor's registry and conditions on the original graph
(``_inductor_noop_rules``; a torch without them gets the view rule above alone).
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

aten = torch.ops.aten


def as_inductor_lowers(node: torch.fx.Node, dropped: set[torch.fx.Node] | None = None):
    """The op Inductor lowers for ``node``: None for a no-op it drops (``dropped``: ``dropped_nodes`` of its graph,
    read here when not given), ``aten.reshape.default`` for any other ``aten.view.default``, else the node's op."""
    if node in (dropped if dropped is not None else dropped_nodes(node.graph)):
        return None
    return aten.reshape.default if node.target is aten.view.default else node.target


def dropped_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The nodes of ``graph`` that Inductor's ``remove_noop_ops`` drops before it lowers anything (module doc): the
    pass itself, run on a copy of ``graph``, where this torch has it and it runs; else each node read on ``graph``."""
    dropped = _dropped_by_inductors_pass(graph)
    return dropped if dropped is not None else _dropped_node_by_node(graph)


def _dropped_by_inductors_pass(graph: torch.fx.Graph) -> set[torch.fx.Node] | None:
    """The nodes of ``graph`` whose copies Inductor's ``remove_noop_ops`` erases from a copy of ``graph`` (the copy's
    nodes carry the originals' meta, so the pass reads the same fake values, ``meta['val']``), or None where this
    torch has no such pass or it raises on this graph. A copy, because the pass rewires and erases in place."""
    try:
        from torch._inductor.fx_passes.post_grad import remove_noop_ops
    except ImportError:
        return None
    try:
        copy_, copies = torch.fx.Graph(), {}
        copy_.output(copy_.graph_copy(graph, copies))
        remove_noop_ops(copy_)
    except Exception:  # noqa: BLE001 - a pass of torch's internals that refuses this graph: read node by node instead
        return None
    kept = set(copy_.nodes)
    return {node for node, copied in copies.items() if copied not in kept}


def _dropped_node_by_node(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The fallback of ``dropped_nodes``: Inductor's own rule for each op (``noop_registry``), on the nodes' fake
    values, and its own conditions (``same_meta``; no new sharing of memory between an output and an input or
    another output), each node read on the original graph (so a node whose operand the pass would have dropped first
    is read against that operand, not the one it would have then). A node it cannot read stays."""
    rules = _inductor_noop_rules()
    if rules is None:  # a torch without them: views alone, by aotcuda's reading of the rule
        return {node for node in graph.nodes if dropped_view(node)}
    registry, same_meta, fake_args_kwargs, storage_of = rules
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    output = next(iter(reversed(graph.nodes)), None)
    outputs = output.args[0] if output is not None and output.op == "output" and output.args else ()
    outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
    input_storages = {storage_of(node) for node in placeholders}
    output_storages = {storage_of(node) for node in outputs if isinstance(node, torch.fx.Node)}
    dropped = set()
    for node in graph.nodes:
        rule = registry.get(node.target) if node.op == "call_function" else None
        if rule is None:
            continue
        try:
            condition, source_at = rule
            source = node.args[source_at] if isinstance(source_at, int) else source_at(node.args)
            if not isinstance(source, torch.fx.Node):
                continue
            if node.target is aten.copy.default and getattr(node.args[0], "kwargs", {}).get("pin_memory") is True:
                continue
            node_storage, source_storage = storage_of(node), storage_of(source)
            is_view = node_storage == source_storage
            if not is_view and node_storage in output_storages and (source_storage in input_storages
                                                                   or source_storage in output_storages):
                continue  # dropping it would make an output share an input's (or another output's) memory
            if is_view and node in output.args and (source in placeholders or source in output.args):
                continue  # torch's own exception (never true of a top-level graph's tuple of outputs: review39a)
            readable, args, kwargs = fake_args_kwargs(node)
            if readable and same_meta(node, source) and condition(*args, **kwargs):
                dropped.add(node)
        except Exception:  # noqa: BLE001 - a prediction: what Inductor's rule cannot read on these values stays listed
            continue
    return dropped


def _inductor_noop_rules():
    """(Inductor's ``noop_registry``, ``same_meta``, ``get_fake_args_kwargs``, ``get_node_storage``): the rules of
    ``remove_noop_ops`` (torch/_inductor/fx_passes/post_grad.py, torch 2.11-2.13), or None where this torch keeps
    them elsewhere."""
    try:
        from torch._inductor.fx_passes.post_grad import noop_registry, same_meta
        from torch._inductor.fx_utils import get_fake_args_kwargs, get_node_storage
    except ImportError:
        return None
    if not isinstance(noop_registry, dict):
        return None
    return noop_registry, same_meta, get_fake_args_kwargs, get_node_storage


def dropped_view(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an ``aten.view.default`` that Inductor's ``remove_noop_ops`` drops: its size is, as
    written (a dim of a dynamic size is its symbol: the node's fake value, as ``get_fake_args_kwargs`` reads it), the
    shape its operand has, with the same strides, dtype, device and lazy bits (``same_meta``). torch's exception for
    a view that would make an output its input (``node in output_node.args``) compares the node with the output node's
    one argument, the tuple of outputs, so it keeps none of a top-level graph's views: neither does this (review39a:
    an output ``y.view(2, 3)`` of a complex ``y`` was listed, and no code called it). Anything it cannot read (a size
    without a fake value) is not dropped."""
    if node.target is not aten.view.default or len(node.args) < 2 or not isinstance(node.args[0], torch.fx.Node):
        return False
    source, size = node.args[0], node.args[1]
    before, after = source.meta.get("val"), node.meta.get("val")
    if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)
            and isinstance(size, (list, tuple)) and len(size) == before.ndim):
        return False
    size = [dim.meta.get("val") if isinstance(dim, torch.fx.Node) else dim for dim in size]
    if not all(isinstance(dim, (int, torch.SymInt)) for dim in size):
        return False
    try:
        return (statically_known_true(sym_eq(tuple(before.shape), tuple(size)))
                and statically_known_true(sym_eq(tuple(after.shape), tuple(before.shape)))
                and statically_known_true(sym_eq(after.stride(), before.stride()))
                and (after.dtype, after.device, after.layout) == (before.dtype, before.device, before.layout)
                and (after.is_conj(), after.is_neg()) == (before.is_conj(), before.is_neg()))
    except Exception:  # noqa: BLE001 - a prediction: a comparison torch's symbols refuse keeps the view listed
        return False
