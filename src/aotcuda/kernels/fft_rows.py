"""``aotcuda::fft_rows``: the DFT of every row of a tensor along one dim, one kernel launch, one read and write.

    fft_rows(x, tables, dim, n, out_len, kind, inverse, scale, window=None, weight=None) -> out

kind "c2c": x a complex pair (a complex tensor of shape S as a real one of shape S + [2], any strides, the
pair's two parts `stride(-1)` apart), out the pair of the length-n DFT along complex dim `dim`
(exp(−2πi·t·k/n); inverse: exp(+2πi·t·k/n)) times `scale`. kind "r2c": x real, its forward DFT. kind
"c2r": x the Hermitian half of a spectrum (pair), out the real inverse DFT of length n (pocketfft's c2r:
bins past n//2 are the conjugates of those below, the imaginary parts of bins 0 and n/2 drop out). kind
"conv" (a Bluestein length only): x real, out the real circular convolution of length n of each row with the
kernel g whose spectrum `tables` holds (fft_plan.filter_values(plan, g): no other tables, none built here),
times `scale`: a spectral filter irfft(rfft(x)·w) whose w is a constant, in two m-point DFTs a pair of rows
(spectral/filter.py). Along
`dim`, x is zero-padded or cropped to n (c2r: its half to n//2 + 1 bins) and out keeps the first `out_len`
points (r2c one-sided: n//2 + 1). out is a new tensor of x's dtype (float32, float16 or bfloat16; a pair
again except for c2r and conv) with `out_len` along `dim`, laid out as cuFFT lays out its result (the transformed
dim innermost: empty_out). Every other dim of x (at most MAX_BATCH_DIMS) is a batch dim read with its own
stride: a transform along a middle dim needs no copy. n is any length fft_plan covers (``covers``: a tiling, or
a Bluestein plan run by the Bluestein kernel, kernels/fft_bluestein.py, with the same arguments). `tables` is
fft_plan.table_values(fft_plan.kernel_plan(n), direction) in float32 (direction: inverse for c2c, forward for
r2c, inverse for c2r) on x's device, or None to build it here; passes hand it in as a program constant.
`window` (c2c and r2c; None: none): a real 1-D tensor of x.shape[dim] values (n for stft's frames) that
multiplies each row as it is loaded, x[t]·window[t] in float32: stft's window multiply, fused. `weight` (c2c
and c2r; None: none): a pair (float32, float16 or bfloat16, on x's device) that broadcasts against x without
growing it, read with its own strides (0 on a broadcast dim); x times weight as complex numbers in float32 as
the points are loaded, before the transform (c2r: the Hermitian half's bins, before the mirror), i.e.
transformed(weighted(x, weight), …): a spectral filter's spectrum times its weight before the irfft, fused
(spectral/product.py; fft_rows_cpu takes the same operand, checked by the same check_weight). Batch strides
may overlap (stft's frames, unfold's view with a hop below n): the kernel only reads x, so the frames are
read from the signal in place.

The CUDA kernel holds R rows of the tile of kernels/fft_plan.py in registers: loads them once (a real row
for r2c; for c2r the Hermitian half, mirrored and conjugated as it is loaded; times the weight and the window
where they are given), runs up to three stages of
complex DFT products (tl.dot of the tile against the [P, P] tables, four real products each; two where
the input is real or only the real output is kept) with the twiddle products between them and tl.permute
bringing the next stage's index last (a last stage of 2 or 4 points is fft_plan's radix-2 or radix-4
butterfly instead: float32 adds on an axis of exactly 2 or 4, split and rebuilt with tl.split/tl.join, no
table; it needs the direction, the INVERSE constexpr), and stores the first `out_len` points, times `scale`, once. All
arithmetic is float32: the products in "tf32x3" (three TF32 tensor-core products, float32's accuracy:
Markidis et al. 2018; Triton's input_precision) for float32 data, in TF32 for float16 and bfloat16 data
(whose own rounding is coarser). The method is FlashFFTConv's (Fu, Kumbong et al. 2023: an FFT as
matrix products on tensor cores, the data kept on chip between them), on the four-step decomposition of
Bailey (1990).
"""

from __future__ import annotations

import torch

from aotcuda.kernels import HAVE_TRITON, launcher
from aotcuda.kernels.fft_plan import (Bluestein, Launch, Tiling, covers, default_launch, kernel_plan, kernel_spectrum,
                                      table_values)

OP = "aotcuda::fft_rows"
KINDS = ("c2c", "r2c", "c2r", "conv")
REAL_IN = ("r2c", "conv")  # the kinds whose x is real (no pair)
REAL_OUT = ("c2r", "conv")  # the kinds whose out is real
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BATCH_DIMS = 4
# tl.dot's input_precision by data type: float32's accuracy for float32 data (three TF32 products; in
# Triton's interpreter with its rounding emulated, 1.4e-7 relative at n = 4096, cuFFT's 3e-7), one TF32
# product for half data (9e-4 for float16 at n = 4096: twice its own rounding; bfloat16's is 4e-3).
PRECISION = {torch.float32: "tf32x3", torch.float16: "tf32", torch.bfloat16: "tf32"}


# r2c and c2r at a Bluestein length as one complex transform a pair of rows (kernels/fft_bluestein.py's pairs
# kernel): Bluestein's convolution is complex whatever the input, so a real row alone spends half of it. Read at
# each launch; a benchmark sets it for A/B (fft_tiling_sweep.py --bluestein-pairs).
BLUESTEIN_PAIRS = True


# A Bluestein plan of two halves (n in 2049…4096) run by kernels/fft_bluestein_parts.py's kernels, as 2 parts of one
# fold, instead of kernels/fft_bluestein.py's (its tables are laid out alike). Compiled for sm_90, the parted pairs
# kernel at 4093 spills r2c 128 and c2r 88 bytes a thread against the halves kernel's 488 and 512 (docs/performance.md,
# session 34); not yet timed on a GPU, so off. Read at each launch; a benchmark sets it for A/B (--halves-as-parts).
HALVES_AS_PARTS = False


def runs_in_parts(plan) -> bool:
    """Whether a launch of `plan` runs kernels/fft_bluestein_parts.py's kernels (float32 out, summed over the parts
    in Out): a Bluestein plan past two halves (more parts, or two folds), or of two halves with HALVES_AS_PARTS."""
    if not isinstance(plan, Bluestein):
        return False
    return plan.parts > 2 or plan.folds > 1 or (HALVES_AS_PARTS and plan.parts == 2)


def pairs_rows(plan, kind: str, n: int, out_len, out_dtype: torch.dtype) -> bool:
    """Whether a launch runs its real rows two to a complex transform: a Bluestein plan, BLUESTEIN_PAIRS on, and
    c2r, or r2c with float32 out of n // 2 + 1 bins (where the pair's transform is kept whole before it is
    separated). The row count is not asked: a last row without its pair runs alone in its pair's program, and a
    count that is symbolic (a dynamic batch, traced by Inductor) is not compared, which would guard on it."""
    if kind == "conv":  # only the pairs kernel convolves (its rows are real, and so are its results)
        return isinstance(plan, Bluestein)
    if not (BLUESTEIN_PAIRS and isinstance(plan, Bluestein)):
        return False
    return kind == "c2r" or (kind == "r2c" and out_dtype == torch.float32 and out_len == n // 2 + 1)


def direction(kind: str, inverse: bool) -> bool:
    """Whether the tables of a transform of this kind are the inverse's (exp(+2πi…))."""
    return {"c2c": inverse, "r2c": False, "c2r": True, "conv": False}[kind]


def tables_for(n: int, kind: str, inverse: bool, device=None, t: Tiling | Bluestein | None = None) -> torch.Tensor:
    """The float32 `tables` argument for a length-n transform of this kind, on `device`, for tiling t
    (default: kernel_plan(n), the op's)."""
    return table_values(t or kernel_plan(n), direction(kind, inverse)).to(device=device, dtype=torch.float32)


def supports(x: torch.Tensor, dim: int, n, kind: str) -> bool:
    """Whether fft_rows takes x (a pair for c2c and c2r) for a transform of length n along complex dim
    `dim`: n static and covered (fft_plan.covers: a tiling, or Bluestein), x of a supported dtype, at most
    MAX_BATCH_DIMS other dims."""
    complex_dims = x.dim() - (0 if kind in REAL_IN else 1)
    return (covers(n) and x.dtype in DTYPES
            and 0 <= dim < complex_dims and complex_dims - 1 <= MAX_BATCH_DIMS)


def empty_out(x: torch.Tensor, dim: int, out_len, kind: str) -> torch.Tensor:
    """The output: x's dims with `out_len` at `dim` (a pair's trailing 2 except for c2r), laid out as
    cuFFT's (_exec_fft: the batch dims in order, the transformed dim innermost), so that a pass that
    keeps eager's layout copies nothing after it where x is contiguous. No size is compared: a dynamic
    batch adds no guard."""
    complex_dims = x.dim() - (0 if kind in REAL_IN else 1)
    batch = [x.shape[d] for d in range(complex_dims) if d != dim]
    pair = [] if kind in REAL_OUT else [2]
    return x.new_empty([*batch, out_len, *pair]).movedim(len(batch), dim)


def _check(x, tables, dim, n, out_len, kind, window=None, weight=None, t: Tiling | Bluestein | None = None):
    if kind not in KINDS:
        raise ValueError(f"{OP}: kind must be one of {KINDS}; got {kind!r}")
    if not supports(x, dim, n, kind):
        raise ValueError(f"{OP}: cannot transform a {x.dtype} tensor of shape {tuple(x.shape)} along dim {dim} "
                         f"as {kind} of length {n} (a length of kernels/fft_plan.py's tilings, float32/16 or "
                         f"bfloat16, at most {MAX_BATCH_DIMS} batch dims, a pair's trailing 2 for c2c and c2r)")
    if kind not in REAL_IN and x.shape[-1] != 2:
        raise ValueError(f"{OP}: {kind} takes a pair (trailing dim 2); got shape {tuple(x.shape)}")
    if isinstance(out_len, int) and not 1 <= out_len <= n:
        raise ValueError(f"{OP}: out_len must be in [1, n = {n}]; got {out_len}")
    t = t or kernel_plan(n)
    if kind == "conv" and (tables is None or not isinstance(t, Bluestein)):
        raise ValueError(f"{OP}: conv takes the tables of a Bluestein length's convolution (fft_plan.filter_values), "
                         f"which hold its kernel; got {'none' if tables is None else 'tables'} for {t.describe()}")
    if tables is not None and (tables.dtype != torch.float32 or tables.numel() != t.table_numel()):
        raise ValueError(f"{OP}: tables must be fft_plan.table_values({t.describe()} of {n}, …) in float32 "
                         f"({t.table_numel()} values); got {tables.numel()} {tables.dtype}")
    check_window(OP, x, dim, kind, window)
    check_weight(OP, x, kind, weight)


def check_window(op: str, x: torch.Tensor, dim: int, kind: str, window: torch.Tensor | None) -> None:
    """ValueError unless `window` is None or what `op` (fft_rows, fft_rows_cpu) multiplies rows by: a real
    1-D tensor (float16, bfloat16, float32 or float64) of x.shape[dim] values on x's device, for c2c or r2c."""
    if window is not None and (kind in REAL_OUT or window.dim() != 1 or window.dtype not in (*DTYPES, torch.float64)
                               or window.device != x.device or window.shape[0] != x.shape[dim]):
        raise ValueError(f"{op}: window must be a real 1-D tensor of x.shape[dim] = {x.shape[dim]} values on "
                         f"{x.device}, for c2c or r2c; got {window.dtype} {tuple(window.shape)} on {window.device} "
                         f"for {kind}")


def check_weight(op: str, x: torch.Tensor, kind: str, weight: torch.Tensor | None) -> None:
    """ValueError unless `weight` is None or what `op` (fft_rows, fft_rows_cpu) multiplies x by: a pair
    (trailing 2, a dtype of DTYPES, x's device) that broadcasts against pair x without growing it, for c2c
    or c2r."""
    if weight is None:
        return
    fits = (kind not in REAL_IN and weight.dtype in DTYPES and weight.device == x.device and 0 < weight.dim() <= x.dim()
            and weight.shape[-1] == 2)
    if fits:
        try:
            fits = tuple(torch.broadcast_shapes(weight.shape, x.shape)) == tuple(x.shape)
        except RuntimeError:
            fits = False
    if not fits:
        raise ValueError(f"{op}: weight must be a pair that broadcasts against x {tuple(x.shape)} on {x.device}, "
                         f"for c2c or c2r; got {weight.dtype} {tuple(weight.shape)} on {weight.device} for {kind}")


def weighted(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Pair x times pair weight as complex numbers, in float32 (x itself where weight is None): what the
    `weight` operand means (transformed(weighted(x, weight), …))."""
    if weight is None:
        return x
    xr, xi = x.float().unbind(-1)
    wr, wi = weight.float().unbind(-1)
    return torch.stack([xr * wr - xi * wi, xr * wi + xi * wr], -1)


def _fit(z: torch.Tensor, length: int) -> torch.Tensor:
    """z [..., m] zero-padded or cropped to `length` along its last dim."""
    m = z.shape[-1]
    return z[..., :length] if m >= length else torch.nn.functional.pad(z, (0, length - m))


def transformed(x: torch.Tensor, dim: int, n: int, out_len: int, kind: str, inverse: bool, scale: float,
                window: torch.Tensor | None = None) -> torch.Tensor:
    """The transform with torch.fft in float32 (complex64): out's values in whatever layout torch.fft gives
    them (a pair as view_as_real), float32; differentiable (fft_cpu's backward is its vector-Jacobian
    product). Not checked: reference checks, then lays it out."""
    if kind == "r2c":
        z = x.float().movedim(dim, -1).to(torch.complex64)
    else:
        z = torch.view_as_complex(x.float().movedim(dim, -2).contiguous())
    if window is not None:
        z = z * window.float()
    if scale != 1.0:  # before the transform, whose sums grow up to n-fold: no intermediate overflow
        z = z * scale
    if kind == "c2r":
        half = _fit(z, n // 2 + 1)
        out = torch.fft.irfft(half, n=n, norm="forward")
    else:
        z = _fit(z, n)
        out = torch.fft.ifft(z, norm="forward") if direction(kind, inverse) else torch.fft.fft(z)
    out = out[..., :out_len].movedim(-1, dim)
    return out if kind == "c2r" else torch.view_as_real(out)


def reference(x: torch.Tensor, tables: torch.Tensor | None, dim: int, n: int, out_len: int, kind: str,
              inverse: bool, scale: float, window: torch.Tensor | None = None,
              weight: torch.Tensor | None = None) -> torch.Tensor:
    """The same transform with torch.fft in float32 (complex64), the CPU implementation and the tests'
    reference; `tables` is read only for conv (the kernel it holds)."""
    _check(x, tables, dim, n, out_len, kind, window, weight)
    laid_out = empty_out(x, dim, out_len, kind)
    if kind == "conv":
        laid_out.copy_(convolved(x, tables, dim, n, out_len, scale))
        return laid_out
    laid_out.copy_(transformed(weighted(x, weight), dim, n, out_len, kind, inverse, scale, window))
    return laid_out


def convolved(x: torch.Tensor, tables: torch.Tensor, dim: int, n: int, out_len: int, scale: float) -> torch.Tensor:
    """Kind conv with torch.fft in float64: each row of x (real, zero-padded or cropped to n along `dim`) times
    `scale`, circularly convolved with the kernel whose spectrum `tables` holds (fft_plan.filter_values), its
    first out_len points, in float64 and x's layout."""
    plan = kernel_plan(n)
    spectrum = kernel_spectrum(plan, tables.cpu()).to(x.device) * plan.m
    rows = _fit(x.double().movedim(dim, -1), n) * scale
    out = torch.fft.ifft(torch.fft.fft(rows, n=plan.m) * spectrum)[..., :out_len].real
    return out.movedim(-1, dim)


def _batch(t: torch.Tensor, dim: int, pair: bool) -> tuple[list, list]:
    """Sizes and strides of t's batch dims (all but `dim` and a pair's last), padded to MAX_BATCH_DIMS
    with size 1, stride 0 in front."""
    dims = [d for d in range(t.dim() - (1 if pair else 0)) if d != dim]
    pad = MAX_BATCH_DIMS - len(dims)
    return [1] * pad + [t.shape[d] for d in dims], [0] * pad + [t.stride(d) for d in dims]


def _weight_strides(weight: torch.Tensor | None, x: torch.Tensor, dim: int) -> list:
    """The kernel's strides of `weight` read as a pair of x's shape (its broadcast dims stride 0): the four
    batch dims as _batch orders them, the transformed dim, the pair's parts; all 0 where there is none."""
    if weight is None:
        return [0] * (MAX_BATCH_DIMS + 2)
    full = weight.expand(x.shape)
    return [*_batch(full, dim, True)[1], full.stride(dim), full.stride(-1)]


if HAVE_TRITON:
    import triton
    import triton.language as tl
    from torch.library import triton_op

    # A complex product of float32 data and a table (_cdot) in three real products (Gauss) instead of four: a fourth
    # less tensor-core work in every complex stage. Off: timed on an H100 (session 27,
    # `benchmarks/scripts/fft_tiling_sweep.py --three-products yes`, then `no`) it lost at every length but 2048's
    # r2c, the kernel being bound by latency, not by its products (docs/performance.md). Read when a kernel is
    # first compiled; a benchmark sets it before then.
    THREE_PRODUCTS = tl.constexpr(False)

    @triton.jit
    def _cdot(xr, xi, tables, off, P: tl.constexpr, REAL_IN: tl.constexpr, REAL_OUT: tl.constexpr,
              PRECISION: tl.constexpr):
        """[M, P] complex rows (xr, xi) times the [P, P] complex table at tables + off: (yr, yi).
        REAL_IN: xi is zero (two products); REAL_OUT: only yr is wanted (two products; yi is yr)."""
        at = tl.arange(0, P)[:, None] * P + tl.arange(0, P)[None, :]
        fr = tl.load(tables + off + at)
        fi = tl.load(tables + off + P * P + at)
        if REAL_IN:
            yr = tl.dot(xr, fr, input_precision=PRECISION)
            yi = tl.dot(xr, fi, input_precision=PRECISION)
        elif REAL_OUT:
            yr = tl.dot(xr, fr, input_precision=PRECISION) - tl.dot(xi, fi, input_precision=PRECISION)
            yi = yr
        elif THREE_PRODUCTS and PRECISION == "tf32x3":
            # Gauss's three products, on halves: h1 = (xr/2 + xi/2)·fr, h2 = (xr/2)·(fi − fr), h3 = (xi/2)·(fr + fi);
            # yr = 2(h1 − h3) = xr·fr − xi·fi, yi = 2(h1 + h2) = xr·fi + xi·fr: a fourth less tensor-core work, each
            # product three TF32 passes for float32 data. Halved, no sum is larger than the four products' own (a
            # row near float32's largest value stays finite, as it does with four; xr + xi would overflow).
            # In Triton's interpreter with sm_90's rounding: float32 1.4e-7 → 1.8e-7 at n = 4096 against float64
            # (cuFFT: 3e-7); float16 would go 9.4e-4 → 1.4e-3 (one TF32 pass a product), so half data keeps four.
            hr = xr * 0.5
            hi = xi * 0.5
            h1 = tl.dot(hr + hi, fr, input_precision=PRECISION)
            h2 = tl.dot(hr, fi - fr, input_precision=PRECISION)
            h3 = tl.dot(hi, fr + fi, input_precision=PRECISION)
            yr = (h1 - h3) * 2.0
            yi = (h1 + h2) * 2.0
        else:
            yr = tl.dot(xr, fr, input_precision=PRECISION) - tl.dot(xi, fi, input_precision=PRECISION)
            yi = tl.dot(xr, fi, input_precision=PRECISION) + tl.dot(xi, fr, input_precision=PRECISION)
        return yr, yi

    @triton.jit
    def _butterfly(xr, xi, D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr, P: tl.constexpr,
                   INVERSE: tl.constexpr):
        """The P-point DFT (P = 2 or 4) along the last axis of [D0, D1, D2, P] complex (xr, xi) as a radix-P
        butterfly in float32 adds (kernels/fft_plan.py), output k at index k of that axis. The axis is split
        with reshape to (.., 2, 2) ([i, j] = x[2i + j]) and tl.split (the last axis of 2 into two halves), and
        rebuilt with tl.join (a new last axis of 2): no table, no padding, no tensor core."""
        if P == 2:
            x0r, x1r = tl.split(xr)
            x0i, x1i = tl.split(xi)
            yr = tl.join(x0r + x1r, x0r - x1r)
            yi = tl.join(x0i + x1i, x0i - x1i)
        else:
            # x[2i + j]: the first split takes j (even: x0, x2; odd: x1, x3), the second i.
            er, od_r = tl.split(tl.reshape(xr, (D0, D1, D2, 2, 2)))
            ei, od_i = tl.split(tl.reshape(xi, (D0, D1, D2, 2, 2)))
            x0r, x2r = tl.split(er)
            x0i, x2i = tl.split(ei)
            x1r, x3r = tl.split(od_r)
            x1i, x3i = tl.split(od_i)
            sr, si = x0r + x2r, x0i + x2i  # x0 + x2
            ur, ui = x0r - x2r, x0i - x2i  # x0 − x2
            tr, ti = x1r + x3r, x1i + x3i  # x1 + x3
            dr, di = x1r - x3r, x1i - x3i  # x1 − x3; i·d = (−di, dr)
            if INVERSE:  # X1 = u + i·d, X3 = u − i·d (ω_4 = +i)
                y1r, y1i, y3r, y3i = ur - di, ui + dr, ur + di, ui - dr
            else:  # X1 = u − i·d, X3 = u + i·d (ω_4 = −i)
                y1r, y1i, y3r, y3i = ur + di, ui - dr, ur - di, ui + dr
            # [i, j] = X[2i + j]: join over i (X0, X2 | X1, X3), then over j.
            yr = tl.reshape(tl.join(tl.join(sr + tr, sr - tr), tl.join(y1r, y3r)), (D0, D1, D2, 4))
            yi = tl.reshape(tl.join(tl.join(si + ti, si - ti), tl.join(y1i, y3i)), (D0, D1, D2, 4))
        return yr, yi

    @triton.jit
    def _stage(xr, xi, tables, off, R: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr, P: tl.constexpr,
               REAL_OUT: tl.constexpr, INVERSE: tl.constexpr, PRECISION: tl.constexpr):
        """Stage 2 or 3: the P-point DFT over axis 1 of [R, P, D1, D2] complex (xr, xi), returned as
        [R, D1, D2, P] with output k at index k of the last axis (the permute brings the transformed index
        last, through shared memory): a radix-2/4 butterfly for P below tl.dot's 16 (_butterfly), else a
        product with the [P, P] table at `off` (_cdot; REAL_OUT keeps only the real part)."""
        xr = tl.permute(xr, (0, 2, 3, 1))
        xi = tl.permute(xi, (0, 2, 3, 1))
        if P < 16:
            yr, yi = _butterfly(xr, xi, R, D1, D2, P, INVERSE)
        else:
            M: tl.constexpr = R * D1 * D2
            yr, yi = _cdot(tl.reshape(xr, (M, P)), tl.reshape(xi, (M, P)), tables, off, P, False, REAL_OUT,
                           PRECISION)
            yr = tl.reshape(yr, (R, D1, D2, P))
            yi = tl.reshape(yi, (R, D1, D2, P))
        return yr, yi

    @triton.jit
    def _twiddle(tables, off, ROWS: tl.constexpr, COLS: tl.constexpr):
        """The [ROWS, COLS] complex table at tables + off: (re, im)."""
        at = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
        return tl.load(tables + off + at), tl.load(tables + off + ROWS * COLS + at)

    @triton.jit
    def _row_offsets(R: tl.constexpr, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3,
                     vs0, vs1, vs2, vs3):
        """This program's R rows: their element offsets in x, out and the weight ([R, 1, 1, 1] each, int64: a
        row index times a batch stride passes 2**31 in large batches, and Triton types an integer argument
        below 2**31 as int32; the weight's strides are 0 on its broadcast dims) and which of them exist."""
        r = tl.program_id(0).to(tl.int64) * R + tl.arange(0, R).to(tl.int64)
        return _rows_at(r, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3)

    @triton.jit
    def _rows_at(r, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3):
        """Rows r ([R] int64 row indices, the batch dims' flat index): _row_offsets's offsets and which exist."""
        row_ok = r < rows
        i3 = r % size3
        q = r // size3
        i2 = q % size2
        q = q // size2
        i1 = q % size1
        i0 = q // size1
        x_row = (i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3)[:, None, None, None]
        o_row = (i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3)[:, None, None, None]
        v_row = (i0 * vs0 + i1 * vs1 + i2 * vs2 + i3 * vs3)[:, None, None, None]
        return x_row, o_row, v_row, row_ok[:, None, None, None]

    @triton.jit
    def _tile_index(row_ok, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, P1: tl.constexpr,
                    P2: tl.constexpr, P3: tl.constexpr):
        """Stage 1's tile [R, P2, P3, P1] at (r, t2, t3, t1), t1 last (contracted): each position's point
        t = B·C·t1 + C·t2 + t3, and whether it is one (a row's, not padding)."""
        t1 = tl.arange(0, P1)[None, None, None, :]
        t2 = tl.arange(0, P2)[None, :, None, None]
        t3 = tl.arange(0, P3)[None, None, :, None]
        return B * C * t1 + C * t2 + t3, row_ok & (t1 < A) & (t2 < B) & (t3 < C)

    @triton.jit
    def _weigh(xr, xi, Weight, v_row, j, ok, vs_t, vs_p):
        """Points (xr, xi) times the weight's points j (int64; its row at v_row, stride vs_t along the
        transformed dim, its parts vs_p apart) as complex numbers, in float32; loaded in x's own tile shape."""
        at = Weight + v_row + j * vs_t
        wr = tl.load(at, mask=ok, other=0.0).to(tl.float32)
        wi = tl.load(at + vs_p, mask=ok, other=0.0).to(tl.float32)
        return xr * wr - xi * wi, xr * wi + xi * wr

    @triton.jit
    def _load_rows(X, Window, Weight, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                   N: tl.constexpr, KIND: tl.constexpr, WINDOW: tl.constexpr, WEIGHT: tl.constexpr,
                   SCALED: tl.constexpr):
        """The rows' points t (a tile of indices; `inside`: those of the row) in float32 (xr, xi): c2c's
        pair, r2c's real row (xi zero), c2r's Hermitian half of length N mirrored and conjugated past N // 2;
        x zero-padded past in_len; times the weight's point (_weigh) where WEIGHT (c2c, c2r: a c2r's bin j
        times the weight's bin j before bins 0 and N/2 lose their imaginary parts and the mirror conjugates,
        as transformed(weighted(x, weight), …) defines it); times Window[t] (stride ws) where WINDOW (not
        c2r); times scale where SCALED (scale ≠ 1: an unscaled transform spends no multiply and no register on it). The scale is
        taken here, before the stages, whose sums grow up to N-fold: an input near float32's largest value
        whose scaled transform float32 holds (norm="forward", "ortho") does not overflow on the way."""
        scale = tl.cast(scale, tl.float32)  # AOTInductor passes a float argument as float64
        if KIND == 2:  # the Hermitian half, mirrored: X[t] = conj(X[N − t]) past N // 2
            mirrored = 2 * t > N
            j = tl.where(mirrored, N - t, t).to(tl.int64)
            ok = inside & (j < in_len)
            xr = tl.load(X + x_row + j * xs_t, mask=ok, other=0.0).to(tl.float32)
            if WEIGHT:  # the bin's imaginary part enters the product's real part: dropped after it
                xi = tl.load(X + x_row + j * xs_t + xs_p, mask=ok, other=0.0).to(tl.float32)
                xr, xi = _weigh(xr, xi, Weight, v_row, j, ok, vs_t, vs_p)
                xi = tl.where((j != 0) & (2 * j != N), xi, 0.0)
            else:
                xi = tl.load(X + x_row + j * xs_t + xs_p, mask=ok & (j != 0) & (2 * j != N), other=0.0).to(tl.float32)
            xi = tl.where(mirrored, -xi, xi)
            if SCALED:
                xr, xi = xr * scale, xi * scale
        else:
            ok = inside & (t < in_len)
            xr = tl.load(X + x_row + t.to(tl.int64) * xs_t, mask=ok, other=0.0).to(tl.float32)
            xi = tl.zeros_like(xr)  # r2c: unread by stage 1 (REAL_IN), stored as is where n = 1
            if KIND == 0:
                xi = tl.load(X + x_row + t.to(tl.int64) * xs_t + xs_p, mask=ok, other=0.0).to(tl.float32)
                if WEIGHT:
                    xr, xi = _weigh(xr, xi, Weight, v_row, t.to(tl.int64), ok, vs_t, vs_p)
            if WINDOW:  # loaded in x's own [R, P2, P3, P1] shape: a broadcast row spills registers on sm_90
                w = tl.load(Window + (t.to(tl.int64) * ws + 0 * x_row), mask=ok, other=0.0).to(tl.float32)
                xr = xr * w
                if KIND == 0:
                    xi = xi * w
            if SCALED:
                xr = xr * scale
                if KIND == 0:
                    xi = xi * scale
        return xr, xi

    @triton.jit
    def _forward_stages(xr, xi, Tables, R: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                        P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, REAL_IN: tl.constexpr,
                        REAL_OUT: tl.constexpr, INVERSE: tl.constexpr, PRECISION: tl.constexpr):
        """The DFT of fft_plan's tiling (A, B, C) padded (P1, P2, P3) with the tables at Tables: stage 1's
        tile [R, P2, P3, P1] at (r, t2, t3, t1), t = B·C·t1 + C·t2 + t3, in; [R, P1, P2, P3] at (r, k1, k2, k3),
        k = k1 + A·k2 + A·B·k3, out. REAL_IN: xi is zero; REAL_OUT: only the real part is wanted (the
        last stage's imaginary part is its real part). A stage run with P below 16 (P2 or P3 = B or C = 2 or
        4, the last stage: fft_plan.paddings) is a butterfly, which needs the direction (INVERSE)."""
        # Table offsets and the dots' row counts (declared constexpr: Triton 3.6 makes a plain local a tensor).
        F2: tl.constexpr = 2 * P1 * P1
        F3: tl.constexpr = F2 + 2 * P2 * P2
        W12: tl.constexpr = F3 + 2 * P3 * P3
        W13: tl.constexpr = W12 + 2 * P2 * P1
        W23: tl.constexpr = W13 + 2 * P3 * P1
        M1: tl.constexpr = R * P2 * P3
        if A > 1:
            yr, yi = _cdot(tl.reshape(xr, (M1, P1)), tl.reshape(xi, (M1, P1)), Tables, 0, P1,
                           REAL_IN, REAL_OUT and (B == 1), PRECISION)
            xr = tl.reshape(yr, (R, P2, P3, P1))  # (r, t2, t3, k1)
            xi = tl.reshape(yi, (R, P2, P3, P1))
        if B > 1:
            wr, wi = _twiddle(Tables, W12, P2, P1)  # ω_n^(C·t2·k1)
            wr, wi = wr[None, :, None, :], wi[None, :, None, :]
            if C > 1:
                vr, vi = _twiddle(Tables, W13, P3, P1)  # ω_n^(t3·k1)
                vr, vi = vr[None, None, :, :], vi[None, None, :, :]
                wr, wi = wr * vr - wi * vi, wr * vi + wi * vr
            xr, xi = xr * wr - xi * wi, xr * wi + xi * wr
            # (r, t2, t3, k1) to (r, t3, k1, k2); a butterfly only as the last stage (C = 1)
            xr, xi = _stage(xr, xi, Tables, F2, R, P3, P1, P2, REAL_OUT and (C == 1), INVERSE, PRECISION)
            if C > 1:
                wr, wi = _twiddle(Tables, W23, P3, P2)  # ω_n^(A·t3·k2)
                wr, wi = wr[None, :, None, :], wi[None, :, None, :]
                xr, xi = xr * wr - xi * wi, xr * wi + xi * wr
                # (r, t3, k1, k2) to (r, k1, k2, k3)
                xr, xi = _stage(xr, xi, Tables, F3, R, P1, P2, P3, REAL_OUT, INVERSE, PRECISION)
        # The result as [R, P1, P2, P3] at (r, k1, k2, k3): after stage 3 it is; after stage 2 (C = 1) it is
        # [R, 1, P1, P2], after stage 1 (B = C = 1) [R, 1, 1, P1]: moving a dim of size 1 is a reshape.
        return tl.reshape(xr, (R, P1, P2, P3)), tl.reshape(xi, (R, P1, P2, P3))

    @triton.jit
    def _fft_rows_kernel(X, Tables, Out, Window, Weight, rows, in_len, out_len, scale,
                         size0, size1, size2, size3, xs0, xs1, xs2, xs3, xs_t, xs_p,
                         os0, os1, os2, os3, os_t, os_p, ws, vs0, vs1, vs2, vs3, vs_t, vs_p,
                         N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                         P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr,
                         KIND: tl.constexpr, PRECISION: tl.constexpr, WINDOW: tl.constexpr,
                         WEIGHT: tl.constexpr, SCALED: tl.constexpr, INVERSE: tl.constexpr):
        # KIND: 0 c2c, 1 r2c, 2 c2r; WINDOW: each row times Window[t] (stride ws) as it is loaded (not c2r);
        # WEIGHT: each point times the weight's (strides vs…, 0 where it broadcasts) as it is loaded (not r2c);
        # INVERSE: the tables' direction (exp(+2πi…)), which a butterfly stage, reading no table, needs.
        x_row, o_row, v_row, row_ok = _row_offsets(R, rows, size1, size2, size3, xs0, xs1, xs2, xs3,
                                                   os0, os1, os2, os3, vs0, vs1, vs2, vs3)
        t, inside = _tile_index(row_ok, A, B, C, P1, P2, P3)
        xr, xi = _load_rows(X, Window, Weight, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p,
                            scale, N, KIND, WINDOW, WEIGHT, SCALED)
        xr, xi = _forward_stages(xr, xi, Tables, R, A, B, C, P1, P2, P3, KIND == 1, KIND == 2, INVERSE, PRECISION)
        k1 = tl.arange(0, P1)[None, :, None, None]
        k2 = tl.arange(0, P2)[None, None, :, None]
        k3 = tl.arange(0, P3)[None, None, None, :]
        k = k1 + A * k2 + A * B * k3
        ok = row_ok & (k1 < A) & (k2 < B) & (k3 < C) & (k < out_len)
        _store_rows(Out, o_row, k, ok, xr, xi, os_t, os_p, KIND)

    @triton.jit
    def _store_rows(Out, o_row, k, ok, xr, xi, os_t, os_p, KIND: tl.constexpr):
        """Points k of the rows (where ok) in Out's dtype: a pair, or c2r's real part (the scale was taken
        at the load)."""
        at = Out + o_row + k.to(tl.int64) * os_t
        tl.store(at, xr.to(Out.dtype.element_ty), mask=ok)
        if KIND != 2:
            tl.store(at + os_p, xi.to(Out.dtype.element_ty), mask=ok)

    def launch(x: torch.Tensor, tables: torch.Tensor | None, dim: int, n: int, out_len, kind: str,
               inverse: bool, scale: float, window: torch.Tensor | None = None,
               weight: torch.Tensor | None = None, config: Launch | None = None) -> torch.Tensor:
        """The kernel on x's device (the op's CUDA implementation; the interpreter runs it on CPU tensors).
        config: a launch of fft_plan.launches(n, …) to run instead of fft_plan.default_launch's (benchmarks
        compare them; the op never passes one; where real rows run in pairs, pairs_rows, its rows a program are
        pairs); `tables`, when given, must be that tiling's."""
        if config is not None and (config.tiling.n != n or config.problem()):
            raise ValueError(f"{OP}: config {config} cannot run a length-{n} transform: "
                             f"{config.problem() or f'its tiling is of length {config.tiling.n}'}")
        _check(x, tables, dim, n, out_len, kind, window, weight, config.tiling if config else None)
        if tables is None:
            tables = tables_for(n, kind, inverse, x.device, config.tiling if config else None)
        pair_in = kind not in REAL_IN
        plan = config.tiling if config is not None else kernel_plan(n)
        parted = runs_in_parts(plan)
        result = out = empty_out(x, dim, out_len, kind)
        if parted and out.dtype != torch.float32:  # its parts sum in Out (fft_bluestein_parts): float32, then cast
            result, out = out, torch.empty_like(out, dtype=torch.float32)
        sizes, x_strides = _batch(x, dim, pair_in)
        _, out_strides = _batch(out, dim, kind not in REAL_OUT)
        rows = sizes[0] * sizes[1] * sizes[2] * sizes[3]
        paired = pairs_rows(plan, kind, n, out_len, out.dtype)
        complex_rows = (rows + 1) // 2 if paired else rows  # a pair of real rows is one complex row
        if config is None:
            # Off CUDA (Triton's interpreter) there are no multiprocessors to fill; two stand-ins keep the rows in
            # at least two programs where they fill them, so that the tests run a program's partly filled rows.
            processors = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
            config = default_launch(n, complex_rows, processors)
        per_program = config.rows
        a, b, c = config.tiling.factors
        p1, p2, p3 = config.tiling.padded
        if parted and paired:
            from aotcuda.kernels.fft_bluestein_parts import _bluestein_pairs_parts_kernel as kernel
            own = dict(PARTS=plan.parts, FOLDS=plan.folds)
        elif parted:
            from aotcuda.kernels.fft_bluestein_parts import _bluestein_parts_kernel as kernel
            own = dict(PARTS=plan.parts, FOLDS=plan.folds)
        elif paired:
            from aotcuda.kernels.fft_bluestein import _bluestein_pairs_kernel as kernel
            own = dict(PARTS=plan.parts)
        elif isinstance(plan, Bluestein):
            from aotcuda.kernels.fft_bluestein import _bluestein_kernel as kernel
            own = dict(PARTS=plan.parts)
        else:
            kernel, own = _fft_rows_kernel, dict(INVERSE=direction(kind, inverse))
        launcher(kernel)[((complex_rows + per_program - 1) // per_program,)](
            x, tables, out, tables if window is None else window, tables if weight is None else weight,
            rows, x.shape[dim], out_len, float(scale), *sizes, *x_strides, x.stride(dim),
            x.stride(-1) if pair_in else 0, *out_strides, out.stride(dim), out.stride(-1) if kind not in REAL_OUT else 0,
            0 if window is None else window.stride(0), *_weight_strides(weight, x, dim),
            N=n, A=a, B=b, C=c, P1=p1, P2=p2, P3=p3, R=per_program, KIND=KINDS.index(kind),
            PRECISION=PRECISION[x.dtype], WINDOW=window is not None, WEIGHT=weight is not None,
            SCALED=float(scale) != 1.0, num_warps=config.warps, **own)
        return out.to(result.dtype) if out.dtype != result.dtype else out

    @triton_op(OP, mutates_args=())
    def fft_rows(x: torch.Tensor, tables: torch.Tensor | None, dim: int, n: int, out_len: int, kind: str,
                 inverse: bool, scale: float, window: torch.Tensor | None = None,
                 weight: torch.Tensor | None = None) -> torch.Tensor:
        return launch(x, tables, dim, n, out_len, kind, inverse, scale, window, weight)

    fft_rows.register_kernel("cpu")(reference)
else:
    fft_rows = torch.library.custom_op(OP, reference, mutates_args=())

    @fft_rows.register_fake
    def _(x, tables, dim, n, out_len, kind, inverse, scale, window=None, weight=None):
        _check(x, tables, dim, n, out_len, kind, window, weight)
        return empty_out(x, dim, out_len, kind)
