"""Whether a program keeps the rows of its batch dim apart, proved from its graph (batch_rows.py probes it by running).

Why: the probe sees only the mixes the example's values reach. ``torch.where(x.abs().amax() > 1e6,
x.sum(0, keepdim=True).expand_as(x), x)`` mixes rows only past a threshold no example reaches, and the probe recorded it
row-independent, so serving batched it: one client's large row would have been added into every other client's answer.
This walk follows, for each value of the ExportedProgram's graph, which of its dims carries the batch dim (the symbol
every input and output has at dim 0), through the ops it knows; an op that reduces, scans, sorts, flips, rolls, pads,
gathers or indexes across that dim, contracts it, computes with the batch size as a value, or meets inputs whose batch
dims lie at different dims "mixes", named with the model's line; an op it does not know leaves the program "not
proved" (the probe's record stands alone). It runs on the program Inductor is given (after the decompositions and
passes): that is what the package computes, the decompositions leave fewer ops to know, and the complex pass has made
complex math (RoPE's) real ops on pairs with a trailing dim of 2, which this walk follows as any other.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from aotcuda.errors import clipped
from aotcuda.lowering.batch_row_rules import batch_size_argument, keeps_row_numbers, rule_for
from aotcuda.lowering.batch_row_states import (FREE, SIZE, Args, Lost, Mixed, Mixes, NotKnown, Rows, free_symbols,
                                               mentions, size_of)
from aotcuda.lowering.batch_rows import RowsProbe
from aotcuda.lowering.fallbacks import relative_source_line
from aotcuda.package_format import ROWS_GRAPH_VERDICTS, ROWS_REASON_CHARACTERS

aten = torch.ops.aten
_NUMBERS = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)  # a value that is no tensor
KEPT_APART, MIXES, NOT_PROVED = ROWS_GRAPH_VERDICTS


@dataclass(frozen=True)
class RowFlow:
    """The walk's verdict: KEPT_APART (every output's row i is computed from the inputs' rows i alone, proved), MIXES
    or NOT_PROVED, with why (the op and the model's line) for the last two."""

    verdict: str
    reason: str | None = None


def row_flow(ep: ExportedProgram) -> RowFlow | None:
    """The verdict for ``ep``, None where its tensor inputs and outputs do not share one dynamic dim 0 (serving does not
    batch it: nothing to prove)."""
    symbol = _batch_symbol(ep)
    if symbol is None:
        return None
    states: dict[torch.fx.Node, object] = {}
    user_inputs = set(ep.graph_signature.user_inputs)
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            states[node] = Rows(0) if node.name in user_inputs and _has_dim(node, symbol) else FREE
        elif node.op == "call_function":
            states[node] = _state_of(node, states, symbol)
        elif node.op == "get_attr":
            states[node] = FREE
    return _verdict(ep, states)


def rows_record(probe: RowsProbe, flow: RowFlow | None) -> dict:
    """The signature's fields of the rows (package_format.py): ``rows_mixed`` true where the graph shows a mix or the
    probe saw one, else the probe's record; ``rows_not_probed`` where that record is null for a reason; the graph's
    verdict and its reason where it was walked."""
    mixed = True if flow is not None and flow.verdict == MIXES else probe.mixed
    record = {"rows_mixed": mixed}
    if mixed is None and probe.not_probed:
        record["rows_not_probed"] = clipped(probe.not_probed, ROWS_REASON_CHARACTERS - 40)
    if flow is not None:
        record["rows_graph"] = flow.verdict
        if flow.reason:
            record["rows_graph_reason"] = clipped(flow.reason, ROWS_REASON_CHARACTERS - 40)
    return record


def _verdict(ep: ExportedProgram, states: dict) -> RowFlow:
    lost = None
    for place, node in enumerate(_returned(ep)):
        state = states.get(node, FREE)
        if isinstance(state, Mixed):
            return RowFlow(MIXES, state.reason)
        if isinstance(state, Rows) and (state.dim, state.inner, state.outer, state.numbers) != (0, 1, 1, False):
            what = "numbers its rows" if state.numbers else f"holds the batch rows along dim {state.dim}"
            return RowFlow(MIXES, f"output {place} {what}, and serving splits a batch along dim 0 ({_line(node)})")
        if isinstance(state, Lost):
            lost = lost or state.reason
    return RowFlow(NOT_PROVED, lost) if lost else RowFlow(KEPT_APART)


def _state_of(node: torch.fx.Node, states: dict, symbol) -> object:
    """The state of a call_function node's value (a tuple of states for an op of several outputs)."""
    value = node.meta.get("val")
    if isinstance(value, _NUMBERS) \
            and not free_unbacked_symbols(value) and node.target is not aten._local_scalar_dense.default:
        # a size of the inputs' shapes (x.shape[0], a mixed tensor's dim 1): no row's value is in it
        return SIZE if symbol in free_symbols(value) else FREE
    inputs = [leaf for leaf in pytree.tree_leaves([states.get(n, FREE) for n in node.all_input_nodes])]
    mixed = next((state for state in inputs if isinstance(state, Mixed)), None)
    if mixed is not None:
        return mixed  # whatever follows a mix carries it
    if node.target is operator.getitem:
        source = states.get(node.args[0], FREE)
        return source[node.args[1]] if isinstance(source, tuple) else source
    lost = next((state for state in inputs if isinstance(state, Lost)), None)
    if value is None or isinstance(value, _NUMBERS):
        if node.target is aten._local_scalar_dense.default and any(isinstance(s, Rows) for s in inputs):
            return Mixed(f"{_name(node)} reads one number of a tensor of the batch rows ({_line(node)})")
        return lost or (SIZE if symbol in free_symbols(value) else FREE)
    if lost is not None:
        return lost
    if all(state == FREE for state in inputs) and not mentions(value, symbol):
        return FREE  # no row reaches it (weights prepared from parameters): any op will do
    if any(isinstance(s, Rows) and s.numbers for s in inputs) and not keeps_row_numbers(node):
        return Mixed(f"{_name(node)} computes with the row numbers (torch.arange of the batch size): a row's "
                      f"answer would depend on its place in the batch ({_line(node)})")
    rule = rule_for(node)
    if rule is None:
        return Lost(f"{_name(node)} is an op the row analysis does not know ({_line(node)})")
    try:
        args = Args(node, states)
        sized = batch_size_argument(node, args, symbol)
        if sized is not None:
            raise Mixes(f"computes with the batch size as a value (its {sized} is computed from x.shape[0]): a row's "
                        "answer would depend on how many rows share its batch")
        state = rule(node, args, symbol)
    except Mixes as exc:
        return Mixed(f"{_name(node)} {exc} ({_line(node)})")
    except NotKnown as exc:
        return Lost(f"{_name(node)} {exc} ({_line(node)})")
    except Exception as exc:  # noqa: BLE001 - a rule that cannot read the node proves nothing, and refuses nothing
        return Lost(f"{_name(node)}: the row analysis could not follow it ({type(exc).__name__}: {exc}; "
                     f"{_line(node)})")
    return _checked(state, value, symbol, node)


def _checked(state, value, symbol, node):
    """``state`` where the value's shape agrees with it (outer * the batch symbol * inner at a Rows' dim, nowhere in a
    free value's shape), else Lost: a rule's mistake stops the proof rather than making one. Mixed where another dim
    of a Rows value holds the batch symbol: a row's own size then depends on the count of rows."""
    if isinstance(state, tuple) or isinstance(value, (tuple, list)):
        values = value if isinstance(value, (tuple, list)) else ()
        if not isinstance(state, tuple) or len(state) != len(values):
            return Lost(f"{_name(node)}: its outputs are not the rows the analysis expected ({_line(node)})")
        return tuple(_checked(s, v, symbol, node) for s, v in zip(state, values))
    if not isinstance(value, torch.Tensor):
        return state
    if state == FREE and not mentions(value, symbol):
        return state
    if isinstance(state, Rows) and state.dim < value.dim() \
            and sympy.expand(size_of(value.shape[state.dim]) - state.outer * symbol * state.inner) == 0:
        sized = [dim for dim, size in enumerate(value.shape) if dim != state.dim and symbol in free_symbols(size)]
        if sized:  # x[:, :x.shape[0]]: each row's own size is the batch's count
            return Mixed(f"{_name(node)} gives each row a size computed from the batch size (dim {sized[0]}: "
                         f"{value.shape[sized[0]]}) ({_line(node)})")
        return state
    return Lost(f"{_name(node)}: its shape {list(value.shape)} is not where the analysis put the batch rows "
                 f"({_line(node)})")


def _returned(ep: ExportedProgram) -> list[torch.fx.Node]:
    """The nodes the program returns to its caller (its user outputs, not the state it writes), in order."""
    user_outputs = set(ep.graph_signature.user_outputs)
    output = next(node for node in ep.graph.nodes if node.op == "output")
    return [n for n in pytree.tree_leaves(output.args) if isinstance(n, torch.fx.Node) and n.name in user_outputs]


def _name(node) -> str:
    return str(node.target)


def _line(node) -> str:
    return relative_source_line(node) or f"node {node.name}"


def _has_dim(node, symbol) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dim() > 0 and sympy.expand(size_of(value.shape[0]) - symbol) == 0


def _batch_symbol(ep: ExportedProgram):
    """The one symbol every tensor input and output has as its dim 0 (serving's batch dim), else None."""
    user_inputs = set(ep.graph_signature.user_inputs)
    nodes = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user_inputs] + _returned(ep)
    firsts = set()
    for node in nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            if value.dim() == 0 or not isinstance(value.shape[0], torch.SymInt):
                return None
            firsts.add(value.shape[0].node.expr)
    if len(firsts) != 1:
        return None
    symbol = firsts.pop()
    return symbol if isinstance(symbol, sympy.Symbol) else None
