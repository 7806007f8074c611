"""F.affine_grid over a dynamic height and width exports (aotcuda.lowering.affine_grid).

Sixth new user (2026-12-07): a spatial transformer (`F.affine_grid(theta, x.shape)` then `F.grid_sample`) lowered with
Dims on H and W failed in the export step with "Constraints violated (h, w)! ... specialized it to be a constant (16)",
and aotcuda's note said "a tensor op needs h equal to a size 16 that is not dynamic, most often another input's dim
left static": the cause was torch's `affine_grid_generator(Tensor theta, int[] size, ...)`, which reads the sizes as
Python ints (torch alone fails the same). The export step now computes such a grid with arange math.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from aotcuda.lowering import torch_fixes
from aotcuda.lowering.exporting import export_program

TORCHS_AFFINE_GRID = F.affine_grid


class Transformer(torch.nn.Module):
    def __init__(self, align_corners):
        super().__init__()
        self.align_corners = align_corners

    def forward(self, x, theta):
        grid = F.affine_grid(theta, x.shape, align_corners=self.align_corners)
        return F.grid_sample(x, grid, align_corners=self.align_corners), grid


class Volume(torch.nn.Module):
    def forward(self, x, theta):
        return F.affine_grid(theta, x.shape, align_corners=False)


def relative_error(actual, expected) -> float:
    return float((actual.double() - expected.double()).norm() / expected.double().norm())


@pytest.mark.parametrize("align_corners", [False, True])
def test_a_spatial_transformer_over_dynamic_height_and_width_exports_and_matches_eager(align_corners):
    torch.manual_seed(3)
    model = Transformer(align_corners)
    batch = Dim("b", max=8)
    with torch_fixes.applied("export"):
        ep = export_program(model, (torch.randn(2, 3, 16, 16), torch.randn(2, 2, 3)), {},
                            ({0: batch, 2: Dim("h", min=2, max=64), 3: Dim("w", min=2, max=64)}, {0: batch}))
    assert F.affine_grid is TORCHS_AFFINE_GRID, "the patch is undone after the step"
    for b, h, w in [(2, 9, 13), (3, 40, 17), (1, 2, 2), (2, 16, 16)]:
        x, theta = torch.randn(b, 3, h, w), torch.randn(b, 2, 3)
        (sampled, grid), (eager_sampled, eager_grid) = ep.module()(x, theta), model(x, theta)
        assert grid.shape == eager_grid.shape and relative_error(grid, eager_grid) < 1e-6, (h, w)
        assert relative_error(sampled, eager_sampled) < 1e-5, (h, w, relative_error(sampled, eager_sampled))


def test_a_volumetric_grid_over_dynamic_sizes_matches_eager_and_static_sizes_keep_torchs_op():
    with torch_fixes.applied("export"):
        ep = export_program(Volume(), (torch.randn(1, 2, 4, 6, 8), torch.randn(1, 3, 4)), {},
                            ({2: Dim("d", min=2, max=16), 4: Dim("w", min=2, max=16)}, None))
        static = export_program(Volume(), (torch.randn(1, 2, 4, 6, 8), torch.randn(1, 3, 4)), {}, None)
    for d, w in [(3, 5), (16, 2)]:
        x, theta = torch.randn(1, 2, d, 6, w), torch.randn(1, 3, 4)
        assert relative_error(ep.module()(x, theta), Volume()(x, theta)) < 1e-6
    ops = {str(node.target) for node in static.graph.nodes if node.op == "call_function"}
    assert "aten.affine_grid_generator.default" in ops, ops


def test_a_dynamic_size_of_one_with_align_corners_gives_eagers_zero():
    """Review (2026-12-07): with align_corners=True the coordinates were i * 2 / max(n - 1, 1) - 1, so a dynamic dim
    of size 1 at a call gave -1 where ATen's linspace_from_neg_one gives 0 (one step)."""
    torch.manual_seed(4)
    model = Transformer(True)
    with torch_fixes.applied("export"):
        ep = export_program(model, (torch.randn(1, 3, 8, 8), torch.randn(1, 2, 3)), {},
                            ({2: Dim("h", min=1, max=64), 3: Dim("w", min=1, max=64)}, None))
    for h, w in [(1, 5), (4, 1), (1, 1)]:
        x, theta = torch.randn(1, 3, h, w), torch.randn(1, 2, 3)
        grid, eager_grid = ep.module()(x, theta)[1], model(x, theta)[1]
        assert torch.allclose(grid, eager_grid, rtol=1e-5, atol=1e-6), (h, w, grid, eager_grid)
