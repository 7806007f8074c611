"""Decompositions of antialiased resampling (``F.interpolate(..., mode="bilinear" | "bicubic", antialias=True)``,
``aten._upsample_bilinear2d_aa`` and ``aten._upsample_bicubic2d_aa``) into two matrix products with interpolation
weights built from arange and elementwise math, so that the op becomes generated code.

Inductor has no lowering for either op and no C shim (torch 2.11-2.13): a model that resizes with antialias was
refused, its one way out ``allow_fallbacks=True``, a proxy-executor call that aotcuda.load cannot run (sixth new
user, 2026-12-07). Both ops are separable: each output row (column) is a weighted sum of a window of input rows
(columns), the same weights for every channel. The weights are ATen's (``_compute_weights_aa`` in
aten/src/ATen/native/cpu/UpSampleKernel.cpp, PIL's algorithm; the CUDA kernel computes the same): for output index
i, ``center = scale * (i + 0.5)``; the window is the input indices j with
``max(int(center - support + 0.5), 0) <= j < min(int(center + support + 0.5), in_size)``; each weight is
``filter((j - center + 0.5) * invscale)``, divided by the window's sum. ``support`` is half the filter's size (2 for
bilinear, 4 for bicubic), times ``scale`` when downsampling (``scale >= 1``, where ``invscale = 1 / scale``
stretches the filter over the input pixels an output pixel covers). ``scale`` is ATen's
``area_pixel_compute_scale``: ``(in - 1) / (out - 1)`` with align_corners (0 for one output), else ``1 / scale_factor``
where one was given, else ``in / out``. The weights are computed in the input's dtype (float32 for half and
bfloat16, as ATen's accumulate type), the matrix [out, in] zero outside each window. An integer (uint8) input is
not decomposed: ATen computes it in fixed point and rounds, which float products do not reproduce.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _bilinear_filter(x: torch.Tensor) -> torch.Tensor:
    x = x.abs()
    return torch.where(x < 1.0, 1.0 - x, torch.zeros_like(x))


def _bicubic_filter(x: torch.Tensor) -> torch.Tensor:
    a = -0.5  # ATen's aa bicubic coefficient (PIL's), not the -0.75 of non-antialiased bicubic
    x = x.abs()
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return torch.where(x < 1.0, near, torch.where(x < 2.0, far, torch.zeros_like(x)))


def _scale(in_size, out_size, align_corners: bool, scale_factor) -> float:
    """ATen's area_pixel_compute_scale (input pixels per output pixel)."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale_factor is not None and scale_factor > 0:
        return 1.0 / scale_factor
    return in_size / out_size


def _weights(in_size, out_size, align_corners, scale_factor, interp_size: int, filter_fn, dtype, device):
    """The [out_size, in_size] matrix of one dim's antialiased interpolation weights (module docstring)."""
    scale = _scale(in_size, out_size, align_corners, scale_factor)
    stretch = torch.sym_max(scale, 1.0)  # no guard on a symbolic scale: a dynamic size keeps its whole range
    support = interp_size * 0.5 * stretch
    invscale = 1.0 / stretch
    center = scale * (torch.arange(out_size, dtype=dtype, device=device) + 0.5)
    low = (center - support + 0.5).to(torch.int64).clamp(min=0)
    high = (center + support + 0.5).to(torch.int64).clamp(max=in_size)
    j = torch.arange(in_size, device=device)
    inside = (j[None, :] >= low[:, None]) & (j[None, :] < high[:, None])
    w = filter_fn((j.to(dtype)[None, :] - center[:, None] + 0.5) * invscale)
    w = torch.where(inside, w, torch.zeros_like(w))
    total = w.sum(-1, keepdim=True)
    return torch.where(total != 0, w / torch.where(total != 0, total, torch.ones_like(total)), w)


def _upsample_aa(input, output_size, align_corners, scales_h, scales_w, interp_size, filter_fn):
    if not input.is_floating_point():
        # uint8 images: ATen's own path, fixed-point weights then rounding and clamping, which these float products
        # miss by 1 on about half the pixels. Declined: the op stays and lower() refuses it as before.
        return NotImplemented
    out_h, out_w = output_size
    in_h, in_w = input.shape[-2], input.shape[-1]
    compute = input.dtype if input.dtype in (torch.float32, torch.float64) else torch.float32
    wh = _weights(in_h, out_h, align_corners, scales_h, interp_size, filter_fn, compute, input.device)
    ww = _weights(in_w, out_w, align_corners, scales_w, interp_size, filter_fn, compute, input.device)
    x = input.to(compute)
    x = torch.matmul(x, ww.t())  # the horizontal pass first, as ATen's separable kernel
    x = torch.matmul(wh, x)
    return x.to(input.dtype)


def upsample_bilinear2d_aa(input, output_size, align_corners, scales_h=None, scales_w=None):
    return _upsample_aa(input, output_size, align_corners, scales_h, scales_w, 2, _bilinear_filter)


def upsample_bicubic2d_aa(input, output_size, align_corners, scales_h=None, scales_w=None):
    return _upsample_aa(input, output_size, align_corners, scales_h, scales_w, 4, _bicubic_filter)


ANTIALIAS_DECOMPOSITIONS = {
    aten._upsample_bilinear2d_aa.default: upsample_bilinear2d_aa,
    aten._upsample_bicubic2d_aa.default: upsample_bicubic2d_aa,
}
