"""The Bluestein kernels of ``aotcuda::fft_rows`` past n = 4096: a length with a prime factor past 61 (no tiling
holds it) of up to 2·TILE = 8192 points, in one kernel launch, as kernels/fft_bluestein.py's kernels run n ≤ 4096.

Bluestein's convolution needs m ≥ 2n − 1 > 8192 points, past what a program holds (TILE = 4096 complex values in
registers). fft_plan.Bluestein with parts = S splits it by decimation in frequency into S cyclic convolutions of
h = m/S ≤ TILE points (ω_m = exp(−2πi/m), the convolution's forward sign; z = x·c the chirped row, c[t] the chirp):

    DFT_m(z)[S·k + s] = Σ_t z[t]·ω_m^(s·t)·ω_h^(k·t) = DFT_h(fold(z·ω_m^(s·t)))[k],
    fold(v)[t'] = v[t'] + v[t' + h]                              (ω_h^(k·t) repeats every h points; h ≥ n/2),
    y[t] = IDFT_m(Y)[t] = Σ_s ω_m^(−s·t)·IDFT_h(Y[S·k + s])[t mod h]   (the IDFTs unscaled, 1/m in the spectrum),

for every t < n. A part is fft_bluestein's pipeline on h's tile (_cyclic), with its own chirps in and out,
c[t]·ω_m^(±s·t) for every t < n (fft_plan.bluestein_values: the tables of the halves, S of them), and its own
bins of the spectrum; each point t' of the tile loads and chirps the row's points t' and t' + h (``folds`` = 2)
before the transform, and gives both of them their part's term after it.

Parts run one after another in a loop (not unrolled: one part's code, however many parts), the output kept in Out
in float32 between them: part 0 stores each point's term, each later part reads it back, adds its own and stores
it again, after a barrier (the tile's threads read back what they stored themselves; the barrier orders the
rows' places that r2c's pairs share). A float16 or bfloat16 output runs through a float32 one (fft_rows.launch).

r2c and c2r run two real rows as one complex row, as fft_bluestein's pairs kernel does (fft_rows.pairs_rows):
each row normalized by a power of two over both folds' points (a NaN or an infinity zeroed in the pair: it comes
out NaN and reaches no other row), found once before the parts (the rows read an extra time, a row and a fold at a
time) so that each part loads one fold at a time; r2c separated after the last part (fft_bluestein._separate, a
fold at a time: each bin's places are its own thread's), c2r's and conv's real and imaginary parts the two rows.

What keeps the registers: each part's rows, points and table reads are computed from a zero that depends on the
part (_unseen_zero(rows + s)) and computed again after the transform from another, and the part loop is
tl.range(disable_licm=True), so that neither Triton nor LLVM hoists them (or the stages' own index math) out of
the loop to hold them through every part's transform. Compiled for sm_90 at 4099 (fft_kernel_resources.py),
bytes spilled a thread went r2c 752 → 200, c2r 720 → 192, conv 736 → 192, c2c 584 → 128; at 8191 r2c
1056 → 288, c2r 856 → 216 (docs/performance.md, session 34).
"""

from __future__ import annotations

from aotcuda.kernels import HAVE_TRITON

if HAVE_TRITON:
    import triton
    import triton.language as tl

    from aotcuda.kernels.fft_bluestein import (_chirp_in, _chirp_out, _cyclic, _extent, _keep_pair, _kept_pair,
                                               _pair_points_again, _row_points_again, _scaling, _separate, _shrunk,
                                               _unseen_zero)
    from aotcuda.kernels.fft_rows import _load_rows, _store_rows

    @triton.jit
    def _folded(X, Window, Weight, Tables, x_row, v_row, t, in_tile, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                IN, N: tl.constexpr, H: tl.constexpr, FOLDS: tl.constexpr, KIND: tl.constexpr,
                WINDOW: tl.constexpr, WEIGHT: tl.constexpr, SCALED: tl.constexpr):
        """The rows' points t and t + H (FOLDS 2) loaded, each times its chirp in at Tables + IN, and summed."""
        inside = in_tile & (t < N)
        xr, xi = _load_rows(X, Window, Weight, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, KIND, WINDOW, WEIGHT, SCALED)
        zr, zi = _chirp_in(xr, xi, Tables, x_row, t, inside, IN, N)
        if FOLDS == 2:
            t1 = t + H
            inside1 = in_tile & (t1 < N)
            xr, xi = _load_rows(X, Window, Weight, x_row, v_row, t1, inside1, in_len, xs_t, xs_p, ws, vs_t, vs_p,
                                scale, N, KIND, WINDOW, WEIGHT, SCALED)
            xr, xi = _chirp_in(xr, xi, Tables, x_row, t1, inside1, IN, N)
            zr += xr
            zi += xi
        return zr, zi

    @triton.jit
    def _bluestein_parts_kernel(X, Tables, Out, Window, Weight, rows, in_len, out_len, scale,
                                size0, size1, size2, size3, xs0, xs1, xs2, xs3, xs_t, xs_p,
                                os0, os1, os2, os3, os_t, os_p, ws, vs0, vs1, vs2, vs3, vs_t, vs_p,
                                N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                                P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr,
                                KIND: tl.constexpr, PRECISION: tl.constexpr, WINDOW: tl.constexpr,
                                WEIGHT: tl.constexpr, SCALED: tl.constexpr, PARTS: tl.constexpr,
                                FOLDS: tl.constexpr):
        # fft_bluestein._bluestein_kernel's arguments (Out float32); (A, B, C) padded (P1, P2, P3) the tiling of
        # h = m / PARTS, FOLDS = ⌈N / h⌉ ≤ 2.
        CHIRP: tl.constexpr = 2 * (P1 * P1 + P2 * P2 + P3 * P3 + P2 * P1 + P3 * P1 + P3 * P2)
        SPECTRUM: tl.constexpr = CHIRP + PARTS * 4 * N
        TILE: tl.constexpr = P1 * P2 * P3
        H: tl.constexpr = A * B * C
        # disable_licm: nothing hoisted out of the loop to be held through every part's transform (the stages'
        # index and address math): compiled for sm_90 at 4099, the pairs kernel's c2r spilled 424 bytes a thread
        # with it alone, 720 without (docs/performance.md, session 34).
        for s in tl.range(PARTS, disable_licm=True):
            # Part s − 1's terms stored before part s reads them back; the rows and points recomputed, not held.
            tl.debug_barrier()
            # A zero that depends on s: what is computed from it (the rows, the points, every table read) cannot be
            # hoisted out of the loop and held through every part (registers the transform needs).
            zero = _unseen_zero(rows + s)
            tables = Tables + zero
            x_row, o_row, v_row, row_ok, t, in_tile = _row_points_again(
                R, rows + zero, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                A, B, C, P1, P2, P3)
            zr, zi = _folded(X, Window, Weight, tables, x_row, v_row, t, in_tile, in_len, xs_t, xs_p, ws, vs_t,
                             vs_p, scale, CHIRP + s * 4 * N, N, H, FOLDS, KIND, WINDOW, WEIGHT, SCALED)
            ur, ui = _cyclic(zr, zi, tables, x_row, SPECTRUM + s * 2 * TILE, A, B, C, P1, P2, P3, R, PRECISION)
            # The rows and points again from another zero, not held through the transform from before it (sm_90,
            # 4099 c2c with disable_licm: 128 bytes spilled a thread so).
            after = _unseen_zero(rows + PARTS + s)
            x_row, o_row, v_row, row_ok, t, in_tile = _row_points_again(
                R, rows + after, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                A, B, C, P1, P2, P3)
            tables = Tables + after
            for j in tl.static_range(FOLDS):
                tj = t + j * H
                yr, yi = _chirp_out(ur, ui, tables, x_row, tj, in_tile & (tj < N), CHIRP + s * 4 * N + 2 * N, N)
                ok = in_tile & (tj < out_len)
                at = Out + o_row + tj.to(tl.int64) * os_t
                yr += tl.load(at, mask=ok & (s > 0), other=0.0)
                if KIND != 2:
                    yi += tl.load(at + os_p, mask=ok & (s > 0), other=0.0)
                _store_rows(Out, o_row, tj, ok, yr, yi, os_t, os_p, KIND)

    @triton.jit
    def _pair_scaling(X, Window, Weight, x_a, v_a, x_b, v_b, t, in_a, ok_b, in_len, xs_t, xs_p, ws, vs_t, vs_p,
                      scale, N: tl.constexpr, H: tl.constexpr, FOLDS: tl.constexpr, LOADS: tl.constexpr,
                      WINDOW: tl.constexpr, WEIGHT: tl.constexpr, SCALED: tl.constexpr):
        """Rows a's and b's power of two over both folds' points (_extent, _scaling), a row and a fold at a
        time: whether each holds a NaN or an infinity, its factor and its undo."""
        bad_a, most_a = _extent_at(X, Window, Weight, x_a, v_a, t, in_a, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                                   N, LOADS, WINDOW, WEIGHT, SCALED)
        bad_b, most_b = _extent_at(X, Window, Weight, x_b, v_b, t, in_a & ok_b, in_len, xs_t, xs_p, ws, vs_t,
                                   vs_p, scale, N, LOADS, WINDOW, WEIGHT, SCALED)
        if FOLDS == 2:
            t1 = t + H
            in_a1 = in_a & (t1 < N)
            bad1, most1 = _extent_at(X, Window, Weight, x_a, v_a, t1, in_a1, in_len, xs_t, xs_p, ws, vs_t, vs_p,
                                     scale, N, LOADS, WINDOW, WEIGHT, SCALED)
            bad_a = tl.maximum(bad_a, bad1)
            most_a = tl.maximum(most_a, most1)
            bad1, most1 = _extent_at(X, Window, Weight, x_b, v_b, t1, in_a1 & ok_b, in_len, xs_t, xs_p, ws, vs_t,
                                     vs_p, scale, N, LOADS, WINDOW, WEIGHT, SCALED)
            bad_b = tl.maximum(bad_b, bad1)
            most_b = tl.maximum(most_b, most1)
        shrink_a, undo_a = _scaling(bad_a, most_a)
        shrink_b, undo_b = _scaling(bad_b, most_b)
        return bad_a, shrink_a, undo_a, bad_b, shrink_b, undo_b

    @triton.jit
    def _extent_at(X, Window, Weight, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                   N: tl.constexpr, LOADS: tl.constexpr, WINDOW: tl.constexpr, WEIGHT: tl.constexpr,
                   SCALED: tl.constexpr):
        """_extent of the rows' points t, loaded."""
        xr, xi = _load_rows(X, Window, Weight, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, LOADS, WINDOW, WEIGHT, SCALED)
        return _extent(xr, xi)

    @triton.jit
    def _pair_fold(X, Window, Weight, Tables, x_a, v_a, x_b, v_b, t, in_a, in_b, in_len, xs_t, xs_p, ws, vs_t,
                   vs_p, scale, bad_a, shrink_a, bad_b, shrink_b, IN, N: tl.constexpr, LOADS: tl.constexpr,
                   WINDOW: tl.constexpr, WEIGHT: tl.constexpr, SCALED: tl.constexpr):
        """Rows a and b at points t, scaled, joined as one complex row (_joined) and chirped."""
        ar, ai = _load_rows(X, Window, Weight, x_a, v_a, t, in_a, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, LOADS, WINDOW, WEIGHT, SCALED)
        br, bi = _load_rows(X, Window, Weight, x_b, v_b, t, in_b, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, LOADS, WINDOW, WEIGHT, SCALED)
        zr, zi = _joined(ar, ai, br, bi, bad_a, shrink_a, bad_b, shrink_b, LOADS)
        return _chirp_in(zr, zi, Tables, x_a, t, in_a, IN, N)

    @triton.jit
    def _pair_folded(X, Window, Weight, Tables, x_a, v_a, x_b, v_b, t, in_a, in_b, ok_b, in_len, xs_t, xs_p, ws,
                     vs_t, vs_p, scale, bad_a, shrink_a, bad_b, shrink_b, IN, N: tl.constexpr, H: tl.constexpr,
                     FOLDS: tl.constexpr, LOADS: tl.constexpr, WINDOW: tl.constexpr, WEIGHT: tl.constexpr,
                     SCALED: tl.constexpr):
        """fft_bluestein._pair_half's loads over both folds, a fold at a time (_pair_fold), summed."""
        zr, zi = _pair_fold(X, Window, Weight, Tables, x_a, v_a, x_b, v_b, t, in_a, in_b, in_len, xs_t, xs_p, ws,
                            vs_t, vs_p, scale, bad_a, shrink_a, bad_b, shrink_b, IN, N, LOADS, WINDOW, WEIGHT,
                            SCALED)
        if FOLDS == 2:
            t1 = t + H
            in_a1 = in_a & (t1 < N)
            vr, vi = _pair_fold(X, Window, Weight, Tables, x_a, v_a, x_b, v_b, t1, in_a1, in_a1 & ok_b, in_len,
                                xs_t, xs_p, ws, vs_t, vs_p, scale, bad_a, shrink_a, bad_b, shrink_b, IN, N, LOADS,
                                WINDOW, WEIGHT, SCALED)
            zr += vr
            zi += vi
        return zr, zi

    @triton.jit
    def _joined(ar, ai, br, bi, bad_a, shrink_a, bad_b, shrink_b, LOADS: tl.constexpr):
        """Rows a and b, each scaled (_shrunk), as one complex row: a + i·b for real rows (LOADS 1: ai, bi zero),
        else (ar − bi) + i·(ai + br)."""
        ar, ai = _shrunk(ar, ai, bad_a, shrink_a)
        br, bi = _shrunk(br, bi, bad_b, shrink_b)
        if LOADS == 1:
            return ar, br
        return ar - bi, ai + br

    @triton.jit
    def _bluestein_pairs_parts_kernel(X, Tables, Out, Window, Weight, rows, in_len, out_len, scale,
                                      size0, size1, size2, size3, xs0, xs1, xs2, xs3, xs_t, xs_p,
                                      os0, os1, os2, os3, os_t, os_p, ws, vs0, vs1, vs2, vs3, vs_t, vs_p,
                                      N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                                      P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr,
                                      KIND: tl.constexpr, PRECISION: tl.constexpr, WINDOW: tl.constexpr,
                                      WEIGHT: tl.constexpr, SCALED: tl.constexpr, PARTS: tl.constexpr,
                                      FOLDS: tl.constexpr):
        # fft_bluestein._bluestein_pairs_kernel's arguments (r2c, c2r, conv; Out float32), in PARTS parts of
        # h = A·B·C and FOLDS = ⌈N / h⌉ ≤ 2: R pairs of rows a program, each pair one complex row.
        CHIRP: tl.constexpr = 2 * (P1 * P1 + P2 * P2 + P3 * P3 + P2 * P1 + P3 * P1 + P3 * P2)
        SPECTRUM: tl.constexpr = CHIRP + PARTS * 4 * N
        TILE: tl.constexpr = P1 * P2 * P3
        H: tl.constexpr = A * B * C
        LOADS: tl.constexpr = 1 if KIND == 3 else KIND  # conv loads real rows as r2c does
        # Each row's power of two once, before the parts (each part loads a fold at a time, scaled by it), from
        # points of a zero of their own: computed plainly (or as the separation's, _unseen_zero(rows)), they were
        # shared with what comes after the loop and held through it (sm_90, 4099 r2c: 840 bytes spilled, 584 so).
        x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b, t, in_a, in_b = _pair_points_again(
            R, rows + _unseen_zero(rows + PARTS), size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3,
            vs0, vs1, vs2, vs3, N, A, B, C, P1, P2, P3)
        bad_a, shrink_a, undo_a, bad_b, shrink_b, undo_b = _pair_scaling(
            X, Window, Weight, x_a, v_a, x_b, v_b, t, in_a, ok_b, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale, N, H,
            FOLDS, LOADS, WINDOW, WEIGHT, SCALED)
        for s in tl.range(PARTS, disable_licm=True):  # as _bluestein_parts_kernel's: nothing hoisted
            tl.debug_barrier()  # part s − 1's terms kept before part s reads them back
            zero = _unseen_zero(rows + s)  # as _bluestein_parts_kernel's: nothing hoisted out of the loop
            tables = Tables + zero
            x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b, t, in_a, in_b = _pair_points_again(
                R, rows + zero, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                N, A, B, C, P1, P2, P3)
            zr, zi = _pair_folded(X, Window, Weight, tables, x_a, v_a, x_b, v_b, t, in_a, in_b, ok_b, in_len, xs_t,
                                  xs_p, ws, vs_t, vs_p, scale, bad_a, shrink_a, bad_b, shrink_b, CHIRP + s * 4 * N,
                                  N, H, FOLDS, LOADS, WINDOW, WEIGHT, SCALED)
            ur, ui = _cyclic(zr, zi, tables, x_a, SPECTRUM + s * 2 * TILE, A, B, C, P1, P2, P3, R, PRECISION)
            # The rows and points again, not held through the transform (sm_90, 4099 r2c: 584 → 248 bytes spilled).
            after = _unseen_zero(rows + PARTS + 1 + s)
            x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b, t, in_a, in_b = _pair_points_again(
                R, rows + after, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                N, A, B, C, P1, P2, P3)
            tables = Tables + after
            last = s == PARTS - 1
            for j in tl.static_range(FOLDS):
                tj = t + j * H
                in_aj = in_a & (tj < N)
                in_bj = in_aj & ok_b
                yr, yi = _chirp_out(ur, ui, tables, x_a, tj, in_aj, CHIRP + s * 4 * N + 2 * N, N)
                kr, ki = _kept_pair(Out, o_a, o_b, tj, in_aj & (s > 0), in_bj & (s > 0), out_len, os_t, os_p, N,
                                    KIND)
                yr += kr
                yi += ki
                if KIND >= 2:  # c2r, conv: the real rows a + i·b, each undone after the last part
                    yr = yr * tl.where(last, undo_a, 1.0)
                    yi = yi * tl.where(last, undo_b, 1.0)
                _keep_pair(Out, o_a, o_b, tj, in_aj, in_bj, out_len, yr, yi, os_t, os_p, N, KIND)
        if KIND == 1:  # r2c: Z = DFT(a + i·b) kept whole; separated into the two rows' bins
            tl.debug_barrier()
            x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b, t, in_a, in_b = _pair_points_again(
                R, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                N, A, B, C, P1, P2, P3)
            _separate(Out, o_a, o_b, ok_b, t, in_a, in_b, out_len, undo_a, undo_b, os_t, os_p, N, H, FOLDS)
