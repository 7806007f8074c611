"""Transforms whose length n is dynamic: a SymInt with a static upper bound N (its Dim's max).

plan.py plans a static length; a dynamic one runs in one of two ways, chosen by N alone:
- N ≤ MAX_DIRECT: one DFT product whose table is built in the graph from n on every call (arange, t·k mod n in
  integers, cos/sin in float64): [2n, 2n] for a complex transform, 8·n² flops a row and 4·n² table entries a call;
  [2n, 2·(n//2 + 1)] for a one-sided r2c (its bins only: r2c_along), about half of each (~4·n² flops, ~2·n² entries).
- N > MAX_DIRECT: Bluestein's chirp-z at a static length m ≥ 2N − 1 (the power of two; on the CPU kernel's
  path plan.cpu_bluestein_length(N), its cheapest length of radix 4, 2, 3 and 5 stages). The chirp (n pairs) and
  the spectrum of its kernel (one length-m transform in float64, shared by every row) are computed in
  the graph each call; each row then costs two length-m transforms, the cost of the
  longest length the Dim allows, whatever n is on this call.
r2c runs as a complex transform of (x, 0) and c2r rebuilds the Hermitian spectrum (transform.c2r's way):
2× the work of a real-input transform, paid to keep one mechanism for every dynamic length; except where Bluestein
runs in the CPU kernel with more than 8 rows and a static batch dim to pair rows along: there an r2c transforms two
real rows as one complex row (_two_rows_at_once) and a c2r two spectra as one (_two_spectra_at_once), half the work.
On the CPU, where the C++ kernel takes length m (kernels/fft_cpu.py: float32, m ≤ MAX_N), the two length-m
transforms are aotcuda::fft_rows_cpu ops along the dim where it is, the kernel's spectrum the inverse's load-side
`weight`, and the chirp multiplies the signal in the one pointwise copy that pads it to m: an FNet mixer's fft2
over a dynamic seq (max 128, m = 256) took 15× the library as DFT products, 5× now (medians at seq 128 on one
thread; docs/performance.md, session 41). Elsewhere they take
the GEMM form: the CPU form's ATen stages at m = 8192 (seven per transform, three transforms a row) made the Hyena
test's AOTInductor compile take 580 s at a load of 4 (tests/passes/complex_to_real/test_fft_dynamic_length.py).
"""

from __future__ import annotations

import math
import os
import re
import warnings

import torch
from torch.fx import traceback as fx_traceback

from aotcuda.passes.complex_to_real.pair import real_as_pair, shared_table
from aotcuda.passes.complex_to_real.scan import innermost_frame
from aotcuda.passes.complex_to_real.symbols import lowest_value
from aotcuda.passes.complex_to_real.spectral import tables
from aotcuda.passes.complex_to_real.spectral import transform as static
from aotcuda.passes.complex_to_real.spectral.plan import (MAX_DIRECT, bluestein_power_of_two, cpu_bluestein_length,
                                                             plan)

# The largest Dim max a dynamic length may have: its Bluestein length m is ≤ 2²² (a 4 M-point transform).
MAX_DYNAMIC_BOUND = 1 << 21
# The largest Dim max of the direct form that lower() does not warn about. Its table, [2n, 2n] cos/sin in float64
# ([2n, 2·(n//2 + 1)] for a one-sided r2c), is built on every call: the eighth new user's rfft, irfft and fft of one
# dynamic length (max 64), one CPU thread, least of 300 calls on a loaded 2-core machine, eager in brackets: n = 8 34 µs (21), 16 55 (21), 33 152 (24),
# 64 493 (23), about 0.15 ms a transform at 64 and growing as n²; a batch of 8 rows added 25 µs; the same program
# lowered for the static length 64 took 15 µs. Before, only a max above 64 (Bluestein) warned, and the user found
# the 20× by timing.
QUIET_DIRECT_BOUND = 16


def upper_bound(size: torch.SymInt) -> int | None:
    """The largest value the shape env allows for a dynamic size, or None if unbounded."""
    try:
        upper = size.node.shape_env.bound_sympy(size.node.expr).upper
        return int(upper) if upper.is_finite else None
    except Exception:  # an expression the value-range analysis cannot bound
        return None


def refusal(dim: int, size: torch.SymInt) -> str | None:
    """Why a transform of dynamic length `size` along `dim` cannot be rewritten (no usable bound), or None."""
    bound = upper_bound(size)
    if bound is not None and bound <= MAX_DYNAMIC_BOUND:
        return None
    found = "no upper bound" if bound is None else f"an upper bound of {bound}"
    return (f"the transform length along dim {dim} is dynamic ({size}) with {found}; a dynamic length is "
            f"computed at its bound (Bluestein of length ≥ 2·bound − 1): give its torch.export.Dim a max, the "
            f"longest signal the program must take, at which {size} ≤ {MAX_DYNAMIC_BOUND}, or pad the signal to a "
            "static length with n=<that length> and crop the result")


def check_has_points(size, fix: str) -> None:
    """A run-time check, in the graph, that a dynamic transform length whose range reaches 0 is not 0 on this call,
    with eager's words and `fix`. Why: the rule divides by the length (the 1/N and 1/√N normalizations), so a
    length of 0 raised ZeroDivisionError from the rewritten program (an irfft of one bin: 2·(1 − 1) = 0 points),
    where eager refuses with "Invalid number of data points (0) specified". No check where the program's Dim ranges
    exclude 0 (symbols.lowest_value)."""
    if not isinstance(size, torch.SymInt) or lowest_value(size) >= 1:
        return
    # Inductor writes the message into a C++ string literal unescaped ("Expected <message> but received <size>"):
    # ASCII letters, digits and plain punctuation only, the model's path included.
    where = re.sub(r"[^A-Za-z0-9_.,:;()=/ -]", "?", _at_model_line())
    torch.ops.aten._assert_scalar.default(size > 0, f"aotcuda: zero points: the FFT of dynamic length {size}{where} has "
                                                    f"no point on this call (eager: Invalid number of data points (0) "
                                                    f"specified); {fix}")


def transform(x: torch.Tensor, inverse: bool, scale) -> torch.Tensor:
    """The DFT of pair x [..., n, 2] (n dynamic, bounded) along its complex last dim, times `scale`
    (a float or SymFloat)."""
    return transform_along(x, x.dim() - 2, inverse, scale)


def transform_along(x: torch.Tensor, dim: int, inverse: bool, scale, outputs=None) -> torch.Tensor:
    """transform() along complex dim `dim` (≥ 0, not the pair's trailing 2) of pair x, where it is: the CPU
    kernel reads and writes it in place; the other forms move it last and back. Only the first `outputs` bins
    (None: all n) are formed: r2c_along says why they are not cut from all n. None is kept down to the tables: an
    `outputs` equal to n is no proof of all n (fft of a real x gives n bins as a SymInt of its own), and a test of
    identity with n would add a redundant arange and narrow."""
    n = x.shape[dim]
    table = _table_size(outputs)
    bound = upper_bound(n)
    if bound <= MAX_DIRECT:
        if bound > QUIET_DIRECT_BOUND:
            _warn_at_model_line(f"aotcuda: an FFT of dynamic length ({n}, at most {bound}){_at_model_line()} builds "
                                f"its {table} on every call: at n = 64 about 0.15 "
                                "ms a transform on one CPU thread, ~20× eager's FFT, growing as n². Where the program is "
                                "called with few lengths, lower one program per length (a static length's tables are "
                                "constants), or pad the signal to a static length with n=... where zero padding is what "
                                "the model means (docs/ops.md, 'Dynamic dims')")
        matrix = tables.c2c_values(n, inverse, x.device, outputs).to(x.dtype)
        moved = x.movedim(dim, -2)
        out = torch.matmul(moved.flatten(-2), matrix).unflatten(-1, (_count(outputs, n), 2)).movedim(-2, dim)
    else:
        power_of_two = bluestein_power_of_two(bound)  # the kernel's length is no longer
        kernel = _cpu_kernel_takes(x, dim, power_of_two)
        m = cpu_bluestein_length(bound) if kernel else power_of_two
        _warn_at_model_line(f"aotcuda: an FFT of dynamic length ({n}, at most {bound}){_at_model_line()} costs on "
                            f"every call what its longest length would: two length-{m} transforms a row (Bluestein), "
                            "whatever the length of the call; keep the Dim's max near the lengths the program is called "
                            f"with (a max of at most {MAX_DIRECT} costs a product of the call's own length, and a table "
                            "built on every call), or pad the signal to a static length with n=... (docs/ops.md, "
                            "'Dynamic dims')")
        if kernel:
            out = _bluestein_cpu_kernel(x, dim, n, m, inverse, outputs)
        else:
            out = _bluestein(x.movedim(dim, -2), n, m, inverse, outputs).movedim(-2, dim)
    return out if isinstance(scale, float) and scale == 1.0 else out * scale


def _table_size(outputs) -> str:
    """The direct form's DFT table, as its warning names it: all n bins (a complex transform), or a one-sided r2c's
    n//2 + 1 (r2c_along's only other `outputs`)."""
    if outputs is None:
        return "[2n, 2n] DFT table (4·n² cos/sin in float64)"
    return "[2n, 2·(n//2 + 1)] DFT table (about 2·n² cos/sin in float64)"


def _model_frame() -> tuple[str, int, str, str] | None:
    """The model's line of the FFT being rewritten: the innermost user frame of the stack trace of the node whose
    rule runs (the rewrite's interpreter makes its meta current), or None outside a rewrite."""
    return innermost_frame((fx_traceback.get_current_meta() or {}).get("stack_trace"), user_only=True)


def _at_model_line() -> str:
    """" at model.py:LINE, in forward" (the path relative to the working folder where it is inside it), or "". Why:
    a model with several FFTs could not tell which one a warning meant (a new user, nu40)."""
    frame = _model_frame()
    if frame is None:
        return ""
    file, line, function, _ = frame
    relative = os.path.relpath(file)
    return f" at {file if relative.startswith('..') else relative}:{line} (in {function})"


def _warn_at_model_line(message: str) -> None:
    """A UserWarning that Python shows at the model's line of the FFT (as `model.py:LINE: UserWarning: ...` and
    that line), not at this module's; at the rule's caller where no model line is known."""
    frame = _model_frame()
    if frame is None:
        warnings.warn(message, UserWarning, stacklevel=3)
        return
    file, line, _, _ = frame
    warnings.warn_explicit(message, UserWarning, file, line)


def _tables(x: torch.Tensor, n: torch.SymInt, m: int, inverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Bluestein's chirp c [n, 2] and its kernel's spectrum B [m, 2] from n, in the graph (once per trace for
    each (n, m, direction, dtype): the transforms of one program that share a length share them)."""
    key = ("spectral_dynamic", n.node.expr, m, inverse, x.dtype, str(x.device))
    chirp = shared_table((*key, "chirp"), lambda: tables.chirp_values(n, inverse, x.device).to(x.dtype))

    def kernel_spectrum():
        kernel = tables.chirp_kernel_values(n, m, inverse, x.device)  # float64: B is the accuracy's floor
        return static.gemm_transform(kernel, plan(m), False, 1.0 / m).to(x.dtype)
    return chirp, shared_table((*key, "kernel_spectrum"), kernel_spectrum)


def _along(table: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    """A [L, 2] table viewed to broadcast along complex dim `dim` of pair x: [L, 1, …, 1, 2]."""
    return table.reshape(table.shape[0], *[1] * (x.dim() - 2 - dim), 2)


def _cpu_kernel_takes(x: torch.Tensor, dim: int, m: int) -> bool:
    """Whether Bluestein's length-m transforms of pair x along `dim` run as aotcuda::fft_rows_cpu (transform.py's
    cpu_kernel_form, asked of x's first point along `dim`: x's device, dtype and dims with a static length; the
    view is dead code the rewrite drops)."""
    return static.cpu_kernel_form(x.narrow(dim, 0, 1), dim, m, m, "c2c")


def _count(outputs, n):
    """How many bins `outputs` asks for: n where it is None (all of them)."""
    return n if outputs is None else outputs


def _first(chirp: torch.Tensor, outputs) -> torch.Tensor:
    """The chirp's first `outputs` points: the chirp itself for all n (None), with no slice in the graph."""
    return chirp if outputs is None else chirp.narrow(0, 0, outputs)


def _bluestein_cpu_kernel(x: torch.Tensor, dim: int, n: torch.SymInt, m: int, inverse: bool,
                          outputs) -> torch.Tensor:
    """X = c·IDFT_m(DFT_m(c·x) · B) along `dim` of pair x, where it is, its first `outputs` bins: c·x zero-padded
    to m in one pointwise copy, both length-m transforms aotcuda::fft_rows_cpu kernels, B multiplied as the inverse
    loads its points."""
    chirp, spectrum_of_kernel = _tables(x, n, m, inverse)
    pad = [0, 0] * (x.dim() - 1 - dim) + [0, m - n]
    padded = torch.constant_pad_nd(static.cmul(x, _along(chirp, x, dim)), pad)
    spectrum = torch.ops.aotcuda.fft_rows_cpu(padded, dim, m, m, "c2c", False, 1.0)
    convolved = torch.ops.aotcuda.fft_rows_cpu(spectrum, dim, m, m, "c2c", True, 1.0,
                                               weight=_along(spectrum_of_kernel, spectrum, dim))
    return static.cmul(convolved.narrow(dim, 0, _count(outputs, n)), _along(_first(chirp, outputs), x, dim))


def _bluestein(x: torch.Tensor, n: torch.SymInt, m: int, inverse: bool, outputs) -> torch.Tensor:
    """X = c·IDFT_m(DFT_m(c·x) · B) as DFT products of plan(m), along the complex last dim of x, its first
    `outputs` bins."""
    padded = plan(m)
    chirp, spectrum_of_kernel = _tables(x, n, m, inverse)
    a = torch.constant_pad_nd(static.cmul(x, chirp), [0, 0, 0, m - n])
    spectrum = static.cmul(static.gemm_transform(a, padded, False, 1.0), spectrum_of_kernel)
    return static.cmul(static.gemm_transform(spectrum, padded, True, 1.0).narrow(-2, 0, _count(outputs, n)),
                       _first(chirp, outputs))


def r2c_along(x: torch.Tensor, dim: int, bins, scale) -> torch.Tensor:
    """The first `bins` DFT bins of real x along its dim `dim` (≥ 0, length n dynamic), where it is: a pair with
    `bins` at `dim`; `bins` is a one-sided r2c's n//2 + 1, or None for all n (a two-sided one's). Where Bluestein
    runs in the CPU kernel, two real rows as one complex row (_two_rows_at_once).

    The bins are formed as they are (a [2n, 2·bins] table; Bluestein's length-m result cut to bins), not cut from
    all n bins: that cut is a view whose outer strides are 2n, and make_fx's metadata asks whether it is contiguous
    (2n == 2·(n//2 + 1)), a guard that holds at the example length and not at n = 2, so the rewritten program
    refused n = 2 ("Guard failed: 2*n != 2 + 2*(n//2)") with a Dim min of 2. The cut from Bluestein's static m is
    the same question, false at every n ≤ its bound < m."""
    if _packs_two_rows(x, dim):
        return _two_rows_at_once(x, dim, scale, bins)
    return transform_along(real_as_pair(x).t, dim, False, scale, bins)


def _packs_two_rows(x: torch.Tensor, dim: int) -> bool:
    """Whether r2c_along runs two real rows as one complex row: where transform_along would run Bluestein in the
    CPU kernel (a bound above MAX_DIRECT; the direct form and the other devices' forms are left as they were) and
    x has a batch dim of static size above 1 to pair rows along (_pairing_dim) and more than one kernel block of
    rows (_fills_more_blocks)."""
    bound = upper_bound(x.shape[dim])
    if bound is None or bound <= MAX_DIRECT or _pairing_dim(x, dim) is None or not _fills_more_blocks(x, dim):
        return False
    return _cpu_kernel_takes(real_as_pair(x).t, dim, bluestein_power_of_two(bound))


def _fills_more_blocks(x: torch.Tensor, dim: int) -> bool:
    """Whether x's rows, paired, can fill fewer of the kernel's blocks (fft_cpu.ROWS = 8 rows, one AVX2 vector: a
    block of fewer rows costs a whole one): more than ROWS rows, or a dynamic count (unknown: pairing gains where it
    is large). Why: at ROWS rows or fewer the kernels cost one block paired or not, and pairing saves only the
    pointwise chirp products, which the split after it spends again: paired / unpaired time measured 1.03 and 1.37
    at 2 rows, 0.94 and 0.82 at 4, 0.68–2.55 at 8 over two runs (no steady gain), against 0.51–0.87 from 64 rows on
    (n = 100–8192, one thread, the loaded 2-core machine; docs/performance.md, fftrows42: 'two real rows as one
    complex row')."""
    from aotcuda.kernels.fft_cpu import ROWS

    sizes = [x.shape[d] for d in range(x.dim()) if d != dim]
    return not all(isinstance(s, int) for s in sizes) or math.prod(sizes) > ROWS


def _pairing_dim(x: torch.Tensor, dim: int) -> int | None:
    """The batch dim of x whose rows are taken two at a time: the last of static even size (no padding), else the
    last of static size above 1 (padded by one row), else None. Not a dynamic one: its half, (rows + 1) // 2, is a
    size the shape env cannot tell from 1, and every contiguity check of a tensor of that size added the guard
    `(rows + 1) // 2 != 1`, which a call with one or two rows failed (found tracing [rows, n] with Dim rows)."""
    static = [d for d in range(x.dim()) if d != dim and isinstance(x.shape[d], int) and x.shape[d] > 1]
    even = [d for d in static if x.shape[d] % 2 == 0]
    return (even or static or [None])[-1]


def _in_pairs(t: torch.Tensor, d: int) -> torch.Tensor:
    """t with its rows along dim d (static) taken two at a time: [..., (rows + 1) // 2, 2, ...] at d, an odd count
    padded by one zero row (_pairing_dim's choice)."""
    rows = t.shape[d]
    if rows % 2:
        t = torch.constant_pad_nd(t, [0, 0] * (t.dim() - 1 - d) + [0, 1])
    return t.unflatten(d, ((rows + 1) // 2, 2))


def _two_rows_at_once(x: torch.Tensor, dim: int, scale, bins) -> torch.Tensor:
    """The first `bins` bins (all n where None) of transform_along of real x as a pair (x, 0), from half the complex
    transforms: rows x1, x2 (neighbours along a batch dim) as one complex row z = x1 + i·x2, whose DFT Z splits by
    symmetry into X1[k] = (Z[k] + conj Z[−k])/2 and X2[k] = (Z[k] − conj Z[−k])/2i (index mod n; the kernel's
    `packed` for an odd static length, fft_cpu.py).
    Why: a dynamic length's Bluestein runs two length-m transforms of (x, 0) a row, m ≥ 2·bound − 1, and their
    chirp multiplies, where the library runs one real transform of the call's length; packing halves all of that
    (docs/performance.md, fftrows42: 'two real rows as one complex row')."""
    d = _pairing_dim(x, dim)
    rows = x.shape[d]
    z = _in_pairs(x, d).movedim(d + 1, -1)  # a pair view: row 2j the real part, row 2j + 1 the imaginary
    big_z = transform_along(z, dim, False, scale)  # z keeps x's dims: `dim` is where it was
    mirrored = big_z.flip(dim).roll(1, dim)  # Z[(n − k) mod n]
    # The bins cut from the parts (views with a last stride of 2, never contiguous), not from the pair: a cut of the
    # pair asks whether 2n == 2·bins (r2c_along's docstring), a guard no call at n = 2 passes.
    parts = (big_z[..., 0], big_z[..., 1], mirrored[..., 0], mirrored[..., 1])
    re, im, mre, mim = parts if bins is None else (part.narrow(dim, 0, bins) for part in parts)
    first = torch.stack([re + mre, im - mim], -1) * 0.5  # (Z + conj Z[−k]) / 2
    second = torch.stack([im + mim, mre - re], -1) * 0.5  # (Z − conj Z[−k]) / 2i
    both = torch.stack([first, second], d + 1).flatten(d, d + 1)
    return both.narrow(d, 0, rows)


def c2r(x: torch.Tensor, n: torch.SymInt, scale) -> torch.Tensor:
    """The real inverse DFT of dynamic length n from the Hermitian half x [..., bins, 2]. Where Bluestein runs in the
    CPU kernel, two spectra as one complex row (_two_spectra_at_once)."""
    spectrum = static.hermitian_spectrum(x, n)
    if _packs_two_rows(spectrum[..., 0], spectrum.dim() - 2):
        return _two_spectra_at_once(spectrum, scale)
    return transform(spectrum, True, scale)[..., 0]


def _two_spectra_at_once(spectrum: torch.Tensor, scale) -> torch.Tensor:
    """transform(spectrum, True, scale)[..., 0] for Hermitian spectra [..., n, 2] from half the complex transforms:
    neighbours X1, X2 along a batch dim as one row X1 + i·X2, whose inverse is x1 + i·x2 (both real); the real and
    imaginary parts go back to the rows they came from (r2c_along's pairing, mirrored: fft_cpu.py's `packed` c2r)."""
    dim = spectrum.dim() - 2
    n = spectrum.shape[dim]
    k = torch.arange(n, device=spectrum.device)
    # A c2r drops the imaginary parts of bins 0 and n/2 (its own bins' conjugates); alone, the real part of the
    # inverse drops what they add, but in X1 + i·X2 they would land in the other row: zeroed first.
    kept = torch.where((k == 0) | (2 * k == n), 0.0, 1.0).to(spectrum.dtype)
    spectrum = torch.stack([spectrum[..., 0], spectrum[..., 1] * kept], -1)
    d = _pairing_dim(spectrum[..., 0], dim)
    rows = spectrum.shape[d]
    pairs = _in_pairs(spectrum, d)
    first, second = pairs.select(d + 1, 0), pairs.select(d + 1, 1)
    joined = torch.stack([first[..., 0] - second[..., 1], first[..., 1] + second[..., 0]], -1)  # X1 + i·X2
    signals = transform(joined, True, scale)  # [..., half at d, ..., n, 2]: (x1, x2) in each pair
    return signals.movedim(-1, d + 1).flatten(d, d + 1).narrow(d, 0, rows)
