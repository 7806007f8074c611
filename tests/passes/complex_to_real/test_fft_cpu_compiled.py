"""The CPU form as Inductor compiles it (torch.compile of the rewritten program), against eager torch.fft
on fresh random inputs, float32 and float64: every transform's rows-outer input takes a rows-innermost
copy (force_stride_order; a no-op where Inductor already wrote it that way), and every normalization puts
its scale into a pass the transform already makes (spectral/stockham.py). test_fft_forms.py checks the
same functions eagerly, where the copy is a plain copy."""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import export

RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}
FORCE = torch.ops.prims.inductor_force_stride_order.default


class Transforms(torch.nn.Module):
    """An rfft → product → irfft filter (ortho: the scale of both halves), a forward-normalized fft of a
    contiguous pair, and an ifft of that fft's output times 3."""

    def __init__(self, dtype):
        super().__init__()
        self.register_buffer("weight", torch.randn(257, dtype=COMPLEX[dtype]))

    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x, norm="ortho") * self.weight, n=x.shape[-1], norm="ortho")
        spectrum = torch.fft.fft(torch.view_as_complex(z), norm="forward")
        back = torch.fft.ifft(spectrum * 3)
        return filtered, torch.view_as_real(spectrum), torch.view_as_real(back)


def _error(actual, expected):
    return ((actual - expected).norm() / expected.norm()).item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_compiled_cpu_form_matches_eager_on_fresh_inputs(dtype):
    def inputs(seed):
        generator = torch.Generator().manual_seed(seed)
        return (torch.randn(6, 512, dtype=dtype, generator=generator),
                torch.randn(5, 48, 2, dtype=dtype, generator=generator))

    model = Transforms(dtype)
    rewritten = ReplaceComplexWithRealPass(strict=True)(export(model, inputs(0)))
    # The rfft's rows and the fft's pair, and the irfft's and ifft's inputs, whose eager strides are rows-outer
    # (Inductor wrote them rows-innermost: there the copy is a no-op).
    forced = [tuple(node.args[0].meta["val"].shape) for node in rewritten.graph.nodes if node.target is FORCE]
    assert forced == [(512, 6), (514, 6), (96, 5), (96, 5)]
    compiled = torch.compile(rewritten.module())
    for seed in (1, 2):  # inputs the trace never saw
        args = inputs(seed)
        for actual, expected in zip(compiled(*args), model(*args), strict=True):
            assert actual.shape == expected.shape
            assert _error(actual, expected) <= RTOL[dtype]
