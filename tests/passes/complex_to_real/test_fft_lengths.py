"""Every transform kind (r2c, c2c, c2r) × length class × normalization against eager, in float32 and float64.

Length classes and the plan each one takes (spectral/plan.py): a power of two that is one DFT product
(64) and one that is split (512 = 16·32, 4096 = 64·64), a smooth composite (400 = 20·20, 2·3·5·7·11 =
2310), a prime that is one product (251) and one that runs as Bluestein (1031). One program per (length,
dtype) holds all nine transforms (three kinds × three normalizations), so each case costs one export.
Tolerance: |error| ≤ rtol · max|eager| with rtol 1e-5 (float32) and 1e-10 (float64).
"""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral.plan import plan

from .helpers import assert_no_complex, export, ops_in

aten = torch.ops.aten
FFT_OPS = {aten._fft_r2c.default, aten._fft_c2c.default, aten._fft_c2r.default}
RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
NORMS = ("backward", "ortho", "forward")
LENGTHS = {64: "direct", 512: "split", 4096: "split", 400: "split", 2310: "split", 251: "direct", 1031: "bluestein"}


class AllKinds(torch.nn.Module):
    """rfft of x, fft and ifft of z, irfft of the half spectrum h, at each normalization."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x, z, h):
        z, h = torch.view_as_complex(z), torch.view_as_complex(h)
        outs = []
        for norm in NORMS:
            outs += [torch.view_as_real(torch.fft.rfft(x, norm=norm)),
                     torch.view_as_real(torch.fft.fft(z, norm=norm)),
                     torch.view_as_real(torch.fft.ifft(z, norm=norm)),
                     torch.fft.irfft(h, n=self.n, norm=norm)]
        return outs


def inputs(n, dtype):
    return (torch.randn(3, n, dtype=dtype), torch.randn(3, n, 2, dtype=dtype),
            torch.randn(3, n // 2 + 1, 2, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("n", list(LENGTHS), ids=[f"{n}-{k}" for n, k in LENGTHS.items()])
def test_every_kind_and_normalization_against_eager(n, dtype):
    assert plan(n).kind == LENGTHS[n]
    module = AllKinds(n)
    ep = export(module, inputs(n, dtype))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert not FFT_OPS & ops_in(new)
    assert not {aten.cos.default, aten.sin.default} & ops_in(new), "tables must be constants, not computed"
    fresh = inputs(n, dtype)
    for i, (actual, expected) in enumerate(zip(new.module()(*fresh), module(*fresh))):
        error = ((actual - expected).abs().max() / expected.abs().max()).item()
        assert error <= RTOL[dtype], f"output {i} ({NORMS[i // 4]}): relative error {error:.2e}"


def test_tables_are_lifted_program_constants(monkeypatch):
    # the forms with tables (the Stockham stages on the CPU): the CPU kernel form has none in the program
    monkeypatch.setenv("AOTCUDA_FFT_CPU_KERNEL", "0")
    ep = export(AllKinds(400), inputs(400, torch.float32))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    lifted = [s for s in new.graph_signature.input_specs if s.kind.name == "CONSTANT_TENSOR"]
    assert lifted and all(s.target in new.constants for s in lifted)
    assert not [n for n in new.graph.nodes if n.op == "get_attr"]
