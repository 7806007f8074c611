"""Whole-tensor writes (``buffer.copy_(x)``, ``buffer.fill_(t)``) keep their cast and broadcast through
run_decompositions.

Why: eager ``self.r.copy_(x)`` converts x to r's dtype and device and broadcasts it to r's shape. When r
is a whole buffer (not a view of one), torch's functionalization in ExportedProgram.run_decompositions
(torch 2.11 and 2.13) replaces r's new value by x itself: the cast and the broadcast are gone, so every
later read of r, and the buffer write, sees x's dtype and shape. Silently: a float32 buffer written with
float64 (or int64) x makes ``self.r + 1`` float64 (or int64); a [4] buffer written with a [1] x makes it
[1]; ``self.r.fill_(t)`` with a 0-dim t makes it 0-dim. A write into a view of a buffer
(``self.r[1:3].copy_(x)``) is functionalized as ``aten.copy`` and keeps both.

So before the decompositions, each such write whose value differs from its destination in dtype, device
or shape gets its value converted explicitly: ``_to_copy(x, dtype=r.dtype, device=r.device)`` and
``expand_as(·, r)``, the same conversion copy_ makes; ``fill_.Tensor(r, t)`` becomes ``copy_(r, ·)`` of
the converted t. The writes then carry their destination's dtype and shape, and functionalization's
replacement is right. Writes that already match are left as they are.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import statically_known_true

from aotcuda.passes.emit import emit

aten = torch.ops.aten

# Whole-tensor writes whose value functionalization substitutes for the destination.
_WRITES = (aten.copy_.default, aten.fill_.Tensor)


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dim() == b.dim() and all(statically_known_true(x == y) for x, y in zip(a.shape, b.shape))


def _inserted(graph: torch.fx.Graph, write: torch.fx.Node, op, args: tuple, kwargs: dict) -> torch.fx.Node:
    return emit(graph, op, args, kwargs, like=write)  # the conversion shares the write's source metadata


def convert_whole_tensor_writes(ep: ExportedProgram) -> int:
    """Make every copy_/fill_.Tensor in ep's (pre-decomposition) graph write a value of its destination's
    dtype, device and shape, in place (see the module doc). Returns how many writes it changed."""
    graph, changed = ep.graph, 0
    writes = [node for target in _WRITES for node in graph.find_nodes(op="call_function", target=target)]
    for write in writes:
        destination, value = write.args[0], write.args[1]
        dst = destination.meta.get("val") if isinstance(destination, torch.fx.Node) else None
        src = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        if not isinstance(dst, torch.Tensor) or not isinstance(src, torch.Tensor):
            continue
        fill = write.target is aten.fill_.Tensor
        cast = src.dtype != dst.dtype or src.device != dst.device
        expand = fill or not _same_shape(src, dst)
        if not (cast or expand):
            continue
        with graph.inserting_before(write):
            if cast:
                value = _inserted(graph, write, aten._to_copy.default, (value,),
                                  {"dtype": dst.dtype, "device": dst.device})
            if expand:
                value = _inserted(graph, write, aten.expand_as.default, (value, destination), {})
        if fill:
            write.target = aten.copy_.default
        write.args = (destination, value, *write.args[2:])
        changed += 1
    if changed:
        ep.graph_module.recompile()
    return changed
