"""aotcuda::fft_rows (kernels/fft_rows.py) against torch.fft in float64, on fresh random rows.

- Without Triton: the tilings and tables (kernels/fft_plan.py) rebuild the DFT in float64 to 1e-12 (the
  kernel's stages as plain torch, a butterfly last stage as its radix-2/radix-4 adds), every alternative
  tiling of fft_plan.tilings too; the default launch
  (tiling, rows a program, warps) is pinned, fft_plan.launches starts with it, and a launch the kernel
  cannot run says why; the op's CPU implementation matches torch.fft for every kind, float32 and bfloat16.
- In Triton's interpreter (TRITON_INTERPRET=1, a subprocess; skipped where Triton is missing): the kernel
  itself for n in LENGTHS, c2c forward and inverse, r2c and c2r, float32 and float16 (bfloat16 for
  BFLOAT16_LENGTHS: the interpreter's bfloat16 tl.dot is wrong, but the kernel converts to float32 before
  its products), rows in a batch of strided dims around a middle transformed dim, a planar pair;
  zero-padded and cropped inputs and outputs; offsets past 2**31; its float32 accuracy with tl.dot's
  TF32x3 rounding emulated (cuFFT's level); and stft's front end fused (WINDOWED_CASES): a window operand
  and frames read in place through overlapping strides (unfold's view, hop < n), r2c and c2c; launch()
  given an explicit config (every tiling of 16, 64 and 100, and 64's default tiling at every R: what
  benchmarks/scripts/fft_tiling_sweep.py times), and its refusals; a complex weight multiplied at the load
  (WEIGHTED_LENGTHS, weighted_cases: c2c and c2r, a weight broadcast over the batch dims and one of x's
  full shape, strided x and weight, with a window; 67 is the Bluestein kernel), and a spectral filter
  irfft(rfft(x)·w) rewritten by the pass (its product fused into the c2r's weight) run through the kernel.
- On CUDA (the H200): the kernel in float32, float16 and bfloat16, and a spectral filter lowered with
  AOTCUDA_FFT_KERNEL=1 (aotcuda.lower refuses any fallback kernel) against eager.
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from aotcuda.kernels import fft_plan, fft_rows
from comparisons import relative_error
from interpreted import run_code, run_interpreted

# With a butterfly last stage (fft_plan.BUTTERFLY): 32 = 16·2b and 64 = 16·4b (stage 2), 100 = 25→32·4b and
# 128 = 32·4b (stage 2 after a padded or a wide dot), 512 = 16·16·2b, 1024 = 16·16·4b and 2048 = 32·16·4b
# (stage 3).
LENGTHS = [1, 2, 3, 8, 16, 32, 64, 100, 128, 400, 512, 1024, 2048, 4096]
BFLOAT16_LENGTHS = [3, 32, 64, 400, 1024, 4096]
TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2}
NEEDS_TRITON = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")



def _pair_rows(n, dtype, device="cpu", planar=False):
    """A pair [5, n, 7, 2] with strided batch dims (made as [7, 5, n, 2] and permuted; planar: the two
    parts in separate planes, the pair dim's stride 5·n·7). 35 rows: several programs, the last one
    part-filled."""
    if planar:
        return torch.randn(2, 7, 5, n, dtype=dtype, device=device).permute(2, 3, 1, 0)
    return torch.randn(7, 5, n, 2, dtype=dtype, device=device).permute(1, 2, 0, 3)


def expected(x, dim, n, out_len, kind, inverse, scale):
    """torch.fft in float64 on x's values: the documented transform (c2r as pocketfft's irfft)."""
    if kind == "r2c":
        z = x.double().movedim(dim, -1)
        out = torch.fft.fft(z, n=n)
    else:
        z = torch.view_as_complex(x.double().movedim(dim, -2).contiguous())
        if kind == "c2r":
            half = z[..., : n // 2 + 1]
            out = torch.fft.irfft(half, n=n, norm="forward")
        else:
            out = torch.fft.ifft(z, n=n, norm="forward") if inverse else torch.fft.fft(z, n=n)
    out = out[..., :out_len] * scale
    return out.movedim(-1, dim) if kind == "c2r" else torch.view_as_real(out.movedim(-1, dim))


def cases(n, dtype, device="cpu"):
    """(name, x, dim, out_len, kind, inverse, scale) for a length n: every kind on the strided batch;
    for n > 2 also a planar pair, a zero-padded input, cropped outputs, fewer and more c2r bins."""
    z = _pair_rows(n, dtype, device)
    half = _pair_rows(n // 2 + 1, dtype, device)
    out = [("c2c", z, 1, n, "c2c", False, 1.0), ("c2c inverse", z, 1, n, "c2c", True, 1 / n),
           ("r2c", z[..., 0], 1, n // 2 + 1, "r2c", False, 1.0), ("c2r", half, 1, n, "c2r", True, 0.5)]
    if n > 2:
        short = _pair_rows(n - 1, dtype, device, planar=True)
        bins = _pair_rows(n // 2 + 3, dtype, device)
        out += [("c2c planar, padded input, cropped output", short, 1, n - 2, "c2c", False, 1.0),
                ("r2c full", z[..., 1], 1, n, "r2c", False, 2.0),
                ("c2r from fewer bins", half[:, : n // 4 + 1], 1, n, "c2r", True, 1.0),
                ("c2r from more bins", bins, 1, n, "c2r", True, 1.0),
                ("c2c along the first dim", z.transpose(0, 1), 0, n, "c2c", False, 1.0)]
    return out


def check(transform, n, dtype, device="cpu"):
    """transform(x, dim, n, out_len, kind, inverse, scale) against expected() on each case of cases()."""
    for name, x, dim, out_len, kind, inverse, scale in cases(n, dtype, device):
        got = transform(x, dim, n, out_len, kind, inverse, scale)
        want = expected(x, dim, n, out_len, kind, inverse, scale)
        assert got.shape == want.shape and got.dtype == dtype, (name, n, got.shape, want.shape)
        error = relative_error(got, want)
        assert error < TOLERANCE[dtype], (name, n, dtype, error)
        yield name, error


# ---- without Triton ------------------------------------------------------------------------------------

def _butterfly_in_float64(y: torch.Tensor, p: int, inverse: bool) -> torch.Tensor:
    """The radix-p butterfly (p = 2 or 4) of fft_plan's docstring along y's last axis, as the kernel's
    _butterfly computes it (no table): x[2i + j] split, X[k] rebuilt at index k."""
    if p == 2:
        x0, x1 = y.unbind(-1)
        return torch.stack([x0 + x1, x0 - x1], -1)
    x0, x1, x2, x3 = y.unbind(-1)
    s, u, t, d = x0 + x2, x0 - x2, x1 + x3, x1 - x3
    i_d = (1j if inverse else -1j) * d  # ω_4·d: −i forward, +i inverse
    return torch.stack([s + t, u + i_d, s - t, u - i_d], -1)


def _stages_in_float64(z: torch.Tensor, t: fft_plan.Tiling, inverse: bool) -> torch.Tensor:
    """The kernel's three stages in plain float64 torch on complex rows z [rows, n]: the tables' math, a
    butterfly stage (Tiling.butterflies) as its adds instead of its table's product."""
    values = fft_plan.table_values(t, inverse)
    pieces, at = [], 0
    for rows, cols in t.table_sizes():
        block = values[at: at + 2 * rows * cols].reshape(2, rows, cols)
        pieces.append(torch.complex(block[0], block[1]))
        at += 2 * rows * cols
    f1, f2, f3, w12, w13, w23 = pieces
    (a, b, c), (p1, p2, p3) = t.factors, t.padded
    tile = torch.zeros(z.shape[0], p1, p2, p3, dtype=torch.complex128)
    tile[:, :a, :b, :c] = z.reshape(-1, a, b, c)  # t = b·c·t1 + c·t2 + t3
    butterfly = t.butterflies()
    assert not butterfly[0] and sum(butterfly) <= 1, t  # only the last stage run, never the first
    y = torch.einsum("rijk,il->rljk", tile, f1)  # (r, k1, t2, t3)
    y = y * w12.t()[None, :, :, None] * w13.t()[None, :, None, :]
    if butterfly[1]:
        assert c == 1 and p2 == b in fft_plan.BUTTERFLY, t
        y = _butterfly_in_float64(y.transpose(2, 3), p2, inverse).transpose(2, 3)
    else:
        y = torch.einsum("rljk,jm->rlmk", y, f2)
    y = y * w23.t()[None, None, :, :]  # (r, k1, k2, t3)
    if butterfly[2]:
        assert p3 == c in fft_plan.BUTTERFLY, t
        y = _butterfly_in_float64(y, p3, inverse)
    else:
        y = torch.einsum("rlmk,kq->rlmq", y, f3)  # (r, k1, k2, k3)
    return y[:, :a, :b, :c].permute(0, 3, 2, 1).reshape(z.shape[0], -1)  # k = k1 + a·k2 + a·b·k3


@pytest.mark.parametrize("n", LENGTHS + [37, 61 * 59, 1000, 2 * 3 * 5 * 7 * 11])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_the_tables_rebuild_the_dft_in_float64(n, inverse):
    t = fft_plan.tiling(n)
    assert t is not None and math_prod(t.factors) == n and all(f <= fft_plan.MAX_FACTOR for f in t.factors)
    assert t.tile <= fft_plan.TILE and t.table_numel() == fft_plan.table_values(t, inverse).numel()
    z = torch.randn(3, n, dtype=torch.complex128)
    want = torch.fft.ifft(z, norm="forward") if inverse else torch.fft.fft(z)
    assert relative_error(torch.view_as_real(_stages_in_float64(z, t, inverse)), torch.view_as_real(want)) < 1e-12


def math_prod(values):
    out = 1
    for v in values:
        out *= v
    return out


def test_tilings_cover_the_lengths_with_small_prime_factors_and_prefer_narrow_tables():
    # two dot stages and a butterfly before 16·16·16's three dots (fft_plan.FEWER_DOT_STAGES), not one 64·64
    assert fft_plan.tiling(4096).describe() == "32·32·4b"
    assert fft_plan.tiling(400).describe() == "25→32·16"
    assert fft_plan.tiling(64).describe() == "16·4b"  # not one 64-wide table (it spills on sm_90), nor 4→16
    assert fft_plan.tiling(32).describe() == "16·2b"  # a butterfly: cheaper than one 32-wide product
    assert fft_plan.tiling(128).describe() == "32·4b"
    assert fft_plan.tiling(2048).describe() == "32·16·4b"  # a 2048 tile, not 16·16·8 padded to 4096
    assert fft_plan.tiling(1000).describe() == "25→32·10→16·4b"  # a stage-3 butterfly after padded dots
    assert fft_plan.tiling(16).describe() == "16" and fft_plan.tiling(4).describe() == "4→16"  # stage 1: a dot
    assert fft_plan.tiling(37).describe() == "37→64"  # a prime up to 61: one direct product
    for n in (67, 4093, 4097, 2 * 67, 17 * 17 * 13, 0):  # a prime factor above 61, too long, too wide a tile
        assert fft_plan.tiling(n) is None, n
    assert fft_rows.supports(torch.zeros(4, 67, 2), 1, 67, "c2c")  # no tiling: Bluestein (test_fft_rows_bluestein.py)
    assert fft_rows.supports(torch.zeros(4, 4099, 2), 1, 4099, "c2c")  # a prime above 4096: Bluestein in parts
    assert not fft_rows.supports(torch.zeros(4, 8209, 2), 1, 8209, "c2c")  # a prime above 8192: neither
    assert not fft_rows.supports(torch.zeros(4, 64, 2, dtype=torch.float64), 1, 64, "c2c")
    assert not fft_rows.supports(torch.zeros(1, 1, 1, 1, 1, 64, 2), 5, 64, "c2c")  # five batch dims
    assert fft_rows.supports(torch.zeros(1, 1, 1, 1, 64, 2), 4, 64, "c2c")


@pytest.mark.parametrize("n", [1, 16, 32, 64, 100, 128, 400, 512, 1000, 2048, 4096])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_every_alternative_tiling_rebuilds_the_dft_in_float64(n, inverse):
    """fft_plan.tilings: factors in every order (ones last), each one's tables the DFT (benchmarks time them)."""
    z = torch.randn(2, n, dtype=torch.complex128)
    want = torch.view_as_real(torch.fft.ifft(z, norm="forward") if inverse else torch.fft.fft(z))
    for t in fft_plan.tilings(n):
        assert math_prod(t.factors) == n and t.tile <= fft_plan.TILE, t
        assert fft_plan.Launch(t, fft_plan.least_rows(t), 4).problem() is None, t
        assert relative_error(torch.view_as_real(_stages_in_float64(z, t, inverse)), want) < 1e-12, t.describe()


def test_the_tilings_hold_the_default_and_the_launches_start_with_the_ops_choice():
    for n in range(1, fft_plan.MAX_LENGTH + 1):
        t = fft_plan.tiling(n)
        assert (t is None and not fft_plan.tilings(n)) or t in fft_plan.tilings(n), n
        if t is not None:  # a butterfly only as the last stage run, of a factor 2 or 4, and never stage 1
            last = sum(f > 1 for f in t.factors) - 1
            assert all(not b or (i == last >= 1 and t.padded[i] == t.factors[i] in fft_plan.BUTTERFLY)
                       for i, b in enumerate(t.butterflies())), t
    assert [t.describe() for t in fft_plan.tilings(4096)][:3] == ["16·16·16", "32·32·4b", "64·16·4b"]
    assert "64·64" in [t.describe() for t in fft_plan.tilings(4096)]
    assert {t.factors for t in fft_plan.tilings(64)} >= {(16, 4, 1), (4, 16, 1), (8, 8, 1), (64, 1, 1), (4, 4, 4)}
    # Each factoring whose last factor run is 2 or 4 is there with that stage a dot and as a butterfly.
    assert {t.describe() for t in fft_plan.tilings(64)} >= {"16·4b", "16·4→16", "4→16·4→16·4b", "4→16·4→16·4→16"}
    # A butterfly costs its adds (2·log2(P) a value), a dot its products (4·tile·P).
    assert fft_plan.tiling(64).cost() == 4 * 64 * 16 + 4 * 64 and fft_plan.tiling(32).cost() == 4 * 32 * 16 + 2 * 32
    # The op's own choice (kernels/fft_rows.launch) for a million rows, for 512 rows on the H200's 132 SMs
    # (the sweep's measured best rows and warps), for 35
    # rows in the interpreter (two stand-in "processors"): rows a program and warps.
    for n, rows, processors, want in [(64, 1 << 20, 132, ("16·4b", 16, 4)), (400, 1 << 20, 132, ("25→32·16", 4, 4)),
                                      (4096, 1 << 20, 132, ("32·32·4b", 1, 4)), (37, 1 << 20, 132, ("37→64", 16, 8)),
                                      (1024, 512, 132, ("16·16·4b", 2, 4)), (512, 512, 132, ("16·16·2b", 2, 4)),
                                      (16, 35, 2, ("16", 32, 4)), (2048, 1 << 20, 132, ("32·16·4b", 1, 4)),
                                      (128, 1 << 20, 132, ("32·4b", 16, 4)), (32, 1 << 20, 132, ("16·2b", 16, 4))]:
        launch = fft_plan.default_launch(n, rows, processors)
        assert (launch.tiling.describe(), launch.rows, launch.warps) == want, (n, launch)
        assert launch.rows == fft_plan.rows_per_program(fft_plan.tiling(n), rows, processors)
        every = fft_plan.launches(n, rows, processors)
        assert every[0] == launch and len(set(every)) == len(every)
        assert all(c.problem() is None and c.tiling.n == n for c in every)
        assert {c.tiling for c in every} == set(fft_plan.tilings(n))


def test_a_launch_the_kernel_cannot_run_says_why():
    t64 = fft_plan.tiling(64)
    bad = {"multiply to n": fft_plan.Launch(fft_plan.Tiling(64, (16, 2, 1), (16, 16, 1)), 1, 4),
           "each in [1, 64]": fft_plan.Launch(fft_plan.Tiling(128, (128, 1, 1), (128, 1, 1)), 1, 4),
           "ones last": fft_plan.Launch(fft_plan.Tiling(64, (16, 1, 4), (16, 1, 16)), 1, 4),
           "padded sizes": fft_plan.Launch(fft_plan.Tiling(64, (16, 4, 1), (16, 8, 1)), 4, 4),
           "(4, 16, 1) must be (16, 16, 1),": fft_plan.Launch(fft_plan.Tiling(64, (4, 16, 1), (4, 16, 1)), 4, 4),  # stage 1
           # a butterfly stage 2 with a stage 3 after it
           "must be (16, 16, 16) or (16, 16, 4)": fft_plan.Launch(fft_plan.Tiling(64, (4, 4, 4), (16, 4, 4)), 1, 4),
           "a power of two ≥ 1": fft_plan.Launch(fft_plan.tiling(4096), 3, 4),
           "a power of two ≥ 4": fft_plan.Launch(t64, 2, 4),  # 16·4b: stage 1's M = 4·R
           "a power of two ≥ 16": fft_plan.Launch(fft_plan.tiling(16), 8, 4),
           "warps": fft_plan.Launch(t64, 4, 3),
           # 16 warps lost the CUDA context on the H200 once (fft_plan.MAX_WARPS) and never won
           "from 1 to 8": fft_plan.Launch(fft_plan.tiling(2048), 1, 16)}
    for reason, launch in bad.items():
        assert reason in (launch.problem() or ""), (reason, launch.problem())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("n", [1, 3, 64, 400])
def test_the_cpu_implementation_matches_torch_fft(n, dtype):
    torch.manual_seed(n)
    for name, _ in check(lambda *args: torch.ops.aotcuda.fft_rows(args[0], None, *args[1:]), n, dtype):
        pass


def test_the_output_is_laid_out_as_cufft_lays_out_its_result():
    x = torch.randn(5, 64, 8, 2)
    out = torch.ops.aotcuda.fft_rows(x, None, 1, 64, 33, "c2c", False, 1.0)
    assert out.shape == (5, 33, 8, 2) and out.stride() == (33 * 8 * 2, 2, 33 * 2, 1)  # the dim innermost
    fake = torch.empty_strided(x.shape, x.stride(), device="meta")
    assert torch.ops.aotcuda.fft_rows(fake, None, 1, 64, 33, "c2c", False, 1.0).stride() == out.stride()


def test_a_bad_call_is_refused_with_what_it_takes():
    with pytest.raises(ValueError, match="kind must be one of"):
        torch.ops.aotcuda.fft_rows(torch.randn(2, 8, 2), None, 1, 8, 8, "dct", False, 1.0)
    with pytest.raises(ValueError, match="cannot transform"):
        torch.ops.aotcuda.fft_rows(torch.randn(2, 8209, 2), None, 1, 8209, 8209, "c2c", False, 1.0)
    with pytest.raises(ValueError, match="out_len"):
        torch.ops.aotcuda.fft_rows(torch.randn(2, 8, 2), None, 1, 8, 9, "c2c", False, 1.0)


def windowed_cases(n, hop, dtype, device="cpu"):
    """(name, x, dim, out_len, kind, window) with x stft's frames, an unfold view of a longer signal (its
    frame stride hop < n: the frames overlap), and a real window of n values: r2c and c2c, a window with
    a stride, overlapping frames with no window, and a window along a middle dim of a plain tensor."""
    signal = torch.randn(3, hop * 9 + n, dtype=dtype, device=device)
    complex_signal = torch.randn(2, hop * 7 + n, 2, dtype=dtype, device=device)
    window = torch.hann_window(n, dtype=torch.float32, device=device)
    frames = signal.unfold(-1, n, hop)  # [3, 10, n], strides (…, hop, 1)
    complex_frames = complex_signal.unfold(1, n, hop).permute(0, 1, 3, 2)  # [2, 8, n, 2]
    assert frames.stride(1) == hop < n and complex_frames.stride(1) == 2 * hop < 2 * n  # overlapping rows
    strided_window = torch.rand(2 * n, dtype=torch.float32, device=device)[::2]
    return [("r2c frames, window", frames, 2, n // 2 + 1, "r2c", window),
            ("r2c frames, no window", frames, 2, n // 2 + 1, "r2c", None),
            ("c2c frames, window", complex_frames, 2, n, "c2c", window),
            ("c2c frames, strided window", complex_frames, 2, n, "c2c", strided_window),
            ("r2c middle dim, window", torch.randn(5, n, 7, dtype=dtype, device=device), 1, n // 2 + 1, "r2c",
             window)]


def check_windowed(transform, n, hop, dtype, device="cpu"):
    """transform(x, dim, n, out_len, kind, window) against torch.fft in float64 of x·window."""
    for name, x, dim, out_len, kind, window in windowed_cases(n, hop, dtype, device):
        got = transform(x, dim, n, out_len, kind, window)
        w = 1.0 if window is None else window.double()
        if kind == "r2c":
            windowed = (x.double().movedim(dim, -1) * w).movedim(-1, dim)
        else:
            windowed = x.double() * (w if window is None else w[:, None])
        want = expected(windowed, dim, n, out_len, kind, False, 1.0)
        assert got.shape == want.shape and got.dtype == dtype, (name, n, got.shape, want.shape)
        error = relative_error(got, want)
        assert error < TOLERANCE[dtype], (name, n, dtype, error)
        yield name, error


WINDOWED = [(64, 16), (400, 160), (100, 37)]  # (n, hop): the Whisper front end's 400 and 160


@pytest.mark.parametrize("n, hop", WINDOWED)
def test_the_cpu_implementation_applies_the_window_and_reads_overlapping_frames(n, hop):
    torch.manual_seed(n)
    for _ in check_windowed(lambda x, dim, n, out_len, kind, w: torch.ops.aotcuda.fft_rows(
            x, None, dim, n, out_len, kind, False, 1.0, w), n, hop, torch.float32):
        pass


def test_a_window_is_refused_for_c2r_and_of_the_wrong_length():
    with pytest.raises(ValueError, match="window must be"):
        torch.ops.aotcuda.fft_rows(torch.randn(2, 5, 2), None, 1, 8, 8, "c2r", True, 1.0, torch.ones(5))
    with pytest.raises(ValueError, match="window must be"):
        torch.ops.aotcuda.fft_rows(torch.randn(2, 8), None, 1, 8, 5, "r2c", False, 1.0, torch.ones(7))


def weighted_cases(n, dtype=torch.float32, device="cpu"):
    """(name, x, dim, out_len, kind, inverse, scale, window, weight) with x a strided pair (_pair_rows) and
    `weight` a pair that broadcasts against it: over the batch dims (one weight per point, [L, 1, 2]) or of
    x's full shape (each row its own, itself strided), for c2c and c2r; c2r also from fewer bins than
    n // 2 + 1 (the weight masked with x), c2c also with a window."""
    z = _pair_rows(n, dtype, device)
    half = _pair_rows(n // 2 + 1, dtype, device)
    fewer = half[:, : n // 4 + 1]
    window = torch.rand(n, dtype=torch.float32, device=device)
    return [("c2c, a weight per point", z, 1, n, "c2c", False, 1.0, None, _pair_rows(n, dtype, device)[0, :, :1]),
            ("c2c inverse, a weight per row and point", z, 1, n, "c2c", True, 1 / n, None,
             _pair_rows(n, dtype, device)),
            ("c2c, a weight and a window", z, 1, n, "c2c", False, 1.0, window,
             torch.randn(n, 1, 2, dtype=dtype, device=device)),
            ("c2r, a weight per bin", half, 1, n, "c2r", True, 1 / n, None,
             torch.randn(n // 2 + 1, 1, 2, dtype=dtype, device=device)),
            ("c2r from fewer bins, a weight per row and bin", fewer, 1, n, "c2r", True, 1.0, None,
             _pair_rows(n // 4 + 1, dtype, device))]


def check_weighted(transform, n, dtype=torch.float32, device="cpu"):
    """transform(x, dim, n, out_len, kind, inverse, scale, window, weight) against torch.fft in float64 of
    x·weight (complex) ·window."""
    for name, x, dim, out_len, kind, inverse, scale, window, weight in weighted_cases(n, dtype, device):
        got = transform(x, dim, n, out_len, kind, inverse, scale, window, weight)
        product = torch.view_as_complex(x.double().contiguous()) * torch.view_as_complex(weight.double().contiguous())
        if window is not None:
            product = product * window.double()[:, None]
        want = expected(torch.view_as_real(product), dim, n, out_len, kind, inverse, scale)
        assert got.shape == want.shape and got.dtype == dtype, (name, n, got.shape, want.shape)
        error = relative_error(got, want)
        assert error < TOLERANCE[dtype], (name, n, dtype, error)
        yield name, error


WEIGHTED_LENGTHS = [16, 64, 67]  # 16: one dot; 64: a dot and a butterfly; 67: Bluestein (m = 135)


def test_the_cpu_implementation_multiplies_by_the_weight():
    torch.manual_seed(4)
    for _ in check_weighted(lambda x, *args: torch.ops.aotcuda.fft_rows(x, None, *args), 64):
        pass


def test_a_bad_weight_is_refused_naming_what_it_takes():
    """A weight that does not broadcast against x (or would grow it), with no pair's 2, for r2c, of float64,
    on another device: ValueError from the op (its CPU implementation and its fake alike)."""
    x, h = torch.randn(3, 8, 2), torch.randn(3, 5, 2)
    bad = [(x, "c2c", torch.randn(9, 2)), (x, "c2c", torch.randn(2, 3, 8, 2)), (x, "c2c", torch.randn(8, 1)),
           (h, "c2r", torch.randn(4, 2)), (x[..., 0], "r2c", torch.randn(8, 2)),
           (x, "c2c", torch.randn(8, 2, dtype=torch.float64)), (x, "c2c", torch.randn(8, 2, device="meta"))]
    for value, kind, weight in bad:
        with pytest.raises(ValueError, match=r"weight must be a pair that broadcasts against x .* for c2c or c2r; got"):
            torch.ops.aotcuda.fft_rows(value, None, 1, 8, 8, kind, kind == "c2r", 1.0, None, weight)
    with torch._subclasses.FakeTensorMode() as mode:
        with pytest.raises(ValueError, match="weight must be"):
            torch.ops.aotcuda.fft_rows(mode.from_tensor(x), None, 1, 8, 8, "c2c", False, 1.0, None,
                                       mode.from_tensor(torch.randn(7, 2)))


# ---- in Triton's interpreter ---------------------------------------------------------------------------

def check_interpreted():
    """Every case of every length in float32 and float16 (and bfloat16 for BFLOAT16_LENGTHS) through the
    interpreter (run_interpreted)."""
    torch.manual_seed(0)
    for n in LENGTHS:
        for dtype in (torch.float32, torch.float16) + ((torch.bfloat16,) if n in BFLOAT16_LENGTHS else ()):
            for name, error in check(lambda *args: fft_rows.launch(args[0], None, *args[1:]), n, dtype):
                print(n, dtype, name, f"{error:.1e}")


@NEEDS_TRITON
def test_the_kernel_matches_torch_fft_in_tritons_interpreter():
    lines = run_interpreted("test_fft_rows_kernel")
    assert len(lines) == sum((2 + (n in BFLOAT16_LENGTHS)) * len(cases(n, torch.float32)) for n in LENGTHS)


def _run_here(function: str, three_products: bool = False) -> list[str]:
    """The lines this module's `function`() printed, run in Triton's interpreter (run_code), with float32's complex
    products in three real products (fft_rows.THREE_PRODUCTS) or four."""
    return run_code(f"""
        import sys
        import triton.language as tl
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from aotcuda.kernels import fft_rows
        fft_rows.THREE_PRODUCTS = tl.constexpr({three_products})
        import test_fft_rows_kernel
        test_fft_rows_kernel.{function}()
    """).splitlines()


def check_float32_interpreted():
    """Every case of every length in float32 through the interpreter."""
    torch.manual_seed(4)
    for n in LENGTHS:
        for name, error in check(lambda *args: fft_rows.launch(args[0], None, *args[1:]), n, torch.float32):
            print(n, name, f"{error:.1e}")


@NEEDS_TRITON
def test_the_kernel_with_three_products_a_complex_product_matches_torch_fft_in_tritons_interpreter():
    """fft_rows.THREE_PRODUCTS (off by default until timed on the H200): float32's complex products in Gauss's
    three real products, every length and kind against float64 (check's tolerance)."""
    lines = _run_here("check_float32_interpreted", three_products=True)
    assert len(lines) == sum(len(cases(n, torch.float32)) for n in LENGTHS)


def check_windowed_interpreted():
    """Every windowed case (windowed_cases) of WINDOWED in float32 and float16 through the interpreter."""
    torch.manual_seed(1)
    for n, hop in WINDOWED:
        for dtype in (torch.float32, torch.float16):
            for name, error in check_windowed(lambda x, dim, n, out_len, kind, w: fft_rows.launch(
                    x, None, dim, n, out_len, kind, False, 1.0, w), n, hop, dtype):
                print(n, dtype, name, f"{error:.1e}")


@NEEDS_TRITON
def test_the_kernel_applies_the_window_and_reads_overlapping_frames_in_tritons_interpreter():
    lines = _run_here("check_windowed_interpreted")
    print("\n".join(lines))
    assert len(lines) == 2 * len(WINDOWED) * len(windowed_cases(8, 2, torch.float32))


def check_weighted_interpreted():
    """Every weighted case (weighted_cases) of WEIGHTED_LENGTHS in float32 through the interpreter."""
    torch.manual_seed(5)
    for n in WEIGHTED_LENGTHS:
        for name, error in check_weighted(lambda x, *args: fft_rows.launch(x, None, *args), n):
            print(n, name, f"{error:.1e}")


@NEEDS_TRITON
def test_the_kernel_multiplies_by_the_weight_in_tritons_interpreter():
    lines = _run_here("check_weighted_interpreted")
    print("\n".join(lines))
    assert len(lines) == len(WEIGHTED_LENGTHS) * len(weighted_cases(8))


class Filters(torch.nn.Module):
    """A spectral filter irfft(rfft(x, dim=1)·w, dim=1) (one weight per bin and channel) and an inverse c2c of
    a product (one weight per point)."""

    def __init__(self, n):
        super().__init__()
        self.n = n
        self.w = torch.nn.Parameter(torch.randn(n // 2 + 1, 3, dtype=torch.complex64))
        self.v = torch.nn.Parameter(torch.randn(n, dtype=torch.complex64))

    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x, dim=1) * self.w, n=self.n, dim=1)
        return filtered, torch.view_as_real(torch.fft.ifft(self.v * torch.fft.fft(torch.view_as_complex(z))))


@NEEDS_TRITON
@pytest.mark.parametrize("n", [64, 67])  # 67: the Bluestein kernel
def test_a_filter_whose_product_the_pass_fused_matches_eager_in_tritons_interpreter(tmp_path, monkeypatch, n):
    """Filters rewritten by the pass with the kernel form taken on the CPU (as on CUDA): each product fused into
    its fft_rows node's weight, no multiply or flip left; the program saved and run in the interpreter with
    every fft_rows node launching the kernel (fft_rows.launch, not the op's CPU implementation), against eager
    on fresh inputs. (The rewrite itself runs here: under the interpreter the op's trace would call the kernel.)"""
    from aotcuda.passes import ReplaceComplexWithRealPass
    from aotcuda.passes.complex_to_real.spectral import transform as spectral

    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "1")
    monkeypatch.setattr(spectral, "on_cpu", lambda x: False)
    torch.manual_seed(n)
    model = Filters(n)
    ep = torch.export.export(model, (torch.randn(2, n, 3), torch.randn(4, n, 2))).run_decompositions()
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    kernels = [node for node in new.graph.nodes if node.target is torch.ops.aotcuda.fft_rows.default]
    assert [node.args[5] for node in kernels if len(node.args) > 9 and node.args[9] is not None] == ["c2r", "c2c"]
    others = [node.target for node in new.graph.nodes if node.op == "call_function" and node not in kernels]
    assert not {torch.ops.aten.mul.Tensor, torch.ops.aten.flip.default} & set(others), others
    inputs = [(torch.randn(2, n, 3), torch.randn(4, n, 2)) for _ in range(2)]
    with torch.no_grad():
        torch.save({"inputs": inputs, "want": [model(*args) for args in inputs]}, tmp_path / "cases.pt")
    torch.export.save(new, tmp_path / "filters.pt2")
    lines = run_code(f"""
        import sys
        import torch
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from comparisons import relative_error
        from aotcuda.kernels import fft_rows
        module = torch.export.load({str(tmp_path / "filters.pt2")!r}).module()
        for node in module.graph.nodes:
            if node.target is torch.ops.aotcuda.fft_rows.default:
                node.target = fft_rows.launch
        module.recompile()
        cases = torch.load({str(tmp_path / "cases.pt")!r})
        for args, want in zip(cases["inputs"], cases["want"]):
            for got, expected in zip(module(*args), want, strict=True):
                print(f"{{relative_error(got, expected):.1e}}")
    """).splitlines()
    print("\n".join(lines))
    assert len(lines) == 2 * 2 and all(float(line) < 1e-5 for line in lines), lines


# n, kind, inverse, scale: inputs near float32's largest value whose scaled transform float32 holds, where the
# unscaled sums of the stages would not (norm="forward" and "backward" as torch.fft scales them); 1009 and 4093
# are Bluestein inside the kernel (4093 in two halves).
NEAR_LARGEST = [(1024, "c2c", False, 1 / 1024), (4096, "r2c", False, 1 / 4096), (512, "c2r", True, 1 / 512),
                (400, "c2c", True, 1 / 400), (1009, "c2c", False, 1 / 1009), (4093, "r2c", False, 1 / 4093)]


def check_near_largest_interpreted():
    """Each NEAR_LARGEST case: x of 3e38 · U(0.5, 1) through the kernel; prints whether every value is finite
    and the error against float64."""
    torch.manual_seed(3)
    for n, kind, inverse, scale in NEAR_LARGEST:
        bins = n // 2 + 1
        in_len, out_len = (bins, n) if kind == "c2r" else (n, bins if kind == "r2c" else n)
        shape = (3, in_len) if kind == "r2c" else (3, in_len, 2)
        x = (torch.rand(shape, dtype=torch.float64) * 0.5 + 0.5) * 3e38
        if kind == "c2r":
            x[:, 0, 1] = 0.0  # bins 0 and n/2 of a real signal's spectrum are real
            x[:, -1, 1] = 0.0
        out = fft_rows.launch(x.float(), None, 1, n, out_len, kind, inverse, scale)
        want = fft_rows.transformed(x, 1, n, out_len, kind, inverse, scale).double()
        got = out.double()
        error = ((got - want).norm() / want.norm()).item()
        print(n, kind, bool(torch.isfinite(got).all()), bool(torch.isfinite(want).all()), f"{error:.1e}")


@NEEDS_TRITON
@pytest.mark.parametrize("three_products", [False, True], ids=["four products", "three products"])
def test_values_near_float32s_largest_stay_finite_in_tritons_interpreter(three_products):
    """The scale is taken as the points are loaded, before the stages' sums grow up to n-fold: a transform
    whose scaled result float32 holds does not overflow on the way (it did when the scale was taken at the
    store: inf where torch.fft gives finite values). Three products sum halves (xr/2 + xi/2): xr + xi overflowed."""
    lines = _run_here("check_near_largest_interpreted", three_products)
    print("\n".join(lines))
    assert len(lines) == len(NEAR_LARGEST)
    for line in lines:
        n, kind, finite, reference_finite, error = line.split()
        assert reference_finite == "True" and finite == "True", line
        assert float(error) < 1e-6, line


@NEEDS_TRITON
def test_element_offsets_past_two_to_the_31_are_not_wrapped(tmp_path):
    # Rows 2**27 elements apart in a sparse file: row · stride passes 2**31 from the 17th row on.
    run_code(f"""
        import torch
        from aotcuda.kernels import fft_rows
        rows, stride = 20, 2 ** 27
        with open({str(tmp_path / "rows.bin")!r}, "wb") as f:
            f.truncate(rows * stride * 2)
        storage = torch.from_file({str(tmp_path / "rows.bin")!r}, shared=True, size=rows * stride,
                                  dtype=torch.float16)
        x = storage.as_strided((rows, 16, 2), (stride, 2, 1))
        torch.manual_seed(0)
        x.copy_(torch.randn(rows, 16, 2, dtype=torch.float16))
        got = fft_rows.launch(x, None, 1, 16, 16, "c2c", False, 1.0)
        want = torch.view_as_real(torch.fft.fft(torch.view_as_complex(x.double().contiguous())))
        assert ((got.double() - want).norm() / want.norm()).item() < 1e-2
    """)


@NEEDS_TRITON
@pytest.mark.parametrize("three_products", [False, True], ids=["four products", "three products"])
def test_float32_accuracy_with_tf32x3_products_emulated_is_at_cufft_level(three_products):
    # The interpreter multiplies in float32 with numpy; here its tl.dot rounds as sm_90's does: TF32x3
    # (Triton's split: big = rna(a), small = rna(a − big); big·big + big·small + small·big) and plain TF32
    # (operands truncated to 10 mantissa bits). cuFFT at n = 4096 in float32: about 3e-7. Three products
    # (fft_rows.THREE_PRODUCTS, Gauss's form for float32 data): 1.8e-7 where four give 1.4e-7.
    out = run_code("""
        import numpy as np, torch
        import triton.language as tl
        from triton.runtime import interpreter

        def tf32(a, nearest):
            bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
            bits = (bits + np.uint32(0x1000) if nearest else bits) & np.uint32(0xFFFFE000)
            return bits.view(np.float32)

        def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
            x, y = a.data.astype(np.float32), b.data.astype(np.float32)
            if "TF32X3" in str(input_precision).upper():
                xb, yb = tf32(x, True), tf32(y, True)
                out = (np.matmul(tf32(x - xb, True), yb) + np.matmul(xb, tf32(y - yb, True))) + np.matmul(xb, yb)
            else:
                out = np.matmul(tf32(x, False), tf32(y, False))
            return interpreter.TensorHandle((out + d.data).astype(np.float32), d.dtype.scalar)

        interpreter.InterpreterBuilder.create_dot = create_dot
        from aotcuda.kernels import fft_rows
        fft_rows.THREE_PRODUCTS = tl.constexpr(THREE)
        torch.manual_seed(0)
        for n in (4096, 2048):  # 2048 = 32·16·4b: two TF32x3 stages, then a radix-4 butterfly in float32
            for dtype in (torch.float32, torch.float16):
                x = torch.randn(8, n, 2).to(dtype)
                got = fft_rows.launch(x, None, 1, n, n, "c2c", False, 1.0)
                want = torch.view_as_real(torch.fft.fft(torch.view_as_complex(x.double())))
                print(((got.double() - want).norm() / want.norm()).item())
    """.replace("THREE", str(three_products)))
    errors = list(map(float, out.split()))
    assert len(errors) == 4, out
    for float32, float16 in (errors[:2], errors[2:]):
        assert float32 < 3e-7, float32
        assert float16 < 2e-3, float16  # float16's own rounding: 3e-4 (a TF32 product truncates to 2**-10)


LAUNCH_LENGTHS = [16, 32, 64, 100]


def sweep_launches() -> list:
    """The launches the interpreter runs: every tiling of LAUNCH_LENGTHS at its fewest rows a program, and
    64's default tiling at every R of fft_plan.launches (warps change nothing in the interpreter)."""
    every = [fft_plan.Launch(t, fft_plan.least_rows(t), 4) for n in LAUNCH_LENGTHS for t in fft_plan.tilings(n)]
    rows = sorted({c.rows for c in fft_plan.launches(64, 35, 1) if c.tiling == fft_plan.tiling(64)})
    return every + [fft_plan.Launch(fft_plan.tiling(64), r, 8) for r in rows]


def check_launches_interpreted():
    """Each launch of sweep_launches() given to launch() as `config`, each kind (check()'s first four
    cases) in float32, against torch.fft in float64; then the refusals of launches it cannot run."""
    torch.manual_seed(2)
    for config in sweep_launches():
        n = config.tiling.n
        for name, x, dim, out_len, kind, inverse, scale in cases(n, torch.float32)[:4]:
            got = fft_rows.launch(x, None, dim, n, out_len, kind, inverse, scale, config=config)
            want = expected(x, dim, n, out_len, kind, inverse, scale)
            error = relative_error(got, want)
            assert got.shape == want.shape and error < TOLERANCE[torch.float32], (config, name, error)
            print(n, config.describe(), name, f"{error:.1e}")
    x = torch.randn(3, 64, 2)
    tables = fft_rows.tables_for(64, "c2c", False, t=fft_plan.tiling(64))
    for config in (fft_plan.default_launch(32, 3), fft_plan.Launch(fft_plan.tiling(64), 3, 4)):
        try:
            fft_rows.launch(x, None, 1, 64, 64, "c2c", False, 1.0, config=config)
        except ValueError as error:
            print("refused:", error)
    other = fft_plan.Launch(fft_plan.Tiling(64, (64, 1, 1), (64, 1, 1)), 16, 4)
    try:  # the default tiling's tables with another tiling (of another size)
        fft_rows.launch(x, tables, 1, 64, 64, "c2c", False, 1.0, config=other)
    except ValueError as error:
        print("refused:", error)


@NEEDS_TRITON
def test_every_launch_of_the_sweep_matches_torch_fft_in_tritons_interpreter():
    lines = _run_here("check_launches_interpreted")
    refused = [line for line in lines if line.startswith("refused:")]
    assert len(lines) - len(refused) == 4 * len(sweep_launches())
    assert len(refused) == 3 and "of length 32" in refused[0] and "power of two" in refused[1]
    assert "tables must be" in refused[2]


# ---- on CUDA -------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", LENGTHS)
def test_the_cuda_kernel_matches_torch_fft(n, dtype):
    if not fft_rows.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(n)
    for _ in check(lambda *args: torch.ops.aotcuda.fft_rows(args[0], None, *args[1:]), n, dtype, "cuda"):
        pass


@pytest.mark.cuda
@pytest.mark.parametrize("n", [64, 400, 4096, 1009, 4093])  # 4096: the weighted c2c spills; 4093: two halves
def test_the_cuda_kernel_multiplies_by_the_weight(n):
    """The weighted cases (weighted_cases) on the device, lengths of the tiled kernel and of the Bluestein
    kernel's one tile and two halves (which Triton's interpreter is too slow to run)."""
    if not fft_rows.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(n)
    for _ in check_weighted(lambda x, *args: torch.ops.aotcuda.fft_rows(x, None, *args), n, device="cuda"):
        pass


@pytest.mark.cuda
# 1009 and 4093: Bluestein lengths, where the filter of a constant weight is one convolution kernel (kind conv,
# spectral/filter.py; 4093 in two halves of m = 8192)
@pytest.mark.parametrize("n", [400, 1009, 4093])
def test_a_spectral_filter_lowered_with_the_kernel_form_matches_eager(tmp_path, monkeypatch, n):
    if not fft_rows.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    import aotcuda

    class Filter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(n // 2 + 1, dtype=torch.complex64) / n)

        def forward(self, x):  # the transform along a middle dim: x [batch, n, channels]
            return torch.fft.irfft(torch.fft.rfft(x, dim=1) * self.weight[:, None], n=n, dim=1)

    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "1")
    module = Filter().cuda()
    x = torch.randn(4, n, 6, device="cuda")
    lowered = aotcuda.lower(module, (x,), device="cuda", package_path=tmp_path / "filter.pt2")
    with aotcuda.load(lowered.package_path) as program:
        for _ in range(3):
            x = torch.randn(4, n, 6, device="cuda")
            assert relative_error(program(x), module(x).detach()) < 1e-5


def check_real_bins_signed_zero_interpreted():
    """The r2c kernel's bins real by symmetry (0, n/2) against rfft's, by the sign of their zero imaginary part."""
    torch.manual_seed(0)
    for n in (7, 8, 9, 10, 67, 68):
        x = torch.randn(4, n) - 3  # a negative sum: angle() of the DC bin is ±π by that sign
        got = fft_rows.launch(x, None, 1, n, n // 2 + 1, "r2c", False, 1.0)
        want = torch.view_as_real(torch.fft.rfft(x))
        bins = [0, n // 2] if n % 2 == 0 else [0]
        print(n, torch.equal(got[:, bins, 1].signbit(), want[:, bins, 1].signbit()))


@NEEDS_TRITON
def test_the_r2c_kernel_gives_eagers_plus_zero_at_the_real_bins_in_tritons_interpreter():
    """Fifth new user (2026-12-06): the CPU forms gave −0.0 at the DC bin of an odd-length rfft of a negative-sum
    input (angle −π, eager +π); rules/fft.py writes +0.0 there after every form but this one (whose result the
    fusions after the rewrite match). This kernel already gives +0.0 there (checked in the interpreter; not yet on
    the H200)."""
    assert _run_here("check_real_bins_signed_zero_interpreted") == [f"{n} True" for n in (7, 8, 9, 10, 67, 68)]
