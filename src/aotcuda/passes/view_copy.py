"""ReplaceViewCopyWithViewPass: turn ``*_copy`` view ops into the views they copy, where nobody can tell.

Programs written in a copy-op dialect (ExecuTorch's edge dialect, functionalized graphs, hand-written
``torch.ops.aten.slice_copy.Tensor`` calls) materialize every view as a new tensor. AOTInductor then
either emits a copy kernel for each or, for ops it has no lowering for, calls an ATen fallback kernel.
A view is free, and it is exactly as good as a copy unless somebody writes through it: so each copy op
becomes its view op unless the storage it would share is mutated anywhere in the program.

"Mutated" is decided per alias group (union-find over the view edges of the graph, counting each
candidate copy as a view): a group is mutated when an op writes one of its members (schema argument
with ``alias_info.is_write``: ``add_``, ``copy_``, ``index_put_``, ...), when its root is an input or
buffer the graph signature marks as mutated, or when one of its members is the new value of a mutated
input or buffer. This is conservative (two unrelated copies of one mutated base both stay copies) and
never wrong.

The table is built from names: ``aten.<name>_copy.<overload>`` → ``aten.<name>.<overload>`` for every
overload both packets have. The program passed in is not changed; a new ExportedProgram is returned.
"""

from __future__ import annotations

import logging
import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from aotcuda.passes.program_copy import copied_graph_module, with_graph
from aotcuda.passes.result import PassResult

log = logging.getLogger(__name__)

# Views whose copy twin exists in ATen; ``view_as_real``/``view_as_complex`` matter to the complex pass,
# which rewrites the views (not their copies) away.
_VIEW_NAMES = (
    "slice", "select", "view", "permute", "expand", "unsqueeze", "squeeze", "transpose", "t", "alias",
    "detach", "as_strided", "unbind", "split", "split_with_sizes", "diagonal", "narrow", "unfold",
    "view_as_real", "view_as_complex",
)


def _build_view_of_copy() -> dict[torch._ops.OpOverload, torch._ops.OpOverload]:
    table = {}
    for name in _VIEW_NAMES:
        copy_packet = getattr(torch.ops.aten, f"{name}_copy", None)
        view_packet = getattr(torch.ops.aten, name)
        if copy_packet is None:
            continue
        for overload in copy_packet.overloads():
            if overload.endswith("out") or overload not in view_packet.overloads():
                continue  # out= variants write a caller's buffer: they are not views of anything
            table[getattr(copy_packet, overload)] = getattr(view_packet, overload)
    return table


VIEW_OF_COPY = _build_view_of_copy()


class ReplaceViewCopyWithViewPass:
    """``ReplaceViewCopyWithViewPass()(ep) -> ep``: every ``*_copy`` view op whose alias group is never
    mutated becomes its view op (same args, same node name, same stack trace; meta["val"] recomputed
    with the view's strides). Returns a new ExportedProgram; ``ep`` is left as it was.

    A GraphPass (passes/result.py): ``result`` says what the last call did (changed when a copy became a
    view; counts replaced and kept). ``replaced`` and ``kept`` hold those nodes' names, for logs and tests.
    """

    def __init__(self) -> None:
        self.replaced: list[str] = []
        self.kept: list[str] = []
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        self.replaced, self.kept = [], []
        self.result = self._result()
        graph_module = copied_graph_module(ep)
        graph = graph_module.graph
        candidates = [n for n in graph.nodes if n.op == "call_function" and n.target in VIEW_OF_COPY]
        if not candidates:
            return ep
        mutated = _mutated_groups(graph, ep, set(candidates))
        converted = []
        for node in candidates:
            if mutated.find(node) in mutated.marked:
                self.kept.append(node.name)
                continue
            node.target = VIEW_OF_COPY[node.target]
            converted.append(node)
        for node in _revert_impossible_views(graph, converted):
            self.kept.append(node.name)
        self.replaced = [n.name for n in converted if n.target in VIEW_OF_COPY.values()]
        if self.kept:
            log.info("ReplaceViewCopyWithViewPass kept %d copies whose storage is mutated: %s",
                     len(self.kept), ", ".join(self.kept))
        graph.lint()
        graph_module.recompile()
        self.result = self._result()
        return with_graph(ep, graph_module)

    def _result(self) -> PassResult:
        return PassResult(type(self).__name__, changed=bool(self.replaced),
                          counts={"replaced": len(self.replaced), "kept": len(self.kept)})


class _AliasGroups:
    """Union-find over FX nodes; ``marked`` holds the roots of mutated groups (filled after unions)."""

    def __init__(self) -> None:
        self.parent: dict[torch.fx.Node, torch.fx.Node] = {}
        self.marked: set[torch.fx.Node] = set()

    def find(self, node: torch.fx.Node) -> torch.fx.Node:
        root = node
        while self.parent.get(root, root) is not root:
            root = self.parent[root]
        self.parent[node] = root
        return root

    def union(self, a: torch.fx.Node, b: torch.fx.Node) -> None:
        self.parent[self.find(a)] = self.find(b)

    def mark(self, node: torch.fx.Node) -> None:
        self.marked.add(self.find(node))


def _is_view(node: torch.fx.Node, candidates: set[torch.fx.Node]) -> bool:
    if node in candidates:
        return True
    if node.target is operator.getitem:  # an item of unbind/split output aliases what they viewed
        source = node.args[0]
        return isinstance(source, torch.fx.Node) and _is_view(source, candidates)
    return isinstance(node.target, torch._ops.OpOverload) and node.target.is_view


def _written_args(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The FX nodes an op writes to, from its schema's alias annotations (``Tensor(a!)``)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return []
    written = []
    for index, argument in enumerate(target._schema.arguments):
        if not (argument.alias_info and argument.alias_info.is_write):
            continue
        value = node.args[index] if index < len(node.args) else node.kwargs.get(argument.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        written += [v for v in values if isinstance(v, torch.fx.Node)]
    return written


def _mutated_groups(graph: torch.fx.Graph, ep: ExportedProgram, candidates: set[torch.fx.Node]) -> _AliasGroups:
    groups = _AliasGroups()
    for node in graph.nodes:
        if node.op == "call_function" and _is_view(node, candidates) and node.args:
            base = node.args[0]
            if isinstance(base, torch.fx.Node):
                groups.union(node, base)
    for node in graph.nodes:
        if node.op == "call_function":
            for written in _written_args(node):
                groups.mark(written)
    # Inputs and buffers the program writes back, and the values written back into them.
    mutation_kinds = {OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION}
    signature = ep.graph_signature
    written_back = {spec.target for spec in signature.output_specs if spec.kind in mutation_kinds}
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    for spec in signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if name in placeholders and (spec.target in written_back or name in written_back):
            groups.mark(placeholders[name])
    for spec, value in zip(signature.output_specs, graph.output_node().args[0]):
        if spec.kind in mutation_kinds and isinstance(value, torch.fx.Node):
            groups.mark(value)
    return groups


def _revert_impossible_views(graph: torch.fx.Graph, converted: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """A copy is contiguous; the view that replaces it may not be, and then a later ``view`` of it (or a
    ``view_copy`` turned into one) has no valid strides. Propagate fake values through the graph; where
    a view fails, turn the nearest converted copy above it back into a copy, and try again."""
    view_to_copy = {view: copy_op for copy_op, view in VIEW_OF_COPY.items()}
    reverted = []
    while True:
        failing = _first_failing_view(graph)
        culprit = _nearest_converted_ancestor(failing, set(converted) - set(reverted)) if failing else None
        if culprit is None:
            return reverted
        culprit.target = view_to_copy[culprit.target]
        reverted.append(culprit)


def _first_failing_view(graph: torch.fx.Graph) -> torch.fx.Node | None:
    """Recompute meta["val"] of every view in order (so each carries its own strides, which Inductor
    reads); return the first one whose fake value cannot be computed. Other ops keep their values:
    recomputing them could mint new unbacked symbols (nonzero, item) the program does not know."""
    fake_mode = torch._guards.detect_fake_mode(
        [n.meta["val"] for n in graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)])
    if fake_mode is None:
        return None
    for node in graph.nodes:
        is_view = isinstance(node.target, torch._ops.OpOverload) and node.target.is_view
        if node.op != "call_function" or not (is_view or node.target is operator.getitem):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
        try:
            with fake_mode:
                node.meta["val"] = node.target(*args, **kwargs)
        except Exception as exc:
            if is_view:
                log.debug("view %s has no valid strides after the rewrite: %s", node.name, exc)
                return node
    return None


def _nearest_converted_ancestor(node: torch.fx.Node, converted: set[torch.fx.Node]) -> torch.fx.Node | None:
    """Walk up the chain of views (first argument) from node to the nearest converted copy."""
    while isinstance(node, torch.fx.Node):
        if node in converted:
            return node
        if node.op != "call_function" or not node.args:
            return None
        is_view = isinstance(node.target, torch._ops.OpOverload) and node.target.is_view
        if not (is_view or node.target is operator.getitem):
            return None
        node = node.args[0]
    return None
