"""The rule table: which op overloads the pass can rewrite, and the function that rewrites each one.

A rule is a small function registered for one or more op overloads:

    @register(aten.mul.Tensor, aten.mul.Scalar)
    def mul(out, a, b):
        ...

It is called with `out`, the original node's meta["val"] (fake tensor(s) with the eager result's
dtype and shape, which settles type promotion), followed by the op's own arguments, in which every
complex tensor is a `Pair` (see pair.py) and every real tensor a plain tensor. It returns a Pair for a
complex result, a tensor for a real one, a list of those for ops returning several, or None for an op
that disappears. It is written in plain torch ops: the pass traces it with make_fx, so whatever it
calls becomes the new graph's nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule: the op it rewrites, the function, its family (module name) and, for rules that cover only
    some arguments of their op, `refuses(node) -> reason or None`, asked by the scan before any change."""

    op: torch._ops.OpOverload | Callable
    fn: Callable
    family: str
    refuses: Callable[[torch.fx.Node], str | None] | None = None

    @property
    def summary(self) -> str:
        doc = (self.fn.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


RULES: dict[object, Rule] = {}


def op_name(op: object) -> str:
    """"aten.mul.Tensor" for an op overload; the qualified name for anything else."""
    if isinstance(op, torch._ops.OpOverload):
        namespace = op.namespace
        return f"{namespace}.{op._opname}.{op._overloadname}"
    if isinstance(op, torch._ops.HigherOrderOperator):
        return f"torch.ops.higher_order.{op.name()}"
    return f"{getattr(op, '__module__', '')}.{getattr(op, '__name__', repr(op))}".lstrip(".")


def register(*ops: object, refuses: Callable[[torch.fx.Node], str | None] | None = None
             ) -> Callable[[Callable], Callable]:
    """Register the decorated function as the rule of every op overload in `ops` (see Rule.refuses)."""

    def decorate(fn: Callable) -> Callable:
        family = fn.__module__.rsplit(".", 1)[-1]
        for op in ops:
            if op in RULES:
                raise ValueError(f"{op_name(op)} already has a rule: {RULES[op].fn.__qualname__}")
            RULES[op] = Rule(op, fn, family, refuses)
        return fn

    return decorate


def rule_for(op: object) -> Rule | None:
    """The rule of an op overload, or None. Imports the rule modules on first use."""
    from aotcuda.passes.complex_to_real import rules  # noqa: F401  (fills RULES)

    return RULES.get(op)
