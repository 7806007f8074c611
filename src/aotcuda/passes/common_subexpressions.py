"""EliminateCommonSubexpressionsPass: a computation the graph writes several times is computed once.

A model written layer by layer repeats work that does not depend on the layer: our decoder's attention
builds its mask (``arange(max_seq_len) <= input_pos``, then ``where(visible, 0, -inf)``) in each of its 16
layers, and a transformers model may look up its rotary table per layer. torch.export keeps every copy,
and Inductor's AOT path does not merge them either: on the H200 the batch-1 decode step of
benchmarks/decode.py ran the same 2048-element mask kernel 16 times (0.9 µs each; the profile's
``--sequence`` listing, 2026-12-04). Here two nodes are one when they call the same pure op on the same
arguments (the same nodes, after earlier merges, and equal constants); the later one's uses read the first.
Measured on that step it merged 153 nodes but saved no kernel: Inductor inlines a pointwise producer into
each consumer's kernel, so the one mask is still computed inside every layer's RoPE kernel (200 kernels
either way; docs/performance.md, session 18). It stays off by default: it can save a kernel only where the
repeated computation is a reduction or a product, which Inductor does not inline.

Pure means ``Node.is_impure()`` is false (torch's own test: no mutable schema, no side effect, no random
op) and the op is not tagged ``nondeterministic_seeded`` (checked here again, for every torch the pin
admits). Only ``call_function`` nodes are merged: placeholders, parameters and constants are the program's
inputs; higher-order ops (``cond``, ``map``) are never merged, since their subgraphs may hold random ops that
``is_impure`` does not look into. A node the graph signature names (a user output, a buffer's or an input's
new value) is never merged either: two outputs would become one tensor (a write into one reaching the other,
or a buffer handed out as a result), and two buffers' new values one output. A graph with an op that writes
one of its arguments in place (an exported program is functional, so this is rare), or a program exported
with ``preserve_module_call_signature`` (its module call graph names the graph's nodes), is left as it is.
Values are unchanged.

The program passed in is not changed; a new ExportedProgram is returned when anything was merged (sharing
its weights: passes/program_copy.py).
"""

from __future__ import annotations

import math

import torch
from torch.export import ExportedProgram

from aotcuda.passes.program_copy import copied_graph_module, preserves_call_signatures, with_graph
from aotcuda.passes.result import PassResult


class Unhashable(Exception):
    """An argument with no value identity (e.g. a SymInt or NaN): its node is never merged."""


class EliminateCommonSubexpressionsPass:
    """``pass(ep) → ep``: one node per distinct pure computation (module docstring; off by default on CUDA:
    switches.py). A GraphPass (passes/result.py): ``result.counts`` has ``merged``, the nodes
    whose uses now read an earlier identical node."""

    def __init__(self) -> None:
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        graph = ep.graph_module.graph
        outputs = {spec.arg.name for spec in ep.graph_signature.output_specs if hasattr(spec.arg, "name")}
        writes = preserves_call_signatures(ep) or any(_writes_in_place(node) for node in graph.nodes)
        pairs = [] if writes else [(node.name, first.name) for node, first in _merges(graph, outputs)]
        if not pairs:
            self.result = PassResult(type(self).__name__, False, {"merged": 0})
            return ep
        graph_module = copied_graph_module(ep)
        copied = {node.name: node for node in graph_module.graph.nodes}
        for name, first in pairs:
            # No output names a merged node (_merges), so the graph signature stays as it is.
            copied[name].replace_all_uses_with(copied[first])
            graph_module.graph.erase_node(copied[name])
        graph_module.graph.lint()
        graph_module.recompile()
        self.result = PassResult(type(self).__name__, True, {"merged": len(pairs)})
        return with_graph(ep, graph_module)


def _merges(graph: torch.fx.Graph, outputs: set[str]):
    """(node, first) for each node that computes what an earlier node ``first`` computes, in graph order;
    a node's key reads its arguments through the merges before it, so chains of copies merge whole. Nodes
    named in ``outputs`` (the graph signature's) are neither merged nor merged into."""
    first_of: dict = {}
    merged_into: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in graph.nodes:
        if node.name in outputs or not _mergeable(node):
            continue
        try:
            key = (node.target, _key(node.args, merged_into), _key(node.kwargs, merged_into))
            hash(key)
        except Unhashable:
            continue
        if key in first_of:
            merged_into[node] = first_of[key]
            yield node, first_of[key]
        else:
            first_of[key] = node


def _writes_in_place(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return node.op == "call_function" and schema is not None and schema.is_mutable


def _mergeable(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or isinstance(node.target, torch._ops.HigherOrderOperator) or node.is_impure():
        return False
    tags = getattr(node.target, "tags", ())
    return torch.Tag.nondeterministic_seeded not in tags


def _key(value, merged_into: dict):
    """A hashable stand-in for an argument: a node by identity (the node it was merged into), containers
    by their items (type included: a list and a tuple of the same items are different arguments), other
    values by type and value. Raises Unhashable for values that equal nothing (NaN) or have no stable
    value (SymInt, SymFloat, tensors)."""
    if isinstance(value, torch.fx.Node):
        return merged_into.get(value, value)
    if isinstance(value, (list, tuple)):
        return type(value), tuple(_key(item, merged_into) for item in value)
    if isinstance(value, dict):
        return dict, tuple((name, _key(item, merged_into)) for name, item in value.items())
    if isinstance(value, slice):
        return slice, _key((value.start, value.stop, value.step), merged_into)
    if isinstance(value, float):
        if math.isnan(value):
            raise Unhashable
        return float, value.hex()  # 0.0 and -0.0 are different arguments
    if isinstance(value, complex):
        return complex, _key(value.real, merged_into), _key(value.imag, merged_into)
    if value is None or isinstance(value, (bool, int, str, torch.dtype, torch.device,
                                           torch.layout, torch.memory_format)):
        return type(value), value
    raise Unhashable
