"""aotcuda::fft_rows at Bluestein lengths past 4096 (kernels/fft_bluestein_parts.py, its plans
fft_plan.bluestein's ``_parted``): the convolution of m ≥ 2n − 1 > 8192 points as S parts of h ≤ 4096, two of a
row's points folded onto each of h's, against torch.fft in float64 on fresh random rows.

- Without Triton: which lengths take such a plan, and that its tables rebuild the DFT in float64 to 1e-12 when run
  as the kernel runs them (each part's chirp in, fold, h's stages, its spectrum bins, the stages transposed on the
  conjugate, each fold's point times its chirp out, the parts summed).
- In Triton's interpreter (a subprocess): every case the Bluestein kernels' tests run (test_fft_rows_bluestein:
  check()'s c2c/r2c/c2r layouts, bfloat16, stft's window, the real rows in pairs with a quiet row and a NaN row, a
  constant filter's convolution) at n = 67 planned as 3 parts of 48, as 4 parts of 36 and as 2 halves of 72 run by
  the parted kernels (fft_rows.HALVES_AS_PARTS; the interpreter is too slow for h = 4096 on many cases), then a few cases at the real lengths 4099 (3 parts of 2760) and 8191 (4 parts of 4096).
- On CUDA: the real lengths' cases, the pairs', the convolution's and check()'s in float32 and bfloat16 at 4099, 5003
  and 8191 through the op, and at 2049, 3001 and 4093 (two halves) with HALVES_AS_PARTS on.
"""

import contextlib
import importlib.util
from pathlib import Path

import pytest
import torch

from aotcuda.kernels import fft_plan, fft_rows
from comparisons import relative_error
from interpreted import run_code
from test_fft_rows_bluestein import _within_halves_tolerance, check_conv, check_pairs
from test_fft_rows_kernel import _stages_in_float64, cases, check, check_windowed, windowed_cases

NEEDS_TRITON = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
# Lengths past 4096 with a prime factor above 61: primes, 2·2053, 67·71 (two large factors), the last below 8192.
PARTED = [4099, 4106, 4757, 5003, 6151, 7919, 8191]


def test_lengths_past_4096_with_a_large_prime_factor_run_in_parts_of_at_most_4096():
    """Each has a plan of 3 or 4 parts of h ≤ TILE, h ≥ n/2 (two folds), m ≥ 2n − 1, that a default launch runs;
    smooth lengths past 4096 (the GEMM form's own factorization), lengths past 8192 and the switch that puts every
    m past TILE back on the GEMM form have none."""
    for n in PARTED:
        plan = fft_plan.kernel_plan(n)
        assert isinstance(plan, fft_plan.Bluestein) and plan.parts in (3, 4) and plan.folds == 2, (n, plan)
        assert plan.m >= 2 * n - 1 and 2 * plan.tiling.n >= n and plan.tile <= fft_plan.TILE, (n, plan)
        assert fft_plan.default_launch(n, 512).problem() is None, n
        assert fft_plan.covers(n)
    assert fft_plan.bluestein(4099).describe() == "Bluestein m=8280 (3 parts of 2760: 30→32·23→32·4b, 2 folds)"
    assert fft_plan.bluestein(8191).describe() == "Bluestein m=16384 (4 parts of 4096: 32·32·4b, 2 folds)"
    for n in (4100, 6000, 8192, 8209, 2 * 4099, 10007):
        assert fft_plan.kernel_plan(n) is None, n
    try:
        fft_plan.set_bluestein_tile(fft_plan.TILE)
        assert fft_plan.kernel_plan(4099) is None
    finally:
        fft_plan.set_bluestein_tile(2 * fft_plan.TILE)
    assert fft_plan.kernel_plan(4099).parts == 3


def _parted_plan_in_float64(x: torch.Tensor, plan: fft_plan.Bluestein, inverse: bool) -> torch.Tensor:
    """The parted kernel's math on complex rows x [rows, n] in float64, from the plan's tables."""
    n, t, parts = plan.n, plan.tiling, plan.parts
    values = fft_plan.table_values(plan, inverse)
    assert values.numel() == plan.table_numel()
    base = t.table_numel()
    chirps = values[base: base + parts * 4 * n].reshape(parts, 2, 2, n)  # [part, in/out, re/im, n]
    chirps = torch.complex(chirps[:, :, 0], chirps[:, :, 1])
    blocks = values[base + parts * 4 * n:].reshape(parts, 2, *t.padded)
    a, b, c = t.factors
    h = t.n
    got = 0
    for s in range(parts):
        spectrum = torch.complex(blocks[s, 0], blocks[s, 1])[:a, :b, :c].permute(2, 1, 0).reshape(-1)
        z = torch.nn.functional.pad(x * chirps[s, 0], (0, plan.folds * h - n))
        folded = z.reshape(x.shape[0], plan.folds, h).sum(1)
        y = _stages_in_float64(folded, t, False) * spectrum
        u = _stages_in_float64(y.conj(), t, False).conj()
        got = got + u.repeat(1, plan.folds)[:, :n] * chirps[s, 1]
    return got


@pytest.mark.parametrize("n", [4099, 5003, 8191])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_the_parted_tables_run_as_the_kernel_runs_them_rebuild_the_dft_in_float64(n, inverse):
    plan = fft_plan.kernel_plan(n)
    x = torch.randn(2, n, dtype=torch.complex128)
    want = torch.fft.ifft(x, norm="forward") if inverse else torch.fft.fft(x)
    got = _parted_plan_in_float64(x, plan, inverse)
    assert relative_error(torch.view_as_real(got), torch.view_as_real(want)) < 1e-12


def test_a_length_planned_in_parts_of_a_smaller_h_rebuilds_the_dft_in_float64():
    """The small plans the interpreter runs (n = 67 as 3 parts of 48 and 4 of 36: two folds) are the same math."""
    for h, parts in ((48, 3), (36, 4)):
        plan = fft_plan.Bluestein(67, fft_plan.tiling(h), parts)
        assert fft_plan.Launch(plan, 4, 4).problem() is None and plan.folds == 2
        x = torch.randn(3, 67, dtype=torch.complex128)
        got = _parted_plan_in_float64(x, plan, False)
        assert relative_error(torch.view_as_real(got), torch.view_as_real(torch.fft.fft(x))) < 1e-12


@contextlib.contextmanager
def planned(n: int, plan: fft_plan.Bluestein):
    """fft_plan.kernel_plan(n) is `plan` inside (fft_rows and fft_plan read it by name)."""
    original = fft_plan.kernel_plan
    patched = lambda k: plan if k == n else original(k)  # noqa: E731
    fft_plan.kernel_plan = fft_rows.kernel_plan = patched
    try:
        yield
    finally:
        fft_plan.kernel_plan = fft_rows.kernel_plan = original


def _real_length_cases(n: int, device: str):
    """A few cases a length: (name, x, launch args after x and tables, want in float64)."""
    f64 = lambda z: z.cpu().double()  # noqa: E731
    pair = lambda rows, k, dtype=torch.float32: torch.randn(rows, k, 2, device=device).to(dtype)  # noqa: E731
    x = pair(1, n)
    spectrum = lambda z: torch.view_as_complex(f64(z).contiguous())  # noqa: E731
    out = [("c2c", x, (1, n, n, "c2c", False, 1.0), torch.view_as_real(torch.fft.fft(spectrum(x))))]
    x = pair(1, n, torch.bfloat16)
    out.append(("c2c_inverse_bfloat16", x, (1, n, n, "c2c", True, 1 / n),
                torch.view_as_real(torch.fft.ifft(spectrum(x)))))
    x = pair(2, n // 2 + 1)
    out.append(("c2r_pair", x, (1, n, n, "c2r", True, 1 / n), torch.fft.irfft(spectrum(x), n=n)))
    x = torch.randn(3, n, device=device)
    x[1] *= 1e-6
    out.append(("r2c_3_rows_one_quiet", x, (1, n, n // 2 + 1, "r2c", False, 1.0),
                torch.view_as_real(torch.fft.rfft(f64(x)))))
    return out


def check_real_lengths(launch, lengths, device: str = "cpu") -> list[str]:
    """_real_length_cases through `launch` at each length, then a constant filter's convolution of 2 rows: a line a
    case, the largest relative error of a row."""
    lines = []
    for n in lengths:
        for name, x, args, want in _real_length_cases(n, device):
            got = launch(x, None, *args)
            assert got.shape == want.shape and got.dtype == x.dtype, (name, got.shape, want.shape)
            worst = max(relative_error(g.cpu(), w) for g, w in zip(got, want))
            lines.append(f"{n} parts {x.dtype} {name} {worst:.1e}")
        w = torch.randn(n // 2 + 1, dtype=torch.complex128)
        tables = fft_plan.filter_values(fft_plan.kernel_plan(n), torch.fft.irfft(w, n=n)).float().to(device)
        x = torch.randn(2, n, device=device)
        got = launch(x, tables, 1, n, n, "conv", False, 1.0)
        want = torch.fft.irfft(torch.fft.rfft(x.cpu().double()) * w, n=n)
        lines.append(f"{n} parts {x.dtype} conv {max(map(relative_error, got.cpu(), want)):.1e}")
    return lines


@contextlib.contextmanager
def halves_as_parts(on: bool):
    """fft_rows.HALVES_AS_PARTS is `on` inside."""
    original = fft_rows.HALVES_AS_PARTS
    fft_rows.HALVES_AS_PARTS = on
    try:
        yield
    finally:
        fft_rows.HALVES_AS_PARTS = original


def test_two_halves_run_in_parts_only_with_halves_as_parts():
    halves, parted = fft_plan.kernel_plan(4093), fft_plan.kernel_plan(4099)
    assert halves.parts == 2 and halves.folds == 1
    assert not fft_rows.runs_in_parts(halves) and fft_rows.runs_in_parts(parted)
    with halves_as_parts(True):
        assert fft_rows.runs_in_parts(halves) and fft_rows.runs_in_parts(parted)
        assert not fft_rows.runs_in_parts(fft_plan.kernel_plan(2039)) and not fft_rows.runs_in_parts(fft_plan.tiling(4096))


def check_parted_interpreted():
    """Every case of the Bluestein kernels' tests at n = 67 planned in parts (3 of 48, 4 of 36, and 2 halves of 72 run
    by the parted kernels: HALVES_AS_PARTS), then the real lengths 4099 and 8191: a line a case."""
    torch.manual_seed(11)
    launch = lambda *args: fft_rows.launch(args[0], None, *args[1:])  # noqa: E731
    for h, parts in ((48, 3), (36, 4), (72, 2)):
        with planned(67, fft_plan.Bluestein(67, fft_plan.tiling(h), parts)), halves_as_parts(parts == 2):
            tag = f"67/{parts}"
            for dtype in (torch.float32, torch.bfloat16):
                for name, error in check(launch, 67, dtype):
                    print(tag, "parts", dtype, name.replace(" ", "_"), f"{error:.1e}", flush=True)
            for name, error in check_windowed(lambda x, dim, n, out_len, kind, w: fft_rows.launch(
                    x, None, dim, n, out_len, kind, False, 1.0, w), 67, 23, torch.float32):
                print(tag, "parts", torch.float32, name.replace(" ", "_"), f"{error:.1e}", flush=True)
            for line in check_pairs(fft_rows.launch, 67) + check_conv(fft_rows.launch, 67):
                print(tag, line, flush=True)
    for line in check_real_lengths(fft_rows.launch, (4099, 8191)):
        print(line, flush=True)


@NEEDS_TRITON
def test_the_parted_kernels_match_torch_fft_in_tritons_interpreter():
    lines = run_code(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_fft_rows_bluestein_parts
        test_fft_rows_bluestein_parts.check_parted_interpreted()
    """).splitlines()
    print("\n".join(lines))
    from test_fft_rows_bluestein import _conv_cases, _pairs_cases
    small = 2 * len(cases(8, torch.float32)) + len(windowed_cases(8, 2, torch.float32)) + len(_pairs_cases(8)) + 1
    assert len(lines) == 3 * (small + len(_conv_cases(8))) + 2 * (len(_real_length_cases(8, "cpu")) + 1)
    _within_halves_tolerance(lines)


# ---- on CUDA -------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("n", [4099, 5003, 8191, 2049, 3001, 4093])
def test_the_cuda_parted_kernels_match_torch_fft(n):
    """The parted lengths, and lengths of two halves run by the parted kernels (HALVES_AS_PARTS)."""
    torch.manual_seed(0)
    op = lambda *args: torch.ops.aotcuda.fft_rows(*args)  # noqa: E731
    with halves_as_parts(fft_plan.kernel_plan(n).parts == 2):
        assert fft_rows.runs_in_parts(fft_plan.kernel_plan(n))
        lines = check_real_lengths(op, (n,), "cuda") + check_pairs(op, n, "cuda") + check_conv(op, n, "cuda")
        for dtype in (torch.float32, torch.bfloat16):
            lines += [f"{n} {dtype} {name.replace(' ', '_')} {error:.1e}" for name, error in check(
                lambda *args: op(args[0], None, *args[1:]), n, dtype, "cuda")]
    print("\n".join(lines))
    _within_halves_tolerance(lines)
