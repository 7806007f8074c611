"""Rule results laid out as eager lays out the values they replace.

A rule computes the right values, but not always in eager's memory layout: the DFT rules move a dim last,
multiply, and move it back, so their result is a permutation of eager's; a real op on a non-contiguous
pair may come out contiguous where eager's complex op kept the input's order. Values alone would be
enough if nothing after the rule looked at strides, but the exported graph does: export turned a reshape
into a ``view`` because eager's layout allowed one (on our layout the view fails), ``as_strided`` reads
storage positions, and ``x.stride()`` may be computed with. So each result whose strides differ from
eager's (a complex value's strides ×2 with the pair dim last, in real elements) is copied into eager's
layout. Where the layouts already agree, as in the rotary embeddings of every model tested, nothing is
added; where they do not, Inductor usually writes the producing kernel's output in the new layout
directly (the copy is pointwise).
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.pair import Pair, same_size
from aotcuda.passes.complex_to_real.torch_internals import disable_proxy_modes_tracing

aten = torch.ops.aten


def as_laid_out_in_eager(result, original):
    """`result` (a rule's return: a Pair, a tensor, or a list/tuple of them) with each tensor in the
    layout of the original value in its position; other values, and results whose structure does not
    match the original's, are returned as they are."""
    leaves, spec = pytree.tree_flatten(result, is_leaf=lambda v: isinstance(v, Pair))
    originals = pytree.tree_leaves(original)
    if len(leaves) != len(originals):
        return result
    return pytree.tree_unflatten([_one(leaf, o) for leaf, o in zip(leaves, originals)], spec)


def _one(value, original):
    if not isinstance(original, torch.Tensor):
        return value
    if isinstance(value, (Pair, torch.Tensor)) and _same_up_to_unbacked_names(_tensor(value), original):
        return value
    if isinstance(value, Pair) and original.dtype.is_complex:
        shape = [*original.shape, 2]
        with disable_proxy_modes_tracing():  # metadata arithmetic, not graph nodes (see _restrided)
            strides = [*(2 * s for s in original.stride()), 1]
        laid_out = _restrided(value.t, shape, strides)
        return value if laid_out is value.t else Pair(laid_out)
    if isinstance(value, torch.Tensor) and not isinstance(value, Pair) and not original.dtype.is_complex:
        return _restrided(value, list(original.shape), list(original.stride()))
    return value


def _tensor(value) -> torch.Tensor:
    return value.t if isinstance(value, Pair) else value


def _same_up_to_unbacked_names(t: torch.Tensor, original: torch.Tensor) -> bool:
    """Whether t's strides are the original's once each data-dependent size symbol of the original (u0: a
    nonzero's row count) is renamed to t's in the same dim (u1: the rule's own nonzero draws a fresh one, which
    no expression relates to u0, and u0 is no value of the rewritten trace, so no copy could be made with it)."""
    renamed = {}
    for ours, theirs in zip(t.shape, original.shape):
        if isinstance(ours, torch.SymInt) and isinstance(theirs, torch.SymInt) and theirs.node.expr.is_symbol \
                and _hint(theirs) is None:  # a data-dependent (unbacked) size: it has no example value
            renamed[theirs.node.expr] = ours.node.expr
    if not renamed:
        return False
    extra = t.ndim - original.ndim  # the pair dim, last, stride 1
    if extra not in (0, 1) or (extra and t.stride()[-1] != 1):
        return False
    factor = 2 if extra else 1
    for size, ours, theirs in zip(original.shape, t.stride(), original.stride()):
        theirs = theirs.node.expr.xreplace(renamed) if isinstance(theirs, torch.SymInt) else theirs
        ours = ours.node.expr if isinstance(ours, torch.SymInt) else ours
        if not _at_most_one(size) and ours != factor * theirs:
            return False
    return True


def _restrided(t: torch.Tensor, shape: list, strides: list) -> torch.Tensor:
    """t, or a copy of it with these strides when they differ in a dim that has more than one element.

    Not for overlapping layouts (a stride of 0, as expand makes): copying into one is undefined, and the
    rules give expanded results there as eager does.

    Eager's strides are expressions of the original program's shape env (``33*Max(1, s0//16 - 3)``) that
    the traced graph never computed: handed to an op, make_fx has to rebuild them from the graph's
    symbols, which torch 2.11 cannot do for Max/Min (``... is not tracked with proxy``). So a dense layout,
    the only kind the rules produce (a permutation of a contiguous one), is compared by its dim order
    and made by permute → contiguous → permute of t's own (traced) sizes; only other layouts are
    copied into eager's strides as written.
    """
    if t.ndim != len(shape) or any(isinstance(size, int) and size == 0 for size in shape):
        return t  # (no elements: nothing to lay out)
    if not _differs(t, shape, strides):
        return t
    if any(_is_zero(s) for size, s in zip(shape, strides) if not _at_most_one(size)):
        return t
    order = _dense_order(shape, strides)
    if order is not None:
        if _dense_order(t.shape, t.stride()) == order:
            return t  # equal strides for every value of the sizes: only their expressions differ
        return _permuted_contiguous(t, shape, strides)
    target = torch.empty_strided(shape, strides, dtype=t.dtype, device=t.device)
    return aten.copy.default(target, t)


def _hint(value) -> int | None:
    """An int, or a SymInt's value in the example the program was traced with (None if it has none)."""
    return value.node.hint if isinstance(value, torch.SymInt) else value


def _dense_order(shape, strides) -> tuple[int, ...] | None:
    """The dims of more than one element from innermost to outermost, if the layout is dense in that order
    (each stride the product of the sizes inside it), else None; judged on the example's values."""
    hints = [(_hint(stride), _hint(size), d) for d, (size, stride) in enumerate(zip(shape, strides))]
    if any(size is None or stride is None for stride, size, _ in hints):
        return None
    expected, order = 1, []
    for stride, size, d in sorted(h for h in hints if h[1] > 1):
        if stride != expected:
            return None
        expected *= size
        order.append(d)
    return tuple(order)


def _permuted_contiguous(t: torch.Tensor, shape: list, strides: list) -> torch.Tensor:
    """A dense copy of t whose dims are laid out in the order of `strides` (outermost first)."""
    outer_first = sorted(range(len(shape)), key=lambda d: (-(_hint(strides[d]) or 0), d))
    inverse = sorted(range(len(shape)), key=outer_first.__getitem__)
    return t.permute(outer_first).contiguous().permute(inverse)


def _differs(t: torch.Tensor, shape: list, strides: list) -> bool:
    for size, actual, expected in zip(shape, t.stride(), strides):
        if _at_most_one(size):
            continue  # the stride of a dim of one element addresses nothing
        if not same_size(actual, expected):
            return True
    return False


def _at_most_one(size) -> bool:
    return isinstance(size, int) and size <= 1


def _is_zero(stride) -> bool:
    return isinstance(stride, int) and stride == 0
