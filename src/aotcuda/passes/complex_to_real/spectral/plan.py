"""How a transform of static length n is computed: direct DFT, mixed-radix split, or Bluestein (the
GEMM form, for GPUs), or radix stages (the CPU form, cpu_radices; spectral/stockham.py). The kernel form
(AOTCUDA_FFT_KERNEL: one aotcuda::fft_rows Triton kernel per transform) has its own tiling,
kernels/fft_plan.py, and its own Bluestein (inside the kernel, n ≤ 4096); a length it does not cover takes
the GEMM plan here.

The form follows the device of the program's tensors (transform.on_cpu): on a GPU the extra flops of
DFT products are cheap on matrix units and a few large GEMMs fuse well; on the CPU they measured 4–44×
pocketfft, while pointwise radix stages (≈ an FFT's flops, one memory pass a stage) measured 1–3×
(docs/performance.md). Every CPU length takes stages; no length measured faster as a GEMM there.

A length is split n = n1·n2 (Cooley–Tukey, four-step): n1 is a DFT product, n2 is planned again. n1 is
the divisor of n closest to √n among those up to MAX_RADIX, so a 400 becomes 20·20 and a 4096 64·64:
two GEMM stages with K = 2·n1 and 2·n2, whose cost is 8·n·(n1 + n2) real flops a row instead of the
direct DFT's 8·n². A length with no divisor in [2, MAX_RADIX] other than itself (a prime, or a
large prime factor left after splitting) above MAX_DIRECT runs as Bluestein's chirp-z transform: a
circular convolution of power-of-two length ≥ 2n − 1, itself planned as above.
"""

from __future__ import annotations

import dataclasses
import math

# Largest transform computed as one DFT product, and largest radix of a split (GEMM K = 2·radix).
MAX_DIRECT = 64
MAX_RADIX = 64
# A prime factor up to this is still a direct DFT (its table is [2p, 2p]); above it, Bluestein.
MAX_DIRECT_PRIME = 256


@dataclasses.dataclass(frozen=True)
class Plan:
    """kind "direct" (one DFT product), "split" (n = first·rest, rest a Plan) or "bluestein" (padded to
    `padded`, a Plan of that power of two)."""

    n: int
    kind: str
    first: int = 0
    rest: Plan | None = None
    padded: Plan | None = None

    def describe(self) -> str:
        if self.kind == "direct":
            return str(self.n)
        if self.kind == "split":
            return f"{self.first}·{self.rest.describe()}"
        return f"bluestein({self.n} via {self.padded.describe()})"


def _radix(n: int) -> int | None:
    """The divisor of n in [2, MAX_RADIX] closest to √n, or None."""
    divisors = [d for d in range(2, min(MAX_RADIX, n - 1) + 1) if n % d == 0]
    if not divisors:
        return None
    root = math.sqrt(n)
    return min(divisors, key=lambda d: (abs(math.log(d / root)), -d))


def bluestein_power_of_two(n: int) -> int:
    """Bluestein's convolution length for a length-n transform in the GEMM, Stockham and CUDA forms: the least power
    of two ≥ 2n − 1 (the linear convolution of the chirp's 2n − 1 points fits without wrapping)."""
    return 1 << (2 * n - 2).bit_length()


def plan(n: int) -> Plan:
    """The plan of a length-n complex DFT (n ≥ 1, static)."""
    if n <= MAX_DIRECT:
        return Plan(n, "direct")
    radix = _radix(n)
    if radix is not None:
        return Plan(n, "split", first=radix, rest=plan(n // radix))
    if n <= MAX_DIRECT_PRIME:
        return Plan(n, "direct")
    return Plan(n, "bluestein", padded=plan(bluestein_power_of_two(n)))


# The CPU form (stockham.py): radix stages of these sizes, 4 first; any other prime factor → Bluestein.
# Measured on [512, 256] planes (torch 2.13, one thread): a radix-4 stage 144 µs (72 µs a bit of n), a
# radix-8 one built as 2·4 inside the stage 218 µs (73 a bit), 4·4 radix-16 367 µs (92 a bit): the
# larger butterflies keep more values live than the C++ kernel holds in registers, so radix 4 it is.
CPU_RADICES = (4, 2, 3, 5, 7, 11, 13)


def cpu_radices(n: int) -> list[int] | None:
    """The Stockham stages of a length-n transform on the CPU (radix-4 while 4 divides n, then 2, 3, 5,
    7, 11, 13), or None when n has a prime factor above 13 (Bluestein: in the C++ kernel over
    cpu_bluestein_length(n), in the ATen form over a power of two)."""
    radices = []
    for r in CPU_RADICES:
        while n % r == 0 and n > 1:
            radices.append(r)
            n //= r
    return radices if n == 1 else None


def flops(p: Plan) -> int:
    """Real flops per row of a complex length-n transform on this plan (a DFT product of length d costs
    8·d² a row: a [2d]·[2d, 2d] real GEMM; a twiddle or chirp product 6 a point)."""
    if p.kind == "direct":
        return 8 * p.n * p.n
    if p.kind == "split":
        rest = p.n // p.first
        return rest * 8 * p.first * p.first + 6 * p.n + p.first * flops(p.rest)
    m = p.padded.n
    return 2 * flops(p.padded) + 6 * (2 * p.n + m)


def _stage_flops(r: int, n: int, last: bool) -> int:
    """Real flops of one radix-r CPU stage over n points (stockham._butterfly and its twiddles)."""
    butterfly = {2: 4, 4: 16}.get(r, 5 * (r - 1) + 2 * (r - 1) ** 2)  # per r points (odd r: symmetric form)
    return n // r * (butterfly + (0 if last else 6 * (r - 1)))


def cpu_flops(n: int) -> int:
    """Real flops per row of a complex length-n transform in the CPU form: its stages, or Bluestein's two
    power-of-two transforms and three chirp products."""
    radices = cpu_radices(n)
    if radices is None:
        m = bluestein_power_of_two(n)
        return 2 * cpu_flops(m) + 6 * (2 * n + m)
    return sum(_stage_flops(r, n, i == len(radices) - 1) for i, r in enumerate(radices))


def cpu_bluestein_length(n: int) -> int:
    """The convolution length m ≥ 2n − 1 of Bluestein in the CPU kernel (kernels/fft_cpu.py) for a length n
    that cpu_radices refuses: among m up to the power of two whose stages are radix 4, 2, 3 and 5 only, the
    one with the fewest flops plus 4·m a stage (each stage a pass over the planes): 2048 for 1009, 2304 for
    1031 (4·4·4·4·3·3), 144 for 67."""
    def cost(m: int) -> int:
        return cpu_flops(m) + 4 * m * len(cpu_radices(m))

    candidates = [m for m in range(2 * n - 1, bluestein_power_of_two(n) + 1)
                  if (r := cpu_radices(m)) is not None and max(r, default=2) <= 5]
    return min(candidates, key=lambda m: (cost(m), m))


def cpu_describe(n: int) -> str:
    """The CPU form's stages of a length-n c2c transform, as cost_table and benchmarks/fft.py show them."""
    radices = cpu_radices(n)
    if radices is None:
        return f"bluestein({n} via {'·'.join(map(str, cpu_radices(bluestein_power_of_two(n))))})"
    return "·".join(map(str, radices))


def cost_table(lengths=(16, 64, 128, 251, 400, 512, 1024, 1031, 2048, 4096)) -> str:
    """A Markdown table: per length the GEMM plan and the CPU stages, flops a row of each, and those
    over an FFT's 5·n·log2(n)."""
    rows = ["| n | GEMM plan (GPU) | kind | flops a row (c2c) | ÷ 5·n·log₂n | CPU stages | flops a row | ÷ 5·n·log₂n |",
            "|---|---|---|---|---|---|---|---|"]
    for n in lengths:
        p, fft = plan(n), 5 * n * math.log2(n)
        rows.append(f"| {n} | {p.describe()} | {p.kind} | {flops(p):,} | {flops(p) / fft:.1f} | "
                    f"{cpu_describe(n)} | {cpu_flops(n):,} | {cpu_flops(n) / fft:.1f} |")
    return "\n".join(rows)


DOCS_SECTION = """## FFT lengths, options and dynamic dims, and what each costs

`_fft_r2c`, `_fft_c2c` and `_fft_c2r` (torch.fft.fft/ifft/rfft/irfft, fft2/fftn/rfft2/rfftn, stft and
istft with every window, center, pad_mode, onesided and return_complex option) are rewritten for **any
static length**, every normalization (backward, ortho, forward) and `s=`/`n=` padding or cropping; a
multi-dim transform runs one dim at a time. Float32 results are within 1e-5 of eager relative to the
largest magnitude for n ≤ 4096, float64 within 1e-10 (tests/passes/complex_to_real/test_fft_lengths.py).
Every table is a program constant (float64-accurate angles, cast to the program's dtype).

**Four forms, chosen by the device of the program's tensors and the length.** Where Triton is installed, a
CUDA (any non-CPU) transform of a length whose prime factors are all ≤ 61 (n ≤ 4096, a padded tile of at
most 4096 points) is one `aotcuda::fft_rows` Triton kernel that reads the data once along the dim where it
is and writes the result once (kernels/fft_rows.py: a three-factor tile of DFT products in registers,
TF32x3 products for float32; r2c and c2r fused in its load and store); on the H200 it took 0.45–1.05×
cuFFT's time (docs/performance.md). Every other length up to 4096 (a prime factor of 67 or more: 67, 134,
1009, 2039, 4093) is the same one kernel running Bluestein's chirp-z inside it (kernels/fft_bluestein.py;
`Bluestein m=…` in fft_plan's describe()): the chirp product, a forward DFT of the cheapest tiled length
m ≥ 2n − 1 (not necessarily a power of two: 67 runs m = 135 = 15·9, 1009 m = 2048), the product with the
chirp kernel's spectrum, the same DFT's stages transposed as the inverse, and the chirp again, with stft's
window, r2c's real input and c2r's real output fused as for the other lengths; past m = 4096 (n in
2049…4096: 4093 runs m = 8192) as two convolutions of m/2 in turn (decimation in frequency). On the H200 (a
512-row float32 filter) 0.60× cuFFT's time at 1009, 0.72× at 2039; 2.88× at 4093 when m = 8192 was one
tile a program (spilling registers; the two halves are not measured on the H200 yet).
A complex product whose only use is such a c2c or c2r (a spectral filter's spectrum times its weight before
the irfft) is fused into the kernel's loads as on the CPU below (the op's `weight`; spectral/product.py) where
the kernel's tile holds at most 2048 points: the filter is two kernels, not three, and on the H200 the
weighted transform took 0.67–0.97× the time of the product and the transform apart (n = 64 to 1009, 4096
rows); at 4096's tile it took 0.99–1.11×, so there the product stays its own kernel.
A filter irfft(rfft(x)·w) at such a Bluestein length whose w is a constant every row shares (a parameter, buffer
or constant the program does not write) is one kernel of kind conv (spectral/filter.py): the circular convolution
with irfft(w), its spectrum computed at lowering, in two m-point DFTs a pair of rows where the r2c and the c2r take
four (`AOTCUDA_FFT_FILTER_CONVOLUTION=0` keeps the two).
A length in 4097…8192 with a prime factor above 61 is one kernel too: Bluestein's convolution in 3 or 4 parts
of at most 4096 points, two of a row's points folded onto each (kernels/fft_bluestein_parts.py).
`AOTCUDA_FFT_KERNEL=0` turns it off. Longer lengths (smooth ones past 4096, any past 8192), and every non-CPU
transform without Triton, get DFT products (GEMMs) as below.

Every CPU transform of n ≤ 32768, float32 (float16 and bfloat16 data in float32 math when the op is called directly), is one
`aotcuda::fft_rows_cpu` op (kernels/fft_cpu.py), which Inductor compiles through a C++ template
(kernels/fft_cpu_template.py) into one kernel: blocks of 8 rows gathered into float32 planes, every Stockham
stage below run while the block stays in L1/L2, scattered back with the output's strides (a middle dim read
in place, stft's window fused into the loads); on the shared 2-core CPU it took 0.44–1.03× pocketfft's time
where the stages as ATen ops took 1.07–3.42× (docs/performance.md). A complex length with a prime factor
above 13 (n/2 for an even r2c or c2r) runs Bluestein inside that kernel: chirp, m-point stages, the
kernel's spectrum, the same stages on the conjugate, chirp, with m ≥ 2n − 1 the cheapest length of radix 4,
2, 3 and 5 stages (2048 for 1009); an odd r2c or c2r runs two rows as one complex row. A 512-row filter at
n = 1009, 2039, 4093 took 0.99–1.18× pocketfft's time, where Bluestein as ATen ops took 7.7–8.1×; past
4096 (n = 8192–32768, Bluestein's m up to 65536) the kernel took 0.26–0.50× the ATen stages' time and
0.02–0.05× the ATen Bluestein's. A complex product whose only use is such a c2c or c2r (a spectral filter's
spectrum times its weight before the irfft, FFT convolution) is fused into that transform's loads (the op's
`weight`; spectral/product.py): the filter is two kernels, and every row of `benchmarks/fft.py --device cpu` took
0.57–1.22× the library's time (MKL on the x86 wheel) in session 17.
`AOTCUDA_FFT_CPU_KERNEL=0` turns it off; a torch without the template machinery this uses (checked on 2.11–2.15) keeps the stages as ATen ops.

Every other CPU transform gets Stockham radix stages as ATen ops (spectral/stockham.py): n = r1·…·rk with radix 4 first, then 2,
3, 5, 7, 11, 13, each stage one pointwise Inductor kernel over two real planes (re, im) with the rows innermost, so every load and store is a contiguous vector; the pair
layout is read before the first stage (rows-outer input: one transposing copy, a buffer of its own) and
written, as a view, after the last. A radix-4 stage costs
4.25 flops a point per bit of n (≈ a radix-4 FFT) and one read and write of the data; a radix-r
stage for an odd prime r ≈ 2·r flops a point (its symmetric form). A length with a prime factor above 13
runs Bluestein over the power of two m ≥ 2n − 1 on the same stages. r2c and c2r of an even length are one complex
transform of n/2 points and a pointwise split (merge), about half a complex transform; an odd length
runs as a complex one. The CPU form's graph has ≈ 10× the nodes of the GEMM form's (a rewrite of an
rfft/irfft pair takes seconds, not a second); Inductor fuses each stage into one loop.

Cost classes of a static length n in the GEMM form (spectral/plan.py), per row of a complex transform:
- **direct** (n ≤ 64, or a prime ≤ 256): one GEMM with a [2n, 2n] real table, 8·n² flops.
- **four-step** (n = n1·n2, n1 ≤ 64 the divisor nearest √n): n2 DFT products of n1, a twiddle product,
  then n1 transforms of n2 planned again: 8·n·(n1 + n2) flops for one split, one GEMM per stage.
- **Bluestein** (a prime factor above 256 left): two transforms of the power of two m ≥ 2n − 1 and three
  chirp products; its kernel's spectrum is a constant.
r2c of a direct length is one [n, 2·bins] GEMM; c2r of a direct length one [2·bins, n] GEMM; r2c of a split
length makes its first stage real (half its flops); c2r of a split or Bluestein length rebuilds the
Hermitian spectrum and runs the complex inverse (2× a real-output transform).

{table}

The ÷ 5·n·log₂n columns are the flops over those of a radix-2 FFT: the DFT products do 6–17× an
FFT's arithmetic (50–160× for a large prime), traded for a few large GEMMs that fuse with the
surrounding math and run where matrix units are fast; the CPU stages do about an FFT's (up to 2×
for radices 5–13). Measured against pocketfft and cuFFT:
docs/performance.md (benchmarks/fft.py).

**Dynamic dims.** A dynamic batch or frame count (stft/istft over a dynamic number of samples) costs
nothing extra. Drop istft's `length=` there: `torch.istft(..., length=y.shape[-1])` makes torch.export
specialize the number of samples to the example's ("specialized it to be a constant", torch 2.13), and
without it istft (center=True) returns hop·(frames − 1) samples for an even n_fft (one more for an odd one), the
input's length when that is a multiple of hop (a Dim of `hop * Dim("frames")`) and n_fft is even. lower()'s export error for
`length=` over a dynamic dim says so, with the hop where the model's source gives it plainly. torch's istft builds its
window envelope with an `unfold_backward` of a grad of batch 1, whose decomposition in torch 2.13 loops over the n_fft
offsets: an STFT → mask → iSTFT denoiser (n_fft 512, dynamic) reached Inductor as 4,173 nodes and took 180–450 s to
lower on 2 cores. lower() expands that grad first, so torch's vectorized path takes it (lowering/overlap_add.py): 86
nodes, 33 s in all (benchmarks/scripts/istft_lowering_time.py).
A **dynamic transform length** works when its torch.export.Dim has a max N ≤ 2²¹
(spectral/dynamic.py; a Dim without one is refused with a message that names the max to set):
- **dynamic, N ≤ 64**: one DFT product whose table is built in the graph from n on every call
  (integer t·k mod n, then cos/sin in float64): [2n, 2n], 8·n² flops a row plus 4·n² cos/sin a call; an
  rfft's [2n, 2·(n//2 + 1)] (its bins only), about half of both. The table
  dominates: about 0.15 ms a transform at n = 64 on one CPU thread, ~20× eager's FFT (n = 16: ~2.5×);
  lower() warns for a max above 16. Called with few lengths, a program per static length is faster.
- **dynamic, N > 64**: Bluestein at a static length m ≥ 2N − 1: per call the chirp (n points)
  and its kernel's spectrum (one length-m transform in float64, shared by every row and by every
  transform of that length and direction); per row two length-m transforms, whatever
  n is: the cost of the longest length the Dim allows. On the CPU (float32, N ≤ 16384: m ≤ 32768) both are
  `aotcuda::fft_rows_cpu` kernels along the dim where it is, m the cheapest length of radix 4, 2, 3 and 5
  stages (plan.cpu_bluestein_length: 256 for N = 128, 200 for 100), the chirp multiplied in the copy that pads
  the signal to m and the kernel's spectrum in the inverse's loads: an FNet mixer's fft2 over a dynamic seq
  (N = 128) took 0.30–0.37× the time of the DFT products it replaced, still 5–8× the library's at one thread
  (docs/performance.md, session 41). Elsewhere (and float64) they are DFT products of plan(m), m the power of
  two (the CPU form's ATen stages at m = 8192 made an AOTInductor compile take ~10 minutes). An r2c in the CPU
  kernels of more than 8 rows (the kernel's block) with a batch dim of static size runs two real rows as one
  complex row x1 + i·x2 and splits the spectra by symmetry, and a c2r there runs two spectra as one row X1 + i·X2:
  half the transforms, 0.51–0.87× the time from 64 rows on (docs/performance.md, fftrows42); with only dynamic
  batch dims they run as complex transforms (2× a real one). Example: Hyena's long convolution, rfft/irfft at n = 2L with L ≤ 2048,
  runs three length-8192 transform pairs per row at every L.
A normalization that depends on a dynamic length is one multiply after the transform.
"""


def docs_section() -> str:
    """The FFT section of docs/ops.md (rendered by complex_to_real/docs.py)."""
    return DOCS_SECTION.format(table=cost_table())
