"""How ``aotcuda::fft_rows`` (kernels/fft_rows.py) tiles a length-n DFT, and its DFT and twiddle tables.

A row of length n = a·b·c (each factor ≤ MAX_FACTOR, ones last) is held as a tile x[t1, t2, t3] with
t = b·c·t1 + c·t2 + t3, and its DFT X[k], k = k1 + a·k2 + a·b·k3, is three DFT products with twiddles
between (Cooley–Tukey's four-step applied twice; ω_m = exp(∓2πi/m), − forward, + inverse):

    t·k ≡ b·c·t1·k1 + c·t2·k1 + t3·k1 + a·c·t2·k2 + a·t3·k2 + a·b·t3·k3   (mod n), so
    X[k] = Σ_t3 ω_c^(t3·k3) · ω_n^(a·t3·k2) · Σ_t2 ω_b^(t2·k2) · ω_n^((c·t2 + t3)·k1)
                                                     · Σ_t1 ω_a^(t1·k1) · x[t]

(stage 1: DFT over t1; twiddle ω_n^(c·t2·k1) · ω_n^(t3·k1); stage 2: DFT over t2; twiddle ω_n^(a·t3·k2);
stage 3: DFT over t3). A factor of 1 is a stage that is not run. Each DFT is a tl.dot of the tile against a
[P, P] table, P the factor padded to a power of two ≥ 16 (tl.dot's smallest size) with zero rows and
columns, so padded lanes neither read nor write anything.

Except a butterfly stage: the last stage run (stage 2 when c = 1, else stage 3), where its factor is 2 or 4,
may be a radix-2 or radix-4 butterfly in plain float32 adds instead of a dot (``BUTTERFLY``), on a tile axis
of exactly that size (P = the factor: no padding, and its [P, P] table block is not read). With
ω_4 = ∓i (− forward):

    radix 2: X0 = x0 + x1, X1 = x0 − x1
    radix 4: X0 = (x0 + x2) + (x1 + x3), X2 = (x0 + x2) − (x1 + x3),
             X1 = (x0 − x2) ∓ i·(x1 − x3), X3 = (x0 − x2) ± i·(x1 − x3)   (upper sign forward)

A dot stage pads a factor of 4 to 16: a 16×16 product for a 4-point DFT, the tile four times the row (64 ran
as 16·4 padded to 16·16, compute-bound on padding). describe() marks a butterfly factor with a "b": "16·4b".
Only the last stage may be one: the stages before it keep their dots (and their ≥ 16 padding).

Among the tilings with no table wider than WIDE where there is one (a [64, 64] table made the kernel spill
registers when compiled for sm_90; a prime from 37 to 61 still takes a 64-wide table), the factors minimize
the dot stages (FEWER_DOT_STAGES: 4096 = 32·32·4b, two dots and a butterfly, not 16·16·16's three), then the
tile's arithmetic (``Tiling.cost``: Π P · Σ P multiply-adds over the dot stages, about 2·log2(P) adds a value
for a butterfly: 400 = 25·16 padded to 32·16; 64 = 16·4b, 32 = 16·2b, 128 = 32·4b, 2048 = 32·16·4b), then
the tile (``preference``).
A length with a prime factor above MAX_FACTOR, above MAX_LENGTH, or whose padded tile passes TILE, has no
tiling (None). Such a length runs as Bluestein's chirp-z transform inside the kernel
(``bluestein``; kernels/fft_bluestein.py) where a convolution length m ≥ 2n − 1 up to the next power of two
has a tiling with a tile ≤ TILE (n ≤ 2048): the cheapest such m by the same key (no table wider than WIDE,
cost, tile), any of its tilings, a butterfly last stage included (the inverse DFT runs the forward's stages
transposed, so both passes share the tile's layout, paddings and tables); describe() says "Bluestein m=135
(15→16·9→16)". For n in 2049…4096 (m past TILE, up to BLUESTEIN_TILE = 2·TILE) the convolution runs as
two halves of h = m/2 ≥ n, each on a tiling of h with a tile ≤ TILE (``Bluestein.parts``: decimation in
frequency, the odd bins' half with ω_m^(±t) folded into its chirps): "Bluestein m=8192 (2 halves of 4096:
32·32·4b)". Past MAX_LENGTH a length with a prime factor above MAX_FACTOR, up to BLUESTEIN_MAX_LENGTH = 8192,
runs as 3 or 4 parts of h ≤ TILE, two of a row's points folded onto each of h's (``_parted``,
kernels/fft_bluestein_parts.py): "Bluestein m=16384 (4 parts of 4096: 32·32·4b, 2 folds)". ``kernel_plan`` is
the tiling or else the Bluestein plan; ``covers`` whether there is one. Every length 1…4096 is then one
kernel, and so is every length up to 8192 with a prime factor above 61; smooth lengths past 4096 and lengths
past 8192 are left to the GEMM form (passes/complex_to_real/spectral).
``set_bluestein_tile`` is the A/B switch: TILE puts n in 2049…4096 back on the GEMM form; 2·TILE with
halves=False runs them as one tile of m (one row of up to 8192 values a program: 255 registers and spills
on sm_90; 2.88× cuFFT's time at n = 4093 on the H200, docs/performance.md).

How a launch holds the tile (``Launch``: the tiling, rows a program, warps) is ``default_launch``'s choice;
``tilings`` and ``launches`` list the alternatives the kernel also runs, which fft_rows.launch takes as an
explicit ``config`` (benchmarks/scripts/fft_tiling_sweep.py times them; the op itself always takes the default).

Tables are computed in float64 with the phase reduced exactly in integers ((m·i·k) mod n) before it becomes
an angle, then stored in float32: one flat tensor, each table as its real then its imaginary [rows, cols]
block, in the order of ``TABLES``; a Bluestein plan's tables follow its tiling's (``bluestein_values``).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

MAX_FACTOR = 64  # the largest factor (prime, or not split further); padded to 64
WIDE = 32  # tables wider than this spill registers on sm_90 (benchmarks/scripts/fft_kernel_resources.py)
MAX_LENGTH = 4096  # 16·16·16 or 64·64: a tile of 4096 complex values, one row per program
MIN_DOT = 16  # tl.dot's smallest M, N and K
TILE = 4096  # the most complex values a program holds (rows × Π P): 32 KiB of float32 pairs
ROWS_TILE = 2048  # the tile a program of several rows aims at (4 warps; 8 for a tile of 4096)
# The largest m a Bluestein plan takes: 2 · TILE (m ≤ 8192, n ≤ 4096); TILE (n ≤ 2048, the rest back to the
# GEMM form) through set_bluestein_tile. H200, 512 rows, n = 4093 filter, m = 8192 as one tile: 585 µs
# against 1126 µs as DFT products (benchmarks/results/fft-h200-torch2.11-session15-bluestein.md).
BLUESTEIN_TILE = 2 * TILE
# An m past TILE as two interleaved halves of h = m/2 ≥ n, each ≤ TILE (``Bluestein.parts``); False: one
# tile of up to BLUESTEIN_TILE (one row of 8192 values a program: 255 registers, 864 bytes spilled on sm_90),
# kept for A/B: on the H200 the two took the same time within 5% (2049: the halves 8% faster), and the
# halves hold half the shared memory (docs/performance.md).
BLUESTEIN_HALVES = True
# A Bluestein length past MAX_LENGTH (a prime factor past MAX_FACTOR) as S ≤ MAX_PARTS parts of h ≤ TILE with up to
# two of a row's points folded onto each point of h's tile (``Bluestein.folds``): n ≤ 2·TILE. Past it, the GEMM
# form's DFT products (kernels/fft_bluestein.py's module docstring says why two folds).
MAX_PARTS = 4
BLUESTEIN_MAX_LENGTH = 2 * TILE


BUTTERFLY = (2, 4)  # the factors a last stage may take as a butterfly instead of a dot
# Fewer dot stages before less arithmetic: each dot stage is a tl.dot, a twiddle multiply and a transpose of
# the tile through shared memory, and the kernel is latency-bound (ncu on an H100 at n = 4096: 12.5%
# occupancy, 255 registers a thread; docs/performance.md, session 27), not bound by its products. Measured on
# the H200 (benchmarks/scripts/fft_tiling_sweep.py, torch 2.11, session 28): n = 4096 as 32·32·4b (two dots and
# a butterfly, 35% more multiply-adds) took 27.3/34.7 µs (r2c/c2r) at 512 rows and 190.1/260.1 at 4096 rows,
# against 16·16·16's 27.3/41.9 and 200.6/317.2. The lengths this changes are the ones whose cheapest tiling
# has three dot stages (37 lengths from 1584 to 4096, and most Bluestein lengths above 800: their m or halves).
# The A/B on an H100 (``--fewer-dot-stages no`` then ``yes``, same call; benchmarks/results/
# fft_sweep-h100-torch2.11-session28-dot-stages-*.txt), r2c/c2r µs at 512 and 4096 rows: every changed length
# gained: 4096 28.8/42.2 → 27.6/34.8 and 200.9/310.8 → 192.8/259.2; 3840, 2304 and 1584 2–5%; Bluestein 2039
# (m = 4096) 84.8/86.0 → 73.8/74.3; 4093 (two halves of 4096) 219.1/209.8 → 172.9/171.2 and 1649/1613 →
# 1290/1302; 3001 (halves of 3072 → of 3016) 205.7/200.5 → 162.9/173.1.
FEWER_DOT_STAGES = True
# 16 warps: on the H200 (Triton 3.6, fft_tiling_sweep.py --warps 16, session 28) n = 2048 as 32·16·4b at one
# row a program and 16 warps, c2r over 4096 rows, ended in "an illegal memory access" (the process's CUDA
# context lost), and 16 warps was the slowest launch at every length and tiling it ran (2.3–5.3× the 4 warps'
# time). No default takes more than 8 (``num_warps``); a launch of 16 is refused rather than risked.
# compute-sanitizer (session 29, benchmarks/results/fft_sanitizer-h200-torch2.11-session29.md): the 16-warp
# launch reads shared memory past its allocation inside the complex product's tl.dot, which Triton lays out
# (the kernel indexes no shared memory itself); the default and 4/8-warp launches of 17 lengths, 84 in all,
# had no report.
MAX_WARPS = 8


def padded(f: int) -> int:
    """The tile size of a factor of a dot stage: 1 for a stage not run, else the power of two ≥ max(f, 16)."""
    return 1 if f == 1 else max(MIN_DOT, 1 << (f - 1).bit_length())


def _last_stage(factors) -> int:
    """The index of the last stage run (factors with their ones last), -1 where none is."""
    return sum(1 for f in factors if f > 1) - 1


def paddings(factors) -> list[tuple[int, int, int]]:
    """The padded sizes the kernel runs factors (ones last) with: every stage a dot (``padded``), then, where
    the last stage run is not the first and its factor is in BUTTERFLY, that stage a butterfly (P = f)."""
    dots = tuple(padded(f) for f in factors)
    out = [dots]
    last = _last_stage(factors)
    if last >= 1 and factors[last] in BUTTERFLY:
        out.append(dots[:last] + (factors[last],) + dots[last + 1:])
    return out


@dataclasses.dataclass(frozen=True)
class Tiling:
    """n = a·b·c (factors, ones last) and the padded tile sizes (p1, p2, p3). A stage run whose P is below
    MIN_DOT is a butterfly (``paddings``: only the last one, of a factor in BUTTERFLY); the others are dots."""

    n: int
    factors: tuple[int, int, int]
    padded: tuple[int, int, int]

    @property
    def tile(self) -> int:
        return math.prod(self.padded)

    def butterflies(self) -> tuple[bool, bool, bool]:
        """Whether each stage is a butterfly (P = its factor, below tl.dot's MIN_DOT) rather than a dot."""
        return tuple(1 < p < MIN_DOT for p in self.padded)

    def cost(self) -> int:
        """Real arithmetic per row: a dot stage's multiply-adds (tile·P complex ones, 4 real products each);
        a butterfly stage's real adds, 2·log2(P) a complex value (radix 2: 2 complex adds a pair; radix 4:
        8 a quadruple, its ±i free). Twiddles and permutes are not counted."""
        dots = 4 * self.tile * sum(p for p, b in zip(self.padded, self.butterflies()) if p > 1 and not b)
        adds = sum(2 * self.tile * (p.bit_length() - 1) for p, b in zip(self.padded, self.butterflies()) if b)
        return dots + adds

    def describe(self) -> str:
        """The factors as run: "f" a dot of its own size, "f→P" a dot padded to P, "fb" a butterfly."""
        shown = [f"{f}b" if b else f"{f}" if f == p else f"{f}→{p}"
                 for f, p, b in zip(self.factors, self.padded, self.butterflies()) if f > 1]
        return "·".join(shown) or "1"

    def table_sizes(self) -> list[tuple[int, int]]:
        """[rows, cols] of each table of ``TABLES``, in order (a butterfly stage keeps its small [P, P] DFT
        block, unread by the kernel: one layout for every tiling)."""
        p1, p2, p3 = self.padded
        return [(p1, p1), (p2, p2), (p3, p3), (p2, p1), (p3, p1), (p3, p2)]

    def table_numel(self) -> int:
        return sum(2 * r * c for r, c in self.table_sizes())


# The tables, in the order they lie in the flat tensor (rows × cols, each complex: re block, im block).
TABLES = ("F1 [p1, p1]: ω_a^(t1·k1)", "F2 [p2, p2]: ω_b^(t2·k2)", "F3 [p3, p3]: ω_c^(t3·k3)",
          "W12 [p2, p1]: ω_n^(c·t2·k1)", "W13 [p3, p1]: ω_n^(t3·k1)", "W23 [p3, p2]: ω_n^(a·t3·k2)")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, min(n, MAX_FACTOR) + 1) if n % d == 0]


def _factorings(n: int):
    """Every ordered (a, b, c) with a·b·c = n and each factor ≤ MAX_FACTOR, in one fixed order (tiling's
    ties go to the first found)."""
    for a in _divisors(n):
        for b in _divisors(n // a):
            c = n // (a * b)
            if c <= MAX_FACTOR:
                yield a, b, c


def tiling(n: int) -> Tiling | None:
    """The cheapest three-factor tiling of length n (module docstring), or None when n is not covered."""
    if not isinstance(n, int) or n < 1 or n > MAX_LENGTH:
        return None
    best = None
    for a, b, c in _factorings(n):
        factors = tuple(sorted((a, b, c), reverse=True))  # the smallest factor run last: a butterfly if 2 or 4
        for sizes in paddings(factors):
            candidate = Tiling(n, factors, sizes)
            if candidate.tile > TILE:  # 3757 = 17·17·13 would pad to 32·32·16: more than a program holds
                continue
            key = preference(candidate)
            if best is None or key < best[0]:
                best = (key, candidate)
    return best[1] if best else None


def dot_stages(t: Tiling) -> int:
    """The stages of t that run as a tl.dot (a butterfly stage does not)."""
    return sum(1 for p, b in zip(t.padded, t.butterflies()) if p > 1 and not b)


def preference(t: Tiling) -> tuple:
    """The key ``tiling`` and Bluestein's choice of m minimize: a table wider than WIDE last, then (with
    FEWER_DOT_STAGES) the fewest dot stages, then the least arithmetic (``Tiling.cost``), then the smallest tile."""
    return (max(t.padded) > WIDE, dot_stages(t) if FEWER_DOT_STAGES else 0, t.cost(), t.tile)


def set_fewer_dot_stages(on: bool) -> None:
    """FEWER_DOT_STAGES = on for what follows in this process (the plans chosen before are forgotten); the
    benchmarks' A/B switch."""
    global FEWER_DOT_STAGES
    FEWER_DOT_STAGES = bool(on)
    _cheapest.cache_clear()
    bluestein.cache_clear()


def covers(n) -> bool:
    """Whether fft_rows computes a transform of length n (a static int): a tiling of n, or Bluestein."""
    return kernel_plan(n) is not None


def _unit(phase: torch.Tensor, n: int, inverse: bool, inside: torch.Tensor) -> torch.Tensor:
    """[2, *phase.shape] float64: cos and ±sin of 2π·phase/n (phase an exact integer in [0, n)), 0 outside."""
    theta = phase.to(torch.float64) * (2 * math.pi / n)
    sign = 1.0 if inverse else -1.0
    return torch.stack([theta.cos(), sign * theta.sin()]) * inside.to(torch.float64)


def _table(rows: int, cols: int, row_limit: int, col_limit: int, multiplier: int, modulus: int,
           inverse: bool) -> torch.Tensor:
    """ω_modulus^(multiplier·i·k) at [i, k] for i < row_limit, k < col_limit, zero elsewhere."""
    i = torch.arange(rows, dtype=torch.int64)[:, None]
    k = torch.arange(cols, dtype=torch.int64)[None, :]
    return _unit((multiplier * i * k) % modulus, modulus, inverse, (i < row_limit) & (k < col_limit))


def table_values(t: Tiling | Bluestein, inverse: bool) -> torch.Tensor:
    """The flat float64 tables of tiling t (``TABLES``); inverse: exp(+2πi…). A butterfly stage's DFT block
    is its exact [P, P] DFT (P = its factor), which the kernel does not read. A Bluestein plan's:
    ``bluestein_values``."""
    if isinstance(t, Bluestein):
        return bluestein_values(t, inverse)
    a, b, c = t.factors
    p1, p2, p3 = t.padded
    n = t.n
    parts = [
        _table(p1, p1, a, a, 1, a, inverse), _table(p2, p2, b, b, 1, b, inverse),
        _table(p3, p3, c, c, 1, c, inverse), _table(p2, p1, b, a, c, n, inverse),
        _table(p3, p1, c, a, 1, n, inverse), _table(p3, p2, c, b, a, n, inverse),
    ]
    return torch.cat([p.reshape(-1) for p in parts])


def bluestein_values(p: Bluestein, inverse: bool) -> torch.Tensor:
    """The flat float64 tables of Bluestein plan p of S = p.parts transforms of h = m/S (``Bluestein``): the
    forward DFT tables of its tiling of h (both of a half's DFTs are forward ones: the second runs them
    transposed on the conjugate), then for each half s its chirps in and out, [2, n] each:
    c[t]·ω_m^(s·t) and c[t]·ω_m^(−s·t), c[t] = exp(∓πi·t²/n) (t² reduced mod 2n, s·t mod m, exactly;
    ω_m = exp(−2πi/m), the convolution's own forward sign), then for each half s the spectrum of the
    convolution kernel b[j] = conj(c[|j|]) (|j| < n, wrapped mod m) divided by m at its bins S·k + s, laid
    out as the forward DFT of h leaves its output: [2, p1, p2, p3] at (k1, k2, k3), k = k1 + a·k2 + a·b·k3,
    zero in the padding. S = 1: the chirp c[t] twice (in and out alike) and the whole spectrum."""
    n, m = p.n, p.m
    index = torch.arange(n, dtype=torch.int64)
    chirp = _unit((index * index) % (2 * n), 2 * n, inverse, torch.ones(n, dtype=torch.bool))
    j = torch.arange(m, dtype=torch.int64)
    distance = torch.where(j < n, j, m - j)
    kernel = _unit((distance * distance) % (2 * n), 2 * n, not inverse, (j < n) | (j > m - n))
    return _convolution_values(p, chirp, torch.complex(kernel[0], kernel[1]))


def filter_values(p: Bluestein, g: torch.Tensor) -> torch.Tensor:
    """The flat float64 tables (bluestein_values's layout) with which the Bluestein kernel computes, for each
    row x of length n = p.n, the circular convolution y[t] = Σ_j x[j]·g[(t − j) mod n] with a real g ([n]): the
    chirps are ones (times the parts' ω_m^(±s·t)), and the kernel is g laid out for a
    linear convolution that m ≥ 2n − 1 holds whole, b[j] = g[j] and b[m − j] = g[n − j] for 0 < j < n (so
    Σ_j x[j]·b[(t − j) mod m] = y[t] for t < n: the differences t − j lie in (−n, n)). A spectral filter
    irfft(rfft(x)·w) is this convolution with g = irfft(w) (spectral/filter.py): two m-point DFTs a pair of
    rows, where Bluestein's r2c then c2r takes four."""
    n, m = p.n, p.m
    if g.shape != (n,) or g.dtype.is_complex:
        raise ValueError(f"filter_values: the convolution kernel must be {n} real points; got {g.dtype} "
                         f"{tuple(g.shape)}")
    ones = torch.stack([torch.ones(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)])
    g = g.to(torch.complex128)
    kernel = torch.zeros(m, dtype=torch.complex128)
    kernel[:n] = g
    kernel[m - n + 1:] = g[1:]  # b[m − j] = g[n − j], 0 < j < n
    return _convolution_values(p, ones, kernel)


def _convolution_values(p: Bluestein, chirp: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """bluestein_values's layout for the chirp c ([2, n] float64) and the convolution kernel b ([m] complex128)."""
    n, m, t, parts = p.n, p.m, p.tiling, p.parts
    index = torch.arange(n, dtype=torch.int64)
    every = torch.ones(n, dtype=torch.bool)
    chirps = []
    for s in range(parts):
        for out in (False, True):  # ω_m^(s·t) in, ω_m^(−s·t) out
            turn = _unit((s * index) % m, m, out, every)
            chirps.append(torch.stack([chirp[0] * turn[0] - chirp[1] * turn[1], chirp[0] * turn[1] + chirp[1] * turn[0]]))
    spectrum = torch.view_as_real(torch.fft.fft(kernel) / m).T  # [2, m]
    k, inside = _output_bins(t)
    laid_out = [torch.where(inside, spectrum[:, torch.where(inside, parts * k + s, 0)], 0.0) for s in range(parts)]
    return torch.cat([table_values(t, False)] + [part.reshape(-1) for part in chirps + laid_out])


def _output_bins(t: Tiling) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the forward DFT of tiling t leaves its output: the bin k = k1 + a·k2 + a·b·k3 at each (k1, k2, k3) of
    the padded tile [p1, p2, p3], and whether that place is a bin (not padding)."""
    (a, b, c), (p1, p2, p3) = t.factors, t.padded
    k1, k2, k3 = torch.meshgrid(torch.arange(p1), torch.arange(p2), torch.arange(p3), indexing="ij")
    return k1 + a * k2 + a * b * k3, (k1 < a) & (k2 < b) & (k3 < c)


def kernel_spectrum(p: Bluestein, tables: torch.Tensor) -> torch.Tensor:
    """The spectrum DFT_m(b)/m ([m] complex128) that tables of p's layout (bluestein_values, filter_values) hold:
    their last parts·[2, p1, p2, p3] values read back at bins parts·k + s."""
    t, parts = p.tiling, p.parts
    laid_out = tables.to(torch.float64).reshape(-1)[-parts * 2 * t.tile:].reshape(parts, 2, *t.padded)
    k, inside = _output_bins(t)
    k = k[inside]
    spectrum = torch.zeros(p.m, dtype=torch.complex128)
    for s in range(parts):
        spectrum[parts * k + s] = torch.complex(laid_out[s, 0][inside], laid_out[s, 1][inside])
    return spectrum


def tilings(n: int) -> list[Tiling]:
    """Every tiling of length n the kernel runs, the default (``tiling(n)``) among them: factors in any order
    with the ones last, each ≤ MAX_FACTOR, each of its ``paddings`` (all dots; a last butterfly), the padded
    tile ≤ TILE; cheapest first (cost, tile, factors, then a butterfly before the dot)."""
    if not isinstance(n, int) or n < 1 or n > MAX_LENGTH:
        return []
    return _tilings(n, TILE)


def _tilings(n: int, most: int) -> list[Tiling]:
    """``tilings`` of any length n, with a padded tile ≤ `most`."""
    found = set()
    for a, b, c in _factorings(n):
        ones_last = tuple([f for f in (a, b, c) if f > 1] + [f for f in (a, b, c) if f == 1])
        for sizes in paddings(ones_last):
            candidate = Tiling(n, ones_last, sizes)
            if candidate.tile <= most:
                found.add(candidate)
    return sorted(found, key=lambda t: (t.cost(), t.tile, tuple(-f for f in t.factors), t.padded))


@dataclasses.dataclass(frozen=True)
class Bluestein:
    """A length n that no tiling covers, run as Bluestein's chirp-z transform in the same kernel: the row
    times the chirp, a forward DFT of length m ≥ 2n − 1, a product with the convolution kernel's spectrum,
    the DFT's transpose (the same stages backwards) as the inverse, times the chirp again (module docstring).

    parts = 1: the DFT of m on ``tiling`` (of m). parts = S > 1: m = S·h, ``tiling`` h's, and the m-point
    convolution is S h-point ones (decimation in frequency, with ω_m = exp(−2πi/m)): bin S·k + s of the DFT of
    x·c is DFT_h(fold(x·c·ω_m^(s·t)))[k], the fold summing the points t, t + h, t + 2h, … of a row into t < h
    (ω_h^(k·t) repeats every h points); each part times its bins of the spectrum, inverted as h points, and
    y[t] = Σ_s ω_m^(−s·t)·IDFT_h(part s)[t mod h] for every t < n. Each part is the parts = 1 pipeline with its
    own chirps (ω_m^(±s·t) folded in) and spectrum (bluestein_values). ``folds`` = ⌈n/h⌉ points of a row land
    on each point of h's tile: 1 where h ≥ n (every n ≤ 4096: two halves of h ≥ n), 2 past 4096."""

    n: int
    tiling: Tiling
    parts: int = 1

    @property
    def m(self) -> int:
        return self.parts * self.tiling.n

    @property
    def folds(self) -> int:
        return -(-self.n // self.tiling.n)

    @property
    def tile(self) -> int:
        return self.tiling.tile

    @property
    def factors(self) -> tuple[int, int, int]:
        return self.tiling.factors

    @property
    def padded(self) -> tuple[int, int, int]:
        return self.tiling.padded

    def butterflies(self) -> tuple[bool, bool, bool]:
        return self.tiling.butterflies()

    def cost(self) -> int:
        """Two DFTs of the tiling a part (the pointwise products are not counted, as twiddles are not)."""
        return 2 * self.parts * self.tiling.cost()

    def describe(self) -> str:
        if self.parts == 1:
            return f"Bluestein m={self.m} ({self.tiling.describe()})"
        if self.parts == 2 and self.folds == 1:
            return f"Bluestein m={self.m} (2 halves of {self.tiling.n}: {self.tiling.describe()})"
        return (f"Bluestein m={self.m} ({self.parts} parts of {self.tiling.n}: {self.tiling.describe()}, "
                f"{self.folds} folds)")

    def table_numel(self) -> int:
        """h's DFT tables (``TABLES``), then a part's two chirps [2, n] and spectrum [2, p1, p2, p3] each."""
        return self.tiling.table_numel() + self.parts * (4 * self.n + 2 * self.tile)


def _smooth(m: int) -> bool:
    """Whether every prime factor of m is below MAX_FACTOR (a tiling may exist)."""
    for p in range(2, MAX_FACTOR):
        while m % p == 0:
            m //= p
    return m == 1


@functools.cache
def _cheapest(m: int, most: int) -> Tiling | None:
    """The tiling of m (``_tilings``, tile ≤ `most`) that ``tiling`` would prefer (``preference``)."""
    if not _smooth(m):
        return None
    found = _tilings(m, most)
    return min(found, key=preference) if found else None


@functools.cache
def bluestein(n: int) -> Bluestein | None:
    """The Bluestein plan of a length n that ``tiling`` does not cover, or None (n covered, or past
    BLUESTEIN_MAX_LENGTH): m ≥ 2n − 1 up to the power of two, whose tiling (any of ``_tilings``, a butterfly last
    stage included: the inverse runs the same stages transposed) is cheapest by ``tiling``'s key, among tiles
    ≤ TILE; where none is (n > 2048) and BLUESTEIN_TILE allows m past TILE, two halves of the cheapest
    h ≥ n up to the power of two with a tile ≤ TILE (BLUESTEIN_HALVES; else one tile ≤ BLUESTEIN_TILE).
    Past MAX_LENGTH, a length with a prime factor past MAX_FACTOR (smooth ones stay DFT products: the
    GEMM form's own factorization, which no convolution of twice the length beats) takes the fewest parts
    S of the cheapest h ≤ TILE with S·h ≥ 2n − 1 (``_parted``; each point of h's tile holds two of a row's)."""
    if not isinstance(n, int) or n < 2 or tiling(n) is not None:
        return None
    if n > MAX_LENGTH:
        return _parted(n) if BLUESTEIN_HALVES and BLUESTEIN_TILE > TILE and not _smooth(n) else None
    one = _cheapest_in(range(2 * n - 1, (1 << (2 * n - 2).bit_length()) + 1),
                       TILE if BLUESTEIN_HALVES else BLUESTEIN_TILE)
    if one is not None:
        return Bluestein(n, one)
    if BLUESTEIN_HALVES and BLUESTEIN_TILE > TILE and 2 * n <= BLUESTEIN_TILE:
        half = _cheapest_in(range(n, (1 << (n - 1).bit_length()) + 1), TILE)
        if half is not None:
            return Bluestein(n, half, 2)
    return None


def _parted(n: int) -> Bluestein | None:
    """A length n in MAX_LENGTH + 1 … BLUESTEIN_MAX_LENGTH as S parts of h ≤ TILE, S·h ≥ 2n − 1 and h ≥ n/2 (two
    folds at most: r2c's pairs kernel holds both folds' bins at once as it separates its rows): for each S from
    3 to MAX_PARTS the cheapest h by ``tiling``'s key, and of those the plan of the fewest multiply-adds
    (``Bluestein.cost``: S·h's two DFTs), the fewer parts on a tie."""
    if n > BLUESTEIN_MAX_LENGTH:
        return None
    plans = []
    for parts in range(3, MAX_PARTS + 1):
        least = max(-(-(2 * n - 1) // parts), -(-n // 2))
        h = _cheapest_in(range(least, TILE + 1), TILE) if least <= TILE else None
        if h is not None:
            plans.append(Bluestein(n, h, parts))
    return min(plans, key=lambda p: (p.cost(), p.parts)) if plans else None


def _cheapest_in(lengths, most: int) -> Tiling | None:
    """The tiling of one of `lengths` (tile ≤ `most`) cheapest by ``tiling``'s key, the first such length on ties."""
    best = None
    for m in lengths:
        t = _cheapest(m, most)
        if t is not None:
            key = preference(t)
            if best is None or key < best[0]:
                best = (key, t)
    return best[1] if best else None


def set_bluestein_tile(most: int, halves: bool | None = None) -> None:
    """BLUESTEIN_TILE = most (TILE or 2·TILE) and, where given, BLUESTEIN_HALVES = halves (an m past TILE as two
    halves, or as one tile; None leaves it as it is) for what follows in this process; the benchmarks' switch."""
    global BLUESTEIN_TILE, BLUESTEIN_HALVES
    if most not in (TILE, 2 * TILE):
        raise ValueError(f"BLUESTEIN_TILE must be {TILE} or {2 * TILE}; got {most}")
    BLUESTEIN_TILE = most
    if halves is not None:
        BLUESTEIN_HALVES = bool(halves)
    bluestein.cache_clear()


def kernel_plan(n) -> Tiling | Bluestein | None:
    """How fft_rows computes length n: its tiling, else its Bluestein plan, else None (not covered)."""
    return (tiling(n) or bluestein(n)) if isinstance(n, int) else None


@dataclasses.dataclass(frozen=True)
class Launch:
    """How aotcuda::fft_rows runs: the tiling, `rows` rows a program (R, a power of two) and `warps`."""

    tiling: Tiling | Bluestein
    rows: int
    warps: int

    def describe(self) -> str:
        return f"{self.tiling.describe()}, R={self.rows}, {self.warps} warps"

    def problem(self) -> str | None:
        """Why the kernel cannot run this launch, or None: the factors must multiply to n with the ones last,
        each ≤ MAX_FACTOR and padded as one of ``paddings`` (dots; a last butterfly), the tile ≤ TILE; R a
        power of two whose dot stages' tl.dot rows reach MIN_DOT; 1 to MAX_WARPS warps, a power of two."""
        t, most = self.tiling, TILE
        if isinstance(t, Bluestein):
            if t.m < 2 * t.n - 1:
                return f"Bluestein's m = {t.m} must be at least 2n − 1 = {2 * t.n - 1}"
            if not 1 <= t.parts <= MAX_PARTS or t.folds > 2:
                return (f"Bluestein's parts = {t.parts} must be 1 to {MAX_PARTS}, each point of h = {t.tiling.n} "
                        f"holding at most two of the row's {t.n} (folds = {t.folds})")
            t, most = t.tiling, TILE if t.parts > 1 else BLUESTEIN_TILE
        if (len(t.factors) != 3 or math.prod(t.factors) != t.n
                or any(not isinstance(f, int) or f < 1 or f > MAX_FACTOR for f in t.factors)):
            return f"factors {t.factors} must be three that multiply to n = {t.n}, each in [1, {MAX_FACTOR}]"
        stages = [f for f in t.factors if f > 1]
        if list(t.factors[:len(stages)]) != stages:
            return f"factors {t.factors} must have their ones last"
        allowed = paddings(t.factors)
        if t.padded not in allowed or t.tile > most:
            return f"padded sizes {t.padded} must be {' or '.join(map(str, allowed))}, a tile ≤ {most}"
        if self.rows < least_rows(t) or self.rows & (self.rows - 1):
            return f"R = {self.rows} must be a power of two ≥ {least_rows(t)} (tl.dot's M ≥ {MIN_DOT})"
        if not 1 <= self.warps <= MAX_WARPS or self.warps & (self.warps - 1):
            return f"warps = {self.warps} must be a power of two from 1 to {MAX_WARPS}"
        return None


def least_rows(t: Tiling | Bluestein) -> int:
    """The fewest rows a program of tiling t holds: each dot stage's tl.dot multiplies R·tile/P ≥ MIN_DOT rows
    (a butterfly stage has no such floor)."""
    return max([1] + [-(-MIN_DOT * p // t.tile) for p, b in zip(t.padded, t.butterflies()) if p > 1 and not b])


def num_warps(t: Tiling | Bluestein, rows: int) -> int:
    """The default warps of a program of `rows` rows of tiling t: 8 for a table wider than WIDE, else 4.
    Measured on the H200 (benchmarks/scripts/fft_tiling_sweep.py, 512 rows, 2026-12-03): 4096 = 16·16·16
    in one program took 28.0/38.2 µs (r2c/c2r) with 4 warps against 34.2/44.6 with 8, which the rule
    before (8 for a program of 4096 values) gave."""
    if isinstance(t, Bluestein):
        # Compiled for sm_90 (Triton 3.9, fft_kernel_resources.py, fp32 c2c): 2039 = Bluestein m=4096 at
        # one row spilled 1272 bytes with 4 warps, 16 with 8; 1009 (m = 2048) at one row spilled none with 4.
        # Two halves of 4096 (4093): 960 bytes with 4 warps, 144 with 8, 464 with 16.
        return 8 if rows * t.tile >= TILE else 4
    return 8 if max(t.padded) > WIDE else 4


def default_launch(n: int, rows, processors: int = 132) -> Launch:
    """The launch the op takes for `rows` rows of length n (covered: ``kernel_plan``) on a GPU of
    `processors` multiprocessors. A Bluestein plan takes its tiling's rows a program (m's, or a half's: one
    row of 8 warps for n > 2048)."""
    t = kernel_plan(n)
    r = rows_per_program(t, rows, processors)
    return Launch(t, r, num_warps(t, r))


def launches(n: int, rows, processors: int = 132, warps=(4, 8)) -> list[Launch]:
    """Every launch of length n worth timing, the default first; a caller that can time only some takes them
    from the front. Then the tilings of ``tilings`` within twice the default's multiply-adds, each with the
    R and warps it would get by default, then each of those at every power-of-two R from ``least_rows`` up
    to TILE values a program (or its least) and each of `warps`; then the costlier tilings the same way."""
    default = default_launch(n, rows, processors)
    if isinstance(default.tiling, Bluestein):
        return _bluestein_launches(default, warps)

    def own(t: Tiling) -> Launch:
        r = rows_per_program(t, rows, processors)
        return Launch(t, r, num_warps(t, r))

    def others(t: Tiling) -> list[Launch]:
        out, r = [], least_rows(t)
        while r <= max(least_rows(t), TILE // t.tile):
            out += [Launch(t, r, w) for w in warps]
            r *= 2
        return out

    near = [t for t in tilings(n) if t.cost() <= 2 * default.tiling.cost()]
    far = [t for t in tilings(n) if t not in near]
    ordered = [default] + [own(t) for t in near] + [c for t in near for c in others(t)]
    ordered += [own(t) for t in far] + [c for t in far for c in others(t)]
    return list(dict.fromkeys(ordered))


def _bluestein_launches(default: Launch, warps) -> list[Launch]:
    """A Bluestein length's launches: its default, then the same m (or halves of h) on each tiling of its
    DFT length within twice the default's multiply-adds, at the default's rows a program and each of `warps`."""
    plan = default.tiling
    near = [t for t in _tilings(plan.tiling.n, TILE) if t.cost() <= 2 * plan.tiling.cost()]
    near.sort(key=lambda t: t != plan.tiling)  # the default's own tiling first
    every = [Launch(Bluestein(plan.n, t, plan.parts), default.rows, w) for t in near for w in warps]
    return list(dict.fromkeys([default] + [c for c in every if c.problem() is None]))


def rows_per_program(t: Tiling | Bluestein, rows, processors: int = 132) -> int:
    """Rows a program transforms: ROWS_TILE // tile (a 64-wide table: a quarter of it; one product stage and a
    butterfly stage 2: 16 rows), fewer where a static row count would leave a GPU multiprocessor without a program, never so
    few that a tl.dot's M drops below 16. One program per multiprocessor, not two: on the H200 (fft_tiling_sweep.py, 512 rows,
    2026-12-03) n = 1024 took 8.4/8.1 µs (r2c/c2r) at 2 rows a program (256 programs) against 12.3/12.4 at
    1 (512 programs), and n = 512 6.6/6.5 against 7.7/10.0."""
    aim = ROWS_TILE if max(t.padded) <= WIDE else ROWS_TILE // 4
    if isinstance(t, Bluestein):  # two DFTs' live values: 67 (m = 135) at 8 rows spilled 96 bytes, at 4 none
        aim //= 2
    most = max(1, aim // t.tile)
    if t.butterflies()[1] and not isinstance(t, Bluestein):  # (a Bluestein tile holds more: its default)
        # One product stage and a butterfly stage 2 (32 = 16·2b, 64 = 16·4b, 128 = 32·4b): 16 rows a
        # program. Timed on the H200 over 81,920 rows (fft_tiling_sweep.py, r2c + c2r µs; sessions 13 and 14,
        # docs/performance.md): 32 took 43.7 at R = 16 against 69.9 at R = 32 (r2c alone 19.9 against
        # 51.0) and 72.1 at R = 8; 64 was fastest at R = 16 of every launch swept; 128 took 158 at R = 16
        # against 236 at R = 8 and 175 at R = 4. Compiled for sm_90 (Triton 3.9, fft_kernel_resources.py):
        # 32 and 64 at 16 rows hold 122–124 registers a thread, 128 = 32·4b c2r at 16 rows (2048 values)
        # spills 200 bytes and is still the fastest. A butterfly stage 3 (512, 1024, 2048: 143–168 registers
        # at 2048 values) keeps ROWS_TILE // 2 (1024 keeps its measured 2 rows a program for 512 rows).
        most = 16
    least = least_rows(t)
    r = most
    if isinstance(rows, int):
        while r > least and -(-rows // r) < processors:
            r //= 2
    return max(r, least)
