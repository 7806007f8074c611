"""The CPU forms as Inductor compiles them (torch.compile of the rewritten program), against eager torch.fft
on fresh random inputs. The Stockham form (AOTCUDA_FFT_CPU_KERNEL off), float32 and float64: every
transform's rows-outer input takes a rows-innermost copy of its own (a torch.cat of its two halves,
spectral/stockham.py _rows_innermost), and every normalization puts its scale into a pass the transform
already makes. test_fft_forms.py checks the same functions eagerly. The kernel form (aotcuda::fft_rows_cpu,
the default) on the same program, with parameters that require grad: its backward is torch.fft's."""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import export

RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}
GRAD_RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}


class Transforms(torch.nn.Module):
    """An rfft → product → irfft filter (ortho: the scale of both halves) with a complex weight that
    requires grad, a forward-normalized fft of a contiguous pair, and an ifft of that fft's output times 3."""

    def __init__(self, dtype):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(257, dtype=COMPLEX[dtype]))

    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x, norm="ortho") * self.weight, n=x.shape[-1], norm="ortho")
        spectrum = torch.fft.fft(torch.view_as_complex(z), norm="forward")
        back = torch.fft.ifft(spectrum * 3)
        return filtered, torch.view_as_real(spectrum), torch.view_as_real(back)


def _error(actual, expected):
    return ((actual - expected).norm() / expected.norm()).item()


def _rows_innermost_copies(program):
    """The [k, B] shapes of the rows-innermost copies (a cat of two halves of a transposed view)."""
    return [tuple(node.meta["val"].shape) for node in program.graph.nodes
            if node.target is torch.ops.aten.cat.default and len(node.args[0]) == 2
            and node.meta["val"].stride() == (node.meta["val"].shape[1], 1)
            and node.args[0][0].meta["val"].stride()[0] == 1]


def _inputs(dtype):
    def inputs(seed):
        generator = torch.Generator().manual_seed(seed)
        return (torch.randn(6, 512, dtype=dtype, generator=generator),
                torch.randn(5, 48, 2, dtype=dtype, generator=generator))

    return inputs


def _check_compiled(rewritten, model, inputs, dtype):
    module = rewritten.module()
    compiled = torch.compile(module)
    for seed, grad in ((1, False), (2, True)):  # inputs the trace never saw; with grad, as in training
        args = inputs(seed)
        with torch.set_grad_enabled(grad):
            results = compiled(*args)
            expected = model(*args)
        for actual, want in zip(results, expected, strict=True):
            assert actual.shape == want.shape
            assert _error(actual.detach(), want.detach()) <= RTOL[dtype]
        if grad:  # the weight's gradient through the rewritten transforms, against eager's (a pair: re, im)
            sum(result.square().sum() for result in results).backward()
            sum(want.square().sum() for want in expected).backward()
            assert _error(module.weight.grad, torch.view_as_real(model.weight.grad)) <= GRAD_RTOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_compiled_cpu_form_matches_eager_on_fresh_inputs(dtype, monkeypatch):
    monkeypatch.setenv("AOTCUDA_FFT_CPU_KERNEL", "0")
    inputs = _inputs(dtype)
    model = Transforms(dtype)
    rewritten = ReplaceComplexWithRealPass(strict=True)(export(model, inputs(0)))
    # the rfft's rows [512, 6] and the fft's pair [2·48, 5] at least (the irfft's and ifft's inputs too
    # where their eager strides are rows-outer)
    assert {(512, 6), (96, 5)} <= set(_rows_innermost_copies(rewritten))
    _check_compiled(rewritten, model, inputs, dtype)


def test_compiled_cpu_kernel_form_matches_eager_with_grad():
    """The default CPU form: every transform one fft_rows_cpu node; compiled with a weight that requires grad."""
    dtype = torch.float32
    inputs = _inputs(dtype)
    model = Transforms(dtype)
    rewritten = ReplaceComplexWithRealPass(strict=True)(export(model, inputs(0)))
    assert sum(node.target is torch.ops.aotcuda.fft_rows_cpu.default for node in rewritten.graph.nodes) == 4
    _check_compiled(rewritten, model, inputs, dtype)
