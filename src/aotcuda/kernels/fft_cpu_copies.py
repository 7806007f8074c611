"""The loads and stores of ``aotcuda::fft_rows_cpu``'s kernels (kernels/fft_cpu_source.py writes the rest): C++
statements that copy a block's rows into planes [n][8] of float32 and back (8×8 AVX2 transposes where the rows are
float32 and dense along the dim, scalar code elsewhere), the block's upper rows of a packed block, and the window's
and the weight's products on the loaded planes. Over the names kernel_source documents.
"""

from __future__ import annotations

from aotcuda.kernels.fft_cpu import ROWS


def copy_in(lines: list, plane_r: str, plane_i: str | None, count: int, t: str, p: str, fast: bool,
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


def planes_store(var: str, count, p: str, fill: str, re: str, im_at, scale: str) -> list[str]:
    """Statements storing the block's 8 rows, chunks of 8 points var = its value, + 8, … while var + 8 ≤ count, as
    planes (rows8: re, imag8: im, `p` floats on): `fill` puts chunk var's points at `re` and im_at(var) (nothing
    where they are in the block's planes already). Where a row's re and im lie within 128 bytes of a multiple of
    4 KiB apart (the filter's [rows, 2, bins] at n = 4096 and 8192, a c2c's [rows, 2, n] at 1024 and up), the 8
    rows' re and im stores, 16 lines being written, would share one 12-way L1 set (r2c at 4096 2.32 ms against 1.78
    interleaved, c2c at 2048 1.93 against 1.49; docs/performance.md, branch cpufft): there the im stores trail the
    re ones by 8 chunks (256 bytes: other sets), so im_at(c) must hold chunk c until chunk c + 64 is filled."""
    return ["{",
            f"  const int64_t gap = (({p}) * 4 % 4096 + 4096) % 4096;  // bytes from a row's re to its im, mod 4 KiB",
            "  const int64_t lag = gap < 128 || gap > 3968 ? 8 : 0;  // chunks the im stores trail by",
            f"  const int64_t start = {var};",
            f"  for (; {var} + 8 <= {count}; {var} += 8) {{",
            f"    if (lag && {var} - start >= 8 * lag) "
            f"aotcuda_fft::store_real(imag8, {var} - 8 * lag, {im_at(f'{var} - 8 * lag')}, {scale});",
            f"    {fill}",
            f"    aotcuda_fft::store_real(rows8, {var}, {re}, {scale});",
            f"    if (!lag) aotcuda_fft::store_real(imag8, {var}, {im_at(var)}, {scale});",
            "  }",
            f"  for (int64_t j = {var} - start > 8 * lag ? {var} - 8 * lag : start; lag && j < {var}; j += 8)",
            f"    aotcuda_fft::store_real(imag8, j, {im_at('j')}, {scale});",
            "}"]


def ring():
    """planes_store's im_at for values gathered into L1: chunk c in a ring of 8 chunks of 64 floats, gi."""
    return lambda c: f"gi + 64 * ((({c}) - start) / 8 % 8)"


def copy_out(lines: list, plane_r: str, plane_i: str | None, count: int, t: str, p: str, scale: str,
              fast: bool, first: int = 0, at=None) -> None:
    """Statements that store points first ≤ q < count of planes [q][v] (times `scale`; point q at at(q) where
    given: stockham_stages' order) to each row of the block (pair: plane_i at `p` past plane_r), the output dim's
    stride `t`: AVX2 transposes where fast (8 points gathered into L1 first where `at`)."""
    V = ROWS
    if count <= first:
        return
    lines.append("{")
    lines.append(f"  int64_t done = {first};")
    if at is not None:  # the 8 points of a transpose into gr, gi (planes: a ring of 8 chunks) first
        lines.append("  alignas(64) float gr[64], gi[64 * 8]; (void)gr; (void)gi;")

        def gather_into(im: str) -> str:
            return (f"for (int64_t i = 0; i < 8; ++i) {{ st(gr + 8 * i, ld({plane_r} + {at('done + i')} * 8));"
                    + (f" st({im} + 8 * i, ld({plane_i} + {at('done + i')} * 8));" if plane_i else "") + " } ")

        gather, point = gather_into("gi"), at
        src_r, src_i, im_at = "gr", "gi", ring()
        planes_fill = gather_into(ring()("done"))
    else:
        gather, point, planes_fill = "", (lambda q: q), ""
        src_r, src_i = f"{plane_r} + done * 8", f"{plane_i} + done * 8"
        im_at = lambda c: f"{plane_i} + ({c}) * 8"  # noqa: E731
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
            lines.extend("    " + line for line in planes_store("done", count, p, planes_fill, src_r, im_at, scale))
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


def upper_rows(lines: list, emit) -> None:
    """emit(lines)'s statements for the block's upper 8 rows (a PACKED block of 16: xo, oo, nv theirs)."""
    lines.append("if (nv_hi > 0) {")
    lines.append("  const int64_t* const xo = xo_hi; const int64_t* const oo = oo_hi; const int64_t nv = nv_hi;")
    lines.append("  const int64_t* const wo = wo_hi; (void)xo; (void)oo; (void)wo;")
    inner = []
    emit(inner)
    lines.extend("  " + line for line in inner)
    lines.append("}")


def windowed(lines: list, plane: str, count: int, sample: str, scale: str) -> None:
    """plane[q][v] *= window[sample(q)] · scale for q < count: stft's window (and the transform's scale),
    after the loads, in L1."""
    V = ROWS
    lines.append(f"for (int64_t q = 0; q < {count}; ++q) {{")
    lines.append(f"  const float w = static_cast<float>(WIN[({sample}) * WS]) * {scale};")
    lines.append(f"  st({plane} + q * {V}, ld({plane} + q * {V}) * w);")
    lines.append("}")


def weigh(re: str, im: str, at: str, weight: str) -> str:
    """A statement: the 8 rows' point at (re, im) times the weight's point `at` along the dim, as complex numbers
    (the pair product fused into the loads: fft_cpu's `weight`). weight "uniform": one value for every row of
    the block (its batch strides all 0: a filter's weight), read once; "rows": each row's own (wo[v])."""
    def value(part: str, v: str) -> str:
        return f"static_cast<float>(WGT[wo[{v}] + ({at}) * WT{part}])"

    if weight == "uniform":
        w = f"const float wr = {value('', '0')}, wi = {value(' + WP', '0')};"
    else:
        w = (f"vf8 wr, wi; for (int v = 0; v < {ROWS}; ++v) "
             f"{{ wr[v] = {value('', 'v')}; wi[v] = {value(' + WP', 'v')}; }}")
    return (f"{{ {w} const vf8 pr = ld({re}), pi = ld({im}); "
            f"st({re}, pr * wr - pi * wi); st({im}, pr * wi + pi * wr); }}")


def weighted(lines: list, plane_r: str, plane_i: str, count: int, weight: str | None) -> None:
    """planes (plane_r, plane_i)[q][v] times the weight's point q for q < count (nothing without a weight)."""
    if weight is None or count <= 0:
        return
    V = ROWS
    lines.append(f"for (int64_t q = 0; q < {count}; ++q) "
                 + weigh(f"{plane_r} + q * {V}", f"{plane_i} + q * {V}", "q", weight))
