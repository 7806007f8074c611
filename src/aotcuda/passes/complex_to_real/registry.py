"""The rule table: which op overloads the pass can rewrite, and the function that rewrites each one.

A rule is a small function registered for one or more op overloads:

    @register(aten.mul.Tensor, aten.mul.Scalar, computes=True)
    def mul(out, a, b):
        ...

It is called with `out`, the original node's meta["val"] (fake tensor(s) with the eager result's
dtype and shape, which settles type promotion), followed by the op's own arguments, in which every
complex tensor is a `Pair` (see pair.py) and every real tensor a plain tensor. It returns a Pair for a
complex result, a tensor for a real one, a list of those for ops returning several, or None for an op
that disappears. It is written in plain torch ops: the pass traces it with make_fx, so whatever it
calls becomes the new graph's nodes.

Policy is declared at registration, never inferred from where a rule lives: ``computes=True`` marks a
rule that does arithmetic (rounding matters), which on complex32 values runs in float32 as eager does
(half.py); a rule without it only moves or casts values. ``refuses=`` names the arguments it does not
cover (Rule.refuses). `family`, the rule's module name, only groups the rules in docs/ops.md.

Rules are registered for ATen overloads only; `rule_for` also finds them for other spellings of the same
op:

- a ``*_copy`` view op (``aten.permute_copy.default``, which copy-op dialects hold instead of the view):
  the rule of the view it copies (`view_of_copy`), its result copied into a fresh contiguous tensor, as
  the copy op returns;
- the ops of a Dialect, which the module that knows the dialect adds (`add_dialect`): a dialect op that
  wraps an ATen overload gets that overload's rule, and a dialect's own overloads get the rules it adapts
  from ATen rules. The table knows no dialect itself: aotcuda.executorch adds ExecuTorch's Edge dialect.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.pair import Pair


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule: the op it rewrites, the function, its family (the module it is written in: the section of
    docs/ops.md), for rules that cover only some arguments of their op `refuses(node) -> reason or None`,
    asked by the scan before any change, and `computes`: it does arithmetic, so on complex32 values it
    runs in float32 (see half.py; declared at registration)."""

    op: torch._ops.OpOverload | Callable
    fn: Callable
    family: str
    refuses: Callable[[torch.fx.Node], str | None] | None = None
    computes: bool = False

    @property
    def summary(self) -> str:
        doc = (self.fn.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


RULES: dict[object, Rule] = {}
# Rules of ops the installed torch lacks (aten::cholesky since torch 2.14), by qualified name: never matched (no
# program holds the op), kept so that docs/ops.md and its coverage read the same on every supported torch.
RULES_OF_ABSENT_OPS: dict[str, Rule] = {}


@dataclasses.dataclass(frozen=True)
class Dialect:
    """Another spelling of ATen ops, added to the table by the module that knows it (`add_dialect`).

    wrapped(op) -> the OpOverload a dialect op wraps (same schema, so the overload's rule applies as is),
        or None for an op that wraps none;
    rule_of(op) -> for an op of the dialect's own (an OpOverload or not), a rule adapted from an ATen rule,
        or None.
    """

    name: str
    wrapped: Callable[[object], torch._ops.OpOverload | None]
    rule_of: Callable[[object], Rule | None]


DIALECTS: list[Dialect] = []


def add_dialect(dialect: Dialect) -> None:
    """Let rule_for and op_name see `dialect`'s ops (once per dialect)."""
    if dialect not in DIALECTS:
        DIALECTS.append(dialect)
        _derived_rule.cache_clear()


def op_name(op: object) -> str:
    """"aten.mul.Tensor" for an op overload, "aten.mul.Tensor (EdgeOpOverload)" for a dialect op that
    wraps one; the qualified name for anything else (a name string as it is)."""
    if isinstance(op, str):
        return op
    if isinstance(op, torch._ops.OpOverload):
        namespace = op.namespace
        return f"{namespace}.{op._opname}.{op._overloadname}"
    aten_op = wrapped_overload(op)
    if aten_op is not None:
        return f"{op_name(aten_op)} ({type(op).__name__})"
    if isinstance(op, torch._ops.HigherOrderOperator):
        return f"torch.ops.higher_order.{op.name()}"
    return f"{getattr(op, '__module__', '')}.{getattr(op, '__name__', repr(op))}".lstrip(".")


def register(*ops: object, refuses: Callable[[torch.fx.Node], str | None] | None = None,
             computes: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated function as the rule of every op overload in `ops` (see Rule.refuses and
    Rule.computes)."""

    def decorate(fn: Callable) -> Callable:
        family = fn.__module__.rsplit(".", 1)[-1]
        for op in ops:
            if op in RULES:
                raise ValueError(f"{op_name(op)} already has a rule: {RULES[op].fn.__qualname__}")
            RULES[op] = Rule(op, fn, family, refuses, computes)
        return fn

    return decorate


def register_where_present(name: str, computes: bool = False) -> Callable[[Callable], Callable]:
    """``register`` for the ATen overload ``name`` ("aten.cholesky.default") where the installed torch has it;
    where it does not, the rule is kept in RULES_OF_ABSENT_OPS under the name, for the docs only."""
    _, packet, overload = name.split(".")
    op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
    if op is not None:
        return register(op, computes=computes)

    def keep(fn: Callable) -> Callable:
        RULES_OF_ABSENT_OPS[name] = Rule(name, fn, fn.__module__.rsplit(".", 1)[-1], None, computes)
        return fn

    return keep


def rule_for(op: object) -> Rule | None:
    """The rule of an op overload, of the dialect op that wraps it, or of the view a ``*_copy`` op copies
    (see the module docstring); None if there is none. Imports the rule modules on first use."""
    from aotcuda.passes.complex_to_real import rules  # noqa: F401  (fills RULES)

    rule = RULES.get(op)
    if rule is not None or op is None:
        return rule
    return _derived_rule(op)


def wrapped_overload(op: object) -> torch._ops.OpOverload | None:
    """The overload an op stands for: an OpOverload itself; for a dialect op, the overload it wraps (the
    first added Dialect that knows it); None for anything else."""
    if isinstance(op, torch._ops.OpOverload):
        return op
    return next((o for o in (dialect.wrapped(op) for dialect in DIALECTS) if o is not None), None)


def _dialect_rule(op: object) -> Rule | None:
    return next((r for r in (dialect.rule_of(op) for dialect in DIALECTS) if r is not None), None)


@functools.cache
def _derived_rule(op: object) -> Rule | None:
    aten_op = wrapped_overload(op)
    if aten_op is None:
        return _dialect_rule(op)
    rule = RULES.get(aten_op) or _copy_form_rule(aten_op) or _dialect_rule(aten_op)
    if rule is None or rule.op is op:
        return rule
    refuses = rule.refuses
    if refuses is not None:  # refusal checks compare node.target with ATen overloads: show them that one
        def refuses_on_aten(node: torch.fx.Node, refuses=refuses, target=rule.op) -> str | None:
            return refuses(_NodeAs(node, target))

        refuses_on_aten.__doc__ = refuses.__doc__
        rule = dataclasses.replace(rule, refuses=refuses_on_aten)
    return rule


def view_of_copy(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The view a ``*_copy`` op copies: ``aten.X_copy.<overload>`` → ``aten.X.<overload>`` when that is a
    view op (its result aliases its input) with the same arguments; None for any other op."""
    name = op._opname
    if op.namespace != "aten" or not name.endswith("_copy") or op._overloadname.endswith("out"):
        return None
    view = getattr(getattr(torch.ops.aten, name[: -len("_copy")], None), op._overloadname, None)
    if not isinstance(view, torch._ops.OpOverload) or not view.is_view:
        return None
    same_arguments = [a.name for a in view._schema.arguments] == [a.name for a in op._schema.arguments]
    return view if same_arguments else None


def _copy_form_rule(op: torch._ops.OpOverload) -> Rule | None:
    """The rule of a ``*_copy`` view op: its view's rule, each result then copied into a fresh
    contiguous tensor (the copy op's result never aliases its input)."""
    view = view_of_copy(op)
    view_rule = RULES.get(view) if view is not None else None
    if view_rule is None:
        return None
    view_fn = view_rule.fn

    def copy_rule(out, *args, **kwargs):
        return pytree.tree_map(_fresh, view_fn(out, *args, **kwargs), is_leaf=_is_pair)

    copy_rule.__doc__ = f"As {op_name(view_rule.op)}, into a fresh contiguous tensor."
    copy_rule.__name__ = copy_rule.__qualname__ = f"copy_of({view_fn.__qualname__})"
    return Rule(op, copy_rule, view_rule.family, view_rule.refuses, view_rule.computes)


def _is_pair(value: object) -> bool:
    return isinstance(value, Pair)


def _fresh(value: object) -> object:
    if isinstance(value, Pair):
        return Pair(value.t.clone(memory_format=torch.contiguous_format))
    if isinstance(value, torch.Tensor):
        return value.clone(memory_format=torch.contiguous_format)
    return value


class _NodeAs:
    """A node as seen by a refusal check written for ATen: its target is the ATen overload, every other
    attribute is the node's own."""

    __slots__ = ("_node", "target")

    def __init__(self, node: torch.fx.Node, target: torch._ops.OpOverload):
        self._node, self.target = node, target

    def __getattr__(self, name: str):
        return getattr(self._node, name)
