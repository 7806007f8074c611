"""Antialiased resampling (``F.interpolate(..., antialias=True)``) decomposes into generated code.

Sixth new user (2026-12-07): a spatial transformer that resized with ``mode="bicubic", antialias=True`` (and
``mode="bilinear"``) was refused by lower(): ``aten::_upsample_bicubic2d_aa has no generated code in Inductor and no
C shim``, with ``allow_fallbacks=True`` a proxy-executor call aotcuda.load cannot run. lower()'s decomposition table
now writes both ops as two matrix products with ATen's weights (aotcuda/lowering/antialias.py); these tests check
that run_decompositions(decomposition_table()) leaves no antialiased op and that the program matches eager on fresh
inputs, down and up, by size and by scale factor, with and without align_corners.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from aotcuda.lowering.decompositions import decomposition_table

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}
RESIZES = [dict(scale_factor=0.5), dict(size=(7, 9)), dict(scale_factor=(0.3, 0.7)), dict(size=(40, 3)),
           dict(scale_factor=2.0), dict(size=(1, 1)), dict(scale_factor=0.37)]


class Resize(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, x):
        return F.interpolate(x, antialias=True, **self.options)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.double(), expected.double()
    return float((actual - expected).norm() / expected.norm())


def _no_antialias_op_left(ep) -> None:
    left = [str(node.target) for node in ep.graph.nodes if node.op == "call_function" and "_aa" in str(node.target)]
    assert not left, left


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_antialiased_resampling_decomposes_and_matches_eager(mode, align_corners):
    """float32 at every resize, float64 at two (eager's CPU kernel has no bfloat16 or float16 for these ops)."""
    torch.manual_seed(7)
    for resize, dtype in [*((resize, torch.float32) for resize in RESIZES),
                          (RESIZES[1], torch.float64), (RESIZES[-1], torch.float64)]:
        model = Resize(mode=mode, align_corners=align_corners, **resize)
        ep = torch.export.export(model, (torch.randn(2, 3, 17, 23, dtype=dtype),), strict=False)
        ep = ep.run_decompositions(decomposition_table())
        _no_antialias_op_left(ep)
        x = torch.randn(2, 3, 17, 23, dtype=dtype)
        expected, actual = model(x), ep.module()(x)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, (resize, actual.shape)
        assert relative_error(actual, expected) < TOLERANCE[dtype], (resize, relative_error(actual, expected))


def test_antialiased_resampling_by_a_scale_factor_over_dynamic_sizes_matches_eager():
    """A scale factor over dynamic H and W (multiples of 4): the weights are built from the sizes at each call."""
    model = Resize(mode="bicubic", scale_factor=0.25)
    h, w = Dim("h", min=2, max=64), Dim("w", min=2, max=64)
    ep = torch.export.export(model, (torch.randn(1, 3, 32, 48),), dynamic_shapes=({2: 4 * h, 3: 4 * w},),
                             strict=False).run_decompositions(decomposition_table())
    _no_antialias_op_left(ep)
    for height, width in itertools.product((8, 36, 64), (12, 20)):
        x = torch.randn(1, 3, height, width)
        expected, actual = model(x), ep.module()(x)
        assert actual.shape == expected.shape
        assert relative_error(actual, expected) < TOLERANCE[torch.float32], (height, width)


@pytest.mark.parametrize("align_corners", [False, True])
def test_antialiased_resampling_to_a_fixed_size_from_dynamic_sizes_keeps_the_whole_range(align_corners):
    """A fixed output size from dynamic H and W: the scale is symbolic, and whether it shrinks (scale >= 1, the
    filter stretched) is decided per call; a Python comparison there had recorded a guard `h / 8 >= 1.0`, and the
    program refused every input smaller than the output."""
    model = Resize(mode="bicubic", size=(8, 8), align_corners=align_corners)
    ep = torch.export.export(model, (torch.randn(1, 3, 32, 48),),
                             dynamic_shapes=({2: Dim("h", min=2, max=64), 3: Dim("w", min=2, max=64)},),
                             strict=False).run_decompositions(decomposition_table())
    _no_antialias_op_left(ep)
    for height, width in [(32, 48), (4, 5), (64, 9), (8, 8), (2, 2)]:
        x = torch.randn(1, 3, height, width)
        assert relative_error(ep.module()(x), model(x)) < TOLERANCE[torch.float32], (height, width)


def test_a_uint8_image_is_not_decomposed_into_values_eager_does_not_give():
    """ATen resizes uint8 in fixed point and rounds; float products truncated back to uint8 were 1 off on about half
    the pixels (a first version of the decomposition). An integer input keeps the op (refused by lower() as before)."""
    x = torch.randint(0, 256, (1, 3, 17, 23), dtype=torch.uint8)
    for mode in ("bilinear", "bicubic"):
        ep = torch.export.export(Resize(mode=mode, scale_factor=0.5), (x,), strict=False)
        ep = ep.run_decompositions(decomposition_table())
        left = [str(node.target) for node in ep.graph.nodes if "_aa" in str(node.target)]
        assert left == [f"aten._upsample_{mode}2d_aa.default"], left


def test_a_uint8_image_left_refused_is_told_to_resize_the_float_image():
    """The refusal of a uint8 image's antialiased resize (kept, above) said only "rewrite that line of the model"; it
    now says why a uint8 image stays and what lowers: the float image, rounded after."""
    import aotcuda

    x = torch.randint(0, 256, (1, 3, 17, 23), dtype=torch.uint8)
    with pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        aotcuda.lower(Resize(mode="bilinear", scale_factor=0.5), (x,), device="cpu")
    message = str(caught.value)
    assert "antialiased resizing of an integer (uint8) image" in message and "img.float()" in message, message
    assert "rewrite that line" not in message, message
