"""A complex product before a CPU kernel's c2r or c2c fused into it (spectral/product.py: the op's `weight`),
compiled by Inductor (torch.compile of the rewritten program) and checked against eager torch.fft on fresh random
inputs: one weight for every row, the factors in either order, each row its own weight, a weight that is itself
a transform's output, an inverse c2c, an odd (packed) length, a middle dim, and a product that is also an output
(left unfused)."""

import torch

from aotcuda.kernels import fft_cpu  # noqa: F401  (registers aotcuda::fft_rows_cpu)
from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral.product import factors

from .helpers import export

RTOL = 1e-5
FFT_ROWS_CPU = torch.ops.aotcuda.fft_rows_cpu.default


class Products(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(257, dtype=torch.complex64))
        self.w_odd = torch.nn.Parameter(torch.randn(188, dtype=torch.complex64))
        self.w_c2c = torch.nn.Parameter(torch.randn(96, dtype=torch.complex64))
        self.w_mid = torch.nn.Parameter(torch.randn(33, 1, dtype=torch.complex64))

    def forward(self, x, rows, z, x3, k):
        n = x.shape[-1]
        spectrum = torch.fft.rfft(x)
        filtered = torch.fft.irfft(spectrum * self.w, n=n)  # one weight for every row
        swapped = torch.fft.irfft(self.w * torch.fft.rfft(x, norm="ortho"), n=n, norm="ortho")  # weight first
        per_row = torch.fft.irfft(torch.fft.rfft(x) * torch.view_as_complex(rows), n=n)  # each row its own
        convolved = torch.fft.irfft(torch.fft.rfft(x) * torch.fft.rfft(k, n=n), n=n)  # a computed weight
        c2c = torch.fft.ifft(torch.fft.fft(torch.view_as_complex(z)) * self.w_c2c)  # c2c: a pair's inverse
        odd = torch.fft.irfft(torch.fft.rfft(x[:, :375]) * self.w_odd, n=375)  # odd: two rows a complex row
        middle = torch.fft.irfft(torch.fft.rfft(x3, dim=1) * self.w_mid, n=64, dim=1)  # dim 1 of [3, 64, 5]
        kept = torch.fft.rfft(x[:, :100]) * self.w[:51]  # also an output: the product stays
        return (filtered, swapped, per_row, convolved, torch.view_as_real(c2c), odd, middle,
                torch.fft.irfft(kept, n=100), torch.view_as_real(kept))


def _inputs(seed: int):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(6, 512, generator=generator), torch.randn(6, 257, 2, generator=generator),
            torch.randn(5, 96, 2, generator=generator), torch.randn(3, 64, 5, generator=generator),
            torch.randn(6, 40, generator=generator))


def _error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


def test_products_before_a_c2r_or_c2c_become_its_weight_and_match_eager():
    model = Products()
    rewritten = ReplaceComplexWithRealPass(strict=True)(export(model, _inputs(0)))
    nodes = [node for node in rewritten.graph.nodes if node.target is FFT_ROWS_CPU]
    weighted = [node for node in nodes if len(node.args) > 8 and node.args[8] is not None]
    assert [node.args[4] for node in weighted] == ["c2r", "c2r", "c2r", "c2r", "c2c", "c2r", "c2r"]
    unfused = [node.args[0] for node in nodes if node.args[4] == "c2r" and node not in weighted]
    assert len(unfused) == 1 and factors(unfused[0]) is not None  # `kept`: two users, computed once
    compiled = torch.compile(rewritten.module())
    with torch.no_grad():
        for seed in (1, 2):  # inputs the trace never saw
            args = _inputs(seed)
            for actual, want in zip(compiled(*args), model(*args), strict=True):
                assert actual.shape == want.shape
                assert _error(actual, want) <= RTOL


def test_the_weights_gradient_through_the_op_matches_eager():
    """fft_rows_cpu's backward with a weight (the vector-Jacobian product of torch.fft's transform of x·w),
    eagerly: the gradients of x and w against the complex program's."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 33, 2, generator=generator, requires_grad=True)
    w = torch.randn(33, 2, generator=generator, requires_grad=True)
    out = FFT_ROWS_CPU(x, 1, 64, 64, "c2r", True, 1 / 64, None, w)
    expected = torch.fft.irfft(torch.view_as_complex(x) * torch.view_as_complex(w), n=64)
    assert _error(out.detach(), expected.detach()) <= RTOL
    grad = torch.randn(out.shape, generator=generator)
    ours = torch.autograd.grad(out, (x, w), grad)
    theirs = torch.autograd.grad(expected, (x, w), grad)
    for a, b in zip(ours, theirs, strict=True):
        assert _error(a, b) <= RTOL
