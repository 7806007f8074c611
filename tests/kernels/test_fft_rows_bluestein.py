"""aotcuda::fft_rows at lengths no tiling covers: Bluestein inside the kernel (kernels/fft_bluestein.py, its
plan fft_plan.bluestein), against torch.fft in float64 on fresh random rows.

- Without Triton: the plans (m ≥ 2n − 1, the cheapest tiling up to the power of two, a butterfly last stage
  allowed) and their tables, which rebuild the DFT in float64 to 1e-12 when run as the kernel runs them
  (chirp, m's stages, the spectrum laid out as the forward leaves k, the stages transposed on the conjugate,
  chirp); the default launches; the op's CPU implementation at such lengths.
- In Triton's interpreter (a subprocess): every case of test_fft_rows_kernel.check (c2c forward and inverse,
  r2c, c2r from fewer and more bins, a scale, a middle and a first dim, a planar pair, padded and cropped) at
  LENGTHS in float32, bfloat16 in and out at 67, stft's window and overlapping frames, and n = 2049 (m's
  tile past 4096: BLUESTEIN_TILE = 8192, the default) on a few rows.
- On CUDA (the H200): the kernel at LENGTHS and 2039 in float32, float16 and bfloat16; n = 2049 and 4093
  (m's tile past 4096) in float32 (a spectral filter of n = 1009 lowered with the kernel form against
  eager: test_fft_rows_kernel.py).
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from aotcuda.kernels import fft_plan, fft_rows
from comparisons import relative_error
from interpreted import run_code
from test_fft_rows_kernel import TOLERANCE, _stages_in_float64, cases, check, check_windowed, windowed_cases

# 67 = a prime: m = 135 (15→16·9→16); 194 = 97·2: m = 390 with a radix-2 butterfly last (the transposed
# pass's first); 1009: m = 2048 (32·16·4b)
LENGTHS = [67, 194, 1009]
NEEDS_TRITON = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")


def test_lengths_with_a_prime_factor_above_61_up_to_4096_have_a_bluestein_plan():
    for n, want in [(67, "Bluestein m=135 (15→16·9→16)"), (194, "Bluestein m=390 (15→16·13→16·2b)"),
                    (1009, "Bluestein m=2048 (32·16·4b)"), (2039, "Bluestein m=4096 (16·16·16)"),
                    (4093, "Bluestein m=8192 (32·16·16)")]:
        plan = fft_plan.kernel_plan(n)
        assert fft_plan.tiling(n) is None and isinstance(plan, fft_plan.Bluestein) and plan.describe() == want
        assert 2 * n - 1 <= plan.m and plan.tile <= fft_plan.BLUESTEIN_TILE and fft_plan.covers(n)
        assert fft_rows.supports(torch.zeros(2, n, 2), 1, n, "c2c") and fft_rows.supports(torch.zeros(n), 0, n, "r2c")
    for n in (64, 1000, 4096):  # a tiling: no Bluestein
        assert fft_plan.bluestein(n) is None and fft_plan.kernel_plan(n) == fft_plan.tiling(n)
    for n in (4097, 4099, 5003, 2 * 4099, 0):  # n > 4096: m's tile past 8192 (the GEMM form's), out of range
        assert fft_plan.bluestein(n) is None and not fft_plan.covers(n), n
    assert fft_plan.bluestein(1) is None and fft_plan.covers(1)  # a tiling of its own
    assert all(fft_plan.covers(n) for n in range(1, 4097))


def test_the_default_tile_of_8192_takes_lengths_to_4096_and_a_tile_of_4096_takes_them_back():
    assert fft_plan.BLUESTEIN_TILE == 2 * fft_plan.TILE
    for n in (2049, 2 * 1031, 17 * 17 * 13, 4093):  # m's tile past 4096
        assert fft_plan.bluestein(n).tile > fft_plan.TILE and fft_plan.covers(n), n
    launch = fft_plan.default_launch(4093, 1 << 20)
    assert (launch.rows, launch.warps, launch.problem()) == (1, 8, None)
    before = fft_plan.BLUESTEIN_TILE
    try:
        fft_plan.set_bluestein_tile(fft_plan.TILE)  # the A/B switch: n ≤ 2048
        for n in (2049, 2 * 1031, 17 * 17 * 13, 4093):
            assert fft_plan.bluestein(n) is None and not fft_plan.covers(n), n
        assert fft_plan.bluestein(2039).describe() == "Bluestein m=4096 (16·16·16)"
        assert "a tile ≤ 4096" in launch.problem()
    finally:
        fft_plan.set_bluestein_tile(before)
    assert fft_plan.bluestein(4093).describe() == "Bluestein m=8192 (32·16·16)"
    with pytest.raises(ValueError, match="BLUESTEIN_TILE must be"):
        fft_plan.set_bluestein_tile(16384)


def test_the_default_launches_and_a_launch_that_cannot_run():
    """Bluestein holds two DFTs' values: half the rows a tiling of m would take, 8 warps for a tile of 4096 or 8192
    (compiled for sm_90: fft_kernel_resources.py); its launches are its default only (not yet swept)."""
    for n, want in [(67, (4, 4)), (194, (2, 4)), (1009, (1, 4)), (2039, (1, 8)), (4093, (1, 8))]:
        launch = fft_plan.default_launch(n, 1 << 20)
        assert (launch.rows, launch.warps) == want and launch.problem() is None, n
        assert fft_plan.launches(n, 1 << 20) == [launch]
    short = fft_plan.Bluestein(67, fft_plan.tiling(128))
    assert "at least 2n − 1 = 133" in fft_plan.Launch(short, 4, 4).problem()


@pytest.mark.parametrize("n", LENGTHS + [2039])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_the_tables_run_as_the_kernel_runs_them_rebuild_the_dft_in_float64(n, inverse):
    """The kernel's math in float64 (the stages as test_fft_rows_kernel's _stages_in_float64): x·c, the
    forward DFT of m (its output at tile position (k1, k2, k3)), times the spectrum block, the forward DFT
    again on the conjugate (the transposed stages compute the same DFT), conjugated, times c."""
    plan = fft_plan.bluestein(n)
    t, values = plan.tiling, fft_plan.table_values(plan, inverse)
    assert values.numel() == plan.table_numel()
    base = t.table_numel()
    chirp = torch.complex(values[base: base + n], values[base + n: base + 2 * n])
    at = base + 2 * n
    block = torch.complex(values[at: at + plan.tile], values[at + plan.tile:]).reshape(t.padded)
    (a, b, c) = t.factors
    spectrum = block[:a, :b, :c].permute(2, 1, 0).reshape(-1)  # k = k1 + a·k2 + a·b·k3
    x = torch.randn(3, n, dtype=torch.complex128)
    padded = torch.nn.functional.pad(x * chirp, (0, plan.m - n))
    y = _stages_in_float64(padded, t, False) * spectrum
    got = (_stages_in_float64(y.conj(), t, False).conj()[:, :n]) * chirp
    want = torch.fft.ifft(x, norm="forward") if inverse else torch.fft.fft(x)
    assert relative_error(torch.view_as_real(got), torch.view_as_real(want)) < 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_the_cpu_implementation_matches_torch_fft_at_a_bluestein_length(dtype):
    torch.manual_seed(0)
    for _ in check(lambda *args: torch.ops.aotcuda.fft_rows(args[0], None, *args[1:]), 67, dtype):
        pass


# ---- in Triton's interpreter ---------------------------------------------------------------------------

def check_interpreted():
    """check()'s cases at LENGTHS in float32, at 67 in bfloat16; the windowed cases at 67 (hop 23) in float32
    and float16; n = 2049, m's tile past 4096 (c2c and c2r on 2 rows)."""
    torch.manual_seed(3)
    launch = lambda *args: fft_rows.launch(args[0], None, *args[1:])  # noqa: E731
    for n in LENGTHS:
        for name, error in check(launch, n, torch.float32):
            print(n, "float32", name, f"{error:.1e}")
    for name, error in check(launch, 67, torch.bfloat16):
        print(67, "bfloat16", name, f"{error:.1e}")
    for dtype in (torch.float32, torch.float16):
        for name, error in check_windowed(lambda x, dim, n, out_len, kind, w: fft_rows.launch(
                x, None, dim, n, out_len, kind, False, 1.0, w), 67, 23, dtype):
            print(67, dtype, name, f"{error:.1e}")
    n = 2049
    z = torch.randn(2, n, 2)
    got = fft_rows.launch(z, None, 1, n, n, "c2c", True, 0.5)
    want = torch.view_as_real(torch.fft.ifft(torch.view_as_complex(z.double()), norm="forward") * 0.5)
    print(n, "8192 tile c2c", f"{relative_error(got, want):.1e}")
    half = torch.randn(2, n // 2 + 1, 2)
    got = fft_rows.launch(half, None, 1, n, n, "c2r", True, 1.0)
    want = torch.fft.irfft(torch.view_as_complex(half.double()), n=n, norm="forward")
    print(n, "8192 tile c2r", f"{relative_error(got, want):.1e}")


@NEEDS_TRITON
def test_the_bluestein_kernel_matches_torch_fft_in_tritons_interpreter():
    lines = run_code(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_fft_rows_bluestein
        test_fft_rows_bluestein.check_interpreted()
    """).splitlines()
    print("\n".join(lines))
    assert len(lines) == (len(LENGTHS) + 1) * len(cases(8, torch.float32)) + 2 * len(windowed_cases(8, 2, torch.float32)) + 2
    for line in lines:
        dtype = next((d for name, d in [("bfloat16", torch.bfloat16), ("float16", torch.float16)] if name in line),
                     torch.float32)
        assert float(line.split()[-1]) < TOLERANCE[dtype], line


# ---- on CUDA -------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", LENGTHS + [2039])
def test_the_cuda_bluestein_kernel_matches_torch_fft(n, dtype):
    if not fft_rows.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(n)
    for _ in check(lambda *args: torch.ops.aotcuda.fft_rows(args[0], None, *args[1:]), n, dtype, "cuda"):
        pass
    for _ in check_windowed(lambda x, dim, n, out_len, kind, w: torch.ops.aotcuda.fft_rows(
            x, None, dim, n, out_len, kind, False, 1.0, w), n, n // 3, dtype, "cuda"):
        pass


@pytest.mark.cuda
@pytest.mark.parametrize("n", [2049, 4093])
def test_the_cuda_bluestein_kernel_past_a_tile_of_4096(n):
    if not fft_rows.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(n)
    for _ in check(lambda *args: torch.ops.aotcuda.fft_rows(args[0], None, *args[1:]), n, torch.float32, "cuda"):
        pass
