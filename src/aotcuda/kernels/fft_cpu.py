"""``aotcuda::fft_rows_cpu``: fft_rows (kernels/fft_rows.py) on the CPU as one C++ kernel per transform.

    fft_rows_cpu(x, dim, n, out_len, kind, inverse, scale, window=None, weight=None) -> out

Same semantics as fft_rows without its `tables` operand: kind "c2c" (x a pair, out the length-n DFT along
complex dim `dim`, exp(−2πi·t·k/n), inverse exp(+2πi…)), "r2c" (x real), "c2r" (x the Hermitian half, out
real; the imaginary parts of bins 0 and n/2 drop out, as in pocketfft); x zero-padded or cropped to n along
`dim`, out keeps `out_len` points, times `scale`, laid out by empty_out here (the batch dims in order, the
transformed dim innermost, a pair's re and im as two planes of each row: PLANES); `window` (c2c, r2c)
multiplies each row as it is loaded; `weight` (c2c, c2r: a pair that broadcasts against x, float32 math) multiplies
x as it is loaded, a complex product: the filter's spectrum times its weight before an irfft, one pass through
memory fewer (spectral/product.py fuses it). Shapes: x [..., L, ...] (a pair [..., L, ..., 2]) with L = x.shape[dim]
static; out the same with out_len at `dim` (c2r: no pair). Dtypes float32, float16, bfloat16 (float32 math);
out has x's dtype. Anything else (a length `covers` refuses, a window that is not a real 1-D tensor of L
values on x's device, a window with c2r) raises ValueError, eagerly and when traced. The eager
implementation is fft_rows.transformed (torch.fft); compiled, Inductor lowers the op through a C++ template
(kernels/fft_cpu_template.py) whose code is kernels/fft_cpu_source.py's: AOTInductor builds it into the package,
no fallback kernel and no library beyond the package's own .so.

The kernel: the rows in blocks of V (ROWS), each block gathered into two float32 planes re[n][V], im[n][V]
(the block's V rows innermost: every butterfly is a V-wide vector operation), all Stockham autosort stages
of radix 8, 4, 2, 3, 5, 7, 11, 13 run while the block stays in L1/L2 (two ping-pong plane pairs a thread, 128
bytes a point of the stage length: kept between calls up to 2 MiB, m < 16384, allocated for the call past
it; 1 MiB at 8192, past L2 beyond it), then
scattered to the output with its strides; blocks are parallel over the OpenMP threads. From FOUR_STEP (1024)
points on, where a block's planes (128 bytes a point) have left L1 and each stage is a pass through L2, a DFT
runs as the four-step split m = m1·m2 inside the block (four_step; fft_cpu_stages.four_step_stages): m2 column
DFTs of m1 points, then m1 row DFTs of m2 points, each in L1, two passes through L2 instead of one a stage.
A stage of radix r on [L, s] points views them as [r, m, s] (t = m·t1 + t2), computes the r-point DFT across
t1, multiplies output k1 by W_L^(t2·k1) and writes [m, r·s] (Stockham DIF, Van Loan,
"Computational Frameworks for the FFT", 1992, §1.7; Swarztrauber 1984): after the last stage the planes
hold the spectrum in natural order. Twiddles are static const tables in the generated code, computed in
float64 and rounded once to float32. r2c of an even n is the n/2-point complex transform of
x[2t] + i·x[2t+1] and a split, c2r of an even n a merge and the n/2-point inverse (spectral/stockham.py's
formulas); an odd n packs two rows into one complex row (``packed``: blocks of 2·V rows, the block's first V
rows the real parts and its other V the imaginary ones): r2c transforms x1 + i·x2 and splits the spectra by
symmetry, X1[k] = (Z[k] + conj Z[n−k])/2, X2[k] = (Z[k] − conj Z[n−k])/2i; c2r mirrors both Hermitian halves
and transforms X1 + i·X2, whose real and imaginary parts are x1 and x2. Half the complex transforms of the
(x, 0) it ran before: a 512-row r2c at n = 1009 (Bluestein) took 1685 µs, 3059 as (x, 0) (one thread).

A complex length with a prime factor above 13 runs Bluestein's chirp-z transform inside the same kernel
(fft_cpu_stages.bluestein_stages; the math of the CUDA kernel's, kernels/fft_bluestein.py): the loaded points times
the chirp c[t] = exp(∓πi·t²/L) (t² reduced mod 2L in integers), zero-padded to m = ``bluestein_length`` ≥
2L − 1 (plan.cpu_bluestein_length: the cheapest length of radix 4, 2, 3, 5 stages up to the power of two),
the forward m-point stages, times the spectrum DFT_m(b)/m of b[j] = conj c[|j|] (conjugated), the same
forward stages again (conj∘DFT∘conj: the inverse), times the chirp, then the split/merge/store path above
for the first L points. The chirp and spectrum are static tables like the twiddles (float64, rounded once);
the planes are sized for m. On the 2-core machine (512 rows, rfft → multiply → irfft, float32, 2 threads):
1.18× pocketfft's time at n = 1009, 1.08× at 2039, 0.99× at 4093, where the ATen Bluestein took 7.7–8.1×
(docs/performance.md).

Covered (``covers``): n ≤ MAX_N (32768: Bluestein's m up to 65536), static x.shape[dim] and out_len; longer
transforms (and float64) keep the Stockham ATen form (spectral/stockham.py); a dynamic length above 64 runs
Bluestein through this op at a static length m (spectral/dynamic.py).
"""

from __future__ import annotations

import math

import torch

from aotcuda.kernels.fft_rows import DTYPES, KINDS, check_weight, check_window, direction, transformed, weighted
from aotcuda.passes.complex_to_real.spectral.plan import cpu_bluestein_length
from aotcuda.passes.complex_to_real.spectral.plan import cpu_radices

OP = "aotcuda::fft_rows_cpu"
ROWS = 8  # V: rows a block, one vf8 (an AVX2 vector of float32); the generated code assumes 8
# The longest n: the per-thread planes (4 × 8 rows × the stage length, float32: 8 MiB a thread for the
# call's length for Bluestein m = 65536 at n = 32749) and the static tables (8.7 MB of source, g++ 1.2 s for that
# kernel) grow with it. At 8192–32768 on the 2-core machine the kernel took 0.26–0.50× the Stockham ATen
# form's time, Bluestein 0.02–0.05× (docs/performance.md).
MAX_N = 32768


def radices(n: int, whole: bool = True) -> list[int] | None:
    """The kernel's stages of a length-n DFT: plan.cpu_radices (the Stockham form's: 4s, a 2, then 3, 5, 7, 11,
    13; None where a prime factor is above 13); where they run over the `whole` block (below FOUR_STEP points)
    the factors of 2 as radix 8 while three remain, then a 4 or a 2. There each stage is a pass over the block's
    planes, past L1 from 512 points (64 KB), and a radix-8 butterfly's 16 vectors fit AVX-512's 32 registers: the
    stages of n = 1024 (512 points: 8·8·8 for 4·4·4·4·2) took 168 µs for 224 (the kernel alone, one thread, 512
    rows); the four-step split's small DFTs, in L1, took 2–12 % longer as radix 8 (n = 4096; docs/performance.md)."""
    stages = cpu_radices(n)
    if stages is None or not whole:
        return stages
    twos = sum(2 if r == 4 else 1 for r in stages if r in (2, 4))
    eights, left = divmod(twos, 3)
    return [8] * eights + {0: [], 1: [2], 2: [4]}[left] + [r for r in stages if r not in (2, 4)]


def complex_length(n: int, kind: str) -> int:
    """The length of the complex transform the kernel runs for a length-n transform of this kind."""
    return n // 2 if kind != "c2c" and n % 2 == 0 else n


def packed(n: int, kind: str) -> bool:
    """Whether a block holds 2·ROWS rows: an odd-length r2c or c2r runs two real rows as one complex row
    (x1 + i·x2, the spectra split by symmetry after; X1 + i·X2 before a c2r), half the complex transforms."""
    return kind != "c2c" and n % 2 == 1


def bluestein_length(nc: int) -> int | None:
    """The convolution length m of Bluestein for complex length nc (plan.cpu_bluestein_length), or None
    where the stages run on nc itself (no prime factor above 13)."""
    return None if radices(nc) is not None else cpu_bluestein_length(nc)


def stage_length(n: int, kind: str) -> int:
    """The length the kernel's stages run on: the complex length, or its Bluestein length m."""
    nc = complex_length(n, kind)
    return bluestein_length(nc) or nc


# From this many points on, a DFT in the kernel runs as the four-step split (four_step); below it the planes of
# a block (128 bytes a point) stay near L1 and the stages run over the whole block.
FOUR_STEP = 1024


def four_step(m: int) -> tuple[int, int] | None:
    """(m1, m2), m = m1·m2 with m1 the largest divisor ≤ √m, where an m-point DFT in the kernel runs as the
    four-step split (fft_cpu_stages.four_step_stages: m2 column DFTs of m1 points, then m1 row DFTs of m2, each in
    L1), or None (fewer than FOUR_STEP points, or no divisor)."""
    if m < FOUR_STEP:
        return None
    m1 = max((d for d in range(2, math.isqrt(m) + 1) if m % d == 0), default=None)
    return None if m1 is None else (m1, m // m1)


def four_step_planes(n: int, kind: str) -> int:
    """Floats in each of the four small per-thread planes of the four-step split (0 where it does not run):
    the columns, 2·ROWS floats a point of m1 (two columns at a time), or a row, ROWS a point of m2."""
    split = four_step(stage_length(n, kind))
    return 0 if split is None else max(split[0] * 2 * ROWS, split[1] * ROWS)


def describe(nc: int) -> str:
    """The kernel's stages for complex length nc, as benchmarks/fft.py shows them: 4·2·5·5,
    (4·4·2)×(4·4·4·4) (the four-step split: columns × rows), or bluestein(1009 via 2048: (4·4·2)×(4·4·4))."""
    m = bluestein_length(nc)
    split = four_step(m or nc)
    if split is None:
        stages = "·".join(map(str, radices(m or nc)))
    else:
        stages = "×".join("(" + "·".join(map(str, radices(part, whole=False))) + ")" for part in split)
    return f"bluestein({nc} via {m}: {stages})" if m else stages


def covers(x: torch.Tensor, dim: int, n, out_len, kind: str) -> bool:
    """Whether fft_rows_cpu takes this transform (x a pair for c2c and c2r, the fake tensor of a node)."""
    complex_dims = x.dim() - (0 if kind == "r2c" else 1)
    return (isinstance(n, int) and isinstance(out_len, int) and 2 <= n <= MAX_N and 1 <= out_len <= n
            and kind in KINDS and x.dtype in DTYPES and 0 <= dim < complex_dims
            and isinstance(x.shape[dim], int) and (kind == "r2c" or x.shape[-1] == 2))


# A pair's output keeps each row's real and imaginary parts as two planes (re[out_len], then im[out_len]),
# not interleaved: the pointwise ops Inductor makes of the pair's math after a transform (the filter's
# complex product, |X|² of a spectrogram) vectorize along the bins there, and over an interleaved pair
# along its trailing 2 (a 16-lane vector with 2 lanes used: 1.7 ms a call at n = 512, 512 rows).
PLANES = True


def empty_out(x: torch.Tensor, dim: int, out_len, kind: str) -> torch.Tensor:
    """The output: x's dims with `out_len` at `dim` (a pair's trailing 2 except for c2r), the batch dims in
    order and the transformed dim innermost, a pair's parts as planes per row (PLANES). No size compared."""
    complex_dims = x.dim() - (0 if kind == "r2c" else 1)
    batch = [x.shape[d] for d in range(complex_dims) if d != dim]
    if kind == "c2r":
        return x.new_empty([*batch, out_len]).movedim(len(batch), dim)
    if PLANES:
        return x.new_empty([*batch, 2, out_len]).movedim(-2, -1).movedim(len(batch), dim)
    return x.new_empty([*batch, out_len, 2]).movedim(len(batch), dim)


def _check(x, dim, n, out_len, kind, window, weight=None) -> None:
    """ValueError naming what fft_rows_cpu does not take (covers; a window as fft_rows.check_window says, a
    weight as fft_rows.check_weight does)."""
    if not covers(x, dim, n, out_len, kind):
        raise ValueError(f"{OP}: cannot transform a {x.dtype} tensor of shape {tuple(x.shape)} along dim {dim} "
                         f"as {kind} of length {n} into {out_len} points (fft_cpu.covers)")
    check_window(OP, x, dim, kind, window)
    check_weight(OP, x, kind, weight)


@torch.library.custom_op(OP, mutates_args=())
def fft_rows_cpu(x: torch.Tensor, dim: int, n: int, out_len: int, kind: str, inverse: bool, scale: float,
                 window: torch.Tensor | None = None, weight: torch.Tensor | None = None) -> torch.Tensor:
    _check(x, dim, n, out_len, kind, window, weight)
    out = empty_out(x, dim, out_len, kind)
    out.copy_(transformed(weighted(x, weight), dim, n, out_len, kind, inverse, scale, window))
    return out


@fft_rows_cpu.register_fake
def _(x, dim, n, out_len, kind, inverse, scale, window=None, weight=None):
    _check(x, dim, n, out_len, kind, window, weight)
    return empty_out(x, dim, out_len, kind)



def _setup_context(ctx, inputs, output):
    ctx.args = inputs
    ctx.save_for_backward(inputs[0], inputs[7], inputs[8])


def _backward(ctx, grad):
    x, window, weight = ctx.saved_tensors
    _, dim, n, out_len, kind, inverse, scale, _, _ = ctx.args
    operands = {0: x, 7: window, 8: weight}
    given = [i for i, t in operands.items() if t is not None]

    def run(*primals):
        p = dict(zip(given, primals))
        return transformed(weighted(p[0], p.get(8)), dim, n, out_len, kind, inverse, scale, p.get(7)).to(x.dtype)

    _, vjp = torch.func.vjp(run, *(operands[i] for i in given))
    grads = dict(zip(given, vjp(grad.contiguous())))
    wanted = [grads.get(i) if ctx.needs_input_grad[i] or (i == 0 and x.requires_grad) else None for i in range(9)]
    return tuple(wanted)


fft_rows_cpu.register_autograd(_backward, setup_context=_setup_context)
