"""The scale and mask an attention applies to its scores, as ``scale · s + bias``.

Between ``q·kᵀ`` and the softmax, attention code scales the scores and masks them: ``s / √d + mask``,
``where(keep, s · c, −inf)``, ``masked_fill(hidden, finfo.min)``. A fused attention kernel needs that as
one number and one tensor: ``logits = scale · s + bias``, where ``bias`` no longer depends on s (a mask
of [1, 1, Sq, L], not scores of [B, H, Sq, L]). ``affine_chain`` reads the chain of nodes from the scores
to the logits and rebuilds the bias from the same ops applied to a zero, so that it broadcasts only as
far as the masks do.

Exact for: multiplication and division by numbers, addition and subtraction of tensors that do not
depend on the scores, conversions to float dtypes (the kernel computes in float32, eager in the scores' dtype: they
differ by that rounding), and ``where`` / ``masked_fill`` with a fill of −inf or below −1e30 (a position
filled so low takes no weight in the softmax, whatever scale · s adds to it). Anything else: None, and
the caller keeps the program's own form.
"""

from __future__ import annotations

import math
import numbers

import torch

from aotcuda.passes.emit import emit

aten = torch.ops.aten
HIDDEN = -1e30  # a fill at or below this hides its position (finfo(float32).min is -3.4e38)
_IDENTITY = {aten._to_copy.default, aten.clone.default}


def _is_copy(node) -> bool:
    """A copy or a conversion to a float dtype: the same values, but for rounding (a conversion to an integer
    or bool dtype changes them: ``(s * 3).long()``, ``s.bool()``)."""
    return isinstance(node, torch.fx.Node) and node.target in _IDENTITY \
        and isinstance(node.meta.get("val"), torch.Tensor) and node.meta["val"].is_floating_point()


def affine_chain(graph: torch.fx.Graph, scores: torch.fx.Node, logits: torch.fx.Node, device, like,
                 constants: dict | None = None) -> tuple[float, torch.fx.Node | None] | None:
    """(scale, bias node or None) with ``logits = scale · scores + bias`` (module docstring), the bias's
    nodes emitted at the graph's insertion point; None when the chain is not of that form. constants:
    {placeholder name: tensor} of the program's lifted constants (a fill written ``torch.tensor(min)``)."""
    scale, ops, node = 1.0, [], scores
    while node is not logits:
        users = [u for u in node.users if u.target is not aten._assert_tensor_metadata.default]
        if len(users) != 1:
            return None
        user = users[0]
        step = _step(user, node, constants or {})
        if step is None:
            return None
        factor, op = step
        scale *= factor
        if op is not None:
            ops.append(op)
        node = user
    if not ops:
        return scale, None
    # A zero of the scores' rank, not 0-d: a 0-d float32 tensor loses type promotion to a dimensioned bf16 or
    # fp16 mask, and the bias would be scaled in the mask's dtype where eager scales it in float32.
    bias = emit(graph, aten.full.default, ([1] * scores.meta["val"].dim(), 0.0),
                {"dtype": torch.float32, "device": device}, like=like)
    for target, make_args, kwargs in ops:
        bias = emit(graph, target, make_args(bias), kwargs, like=like)
    return scale, bias


def _number(value) -> float | None:
    return float(value) if isinstance(value, numbers.Number) and not isinstance(value, bool) else None


def fill_value(value, constants: dict) -> float | None:
    """A fill's number: a number, or a node that makes one (a full, a scalar_tensor, a one-element lifted
    constant, through copies); None for anything else."""
    while _is_copy(value):
        value = value.args[0]
    if isinstance(value, torch.fx.Node):
        if value.target in (aten.scalar_tensor.default, aten.full.default) and value.args:
            value = value.args[-1] if value.target is aten.full.default else value.args[0]
        elif value.op == "placeholder" and isinstance(constants.get(value.name), torch.Tensor) \
                and constants[value.name].numel() == 1:
            value = constants[value.name].item()
        else:
            return None
    return _number(value)


def _hides(value, constants: dict) -> bool:
    """A fill that hides its position: a number at or below HIDDEN, or a node that makes one (fill_value)."""
    number = fill_value(value, constants)
    return number is not None and (number <= HIDDEN or number == -math.inf)


def scale_only(first: torch.fx.Node, last: torch.fx.Node, constants: dict | None = None) -> float | None:
    """The factor of the chain from ``first`` to ``last`` where every op multiplies or divides by a number or
    converts to a float dtype (``_step`` without a bias); None for anything else."""
    factor, node = 1.0, first
    while node is not last:
        users = [u for u in node.users if u.target is not aten._assert_tensor_metadata.default]
        step = _step(users[0], node, constants or {}) if len(users) == 1 else None
        if step is None or (step[1] is not None and step[1][0] not in (aten.mul.Tensor, aten.mul.Scalar,
                                                                       aten.div.Tensor, aten.div.Scalar)):
            return None
        factor *= step[0]
        node = users[0]
    return factor


def _step(user: torch.fx.Node, chain: torch.fx.Node, constants: dict):
    """(factor on the scale, (target, args builder, kwargs) to apply to the bias, or None) for one op of
    the chain; None when the op does not keep the affine form."""
    target, args, kwargs = user.target, user.args, dict(user.kwargs)
    if target in _IDENTITY:
        return (1.0, None) if _is_copy(user) else None
    if target in (aten.mul.Tensor, aten.mul.Scalar):
        other = args[1] if args[0] is chain else args[0]
        factor = _number(other)
        return None if factor is None else (factor, (target, lambda b: (b, factor), {}))
    if target in (aten.div.Tensor, aten.div.Scalar) and args[0] is chain and not kwargs:
        divisor = _number(args[1])
        if divisor is None or divisor == 0:
            return None
        return 1.0 / divisor, (target, lambda b: (b, divisor), {})
    if target in (aten.add.Tensor, aten.sub.Tensor) and len(args) == 2:
        alpha = _number(kwargs.get("alpha", 1))
        if alpha is None or not all(a is chain or not _reads(a, chain) for a in args):
            return None
        if args[0] is chain and args[1] is not chain:
            return 1.0, (target, lambda b, t=args[1]: (b, t), kwargs)
        if args[1] is chain and args[0] is not chain:  # t ± alpha · s
            sign = alpha if target is aten.add.Tensor else -alpha
            return sign, (target, lambda b, t=args[0]: (t, b), kwargs)
        return None
    if target is aten.where.self:
        condition, kept, other = args
        if _reads(condition, chain):
            return None
        if kept is chain and other is not chain and _hides(other, constants):
            return 1.0, (target, lambda b: (condition, b, other), {})
        if other is chain and kept is not chain and _hides(kept, constants):
            return 1.0, (target, lambda b: (condition, kept, b), {})
        return None
    if target is aten.masked_fill.Scalar and args[0] is chain and not _reads(args[1], chain) and _hides(args[2], constants):
        return 1.0, (target, lambda b: (b, args[1], args[2]), {})
    return None


def _reads(value, chain: torch.fx.Node) -> bool:
    """Whether a node's value depends on the chain's node (a mask computed from the scores is not a bias)."""
    if not isinstance(value, torch.fx.Node):
        return False
    seen, todo = set(), [value]
    while todo:
        node = todo.pop()
        if node is chain:
            return True
        if node in seen or node.op != "call_function":
            continue
        seen.add(node)
        todo.extend(a for a in node.all_input_nodes)
    return False
