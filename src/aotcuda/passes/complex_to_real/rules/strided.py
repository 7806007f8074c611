"""Rules that address a complex tensor's memory directly: as_strided (and its scatter), resize.

The pair is laid out as eager lays out the complex value it stands for (layout.py: every rule result gets eager's
strides ×2 with the pair dim last, stride 1), so complex element k of the storage is the pair's real elements 2k
and 2k + 1: a complex view (size, stride, offset) is the pair's view (size + [2], stride·2 + [1], offset·2).
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair, pair_shape
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.rules.indexing import source_pair

aten = torch.ops.aten


def pair_strides(stride) -> list:
    return [*(2 * s for s in stride), 1]


def pair_offset(offset):
    return None if offset is None else 2 * offset


@register(aten.as_strided.default)
def as_strided(out, a, size, stride, storage_offset=None):
    """The pair's view (size + [2], stride·2 + [1], offset·2) of the same memory."""
    return Pair(aten.as_strided.default(a.t, pair_shape(size), pair_strides(stride), pair_offset(storage_offset)))


@register(aten.as_strided_scatter.default)
def as_strided_scatter(out, a, src, size, stride, storage_offset=None):
    """src written into the pair's view (size + [2], stride·2 + [1], offset·2) of a copy of a."""
    return Pair(aten.as_strided_scatter.default(a.t, source_pair(out, src), pair_shape(size), pair_strides(stride),
                                                pair_offset(storage_offset)))


@register(aten.resize.default)
def resize(out, a, size, *, memory_format=None):
    """The pair resized to size + [2]: the same storage prefix, read in the same order (elements beyond a's are
    uninitialised, as in eager)."""
    return Pair(aten.resize.default(a.t, pair_shape(size), memory_format=memory_format))
