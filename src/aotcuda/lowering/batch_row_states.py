"""The states of the batch-rows walk (lowering/batch_row_flow.py), what its rules (batch_row_rules.py) read of a
node, and the size arithmetic both share.

A state says, of a value: Rows (its rows lie along one dim; a view that merged that dim with others keeps them as
blocks), FREE (no row reaches it: a weight, a constant), SIZE (a number computed from the batch size), Lost (the walk
cannot follow it) or Mixed (an op before it mixed the rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
import torch
import torch.utils._pytree as pytree


@dataclass(frozen=True)
class Rows:
    """A tensor whose rows lie along ``dim``, that dim of size outer * batch * inner, its index o * batch * inner +
    row * inner + i: a view that merged the batch dim with the dims after it ([batch, 16, 256] -> [batch * 16, 256]:
    each row a block of inner = 16) or before it ([16, batch, 64] -> [16 * batch, 64]: outer = 16 blocks of all rows).
    ``numbers``: the row numbers themselves (torch.arange(x.shape[0])), row-local only as an index of the batch dim."""

    dim: int
    inner: object = 1
    outer: object = 1
    numbers: bool = False


@dataclass(frozen=True)
class Lost:
    reason: str


@dataclass(frozen=True)
class Mixed:
    reason: str


FREE = "free"  # a value the rows do not reach: a parameter, a constant, a shape past dim 0
SIZE = "batch size"  # a number computed from the batch size (x.shape[0], 16 * x.shape[0])


class Mixes(Exception):
    """Raised by a rule: the op mixes rows; the message says how."""


class NotKnown(Exception):
    """Raised by a rule: the op's use of the rows is one the walk cannot follow."""


class Args:
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
        return self.states.get(value, FREE) if isinstance(value, torch.fx.Node) else FREE

    def rank(self, name) -> int:
        return self.values[name].meta["val"].dim()

    def shape(self, name) -> list:
        return [size_of(size) for size in self.values[name].meta["val"].shape]


def has_rows(state) -> bool:
    return isinstance(state, Rows)


def dim_in(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def dims_in(dims, rank: int) -> list[int]:
    """A dim argument as a list of dims in [0, rank); None or [] is every dim (a full reduction)."""
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))
    return [dim_in(d, rank) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]


def packet_of(node):
    return getattr(node.target, "overloadpacket", None)


def size_of(size):
    if isinstance(size, (torch.SymInt, torch.SymFloat)):
        return size.node.expr
    return sympy.sympify(size)


def inner_of(size, symbol):
    """g where a dim's size is the batch size times g, else None."""
    return whole(size / symbol, symbol)


def whole(ratio, symbol):
    """``ratio`` where it is a whole product of sizes (no fraction left, no batch symbol), else None."""
    ratio = sympy.cancel(ratio)
    if symbol in ratio.free_symbols or sympy.fraction(sympy.together(ratio))[1] != 1:
        return None
    return ratio


def free_symbols(value) -> set:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.expr.free_symbols
    return set()


def mentions(value, symbol) -> bool:
    """Whether a tensor's (or tensors') shape holds the batch symbol."""
    return any(symbol in free_symbols(size) for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)
               for size in leaf.shape)
