"""unfold_backward (istft's overlap-add) of a broadcast grad: expanded first, it decomposes into torch's one vectorized
index_put (lowering/overlap_add.py), with eager's values, and an istft program over dynamic dims stays small.

No compile: the ExportedProgram lower() would give Inductor, run as it is."""

from __future__ import annotations

import random

import pytest
import torch
from torch.export import Dim

from aotcuda.lowering import torch_fixes
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.overlap_add import UNFOLD_BACKWARD, needs_expanding
from aotcuda.lowering.pipeline import before_compile
from tests.models.denoiser import Denoiser

aten = torch.ops.aten


class UnfoldBackward(torch.nn.Module):
    def __init__(self, input_size, dim, size, step):
        super().__init__()
        self.input_size, self.dim, self.size, self.step = input_size, dim, size, step

    def forward(self, grad):
        return aten.unfold_backward(grad, self.input_size, self.dim, self.size, self.step)


def broadcast_cases(seed: int, count: int):
    """(input_size, dim, size, step, grad shape) with a random subset of the grad's other dims 1 (broadcast),
    windows that overlap (step < size), touch and leave gaps."""
    rng = random.Random(seed)
    for _ in range(count):
        rank = rng.randint(1, 3)
        dim = rng.randrange(rank)
        size, step = rng.randint(1, 7), rng.randint(1, 5)
        input_size = [rng.randint(1, 4) for _ in range(rank)]
        input_size[dim] = size + step * rng.randint(0, 5) + rng.randint(0, step - 1)
        folds = (input_size[dim] - size) // step + 1
        shape = [folds if d == dim else (1 if rng.random() < 0.6 else n) for d, n in enumerate(input_size)]
        yield input_size, dim - rank if rng.random() < 0.3 else dim, size, step, shape + [size]


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual - expected).norm() / expected.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_unfold_backward_of_a_broadcast_grad_decomposes_as_eager_computes_it(dtype, tolerance):
    decomposition = decomposition_table()[UNFOLD_BACKWARD]
    for input_size, dim, size, step, shape in broadcast_cases(seed=7 + len(str(dtype)), count=60):
        grad = torch.randn(shape, dtype=dtype)
        expected = aten.unfold_backward(grad, input_size, dim, size, step)
        actual = decomposition(grad, input_size, dim, size, step)
        assert actual.shape == expected.shape and actual.dtype == dtype
        assert relative_error(actual, expected) <= tolerance, (input_size, dim, size, step, shape)


def test_the_decomposed_program_of_a_broadcast_grad_has_no_loop_and_eagers_values():
    """Exported in lower()'s export step (fake tensors run the patched decomposition there) and decomposed with its
    table: one index_put, no index_add per offset."""
    model = UnfoldBackward([3, 4 * 9 + 32], 1, 32, 4)
    grad = torch.randn(1, 10, 32)
    with torch_fixes.applied("export"):
        ep = torch.export.export(model, (grad,), strict=False)
    ep = ep.run_decompositions(decomposition_table())
    targets = [node.target for node in ep.graph.nodes]
    assert aten.index_add.default not in targets and len(targets) < 30, len(targets)
    for _ in range(3):
        grad = torch.randn(1, 10, 32, dtype=torch.float32)
        assert relative_error(ep.module()(grad), model(grad)) <= 1e-5


def test_an_istft_over_dynamic_dims_reaches_inductor_small_and_with_eagers_values():
    """torch 2.13's loop over the 64 offsets left 589 nodes here (4,173 at n_fft 512); expanded first, the program
    lower() gives Inductor has 86, at any n_fft."""
    torch.manual_seed(0)
    model = Denoiser(n_fft=64, hop=16, hidden=8).eval()
    shapes = {"wav": {0: Dim("batch", min=1, max=8), 1: 16 * Dim("frames", min=8, max=500)}}
    ep = before_compile(model, (torch.randn(2, 16 * 40),), None, shapes).program
    nodes = len(ep.graph.nodes)
    assert nodes < 200, f"{nodes} nodes"
    for batch, frames in ((3, 8), (1, 77), (5, 200)):
        wav = torch.randn(batch, 16 * frames)
        assert relative_error(ep.module()(wav), model(wav)) <= 1e-5


@pytest.mark.parametrize("step", ["export", "decompose"])
def test_the_patch_of_torchs_decomposition_is_undone_after_the_step(step):
    from torch._decomp import decomposition_table as torch_table

    meta = torch._C.DispatchKey.Meta
    before = (torch_table.get(UNFOLD_BACKWARD), UNFOLD_BACKWARD.py_kernels.get(meta))
    with torch_fixes.applied(step):
        during = (torch_table.get(UNFOLD_BACKWARD), UNFOLD_BACKWARD.py_kernels.get(meta))
        assert (during != before) == needs_expanding()
    assert (torch_table.get(UNFOLD_BACKWARD), UNFOLD_BACKWARD.py_kernels.get(meta)) == before
