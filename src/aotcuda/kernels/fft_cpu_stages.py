"""The stages of ``aotcuda::fft_rows_cpu``'s C++ (kernels/fft_cpu.py has the op and the method;
kernels/fft_cpu_source.py the loads, stores and the kernel around them): Stockham DIF stages (Van Loan 1992,
§1.7; Swarztrauber 1984) of radix 8, 4, 2, 3, 5, 7, 11, 13 on planes [n][8] of float32, 8 rows a vector (GCC/Clang
vector types: Inductor builds with -fno-tree-loop-vectorize); from fft_cpu.FOUR_STEP points on, the four-step
split inside the block (Bailey 1990); Bluestein's chirp-z transform for lengths with a prime factor above 13.
Twiddles are static tables computed in float64 and rounded once to float32.
"""

from __future__ import annotations

import math

import torch

from aotcuda.kernels.fft_cpu import ROWS, bluestein_length, four_step, radices


def float_literal(value: float) -> str:
    """A float32 C++ literal of a float64 value (rounded once, by the compiler)."""
    return f"{value:.17e}f" if math.isfinite(value) else "0.0f"


def table(name: str, values: list[float]) -> str:
    body = ", ".join(float_literal(v) for v in values)
    return f"alignas(64) static const float {name}[{max(len(values), 1)}] = {{{body}}};"


def unit(k: int, length: int, sign: float) -> tuple[float, float]:
    """exp(sign·2πi·k/length) in float64, the angle reduced first so that the table is exact to float64."""
    k %= length
    theta = 2 * math.pi * k / length
    return math.cos(theta), sign * math.sin(theta)


def _butterfly(r: int, inverse: bool, vt: str = "vf8") -> list[str]:
    """C++ statements: y{k}r, y{k}i = the r-point DFT of a{t}r, a{t}i, all of vector type vt (vf8: 8 rows;
    stockham._butterfly's math: radix 2 and 4 by hand, an odd r by its symmetry)."""
    return [line.replace("const vf8 ", f"const {vt} ") for line in _butterfly8(r, inverse)]


def _dft4(a: list[str], y: str, inverse: bool, tag: str) -> list[str]:
    """C++ statements: {y}{k}r, {y}{k}i = the 4-point DFT of the points named a (radix 4's butterfly; the
    temporaries prefixed by tag)."""
    t = tag
    e = f"const vf8 {t}er = -{t}di, {t}ei = {t}dr;" if inverse else f"const vf8 {t}er = {t}di, {t}ei = -{t}dr;"
    return [f"const vf8 {t}sr = {a[0]}r + {a[2]}r, {t}si = {a[0]}i + {a[2]}i, {t}tr = {a[1]}r + {a[3]}r, {t}ti = {a[1]}i + {a[3]}i;",
            f"const vf8 {t}cr = {a[0]}r - {a[2]}r, {t}ci = {a[0]}i - {a[2]}i, {t}dr = {a[1]}r - {a[3]}r, {t}di = {a[1]}i - {a[3]}i;", e,
            f"const vf8 {y}0r = {t}sr + {t}tr, {y}0i = {t}si + {t}ti, {y}2r = {t}sr - {t}tr, {y}2i = {t}si - {t}ti;",
            f"const vf8 {y}1r = {t}cr + {t}er, {y}1i = {t}ci + {t}ei, {y}3r = {t}cr - {t}er, {y}3i = {t}ci - {t}ei;"]


def _butterfly8(r: int, inverse: bool) -> list[str]:
    if r == 8:  # two 4-point DFTs (even and odd points), the odd one times W8^k, then y[k], y[k + 4] = E ± W8^k·O
        h = float_literal(math.sqrt(0.5))
        lines = _dft4(["a0", "a2", "a4", "a6"], "E", inverse, "e") + _dft4(["a1", "a3", "a5", "a7"], "O", inverse, "o")
        if inverse:  # W8 = (1 + i)/√2
            lines.append(f"const vf8 T1r = {h} * (O1r - O1i), T1i = {h} * (O1r + O1i), T2r = -O2i, T2i = O2r, "
                         f"T3r = -{h} * (O3r + O3i), T3i = {h} * (O3r - O3i);")
        else:  # W8 = (1 - i)/√2
            lines.append(f"const vf8 T1r = {h} * (O1r + O1i), T1i = {h} * (O1i - O1r), T2r = O2i, T2i = -O2r, "
                         f"T3r = {h} * (O3i - O3r), T3i = -{h} * (O3r + O3i);")
        lines.append("const vf8 T0r = O0r, T0i = O0i;")
        return lines + [f"const vf8 y{k}r = E{k}r + T{k}r, y{k}i = E{k}i + T{k}i, "
                        f"y{k + 4}r = E{k}r - T{k}r, y{k + 4}i = E{k}i - T{k}i;" for k in range(4)]
    if r == 2:
        return ["const vf8 y0r = a0r + a1r, y0i = a0i + a1i, y1r = a0r - a1r, y1i = a0i - a1i;"]
    if r == 4:
        return _dft4(["a0", "a1", "a2", "a3"], "y", inverse, "")
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
            pr.append(f"{float_literal(c)} * p{t}r")
            pi.append(f"{float_literal(c)} * p{t}i")
            qr.append(f"{float_literal(-s)} * q{t}i")  # i·s·q
            qi.append(f"{float_literal(s)} * q{t}r")
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
                last: tuple[str, str] | None = None, src_stride: int | None = None, pre: str | None = None,
                whole: bool = False) -> tuple[list[str], list[str], tuple[str, str]]:
    """(static tables, statements, the plane pair holding the result) of the Stockham stages of an nc-point
    DFT on planes [nc][lanes]: stage 0 reads the pair `src` (its points src_stride floats apart where given,
    times the complex factors pre[2·t], pre[2·t + 1] where `pre` names them: lanes = ROWS), stage i writes
    bufs[i % 2] (and stage i + 1 reads it), the last stage `last` where given; twiddle tables named prefix0,
    prefix1, …; the stages fft_cpu.radices(nc, whole) gives (radix 8 over a `whole` block)."""
    sign = 1.0 if inverse else -1.0
    tables, code = [], []
    length, s, (sr, si) = nc, 1, src
    stages = radices(nc, whole)
    for i, r in enumerate(stages):
        m = length // r
        dr, di = last if last is not None and i == len(stages) - 1 else bufs[i % 2]
        if m > 1:
            values = []
            for t2 in range(m):
                for k in range(1, r):
                    values.extend(unit(t2 * k, length, sign))
            tables.append(table(f"{prefix}{i}", values))
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


def stockham_stages(nc: int, inverse: bool, natural: bool = True) -> tuple[list[str], list[str], bool, object]:
    """(static tables, the statements of the nc-point DFT of planes (ar, ai), whether the result ends in the
    second plane pair (br, bi), at: k ↦ the C++ index of the point that holds X[k]): the Stockham stages over
    the whole block (X[k] at k), or the four-step split where fft_cpu.four_step gives one (four_step_stages: X[k] at
    k where `natural`, else where its rows leave it, saving a pass for a caller that reads X[k] one k at a
    time anyway)."""
    split = four_step(nc)
    if split is not None:
        return four_step_stages(nc, *split, inverse, natural)
    tables, code, result = _stage_code(nc, inverse, ROWS, ("ar", "ai"), (("br", "bi"), ("ar", "ai")), "tw", whole=True)
    return tables, code, result[0] == "br", lambda k: k


def four_step_stages(nc: int, m1: int, m2: int, inverse: bool, natural: bool) -> tuple[list[str], list[str], bool, object]:
    """stockham_stages' result by the four-step split (Bailey 1990; Van Loan 1992, §3.3) nc = m1·m2, each small DFT
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
            values.extend(unit(j2 * k1, nc, sign))
    tables = c_tables + r_tables + [table("t4", values)]
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


def bluestein_stages(nc: int, inverse: bool) -> tuple[list[str], list[str], bool, object]:
    """stockham_stages' result for a complex length nc with a prime factor above 13, by Bluestein's chirp-z
    transform over m = bluestein_length(nc) points (the same math as the CUDA kernel's, fft_plan.bluestein):
    the loaded points (ar, ai; t < nc) times the chirp c[t] = exp(∓πi·t²/nc) (t² reduced mod 2·nc exactly),
    zero to m, the forward m-point stages, times the spectrum DFT_m(b)/m of b[j] = conj c[|j|] (|j| < nc,
    wrapped mod m) and conjugated, the same forward stages again (conj∘DFT∘conj is m times the inverse),
    then X[k] = c[k]·conj(that) for k < nc, at k of the pair the stages leave it in (Stockham) or of (ar, ai)
    (the four-step split, whose X[k] lie elsewhere: the spectrum's and chirp's passes read them where they
    are). Tables in float64, rounded once."""
    V, m = ROWS, bluestein_length(nc)
    sign = 1.0 if inverse else -1.0
    tables, stage_code, flip, at = stockham_stages(m, False, natural=False)
    rr, ri = ("br", "bi") if flip else ("ar", "ai")
    dr, di = (rr, ri) if at("k") == "k" else ("ar", "ai")  # where X[k] goes: in place, or to natural order
    chirp = [unit(t * t, 2 * nc, sign) for t in range(nc)]
    j = torch.arange(m, dtype=torch.int64)
    distance = torch.where(j < nc, j, m - j)
    angle = ((distance * distance) % (2 * nc)).double() * (-sign * math.pi / nc)
    kernel = torch.where((j < nc) | (j > m - nc), torch.polar(torch.ones(m, dtype=torch.float64), angle), 0)
    spectrum = torch.view_as_real(torch.fft.fft(kernel) / m).reshape(-1).tolist()
    tables.append(table("chirp", [v for c in chirp for v in c]))
    tables.append(table("spectrum", spectrum))
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
