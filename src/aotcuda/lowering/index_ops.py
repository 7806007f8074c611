"""The indexing table of the index ranges (aotcuda.lowering.index_ranges): op → which argument holds
indices into which dim of which operand, and whether eager takes negative indices there (``x[i]`` does,
``embedding`` does not), one row per kind of indexing op (``INDEXING``), and the readers of a node's index
arguments by that table (``uses``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import sympy
import torch

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


def size_of(node, dim: int | None = None):
    """A node's size along dim (its numel when dim is None), as a sympy expression; None if unknown."""
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor):
        return None
    if dim is None:
        return sympy.sympify(expression_of(value.numel()))
    if value.dim() == 0:
        return None
    return sympy.sympify(expression_of(value.shape[dim % value.dim()]))


def expression_of(value):
    return value.node.expr if isinstance(value, torch.SymInt) else value


def argument(node: torch.fx.Node, position: int, name: str, default=None):
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
        index, operand = argument(node, *self.index), argument(node, *self.operand)
        dim = argument(node, *self.dim) if isinstance(self.dim, tuple) else self.dim
        size = size_of(operand, dim) if dim is None or isinstance(dim, int) else None
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
        indices, operand = argument(node, *self.indices) or [], argument(node, *self.operand)
        found, dim = [], 0
        for index in indices:
            value = index.meta.get("val") if isinstance(index, torch.fx.Node) else None
            if isinstance(value, torch.Tensor) and value.dtype in (torch.bool, torch.uint8):
                dim += value.dim()
                continue
            size = size_of(operand, dim)
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
        index, count = argument(node, *self.index), argument(node, *self.count, -1)
        if not _is_index(index) or not isinstance(count, (int, torch.SymInt)) or (isinstance(count, int) and count < 0):
            return []
        size = sympy.sympify(expression_of(count))
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


def uses(rule, node) -> list[IndexUse]:
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
