"""Rule calls repeated on the same values: the second reuses the first one's result (common subexpressions).

Models repeat work on complex values that the rewrite would otherwise trace twice: a RoPE block slices
and reshapes its rotation table once for q and once for k, a loop body slices the same table on every
step. Every op a rule emits costs the rewrite a fake-tensor dispatch with symbolic shapes (about a
millisecond), and the graph a node that Inductor would only merge again later. So a rule node whose op
and input values are those of an earlier rule node returns the earlier result.

Values are compared by identity (tensors and pairs: the same traced value), SymInts by their symbolic
expression, everything else by type and value (floats by their exact bits, so −0.0 ≠ 0.0). Ops that
draw random numbers or mutate an argument are never reused.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.replay import plain_key


def reusable_op(op: object) -> bool:
    """Whether two calls of `op` on the same values are interchangeable: pure and deterministic."""
    if not isinstance(op, torch._ops.OpOverload):
        return False
    return not op._schema.is_mutable and torch.Tag.nondeterministic_seeded not in op.tags


def _leaf_key(value: object, alive: list) -> object:
    """A hashable stand-in for one argument; None if the argument cannot be compared."""
    if isinstance(value, (Pair, torch.Tensor)):
        alive.append(value)  # holds the value, so that its id stays its own while the entry lives
        return ("value", id(value))
    return plain_key(value)


def call_key(op: object, args, kwargs) -> tuple[tuple, list] | None:
    """(key, values the key refers to by id) for a call, or None when it may not be reused."""
    if not reusable_op(op):
        return None
    leaves, spec = pytree.tree_flatten((args, kwargs), is_leaf=lambda v: isinstance(v, Pair))
    alive: list = []
    keys = tuple(_leaf_key(leaf, alive) for leaf in leaves)
    if any(k is None for k in keys):
        return None
    return (op, str(spec), keys), alive


class RuleResults:
    """The results of the rule calls of one trace, by op and input values."""

    def __init__(self):
        self._results: dict[tuple, tuple[list, object]] = {}

    def reuse_or_run(self, op: object, args, kwargs, run: Callable[[], object]) -> object:
        """The result of an earlier call of `op` on the same values, else `run()` (remembered)."""
        found = call_key(op, args, kwargs)
        if found is None:
            return run()
        key, alive = found
        entry = self._results.get(key)
        if entry is None:
            entry = self._results[key] = (alive, run())
        return entry[1]
