"""complex32 (torch.chalf): float16 pairs in memory, math in float32, as eager does.

Eager computes a complex32 op in complex64 and rounds the result to complex32 once (checked on the
CPU: chalf a·b and a+b equal (a.to(complex64) op b.to(complex64)).to(chalf) bit for bit). A rule run
directly on float16 pairs would round after every real product and sum inside the rule instead. So
the rules that compute (registered with ``computes=True``: elementwise, elementary functions, reductions,
matrix products, polar, and the scatters that add: index_add, scatter_add) run on a node touching complex32
through `in_float32`: float16 operands go up to float32 (exactly), the rule sees the eager result's dtype one
step up (complex32 → complex64, float16 → float32), and the result comes back down to the eager result's
dtype. Shape, creation and conversion rules and the other indexing rules only move or cast values and run on
the float16 pairs as they are. The scan decides
(`runs_in_float32`), the rewrite applies `in_float32`.

Eager's CPU kernels lack complex32 for many ops (div, exp, log, sqrt, pow, angle, reciprocal, sum,
mean, mm/bmm, gather, polar: "not implemented for 'ComplexHalf'"); such programs still export and the
pass rewrites them the same way, computing in float32 as eager does on CUDA.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import Rule

UP = {torch.complex32: torch.complex64, torch.float16: torch.float32}


def touches_complex32(node: torch.fx.Node) -> bool:
    """Whether the node reads or writes a complex32 value, or names the complex32 dtype."""
    values = [node.meta.get("val"), *(a.meta.get("val") for a in node.all_input_nodes)]
    leaves = pytree.tree_leaves(values) + pytree.tree_leaves((node.args, node.kwargs))
    return any((isinstance(v, torch.Tensor) and v.dtype == torch.complex32) or v is torch.complex32
               for v in leaves)


class _UpcastResult:
    """The eager result's fake value as the rule should see it: same everything, dtype one step up."""

    def __init__(self, value: torch.Tensor):
        self._value = value

    @property
    def dtype(self) -> torch.dtype:
        return UP.get(self._value.dtype, self._value.dtype)

    def __getattr__(self, name: str):
        return getattr(self._value, name)


def _up(value):
    if isinstance(value, Pair) and value.dtype == torch.float16:
        return Pair(value.t.float())
    if isinstance(value, torch.Tensor) and value.dtype == torch.float16:
        return value.float()
    return value


def _down(result, out, originals: dict[int, object]):
    """The rule's float32 result in the eager result's dtype; an operand passed through is returned as
    it came in (an alias stays an alias, no float32 round trip)."""
    if id(result) in originals:
        return originals[id(result)]
    if isinstance(result, Pair) and isinstance(out, torch.Tensor) and out.dtype == torch.complex32:
        return Pair(result.t.to(torch.float16))
    if isinstance(result, torch.Tensor) and isinstance(out, torch.Tensor) and result.dtype != out.dtype \
            and out.dtype == torch.float16:
        return result.to(torch.float16)
    return result


def in_float32(rule: Rule) -> Rule:
    """The rule, run in float32 on a complex32 node (see the module docstring)."""

    def fn(out, *args, **kwargs):
        up_args = [_up(a) for a in args]
        up_kwargs = {k: _up(v) for k, v in kwargs.items()}
        originals = {id(u): a for u, a in zip(up_args, args)}
        seen = _UpcastResult(out) if isinstance(out, torch.Tensor) else out
        return _down(rule.fn(seen, *up_args, **up_kwargs), out, originals)

    fn.__doc__ = rule.fn.__doc__
    return dataclasses.replace(rule, fn=fn)


def runs_in_float32(node: torch.fx.Node, rule: Rule) -> bool:
    """Whether `rule` runs on `node` in float32: a rule registered with computes=True, on complex32 values."""
    return rule.computes and touches_complex32(node)
