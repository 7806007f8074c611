"""Higher-order ops with subgraphs: torch.cond, while_loop, scan and map with complex values inside.

The interpreter hands every subgraph argument to these rules as a function of real tensors, already
rewritten (see subgraphs.py). Each rule calls its op with complex operands as their pairs and wraps the
results that were complex in eager as pairs again. Pairs keep the complex dims first and the pair dim
last, so the ops' dim-0 conventions (scan's and map's sliced dim, while_loop's carried shapes) hold.
"""

from __future__ import annotations

import torch
import torch._higher_order_ops  # noqa: F401  (registers while_loop, scan, map_impl)
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import register

higher_order = torch.ops.higher_order


def _as_tensors(tree):
    return pytree.tree_map(lambda v: v.t if isinstance(v, Pair) else v, tree)


def _as_pairs_where_complex(result, out):
    """Wrap every result whose eager value (in `out`, the node's meta["val"]) is complex as a Pair."""
    results, spec = pytree.tree_flatten(result)
    originals = pytree.tree_leaves(out)
    if len(results) != len(originals):
        raise ValueError(f"the op returned {len(results)} values where eager returned {len(originals)}")
    wrapped = [Pair(r) if isinstance(o, torch.Tensor) and o.dtype.is_complex else r
               for r, o in zip(results, originals)]
    return pytree.tree_unflatten(wrapped, spec)


def _call_on_pairs(op):
    def rule(out, *args, **kwargs):
        args, kwargs = _as_tensors((args, kwargs))
        return _as_pairs_where_complex(op(*args, **kwargs), out)

    rule.__doc__ = (f"`{op.name()}` with complex operands and results as pairs; every subgraph rewritten "
                    "by these same rules.")
    return rule


SUBGRAPH_OPS = [higher_order.cond]
for _name in ("while_loop", "scan", "map_impl"):
    if hasattr(higher_order, _name):
        SUBGRAPH_OPS.append(getattr(higher_order, _name))

for _op in SUBGRAPH_OPS:
    register(_op)(_call_on_pairs(_op))
