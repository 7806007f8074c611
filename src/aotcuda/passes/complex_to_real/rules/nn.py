"""Neural-network rules: convolution (every rank, transposed, grouped, with bias) and average pooling on complex
values.

A complex convolution is bilinear, so (xr + i·xi) ⋆ (wr + i·wi) = (xr⋆wr − xi⋆wi) + i·(xr⋆wi + xi⋆wr): four real
convolutions, run here as one. The input's parts are stacked on the batch dim ([xr; xi], batch 2N) and the weight's
on the output channels, inside each group ([g, 2, C/g] channels: the group of every channel stays the one eager
gives it, for plain and transposed weights alike), so one real convolution returns all four products, which a
subtraction and an addition combine. Eager's complex convolution uses Gauss's three-product form, whose rounding
differs from this (exact) one by rounding only. Average pooling is linear and per channel: the pair dim is moved
in front of the pooled dims and folded into the channels, so the real pool averages each part on its own.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.pair_algebra import cast, result_dtype
from aotcuda.passes.complex_to_real.registry import register

aten = torch.ops.aten


def _stacked_weight(w: Pair, groups: int, transposed: bool) -> torch.Tensor:
    """The weight's parts as 2× the output channels, laid out [groups, part, channels per group]."""
    t = w.t.movedim(-1, 0)  # [2, *weight]
    if transposed:  # [C_in, C_out/g, *k]: output channels are dim 1, the same for every group
        return t.movedim(0, 1).flatten(1, 2)
    c_out = w.shape[0]
    return t.unflatten(1, (groups, c_out // groups)).transpose(0, 1).flatten(0, 2)


@register(aten.convolution.default, computes=True)
def convolution(out, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """(xr⋆wr − xi⋆wi, xr⋆wi + xi⋆wr) from one real convolution of the stacked parts, plus the bias."""
    dtype = result_dtype(out)
    x, w = cast(x, dtype), cast(w, dtype)
    n = x.shape[0]
    both = aten.convolution.default(torch.cat([x.re, x.im], 0), _stacked_weight(w, groups, transposed), None,
                                    stride, padding, dilation, transposed, output_padding, groups)
    c_out = both.shape[1] // 2
    parts = both.unflatten(1, (groups, 2, c_out // groups))  # [2N, g, part of w, C/g, *spatial]
    xr_w, xi_w = parts[:n], parts[n:]
    re = (xr_w[:, :, 0] - xi_w[:, :, 1]).flatten(1, 2)
    im = (xr_w[:, :, 1] + xi_w[:, :, 0]).flatten(1, 2)
    result = torch.stack([re, im], -1)
    if bias is not None:
        result = result + cast(bias, dtype).t.reshape(c_out, *[1] * (result.ndim - 3), 2)
    return Pair(result)


def _pool_parts(pool, a: Pair, pooled_dims: int, *args) -> Pair:
    """`pool` over the last `pooled_dims` complex dims of each part: the pair dim moved in front of them and
    folded into the leading dims (one channel dim, as an unbatched pool takes), then put back last."""
    t = a.t.movedim(-1, -1 - pooled_dims)
    lead = t.shape[:-pooled_dims]
    pooled = pool(t.flatten(0, len(lead) - 1), *args)
    return Pair(pooled.unflatten(0, lead).movedim(-1 - pooled_dims, -1))


@register(aten.avg_pool2d.default, computes=True)
def avg_pool2d(out, a, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The real avg_pool2d of each part (the pair dim folded into the channels)."""
    return _pool_parts(aten.avg_pool2d.default, a, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override)


@register(aten.avg_pool3d.default, computes=True)
def avg_pool3d(out, a, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The real avg_pool3d of each part (the pair dim folded into the channels)."""
    return _pool_parts(aten.avg_pool3d.default, a, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override)
