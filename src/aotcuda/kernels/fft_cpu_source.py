"""The C++ of ``aotcuda::fft_rows_cpu`` (kernels/fft_cpu.py has the op and the method): ``kernel_body`` writes
one transform's kernel body over the pointers, sizes and strides that kernels/fft_cpu_template.py hands it
(or a test's or a benchmark's standalone build), ``kernel_source`` its parts (tables, loads, stages, stores).

Stockham DIF stages (Van Loan 1992, §1.7; Swarztrauber 1984) on planes [n][8] of float32, 8 rows a vector
(GCC/Clang vector types: Inductor builds with -fno-tree-loop-vectorize), the loads and stores as 8×8 AVX2
register transposes where the rows are float32 and dense along the dim (scalar code elsewhere), twiddles
static tables computed in float64 and rounded once to float32.
"""

from __future__ import annotations

import math

import torch

from aotcuda.kernels.fft_cpu import (ROWS, bluestein_length, complex_length, four_step, four_step_planes, packed,
                                     radices, stage_length)
from aotcuda.kernels.fft_rows import direction

def _f(value: float) -> str:
    """A float32 C++ literal of a float64 value (rounded once, by the compiler)."""
    return f"{value:.17e}f" if math.isfinite(value) else "0.0f"


def _table(name: str, values: list[float]) -> str:
    body = ", ".join(_f(v) for v in values)
    return f"alignas(64) static const float {name}[{max(len(values), 1)}] = {{{body}}};"


def _unit(k: int, length: int, sign: float) -> tuple[float, float]:
    """exp(sign·2πi·k/length) in float64, the angle reduced first so that the table is exact to float64."""
    k %= length
    theta = 2 * math.pi * k / length
    return math.cos(theta), sign * math.sin(theta)


def _butterfly(r: int, inverse: bool, vt: str = "vf8") -> list[str]:
    """C++ statements: y{k}r, y{k}i = the r-point DFT of a{t}r, a{t}i, all of vector type vt (vf8: 8 rows;
    stockham._butterfly's math: radix 2 and 4 by hand, an odd r by its symmetry)."""
    return [line.replace("const vf8 ", f"const {vt} ") for line in _butterfly8(r, inverse)]


def _butterfly8(r: int, inverse: bool) -> list[str]:
    if r == 2:
        return ["const vf8 y0r = a0r + a1r, y0i = a0i + a1i, y1r = a0r - a1r, y1i = a0i - a1i;"]
    if r == 4:
        e = "const vf8 er = -di, ei = dr;" if inverse else "const vf8 er = di, ei = -dr;"
        return ["const vf8 sr = a0r + a2r, si = a0i + a2i, tr = a1r + a3r, ti = a1i + a3i;",
                "const vf8 cr = a0r - a2r, ci = a0i - a2i, dr = a1r - a3r, di = a1i - a3i;", e,
                "const vf8 y0r = sr + tr, y0i = si + ti, y2r = sr - tr, y2i = si - ti;",
                "const vf8 y1r = cr + er, y1i = ci + ei, y3r = cr - er, y3i = ci - ei;"]
    sign = 1.0 if inverse else -1.0
    half = r // 2
    lines = []
    for t in range(1, half + 1):
        lines.append(f"const vf8 p{t}r = a{t}r + a{r - t}r, p{t}i = a{t}i + a{r - t}i, "
                     f"q{t}r = a{t}r - a{r - t}r, q{t}i = a{t}i - a{r - t}i;")
    lines.append("const vf8 y0r = a0r + " + " + ".join(f"p{t}r" for t in range(1, half + 1))
                 + ", y0i = a0i + " + " + ".join(f"p{t}i" for t in range(1, half + 1)) + ";")
    for k in range(1, half + 1):
        pr, pi, qr, qi = ["a0r"], ["a0i"], [], []
        for t in range(1, half + 1):
            theta = 2 * math.pi * ((t * k) % r) / r
            c, s = math.cos(theta), sign * math.sin(theta)
            pr.append(f"{_f(c)} * p{t}r")
            pi.append(f"{_f(c)} * p{t}i")
            qr.append(f"{_f(-s)} * q{t}i")  # i·s·q
            qi.append(f"{_f(s)} * q{t}r")
        lines.append(f"const vf8 P{k}r = {' + '.join(pr)}, P{k}i = {' + '.join(pi)};")
        lines.append(f"const vf8 Q{k}r = {' + '.join(qr)}, Q{k}i = {' + '.join(qi)};")
        lines.append(f"const vf8 y{k}r = P{k}r + Q{k}r, y{k}i = P{k}i + Q{k}i, "
                     f"y{r - k}r = P{k}r - Q{k}r, y{r - k}i = P{k}i - Q{k}i;")
    return lines


def _butterfly_loop(r: int, m: int, sv: int, inverse: bool, vt: str, width: int, pre: bool = False) -> list[str]:
    """The inner loop of a stage over the sv floats of one (t2, t1): loads (times p{t}r + i·p{t}i where
    `pre`), the butterfly, twiddles, stores, `width` floats (vector type vt) a step; no loop vectorizer
    needed."""
    code = [f"  for (int64_t e = 0; e < {sv}; e += {width}) {{"]
    if pre:
        for t in range(r):
            code.append(f"    const {vt} u{t}r = aotcuda_fft::ldv<{vt}>(x{t}r + e), u{t}i = aotcuda_fft::ldv<{vt}>(x{t}i + e);")
            code.append(f"    const {vt} a{t}r = u{t}r * p{t}r - u{t}i * p{t}i, a{t}i = u{t}r * p{t}i + u{t}i * p{t}r;")
    else:
        code.append("    " + " ".join(f"const {vt} a{t}r = aotcuda_fft::ldv<{vt}>(x{t}r + e), "
                                      f"a{t}i = aotcuda_fft::ldv<{vt}>(x{t}i + e);" for t in range(r)))
    code.extend("    " + line for line in _butterfly(r, inverse, vt))
    code.append("    st(z0r + e, y0r); st(z0i + e, y0i);")
    for k in range(1, r):
        if m > 1:
            code.append(f"    st(z{k}r + e, y{k}r * w{k}r - y{k}i * w{k}i); st(z{k}i + e, y{k}r * w{k}i + y{k}i * w{k}r);")
        else:
            code.append(f"    st(z{k}r + e, y{k}r); st(z{k}i + e, y{k}i);")
    code.append("  }")
    return code


def _stage_code(nc: int, inverse: bool, lanes: int, src: tuple[str, str], bufs: tuple, prefix: str,
                last: tuple[str, str] | None = None, src_stride: int | None = None, pre: str | None = None
                ) -> tuple[list[str], list[str], tuple[str, str]]:
    """(static tables, statements, the plane pair holding the result) of the Stockham stages of an nc-point
    DFT on planes [nc][lanes]: stage 0 reads the pair `src` (its points src_stride floats apart where given,
    times the complex factors pre[2·t], pre[2·t + 1] where `pre` names them: lanes = ROWS), stage i writes
    bufs[i % 2] (and stage i + 1 reads it), the last stage `last` where given; twiddle tables named prefix0,
    prefix1, …"""
    sign = 1.0 if inverse else -1.0
    tables, code = [], []
    length, s, (sr, si) = nc, 1, src
    stages = radices(nc)
    for i, r in enumerate(stages):
        m = length // r
        dr, di = last if last is not None and i == len(stages) - 1 else bufs[i % 2]
        if m > 1:
            values = []
            for t2 in range(m):
                for k in range(1, r):
                    values.extend(_unit(t2 * k, length, sign))
            tables.append(_table(f"{prefix}{i}", values))
        sv = s * lanes
        code.append(f"// stage {i}: radix {r}, [{length}, {s}] -> [{m}, {r * s}]")
        code.append(f"for (int64_t t2 = 0; t2 < {m}; ++t2) {{")
        if m > 1:
            code.append(f"  const float* w = {prefix}{i} + t2 * {2 * (r - 1)};")
            for k in range(1, r):
                code.append(f"  const float w{k}r = w[{2 * (k - 1)}], w{k}i = w[{2 * (k - 1) + 1}];")
        stride = src_stride if i == 0 and src_stride is not None else sv
        for t1 in range(r):
            code.append(f"  const float* __restrict__ x{t1}r = {sr} + ({t1 * m} + t2) * {stride};")
            code.append(f"  const float* __restrict__ x{t1}i = {si} + ({t1 * m} + t2) * {stride};")
            if i == 0 and pre is not None:
                code.append(f"  const float p{t1}r = {pre}[2 * ({t1 * m} + t2)], p{t1}i = {pre}[2 * ({t1 * m} + t2) + 1];")
        scaled = i == 0 and pre is not None
        assert not scaled or lanes == ROWS
        for k in range(r):
            code.append(f"  float* __restrict__ z{k}r = {dr} + (t2 * {r} + {k}) * {sv};")
            code.append(f"  float* __restrict__ z{k}i = {di} + (t2 * {r} + {k}) * {sv};")
        if sv % 16 == 0:  # 16 floats of one twiddle: a 512-bit register where the CPU has one
            code.append("#if defined(__AVX512F__)")
            code.extend(_butterfly_loop(r, m, sv, inverse, "vf16", 16, scaled))
            code.append("#else")
            code.extend(_butterfly_loop(r, m, sv, inverse, "vf8", 8, scaled))
            code.append("#endif")
        else:
            code.extend(_butterfly_loop(r, m, sv, inverse, "vf8", 8, scaled))
        code.append("}")
        length, s, (sr, si) = m, r * s, (dr, di)
    return tables, code, (sr, si)


def _stages(nc: int, inverse: bool, natural: bool = True) -> tuple[list[str], list[str], bool, object]:
    """(static tables, the statements of the nc-point DFT of planes (ar, ai), whether the result ends in the
    second plane pair (br, bi), at: k ↦ the C++ index of the point that holds X[k]): the Stockham stages over
    the whole block (X[k] at k), or the four-step split where fft_cpu.four_step gives one (_four_step: X[k] at
    k where `natural`, else where its rows leave it, saving a pass for a caller that reads X[k] one k at a
    time anyway)."""
    split = four_step(nc)
    if split is not None:
        return _four_step(nc, *split, inverse, natural)
    tables, code, result = _stage_code(nc, inverse, ROWS, ("ar", "ai"), (("br", "bi"), ("ar", "ai")), "tw")
    return tables, code, result[0] == "br", lambda k: k


def _four_step(nc: int, m1: int, m2: int, inverse: bool, natural: bool) -> tuple[list[str], list[str], bool, object]:
    """_stages' result by the four-step split (Bailey 1990; Van Loan 1992, §3.3) nc = m1·m2, each small DFT
    in L1: X[k1 + m1·k2] = Σ_j2 W_m2^(j2·k2) · W_nc^(j2·k1) · Σ_j1 W_m1^(j1·k1) · x[j1·m2 + j2].
    Columns: two adjacent columns j2 at a time (16 floats a point: whole cache lines) read from (ar, ai) by
    their first stage, their m1-point stages in the thread's small planes c0, c1, written to (br, bi) at
    k1·P + j2, rows P = m2 + 2 points apart (a stride of m2 points, a power of two, would put a column's
    points in one L1 set). Rows: row k1 of (br, bi) times W_nc^(j2·k1) as its first stage loads it, its
    m2-point stages, back in place: X[k1 + m1·k2] at k1·P + k2. Where `natural`, a pass copies X[k] to
    (ar, ai) at k. Two or three passes over the block's planes where the stages over the whole block make
    one a stage, each in L2 past 256 points (docs/performance.md, branch cpu4)."""
    V, sign, P = ROWS, (1.0 if inverse else -1.0), m2 + 2
    G = 2 if m2 % 2 == 0 else 1
    lanes = V * G
    c_tables, c_code, (cr, ci) = _stage_code(m1, inverse, lanes, ("colr", "coli"), (("c0r", "c0i"), ("c1r", "c1i")),
                                             "tc", src_stride=m2 * V)
    r_tables, r_code, _ = _stage_code(m2, inverse, V, ("rowr", "rowi"), (("c0r", "c0i"), ("c1r", "c1i")), "tr",
                                      last=("rowr", "rowi"), pre="pre")
    values = []
    for k1 in range(m1):
        for j2 in range(m2):
            values.extend(_unit(j2 * k1, nc, sign))
    tables = c_tables + r_tables + [_table("t4", values)]
    code = [f"// four-step: {nc} = {m1} x {m2}; columns of {m1} points, {G} at a time",
            f"for (int64_t j2 = 0; j2 < {m2}; j2 += {G}) {{",
            f"  const float* const colr = ar + j2 * {V}; const float* const coli = ai + j2 * {V};",
            *["  " + line for line in c_code],
            f"  for (int64_t k1 = 0; k1 < {m1}; ++k1) {{",
            f"    float* __restrict__ pr = br + (k1 * {P} + j2) * {V}; float* __restrict__ pi = bi + (k1 * {P} + j2) * {V};",
            *[f"    st(pr + {e}, ld({cr} + k1 * {lanes} + {e})); st(pi + {e}, ld({ci} + k1 * {lanes} + {e}));"
              for e in range(0, lanes, 8)],
            "  }",
            "}",
             f"// rows of {m2} points, in place",
             f"for (int64_t k1 = 0; k1 < {m1}; ++k1) {{",
             f"  float* const rowr = br + k1 * {P * V}; float* const rowi = bi + k1 * {P * V};",
             f"  const float* const pre = t4 + k1 * {2 * m2};  // W_nc^(j2·k1), as stage 0 loads point j2",
             *["  " + line for line in r_code],
             "}",
             ]
    if not natural:
        return tables, code, True, lambda k: f"(({k}) % {m1} * {P} + ({k}) / {m1})"
    code += ["// natural order: X[k1 + m1·k2] from k1·P + k2",
             f"for (int64_t k2 = 0; k2 < {m2}; ++k2) {{",
             f"  for (int64_t k1 = 0; k1 < {m1}; ++k1) {{",
             f"    st(ar + (k2 * {m1} + k1) * {V}, ld(br + (k1 * {P} + k2) * {V})); "
             f"st(ai + (k2 * {m1} + k1) * {V}, ld(bi + (k1 * {P} + k2) * {V}));",
             "  }",
             "}"]
    return tables, code, False, lambda k: k


def _bluestein(nc: int, inverse: bool) -> tuple[list[str], list[str], bool, object]:
    """_stages' result for a complex length nc with a prime factor above 13, by Bluestein's chirp-z
    transform over m = bluestein_length(nc) points (the same math as the CUDA kernel's, fft_plan.bluestein):
    the loaded points (ar, ai; t < nc) times the chirp c[t] = exp(∓πi·t²/nc) (t² reduced mod 2·nc exactly),
    zero to m, the forward m-point stages, times the spectrum DFT_m(b)/m of b[j] = conj c[|j|] (|j| < nc,
    wrapped mod m) and conjugated, the same forward stages again (conj∘DFT∘conj is m times the inverse),
    then X[k] = c[k]·conj(that) for k < nc, at k of the pair the stages leave it in (Stockham) or of (ar, ai)
    (the four-step split, whose X[k] lie elsewhere: the spectrum's and chirp's passes read them where they
    are). Tables in float64, rounded once."""
    V, m = ROWS, bluestein_length(nc)
    sign = 1.0 if inverse else -1.0
    tables, stage_code, flip, at = _stages(m, False, natural=False)
    rr, ri = ("br", "bi") if flip else ("ar", "ai")
    dr, di = (rr, ri) if at("k") == "k" else ("ar", "ai")  # where X[k] goes: in place, or to natural order
    chirp = [_unit(t * t, 2 * nc, sign) for t in range(nc)]
    j = torch.arange(m, dtype=torch.int64)
    distance = torch.where(j < nc, j, m - j)
    angle = ((distance * distance) % (2 * nc)).double() * (-sign * math.pi / nc)
    kernel = torch.where((j < nc) | (j > m - nc), torch.polar(torch.ones(m, dtype=torch.float64), angle), 0)
    spectrum = torch.view_as_real(torch.fft.fft(kernel) / m).reshape(-1).tolist()
    tables.append(_table("chirp", [v for c in chirp for v in c]))
    tables.append(_table("spectrum", spectrum))
    code = [f"// Bluestein: {nc} points as a circular convolution of {m}",
            f"for (int64_t t = 0; t < {nc}; ++t) {{",
            "  const float c = chirp[2 * t], s = chirp[2 * t + 1];",
            f"  const vf8 xr = ld(ar + t * {V}), xi = ld(ai + t * {V});",
            f"  st(ar + t * {V}, xr * c - xi * s); st(ai + t * {V}, xr * s + xi * c);",
            "}",
            f"for (int64_t e = {nc * V}; e < {m * V}; ++e) {{ ar[e] = 0.0f; ai[e] = 0.0f; }}",
            "for (int pass = 0; pass < 2; ++pass) {",
            *["  " + line for line in stage_code],
            "  if (pass == 0) {  // times the spectrum, conjugated: the next pass is the inverse DFT",
            f"    for (int64_t k = 0; k < {m}; ++k) {{",
            "      const float c = spectrum[2 * k], s = spectrum[2 * k + 1];",
            f"      const vf8 yr = ld({rr} + {at('k')} * {V}), yi = ld({ri} + {at('k')} * {V});",
            f"      st(ar + k * {V}, yr * c - yi * s); st(ai + k * {V}, -(yr * s + yi * c));",
            "    }",
            "  }",
            "}",
            f"for (int64_t k = 0; k < {nc}; ++k) {{  // times the chirp, conjugated back",
            "  const float c = chirp[2 * k], s = chirp[2 * k + 1];",
            f"  const vf8 zr = ld({rr} + {at('k')} * {V}), zi = ld({ri} + {at('k')} * {V});",
            f"  st({dr} + k * {V}, zr * c + zi * s); st({di} + k * {V}, zr * s - zi * c);",
            "}"]
    return tables, code, dr == "br", lambda k: k


def _copy_in(lines: list, plane_r: str, plane_i: str | None, count: int, t: str, p: str, fast: bool,
             scale: str = "1.0f") -> None:
    """Statements that load points q < count of each row of the block, times `scale`, into plane_r (and
    plane_i: a pair, its parts `p` apart) at [q][v], the transformed dim's stride `t`: 8×8 AVX2 transposes
    where the rows are float32 and dense along the dim (fast), one value at a time for the rest."""
    V = ROWS
    if count <= 0:
        return
    lines.append("{")
    lines.append("  int64_t done = 0;")
    if fast and V == 8 and count >= 8:
        lines.append("#if defined(__AVX2__)")
        lines.append("  const float* rows8[8]; for (int v = 0; v < 8; ++v) rows8[v] = reinterpret_cast<const float*>(X) + xo[v];")
        if plane_i is None:
            lines.append(f"  if (nv == 8 && ({t}) == 1) {{")
            lines.append(f"    for (; done + 8 <= {count}; done += 8) aotcuda_fft::load_real(rows8, done, {plane_r} + done * 8, {scale});")
        else:
            lines.append(f"  if (nv == 8 && ({t}) == 2 && ({p}) == 1) {{  // interleaved pairs")
            lines.append(f"    for (; done + 8 <= {count}; done += 8) "
                         f"aotcuda_fft::load_pair(rows8, done, {plane_r} + done * 8, {plane_i} + done * 8, {scale});")
            lines.append(f"  }} else if (nv == 8 && ({t}) == 1) {{  // planes: re, then im {p} floats on")
            lines.append("    const float* imag8[8]; for (int v = 0; v < 8; ++v) imag8[v] = rows8[v] + (" + p + ");")
            lines.append(f"    for (; done + 8 <= {count}; done += 8) {{ aotcuda_fft::load_real(rows8, done, {plane_r} + done * 8, {scale}); "
                         f"aotcuda_fft::load_real(imag8, done, {plane_i} + done * 8, {scale}); }}")
        lines.append("  }")
        lines.append("#endif")
    lines.append("  for (int64_t v = 0; v < nv; ++v) {")
    lines.append("    const auto* __restrict__ row = X + xo[v];")
    lines.append(f"    for (int64_t q = done; q < {count}; ++q) {{")
    lines.append(f"      {plane_r}[q * {V} + v] = static_cast<float>(row[q * ({t})]) * {scale};")
    if plane_i is not None:
        lines.append(f"      {plane_i}[q * {V} + v] = static_cast<float>(row[q * ({t}) + ({p})]) * {scale};")
    lines.append("    }")
    lines.append("  }")
    lines.append("}")


def _copy_out(lines: list, plane_r: str, plane_i: str | None, count: int, t: str, p: str, scale: str,
              fast: bool, first: int = 0, at=None) -> None:
    """Statements that store points first ≤ q < count of planes [q][v] (times `scale`; point q at at(q) where
    given: _stages' order) to each row of the block (pair: plane_i at `p` past plane_r), the output dim's
    stride `t`: AVX2 transposes where fast (8 points gathered into L1 first where `at`)."""
    V = ROWS
    if count <= first:
        return
    lines.append("{")
    lines.append(f"  int64_t done = {first};")
    if at is not None:  # the 8 points of a transpose into gr, gi first
        lines.append("  alignas(64) float gr[64], gi[64]; (void)gr; (void)gi;")
        gather = (f"for (int64_t i = 0; i < 8; ++i) {{ st(gr + 8 * i, ld({plane_r} + {at('done + i')} * 8));"
                  + (f" st(gi + 8 * i, ld({plane_i} + {at('done + i')} * 8));" if plane_i else "") + " } ")
        point = at
        src_r, src_i = "gr", "gi"
    else:
        gather, point = "", (lambda q: q)
        src_r, src_i = f"{plane_r} + done * 8", f"{plane_i} + done * 8"
    if fast and V == 8 and count - first >= 8:
        lines.append("#if defined(__AVX2__)")
        lines.append("  float* rows8[8]; for (int v = 0; v < 8; ++v) rows8[v] = reinterpret_cast<float*>(Y) + oo[v];")
        if plane_i is None:
            lines.append(f"  if (nv == 8 && ({t}) == 1) {{")
            lines.append(f"    for (; done + 8 <= {count}; done += 8) {{ {gather}"
                         f"aotcuda_fft::store_real(rows8, done, {src_r}, {scale}); }}")
        else:
            lines.append(f"  if (nv == 8 && ({t}) == 2 && ({p}) == 1) {{  // interleaved pairs")
            lines.append(f"    for (; done + 8 <= {count}; done += 8) {{ {gather}"
                         f"aotcuda_fft::store_pair(rows8, done, {src_r}, {src_i}, {scale}); }}")
            lines.append(f"  }} else if (nv == 8 && ({t}) == 1) {{  // planes: re, then im {p} floats on")
            lines.append("    float* imag8[8]; for (int v = 0; v < 8; ++v) imag8[v] = rows8[v] + (" + p + ");")
            lines.append(f"    for (; done + 8 <= {count}; done += 8) {{ {gather}"
                         f"aotcuda_fft::store_real(rows8, done, {src_r}, {scale}); "
                         f"aotcuda_fft::store_real(imag8, done, {src_i}, {scale}); }}")
        lines.append("  }")
        lines.append("#endif")
    lines.append("  for (int64_t v = 0; v < nv; ++v) {")
    lines.append("    auto* __restrict__ row = Y + oo[v];")
    lines.append(f"    for (int64_t q = done; q < {count}; ++q) {{")
    lines.append(f"      row[q * ({t})] = static_cast<YT_T>({plane_r}[{point('q')} * {V} + v] * {scale});")
    if plane_i is not None:
        lines.append(f"      row[q * ({t}) + ({p})] = static_cast<YT_T>({plane_i}[{point('q')} * {V} + v] * {scale});")
    lines.append("    }")
    lines.append("  }")
    lines.append("}")


def _upper_rows(lines: list, emit) -> None:
    """emit(lines)'s statements for the block's upper 8 rows (a PACKED block of 16: xo, oo, nv theirs)."""
    lines.append("if (nv_hi > 0) {")
    lines.append("  const int64_t* const xo = xo_hi; const int64_t* const oo = oo_hi; const int64_t nv = nv_hi;")
    lines.append("  (void)xo; (void)oo;")
    inner = []
    emit(inner)
    lines.extend("  " + line for line in inner)
    lines.append("}")


def _windowed(lines: list, plane: str, count: int, sample: str, scale: str) -> None:
    """plane[q][v] *= window[sample(q)] · scale for q < count: stft's window (and the transform's scale),
    after the loads, in L1."""
    V = ROWS
    lines.append(f"for (int64_t q = 0; q < {count}; ++q) {{")
    lines.append(f"  const float w = static_cast<float>(WIN[({sample}) * WS]) * {scale};")
    lines.append(f"  st({plane} + q * {V}, ld({plane} + q * {V}) * w);")
    lines.append("}")


def _split_point(k: str, m: int, rr: str, ri: str, at) -> list[str]:
    """Statements defining vf8 Xr, Xi = bin k ≤ m of an even r2c from the n/2-point Z in (rr, ri) at at(·):
    X[k] = E[k] + W_n^k·O[k], E = (Z[k] + conj Z[m−k])/2, O = (Z[k] − conj Z[m−k])/2i (stockham.r2c), the
    halves taken first (Z near float32's largest values: their sum would overflow)."""
    V = ROWS
    return [f"const int64_t ka = ({k}) == {m} ? 0 : ({k}), kb = ({k}) == 0 ? 0 : {m} - ({k});",
            f"const float c = split[2 * ({k})], s = split[2 * ({k}) + 1];",
            f"const vf8 Zr = ld({rr} + {at('ka')} * {V}) * 0.5f, Zi = ld({ri} + {at('ka')} * {V}) * 0.5f;",
            f"const vf8 Mr = ld({rr} + {at('kb')} * {V}) * 0.5f, Mi = ld({ri} + {at('kb')} * {V}) * 0.5f;",
            "const vf8 e_r = Zr + Mr, e_i = Zi - Mi, o_r = Zi + Mi, o_i = Mr - Zr;",
            "const vf8 Xr = e_r + c * o_r - s * o_i, Xi = e_i + c * o_i + s * o_r;"]


def _split_store(lines: list, point, count: int) -> None:
    """An even r2c's bins k < count computed (point(k): _split_point) 8 at a time into L1 and stored to the
    block's rows by one 8×8 transpose: one pass over the planes where the split and _copy_out made two
    (docs/performance.md, branch fuse). Where the rows are float32 and dense along the dim (AVX2, 8 rows);
    sets split_done, else leaves the block to the two passes."""
    lines += ["#if defined(__AVX2__)",
              "if (nv == 8 && (((YT) == 2 && (YP) == 1) || (YT) == 1)) {",
              "  float* rows8[8]; float* imag8[8];",
              "  for (int v = 0; v < 8; ++v) { rows8[v] = reinterpret_cast<float*>(Y) + oo[v]; imag8[v] = rows8[v] + (YP); }",
              "  float* const* const im8 = ((YT) == 2 && (YP) == 1) ? nullptr : imag8;  // null: interleaved pairs",
              "  alignas(64) float gr[64], gi[64];",
              "  int64_t k0 = 0;",
              f"  for (; k0 + 8 <= {count}; k0 += 8) {{",
              "    for (int64_t i = 0; i < 8; ++i) {",
              "      const int64_t k = k0 + i;",
              *["      " + line for line in point("k")],
              "      st(gr + 8 * i, Xr); st(gi + 8 * i, Xi);",
              "    }",
              "    aotcuda_fft::store_points(rows8, im8, k0, gr, gi);",
              "  }",
              f"  for (; k0 < {count}; ++k0) {{",
              "    const int64_t k = k0;",
              *["    " + line for line in point("k")],
              "    for (int v = 0; v < 8; ++v) { Y[oo[v] + k * (YT)] = Xr[v]; Y[oo[v] + k * (YT) + (YP)] = Xi[v]; }",
              "  }",
              "  split_done = true;",
              "}",
              "#endif"]


def _merge_point(k: str, xr: str, xi: str, mr: str, mi: str) -> list[str]:
    """Statements defining vf8 Zr, Zi = point k of an even c2r's n/2-point input from X[k] at (xr, xi) and
    X[m−k] at (mr, mi): Z[k] = (X[k] + conj X[m−k]) + i·W_n^(−k)·(X[k] − conj X[m−k]) (stockham.c2r)."""
    return [f"const float c = merge[2 * ({k})], s = merge[2 * ({k}) + 1];",
            f"const vf8 Xr = ld({xr}), Xi = ld({xi}), Mr = ld({mr}), Mi = ld({mi});",
            "const vf8 a_r = Xr + Mr, a_i = Xi - Mi, b_r = Xr - Mr, b_i = Xi + Mi;",
            "const vf8 c_r = b_r * c - b_i * s, c_i = b_r * s + b_i * c;",
            "const vf8 Zr = a_r - c_i, Zi = a_i + c_r;"]


def _merged_load(lines: list, m: int, scale: str) -> None:
    """An even c2r's merge fused into the loads: bins k0 … k0 + 7 and their mirrors m − k0 − 7 … m − k0 read
    by two 8×8 transposes into L1 (the imaginary parts of bins 0 and m dropped), Z of all 16 points written
    to (ar, ai) (Z[m] too: a point past the transform's, which nothing reads): one pass over the planes where
    the loads into (br, bi) and the merge made two (docs/performance.md, branch fuse). Needs bins 0 … m of
    x, float32, dense along the dim, 8 rows (AVX2); sets merged, else leaves the block to the two passes."""
    V = ROWS
    lines += ["#if defined(__AVX2__)",
              "if (nv == 8 && (((XT) == 2 && (XP) == 1) || (XT) == 1)) {",
              "  const float* rows8[8]; const float* imag8[8];",
              "  for (int v = 0; v < 8; ++v) { rows8[v] = reinterpret_cast<const float*>(X) + xo[v]; imag8[v] = rows8[v] + (XP); }",
              "  const float* const* const im8 = ((XT) == 2 && (XP) == 1) ? nullptr : imag8;  // null: interleaved pairs",
              "  alignas(64) float lr[64], li[64], hr[64], hi[64];",
              f"  for (int64_t k0 = 0; 2 * k0 <= {m}; k0 += 8) {{",
              f"    const int64_t j0 = {m - 7} - k0;",
              f"    aotcuda_fft::load_points(rows8, im8, k0, lr, li, {scale});",
              f"    aotcuda_fft::load_points(rows8, im8, j0, hr, hi, {scale});",
              "    if (k0 == 0) for (int v = 0; v < 8; ++v) { li[v] = 0.0f; hi[56 + v] = 0.0f; }",
              "    for (int64_t i = 0; i < 8; ++i) {",
              "      {",
              "        const int64_t k = k0 + i;",
              *["        " + line for line in _merge_point("k", "lr + 8 * i", "li + 8 * i", "hr + 8 * (7 - i)", "hi + 8 * (7 - i)")],
              f"        st(ar + k * {V}, Zr); st(ai + k * {V}, Zi);",
              "      }",
              "      {",
              "        const int64_t k = j0 + i;",
              *["        " + line for line in _merge_point("k", "hr + 8 * i", "hi + 8 * i", "lr + 8 * (7 - i)", "li + 8 * (7 - i)")],
              f"        st(ar + k * {V}, Zr); st(ai + k * {V}, Zi);",
              "      }",
              "    }",
              "  }",
              "  merged = true;",
              "}",
              "#endif"]


def kernel_source(n: int, kind: str, inverse: bool, in_len: int, out_len: int, scale: float,
                  has_window: bool, fast: bool = True) -> tuple[list[str], list[str], list[str], list[str]]:
    """The C++ of one transform as (static tables, gather, stages, store) statement lists over these names,
    which kernel_body defines: X, Y, WIN (the input, output and window pointers), `xo[v]`, `oo[v]` (the
    offsets of row v of the block in X and Y), `nv` (rows in the block; in a packed block, of its first ROWS), XT, XP, YT, YP, WS (the strides
    of the transformed dim, of a pair's parts and of the window), YT_T (Y's element type), and the planes
    ar, ai, br, bi of (max(nc, m + 2·m1) + 1)·ROWS floats (m: Bluestein's length, stage_length; m1 the
    four-step split's column length, 0 without one), c0r, c0i, c1r, c1i (the split's small planes), and, in a packed
    block (fft_cpu.packed: an odd r2c or c2r), xo_hi, oo_hi, nv_hi for its upper ROWS rows (_upper_rows).
    fast: the data is float32 (the AVX2 transposes may run)."""
    V = ROWS
    nc = complex_length(n, kind)
    fwd = not direction(kind, inverse)
    real_pairs = kind != "c2c" and n % 2 == 0
    if bluestein_length(nc) is not None:
        tables, stages, flip, at = _bluestein(nc, not fwd)
    else:  # c2c, an even r2c's split and an even c2r's store read X[k] where the stages leave it (at)
        tables, stages, flip, at = _stages(nc, not fwd, natural=kind != "c2c" and not real_pairs)
    mapped = None if at("k") == "k" else at  # _copy_out's at: None where X[k] lies at k
    rr, ri = ("br", "bi") if flip else ("ar", "ai")  # where the stages leave the result
    # The scale multiplies the points as they are loaded (or with the window, which multiplies them after),
    # before the stages, whose sums grow up to n-fold: a result float32 holds is not lost to an overflow.
    one = "1.0f"  # the store's scale
    sc = _f(scale)
    load_scale = one if has_window else sc
    gather, store = [], []
    count = min(in_len, n)

    def zero(plane: str, start: int, stop: int) -> None:  # the points no load writes, every row of the block
        if start < stop:
            gather.append(f"for (int64_t e = {start * V}; e < {stop * V}; ++e) {plane}[e] = 0.0f;")

    if kind == "c2c":
        zero("ar", count, n)
        zero("ai", count, n)
        _copy_in(gather, "ar", "ai", count, "XT", "XP", fast, load_scale)
        if has_window:
            _windowed(gather, "ar", count, "q", sc)
            _windowed(gather, "ai", count, "q", sc)
    elif kind == "r2c" and not real_pairs:  # x1 + i·x2: the block's first 8 rows and its other 8 (PACKED)
        zero("ar", count, n)
        zero("ai", count, n)
        gather.append(f"if (nv_hi < {V}) for (int64_t e = 0; e < {count * V}; ++e) ai[e] = 0.0f;")
        _copy_in(gather, "ar", None, count, "XT", "0", fast, load_scale)
        _upper_rows(gather, lambda lines: _copy_in(lines, "ai", None, count, "XT", "0", fast, load_scale))
        if has_window:
            _windowed(gather, "ar", count, "q", sc)
            _windowed(gather, "ai", count, "q", sc)
    elif kind == "r2c":  # z[t] = x[2t] + i·x[2t + 1]: x read as a pair of stride 2·XT, parts XT apart
        zero("ar", (count + 1) // 2, nc)
        zero("ai", count // 2, nc)
        _copy_in(gather, "ar", "ai", count // 2, "2 * XT", "XT", fast, load_scale)
        if count % 2:
            last = count // 2
            gather.append(f"for (int64_t v = 0; v < nv; ++v) ar[{last * V} + v] = static_cast<float>(X[xo[v] + {count - 1} * XT]) * {load_scale};")
        if has_window:
            _windowed(gather, "ar", (count + 1) // 2, "2 * q", sc)
            _windowed(gather, "ai", count // 2, "2 * q + 1", sc)
    elif not real_pairs:  # c2r, odd n: two rows' Hermitian halves, as X1 + i·X2 mirrored (PACKED)
        h = n // 2
        half = min(in_len, h + 1)
        for plane in ("ar", "ai", "br", "bi"):
            zero(plane, half, h + 1)
        gather.append(f"if (nv_hi < {V}) for (int64_t e = 0; e < {half * V}; ++e) {{ br[e] = 0.0f; bi[e] = 0.0f; }}")
        _copy_in(gather, "ar", "ai", half, "XT", "XP", fast, sc)
        _upper_rows(gather, lambda lines: _copy_in(lines, "br", "bi", half, "XT", "XP", fast, sc))
        # z[t] = X1[t] + i·X2[t], z[n − t] = conj X1[t] + i·conj X2[t] (t ≤ n/2; bin 0's imaginary parts dropped)
        gather.append(f"for (int64_t v = 0; v < {V}; ++v) {{ ai[v] = 0.0f; bi[v] = 0.0f; }}")
        gather.append(f"for (int64_t t = 0; t <= {h}; ++t) {{")
        gather.append(f"  const vf8 x1r = ld(ar + t * {V}), x1i = ld(ai + t * {V}), x2r = ld(br + t * {V}), x2i = ld(bi + t * {V});")
        gather.append(f"  st(ar + t * {V}, x1r - x2i); st(ai + t * {V}, x1i + x2r);")
        gather.append(f"  if (t > 0) {{ st(ar + ({n} - t) * {V}, x1r + x2i); st(ai + ({n} - t) * {V}, x2r - x1i); }}")
        gather.append("}")
    else:  # c2r, even n: the half merged into (ar, ai), read straight from x (_merged_load) or via (br, bi)
        m = nc
        half = min(in_len, m + 1)
        values = []
        for k in range(m + 1):
            values.extend(_unit(k, n, 1.0))
        tables.append(_table("merge", values))
        fused = fast and half == m + 1 and m >= 16
        if fused:
            gather.append("bool merged = false;")
            _merged_load(gather, m, sc)
            gather.append("if (!merged) {")
        body = []
        if half < m + 1:
            body.append(f"for (int64_t e = {half * V}; e < {(m + 1) * V}; ++e) {{ br[e] = 0.0f; bi[e] = 0.0f; }}")
        _copy_in(body, "br", "bi", half, "XT", "XP", fast, sc)
        body.append(f"for (int64_t v = 0; v < {V}; ++v) {{ bi[v] = 0.0f; bi[{m * V} + v] = 0.0f; }}")
        body.append(f"for (int64_t k = 0; k < {m}; ++k) {{")
        body.extend("  " + line for line in _merge_point("k", f"br + k * {V}", f"bi + k * {V}",
                                                         f"br + ({m} - k) * {V}", f"bi + ({m} - k) * {V}"))
        body.append(f"  st(ar + k * {V}, Zr); st(ai + k * {V}, Zi);")
        body.append("}")
        gather.extend(("  " if fused else "") + line for line in body)
        if fused:
            gather.append("}")
    # store
    if kind == "c2c":
        _copy_out(store, rr, ri, out_len, "YT", "YP", one, fast, at=mapped)
    elif kind == "r2c" and not real_pairs:  # Z = X1 + i·X2: X1 into the other planes, X2 in place
        sr, si = ("ar", "ai") if flip else ("br", "bi")
        # X1[k] = (Z[k] + conj Z[n−k])/2, X2[k] = (Z[k] − conj Z[n−k])/2i, k and n − k together
        store.append(f"for (int64_t k = 0; 2 * k < {n}; ++k) {{")
        store.append(f"  const int64_t j = k == 0 ? 0 : {n} - k;")
        store.append(f"  const vf8 ar_ = ld({rr} + k * {V}) * 0.5f, ai_ = ld({ri} + k * {V}) * 0.5f;")
        store.append(f"  const vf8 br_ = ld({rr} + j * {V}) * 0.5f, bi_ = ld({ri} + j * {V}) * 0.5f;")
        store.append("  const vf8 pr = ar_ + br_, pi = ai_ - bi_, qr = ai_ + bi_, qi = br_ - ar_;")
        store.append(f"  st({sr} + k * {V}, pr); st({si} + k * {V}, pi); st({sr} + j * {V}, pr); st({si} + j * {V}, -pi);")
        store.append(f"  st({rr} + k * {V}, qr); st({ri} + k * {V}, qi); st({rr} + j * {V}, qr); st({ri} + j * {V}, -qi);")
        store.append("}")
        _copy_out(store, sr, si, out_len, "YT", "YP", one, fast)
        _upper_rows(store, lambda lines: _copy_out(lines, rr, ri, out_len, "YT", "YP", one, fast))
    elif kind == "c2r" and not real_pairs:  # z = x1 + i·x2
        _copy_out(store, rr, None, out_len, "YT", "0", one, fast)
        _upper_rows(store, lambda lines: _copy_out(lines, ri, None, out_len, "YT", "0", one, fast))
    elif kind == "c2r":  # x[2t] = Re z[t], x[2t + 1] = Im z[t]: out written as a pair of stride 2·YT
        _copy_out(store, rr, ri, out_len // 2, "2 * YT", "YT", one, fast, at=mapped)
        if out_len % 2:
            last = at(str(out_len // 2))
            store.append(f"for (int64_t v = 0; v < nv; ++v) Y[oo[v] + {out_len - 1} * YT] = static_cast<YT_T>({rr}[{last} * {V} + v]);")
    else:  # r2c, even n: the split straight into the stores (_split_store), or into the other planes, then out
        m = nc
        sr, si = ("ar", "ai") if flip else ("br", "bi")
        values = []
        for k in range(m + 1):
            values.extend(_unit(k, n, -1.0))
        tables.append(_table("split", values))

        def point(k: str) -> list[str]:
            return _split_point(k, m, rr, ri, at)

        fused = fast and out_len <= m + 1 and out_len >= 8
        if fused:
            store.append("bool split_done = false;")
            _split_store(store, point, out_len)
            store.append("if (!split_done) {")
        body = [f"for (int64_t k = 0; k <= {min(m, out_len - 1)}; ++k) {{",
                *["  " + line for line in point("k")],
                f"  st({sr} + k * {V}, Xr); st({si} + k * {V}, Xi);",
                "}"]
        _copy_out(body, sr, si, min(out_len, m + 1), "YT", "YP", one, fast)
        if out_len > m + 1:
            body.append("for (int64_t v = 0; v < nv; ++v) {")
            body.append("  auto* __restrict__ p = Y + oo[v];")
            body.append(f"  for (int64_t k = {m + 1}; k < {out_len}; ++k) {{")
            body.append(f"    p[k * YT] = static_cast<YT_T>({sr}[({n} - k) * {V} + v]);")
            body.append(f"    p[k * YT + YP] = static_cast<YT_T>(-{si}[({n} - k) * {V} + v]);")
            body.append("  }")
            body.append("}")
        store.extend(("  " if fused else "") + line for line in body)
        if fused:
            store.append("}")
    return tables, gather, stages, store


SCRATCH = r"""
#ifndef FFT_ROWS_CPU_HELPERS  // AOTInductor puts every kernel of a package into one source file
#define FFT_ROWS_CPU_HELPERS
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <stdexcept>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif
namespace aotcuda_fft {
// 8 floats, one row of the block each: GCC/Clang vector extensions, so that the butterflies are vector code
// under Inductor's -fno-tree-loop-vectorize (an AVX2 register where there is one, narrower code elsewhere).
typedef float vf8 __attribute__((vector_size(32)));
static inline vf8 ld(const float* p) { vf8 v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf8 v) { __builtin_memcpy(p, &v, sizeof v); }
// 16 floats: two points of the block's 8 rows where a stage's inner loop has them with one twiddle (a zmm
// register under AVX-512, which Inductor's build enables where the CPU has it).
typedef float vf16 __attribute__((vector_size(64)));
static inline void st(float* p, vf16 v) { __builtin_memcpy(p, &v, sizeof v); }
template <class T> static inline T ldv(const float* p) { T v; __builtin_memcpy(&v, p, sizeof v); return v; }
#if defined(__AVX2__)
// r[i] <- column i of the 8x8 matrix whose rows are r[0..7].
static inline void transpose8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20); r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20); r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31); r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31); r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
// plane[i][v] = rows[v][t0 + i], i < 8
static inline void load_real(const float* const* rows, int64_t t0, float* plane, float scale) {
  __m256 r[8]; const __m256 s = _mm256_set1_ps(scale);
  for (int v = 0; v < 8; ++v) r[v] = _mm256_loadu_ps(rows[v] + t0);
  transpose8(r);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(plane + 8 * i, _mm256_mul_ps(r[i], s));
}
// re[i][v], im[i][v] = the complex point t0 + i of row v (interleaved re, im)
static inline void load_pair(const float* const* rows, int64_t t0, float* re, float* im, float scale) {
  __m256 a[8], b[8];
  for (int v = 0; v < 8; ++v) {
    const __m256 lo = _mm256_loadu_ps(rows[v] + 2 * t0), hi = _mm256_loadu_ps(rows[v] + 2 * t0 + 8);
    a[v] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    b[v] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
  }
  transpose8(a); transpose8(b);
  const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < 8; ++i) { _mm256_storeu_ps(re + 8 * i, _mm256_mul_ps(a[i], s)); _mm256_storeu_ps(im + 8 * i, _mm256_mul_ps(b[i], s)); }
}
static inline void store_real(float* const* rows, int64_t t0, const float* plane, float scale) {
  __m256 r[8]; const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(plane + 8 * i);
  transpose8(r);
  for (int v = 0; v < 8; ++v) _mm256_storeu_ps(rows[v] + t0, _mm256_mul_ps(r[v], s));
}
static inline void store_pair(float* const* rows, int64_t t0, const float* re, const float* im, float scale) {
  __m256 a[8], b[8]; const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < 8; ++i) { a[i] = _mm256_loadu_ps(re + 8 * i); b[i] = _mm256_loadu_ps(im + 8 * i); }
  transpose8(a); transpose8(b);
  for (int v = 0; v < 8; ++v) {
    const __m256 x = _mm256_mul_ps(a[v], s), y = _mm256_mul_ps(b[v], s);
    const __m256 lo = _mm256_unpacklo_ps(x, y), hi = _mm256_unpackhi_ps(x, y);
    _mm256_storeu_ps(rows[v] + 2 * t0, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(rows[v] + 2 * t0 + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}
// 8 complex points from t0 of the block's 8 rows: interleaved pairs where imag is null, else planes (re from
// rows, im from imag)
static inline void load_points(const float* const* rows, const float* const* imag, int64_t t0, float* re,
                               float* im, float scale) {
  if (imag) { load_real(rows, t0, re, scale); load_real(imag, t0, im, scale); } else load_pair(rows, t0, re, im, scale);
}
static inline void store_points(float* const* rows, float* const* imag, int64_t t0, const float* re,
                                const float* im) {
  if (imag) { store_real(rows, t0, re, 1.0f); store_real(imag, t0, im, 1.0f); } else store_pair(rows, t0, re, im, 1.0f);
}
#endif
// 4·`floats` floats for one thread (four planes, or four and the four-step split's four small ones). Up to
// KEPT_BYTES they are kept between calls (a fresh allocation each call would come back from the OS and be
// faulted in again: docs/performance.md); larger ones (m of 16384 and more) live for one call, so that a
// long transform does not leave 8 MiB on every OpenMP thread for the life of the process. p is null where
// the allocation failed.
struct Planes {
  static constexpr int64_t KEPT_BYTES = 2 << 20;
  float* p = nullptr;
  bool owned = false;
  explicit Planes(int64_t floats) {
    const int64_t bytes = ((floats * 4 + 15) / 16) * 16 * static_cast<int64_t>(sizeof(float));
    if (bytes > KEPT_BYTES) {
      p = static_cast<float*>(std::aligned_alloc(64, bytes));
      owned = true;
      if (p) std::memset(p, 0, bytes);
      return;
    }
    static thread_local float* kept = nullptr;
    static thread_local int64_t have = 0;
    if (have < bytes) {
      std::free(kept);
      kept = static_cast<float*>(std::aligned_alloc(64, bytes));
      have = kept ? bytes : 0;
      if (kept) std::memset(kept, 0, bytes);
    }
    p = kept;
  }
  ~Planes() { if (owned) std::free(p); }
  Planes(const Planes&) = delete;
  Planes& operator=(const Planes&) = delete;
};
// The threads a call of `blocks` blocks runs on: OpenMP's current count (torch.set_num_threads sets it) but
// no more than there are blocks, so that no idle thread builds Planes (up to 8 MiB, allocated and zeroed
// each call past KEPT_BYTES) for no work.
static inline int threads_for(int64_t blocks) {
#ifdef _OPENMP
  const int most = omp_get_max_threads();
  return blocks < most ? static_cast<int>(blocks) : most;
#else
  (void)blocks;
  return 1;
#endif
}
}  // namespace aotcuda_fft
#endif
"""


def kernel_body(n: int, kind: str, inverse: bool, in_len: int, out_len: int, scale: float, has_window: bool,
                sizes: list[str], x_strides: list[str], y_strides: list[str], xt: str, xp: str, yt: str, yp: str,
                ws: str, x_offset: str, y_offset: str, y_type: str, fast: bool) -> tuple[str, str]:
    """(file-scope C++: SCRATCH's helpers, the kernel function's body with its tables) for pointers X, Y, WIN and the C++
    expressions of the batch dims' sizes and strides (x's and out's, in the same order), the strides of
    the transformed dim (xt, yt) and of a pair's parts (xp, yp; "0" where there is none), the window's
    stride, the storage offsets of x and out, Y's element type and whether x and out are float32
    (kernel_source's fast). The blocks run on OpenMP's threads."""
    V = ROWS
    tables, gather, stages, store = kernel_source(n, kind, inverse, in_len, out_len, scale, has_window, fast)
    B = 2 * V if packed(n, kind) else V  # rows a block
    split = four_step(stage_length(n, kind))
    pad = 2 * split[0] if split else 0  # the four-step split's padded rows (_four_step)
    plane = ((max(complex_length(n, kind), stage_length(n, kind) + pad) + 1) * V + 15) // 16 * 16
    small = (four_step_planes(n, kind) + 15) // 16 * 16  # the four-step split's L1 planes c0r, c0i, c1r, c1i
    rows = " * ".join(f"({s})" for s in sizes) or "1"
    offsets = []
    for d in reversed(range(len(sizes))):
        offsets.append(f"    {{ const int64_t i = q % ({sizes[d]}); q /= ({sizes[d]}); "
                       f"x += i * ({x_strides[d]}); y += i * ({y_strides[d]}); }}")
    body = [
        "using aotcuda_fft::vf8; using aotcuda_fft::vf16; using aotcuda_fft::ld; using aotcuda_fft::st;",
        *tables,  # function-local statics: one package holds many transforms' kernels
        f"const int64_t rows = {rows};",
        f"const int64_t blocks = (rows + {B - 1}) / {B};",
        f"const int64_t XT = {xt}, XP = {xp}, YT = {yt}, YP = {yp}, WS = {ws};",
        "(void)XP; (void)YP; (void)WS;",
        f"using YT_T = {y_type};",
        # OpenMP's current thread count (torch.set_num_threads sets it), not the compiling process's: a caller
        # that runs torch on one thread gets one here too.
        "bool out_of_memory = false;",
        "#pragma omp parallel if (blocks > 1) num_threads(aotcuda_fft::threads_for(blocks))",
        "{",
        f"  const aotcuda_fft::Planes planes({plane + small});  // ar, ai, br, bi of {plane} floats, c0r … c1i of {small}",
        "  if (!planes.p) {",
        "    #pragma omp atomic write",
        "    out_of_memory = true;",
        "  }",
        f"  float* const ar = planes.p; float* const ai = ar + {plane}; float* const br = ai + {plane};",
        f"  float* const bi = br + {plane};",
        f"  float* const c0r = bi + {plane}; float* const c0i = c0r + {small}; float* const c1r = c0i + {small}; "
        f"float* const c1i = c1r + {small};",
        "  (void)c0r; (void)c0i; (void)c1r; (void)c1i;",
        "  #pragma omp for schedule(static)",
        "  for (int64_t blk = 0; blk < blocks; ++blk) {",
        "    if (!ar) continue;",
        f"    const int64_t first = blk * {B};",
        f"    const int64_t nv_all = rows - first < {B} ? rows - first : {B};",
        f"    int64_t xo_all[{B}], oo_all[{B}];",
        "    for (int64_t v = 0; v < nv_all; ++v) {",
        f"      int64_t q = first + v, x = {x_offset}, y = {y_offset};",
        *["  " + line for line in offsets],
        "      xo_all[v] = x; oo_all[v] = y;",
        "    }",
        f"    const int64_t* const xo = xo_all; const int64_t* const oo = oo_all; const int64_t nv = nv_all < {V} ? nv_all : {V};",
        f"    const int64_t* const xo_hi = xo_all + {V}; const int64_t* const oo_hi = oo_all + {V};",
        f"    const int64_t nv_hi = nv_all > {V} ? nv_all - {V} : 0;",
        "    (void)xo_hi; (void)oo_hi; (void)nv_hi;",
        *["    " + line for line in gather],
        *["    " + line for line in stages],
        *["    " + line for line in store],
        "  }",
        "}",
        # Outside the parallel region: an exception may not leave one. AOTInductor's run turns it into an
        # error code (aotcuda: a RuntimeCallError), where a null plane would have been written through.
        f'if (out_of_memory) throw std::runtime_error("aotcuda::fft_rows_cpu: out of memory for the {4 * (plane + small) * 4} '
        f'bytes of planes a thread of a length-{n} transform needs");',
    ]
    return SCRATCH, "\n".join(body)
