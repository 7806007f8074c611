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

import dataclasses
import operator
import sys
from dataclasses import dataclass

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from aotcuda.errors import clipped
from aotcuda.lowering.batch_rows import RowsProbe
from aotcuda.lowering.fallbacks import relative_source_line
from aotcuda.package_format import ROWS_GRAPH_VERDICTS, ROWS_REASON_CHARACTERS

aten = torch.ops.aten
KEPT_APART, MIXES, NOT_PROVED = ROWS_GRAPH_VERDICTS


@dataclass(frozen=True)
class RowFlow:
    """The walk's verdict: KEPT_APART (every output's row i is computed from the inputs' rows i alone, proved), MIXES
    or NOT_PROVED, with why (the op and the model's line) for the last two."""

    verdict: str
    reason: str | None = None


@dataclass(frozen=True)
class _Rows:
    """A tensor whose rows lie along ``dim``, that dim of size outer * batch * inner, its index o * batch * inner +
    row * inner + i: a view that merged the batch dim with the dims after it ([batch, 16, 256] -> [batch * 16, 256]:
    each row a block of inner = 16) or before it ([16, batch, 64] -> [16 * batch, 64]: outer = 16 blocks of all rows).
    ``numbers``: the row numbers themselves (torch.arange(x.shape[0])), row-local only as an index of the batch dim."""

    dim: int
    inner: object = 1
    outer: object = 1
    numbers: bool = False


@dataclass(frozen=True)
class _Lost:
    reason: str


@dataclass(frozen=True)
class _Mixed:
    reason: str


_FREE = "free"  # a value the rows do not reach: a parameter, a constant, a shape past dim 0
_SIZE = "batch size"  # a number computed from the batch size (x.shape[0], 16 * x.shape[0])


class _Mixes(Exception):
    """Raised by a rule: the op mixes rows; the message says how."""


class _NotKnown(Exception):
    """Raised by a rule: the op's use of the rows is one the walk cannot follow."""


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
            states[node] = _Rows(0) if node.name in user_inputs and _has_dim(node, symbol) else _FREE
        elif node.op == "call_function":
            states[node] = _state_of(node, states, symbol)
        elif node.op == "get_attr":
            states[node] = _FREE
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
    user_outputs = set(ep.graph_signature.user_outputs)
    output = next(node for node in ep.graph.nodes if node.op == "output")
    lost = None
    for place, node in enumerate(n for n in pytree.tree_leaves(output.args) if isinstance(n, torch.fx.Node)):
        if node.name not in user_outputs:
            continue
        state = states.get(node, _FREE)
        if isinstance(state, _Mixed):
            return RowFlow(MIXES, state.reason)
        if isinstance(state, _Rows) and (state.dim, state.inner, state.outer, state.numbers) != (0, 1, 1, False):
            what = "numbers its rows" if state.numbers else f"holds the batch rows along dim {state.dim}"
            return RowFlow(MIXES, f"output {place} {what}, and serving splits a batch along dim 0 ({_line(node)})")
        if isinstance(state, _Lost):
            lost = lost or state.reason
    return RowFlow(NOT_PROVED, lost) if lost else RowFlow(KEPT_APART)


def _state_of(node: torch.fx.Node, states: dict, symbol) -> object:
    """The state of a call_function node's value (a tuple of states for an op of several outputs)."""
    inputs = [leaf for leaf in pytree.tree_leaves([states.get(n, _FREE) for n in node.all_input_nodes])]
    mixed = next((state for state in inputs if isinstance(state, _Mixed)), None)
    if mixed is not None:
        return mixed  # whatever follows a mix carries it
    if node.target is operator.getitem:
        source = states.get(node.args[0], _FREE)
        return source[node.args[1]] if isinstance(source, tuple) else source
    value = node.meta.get("val")
    lost = next((state for state in inputs if isinstance(state, _Lost)), None)
    if value is None or isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        if node.target is aten._local_scalar_dense.default and any(isinstance(s, _Rows) for s in inputs):
            return _Mixed(f"{_name(node)} reads one number of a tensor of the batch rows ({_line(node)})")
        return lost or (_SIZE if symbol in _free_symbols(value) else _FREE)
    if lost is not None:
        return lost
    if all(state == _FREE for state in inputs) and not _mentions(value, symbol):
        return _FREE  # no row reaches it (weights prepared from parameters): any op will do
    if any(isinstance(s, _Rows) and s.numbers for s in inputs) and _packet(node) not in _NUMBERS_KEPT:
        return _Mixed(f"{_name(node)} computes with the row numbers (torch.arange of the batch size): a row's "
                      f"answer would depend on its place in the batch ({_line(node)})")
    rule = _pointwise if _is_pointwise(node) else _RULES.get(_packet(node))  # max.other is pointwise, max.dim not
    if rule is None:
        return _Lost(f"{_name(node)} is an op the row analysis does not know ({_line(node)})")
    try:
        state = rule(node, _Args(node, states), symbol)
    except _Mixes as exc:
        return _Mixed(f"{_name(node)} {exc} ({_line(node)})")
    except _NotKnown as exc:
        return _Lost(f"{_name(node)} {exc} ({_line(node)})")
    except Exception as exc:  # noqa: BLE001 - a rule that cannot read the node proves nothing, and refuses nothing
        return _Lost(f"{_name(node)}: the row analysis could not follow it ({type(exc).__name__}: {exc}; "
                     f"{_line(node)})")
    return _checked(state, value, symbol, node)


def _checked(state, value, symbol, node):
    """``state`` where the value's shape agrees with it (the batch symbol times ``inner`` at a _Rows' dim, nowhere in a
    free value's shape), else _Lost: a rule's mistake stops the proof rather than making one."""
    if isinstance(state, tuple) or isinstance(value, (tuple, list)):
        values = value if isinstance(value, (tuple, list)) else ()
        if not isinstance(state, tuple) or len(state) != len(values):
            return _Lost(f"{_name(node)}: its outputs are not the rows the analysis expected ({_line(node)})")
        return tuple(_checked(s, v, symbol, node) for s, v in zip(state, values))
    if not isinstance(value, torch.Tensor):
        return state
    if state == _FREE and not _mentions(value, symbol):
        return state
    if isinstance(state, _Rows) and state.dim < value.dim() \
            and sympy.expand(_size(value.shape[state.dim]) - state.outer * symbol * state.inner) == 0:
        return state
    return _Lost(f"{_name(node)}: its shape {list(value.shape)} is not where the analysis put the batch rows "
                 f"({_line(node)})")


class _Args:
    """A node's arguments by their schema names, and their states."""

    def __init__(self, node: torch.fx.Node, states: dict):
        self.node, self.states = node, states
        schema = node.target._schema
        self.values = {}
        for index, argument in enumerate(schema.arguments):
            if index < len(node.args) and not argument.kwarg_only:
                self.values[argument.name] = node.args[index]
            elif argument.name in node.kwargs:
                self.values[argument.name] = node.kwargs[argument.name]
            elif argument.has_default_value():
                self.values[argument.name] = argument.default_value
        self.names = [argument.name for argument in schema.arguments]

    def __getitem__(self, name):
        return self.values.get(name)

    def state(self, name):
        value = self.values.get(name)
        return self.states.get(value, _FREE) if isinstance(value, torch.fx.Node) else _FREE

    def rank(self, name) -> int:
        return self.values[name].meta["val"].dim()

    def shape(self, name) -> list:
        return [_size(size) for size in self.values[name].meta["val"].shape]


def _rows(state) -> bool:
    return isinstance(state, _Rows)


def _dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def _dims(dims, rank: int) -> list[int]:
    """A dim argument as a list of dims in [0, rank); None or [] is every dim (a full reduction)."""
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))
    return [_dim(d, rank) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]


# --- the rules: (node, args, symbol) -> state; raise _Mixes or _NotKnown -------------------------------------------

def _pointwise(node, args: _Args, symbol):
    """Elementwise ops broadcast their tensors from the right: every tensor of the rows must put them at one dim of the
    result; a number of the batch size among the operands (x * x.shape[0]) makes the count a value."""
    rank = node.meta["val"].dim()
    places = set()
    for name in args.names:
        for leaf in pytree.tree_leaves(args[name]):
            if not isinstance(leaf, torch.fx.Node):
                continue
            state = args.states.get(leaf, _FREE)
            if state == _SIZE:
                raise _Mixes("computes with the batch size as a value (x * x.shape[0]): a row's answer would "
                             "depend on how many rows share its batch")
            if _rows(state):
                places.add((rank - leaf.meta["val"].dim() + state.dim, state.inner, state.outer))
    return _one_place(places)


def _one_place(places: set) -> object:
    if not places:
        return _FREE
    if len({place[0] for place in places}) > 1:
        raise _Mixes(f"meets inputs whose batch rows lie at different dims ({sorted({p[0] for p in places})}): every "
                     "row meets every other row")
    if len(places) > 1:
        raise _NotKnown("meets inputs whose rows are laid out otherwise along one dim (blocks of other sizes)")
    dim, inner, outer = places.pop()
    return _Rows(dim, inner, outer)


def _reshaped(node, args: _Args, symbol):
    """A view of another shape keeps the order of the elements: where the input's elements before a row's first are
    O * batch * I apart (O the elements of the dims before the batch dim times its outer, I its inner times the dims
    after it), the result's rows lie at the dim whose prefix of dims divides O and whose dims up to it hold a multiple
    of O * batch: that dim's outer and inner follow."""
    state = args.state("self")
    if not _rows(state):
        return _created(node, args, symbol)
    before, after = args.shape("self"), [_size(s) for s in node.meta["val"].shape]
    outer = sympy.Mul(*before[:state.dim]) * state.outer
    prefix = sympy.Integer(1)
    for dim, size in enumerate(after):
        new_outer, new_inner = _whole(outer / prefix, symbol), _whole(prefix * size / (outer * symbol), symbol)
        if new_outer is not None and new_inner is not None:
            return dataclasses.replace(state, dim=dim, inner=new_inner, outer=new_outer)
        prefix = prefix * size
    raise _NotKnown(f"reshapes {before} to {after} in a way the analysis cannot follow the rows through")


def _permuted(node, args: _Args, symbol):
    state, rank = args.state("self"), args.rank("self")
    if not _rows(state):
        return _FREE
    if _packet(node) == aten.permute:
        order = [_dim(d, rank) for d in args["dims"]]
    else:  # transpose, t
        a, b = (_dim(args["dim0"], rank), _dim(args["dim1"], rank)) if _packet(node) == aten.transpose else (0, 1)
        order = list(range(rank))
        order[a], order[b] = order[b], order[a]
    return dataclasses.replace(state, dim=order.index(state.dim))


def _expanded(node, args: _Args, symbol):
    state = args.state("self")
    if not _rows(state):
        return _created(node, args, symbol)  # a free value broadcast to the batch size: rows alike
    return dataclasses.replace(state, dim=state.dim + node.meta["val"].dim() - args.rank("self"))


def _same(node, args: _Args, symbol):
    """Ops that keep their input's layout (a copy, a dtype, an alias)."""
    return args.state("self")


def _created(node, args: _Args, symbol):
    """A new tensor: its values are constants or draws, alike for every row, unless a number of the batch size is one
    of them (torch.full((2,), x.shape[0]), torch.arange(x.shape[0])); where its shape holds the batch size, that dim is
    its rows (ones(x.shape[0]).sum() counts them)."""
    value = node.meta["val"]
    for name in ("fill_value", "start", "end", "step", "s", "value"):
        if args.state(name) == _SIZE:
            if _packet(node) == aten.arange and _is_row_numbers(args, symbol):
                return _Rows(0, numbers=True)
            raise _Mixes("makes the batch size a value of a tensor (torch.arange(x.shape[0]), a fill of len(x)): a "
                         "row's answer would depend on how many rows share its batch")
    dims = [dim for dim, size in enumerate(value.shape) if symbol in _free_symbols(size)]
    if not dims:
        return _FREE
    if len(dims) == 1 and _inner(_size(value.shape[dims[0]]), symbol) is not None:
        return _Rows(dims[0], _inner(_size(value.shape[dims[0]]), symbol))
    raise _NotKnown(f"makes a tensor of shape {list(value.shape)} from the batch size")


def _is_row_numbers(args: _Args, symbol) -> bool:
    start, end, step = args["start"], args["end"], args["step"]
    numbers = [start if start is not None else 0, end, step if step is not None else 1]
    sizes = [_size(n.meta["val"]) if isinstance(n, torch.fx.Node) else n for n in numbers]
    return sizes[0] == 0 and sizes[2] == 1 and sympy.expand(sympy.sympify(sizes[1]) - symbol) == 0


def _along(dims_of):
    """Ops that compute along some dims (reductions, scans, sorts, softmax, flip, roll): mixing where the batch dim is
    one of them; a reduction without keepdim drops them."""
    def rule(node, args: _Args, symbol):
        state, rank = args.state("self"), args.rank("self")
        if not _rows(state):
            return _FREE if not _mentions(node.meta["val"], symbol) else _created(node, args, symbol)
        dims = dims_of(args, rank)
        if state.dim in dims:
            raise _Mixes(f"computes along the batch dim (dim {state.dim}): every row's answer reads the other rows")
        out_rank = node.meta["val"][0].dim() if isinstance(node.meta["val"], (tuple, list)) else node.meta["val"].dim()
        dim = state.dim - sum(1 for d in dims if d < state.dim) if out_rank < rank else state.dim
        result = dataclasses.replace(state, dim=dim)
        values = node.meta["val"]
        return tuple(result for _ in values) if isinstance(values, (tuple, list)) else result
    return rule


def _named_dims(args: _Args, rank: int) -> list[int]:
    for name in ("dim", "dims"):
        if name in args.values:
            return _dims(args[name], rank)
    return list(range(rank))  # sum.default, amax of no dims: every dim


def _last_dims(count_of):
    return lambda args, rank: list(range(rank - count_of(args), rank))


def _padded(node, args: _Args, symbol):
    state, rank, pad = args.state("self"), args.rank("self"), args["pad"]
    if not _rows(state):
        return _FREE
    for index in range(0, len(pad), 2):  # pairs from the last dim
        if rank - 1 - index // 2 == state.dim and (pad[index] != 0 or pad[index + 1] != 0):
            raise _Mixes("pads the batch dim: the rows move to other places")
    return state


def _sliced(node, args: _Args, symbol):
    state, rank = args.state("self"), args.rank("self")
    if not _rows(state):
        return _FREE
    if _dim(args["dim"], rank) != state.dim:
        return state
    start, end, step = args["start"], args["end"], args["step"]
    whole = (start in (None, 0) and step == 1 and (end is None or (isinstance(end, int) and end >= sys.maxsize // 2)
                                                   or (isinstance(end, torch.fx.Node) and sympy.expand(
                                                       _size(end.meta["val"]) - args.shape("self")[state.dim]) == 0)))
    if whole:
        return state
    raise _Mixes("takes some rows of the batch dim (x[start:end]): a row's answer would be another row's")


def _selected(node, args: _Args, symbol):
    state, rank = args.state("self"), args.rank("self")
    if not _rows(state):
        return _FREE
    dim = _dim(args["dim"], rank)
    if dim == state.dim:
        raise _Mixes("picks one row of the batch dim (x[i]): every row's answer would read that row")
    return dataclasses.replace(state, dim=state.dim - (dim < state.dim))


def _concatenated(node, args: _Args, symbol):
    tensors = args["tensors"]
    out_rank = node.meta["val"].dim()
    dim = _dim(args["dim"], out_rank)
    places = set()
    for tensor in tensors:
        state = args.states.get(tensor, _FREE)
        if _rows(state):
            place = state.dim + (1 if _packet(node) == aten.stack and state.dim >= dim else 0)
            if _packet(node) == aten.cat and place == dim:
                raise _Mixes("joins tensors along the batch dim: rows move to other places")
            places.add((place, state.inner, state.outer))
    return _one_place(places)


def _split(node, args: _Args, symbol):
    state, rank = args.state("self"), args.rank("self")
    count = len(node.meta["val"])
    if not _rows(state):
        return tuple(_FREE for _ in range(count))
    dim = _dim(args["dim"], rank)
    if dim == state.dim:
        raise _Mixes("splits the batch dim into pieces: each piece holds some rows")
    kept = state if _packet(node) != aten.unbind else dataclasses.replace(state, dim=state.dim - (dim < state.dim))
    return tuple(kept for _ in range(count))


def _products(node, args: _Args, symbol):
    """mm, addmm, bmm, baddbmm: a batch dim that is a dim of the result (rows of the left, columns of the right, the
    shared leading dim of bmm) is kept; one that is contracted mixes."""
    packet = _packet(node)
    left, right = ("mat1", "mat2") if packet == aten.addmm else ("batch1", "batch2") if packet == aten.baddbmm \
        else ("self", "mat2")
    batched = packet in (aten.bmm, aten.baddbmm)
    out_of_left, out_of_right = ({0: 0, 1: 1} if batched else {0: 0}), ({0: 0, 2: 2} if batched else {1: 1})
    places = set()
    for name, out in ((left, out_of_left), (right, out_of_right)):
        state = args.state(name)
        if _rows(state):
            if state.dim not in out:
                raise _Mixes("contracts the batch dim (a product over the rows): every row's answer sums over the "
                             "other rows")
            places.add((out[state.dim], state.inner, state.outer))
    bias = "self" if packet in (aten.addmm, aten.baddbmm) else None
    if bias is not None and _rows(args.state(bias)):
        state = args.state(bias)
        places.add((node.meta["val"].dim() - args.rank(bias) + state.dim, state.inner, state.outer))
    return _one_place(places)


def _convolved(node, args: _Args, symbol):
    state = args.state("input")
    if any(_rows(args.state(name)) for name in ("weight", "bias")):
        raise _NotKnown("convolves with a weight computed from the rows")
    if not _rows(state):
        return _FREE
    if state.dim != 0:
        raise _Mixes(f"convolves across the batch dim (dim {state.dim}): a row's answer reads its neighbours")
    return state


def _pooled(node, args: _Args, symbol):
    state = args.state("self" if "self" in args.values else "input")  # upsample_nearest2d.vec names it input
    if _rows(state) and state.dim >= 2:
        raise _Mixes(f"pools across the batch dim (dim {state.dim})")
    count = len(node.meta["val"]) if isinstance(node.meta["val"], (tuple, list)) else 0
    return tuple(state for _ in range(count)) if count else state


def _attended(node, args: _Args, symbol):
    """Attention over [..., L, E] queries and [..., S, E] keys: the leading dims are separate problems; a batch dim
    among the queries' positions or the keys' mixes (each query reads every key)."""
    places = set()
    for name in ("query", "key", "value", "attn_mask"):
        state = args.state(name)
        if _rows(state):
            rank = args.rank(name)
            if state.dim >= rank - 2:
                raise _Mixes(f"attends across the batch dim ({name}'s dim {state.dim}): each row reads the others")
            places.add((node.meta["val"][0].dim() - rank + state.dim if isinstance(node.meta["val"], (tuple, list))
                        else node.meta["val"].dim() - rank + state.dim, state.inner, state.outer))
    first = _one_place(places)
    values = node.meta["val"]
    if not isinstance(values, (tuple, list)):
        return first
    return tuple(first if index == 0 else _by_shape(value, first, symbol) for index, value in enumerate(values))


def _by_shape(value, state, symbol):
    """An extra output of an op (attention's logsumexp, a seed): its rows where its shape has the batch size at that
    dim, free where it has none."""
    if not isinstance(value, torch.Tensor) or not _mentions(value, symbol):
        return _FREE
    return state if _rows(state) else _Lost("an extra output of the batch size")


def _normalized(node, args: _Args, symbol):
    """layer norm normalizes the last dims, group norm each sample (dim 0), batch norm without training each channel."""
    packet, state = _packet(node), args.state("input")
    if any(_rows(args.state(name)) for name in ("weight", "bias", "running_mean", "running_var")):
        raise _NotKnown("normalizes with a weight computed from the rows")
    if not _rows(state):
        return tuple(_FREE for _ in node.meta["val"])
    rank = args.rank("input")
    if packet in (aten.native_layer_norm, aten._fused_rms_norm) and state.dim >= rank - len(args["normalized_shape"]):
        raise _Mixes(f"normalizes across the batch dim (dim {state.dim})")
    if packet == aten.native_group_norm and state.dim != 0:
        raise _Mixes(f"normalizes across the batch dim (dim {state.dim})")
    if packet == aten._native_batch_norm_legit and state.dim != 1:
        raise _Mixes("normalizes with statistics over the batch (batch norm in training mode)")
    return tuple(_by_shape(value, state, symbol) for value in node.meta["val"])


def _embedded(node, args: _Args, symbol):
    if _rows(args.state("weight")):
        raise _NotKnown("looks up a table computed from the rows")
    return args.state("indices")


def _indexed(node, args: _Args, symbol):
    """x[i, j]: a free table indexed by tensors of the rows keeps them where the index puts them (an embedding); a
    tensor of the rows indexed at other dims by free tensors keeps its rows; an index at the batch dim mixes, but for
    the row numbers themselves (x[torch.arange(len(x)), last], each row picking from its own)."""
    self_state, rank = args.state("self"), args.rank("self")
    indices = list(args["indices"])
    indexed = [dim for dim, index in enumerate(indices) if index is not None]
    states = {dim: args.states.get(indices[dim], _FREE) for dim in indexed}
    if _rows(self_state) and self_state.numbers:
        raise _Mixes("indexes the row numbers: a row's answer would depend on its place in the batch")
    if any(indices[dim].meta["val"].dtype in (torch.bool, torch.uint8) for dim in indexed):
        if _rows(self_state) or any(_rows(state) for state in states.values()):
            raise _Mixes("selects elements by a mask: the result's length is the batch's count of true values")
        return _FREE
    width = max(indices[dim].meta["val"].dim() for dim in indexed)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    front = indexed[0] if adjacent else 0  # where torch puts the index's dims in the result
    places = set()
    for dim in indexed:
        state = states[dim]
        if _rows(state):
            if state.numbers and not (_rows(self_state) and dim == self_state.dim):
                raise _Mixes("indexes with the row numbers at a dim that is not the batch dim")
            places.add((front + width - indices[dim].meta["val"].dim() + state.dim, state.inner, state.outer))
    if _rows(self_state):
        dim = self_state.dim
        if dim in indexed:
            if not (_rows(states[dim]) and states[dim].numbers and (self_state.inner, self_state.outer) == (1, 1)):
                raise _Mixes("indexes across the batch dim (x[ids]): a row's answer reads the rows its index names")
        else:
            kept = [d for d in range(rank) if d not in indexed]
            place = (dim if dim < front else dim - len(indexed) + width) if adjacent else width + kept.index(dim)
            places.add((place, self_state.inner, self_state.outer))
    return _one_place(places)


def _gathered(node, args: _Args, symbol):
    self_state, index_state, rank = args.state("self"), args.state("index"), args.rank("self")
    dim = _dim(args["dim"], rank)
    for state in (self_state, index_state):
        if _rows(state) and state.dim == dim:
            raise _Mixes("gathers along the batch dim: a row's answer reads the rows its index names")
    if _rows(self_state) and not (_rows(index_state) and index_state.dim == self_state.dim):
        raise _Mixes("gathers rows of the batch by an index without them: a row's answer reads other rows")
    return _one_place({(s.dim, s.inner, s.outer) for s in (self_state, index_state) if _rows(s)})


def _scattered(node, args: _Args, symbol):
    states = [args.state(name) for name in ("self", "index", "src") if name in args.values]
    dim = _dim(args["dim"], args.rank("self"))
    if any(_rows(s) and s.dim == dim for s in states):
        raise _Mixes("writes along the batch dim at indices: a row's values land in other rows")
    if not _rows(args.state("self")) and any(_rows(s) for s in states):
        raise _Mixes("writes the rows' values into a tensor without the batch dim")
    return _one_place({(s.dim, s.inner, s.outer) for s in states if _rows(s)})


def _put(node, args: _Args, symbol):
    """index_put: writing free values at free indices of other dims keeps the rows; a mask of the rows over the batch
    dim and the dims after it (x[mask] = 0) too; any other write at the batch dim or of the rows into a free tensor
    mixes."""
    self_state, values_state = args.state("self"), args.state("values")
    indices = [index for index in args["indices"]]
    index_states = [args.states.get(index, _FREE) if index is not None else _FREE for index in indices]
    if not _rows(self_state):
        if _rows(values_state) or any(_rows(s) for s in index_states):
            raise _Mixes("writes the rows' values into a tensor without the batch dim")
        return _FREE
    indexed = [dim for dim, index in enumerate(indices) if index is not None]
    if self_state.dim in indexed:
        mask = indices[0] if len(indices) == 1 else None
        if mask is not None and mask.meta["val"].dtype == torch.bool and _rows(index_states[0]) \
                and dataclasses.replace(index_states[0], numbers=False) == self_state and values_state == _FREE:
            return self_state  # x[mask] = value: each row's mask picks its own elements
        raise _Mixes("writes at indices of the batch dim: a row's values land in other rows")
    if any(_rows(s) for s in index_states) or _rows(values_state):
        raise _NotKnown("writes values or indices of the rows at other dims")
    return self_state


def _counted(node, args: _Args, symbol):
    raise _Mixes("lists the nonzero elements of every row together: the result's length is the batch's count")


# ops whose arguments are all followed through _pointwise's broadcast (no pointwise tag, or named for clarity)
_POINTWISE = (aten.copy, aten.fill, aten.masked_fill)
_SAME = (aten.alias, aten.clone, aten.contiguous, aten.detach, aten.view_as_real, aten.view_as_complex, aten._to_copy,
         aten.lift_fresh_copy)
# ops a tensor of row numbers may pass through unmixed: views and copies, and the index it is meant for
_NUMBERS_KEPT = {aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.expand, aten.permute,
                 aten._to_copy, aten.clone, aten.alias, aten.index, aten._unsafe_index}
_RULES = {
    **{packet: _reshaped for packet in (aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze)},
    **{packet: _permuted for packet in (aten.permute, aten.transpose, aten.t)},
    aten.expand: _expanded,
    **{packet: _same for packet in _SAME},
    **{packet: _pointwise for packet in _POINTWISE},
    **{packet: _created for packet in (aten.full, aten.zeros, aten.ones, aten.empty, aten.empty_strided, aten.rand,
                                       aten.randn, aten.scalar_tensor, aten.arange, aten.new_zeros, aten.new_ones,
                                       aten.new_empty, aten.new_full, aten.full_like, aten.zeros_like, aten.ones_like,
                                       aten.empty_like, aten.rand_like, aten.randn_like, aten.randint_like)},
    **{packet: _along(_named_dims) for packet in (
        aten.sum, aten.mean, aten.amax, aten.amin, aten.max, aten.min, aten.argmax, aten.argmin, aten.prod, aten.any,
        aten.all, aten.var, aten.var_mean, aten.std, aten.std_mean, aten.logsumexp, aten.linalg_vector_norm,
        aten.cumsum, aten.cumprod, aten.logcumsumexp, aten.cummax, aten.cummin, aten._softmax, aten._log_softmax,
        aten.softmax, aten.log_softmax, aten.sort, aten.argsort, aten.topk, aten.kthvalue, aten.median, aten.mode,
        aten.flip, aten.nanmedian)},
    aten.roll: _along(lambda args, rank: _dims(args["dims"], rank)),  # no dims: the flattened tensor rolls
    aten.tril: _along(lambda args, rank: [rank - 2, rank - 1]),
    aten.triu: _along(lambda args, rank: [rank - 2, rank - 1]),
    aten.unfold: _along(lambda args, rank: [_dim(args["dimension"], rank)]),
    aten.constant_pad_nd: _padded,
    aten.slice: _sliced,
    aten.select: _selected,
    aten.cat: _concatenated,
    aten.stack: _concatenated,
    **{packet: _split for packet in (aten.split, aten.split_with_sizes, aten.unbind, aten.chunk)},
    **{packet: _products for packet in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm)},
    aten.convolution: _convolved,
    **{packet: _pooled for packet in (aten.max_pool2d_with_indices, aten.avg_pool2d, aten._adaptive_avg_pool2d,
                                      aten.max_pool1d, aten.avg_pool1d, aten.upsample_nearest2d,
                                      aten.adaptive_max_pool2d, aten.upsample_bilinear2d)},
    **{packet: _attended for packet in (aten.scaled_dot_product_attention, aten._scaled_dot_product_flash_attention,
                                        aten._scaled_dot_product_flash_attention_for_cpu,
                                        aten._scaled_dot_product_efficient_attention,
                                        aten._scaled_dot_product_cudnn_attention)},
    **{packet: _normalized for packet in (aten.native_layer_norm, aten._fused_rms_norm, aten.native_group_norm,
                                          aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit)},
    aten.embedding: _embedded,
    aten.index: _indexed,
    aten._unsafe_index: _indexed,
    aten.gather: _gathered,
    **{packet: _scattered for packet in (aten.scatter, aten.scatter_add, aten.scatter_reduce)},
    aten.index_put: _put,
    aten._unsafe_index_put: _put,
    aten.index_select: lambda node, args, symbol: _selected_by_index(node, args),
    aten.nonzero: _counted,
    aten.native_dropout: lambda node, args, symbol: (args.state("input"), args.state("input")),
}


def _selected_by_index(node, args: _Args):
    self_state, index_state, rank = args.state("self"), args.state("index"), args.rank("self")
    dim = _dim(args["dim"], rank)
    if _rows(self_state) and self_state.dim == dim:
        raise _Mixes("selects rows of the batch dim by an index: a row's answer reads the rows its index names")
    if _rows(self_state) and _rows(index_state):
        raise _NotKnown("selects with an index of the rows at another dim")
    if _rows(index_state):
        return _Rows(dim)
    return self_state


# --- helpers ---------------------------------------------------------------------------------------------------------

def _packet(node):
    return getattr(node.target, "overloadpacket", None)


def _is_pointwise(node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and torch.Tag.pointwise in node.target.tags


def _name(node) -> str:
    return str(node.target)


def _line(node) -> str:
    return relative_source_line(node) or f"node {node.name}"


def _size(size):
    if isinstance(size, (torch.SymInt, torch.SymFloat)):
        return size.node.expr
    return sympy.sympify(size)


def _inner(size, symbol):
    """g where a dim's size is the batch size times g, else None."""
    return _whole(size / symbol, symbol)


def _whole(ratio, symbol):
    """``ratio`` where it is a whole product of sizes (no fraction left, no batch symbol), else None."""
    ratio = sympy.cancel(ratio)
    if symbol in ratio.free_symbols or sympy.fraction(sympy.together(ratio))[1] != 1:
        return None
    return ratio


def _free_symbols(value) -> set:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.expr.free_symbols
    return set()


def _mentions(value, symbol) -> bool:
    """Whether a tensor's (or tensors') shape holds the batch symbol."""
    return any(symbol in _free_symbols(size) for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)
               for size in leaf.shape)


def _has_dim(node, symbol) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dim() > 0 and sympy.expand(_size(value.shape[0]) - symbol) == 0


def _batch_symbol(ep: ExportedProgram):
    """The one symbol every tensor input and output has as its dim 0 (serving's batch dim), else None."""
    user_inputs, user_outputs = set(ep.graph_signature.user_inputs), set(ep.graph_signature.user_outputs)
    output = next(node for node in ep.graph.nodes if node.op == "output")
    nodes = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    nodes += [n for n in pytree.tree_leaves(output.args) if isinstance(n, torch.fx.Node) and n.name in user_outputs]
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
