"""The C++ of ``aotcuda::fft_rows_cpu`` (kernels/fft_cpu.py has the op and the method): ``kernel_body`` writes
one transform's kernel body over the pointers, sizes and strides that kernels/fft_cpu_template.py hands it
(or a test's or a benchmark's standalone build), ``kernel_source`` its parts (tables, loads, stages, stores).

The stages are kernels/fft_cpu_stages.py's (Stockham, the four-step split, Bluestein), the file-scope helpers
kernels/fft_cpu_helpers.py's, the rows' plain loads and stores kernels/fft_cpu_copies.py's (the rows of a block
gathered into planes [n][8] of float32 and scattered back, as 8×8 AVX2 register transposes where the rows are
float32 and dense along the dim, scalar code elsewhere); here are the r2c split and the c2r merge fused into
them where they can be, and the order of a transform's parts.
"""

from __future__ import annotations

from aotcuda.kernels.fft_cpu import (ROWS, bluestein_length, complex_length, four_step, four_step_planes, packed,
                                     stage_length)
from aotcuda.kernels.fft_cpu_copies import (copy_in, copy_out, planes_store, ring, upper_rows, weigh, weighted,
                                            windowed)
from aotcuda.kernels.fft_cpu_helpers import SCRATCH
from aotcuda.kernels.fft_cpu_stages import (bluestein_stages, float_literal, four_step_stages, stockham_stages, table,
                                            unit)
from aotcuda.kernels.fft_rows import direction


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
    block's rows by one 8×8 transpose: one pass over the planes where the split and copy_out made two
    (docs/performance.md, branch fuse). Where the rows are float32 and dense along the dim (AVX2, 8 rows);
    sets split_done, else leaves the block to the two passes. Planes out: planes_store, the bins in a ring."""
    def split_into(im: str) -> str:  # chunk k0's bins into gr and im
        return " ".join(["for (int64_t i = 0; i < 8; ++i) {", "const int64_t k = k0 + i;", *point("k"),
                         f"st(gr + 8 * i, Xr); st({im} + 8 * i, Xi);", "}"])

    lines += ["#if defined(__AVX2__)",
              "if (nv == 8 && (((YT) == 2 && (YP) == 1) || (YT) == 1)) {",
              "  float* rows8[8]; float* imag8[8];",
              "  for (int v = 0; v < 8; ++v) { rows8[v] = reinterpret_cast<float*>(Y) + oo[v]; imag8[v] = rows8[v] + (YP); }",
              "  float* const* const im8 = ((YT) == 2 && (YP) == 1) ? nullptr : imag8;  // null: interleaved pairs",
              "  alignas(64) float gr[64], gi[64 * 8];  // gi: planes keep a ring of 8 chunks (planes_store)",
              "  int64_t k0 = 0;",
              "  if (im8) {",
              *["    " + line for line in planes_store("k0", count, "YP", split_into(ring()("k0")), "gr",
                                                         ring(), "1.0f")],
              "  } else {",
              f"    for (; k0 + 8 <= {count}; k0 += 8) {{ {split_into('gi')} "
              "aotcuda_fft::store_pair(rows8, k0, gr, gi, 1.0f); }",
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


def _merged_load(lines: list, m: int, scale: str, weight: str | None) -> None:
    """An even c2r's merge fused into the loads: bins k0 … k0 + 7 and their mirrors m − k0 − 7 … m − k0 read
    by two 8×8 transposes into L1 (the imaginary parts of bins 0 and m dropped), Z of all 16 points written
    to (ar, ai) (Z[m] too: a point past the transform's, which nothing reads): one pass over the planes where
    the loads into (br, bi) and the merge made two (docs/performance.md, branch fuse); the weight's product
    (weigh) in L1 between the transposes and the merge. Needs bins 0 … m of
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
              *([f"    for (int64_t i = 0; i < 8; ++i) {{ {weigh('lr + 8 * i', 'li + 8 * i', 'k0 + i', weight)} "
                 f"{weigh('hr + 8 * i', 'hi + 8 * i', 'j0 + i', weight)} }}"] if weight else []),
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
                  has_window: bool, fast: bool = True,
                  weight: str | None = None) -> tuple[list[str], list[str], list[str], list[str]]:
    """The C++ of one transform as (static tables, gather, stages, store) statement lists over these names,
    which kernel_body defines: X, Y, WIN (the input, output and window pointers), `xo[v]`, `oo[v]` (the
    offsets of row v of the block in X and Y), `nv` (rows in the block; in a packed block, of its first ROWS), XT, XP, YT, YP, WS (the strides
    of the transformed dim, of a pair's parts and of the window), YT_T (Y's element type), and the planes
    ar, ai, br, bi of (max(nc, m + 2·m1) + 1)·ROWS floats (m: Bluestein's length, stage_length; m1 the
    four-step split's column length, 0 without one), c0r, c0i, c1r, c1i (the split's small planes), and, in a packed
    block (fft_cpu.packed: an odd r2c or c2r), xo_hi, oo_hi, nv_hi for its upper ROWS rows (upper_rows).
    fast: the data is float32 (the AVX2 transposes may run). weight (c2c, c2r): None, or "uniform" / "rows"
    (weigh) to multiply the loaded points by WGT (a pair: WT, WP its strides along the dim and between its
    parts, wo[v] row v's offset in it), before a c2r's bins 0 and n/2 lose their imaginary parts."""
    V = ROWS
    nc = complex_length(n, kind)
    fwd = not direction(kind, inverse)
    real_pairs = kind != "c2c" and n % 2 == 0
    if bluestein_length(nc) is not None:
        tables, stages, flip, at = bluestein_stages(nc, not fwd)
    else:  # c2c, an even r2c's split and an even c2r's store read X[k] where the stages leave it (at)
        tables, stages, flip, at = stockham_stages(nc, not fwd, natural=kind != "c2c" and not real_pairs)
    mapped = None if at("k") == "k" else at  # copy_out's at: None where X[k] lies at k
    rr, ri = ("br", "bi") if flip else ("ar", "ai")  # where the stages leave the result
    # The scale multiplies the points as they are loaded (or with the window, which multiplies them after),
    # before the stages, whose sums grow up to n-fold: a result float32 holds is not lost to an overflow.
    one = "1.0f"  # the store's scale
    sc = float_literal(scale)
    load_scale = one if has_window else sc
    gather, store = [], []
    count = min(in_len, n)

    def zero(plane: str, start: int, stop: int) -> None:  # the points no load writes, every row of the block
        if start < stop:
            gather.append(f"for (int64_t e = {start * V}; e < {stop * V}; ++e) {plane}[e] = 0.0f;")

    if kind == "c2c":
        zero("ar", count, n)
        zero("ai", count, n)
        copy_in(gather, "ar", "ai", count, "XT", "XP", fast, load_scale)
        weighted(gather, "ar", "ai", count, weight)
        if has_window:
            windowed(gather, "ar", count, "q", sc)
            windowed(gather, "ai", count, "q", sc)
    elif kind == "r2c" and not real_pairs:  # x1 + i·x2: the block's first 8 rows and its other 8 (PACKED)
        zero("ar", count, n)
        zero("ai", count, n)
        gather.append(f"if (nv_hi < {V}) for (int64_t e = 0; e < {count * V}; ++e) ai[e] = 0.0f;")
        copy_in(gather, "ar", None, count, "XT", "0", fast, load_scale)
        upper_rows(gather, lambda lines: copy_in(lines, "ai", None, count, "XT", "0", fast, load_scale))
        if has_window:
            windowed(gather, "ar", count, "q", sc)
            windowed(gather, "ai", count, "q", sc)
    elif kind == "r2c":  # z[t] = x[2t] + i·x[2t + 1]: x read as a pair of stride 2·XT, parts XT apart
        zero("ar", (count + 1) // 2, nc)
        zero("ai", count // 2, nc)
        copy_in(gather, "ar", "ai", count // 2, "2 * XT", "XT", fast, load_scale)
        if count % 2:
            last = count // 2
            gather.append(f"for (int64_t v = 0; v < nv; ++v) ar[{last * V} + v] = static_cast<float>(X[xo[v] + {count - 1} * XT]) * {load_scale};")
        if has_window:
            windowed(gather, "ar", (count + 1) // 2, "2 * q", sc)
            windowed(gather, "ai", count // 2, "2 * q + 1", sc)
    elif not real_pairs:  # c2r, odd n: two rows' Hermitian halves, as X1 + i·X2 mirrored (PACKED)
        h = n // 2
        half = min(in_len, h + 1)
        for plane in ("ar", "ai", "br", "bi"):
            zero(plane, half, h + 1)
        gather.append(f"if (nv_hi < {V}) for (int64_t e = 0; e < {half * V}; ++e) {{ br[e] = 0.0f; bi[e] = 0.0f; }}")
        copy_in(gather, "ar", "ai", half, "XT", "XP", fast, sc)
        weighted(gather, "ar", "ai", half, weight)

        def upper(lines: list) -> None:
            copy_in(lines, "br", "bi", half, "XT", "XP", fast, sc)
            weighted(lines, "br", "bi", half, weight)

        upper_rows(gather, upper)
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
            values.extend(unit(k, n, 1.0))
        tables.append(table("merge", values))
        fused = fast and half == m + 1 and m >= 16
        if fused:
            gather.append("bool merged = false;")
            _merged_load(gather, m, sc, weight)
            gather.append("if (!merged) {")
        body = []
        if half < m + 1:
            body.append(f"for (int64_t e = {half * V}; e < {(m + 1) * V}; ++e) {{ br[e] = 0.0f; bi[e] = 0.0f; }}")
        copy_in(body, "br", "bi", half, "XT", "XP", fast, sc)
        weighted(body, "br", "bi", half, weight)
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
        copy_out(store, rr, ri, out_len, "YT", "YP", one, fast, at=mapped)
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
        copy_out(store, sr, si, out_len, "YT", "YP", one, fast)
        upper_rows(store, lambda lines: copy_out(lines, rr, ri, out_len, "YT", "YP", one, fast))
    elif kind == "c2r" and not real_pairs:  # z = x1 + i·x2
        copy_out(store, rr, None, out_len, "YT", "0", one, fast)
        upper_rows(store, lambda lines: copy_out(lines, ri, None, out_len, "YT", "0", one, fast))
    elif kind == "c2r":  # x[2t] = Re z[t], x[2t + 1] = Im z[t]: out written as a pair of stride 2·YT
        copy_out(store, rr, ri, out_len // 2, "2 * YT", "YT", one, fast, at=mapped)
        if out_len % 2:
            last = at(str(out_len // 2))
            store.append(f"for (int64_t v = 0; v < nv; ++v) Y[oo[v] + {out_len - 1} * YT] = static_cast<YT_T>({rr}[{last} * {V} + v]);")
    else:  # r2c, even n: the split straight into the stores (_split_store), or into the other planes, then out
        m = nc
        sr, si = ("ar", "ai") if flip else ("br", "bi")
        values = []
        for k in range(m + 1):
            values.extend(unit(k, n, -1.0))
        tables.append(table("split", values))

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
        copy_out(body, sr, si, min(out_len, m + 1), "YT", "YP", one, fast)
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


def kernel_body(n: int, kind: str, inverse: bool, in_len: int, out_len: int, scale: float, has_window: bool,
                sizes: list[str], x_strides: list[str], y_strides: list[str], xt: str, xp: str, yt: str, yp: str,
                ws: str, x_offset: str, y_offset: str, y_type: str, fast: bool,
                weight: dict | None = None) -> tuple[str, str]:
    """(file-scope C++: SCRATCH's helpers, the kernel function's body with its tables) for pointers X, Y, WIN and the C++
    expressions of the batch dims' sizes and strides (x's and out's, in the same order), the strides of
    the transformed dim (xt, yt) and of a pair's parts (xp, yp; "0" where there is none), the window's
    stride, the storage offsets of x and out, Y's element type and whether x and out are float32
    (kernel_source's fast). weight: None, or the weight WGT's C++ expressions (keys strides: one a batch dim, "0"
    where it broadcasts; wt, wp; offset) beside "uniform" (every batch stride 0). The blocks run on OpenMP's
    threads."""
    V = ROWS
    mode = None if weight is None else ("uniform" if weight["uniform"] else "rows")
    tables, gather, stages, store = kernel_source(n, kind, inverse, in_len, out_len, scale, has_window, fast, mode)
    w_strides = weight["strides"] if weight else ["0"] * len(sizes)
    B = 2 * V if packed(n, kind) else V  # rows a block
    split = four_step(stage_length(n, kind))
    pad = 2 * split[0] if split else 0  # the four-step split's padded rows (four_step_stages)
    plane = ((max(complex_length(n, kind), stage_length(n, kind) + pad) + 1) * V + 15) // 16 * 16
    small = (four_step_planes(n, kind) + 15) // 16 * 16  # the four-step split's L1 planes c0r, c0i, c1r, c1i
    w_offset = weight["offset"] if weight else "0"
    rows = " * ".join(f"({s})" for s in sizes) or "1"
    offsets = []
    for d in reversed(range(len(sizes))):
        offsets.append(f"    {{ const int64_t i = q % ({sizes[d]}); q /= ({sizes[d]}); "
                       f"x += i * ({x_strides[d]}); y += i * ({y_strides[d]}); w += i * ({w_strides[d]}); }}")
    body = [
        "using aotcuda_fft::vf8; using aotcuda_fft::vf16; using aotcuda_fft::ld; using aotcuda_fft::st;",
        *tables,  # function-local statics: one package holds many transforms' kernels
        f"const int64_t rows = {rows};",
        f"const int64_t blocks = (rows + {B - 1}) / {B};",
        f"const int64_t XT = {xt}, XP = {xp}, YT = {yt}, YP = {yp}, WS = {ws};",
        f"const int64_t WT = {weight['wt'] if weight else '0'}, WP = {weight['wp'] if weight else '0'};",
        "(void)XP; (void)YP; (void)WS; (void)WT; (void)WP;",
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
        f"    int64_t xo_all[{B}], oo_all[{B}], wo_all[{B}];",
        f"    for (int64_t v = 0; v < {B}; ++v) wo_all[v] = {w_offset};  // rows past nv_all: a point of the weight",
        "    for (int64_t v = 0; v < nv_all; ++v) {",
        f"      int64_t q = first + v, x = {x_offset}, y = {y_offset}, w = {w_offset};",
        *["  " + line for line in offsets],
        "      xo_all[v] = x; oo_all[v] = y; wo_all[v] = w;",
        "    }",
        f"    const int64_t* const xo = xo_all; const int64_t* const oo = oo_all; const int64_t nv = nv_all < {V} ? nv_all : {V};",
        f"    const int64_t* const xo_hi = xo_all + {V}; const int64_t* const oo_hi = oo_all + {V};",
        f"    const int64_t* const wo = wo_all; const int64_t* const wo_hi = wo_all + {V};",
        f"    const int64_t nv_hi = nv_all > {V} ? nv_all - {V} : 0;",
        "    (void)xo_hi; (void)oo_hi; (void)nv_hi; (void)wo; (void)wo_hi;",
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
