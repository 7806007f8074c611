"""Window factory ops (hann, hamming, blackman, bartlett, kaiser) decompose into generated code.

Inductor has no lowering for them, so without a decomposition a window built inside forward is a fallback
kernel (Cosmos3-audio on the H200: ``aoti_torch_cuda_hann_window``). The table test runs the decomposition
lower() uses for every overload and option (torch's own where it has one, aotcuda.lowering.decompositions
otherwise) against the eager op at random lengths, 0 and 1 included; the program test checks that
run_decompositions(decomposition_table()) leaves no window op in an exported program that builds each of
them from a dynamic length, and that the program matches eager.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.decompositions import WINDOW_DECOMPOSITIONS

aten = torch.ops.aten
TOLERANCE = {torch.float32: 1e-6, torch.float64: 1e-12}

# (overload, extra positional arguments after window_length): every overload, periodic both ways.
CALLS = [
    (aten.hann_window.default, ()), (aten.hann_window.periodic, (True,)), (aten.hann_window.periodic, (False,)),
    (aten.hamming_window.default, ()), (aten.hamming_window.periodic, (False,)),
    (aten.hamming_window.periodic_alpha, (True, 0.6)), (aten.hamming_window.periodic_alpha_beta, (False, 0.6, 0.3)),
    (aten.blackman_window.default, ()), (aten.blackman_window.periodic, (True,)),
    (aten.blackman_window.periodic, (False,)),
    (aten.bartlett_window.default, ()), (aten.bartlett_window.periodic, (True,)),
    (aten.bartlett_window.periodic, (False,)),
    (aten.kaiser_window.default, ()), (aten.kaiser_window.periodic, (False,)), (aten.kaiser_window.beta, (True, 5.0)),
    (aten.kaiser_window.beta, (False, 20.0)),
]
TABLE = decomposition_table()
LENGTHS = [0, 1, 2, 3, *random.Random(11).sample(range(4, 2049), 6)]


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """‖actual - expected‖ / ‖expected‖, absolute below a norm of 1 (the symmetric hann and bartlett windows
    of length 2 are all zeros; every window value lies in [0, 1])."""
    if expected.numel() == 0:
        return 0.0 if actual.shape == expected.shape else float("inf")
    return ((actual - expected).norm() / expected.norm().clamp_min(1.0)).item()


def test_every_window_overload_has_a_decomposition():
    assert {op for op, _ in CALLS} == set(WINDOW_DECOMPOSITIONS)
    assert all(op in TABLE for op in WINDOW_DECOMPOSITIONS)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op, extra", CALLS, ids=[f"{op}{extra}" for op, extra in CALLS])
def test_decomposition_matches_eager(op, extra, dtype):
    decomposition = TABLE[op]
    for length in LENGTHS:
        expected = op(length, *extra, dtype=dtype)
        actual = decomposition(length, *extra, dtype=dtype)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (op, length)
        error = relative_error(actual, expected)
        assert error <= TOLERANCE[dtype], f"{op}{extra} length {length} {dtype}: relative error {error:.2e}"


class EveryWindow(torch.nn.Module):
    """Each window op built from the last dim of x, as an stft front end builds its window from n_fft (the
    length is an int in the ops' schema: torch.export specializes it, so the window is static)."""

    def forward(self, x):
        n = x.shape[-1]
        return tuple(op(n, *extra, dtype=x.dtype) for op, extra in CALLS)


def window_ops_left(ep: torch.export.ExportedProgram) -> list[str]:
    return [str(node.target) for node in ep.graph.nodes if node.target in WINDOW_DECOMPOSITIONS]


def test_exported_program_has_no_window_op_left_and_matches_eager():
    x = torch.randn(2, 257, dtype=torch.float64)
    ep = torch.export.export(EveryWindow(), (x,)).run_decompositions(TABLE)
    assert window_ops_left(ep) == []
    for (op, extra), actual, expected in zip(CALLS, ep.module()(x), EveryWindow()(x)):
        assert relative_error(actual, expected) <= TOLERANCE[torch.float64], f"{op}{extra}"


# coverage.DECOMPOSED_BEFORE_THE_PASS is the answer of torch 2.13 (CI's torch, on which docs/ops.md is generated);
# the overloads another torch's default table removes as well (found by the version matrix, docs/versions.md):
# 2.11 decomposes the named-dim overloads, 2.14 and 2.15 linalg_vector_norm. None removes fewer.
_NAMED_DIM_OVERLOADS = {
    "aten.all.dimname", "aten.all.dimname_out", "aten.any.dimname", "aten.cat.names", "aten.cumprod.dimname",
    "aten.cumsum.dimname", "aten.gather.dimname", "aten.index_add.dimname", "aten.index_select.dimname",
    "aten.mean.names_dim", "aten.prod.dim_Dimname", "aten.scatter_add.dimname", "aten.sum.dim_DimnameList",
    "aten.var.correction_names", "aten.var.names_dim"}
_VECTOR_NORM = {"aten.linalg_vector_norm.default", "aten.linalg_vector_norm.out"}
ALSO_DECOMPOSED_BY_TORCH = {"2.11": _NAMED_DIM_OVERLOADS, "2.13": set(), "2.14": _VECTOR_NORM, "2.15": _VECTOR_NORM}


def test_the_passes_record_what_the_decomposition_table_removes_before_them():
    """docs/ops.md's coverage counts an overload as decomposed when lower()'s table removes it; the passes never import
    the lowering, so coverage.py records the table's answer for the overloads of its lists, checked here (on another
    torch than 2.13, with that torch's known additions)."""
    import torch

    from aotcuda.lowering.decompositions import decomposition_table
    from aotcuda.passes.complex_to_real import coverage

    table = decomposition_table()
    listed = set(coverage.OPINFO_OVERLOADS) | set(coverage.TORCH_TENSORRT_OPS) | set(coverage.COMPLEX_TENSOR_OPS)
    removed = set()
    for name in listed:
        parts = name.split(".")
        packet = getattr(torch.ops.aten, parts[1] if len(parts) == 3 else parts[0], None)
        overloads = [] if packet is None else (
            [getattr(packet, parts[2])] if len(parts) == 3 else [getattr(packet, o) for o in packet.overloads()])
        removed |= {f"aten.{op._schema.name.split('::')[1]}.{op._overloadname}" for op in overloads if op in table}
    version = ".".join(torch.__version__.split(".")[:2])
    assert version in ALSO_DECOMPOSED_BY_TORCH, f"torch {version}: record what its table removes beyond 2.13's"
    assert removed == set(coverage.DECOMPOSED_BEFORE_THE_PASS) | ALSO_DECOMPOSED_BY_TORCH[version]


def test_fft_sample_frequencies_at_a_zero_length_or_spacing_and_of_an_integer_dtype_are_eagers():
    """Review (2026-12-07): the decompositions computed 1 / (n d) in Python, which raised ZeroDivisionError at n = 0
    or d = 0 (eager: an empty tensor, or inf and nan as C++ divides), and gave a float tensor for an integer dtype
    (eager refuses it). Now the same values as eager, and an integer dtype keeps the op (eager's refusal)."""
    for op, eager in ((aten.fft_fftfreq.default, torch.fft.fftfreq), (aten.fft_rfftfreq.default, torch.fft.rfftfreq)):
        for n, d in ((0, 1.0), (5, 0.0), (4, -0.0), (3, 0)):
            expected, actual = eager(n, d), TABLE[op](n, d)
            assert actual.shape == expected.shape and torch.equal(actual.isnan(), expected.isnan()), (op, n, d)
            assert torch.equal(actual.nan_to_num(0.0), expected.nan_to_num(0.0)), (op, n, d, actual, expected)
        assert TABLE[op](4, 1.0, dtype=torch.int64) is NotImplemented


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fft_sample_frequencies_decompose_and_match_eager(dtype):
    """Sixth new user (2026-12-07): `torch.fft.fftfreq(7) + torch.fft.rfftfreq(9, d=0.5)` in forward (an FNO's
    wavenumbers) was refused: `aten::fft_fftfreq (proxy executor) ... has no generated code in Inductor and no C shim`.
    Both now decompose into arange math: equal to eager's at every n and spacing, and in a program."""
    from aotcuda.lowering.proxy_ops import proxy_executor_kernels

    for op, eager in ((aten.fft_fftfreq.default, torch.fft.fftfreq), (aten.fft_rfftfreq.default, torch.fft.rfftfreq)):
        assert op in TABLE, f"{op} has no decomposition in lower()'s table"
        for n in [*range(1, 12), 64, 257]:
            for d in (1.0, 0.5, 0.3):
                expected = eager(n, d, dtype=dtype)
                actual = TABLE[op](n, d, dtype=dtype)
                assert actual.dtype == expected.dtype and actual.shape == expected.shape, (op, n)
                torch.testing.assert_close(actual, expected, rtol=TOLERANCE[dtype], atol=0, msg=f"{op} n={n} d={d}")

    class Wavenumbers(torch.nn.Module):
        def forward(self, x):
            n = x.shape[-1]
            k = torch.fft.fftfreq(n, d=0.5, dtype=x.dtype) * 2 * torch.pi
            return torch.fft.ifft(torch.fft.fft(x) * 1j * k).real, torch.fft.rfftfreq(n, dtype=x.dtype)

    # a static length: torch.fft.fftfreq takes `int n`, so torch.export makes a dynamic one a constant (torch's own)
    ep = torch.export.export(Wavenumbers(), (torch.randn(2, 16, dtype=dtype),), strict=False)
    ep = ep.run_decompositions(TABLE)
    assert not proxy_executor_kernels(ep, "cpu"), "no fftfreq op left"
    x = torch.randn(2, 16, dtype=dtype)
    for actual, expected in zip(ep.module()(x), Wavenumbers()(x)):
        torch.testing.assert_close(actual, expected, rtol=TOLERANCE[dtype] * 10, atol=TOLERANCE[dtype] * 10)


def test_fft_sample_frequencies_of_a_dynamic_length_export_and_match_eager():
    """Sixth new user (2026-12-07): `torch.fft.fftfreq(x.shape[-1])` with a Dim on that dim failed in torch.export
    ("Constraints violated (n)! ... specialized it to be a constant"): fftfreq takes `int n`. The export step computes
    a symbolic n's frequencies with arange (aotcuda.lowering.fft_frequencies); the patch is undone after it."""
    from aotcuda.lowering import torch_fixes
    from aotcuda.lowering.exporting import export_program

    fftfreq, rfftfreq = torch.fft.fftfreq, torch.fft.rfftfreq

    class Derivative(torch.nn.Module):
        def forward(self, x):
            n = x.shape[-1]
            k = torch.fft.fftfreq(n, d=0.5) * 2 * torch.pi
            return torch.fft.ifft(torch.fft.fft(x) * 1j * k).real, torch.fft.rfftfreq(n, 0.3, dtype=torch.float64)

    with torch_fixes.applied("export"):
        ep = export_program(Derivative(), (torch.randn(2, 16),), {}, ({1: torch.export.Dim("n", min=2, max=64)},))
    assert torch.fft.fftfreq is fftfreq and torch.fft.rfftfreq is rfftfreq, "the patch is undone after the step"
    ep = ep.run_decompositions(TABLE)
    for n in (16, 7, 33, 2):
        x = torch.randn(2, n)
        (derivative, freqs), (eager_derivative, eager_freqs) = ep.module()(x), Derivative()(x)
        torch.testing.assert_close(freqs, eager_freqs, rtol=1e-12, atol=0)
        torch.testing.assert_close(derivative, eager_derivative, rtol=1e-5, atol=1e-5)


def test_nan_to_num_of_a_complex_tensor_decomposes_part_by_part_as_eager():
    """Seventh new user (2026-12-07): `torch.nan_to_num(Y / H, nan=0.0, posinf=0.0, neginf=0.0)` after a spectral
    division (a Wiener deconvolution) failed in lower()'s decompose step with torch's `RuntimeError: Complex dtype is
    not supported for isneginf` (torch's decomposition of nan_to_num), though eager replaces each part on its own. Now
    each part goes through torch's real decomposition: eager's values, nan, infinities and defaults included."""
    from aotcuda.passes import ReplaceComplexWithRealPass

    class Deconvolution(torch.nn.Module):
        def forward(self, y, h, z, x):
            spectrum = torch.nan_to_num(torch.fft.rfft(y) / torch.fft.rfft(h, n=y.shape[-1]), nan=0.0, posinf=0.0,
                                        neginf=0.0)
            return (torch.fft.irfft(spectrum, n=y.shape[-1]), torch.nan_to_num(z), torch.nan_to_num(z, 0.5, 7.0, -3.0),
                    torch.nan_to_num(x, posinf=1.0))

    special = [complex(math.nan, math.inf), complex(-math.inf, 2.0), complex(1.0, -math.inf), complex(math.nan, 0.0),
               complex(math.inf, math.nan), 1 + 2j]
    z = torch.tensor([special, special[::-1]], dtype=torch.complex64)
    x = torch.tensor([math.nan, math.inf, -math.inf, 1.5])
    h = torch.zeros(8)  # a zero filter: every bin of Y / H is nan or infinite
    inputs = (torch.randn(2, 32), h, z, x)
    ep = torch.export.export(Deconvolution(), inputs, strict=False).run_decompositions(TABLE)
    ep = ReplaceComplexWithRealPass(strict=True)(ep)
    actual = ep.module()(torch.randn(2, 32), h, torch.view_as_real(z), x)
    expected = Deconvolution()(torch.randn(2, 32), h, z, x)
    for a, e in zip(actual, expected):
        e = torch.view_as_real(e) if e.is_complex() else e
        assert torch.equal(a, e), (a, e)
    # a real tensor keeps torch's own decomposition, and a spectrum that is finite is unchanged. The filter is a
    # well-conditioned one (a unit tap, then taps under 0.05: every bin's |H| >= 0.65): a random filter's spectrum
    # near zero amplified float32 rounding past the tolerance (CI, once: 3.5e-4 absolute)
    y, h = torch.randn(2, 32), torch.cat([torch.ones(1), 0.05 * torch.rand(7)])
    torch.testing.assert_close(ep.module()(y, h, torch.view_as_real(z), x)[0], Deconvolution()(y, h, z, x)[0],
                               rtol=1e-5, atol=1e-5)
