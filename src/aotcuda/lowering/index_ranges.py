"""The values each integer input may hold where it reaches an index: the ``index_ranges`` of the signature.

Why: the generated code checks an indirect index itself (Inductor's ``assert_indirect_indexing``), but on the
CPU that check throws a C++ exception inside an OpenMP region, which ends the process (``terminate called
after throwing an instance of 'c10::Error'``), and on CUDA it is a device-side assert, after which the CUDA
context is unusable. So the lowering derives, for every integer input whose values reach an index, the range
eager would accept, and the runtime checks the input against it before the call
(``aotcuda.runtime.index_ranges``).

Two tables say it all:

- ``INDEXING``: op → which argument holds indices into which dim of which operand, and whether eager takes
  negative indices there (``x[i]`` does, ``embedding`` does not), one row per kind of indexing op.
- the value flow (``_flow``): ops through which an index keeps its input's values, up to ``scale * x +
  offset`` with a bounded offset: views, reshapes, expand, clone, integer casts, slices (a subset of the
  values), adding or subtracting a constant, a SymInt or a bounded tensor (``input_pos + arange(seq)``),
  negation, a product by an integer constant.

A range is recorded only where it is exact: a value is accepted iff eager accepts it, except that an index
read through a slice or select is checked over the whole input. Where an input meets a bounded tensor
element by element (``ids + offsets`` of the same shape), no range is recorded: a range on the input alone
would refuse calls eager accepts; the generated code's own check stays the only one there.

Bounds may depend on dynamic sizes (``gather`` along ``seq``): they are then expressions of the input size
symbols, written as the signature writes sizes, and evaluated at each call from the actual sizes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import sympy
import torch

from aotcuda.lowering.fallbacks import relative_source_line

aten = torch.ops.aten


# --- the indexing table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexUse:
    """One index argument of one op node: ``index`` holds indices into a dim of ``size`` (a sympy
    expression); eager takes ``[-size, size - 1]`` when ``negative``, else ``[0, size - 1]``."""

    index: torch.fx.Node
    size: sympy.Expr
    negative: bool
    what: str  # "dim 1 (size 7) of x", "128 rows of p_emb_weight", "6 classes"


def _size(node, dim: int | None = None):
    """A node's size along dim (its numel when dim is None), as a sympy expression; None if unknown."""
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor):
        return None
    if dim is None:
        return sympy.sympify(_expr(value.numel()))
    if value.dim() == 0:
        return None
    return sympy.sympify(_expr(value.shape[dim % value.dim()]))


def _expr(value):
    return value.node.expr if isinstance(value, torch.SymInt) else value


def _arg(node: torch.fx.Node, position: int, name: str, default=None):
    if len(node.args) > position:
        return node.args[position]
    return node.kwargs.get(name, default)


def _is_index(value) -> bool:
    return isinstance(value, torch.fx.Node) and isinstance(value.meta.get("val"), torch.Tensor) \
        and not value.meta["val"].is_floating_point() and value.meta["val"].dtype not in (torch.bool, torch.uint8)


@dataclass(frozen=True)
class Along:
    """``index`` (argument position, name) indexes one dim of ``operand``: a fixed one (``dim`` 0: embedding's
    rows), the one an argument gives (``dim`` (position, name): gather(x, dim, index)), or the flat elements
    (``dim`` None: take)."""

    index: tuple[int, str]
    operand: tuple[int, str]
    dim: int | tuple[int, str] | None = 0
    negative: bool = False

    def uses(self, node) -> list[IndexUse]:
        index, operand = _arg(node, *self.index), _arg(node, *self.operand)
        dim = _arg(node, *self.dim) if isinstance(self.dim, tuple) else self.dim
        size = _size(operand, dim) if dim is None or isinstance(dim, int) else None
        if not _is_index(index) or size is None:
            return []
        what = {0: f"{size} rows", None: f"the {size} elements"}.get(self.dim, f"dim {dim} (size {size})")
        return [IndexUse(index, size, self.negative, f"{what} of {operand.name}")]


@dataclass(frozen=True)
class EachDim:
    """A list of indices, the k-th into dim k of ``operand`` (None skips a dim, a bool mask takes as many
    dims as it has): x[i, :, j], index_put."""

    indices: tuple[int, str]
    operand: tuple[int, str]
    negative: bool = True

    def uses(self, node) -> list[IndexUse]:
        indices, operand = _arg(node, *self.indices) or [], _arg(node, *self.operand)
        found, dim = [], 0
        for index in indices:
            value = index.meta.get("val") if isinstance(index, torch.fx.Node) else None
            if isinstance(value, torch.Tensor) and value.dtype in (torch.bool, torch.uint8):
                dim += value.dim()
                continue
            size = _size(operand, dim)
            if _is_index(index) and size is not None:
                found.append(IndexUse(index, size, self.negative, f"dim {dim} (size {size}) of {operand.name}"))
            dim += 1
        return found


@dataclass(frozen=True)
class Classes:
    """``index`` holds class numbers below argument ``count``: one_hot(x, num_classes); -1 (count them
    from the values) bounds nothing."""

    index: tuple[int, str]
    count: tuple[int, str]

    def uses(self, node) -> list[IndexUse]:
        index, count = _arg(node, *self.index), _arg(node, *self.count, -1)
        if not _is_index(index) or not isinstance(count, (int, torch.SymInt)) or (isinstance(count, int) and count < 0):
            return []
        size = sympy.sympify(_expr(count))
        return [IndexUse(index, size, False, f"{size} classes")]


_SELF, _DIM, _INDEX = (0, "self"), (1, "dim"), (2, "index")
_ALONG_DIM = Along(_INDEX, _SELF, _DIM)  # op(self, dim, index, ...): index_select, gather, scatter, index_add, ...

# Every op whose integer argument indexes a tensor, by overload packet (all overloads alike). ``negative``
# follows eager, op by op (checked against eager by tests/lowering/test_index_ranges.py). Not here, on
# purpose: take_along_dim (eager wraps every value, its decomposition takes a remainder).
INDEXING: dict = {
    aten.embedding: Along((1, "indices"), (0, "weight")),
    aten.embedding_bag: Along((1, "indices"), (0, "weight")),
    aten._embedding_bag: Along((1, "indices"), (0, "weight")),
    aten._embedding_bag_forward_only: Along((1, "indices"), (0, "weight")),
    aten.index_select: _ALONG_DIM,
    aten.gather: _ALONG_DIM,
    aten.scatter: _ALONG_DIM,
    aten.scatter_: _ALONG_DIM,
    aten.scatter_add: _ALONG_DIM,
    aten.scatter_add_: _ALONG_DIM,
    aten.scatter_reduce: _ALONG_DIM,
    aten.scatter_reduce_: _ALONG_DIM,
    aten.index_add: _ALONG_DIM,
    aten.index_add_: _ALONG_DIM,
    aten.index_copy: _ALONG_DIM,
    aten.index_copy_: _ALONG_DIM,
    aten.index_reduce: _ALONG_DIM,
    aten.index_reduce_: _ALONG_DIM,
    aten.index_fill: Along(_INDEX, _SELF, _DIM, negative=True),
    aten.index_fill_: Along(_INDEX, _SELF, _DIM, negative=True),
    aten.index: EachDim((1, "indices"), _SELF),
    aten._unsafe_index: EachDim((1, "indices"), _SELF),
    aten.index_put: EachDim((1, "indices"), _SELF),
    aten.index_put_: EachDim((1, "indices"), _SELF),
    aten._unsafe_index_put: EachDim((1, "indices"), _SELF),
    aten._index_put_impl_: EachDim((1, "indices"), _SELF),
    aten.take: Along((1, "index"), _SELF, dim=None, negative=True),
    aten.one_hot: Classes((0, "self"), (1, "num_classes")),
}


# --- the value flow -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """A node's values: ``scale * x + c`` for x a value of user input ``input`` and c in ``[low, high]``.

    ``input`` None: a bounded value no input decides (``arange(seq)``: scale 0). ``exact``: every value of
    x meets every offset (a scalar offset, or one broadcast along other dims), so the constraint derived
    from it is exactly eager's. ``whole``: every value of the input reaches here (not after a slice).
    """

    input: str | None
    scale: int
    low: sympy.Expr
    high: sympy.Expr
    exact: bool = True
    whole: bool = True


_SAME_VALUES = {aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.expand,
                aten.expand_copy, aten.clone, aten.permute, aten.transpose, aten.t, aten.contiguous, aten.alias,
                aten.detach, aten.lift_fresh_copy, aten.flatten, aten.view_copy, aten.unsqueeze_copy,
                aten.squeeze_copy, aten.permute_copy, aten.transpose_copy, aten.t_copy, aten.alias_copy,
                aten.repeat, aten._to_copy, aten.to, aten.type_as, aten.movedim, aten.unflatten,
                torch.ops.prims.convert_element_type}
_SUBSET = {aten.slice, aten.select, aten.narrow, aten.slice_copy, aten.select_copy, aten.narrow_copy,
           aten.diagonal, aten.unfold, aten.index, aten.index_select, aten.gather}
_ADD = {aten.add, aten.add_}
_SUB = {aten.sub, aten.sub_}
_RSUB = {aten.rsub}
_NEG = {aten.neg}
_MUL = {aten.mul, aten.mul_}


def _packet(node: torch.fx.Node):
    target = node.target
    return target.overloadpacket if isinstance(target, torch._ops.OpOverload) else None


def _integer_tensor(node) -> bool:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(value, torch.Tensor) and not value.is_floating_point() and not value.is_complex() \
        and value.dtype != torch.bool


def _constant(value) -> sympy.Expr | None:
    """A Python int or SymInt argument as a sympy expression (None for anything else)."""
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
        return None
    return sympy.sympify(_expr(value))


def _operand(value, flows: dict) -> Flow | None:
    """The flow of an op's operand: a node's, or a constant offset."""
    if isinstance(value, torch.fx.Node):
        return flows.get(value)
    constant = _constant(value)
    return None if constant is None else Flow(None, 0, constant, constant)


def _shape(value) -> tuple:
    """The sizes as ints and sympy expressions (comparing a SymInt would add a guard to the shape env)."""
    if isinstance(value, torch.fx.Node) and isinstance(value.meta.get("val"), torch.Tensor):
        return tuple(_expr(size) for size in value.meta["val"].shape)
    return ()


def _broadcast_apart(a, b) -> bool:
    """Whether two operands broadcast along different dims only (every element of one meets every
    element of the other): no dim where both are other than 1."""
    shape_a, shape_b = _shape(a), _shape(b)
    width = max(len(shape_a), len(shape_b))
    shape_a, shape_b = (1,) * (width - len(shape_a)) + shape_a, (1,) * (width - len(shape_b)) + shape_b
    return all(size_a == 1 or size_b == 1 for size_a, size_b in zip(shape_a, shape_b))  # a symbol is not 1


def _scaled(flow: Flow, factor: int) -> Flow:
    low, high = flow.low * factor, flow.high * factor
    if factor < 0:
        low, high = high, low
    return Flow(flow.input, flow.scale * factor, low, high, flow.exact, flow.whole)


def _sum(a, b, flows: dict, sign: int = 1) -> Flow | None:
    """a + sign * b, when at most one of them depends on an input."""
    flow_a, flow_b = _operand(a, flows), _operand(b, flows)
    if flow_a is None or flow_b is None or (flow_a.input is not None and flow_b.input is not None):
        return None
    flow_b = _scaled(flow_b, sign)
    input_flow = flow_a if flow_a.input is not None else flow_b
    return Flow(input_flow.input, flow_a.scale + flow_b.scale, flow_a.low + flow_b.low, flow_a.high + flow_b.high,
                flow_a.exact and flow_b.exact and _broadcast_apart(a, b), flow_a.whole and flow_b.whole)


def _arange(node: torch.fx.Node) -> Flow | None:
    """arange's values: [start, start + step * (n - 1)] (reversed for a negative step)."""
    args = list(node.args)
    if node.target == aten.arange.default:
        start, step = 0, 1
    else:
        start, step = args[0], (args[2] if len(args) > 2 else node.kwargs.get("step", 1))
    start, step, count = _constant(start), _constant(step), _size(node, 0)
    if start is None or step is None or not step.is_Integer or count is None or not _integer_tensor(node):
        return None
    last = start + step * (count - 1)
    return Flow(None, 0, *((start, last) if step.is_nonnegative else (last, start)))


def _flow(node: torch.fx.Node, flows: dict) -> Flow | None:
    """The node's flow from its operands' (None: its values are not an input's, up to a bounded offset)."""
    packet = _packet(node)
    if packet is None or not _integer_tensor(node):
        return None
    args = node.args
    if packet is aten.arange:
        return _arange(node)
    if packet in (aten.scalar_tensor, aten.full) and _constant(args[-1]) is not None:
        value = _constant(args[-1])
        return Flow(None, 0, value, value)
    if packet in _SAME_VALUES or packet in _SUBSET:
        source = flows.get(args[0]) if args and isinstance(args[0], torch.fx.Node) else None
        if source is None:
            return None
        if packet in _SAME_VALUES:
            return source
        # A part of an input's values (checked over the whole input), or of a bounded value (whose range
        # may then be wider than the part's: not exact).
        return Flow(source.input, source.scale, source.low, source.high, source.exact and source.input is not None,
                    False)
    alpha = node.kwargs.get("alpha", 1)
    if packet in _ADD | _SUB | _RSUB and isinstance(alpha, int) and len(args) >= 2:
        if packet in _RSUB:
            return _sum(args[1], args[0], flows, -alpha)
        return _sum(args[0], args[1], flows, alpha if packet in _ADD else -alpha)
    if packet in _NEG:
        source = flows.get(args[0])
        return None if source is None else _scaled(source, -1)
    if packet in _MUL and len(args) == 2:
        for tensor, factor in ((args[0], args[1]), (args[1], args[0])):
            source = flows.get(tensor) if isinstance(tensor, torch.fx.Node) else None
            if source is not None and isinstance(factor, int) and not isinstance(factor, bool) and factor != 0:
                return _scaled(source, factor)
    return None


def _constant_values(ep) -> dict[str, torch.Tensor]:
    """The integer tensors the program holds and never writes (lifted constants, buffers), by placeholder."""
    signature = ep.graph_signature
    written = set(signature.buffers_to_mutate.values())
    state = {**ep.state_dict, **ep.constants}
    held = {**signature.inputs_to_buffers, **signature.inputs_to_lifted_tensor_constants}
    return {name: state[target] for name, target in held.items()
            if target not in written and isinstance(state.get(target), torch.Tensor) and state[target].numel()
            and not state[target].is_floating_point() and not state[target].is_complex()
            and state[target].dtype != torch.bool}


def _input_flows(ep, names: set[str]) -> dict:
    flows: dict = {}
    constants = _constant_values(ep)
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if node.name in names and _integer_tensor(node):
                flows[node] = Flow(node.name, 1, sympy.Integer(0), sympy.Integer(0))
            elif node.name in constants:
                low, high = (int(v) for v in constants[node.name].aminmax())
                flows[node] = Flow(None, 0, sympy.Integer(low), sympy.Integer(high))
        elif node.op == "call_function":
            try:
                flow = _flow(node, flows)
            except Exception:  # noqa: BLE001 - an argument form the flow does not know: its values are unknown
                flow = None
            if flow is not None:
                flows[node] = flow
    return flows


# --- the ranges ---------------------------------------------------------------------------------------


def _input_range(flow: Flow, use: IndexUse) -> tuple | None:
    """The range of the input's values that keeps ``scale * x + c`` in eager's range for every c."""
    low = -use.size if use.negative else sympy.Integer(0)
    high = use.size - 1
    scale = flow.scale
    if scale == 1:
        return low - flow.low, high - flow.high
    if scale == -1:
        return flow.high - high, flow.low - low
    bounds = [low - flow.low, high - flow.high]
    if not all(b.is_Integer for b in bounds):
        return None  # a symbolic bound over a scale: not written (the runtime evaluates plain expressions)
    lower, upper = (int(b) for b in bounds)
    if scale > 0:
        return sympy.Integer(-(-lower // scale)), sympy.Integer(upper // scale)
    return sympy.Integer(-(-upper // scale)), sympy.Integer(lower // scale)


def _bound(expr: sympy.Expr, symbols: set[str]):
    """A bound as the signature writes it: an int, {"expr": "s27 - 1"}, or None when a symbol in it is
    not an input size (an unbacked symbol): that side is then not checked."""
    expr = sympy.expand(expr)
    if expr.is_Integer:
        return int(expr)
    if not {str(s) for s in expr.free_symbols} <= symbols:
        return None
    return {"expr": str(expr)}


def _reason(node: torch.fx.Node, use: IndexUse, flow: Flow) -> str:
    op = node.target.name() if isinstance(node.target, torch._ops.OpOverload) else str(node.target)
    where = relative_source_line(node)
    through = "" if flow.whole else " (read through a slice: the whole input is checked)"
    return f"{op} over {use.what}{through}" + (f", at {where}" if where else "")


def input_size_symbols(ep) -> set[str]:
    """The shape symbols of the user inputs' sizes, which a call's sizes give values to."""
    symbols = set()
    for node in ep.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            for size in value.shape:
                if isinstance(size, torch.SymInt):
                    symbols |= {str(s) for s in size.node.expr.free_symbols}
    return symbols


def index_ranges(ep, input_names) -> dict[str, list[dict]]:
    """{user input name: [{"min": Bound, "max": Bound, "reason": str}, ...]}: for every integer input that
    reaches an index of the INDEXING table through the value flow, exactly (see the module docstring),
    the range eager accepts there. Bound: an int, {"expr": ...} of input size symbols, or None (unchecked)."""
    flows = _input_flows(ep, set(input_names))
    symbols = input_size_symbols(ep)
    ranges: dict[str, list[dict]] = {}
    for node in ep.graph.nodes:
        rule = INDEXING.get(_packet(node)) if node.op == "call_function" else None
        for use in _uses(rule, node):
            flow = flows.get(use.index)
            if flow is None or flow.input is None or not flow.exact:
                continue
            bounds = _input_range(flow, use)
            if bounds is None:
                continue
            entry = {"min": _bound(bounds[0], symbols), "max": _bound(bounds[1], symbols),
                     "reason": _reason(node, use, flow)}
            if entry["min"] is not None or entry["max"] is not None:
                _add_range(ranges.setdefault(flow.input, []), entry)
    return ranges


def _uses(rule, node) -> list[IndexUse]:
    """The node's index arguments; none, with a warning, where the rule cannot read them (a lowering must
    not fail for want of a check: the generated code's own check then stays the only one)."""
    if rule is None:
        return []
    try:
        return rule.uses(node)
    except Exception as exc:  # noqa: BLE001 - an argument form the table does not know
        warnings.warn(f"aotcuda: no index range derived for {node.format_node()}: {type(exc).__name__}: {exc}",
                      stacklevel=3)
        return []


def _add_range(entries: list[dict], entry: dict) -> None:
    """Add a range unless one with the same bounds is there (the same check: the first reason is kept)."""
    if not any(known["min"] == entry["min"] and known["max"] == entry["max"] for known in entries):
        entries.append(entry)


def exported_index_ranges(ep) -> dict[str, list[dict]]:
    """``index_ranges`` of every user input of ``ep`` (lower() reads them from the exported program)."""
    from aotcuda.passes.complex_to_real.boundary import user_input_names

    return index_ranges(ep, [name for name in user_input_names(ep.graph_signature) if name is not None])


def merge_ranges(*found: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The ranges of several programs of one model (before and after the decompositions), each once."""
    merged: dict[str, list[dict]] = {}
    for ranges in found:
        for name, entries in ranges.items():
            for entry in entries:
                _add_range(merged.setdefault(name, []), entry)
    return merged


