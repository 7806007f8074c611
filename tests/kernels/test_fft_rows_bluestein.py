"""aotcuda::fft_rows at lengths no tiling covers: Bluestein inside the kernel (kernels/fft_bluestein.py, its
plan fft_plan.bluestein), against torch.fft in float64 on fresh random rows.

- Without Triton: the plans (m ≥ 2n − 1, the cheapest tiling up to the power of two, a butterfly last stage
  allowed) and their tables, which rebuild the DFT in float64 to 1e-12 when run as the kernel runs them
  (chirp, m's stages, the spectrum laid out as the forward leaves k, the stages transposed on the conjugate,
  chirp); the default launches; the op's CPU implementation at such lengths.
- In Triton's interpreter (a subprocess): every case of test_fft_rows_kernel.check (c2c forward and inverse,
  r2c, c2r from fewer and more bins, a scale, a middle and a first dim, a planar pair, padded and cropped) at
  LENGTHS in float32, bfloat16 in and out at 67, stft's window and overlapping frames; n in 2049…4096 (m past
  4096: two halves of m/2, fft_plan.Bluestein.parts) on one or two rows a case (_halves_cases: every kind,
  a window, a strided middle dim, float32 to 1e-6 and float16 and bfloat16, whose first half the kernel
  holds in registers where float32's is stored and read back), and check()'s cases at 4093 in float32.
- kind conv (a constant spectral filter as one convolution, fft_plan.filter_values), in the interpreter at 67, 1009
  and 2049, on the CPU implementation at 1009 and on CUDA at 1009, 2039 and 4093, against eager's irfft(rfft(x)·w).
- r2c and c2r two real rows to a complex transform (fft_rows.pairs_rows), in the interpreter at 67, 1009 and 2049 and
  on CUDA at 1009, 2039 and 4093: odd row counts, a row 10⁻⁶ of its pair's (each keeps its own accuracy), a NaN or an
  infinity kept in its row, stft's window on a middle dim, a filter's weight, bfloat16 c2r, r2c cropped.
- On CUDA (the H200): the kernel at LENGTHS and 2039 in float32, float16 and bfloat16; n = 2049, 4093 and
  4094 (m past 4096) in float32, float16 and bfloat16 (a spectral filter of n = 1009 lowered with the kernel
  form against eager: test_fft_rows_kernel.py).
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from aotcuda.kernels import fft_plan, fft_rows
from comparisons import relative_error
from interpreted import run_code
from test_fft_rows_kernel import TOLERANCE, _stages_in_float64, cases, check, check_windowed, expected, windowed_cases

# 67 = a prime: m = 135 (15→16·9→16); 194 = 97·2: m = 390 with a radix-2 butterfly last (the transposed
# pass's first); 1009: m = 2048 (32·16·4b)
LENGTHS = [67, 194, 1009]
NEEDS_TRITON = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")


def test_lengths_with_a_prime_factor_above_61_up_to_4096_have_a_bluestein_plan():
    for n, want in [(67, "Bluestein m=135 (15→16·9→16)"), (194, "Bluestein m=390 (15→16·13→16·2b)"),
                    (1009, "Bluestein m=2048 (32·16·4b)"), (2039, "Bluestein m=4096 (32·32·4b)"),
                    (2049, "Bluestein m=4104 (2 halves of 2052: 27→32·19→32·4b)"),
                    (3001, "Bluestein m=6032 (2 halves of 3016: 29→32·26→32·4b)"),
                    (4093, "Bluestein m=8192 (2 halves of 4096: 32·32·4b)")]:
        plan = fft_plan.kernel_plan(n)
        assert fft_plan.tiling(n) is None and isinstance(plan, fft_plan.Bluestein) and plan.describe() == want
        assert 2 * n - 1 <= plan.m and plan.tile <= fft_plan.TILE and fft_plan.covers(n)
        assert fft_rows.supports(torch.zeros(2, n, 2), 1, n, "c2c") and fft_rows.supports(torch.zeros(n), 0, n, "r2c")
    for n in (64, 1000, 4096):  # a tiling: no Bluestein
        assert fft_plan.bluestein(n) is None and fft_plan.kernel_plan(n) == fft_plan.tiling(n)
    for n in (4097, 4099, 5003):  # past 4096: in parts of h ≤ 4096 (test_fft_rows_bluestein_parts.py)
        assert fft_plan.bluestein(n).parts > 2 and fft_plan.covers(n), n
    for n in (4100, 2 * 4099, 0):  # smooth past 4096 (the GEMM form's), past 8192, out of range
        assert fft_plan.bluestein(n) is None and not fft_plan.covers(n), n
    assert fft_plan.bluestein(1) is None and fft_plan.covers(1)  # a tiling of its own
    assert all(fft_plan.covers(n) for n in range(1, 4097))


def test_lengths_past_2048_run_as_two_halves_of_at_most_4096_and_the_switch_takes_them_back():
    """m > TILE: two halves of h = m/2 ≥ n, each tile ≤ TILE (BLUESTEIN_HALVES); set_bluestein_tile(TILE) puts
    n > 2048 back on the GEMM form, set_bluestein_tile(2·TILE, halves=False) on one tile of m (the A/B)."""
    assert fft_plan.BLUESTEIN_TILE == 2 * fft_plan.TILE and fft_plan.BLUESTEIN_HALVES
    for n in (2049, 2053, 2 * 1031, 3001, 17 * 17 * 13, 4093, 4094, 4095):
        plan = fft_plan.bluestein(n)
        assert plan.parts == 2 and plan.tiling.n >= n and plan.m == 2 * plan.tiling.n, n
        assert plan.tile <= fft_plan.TILE < plan.m and fft_plan.covers(n), n
        assert plan.cost() == 4 * plan.tiling.cost()
    for n in range(2, 2049):  # m ≤ 4096: one tile, as before
        assert fft_plan.bluestein(n) is None or fft_plan.bluestein(n).parts == 1, n
    launch = fft_plan.default_launch(4093, 1 << 20)
    assert (launch.rows, launch.warps, launch.problem()) == (1, 8, None)
    before = fft_plan.BLUESTEIN_TILE, fft_plan.BLUESTEIN_HALVES
    try:
        fft_plan.set_bluestein_tile(fft_plan.TILE)  # n ≤ 2048
        for n in (2049, 2 * 1031, 17 * 17 * 13, 4093):
            assert fft_plan.bluestein(n) is None and not fft_plan.covers(n), n
        assert fft_plan.bluestein(2039).describe() == "Bluestein m=4096 (32·32·4b)"
        fft_plan.set_bluestein_tile(2 * fft_plan.TILE, halves=False)  # one tile of m ≤ 8192, one row of 8 warps
        one = fft_plan.bluestein(4093)
        assert one.describe() == "Bluestein m=8192 (32·16·16)" and one.parts == 1 and one.tile > fft_plan.TILE
        assert fft_plan.default_launch(4093, 1 << 20).problem() is None
        assert fft_plan.bluestein(2039).describe() == "Bluestein m=4096 (32·32·4b)"
    finally:
        fft_plan.set_bluestein_tile(*before)
    assert fft_plan.bluestein(4093).describe() == "Bluestein m=8192 (2 halves of 4096: 32·32·4b)"
    with pytest.raises(ValueError, match="BLUESTEIN_TILE must be"):
        fft_plan.set_bluestein_tile(16384)
    short = fft_plan.Bluestein(3001, fft_plan.tiling(3000), 2)  # h < n: x·c would wrap into the other half
    assert "m = 6000 must be at least 2n − 1 = 6001" in fft_plan.Launch(short, 1, 8).problem()
    assert "parts = 5 must be 1 to 4" in fft_plan.Launch(fft_plan.Bluestein(2049, fft_plan.tiling(4096), 5), 1, 8).problem()


def test_the_default_launches_and_a_launch_that_cannot_run():
    """Bluestein holds two DFTs' values: half the rows a tiling of m would take, 8 warps for a tile of 4096 or 8192
    (compiled for sm_90: fft_kernel_resources.py). Its launches for the sweep: the default first, then its m (or its
    halves' h) on each tiling within twice the default's arithmetic, at the default's rows and 4 and 8 warps."""
    for n, want in [(67, (4, 4)), (194, (2, 4)), (1009, (1, 4)), (2039, (1, 8)), (2049, (1, 8)), (4093, (1, 8))]:
        launch = fft_plan.default_launch(n, 1 << 20)
        assert (launch.rows, launch.warps) == want and launch.problem() is None, n
        every = fft_plan.launches(n, 1 << 20)
        assert every[0] == launch and len(every) == len(set(every)) > 2, n
        for other in every:
            plan = other.tiling
            assert isinstance(plan, fft_plan.Bluestein) and (plan.n, plan.m, plan.parts) == (n, launch.tiling.m,
                                                                                            launch.tiling.parts)
            assert other.rows == launch.rows and other.warps in (4, 8) and other.problem() is None
            assert plan.tiling.cost() <= 2 * launch.tiling.tiling.cost()
        assert {c.warps for c in every if c.tiling == launch.tiling} == {4, 8}
    short = fft_plan.Bluestein(67, fft_plan.tiling(128))
    assert "at least 2n − 1 = 133" in fft_plan.Launch(short, 4, 4).problem()


@pytest.mark.parametrize("n", LENGTHS + [2039, 2049, 3001, 4093, 4094])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_the_tables_run_as_the_kernel_runs_them_rebuild_the_dft_in_float64(n, inverse):
    """The kernel's math in float64 (the stages as test_fft_rows_kernel's _stages_in_float64), each half s
    of S (one, or two past m = 4096): x times the chirp in, the forward DFT of h = m/S (its output at tile
    position (k1, k2, k3)), times the half's spectrum block, the forward DFT again on the conjugate (the
    transposed stages compute the same DFT), conjugated, times the chirp out; the halves summed."""
    plan = fft_plan.bluestein(n)
    t, values, halves = plan.tiling, fft_plan.table_values(plan, inverse), plan.parts
    assert values.numel() == plan.table_numel()
    base = t.table_numel()
    chirps = values[base: base + halves * 4 * n].reshape(halves, 2, 2, n)  # [half, in/out, re/im, n]
    chirps = torch.complex(chirps[:, :, 0], chirps[:, :, 1])
    blocks = values[base + halves * 4 * n:].reshape(halves, 2, *t.padded)
    (a, b, c) = t.factors
    x = torch.randn(3, n, dtype=torch.complex128)
    got = 0
    for s in range(halves):
        spectrum = torch.complex(blocks[s, 0], blocks[s, 1])[:a, :b, :c].permute(2, 1, 0).reshape(-1)  # k = k1 + a·k2 + a·b·k3
        padded = torch.nn.functional.pad(x * chirps[s, 0], (0, t.n - n))
        y = _stages_in_float64(padded, t, False) * spectrum
        got = got + _stages_in_float64(y.conj(), t, False).conj()[:, :n] * chirps[s, 1]
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
    check_halves_interpreted()


def _halves_cases():
    """(name, n, dtype, x, dim, out_len, kind, inverse, scale, window) at lengths past m = 4096 (two halves),
    one or two rows each: the interpreter takes seconds a row at h = 4096."""
    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    pair = lambda n, dtype, rows=2: torch.randn(rows, n, 2).to(dtype)  # noqa: E731
    middle = lambda n, dtype: torch.randn(2, 1, n, 2).to(dtype).permute(1, 2, 0, 3)  # noqa: E731  [1, n, 2, 2], rows n·2 apart
    hann = lambda n: torch.hann_window(n, dtype=torch.float32)  # noqa: E731
    return [
        ("c2c", 2049, f32, pair(2049, f32), 1, 2049, "c2c", False, 1.0, None),
        ("c2c inverse, scaled", 2053, f32, pair(2053, f32), 1, 2053, "c2c", True, 0.5, None),
        ("c2r", 2049, f32, pair(2049 // 2 + 1, f32), 1, 2049, "c2r", True, 1.0, None),
        ("c2c middle dim", 3001, f32, middle(3001, f32), 1, 3001, "c2c", False, 1.0, None),
        ("r2c, window", 3001, f32, torch.randn(2, 3001), 1, 3001 // 2 + 1, "r2c", False, 1.0, hann(3001)),
        ("c2c", 4093, f32, pair(4093, f32, 1), 1, 4093, "c2c", False, 1.0, None),
        ("r2c middle dim, cropped", 4093, f32, torch.randn(1, 4093, 2), 1, 100, "r2c", False, 2.0, None),
        ("c2r from fewer bins", 4094, f32, pair(1000, f32, 1), 1, 4094, "c2r", True, 1.0, None),
        ("c2c window, padded input", 4094, f32, pair(4000, f32, 1), 1, 4094, "c2c", False, 1.0, hann(4000)),
        ("c2c", 4093, bf16, pair(4093, bf16, 1), 1, 4093, "c2c", False, 1.0, None),
        ("c2r", 4094, bf16, pair(4094 // 2 + 1, bf16, 1), 1, 4094, "c2r", True, 1.0, None),
        ("r2c, window", 2049, f16, torch.randn(1, 2049).to(f16), 1, 2049 // 2 + 1, "r2c", False, 1.0, hann(2049)),
        ("c2c inverse middle dim", 3001, f16, middle(3001, f16), 1, 3001, "c2c", True, 1 / 3001, None),
    ]


HALVES_TOLERANCE = {torch.float32: 1e-6, torch.float16: TOLERANCE[torch.float16], torch.bfloat16: TOLERANCE[torch.bfloat16]}


def check_halves_interpreted():
    """_halves_cases() against torch.fft in float64 (x times the window where one is given), one line each;
    then check()'s cases at 4093 in float32 (35 strided rows, a planar pair, the first dim, …)."""
    torch.manual_seed(5)
    for name, n, dtype, x, dim, out_len, kind, inverse, scale, window in _halves_cases():
        got = fft_rows.launch(x, None, dim, n, out_len, kind, inverse, scale, window)
        windowed = x if window is None else (x.double().movedim(dim, -1 if kind == "r2c" else -2)
                                             * (window.double() if kind == "r2c" else window.double()[:, None])
                                             ).movedim(-1 if kind == "r2c" else -2, dim)
        want = expected(windowed, dim, n, out_len, kind, inverse, scale)
        assert got.shape == want.shape and got.dtype == dtype, (name, n, got.shape, want.shape)
        print(n, "halves", dtype, name, f"{relative_error(got, want):.1e}", flush=True)
    for name, error in check(lambda *args: fft_rows.launch(args[0], None, *args[1:]), 4093, torch.float32):
        print(4093, "halves float32", name, f"{error:.1e}", flush=True)  # 35 rows a case: 2 s each


@NEEDS_TRITON
def test_the_bluestein_kernel_matches_torch_fft_in_tritons_interpreter():
    lines = run_code(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_fft_rows_bluestein
        test_fft_rows_bluestein.check_interpreted()
    """).splitlines()
    print("\n".join(lines))
    assert len(lines) == ((len(LENGTHS) + 1) * len(cases(8, torch.float32)) + 2 * len(windowed_cases(8, 2, torch.float32))
                          + len(_halves_cases()) + len(cases(8, torch.float32)))
    for line in lines:
        dtype = next((d for name, d in [("bfloat16", torch.bfloat16), ("float16", torch.float16)] if name in line),
                     torch.float32)
        assert float(line.split()[-1]) < (HALVES_TOLERANCE if "halves" in line else TOLERANCE)[dtype], line


def _pairs_cases(n: int, device: str = "cpu"):
    """(name, x, launch args after x and tables, want) for r2c and c2r at a Bluestein length, where the kernel runs two
    real rows as one complex transform (fft_rows.pairs_rows): odd and even row counts (the last row alone), a row
    10⁻⁶ times its pair's (each row keeps its own relative accuracy: the rows are normalized before they are paired),
    a row holding a NaN or an infinity beside finite ones (it reaches no other row), stft's window on strided rows
    along a middle dim, a filter's weight, bfloat16 c2r (r2c of bfloat16 out is one row a transform), and r2c cropped
    to fewer bins (one row a transform: the pair's transform is kept whole in n // 2 + 1 bins a row)."""
    bins = n // 2 + 1
    # The reference on the CPU in float64 (torch.fft's CPU library) whatever the device, as fft.py measures.
    spectrum = lambda z: torch.view_as_complex(z.cpu().double().contiguous())  # noqa: E731
    f64 = lambda z: z.cpu().double()  # noqa: E731
    cases = []
    for rows in (1, 2, 5):  # one row: alone in its pair's program
        x = torch.randn(rows, n, device=device)
        x[rows // 2] *= 1e-6
        cases.append((f"r2c {rows} rows, one quiet", x, (1, n, bins, "r2c", False, 1.0),
                      torch.view_as_real(torch.fft.rfft(f64(x), n=n))))
        h = torch.randn(rows, bins, 2, device=device)
        h[rows // 2] *= 1e-6
        cases.append((f"c2r {rows} rows, one quiet", h, (1, n, n, "c2r", True, 1 / n),
                      torch.fft.irfft(spectrum(h), n=n)))
    x = torch.randn(3, n, 2, device=device).permute(0, 2, 1)  # rows along dim 2, strided
    window = torch.hann_window(n, device=device)
    cases.append(("r2c window, middle dim", x, (2, n, bins, "r2c", False, 1.0, window),
                  torch.view_as_real(torch.fft.rfft(f64(x) * f64(window), n=n, dim=2)).contiguous()))
    h, weight = torch.randn(3, bins, 2, device=device), torch.randn(bins, 2, device=device)
    cases.append(("c2r weight", h, (1, n, n, "c2r", True, 1.0, None, weight),
                  torch.fft.irfft(spectrum(h) * spectrum(weight), n=n, norm="forward")))
    h = torch.randn(3, bins, 2, device=device).bfloat16()
    cases.append(("c2r bfloat16", h, (1, n, n, "c2r", True, 1.0), torch.fft.irfft(spectrum(h), n=n, norm="forward")))
    x = torch.randn(4, n, device=device)
    cases.append(("r2c cropped", x, (1, n, 7, "r2c", False, 1.0), torch.view_as_real(torch.fft.rfft(f64(x), n=n)[:, :7])))
    return cases


def check_pairs(launch, n: int, device: str = "cpu") -> list[str]:
    """Each _pairs_cases case through `launch` (fft_rows.launch, or the op), one line a case: its name and the
    largest relative error of a row against torch.fft in float64; then the non-finite rows' case."""
    lines = []
    for name, x, args, want in _pairs_cases(n, device):
        got = launch(x, None, *args)
        assert got.shape == want.shape and got.dtype == x.dtype, (name, got.shape, want.shape)
        worst = max(relative_error(g.cpu(), w.cpu()) for g, w in zip(got, want))
        lines.append(f"{n} pairs {x.dtype} {name.replace(' ', '_')} {worst:.1e}")
    x = torch.randn(4, n, device=device)
    x[2, 3], x[1, 5] = float("nan"), float("inf")
    got = launch(x, None, 1, n, n // 2 + 1, "r2c", False, 1.0).cpu()
    want = torch.view_as_real(torch.fft.rfft(x.cpu().double(), n=n))
    nan_rows = [r for r in range(4) if got[r].isnan().any()]
    assert got[1].isnan().all() and got[2].isnan().all() and nan_rows == [1, 2], f"NaN in rows {nan_rows}, not [1, 2]"
    lines.append(f"{n} pairs {x.dtype} finite_rows_beside_non-finite "
                 f"{max(relative_error(got[r], want[r]) for r in (0, 3)):.1e}")
    return lines


def check_real_rows_interpreted(which: str):
    """check_pairs or check_conv (`which`: "pairs", "conv") at 67 (a padded tiling), 1009 and 2049 (m of one tile, and
    past 4096: two halves, float32 kept in Out between them), a line a case."""
    torch.manual_seed(7)
    for n in (67, 1009, 2049):
        for line in {"pairs": check_pairs, "conv": check_conv}[which](fft_rows.launch, n):
            print(line, flush=True)


@NEEDS_TRITON
def test_real_rows_run_in_pairs_and_each_keeps_its_own_accuracy_in_tritons_interpreter():
    """r2c and c2r at Bluestein lengths run two real rows as one complex transform (half the convolutions);
    each row must keep its own relative accuracy beside a row a million times larger, and a NaN or an infinity must
    stay in its own row (main: one row a transform)."""
    lines = run_code(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_fft_rows_bluestein
        test_fft_rows_bluestein.check_real_rows_interpreted("pairs")
    """).splitlines()
    print("\n".join(lines))
    assert len(lines) == 3 * (len(_pairs_cases(8)) + 1)
    _within_halves_tolerance(lines)


def _within_halves_tolerance(lines: list[str]) -> None:
    """Each line's last word, a relative error, below HALVES_TOLERANCE of its dtype (bfloat16 or float16 where it says
    so, else float32)."""
    for line in lines:
        dtype = next((d for name, d in [("bfloat16", torch.bfloat16), ("float16", torch.float16)] if name in line),
                     torch.float32)
        assert float(line.split()[-1]) < HALVES_TOLERANCE[dtype], line


def test_which_launches_run_real_rows_in_pairs():
    bluestein, tiled = fft_plan.kernel_plan(1009), fft_plan.kernel_plan(1024)
    f32, bf16 = torch.float32, torch.bfloat16
    assert fft_rows.pairs_rows(bluestein, "r2c", 1009, 505, f32) and fft_rows.pairs_rows(bluestein, "c2r", 1009, 1009, bf16)
    assert not fft_rows.pairs_rows(bluestein, "r2c", 1009, 505, bf16)  # kept whole in Out before it is separated
    assert not fft_rows.pairs_rows(bluestein, "r2c", 1009, 7, f32)  # too few bins to keep it in
    assert not fft_rows.pairs_rows(bluestein, "c2c", 1009, 1009, f32)
    assert not fft_rows.pairs_rows(tiled, "r2c", 1024, 513, f32)


def _conv_cases(n: int, device: str = "cpu"):
    """(name, x, dim, scale, w) for kind conv at a Bluestein length (a constant filter's convolution,
    spectral/filter.py): x's rows against irfft(rfft(x)·w, n) times scale in float64. Odd and even row counts (the
    last row alone in its pair's program), a row 10⁻⁶ of its pair's (each keeps its own accuracy), rows along a
    middle dim (strided), a weight whose bins 0 and n/2 have imaginary parts (which the c2r drops: so must the
    convolution), rows shorter and longer than n (zero-padded, cropped), a scale, and bfloat16 in and out."""
    bins = n // 2 + 1
    cases = []
    for rows in (1, 2, 5):
        x = torch.randn(rows, n, device=device)
        x[rows // 2] *= 1e-6
        cases.append((f"{rows} rows, one quiet", x, 1, 1.0, torch.randn(bins, dtype=torch.complex128)))
    x = torch.randn(3, n, 2, device=device).permute(0, 2, 1)
    cases.append(("middle dim, strided", x, 2, 1.0, torch.randn(bins, dtype=torch.complex128)))
    cases.append(("shorter rows, a scale", torch.randn(3, n - 5, device=device), 1, 0.5,
                  torch.randn(bins, dtype=torch.complex128)))
    cases.append(("longer rows", torch.randn(3, n + 9, device=device), 1, 1.0, torch.randn(bins, dtype=torch.complex128)))
    cases.append(("bfloat16", torch.randn(4, n, device=device).bfloat16(), 1, 1.0,
                  torch.randn(bins, dtype=torch.complex128)))
    return cases


def check_conv(launch, n: int, device: str = "cpu") -> list[str]:
    """Each _conv_cases case through `launch` (fft_rows.launch, or the op) with the tables fft_plan.filter_values
    makes of g = irfft(w): one line a case, its name and the largest relative error of a row against eager's
    filter in float64."""
    plan = fft_plan.kernel_plan(n)
    lines = []
    for name, x, dim, scale, w in _conv_cases(n, device):
        tables = fft_plan.filter_values(plan, torch.fft.irfft(w, n=n)).float().to(x.device)
        got = launch(x, tables, dim, n, n, "conv", False, scale)
        rows = x.cpu().double().movedim(dim, -1)
        want = (torch.fft.irfft(torch.fft.rfft(rows, n=n) * w, n=n) * scale).movedim(-1, dim)
        assert got.shape == want.shape and got.dtype == x.dtype, (name, got.shape, want.shape)
        worst = max(map(relative_error, got.cpu().movedim(dim, -1).reshape(-1, n), want.movedim(dim, -1).reshape(-1, n)))
        lines.append(f"{n} conv {x.dtype} {name.replace(' ', '_').replace(',', '')} {worst:.1e}")
    return lines


@NEEDS_TRITON
def test_a_constant_filters_convolution_matches_eager_in_tritons_interpreter():
    """Kind conv: a pair of real rows convolved with a real kernel in one Bluestein-shaped pass (two m-point DFTs),
    each row to its own accuracy (main: no such kind)."""
    lines = run_code(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_fft_rows_bluestein
        test_fft_rows_bluestein.check_real_rows_interpreted("conv")
    """).splitlines()
    print("\n".join(lines))
    assert len(lines) == 3 * len(_conv_cases(8))
    _within_halves_tolerance(lines)


def test_the_cpu_implementation_convolves_and_conv_needs_a_bluestein_lengths_tables():
    """The op's CPU implementation (kernels/fft_rows.py's convolved) against eager's filter, and the refusals: no
    tables, a tiled length (only the Bluestein kernel convolves), a window or a weight (the kernel holds the filter)."""
    _within_halves_tolerance(check_conv(fft_rows.reference, 1009))
    x = torch.randn(2, 1009)
    with pytest.raises(ValueError, match="conv takes the tables of a Bluestein length"):
        fft_rows.reference(x, None, 1, 1009, 1009, "conv", False, 1.0)
    tiled = fft_rows.tables_for(1024, "c2r", True)
    with pytest.raises(ValueError, match="conv takes the tables of a Bluestein length"):
        fft_rows.reference(torch.randn(2, 1024), tiled, 1, 1024, 1024, "conv", False, 1.0)
    tables = fft_plan.filter_values(fft_plan.kernel_plan(1009), torch.randn(1009, dtype=torch.float64)).float()
    with pytest.raises(ValueError, match="window must be"):
        fft_rows.reference(x, tables, 1, 1009, 1009, "conv", False, 1.0, torch.ones(1009))
    with pytest.raises(ValueError, match="weight must be"):
        fft_rows.reference(x, tables, 1, 1009, 1009, "conv", False, 1.0, None, torch.ones(1009, 2))
    with pytest.raises(ValueError, match="real points"):
        fft_plan.filter_values(fft_plan.kernel_plan(1009), torch.randn(1009, dtype=torch.complex128))
    assert fft_rows.pairs_rows(fft_plan.kernel_plan(1009), "conv", 1009, 1009, torch.bfloat16)


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
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [2049, 4093, 4094])
def test_the_cuda_bluestein_kernel_in_two_halves_past_m_4096(n, dtype):
    if not fft_rows.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(n)
    for _ in check(lambda *args: torch.ops.aotcuda.fft_rows(args[0], None, *args[1:]), n, dtype, "cuda"):
        pass
    for _ in check_windowed(lambda x, dim, n, out_len, kind, w: torch.ops.aotcuda.fft_rows(
            x, None, dim, n, out_len, kind, False, 1.0, w), n, n // 3, dtype, "cuda"):
        pass


@pytest.mark.cuda
@pytest.mark.parametrize("check_real_rows", [check_pairs, check_conv], ids=["pairs", "conv"])
@pytest.mark.parametrize("n", [1009, 2039, 4093])
def test_the_cuda_bluestein_kernel_runs_real_rows_in_pairs_and_convolves(n, check_real_rows):
    """r2c and c2r two real rows to a complex transform; conv, a constant filter's convolution (the pairs kernel)."""
    if not fft_rows.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(n)
    _within_halves_tolerance(check_real_rows(lambda *args: torch.ops.aotcuda.fft_rows(*args), n, "cuda"))
