"""The values each integer input may hold where it reaches an index: the ``index_ranges`` of the signature.

Why: the generated code checks an indirect index itself (Inductor's ``assert_indirect_indexing``), but on the
CPU that check throws a C++ exception inside an OpenMP region, which ends the process (``terminate called
after throwing an instance of 'c10::Error'``), and on CUDA it is a device-side assert, after which the CUDA
context is unusable. So the lowering derives, for every integer input whose values reach an index, the range
eager would accept, and the runtime checks the input against it before the call
(``aotcuda.runtime.index_ranges``).

Two tables say it all:

- ``INDEXING`` (lowering/index_ops.py): op → which argument holds indices into which dim of which operand, and whether eager takes
  negative indices there (``x[i]`` does, ``embedding`` does not), one row per kind of indexing op.
- the value flow (``_flow``): ops through which an index keeps its input's values, up to ``scale * x +
  offset`` with a bounded offset: views, reshapes, expand, clone, integer casts, slices (a subset of the
  values), adding or subtracting a constant, a SymInt or a bounded tensor (``input_pos + arange(seq)``),
  negation, a product by an integer constant, ``x + x``, a bounded value floor-divided by a positive constant (a
  MoE's ``argsort(...) // top_k``: the token of each slot); concatenation (each input of ``cat`` keeps its
  own flow), flip, roll, sort's values (a permutation), topk/max/min/kthvalue values (a subset); and, only
  just before the index (through views and subsets), ``clamp`` and ``abs``, whose preimage of eager's range
  is one interval (``abs`` only where eager's range holds 0).

Bounded whatever the input holds (``_bounded``): ``clamp`` to two constant bounds, ``remainder`` by a constant,
``argmax``/``argmin``/``argsort``, the indices of ``topk``, ``sort``, ``max(dim)``, ``kthvalue`` and the like (a MoE router's
experts), ``nonzero`` (a detection head's kept boxes). The inputs reaching such an op are absorbed (``Flow.absorbed``): where its bound is within
eager's range at the index, for every size the program takes, they need no check at all
(``(mask.cumsum(-1) - 1).clamp(0, 31)`` into a 32-row table); where it is not, they are unchecked.

Never silent: an input whose values reach an index through an op the flow does not follow (or follows
inexactly) gets no range, a UserWarning at lowering, and an ``index_unchecked`` line in the signature
(``unchecked_inputs``): its values are not checked before the call.

A range is recorded only where it is exact: a value is accepted iff eager accepts it. An index read through
selects and slices of constant bounds taken of the input as it is laid out (``idx[0]``, ``idx[1, :, 2:]``) is
checked over that part only (the entry's ``"part"``, ``Flow.part``); through any other subset (a slice after a
permute, a gather, a slice of a dynamic bound) the whole input is checked, and a refusal says so.
Where an input meets a bounded tensor element by element (``ids + offsets`` of the same shape), no range is
recorded: a range on the input alone would refuse calls eager accepts; the generated code's own check stays the
only one there.

Bounds may depend on dynamic sizes (``gather`` along ``seq``): they are then expressions of the input size
symbols, written as the signature writes sizes, and evaluated at each call from the actual sizes.
"""

from __future__ import annotations

import operator
import warnings
from dataclasses import dataclass, replace

import sympy
import torch

from aotcuda.lowering.fallbacks import relative_source_line
from aotcuda.lowering.index_ops import (
    INDEXING, IndexUse, argument, expression_of, size_of, uses,
)

aten = torch.ops.aten


# --- the value flow -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """A node's values: ``scale * x + c`` for x a value of user input ``input`` and c in ``[low, high]``.

    ``input`` None: a bounded value no input decides (``arange(seq)``: scale 0). ``exact``: every value of
    x meets every offset (a scalar offset, or one broadcast along other dims), so the constraint derived
    from it is exactly eager's. ``whole``: every value of the input reaches here (not after a slice).
    ``part``: where not whole, the input's elements that reach here, as the selects and slices of constant bounds
    that take them from the input (``_part_step``); None where it cannot be told (the whole input is then checked).
    ``laid_out``: the node's dims are still the input's (only selects, slices and copies since it), so a further
    select or slice adds to ``part``.
    """

    input: str | None
    scale: int
    low: sympy.Expr
    high: sympy.Expr
    exact: bool = True
    whole: bool = True
    clamp: tuple | None = None  # value = clamp(scale * x + c, *clamp) (min, max; None: that side open)
    abs: bool = False  # value = |scale * x + c|
    inexact_at: torch.fx.Node | None = None  # the node where exactness was lost
    # the user inputs whose values a bounding op took in (``_bounded``): this value stays within
    # [low, high] whatever they hold, so they need no check where it is within eager's range
    absorbed: frozenset = frozenset()
    part: tuple | None = ()
    laid_out: bool = True


def _folded(flow: Flow) -> bool:
    return flow.clamp is not None or flow.abs


_SAME_VALUES = {aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.expand,
                aten.expand_copy, aten.clone, aten.permute, aten.transpose, aten.t, aten.contiguous, aten.alias,
                aten.detach, aten.lift_fresh_copy, aten.flatten, aten.view_copy, aten.unsqueeze_copy,
                aten.squeeze_copy, aten.permute_copy, aten.transpose_copy, aten.t_copy, aten.alias_copy,
                aten.repeat, aten._to_copy, aten.to, aten.type_as, aten.movedim, aten.unflatten,
                torch.ops.prims.convert_element_type, aten.flip, aten.roll, aten.msort, aten.tile,
                aten.expand_as, aten.swapaxes, aten.swapdims, aten.rot90, aten.fliplr, aten.flipud, aten.numpy_T,
                aten.mT}
_SUBSET = {aten.slice, aten.select, aten.narrow, aten.slice_copy, aten.select_copy, aten.narrow_copy,
           aten.diagonal, aten.unfold, aten.index, aten.index_select, aten.gather, aten.amax, aten.amin,
           aten.take, aten.masked_select}
_CAT = {aten.cat, aten.stack, aten.concat, aten.concatenate, aten.hstack, aten.vstack, aten.dstack}
# ops returning (values, indices): getitem 0 is a permutation (sort) or a part of the input's values
_VALUES_SAME, _VALUES_SUBSET = {aten.sort}, {aten.topk, aten.kthvalue, aten.max, aten.min, aten.median,
                                              aten.mode, aten.cummax, aten.cummin}
_ADD = {aten.add, aten.add_}
_SUB = {aten.sub, aten.sub_}
_RSUB = {aten.rsub}
_NEG = {aten.neg}
_MUL = {aten.mul, aten.mul_}


def _packet(node: torch.fx.Node):
    target = node.target
    return target.overloadpacket if isinstance(target, torch._ops.OpOverload) else None


def is_integer_tensor(value) -> bool:
    """Whether value is a tensor of an integer dtype (not bool)."""
    return isinstance(value, torch.Tensor) and not value.is_floating_point() and not value.is_complex() \
        and value.dtype != torch.bool


def is_integer_node(node) -> bool:
    """Whether node is a graph node whose value (meta["val"]) is an integer tensor."""
    return is_integer_tensor(node.meta.get("val") if isinstance(node, torch.fx.Node) else None)


def _constant(value) -> sympy.Expr | None:
    """A Python int or SymInt argument as a sympy expression (None for anything else)."""
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
        return None
    return sympy.sympify(expression_of(value))


def _operand(value, flows: dict) -> tuple[Flow, ...] | None:
    """The flows of an op's operand: a node's, or a constant offset."""
    if isinstance(value, torch.fx.Node):
        return flows.get(value)
    constant = _constant(value)
    return None if constant is None else (Flow(None, 0, constant, constant),)


def _shape(value) -> tuple:
    """The sizes as ints and sympy expressions (comparing a SymInt would add a guard to the shape env)."""
    if isinstance(value, torch.fx.Node) and isinstance(value.meta.get("val"), torch.Tensor):
        return tuple(expression_of(size) for size in value.meta["val"].shape)
    return ()


def _broadcast_apart(a, b) -> bool:
    """Whether two operands broadcast along different dims only (every element of one meets every
    element of the other): no dim where both are other than 1."""
    shape_a, shape_b = _shape(a), _shape(b)
    width = max(len(shape_a), len(shape_b))
    shape_a, shape_b = (1,) * (width - len(shape_a)) + shape_a, (1,) * (width - len(shape_b)) + shape_b
    return all(size_a == 1 or size_b == 1 for size_a, size_b in zip(shape_a, shape_b))  # a symbol is not 1


def _scaled(flow: Flow, factor: int) -> Flow | None:
    if _folded(flow):
        return None  # a clamp or abs is followed only just before the index
    low, high = flow.low * factor, flow.high * factor
    if factor < 0:
        low, high = high, low
    return Flow(flow.input, flow.scale * factor, low, high, flow.exact, flow.whole, inexact_at=flow.inexact_at,
                absorbed=flow.absorbed, part=flow.part, laid_out=False)


def _each(flows, change) -> tuple[Flow, ...] | None:
    """``change`` applied to each flow (None if it fails for one)."""
    if flows is None:
        return None
    changed = tuple(change(flow) for flow in flows)
    return None if any(flow is None for flow in changed) else changed


def _sum(a, b, flows: dict, sign: int = 1) -> tuple[Flow, ...] | None:
    """a + sign * b, when at most one of each pair of their flows depends on an input (or ``x + x``)."""
    if a is b and isinstance(a, torch.fx.Node) and 1 + sign != 0:
        return _each(flows.get(a), lambda flow: _scaled(flow, 1 + sign))
    flows_a, flows_b = _operand(a, flows), _operand(b, flows)
    if flows_a is None or flows_b is None:
        return None
    found = []
    for flow_a in flows_a:
        for flow_b in flows_b:
            flow_b = _scaled(flow_b, sign)
            if flow_b is None or _folded(flow_a) or (flow_a.input is not None and flow_b.input is not None):
                return None
            input_flow = flow_a if flow_a.input is not None else flow_b
            found.append(Flow(input_flow.input, flow_a.scale + flow_b.scale, flow_a.low + flow_b.low,
                              flow_a.high + flow_b.high, flow_a.exact and flow_b.exact and _broadcast_apart(a, b),
                              flow_a.whole and flow_b.whole, inexact_at=input_flow.inexact_at,
                              absorbed=flow_a.absorbed | flow_b.absorbed,
                              part=input_flow.part, laid_out=False))
    return tuple(found)


def _union(flows: list[Flow]) -> tuple[Flow, ...]:
    """The flows of a concatenation: one per (input, scale, clamp, abs), its offsets the union of theirs
    (every value of the input meets each of them where both take the same elements, or the offsets are the same).

    Where one of them takes the whole input, so does the concatenation (``cat([i, i[:1]])``: every value of ``i``
    reaches the index; review, 2026-12-07: read as "a part, not told", a refusal said eager might run the call, and
    advised turning the check off, where eager refuses it). Elements taken by one side only meet that side's offsets:
    with other offsets on the other side the flow is not exact."""
    merged: dict = {}
    for flow in flows:
        key = (flow.input, flow.scale, flow.clamp, flow.abs)
        known = merged.get(key)
        if known is None:
            merged[key] = flow
            continue
        whole = known.whole or flow.whole
        same_elements = known.whole == flow.whole and known.part == flow.part
        same_offsets = known.low == flow.low and known.high == flow.high
        merged[key] = Flow(
            flow.input, flow.scale, sympy.Min(known.low, flow.low), sympy.Max(known.high, flow.high),
            known.exact and flow.exact and (same_elements or same_offsets), whole, flow.clamp, flow.abs,
            known.inexact_at or flow.inexact_at, known.absorbed | flow.absorbed,
            part=() if whole else known.part if known.part == flow.part else None, laid_out=False)
    return tuple(merged.values())


def _clamped(flow: Flow, low, high) -> Flow | None:
    """clamp(flow, low, high): followed for an input's flow of one offset only."""
    if _folded(flow) or flow.input is None or flow.low != flow.high:
        return None
    return Flow(flow.input, flow.scale, flow.low, flow.high, flow.exact, flow.whole, (low, high), part=flow.part,
                laid_out=False)


def _absolute(flow: Flow) -> Flow | None:
    if _folded(flow) or flow.input is None or flow.low != flow.high:
        return None
    return Flow(flow.input, flow.scale, flow.low, flow.high, flow.exact, flow.whole, abs=True, part=flow.part,
                laid_out=False)


def _arange(node: torch.fx.Node) -> Flow | None:
    """arange's values: [start, start + step * (n - 1)] (reversed for a negative step)."""
    args = list(node.args)
    if node.target == aten.arange.default:
        start, step = 0, 1
    else:
        start, step = args[0], (args[2] if len(args) > 2 else node.kwargs.get("step", 1))
    start, step, count = _constant(start), _constant(step), size_of(node, 0)
    if start is None or step is None or not step.is_Integer or count is None or not is_integer_node(node):
        return None
    last = start + step * (count - 1)
    return Flow(None, 0, *((start, last) if step.is_nonnegative else (last, start)))


def _bounded(node: torch.fx.Node) -> Flow | None:
    """The range of an op whose values stay in one interval whatever its operand holds: ``clamp`` to two
    constant bounds, ``remainder`` by a constant (Python's modulo: [0, n - 1] for n > 0, [n + 1, 0] for
    n < 0), ``argmax``/``argmin``/``argsort`` and the indices of topk, sort, max(dim), ... ([0, size - 1] along their dim). Its operand's inputs are then
    absorbed (``Flow.absorbed``): ``(mask.cumsum(-1) - 1).clamp(0, 127)`` into a 128-row table is safe
    whatever the mask holds. None for any other op, or where a bound is unknown."""
    bounds = _bounds_of(node)
    # not exact: which values of the interval the op gives depends on the input, so an input met by them
    # (``argmax(x)[:, None] + j``) has no exact range (eager takes a wider j where the argmax is small)
    return None if bounds is None else Flow(None, 0, *bounds, exact=False)


def _bounds_of(node: torch.fx.Node) -> tuple | None:
    """``_bounded``'s interval (low, high) for the node, or None."""
    packet, args = _packet(node), node.args
    if not is_integer_node(node) or not args or not isinstance(args[0], torch.fx.Node):
        return None
    if packet is aten.clamp:
        low, high = (_constant(argument(node, index, name)) for index, name in ((1, "min"), (2, "max")))
        if low is None or high is None or not _held(node, low) or not _held(node, high):
            return None
        return sympy.Min(low, high), high  # clamp = min(max(x, low), high): high where low > high
    if packet is aten.remainder and len(args) == 2:
        divisor = _constant(args[1]) if not isinstance(args[1], torch.fx.Node) else _size_value(args[1])
        if divisor is not None and not divisor.is_Integer and divisor.is_positive:
            # by a size (``idx % x.shape[1]``: a detection head's box of each kept score): [0, size - 1], within the
            # dim of that size for every size it takes (``_within``); a size of 0 is the divisor check's to refuse
            return sympy.Integer(0), divisor - 1
        if divisor is None or not divisor.is_Integer or divisor == 0 or not _held(node, divisor):
            return None
        return (sympy.Integer(0), divisor - 1) if divisor > 0 else (divisor + 1, sympy.Integer(0))
    if packet in (aten.argmax, aten.argmin):
        dim = argument(node, 1, "dim")
        size = size_of(args[0], dim) if dim is None or isinstance(dim, int) else None
        return None if size is None else (sympy.Integer(0), size - 1)
    if packet is aten.argsort:
        dim = argument(node, 1, "dim", -1)
        size = size_of(args[0], dim) if isinstance(dim, int) else None
        return None if size is None else (sympy.Integer(0), size - 1)
    if packet in (aten.nonzero, aten.argwhere):
        # positions of the true elements: column j within [0, size j - 1] (a detection head's kept boxes)
        sizes = [size_of(args[0], dim) for dim in range(args[0].meta["val"].dim())] if "val" in args[0].meta else []
        if not sizes or any(size is None for size in sizes):
            return None
        return sympy.Integer(0), sympy.Max(*sizes) - 1
    if node.target is operator.getitem and args[1] == 1 and _packet(args[0]) in _INDICES_DIM:
        # the indices of topk, sort, max(dim), ...: positions along the source's dim (a MoE router's experts)
        source = args[0]
        position, default = _INDICES_DIM[_packet(source)]
        dim = argument(source, position, "dim", default)
        size = size_of(source.args[0], dim) if isinstance(dim, int) and source.args else None
        return None if size is None else (sympy.Integer(0), size - 1)
    return None


def _size_value(node: torch.fx.Node) -> sympy.Expr | None:
    """The expression of a size node (``sym_size``: a SymInt value) as sympy, its symbols positive as sizes are; None
    for any other node, and for one over a data-dependent size (``k.item()``: u0 may be 0 at a call, and no divisor check
    covers it, signature.size_divisors)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    value = node.meta.get("val")
    if not isinstance(value, torch.SymInt) or free_unbacked_symbols(value):
        return None
    expr = sympy.sympify(expression_of(value))
    return expr.xreplace({symbol: sympy.Symbol(str(symbol), positive=True, integer=True)
                          for symbol in expr.free_symbols})


# ops returning (values, indices): the position of their dim argument, and its default
_INDICES_DIM = {aten.topk: (2, -1), aten.sort: (1, -1), aten.kthvalue: (2, -1), aten.max: (1, None),
                aten.min: (1, None), aten.median: (1, None), aten.nanmedian: (1, None), aten.mode: (1, -1),
                aten.cummax: (1, None), aten.cummin: (1, None)}


def _held(node: torch.fx.Node, constant: sympy.Expr) -> bool:
    """Whether a constant (an int; a SymInt is left to ``_within``) is one the node's integer dtype holds: eager
    converts it to the dtype first, wrapping around (``uint8 % -4`` is ``% 252``, ``int8 % 200`` is ``% -56``)."""
    if not constant.is_Integer:
        return True
    info = torch.iinfo(node.meta["val"].dtype)
    return info.min <= int(constant) <= info.max


def _wraps(node: torch.fx.Node) -> bool:
    """Whether arithmetic in the node's dtype may wrap around within the values an index takes: an integer dtype
    narrower than int32 (``int8 + 100`` is -57 for 99, where eager's range is reckoned in Python integers)."""
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dtype not in (torch.int32, torch.int64)


_ARITHMETIC = {aten.add, aten.add_, aten.sub, aten.sub_, aten.rsub, aten.neg, aten.mul, aten.mul_}
_CASTS = {aten._to_copy, aten.to, aten.type_as, torch.ops.prims.convert_element_type}


def _flow(node: torch.fx.Node, flows: dict) -> tuple[Flow, ...] | None:
    """The node's flows from its operands' (None: its values are not an input's, up to a bounded offset)."""
    packet = _packet(node)
    args = node.args
    if node.target is operator.getitem and isinstance(args[0], torch.fx.Node) and args[1] == 0:
        # the values of sort, topk, max(dim), ...: the source's values, or a part of them
        packet, args = _packet(args[0]), args[0].args
        if packet not in _VALUES_SAME | _VALUES_SUBSET:
            return None
        packet = aten.clone if packet in _VALUES_SAME else aten.slice
    if packet is None or not is_integer_node(node):
        return None
    if _wraps(node) and (packet in _ARITHMETIC or (packet in _CASTS and isinstance(args[0], torch.fx.Node) and
                                                   args[0].meta.get("val") is not None and
                                                   args[0].meta["val"].dtype != node.meta["val"].dtype)):
        return None  # not followed: the input is unchecked, with its line
    if packet is aten.arange:
        flow = _arange(node)
        return None if flow is None else (flow,)
    if packet in (aten.scalar_tensor, aten.full) and _constant(args[-1]) is not None:
        value = _constant(args[-1])
        return (Flow(None, 0, value, value),)
    if packet in _CAT:
        parts = [flows.get(part) for part in argument(node, 0, "tensors", ())]
        return None if not parts or any(part is None for part in parts) else _union([f for p in parts for f in p])
    if packet in _SAME_VALUES or packet in _SUBSET:
        source = flows.get(args[0]) if args and isinstance(args[0], torch.fx.Node) else None
        if source is None or (packet in _SAME_VALUES and _packet(node) in _SAME_LAYOUT):
            return source
        if packet in _SAME_VALUES:  # the same values, in dims that are no longer the input's
            return tuple(replace(f, laid_out=False) for f in source)
        # A part of an input's values (checked over that part where the selects and slices that take it are known,
        # else over the whole input), or of a bounded value (whose range may then be wider than the part's: not exact).
        step = _part_step(node) if node.target is not operator.getitem else None
        return tuple(Flow(f.input, f.scale, f.low, f.high, f.exact and f.input is not None, False, f.clamp, f.abs,
                          f.inexact_at, f.absorbed, *_narrowed(f, step)) for f in source)
    if packet is aten.clamp and isinstance(args[0], torch.fx.Node):
        low, high = argument(node, 1, "min"), argument(node, 2, "max")
        if any(bound is not None and _constant(bound) is None for bound in (low, high)):
            return None
        low, high = (None if bound is None else _constant(bound) for bound in (low, high))
        return _each(flows.get(args[0]), lambda flow: _clamped(flow, low, high))
    if packet is aten.abs:
        return _each(flows.get(args[0]), _absolute)
    alpha = node.kwargs.get("alpha", 1)
    if packet in _ADD | _SUB | _RSUB and isinstance(alpha, int) and len(args) >= 2:
        if packet in _RSUB:
            return _sum(args[1], args[0], flows, -alpha)
        return _sum(args[0], args[1], flows, alpha if packet in _ADD else -alpha)
    if packet in _NEG:
        return _each(flows.get(args[0]), lambda flow: _scaled(flow, -1))
    if _floor_division(node, packet):
        # a bounded value divided by a positive constant stays bounded (a MoE's slot // top_k: the slot's token)
        divisor = _constant(args[1])
        if (divisor is None or not divisor.is_Integer or divisor <= 0 or not _held(node, divisor)
                or not isinstance(args[0], torch.fx.Node)):
            return None
        return _each(flows.get(args[0]), lambda flow: None if flow.input is not None or _folded(flow) else Flow(
            None, 0, sympy.floor(flow.low / divisor), sympy.floor(flow.high / divisor), exact=False, whole=flow.whole,
            absorbed=flow.absorbed))
    if packet in _MUL and len(args) == 2:
        for tensor, factor in ((args[0], args[1]), (args[1], args[0])):
            source = flows.get(tensor) if isinstance(tensor, torch.fx.Node) else None
            if source is not None and isinstance(factor, int) and not isinstance(factor, bool) and factor != 0:
                return _each(source, lambda flow: _scaled(flow, factor))
    return None


# ops that keep the input's values in the input's dims (a select or slice after them still says which elements)
_SAME_LAYOUT = {aten.clone, aten.contiguous, aten.alias, aten.detach, aten.lift_fresh_copy, aten.alias_copy,
                aten._to_copy, aten.to, aten.type_as, torch.ops.prims.convert_element_type}


def _part_step(node: torch.fx.Node) -> tuple | None:
    """The select or slice a node takes, as a step of a ``part`` (("select", dim, index) or ("slice", dim, start,
    end, step), ints as aten takes them: negatives wrap, an end past the size is the size); None for any other op, and
    for bounds that are not constants (a dynamic slice: its bounds differ from call to call)."""
    packet, value = _packet(node), node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or not value.dim():
        return None
    if packet in (aten.select, aten.select_copy):
        dim, index = argument(node, 1, "dim"), argument(node, 2, "index")
        numbers = (dim, index)
        step = ("select", dim, index)
    elif packet in (aten.slice, aten.slice_copy):
        dim, start, end, stride = (argument(node, 1, "dim", 0), argument(node, 2, "start", None),
                                   argument(node, 3, "end", None), argument(node, 4, "step", 1))
        start, end = 0 if start is None else start, (2**63 - 1) if end is None else end
        numbers = (dim, start, end, stride)
        step = ("slice", dim, start, end, stride)
    elif packet in (aten.narrow, aten.narrow_copy):
        dim, start, length = argument(node, 1, "dim"), argument(node, 2, "start"), argument(node, 3, "length")
        numbers = (dim, start, length)
        step = ("narrow", dim, start, length)
    else:
        return None
    if any(isinstance(n, bool) or not isinstance(n, int) for n in numbers) or (step[0] == "slice" and step[4] < 1):
        return None
    return step[:1] + (step[1] % value.dim(),) + step[2:]


def _narrowed(flow: Flow, step: tuple | None) -> tuple:
    """(part, laid_out) of a flow after a subset op whose select or slice is ``step`` (None: not one)."""
    if step is None or flow.part is None or not flow.laid_out:
        return None, False
    return flow.part + (step,), True


def _floor_division(node: torch.fx.Node, packet) -> bool:
    """Whether the node is ``a // b``: floor_divide, or div with rounding_mode="floor" (what the decompositions
    make of it)."""
    if len(node.args) != 2:
        return False
    return packet is aten.floor_divide or (packet is aten.div and node.kwargs.get("rounding_mode") == "floor")


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


def _input_flows(ep, names: set[str]) -> tuple[dict, dict]:
    """The flows of the nodes; and, by node, the user inputs whose values reach it unfollowed, each with
    the node where the flow lost them (``unfollowed``)."""
    flows: dict = {}
    unfollowed: dict = {}
    constants = _constant_values(ep)
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if node.name in names and is_integer_node(node):
                flows[node] = (Flow(node.name, 1, sympy.Integer(0), sympy.Integer(0)),)
            elif node.name in constants:
                low, high = (int(v) for v in constants[node.name].aminmax())
                flows[node] = (Flow(None, 0, sympy.Integer(low), sympy.Integer(high)),)
        elif node.op == "call_function":
            try:
                flow = _flow(node, flows)
            except Exception:  # noqa: BLE001 - an argument form the flow does not know: its values are unknown
                flow = None
            if flow is None and (bounded := _bounded(node)) is not None:
                # every input reaching it is absorbed (followed, to be checked against the bound at its index)
                flows[node] = (replace(bounded, absorbed=frozenset(_reaching(node, flows, unfollowed, names))),)
                continue
            if flow is not None:
                flows[node] = tuple(f if f.exact or f.inexact_at is not None or f.input is None
                                    else replace(f, inexact_at=node) for f in flow)
            if isinstance(node.meta.get("val"), (tuple, list)) and _packet(node) in _VALUES_SAME | _VALUES_SUBSET:
                lost = {name: where for operand in node.all_input_nodes  # followed by getitem 0
                        for name, where in unfollowed.get(operand, {}).items()}
            elif _holds_tensors(node):
                lost = _unfollowed(node, flows, unfollowed, names)
            else:
                lost = None
            if lost:
                unfollowed[node] = lost
    return flows, unfollowed


def _holds_tensors(node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) or (isinstance(value, (tuple, list)) and
                                               any(isinstance(v, torch.Tensor) for v in value))


# ops that read only the shape, dtype or device of these operands, never their values: ``zeros_like(ids)`` holds
# no value of ids, ``dst[:, None].expand_as(msg)`` (a graph network's scatter index) none of msg, whose float
# values came from every input: counting them made each input "reach" the index, unchecked, a false warning
_SHAPE_ONLY = {packet: positions for packets, positions in (
    ((aten.expand_as, aten.view_as, aten.reshape_as, aten.type_as), (1,)),
    ((aten.zeros_like, aten.ones_like, aten.full_like, aten.empty_like, aten.rand_like, aten.randn_like,
      aten.randint_like, aten.new_zeros, aten.new_ones, aten.new_full, aten.new_empty, aten.new_empty_strided),
     (0,))) for packet in packets}


def _value_operands(node) -> list:
    """The operands whose values may reach ``node``'s: all but those ``_SHAPE_ONLY`` names (one also passed in
    another place, ``expand_as(i, i)``, stays)."""
    skipped = _SHAPE_ONLY.get(_packet(node), ()) if node.op == "call_function" else ()
    if not skipped:
        return node.all_input_nodes
    read: set = set()
    torch.fx.node.map_arg(([arg for position, arg in enumerate(node.args) if position not in skipped],
                           node.kwargs), read.add)
    return [operand for operand in node.all_input_nodes if operand in read]


def _unfollowed(node, flows: dict, unfollowed: dict, names: set[str]) -> dict:
    """{input: node where the flow stopped following it} for the inputs whose values reach ``node``."""
    followed = {flow.input for flow in flows.get(node, ())} | {name for flow in flows.get(node, ())
                                                               for name in flow.absorbed}
    lost = {}
    for operand in _value_operands(node):
        for name, where in unfollowed.get(operand, {}).items():
            lost.setdefault(name, where)
        for name in _reaching_from(operand, flows, names) - followed:
            lost.setdefault(name, node)
    return lost


def _reaching_from(operand, flows: dict, names: set[str]) -> set[str]:
    """The inputs an operand's flows follow (as an input or absorbed), and the operand itself where it is a
    float or bool input, which the flow never follows."""
    reaching = {flow.input for flow in flows.get(operand, ()) if flow.input is not None}
    reaching |= {name for flow in flows.get(operand, ()) for name in flow.absorbed}
    if operand.op == "placeholder" and operand.name in names and _holds_tensors(operand):
        reaching.add(operand.name)
    return reaching


def _reaching(node, flows: dict, unfollowed: dict, names: set[str]) -> set[str]:
    """Every input whose values reach ``node``'s operands, followed or not."""
    return {name for operand in _value_operands(node)
            for name in (*unfollowed.get(operand, {}), *_reaching_from(operand, flows, names))}


# --- the ranges ---------------------------------------------------------------------------------------


def _input_range(flow: Flow, use: IndexUse) -> tuple | None:
    """The range of the input's values that keeps ``scale * x + c`` (clamped, or its absolute value) in
    eager's range for every c (a side ±oo: open); None where it is not one interval this can write."""
    low = -use.size if use.negative else sympy.Integer(0)
    high = use.size - 1
    try:
        if flow.abs:
            if not bool(low <= 0):
                return None  # |y| >= low > 0: two intervals
            low, high = -high, high
        elif flow.clamp is not None:
            low, high = _clamp_preimage(*flow.clamp, low, high)
    except (TypeError, _Empty):  # a comparison of sizes that is not decided, or no value accepted
        return None
    scale = flow.scale
    if scale == 1:
        return low - flow.low, high - flow.high
    if scale == -1:
        return flow.high - high, flow.low - low
    bounds = [low - flow.low, high - flow.high]
    if not all(b.is_Integer or b in (sympy.oo, -sympy.oo) for b in bounds):
        return None  # a symbolic bound over a scale: not written (the runtime evaluates plain expressions)
    lower, upper = bounds
    if scale < 0:
        lower, upper, scale = -upper, -lower, -scale
    return (lower if not lower.is_Integer else sympy.Integer(-(-int(lower) // scale)),
            upper if not upper.is_Integer else sympy.Integer(int(upper) // scale))


def _within(flow: Flow, use: IndexUse, batch: frozenset = frozenset()) -> bool:
    """Whether every value of a bounded flow is one eager accepts at ``use``, for every size the program
    takes. Over dynamic sizes, only where the comparison holds for every value of their symbols (``idx % n`` into a
    dim of size n: [0, n - 1]) and none of them is a dim 0 of an input (``batch``): an index over a dim of the batch's
    size would read other requests' rows once batched."""
    size = sympy.sympify(use.size)
    symbols = size.free_symbols | flow.low.free_symbols | flow.high.free_symbols
    if not symbols:
        return bool(flow.low >= (-size if use.negative else 0)) and bool(flow.high <= size - 1)
    if {str(symbol) for symbol in symbols} & batch:
        return False
    positive = {symbol: sympy.Symbol(str(symbol), positive=True, integer=True) for symbol in symbols}
    low, high, size = (sympy.sympify(e).xreplace(positive) for e in (flow.low, flow.high, size))
    return bool((low - (-size if use.negative else 0)).is_nonnegative) and bool((size - 1 - high).is_nonnegative)


def _not_within(flow: Flow, use: IndexUse) -> str:
    """Why ``_within`` refused a bounded flow: outside eager's range, or a bound or size that is dynamic."""
    if sympy.sympify(use.size).free_symbols or flow.low.free_symbols or flow.high.free_symbols:
        return ("lowering does not take as within eager's range there: a bound or size of a dynamic dim, which "
                "batching would widen to other requests' rows")
    return "is not within eager's range there"


def batch_symbols(ep) -> frozenset:
    """The shape symbols of the user inputs' dim 0, which batching requests together widens."""
    found = set()
    for node in ep.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and value.dim() and isinstance(value.shape[0], torch.SymInt):
            found |= {str(s) for s in value.shape[0].node.expr.free_symbols}
    return frozenset(found)


class _Empty(Exception):
    pass


def _clamp_preimage(minimum, maximum, low, high) -> tuple:
    """The y with clamp(y, minimum, maximum) = min(max(y, minimum), maximum) in [low, high] (clamp is
    monotone: an interval; ±oo for an open side). Raises _Empty when no y is."""
    least = -sympy.oo if minimum is None else (minimum if maximum is None else sympy.Min(minimum, maximum))
    most = sympy.oo if maximum is None else maximum
    if bool(least > high) or bool(most < low):
        raise _Empty
    return (-sympy.oo if bool(least >= low) else low), (sympy.oo if bool(most <= high) else high)


def _bound(expr: sympy.Expr, symbols: set[str]):
    """A bound as the signature writes it: an int, {"expr": "s27 - 1"}, or None when a symbol in it is
    not an input size (an unbacked symbol) or it is infinite: that side is then not checked."""
    expr = sympy.expand(expr)
    if expr.is_Integer:
        return int(expr)
    if expr.has(sympy.oo, -sympy.oo) or not {str(s) for s in expr.free_symbols} <= symbols:
        return None
    return {"expr": str(expr)}


def _reason(node: torch.fx.Node, use: IndexUse, flow: Flow) -> str:
    op = node.target.name() if isinstance(node.target, torch._ops.OpOverload) else str(node.target)
    where = relative_source_line(node)
    through = "" if flow.whole or flow.part else " (read through a slice: the whole input is checked)"
    return f"{op} over {use.what}{through}" + (f", at {where}" if where else "")


def _unchecked(name: str, node: torch.fx.Node, use: IndexUse, through: torch.fx.Node | None, why: str = "") -> str:
    """One ``index_unchecked`` line: the input, the op it passes through, the indexing op, with source lines."""
    def op(n):
        packet = _packet(n)
        where = (relative_source_line(n) or "").split(": ")[0]
        return (str(packet) if packet is not None else str(n.target)) + (f" at {where}" if where else "")
    passes = f" through {op(through)}" if through is not None else ""
    return f"input {name!r} reaches {op(node)} ({use.what}){passes}{why}: its values are not checked before the call"


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


def index_ranges(ep, input_names, unchecked: dict | None = None) -> dict[str, list[dict]]:
    """{user input name: [{"min": Bound, "max": Bound, "reason": str}, ...]}: for every integer input that
    reaches an index of the INDEXING table through the value flow, exactly (see the module docstring),
    the range eager accepts there. Bound: an int, {"expr": ...} of input size symbols, or None (unchecked).

    ``unchecked`` (a dict, filled when given): {user input name: [line, ...]} for the inputs whose values
    reach an index where no exact range is derived (``_unchecked``'s lines; ``unchecked_inputs`` warns)."""
    flows, unfollowed = _input_flows(ep, set(input_names))
    symbols, batch = input_size_symbols(ep), batch_symbols(ep)
    ranges: dict[str, list[dict]] = {}
    lines = unchecked if unchecked is not None else {}
    names = _state_names(ep)
    for node in ep.graph.nodes:
        rule = INDEXING.get(_packet(node)) if node.op == "call_function" else None
        for use in (_named(use, names) for use in uses(rule, node)):
            for name, through in unfollowed.get(use.index, {}).items():
                _add_line(lines, name, _unchecked(name, node, use, through))
            for flow in flows.get(use.index, ()):
                if flow.input is None:
                    if flow.absorbed and not _within(flow, use, batch):
                        for name in sorted(flow.absorbed):
                            _add_line(lines, name, _unchecked(
                                name, node, use, None, f" (bounded on the way to [{flow.low}, {flow.high}], which "
                                f"{_not_within(flow, use)})"))
                    continue
                if not flow.exact:
                    _add_line(lines, flow.input, _unchecked(flow.input, node, use, flow.inexact_at,
                                                            " (its elements meet different offsets)"))
                    continue
                bounds = _input_range(flow, use)
                if bounds is None:
                    _add_line(lines, flow.input, _unchecked(flow.input, node, use, None,
                                                            " (its range there is not one interval of sizes)"))
                    continue
                entry = {"min": _bound(bounds[0], symbols), "max": _bound(bounds[1], symbols),
                         "reason": _reason(node, use, flow)}
                if not flow.whole and flow.part:  # only the selected part is read as an index
                    entry["part"] = [list(step) for step in flow.part]
                if entry["min"] is not None or entry["max"] is not None:
                    _add_range(ranges.setdefault(flow.input, []), entry)
    return ranges


def _state_names(ep) -> dict[str, str]:
    """{placeholder name: the module's own name} of the program's parameters, buffers and constants
    (``p_embed_weight`` → ``embed.weight``): a refusal names the table as the user's model does."""
    signature = ep.graph_signature
    names = {}
    for field in ("inputs_to_parameters", "inputs_to_buffers", "inputs_to_lifted_tensor_constants"):
        names.update(getattr(signature, field, None) or {})
    # where the module ties a parameter to others (an LM head sharing the embedding's weight, which torch.export
    # reads through one placeholder: p_head_weight for self.tok(ids)), the first of its names with the others
    tied: dict[int, list[str]] = {}
    for name, value in ep.state_dict.items():
        tied.setdefault(id(value), []).append(name)
    shown = {}
    for placeholder, target in names.items():
        same = tied.get(id(ep.state_dict[target]), [target]) if target in ep.state_dict else [target]
        shown[placeholder] = same[0] if len(same) < 2 else f"{same[0]} (tied to {', '.join(same[1:])})"
    return shown


def _named(use: IndexUse, names: dict[str, str]) -> IndexUse:
    """``use`` with the operand its ``what`` ends with ("128 rows of p_embed_weight") under its module name."""
    head, sep, operand = use.what.rpartition(" of ")
    if not sep or operand not in names:
        return use
    return replace(use, what=f"{head} of {names[operand]}")


def _add_line(lines: dict, name: str, line: str) -> None:
    if line not in lines.setdefault(name, []):
        lines[name].append(line)


def unchecked_inputs(found: dict, ranges: dict, more: dict | None = None, more_ranges: dict | None = None) -> dict:
    """The ``index_unchecked`` lines of the signature, with a UserWarning each: ``more`` (those of the
    exported program, the user's own ops) first; ``found`` (the decomposed program's) only for inputs the
    exported program neither bounds nor leaves unchecked (when ``more_ranges`` is given)."""
    lines: dict = {name: list(entries) for name, entries in (more or {}).items()}
    for name, entries in found.items():
        if more_ranges is not None and (name in lines or name in more_ranges):
            continue
        for line in entries:
            _add_line(lines, name, line)
    for entries in lines.values():
        for line in entries:
            warnings.warn(f"aotcuda: {line}; an out-of-range value ends the process (CPU) or breaks the CUDA "
                          "context", UserWarning, stacklevel=2)
    return lines


def _add_range(entries: list[dict], entry: dict) -> None:
    """Add a range unless one with the same bounds is there (the same check: the first reason is kept)."""
    if not any(known["min"] == entry["min"] and known["max"] == entry["max"] and known.get("part") == entry.get("part")
               for known in entries):
        entries.append(entry)


def exported_index_ranges(ep, unchecked: dict | None = None) -> dict[str, list[dict]]:
    """``index_ranges`` of every user input of ``ep`` (lower() reads them from the exported program)."""
    from aotcuda.passes.complex_to_real.boundary import user_input_names

    return index_ranges(ep, [name for name in user_input_names(ep.graph_signature) if name is not None], unchecked)


def merge_ranges(*found: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The ranges of several programs of one model (before and after the decompositions), each once."""
    merged: dict[str, list[dict]] = {}
    for ranges in found:
        for name, entries in ranges.items():
            for entry in entries:
                _add_range(merged.setdefault(name, []), entry)
    return merged


