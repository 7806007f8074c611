"""The Bluestein kernel of ``aotcuda::fft_rows``: a length n that no tiling of kernels/fft_plan.py covers (a
prime factor above 61, or a tile past TILE), in one kernel launch, one read and write, as fft_rows's own.

Bluestein's chirp-z transform (1968): with t·k = (t² + k² − (k − t)²)/2 and c[t] = exp(∓πi·t²/n),

    X[k] = c[k] · Σ_t (x[t]·c[t]) · b[k − t],   b[j] = conj(c[|j|]),

a linear convolution of the n points x·c with b, which a circular convolution of length m ≥ 2n − 1 holds
exactly: y = IDFT_m(DFT_m(x·c) · DFT_m(b)) (fft_plan.Bluestein: m the cheapest length a tiling takes).
The kernel holds R rows of m's tile in registers and runs, with no trip through memory:

    load x (as fft_rows loads it: c2c's pair, r2c's real row, c2r's Hermitian half of length n mirrored,
           weighted, windowed) at t < n of m's tile, zero beyond; times c[t]
    the forward DFT of m (fft_rows's own stages)         → the tile at (k1, k2, k3), k = k1 + a·k2 + a·b·k3
    times DFT_m(b)/m at (k1, k2, k3), conjugated
    the forward DFT of m again, its stages transposed    → the tile at (t2, t3, t1), t = b·c·t1 + c·t2 + t3
    conjugated, times c[t]; the first out_len points stored (c2r: the real part); the scale taken at the load

The inverse DFT is conj(DFT(conj(·))); the DFT is the symmetric matrix ω^(t·k), so its transpose, the same
stages run backwards (each DFT block symmetric, each twiddle a diagonal), is the DFT again, and it reads the
forward's output layout and writes its input layout: no permutation of the whole tile between the two, the
same tables, the same paddings, a butterfly last stage the transposed pass's first.

An m past TILE (n in 2049…4096: m up to 8192) is not one tile (one row of 8192 values a program spilled
registers): fft_plan.Bluestein.parts = 2 runs it as two convolutions of h = m/2 ≥ n (decimation in
frequency). x·c is zero past n ≤ h, so with ω_m = exp(−2πi/m) (the convolution's forward sign)

    DFT_m(x·c)[2k] = DFT_h(x·c)[k],   DFT_m(x·c)[2k + 1] = DFT_h(x·c·ω_m^t)[k],
    y[t] = IDFT_h(even bins · spectrum's even bins)[t] + ω_m^(−t)·IDFT_h(odd · odd)[t]   (t < n ≤ h;
           the IDFTs unscaled, 1/m in the spectrum),

each half the pipeline above (``_half``) with its own chirps in and out (c[t]·ω_m^(±t) for the odd half) and
spectrum bins. With float32 out the first half is stored, and the second reads it back and adds to it after
a barrier, so that nothing of the first is held through the second (float16/bfloat16 out, whose rounding
would be taken twice, holds it in registers); compiled for sm_90 at n = 4093, 8 warps: 144 bytes spilled a
thread (408 holding it), where the one tile of 8192 spilled 864 (docs/performance.md). Tables (one flat
tensor, fft_plan.bluestein_values): the DFT and twiddle tables of m's tiling (or h's), each half's chirps in
and out [2, n] each, each half's spectrum [2, p1, p2, p3]. All in float32, the products as fft_rows's
(PRECISION).

r2c and c2r run two real rows as one complex row (``_bluestein_pairs_kernel``, fft_rows.pairs_rows): the
convolution is complex whatever the input, so a real row alone spends half of it. r2c transforms z = a + i·b
and separates A[k] = (Z[k] + conj(Z[n − k]))/2, B[k] = (Z[k] − conj(Z[n − k]))/2i (a and b real; Z kept whole
in the two rows' n // 2 + 1 float32 bins each, then a barrier); c2r inverts X_a + i·X_b (both Hermitian), whose
real and imaginary parts are a and b. Each row is first scaled by a power of two to a largest part below 1
(exact), so that each keeps its own relative accuracy beside a row of another magnitude (a row 10⁻⁶ of its
pair's: 2e-7, not 1e-1), and a row holding a NaN or an infinity is zeroed in the pair and comes out NaN: it
reaches no other row. Measured on an H100 at 512 rows (benchmarks/scripts/fft_tiling_sweep.py
--bluestein-pairs no / yes): n = 4093 c2r 171.7 → 103.6 µs, r2c 172.9 → 152.5; 1009 33.0 → 19.3 and 33.5 → 22.8.
"""

from __future__ import annotations

from aotcuda.kernels import HAVE_TRITON

if HAVE_TRITON:
    import triton
    import triton.language as tl

    from aotcuda.kernels.fft_rows import (_butterfly, _cdot, _forward_stages, _load_rows, _row_offsets, _rows_at,
                                          _store_rows, _tile_index, _twiddle)

    @triton.jit
    def _unstage(xr, xi, tables, off, R: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr, P: tl.constexpr,
                 PRECISION: tl.constexpr):
        """fft_rows's _stage transposed: the forward P-point DFT over the last axis of [R, D1, D2, P] complex
        (xr, xi), returned as [R, P, D1, D2] (the transformed index moved back, through shared memory)."""
        if P < 16:
            yr, yi = _butterfly(xr, xi, R, D1, D2, P, False)
        else:
            M: tl.constexpr = R * D1 * D2
            yr, yi = _cdot(tl.reshape(xr, (M, P)), tl.reshape(xi, (M, P)), tables, off, P, False, False, PRECISION)
            yr = tl.reshape(yr, (R, D1, D2, P))
            yi = tl.reshape(yi, (R, D1, D2, P))
        return tl.permute(yr, (0, 3, 1, 2)), tl.permute(yi, (0, 3, 1, 2))

    @triton.jit
    def _twiddled(xr, xi, wr, wi):
        return xr * wr - xi * wi, xr * wi + xi * wr

    @triton.jit
    def _transposed_stages(xr, xi, Tables, R: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                           P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, PRECISION: tl.constexpr):
        """fft_rows's _forward_stages backwards: [R, P1, P2, P3] at (r, k1, k2, k3) in, the forward DFT
        y[t] = Σ_k ω_m^(t·k)·x[k] out as [R, P2, P3, P1] at (r, t2, t3, t1) (stage 1's input layout):
        stage 3 over k3, twiddle ω^(A·t3·k2), stage 2 over k2, twiddles ω^(C·t2·k1)·ω^(t3·k1), stage 1."""
        F2: tl.constexpr = 2 * P1 * P1
        F3: tl.constexpr = F2 + 2 * P2 * P2
        W12: tl.constexpr = F3 + 2 * P3 * P3
        W13: tl.constexpr = W12 + 2 * P2 * P1
        W23: tl.constexpr = W13 + 2 * P3 * P1
        M1: tl.constexpr = R * P2 * P3
        if C > 1:
            xr, xi = _unstage(xr, xi, Tables, F3, R, P1, P2, P3, PRECISION)  # (r, t3, k1, k2)
            wr, wi = _twiddle(Tables, W23, P3, P2)  # ω_m^(A·t3·k2)
            xr, xi = _twiddled(xr, xi, wr[None, :, None, :], wi[None, :, None, :])
        else:  # [R, P1, P2, 1] as (r, t3 = 0, k1, k2)
            xr = tl.reshape(xr, (R, P3, P1, P2))
            xi = tl.reshape(xi, (R, P3, P1, P2))
        if B > 1:
            xr, xi = _unstage(xr, xi, Tables, F2, R, P3, P1, P2, PRECISION)  # (r, t2, t3, k1)
            wr, wi = _twiddle(Tables, W12, P2, P1)  # ω_m^(C·t2·k1)
            wr, wi = wr[None, :, None, :], wi[None, :, None, :]
            if C > 1:
                vr, vi = _twiddle(Tables, W13, P3, P1)  # ω_m^(t3·k1)
                wr, wi = _twiddled(wr, wi, vr[None, None, :, :], vi[None, None, :, :])
            xr, xi = _twiddled(xr, xi, wr, wi)
        else:  # [R, 1, P1, 1] as (r, t2 = 0, t3 = 0, k1)
            xr = tl.reshape(xr, (R, P2, P3, P1))
            xi = tl.reshape(xi, (R, P2, P3, P1))
        yr, yi = _cdot(tl.reshape(xr, (M1, P1)), tl.reshape(xi, (M1, P1)), Tables, 0, P1, False, False, PRECISION)
        return tl.reshape(yr, (R, P2, P3, P1)), tl.reshape(yi, (R, P2, P3, P1))

    @triton.jit
    def _chirp_in(xr, xi, Tables, x_row, t, inside, IN, N: tl.constexpr):
        """The loaded points (xr, xi) at t times the chirp in at Tables + IN (zero where not `inside`)."""
        # Tables read in the tile's own shape (0 · x_row): a broadcast row spills registers on sm_90.
        cr = tl.load(Tables + IN + (t + 0 * x_row), mask=inside, other=0.0)
        ci = tl.load(Tables + IN + N + (t + 0 * x_row), mask=inside, other=0.0)
        return _twiddled(xr, xi, cr, ci)

    @triton.jit
    def _cyclic(xr, xi, Tables, x_row, SPECTRUM, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr, PRECISION: tl.constexpr):
        """The cyclic convolution of the chirped points [R, P2, P3, P1] at (r, t2, t3, t1) with the kernel whose
        spectrum is at Tables + SPECTRUM: the forward stages, times the spectrum (conjugated), the transposed
        stages; the convolution is (xr, −xi), at (r, t2, t3, t1) again."""
        TILE: tl.constexpr = P1 * P2 * P3
        xr, xi = _forward_stages(xr, xi, Tables, R, A, B, C, P1, P2, P3, False, False, False, PRECISION)
        # (r, k1, k2, k3): times the kernel's spectrum (1/m in it), conjugated for the inverse.
        at = (tl.arange(0, P1)[None, :, None, None] * (P2 * P3) + tl.arange(0, P2)[None, None, :, None] * P3
              + tl.arange(0, P3)[None, None, None, :]) + 0 * x_row
        br = tl.load(Tables + SPECTRUM + at)
        bi = tl.load(Tables + SPECTRUM + TILE + at)
        xr, xi = xr * br - xi * bi, -(xr * bi + xi * br)
        return _transposed_stages(xr, xi, Tables, R, A, B, C, P1, P2, P3, PRECISION)

    @triton.jit
    def _chirp_out(xr, xi, Tables, x_row, t, inside, OUT, N: tl.constexpr):
        """_cyclic's output (the convolution (xr, −xi)) at t times the chirp out at Tables + OUT."""
        cr = tl.load(Tables + OUT + (t + 0 * x_row), mask=inside, other=0.0)
        ci = tl.load(Tables + OUT + N + (t + 0 * x_row), mask=inside, other=0.0)
        return cr * xr + ci * xi, ci * xr - cr * xi

    @triton.jit
    def _convolve(xr, xi, Tables, x_row, t, inside, IN: tl.constexpr, OUT: tl.constexpr, SPECTRUM: tl.constexpr,
                  N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, P1: tl.constexpr,
                  P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr, PRECISION: tl.constexpr):
        """One convolution on the tiling (A, B, C) padded (P1, P2, P3) of the loaded points (xr, xi) at t
        (`inside`: a row's): times the chirp in at Tables + IN, the forward stages, times the spectrum at
        SPECTRUM (conjugated), the transposed stages, conjugated, times the chirp out at OUT: [R, P2, P3, P1]
        at (r, t2, t3, t1), t = B·C·t1 + C·t2 + t3 (zero where not `inside`)."""
        xr, xi = _chirp_in(xr, xi, Tables, x_row, t, inside, IN, N)
        xr, xi = _cyclic(xr, xi, Tables, x_row, SPECTRUM, A, B, C, P1, P2, P3, R, PRECISION)
        # The chirp out read here, after the stages: fewer registers held through them.
        return _chirp_out(xr, xi, Tables, x_row, t, inside, OUT, N)

    @triton.jit
    def _unseen_zero(rows):
        """0, as rows // (rows + 1) (1 ≤ rows < 2**63), which the compiler cannot see: row masks and tile indices
        recomputed with it after a barrier are not held in registers from before it."""
        many = tl.cast(rows, tl.int64)
        return (many // (many + 1)).to(tl.int32)

    @triton.jit
    def _row_points_again(R: tl.constexpr, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3,
                          vs0, vs1, vs2, vs3, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, P1: tl.constexpr,
                          P2: tl.constexpr, P3: tl.constexpr):
        """_bluestein_kernel's rows (_row_offsets) and tile points (_tile_index) computed again after a barrier,
        through _unseen_zero, so that the compiler recomputes them instead of holding them in registers through
        what came before (the pairs kernel's own: _pair_points_again)."""
        zero = _unseen_zero(rows)
        x_row, o_row, v_row, row_ok = _row_offsets(R, rows + zero, size1, size2, size3, xs0, xs1, xs2, xs3,
                                                   os0, os1, os2, os3, vs0, vs1, vs2, vs3)
        t, in_tile = _tile_index(row_ok, A, B, C, P1, P2, P3)
        return x_row, o_row, v_row, row_ok, t + zero, in_tile

    @triton.jit
    def _half(X, Window, Weight, Tables, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
              IN: tl.constexpr, OUT: tl.constexpr,
              SPECTRUM: tl.constexpr, N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
              P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr, KIND: tl.constexpr,
              PRECISION: tl.constexpr, WINDOW: tl.constexpr, WEIGHT: tl.constexpr, SCALED: tl.constexpr):
        """The rows loaded at points t (`inside`: a row's) and convolved (_convolve)."""
        xr, xi = _load_rows(X, Window, Weight, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, KIND, WINDOW, WEIGHT, SCALED)
        return _convolve(xr, xi, Tables, x_row, t, inside, IN, OUT, SPECTRUM, N, A, B, C, P1, P2, P3, R, PRECISION)

    @triton.jit
    def _bluestein_kernel(X, Tables, Out, Window, Weight, rows, in_len, out_len, scale,
                          size0, size1, size2, size3, xs0, xs1, xs2, xs3, xs_t, xs_p,
                          os0, os1, os2, os3, os_t, os_p, ws, vs0, vs1, vs2, vs3, vs_t, vs_p,
                          N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                          P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr,
                          KIND: tl.constexpr, PRECISION: tl.constexpr, WINDOW: tl.constexpr,
                          WEIGHT: tl.constexpr, SCALED: tl.constexpr, PARTS: tl.constexpr):
        # fft_rows's arguments; N the transform's length, (A, B, C) padded (P1, P2, P3) the tiling of m / PARTS.
        x_row, o_row, v_row, row_ok = _row_offsets(R, rows, size1, size2, size3, xs0, xs1, xs2, xs3,
                                                   os0, os1, os2, os3, vs0, vs1, vs2, vs3)
        CHIRP: tl.constexpr = 2 * (P1 * P1 + P2 * P2 + P3 * P3 + P2 * P1 + P3 * P1 + P3 * P2)
        SPECTRUM: tl.constexpr = CHIRP + PARTS * 4 * N  # after each part's chirps in and out
        TILE: tl.constexpr = P1 * P2 * P3
        # The tile [R, P2, P3, P1] at (r, t2, t3, t1), t = B·C·t1 + C·t2 + t3: the points t < N of a row.
        t, in_tile = _tile_index(row_ok, A, B, C, P1, P2, P3)
        yr, yi = _half(X, Window, Weight, Tables, x_row, v_row, t, in_tile & (t < N), in_len, xs_t, xs_p, ws,
                       vs_t, vs_p, scale, CHIRP, CHIRP + 2 * N, SPECTRUM, N, A, B, C, P1, P2, P3, R, KIND,
                       PRECISION, WINDOW, WEIGHT, SCALED)
        if PARTS == 2:  # the odd bins' half, added to the even ones' (fft_plan.Bluestein)
            # float32 out: the first half stored and read back, nothing of it held through the second (sm_90,
            # 4093 c2c: 144 bytes spilled a thread against 408 held in registers; fft_kernel_resources.py).
            # float16 or bfloat16 out, whose rounding would be taken twice: held in float32 registers.
            READ_BACK: tl.constexpr = Out.dtype.element_ty == tl.float32
            if READ_BACK:
                _store_rows(Out, o_row, t, in_tile & (t < out_len), yr, yi, os_t, os_p, KIND)
                tl.debug_barrier()
                # Recomputed rather than held from the first half: 328 → 144 bytes spilled (the row offsets depend
                # on the program id alone and may still be reused).
                x_row, o_row, v_row, row_ok, t, in_tile = _row_points_again(
                    R, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                    A, B, C, P1, P2, P3)
            vr, vi = _half(X, Window, Weight, Tables, x_row, v_row, t, in_tile & (t < N), in_len, xs_t, xs_p, ws,
                           vs_t, vs_p, scale, CHIRP + 4 * N, CHIRP + 6 * N, SPECTRUM + 2 * TILE, N, A, B, C,
                           P1, P2, P3, R, KIND, PRECISION, WINDOW, WEIGHT, SCALED)
            if READ_BACK:
                at = Out + o_row + t.to(tl.int64) * os_t
                stored = in_tile & (t < out_len)
                yr = vr + tl.load(at, mask=stored, other=0.0)
                yi = vi
                if KIND != 2:
                    yi += tl.load(at + os_p, mask=stored, other=0.0)
            else:
                yr += vr
                yi += vi
        _store_rows(Out, o_row, t, in_tile & (t < out_len), yr, yi, os_t, os_p, KIND)

    @triton.jit
    def _extent(xr, xi):
        """Of rows (xr, xi) [R, P2, P3, P1]: whether each holds a NaN or an infinity (an int32 above 0) and its
        largest finite part, [R, 1, 1, 1] each. A NaN or an infinity is told by its exponent bits (all ones), in
        integers: no float comparison that a compiler may assume finite."""
        exponent_r = (tl.cast(xr, tl.int32, bitcast=True) >> 23) & 255
        exponent_i = (tl.cast(xi, tl.int32, bitcast=True) >> 23) & 255
        bad = tl.maximum(exponent_r, exponent_i) == 255
        row_bad = tl.max(tl.max(tl.max(bad.to(tl.int32), axis=3), axis=2), axis=1)[:, None, None, None]
        big = tl.where(bad, 0.0, tl.maximum(tl.abs(xr), tl.abs(xi)))
        most = tl.max(tl.max(tl.max(big, axis=3), axis=2), axis=1)[:, None, None, None]
        return row_bad, most

    @triton.jit
    def _scaling(row_bad, most):
        """_extent's rows' power of two that brings each row's largest part below 1 (its exponent clamped to
        ±125, so that the factor and its inverse are normal floats: exact products), and the inverse factor that
        undoes it after the (linear) transform: NaN for a row holding a NaN or an infinity."""
        # most < 2**(e + 1) for its float exponent e = bits[30:23] − 127 (0 and subnormals clamped).
        e = ((tl.cast(most, tl.int32, bitcast=True) >> 23) & 255) - 126
        e = tl.minimum(tl.maximum(e, -125), 125)
        shrink = tl.cast((127 - e) << 23, tl.float32, bitcast=True)
        undo = tl.where(row_bad > 0, float("nan"), tl.cast((127 + e) << 23, tl.float32, bitcast=True))
        return shrink, undo

    @triton.jit
    def _shrunk(xr, xi, row_bad, shrink):
        """Rows (xr, xi) times their _scaling factor, a row holding a NaN or an infinity zeroed, so that its
        points reach no other row of its pair."""
        return tl.where(row_bad > 0, 0.0, xr * shrink), tl.where(row_bad > 0, 0.0, xi * shrink)

    @triton.jit
    def _normalized(xr, xi):
        """Rows (xr, xi) [R, P2, P3, P1] normalized (_extent, _scaling, _shrunk), and [R, 1, 1, 1] the inverse
        factor that undoes it after the transform (NaN for a row holding a NaN or an infinity)."""
        row_bad, most = _extent(xr, xi)
        shrink, undo = _scaling(row_bad, most)
        xr, xi = _shrunk(xr, xi, row_bad, shrink)
        return xr, xi, undo

    @triton.jit
    def _pair_half(X, Window, Weight, Tables, x_a, v_a, x_b, v_b, t, in_a, in_b, in_len, xs_t, xs_p, ws, vs_t, vs_p,
                   scale, IN: tl.constexpr, OUT: tl.constexpr, SPECTRUM: tl.constexpr, N: tl.constexpr,
                   A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr,
                   P3: tl.constexpr, R: tl.constexpr, KIND: tl.constexpr, PRECISION: tl.constexpr,
                   WINDOW: tl.constexpr, WEIGHT: tl.constexpr, SCALED: tl.constexpr):
        """_half on a pair of real-valued rows as one complex row: r2c's real rows a + i·b; c2r's Hermitian
        halves, mirrored, as X_a + i·X_b, whose inverse DFT is a + i·b. Each row normalized first
        (_normalized), so that each keeps its own relative accuracy whatever the other's magnitude. Returns the
        convolution (yr, yi) and each row's factor that undoes its normalization."""
        LOADS: tl.constexpr = 1 if KIND == 3 else KIND  # conv loads real rows as r2c does
        ar, ai = _load_rows(X, Window, Weight, x_a, v_a, t, in_a, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, LOADS, WINDOW, WEIGHT, SCALED)
        ar, ai, undo_a = _normalized(ar, ai)
        br, bi = _load_rows(X, Window, Weight, x_b, v_b, t, in_b, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, LOADS, WINDOW, WEIGHT, SCALED)
        br, bi, undo_b = _normalized(br, bi)
        if LOADS == 1:  # r2c and conv: ai and bi are zero
            zr, zi = ar, br
        else:
            zr, zi = ar - bi, ai + br
        yr, yi = _convolve(zr, zi, Tables, x_a, t, in_a, IN, OUT, SPECTRUM, N, A, B, C, P1, P2, P3, R, PRECISION)
        return yr, yi, undo_a, undo_b

    @triton.jit
    def _pair_places(Out, o_a, o_b, t, in_a, in_b, out_len, os_t, N: tl.constexpr, KIND: tl.constexpr):
        """Where a pair's transform (yr, yi) at points t is kept in Out before its last step, and which are:
        c2r and conv, the real rows themselves (yr row a's, yi row b's, points t < out_len: (row a's, row b's) places);
        r2c, Z = DFT(a + i·b) whole in the two rows' N // 2 + 1 bins each (N + 1 ≥ N places): bin t < out_len at
        row a's t, a bin t past it at row b's N − t (in 1 … N − out_len ≤ out_len − 1): (one place, the same)."""
        if KIND == 2 or KIND == 3:
            ok = t < out_len
            return Out + o_a + t.to(tl.int64) * os_t, in_a & ok, Out + o_b + t.to(tl.int64) * os_t, in_b & ok
        low = t < out_len
        at = tl.where(low, Out + o_a + t.to(tl.int64) * os_t, Out + o_b + (N - t).to(tl.int64) * os_t)
        keep = tl.where(low, in_a, in_b)
        return at, keep, at, keep

    @triton.jit
    def _keep_pair(Out, o_a, o_b, t, in_a, in_b, out_len, yr, yi, os_t, os_p, N: tl.constexpr, KIND: tl.constexpr):
        """(yr, yi) stored at _pair_places (in Out's dtype: float32 where read back)."""
        at_r, ok_r, at_i, ok_i = _pair_places(Out, o_a, o_b, t, in_a, in_b, out_len, os_t, N, KIND)
        tl.store(at_r, yr.to(Out.dtype.element_ty), mask=ok_r)
        tl.store(at_i + (0 if KIND >= 2 else os_p), yi.to(Out.dtype.element_ty), mask=ok_i)

    @triton.jit
    def _kept_pair(Out, o_a, o_b, t, in_a, in_b, out_len, os_t, os_p, N: tl.constexpr, KIND: tl.constexpr):
        """What _keep_pair stored, read back at the same points (after a barrier; what is stored there next is
        computed from the value read, so no write overtakes the read, whichever thread holds it)."""
        at_r, ok_r, at_i, ok_i = _pair_places(Out, o_a, o_b, t, in_a, in_b, out_len, os_t, N, KIND)
        return (tl.load(at_r, mask=ok_r, other=0.0),
                tl.load(at_i + (0 if KIND >= 2 else os_p), mask=ok_i, other=0.0))

    @triton.jit
    def _separation_reads(Out, o_a, o_b, ok_b, t, in_a, in_b, out_len, os_t, os_p, N: tl.constexpr):
        """For r2c's bins k = t < out_len of a pair: Z[k] and conj(Z[N − k])'s parts as kept at _pair_places
        (Z[N − k] is row a's bin N − k where that is below out_len, else row b's place of bin k; a row a without
        its b, the last of an odd count, has Z = A: conj(Z[N − k]) is Z[k]), and which bins are kept."""
        kept = in_a & (t < out_len)
        at_a = Out + o_a + t.to(tl.int64) * os_t
        zr = tl.load(at_a, mask=kept, other=0.0)
        zi = tl.load(at_a + os_p, mask=kept, other=0.0)
        j = tl.where(t == 0, 0, N - t)
        mirror_in_a = j < out_len
        at_m = tl.where(mirror_in_a, Out + o_a + j.to(tl.int64) * os_t, Out + o_b + t.to(tl.int64) * os_t)
        mirror_kept = kept & (mirror_in_a | in_b)
        mr = tl.load(at_m, mask=mirror_kept, other=0.0)
        mi = tl.load(at_m + os_p, mask=mirror_kept, other=0.0)
        return zr, zi, tl.where(ok_b, mr, zr), tl.where(ok_b, mi, -zi), kept

    @triton.jit
    def _separation_writes(Out, o_a, o_b, t, in_b, kept, zr, zi, mr, mi, undo_a, undo_b, os_t, os_p):
        """r2c's two rows from _separation_reads's values: A[k] = (Z[k] + conj(Z[N − k])) / 2 and
        B[k] = (Z[k] − conj(Z[N − k])) / 2i (a and b real), times each row's undo, stored as the rows' pairs."""
        at_a = Out + o_a + t.to(tl.int64) * os_t
        at_b = Out + o_b + t.to(tl.int64) * os_t
        half_a = 0.5 * undo_a
        half_b = 0.5 * undo_b
        tl.store(at_a, (zr + mr) * half_a, mask=kept)
        tl.store(at_a + os_p, (zi - mi) * half_a, mask=kept)
        tl.store(at_b, (zi + mi) * half_b, mask=kept & in_b)
        tl.store(at_b + os_p, (mr - zr) * half_b, mask=kept & in_b)

    @triton.jit
    def _separate(Out, o_a, o_b, ok_b, t, in_a, in_b, out_len, undo_a, undo_b, os_t, os_p, N: tl.constexpr,
                  H: tl.constexpr, FOLDS: tl.constexpr):
        """r2c's two rows from Z = DFT(a + i·b) kept at _pair_places, bins k < out_len = N // 2 + 1 (points t and,
        with two folds, t + H of the tile), each read (_separation_reads) and then written (_separation_writes) by
        its own thread: bin k's places are row a's k and its mirror N − k's, which is row b's place of bin k
        (N − k ≥ out_len) except at k = 0 and N / 2, the bin itself. So no place is read by one thread and
        written by another, and no barrier is needed between the reads and the writes."""
        zr, zi, mr, mi, kept = _separation_reads(Out, o_a, o_b, ok_b, t, in_a, in_b, out_len, os_t, os_p, N)
        _separation_writes(Out, o_a, o_b, t, in_b, kept, zr, zi, mr, mi, undo_a, undo_b, os_t, os_p)
        if FOLDS == 2:
            t1 = t + H
            in_a1 = in_a & (t1 < N)
            in_b1 = in_a1 & ok_b
            zr, zi, mr, mi, kept = _separation_reads(Out, o_a, o_b, ok_b, t1, in_a1, in_b1, out_len, os_t, os_p, N)
            _separation_writes(Out, o_a, o_b, t1, in_b1, kept, zr, zi, mr, mi, undo_a, undo_b, os_t, os_p)

    @triton.jit
    def _pair_offsets(R: tl.constexpr, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3,
                      vs0, vs1, vs2, vs3):
        """This program's R pairs of rows (2j, 2j + 1): each row's offsets in x, out and the weight, and
        whether it exists (fft_rows._row_offsets's, a's then b's)."""
        j = tl.program_id(0).to(tl.int64) * R + tl.arange(0, R).to(tl.int64)
        x_a, o_a, v_a, ok_a = _rows_at(2 * j, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3,
                                       vs0, vs1, vs2, vs3)
        x_b, o_b, v_b, ok_b = _rows_at(2 * j + 1, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2,
                                       os3, vs0, vs1, vs2, vs3)
        return x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b

    @triton.jit
    def _pair_points_again(R: tl.constexpr, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3,
                           vs0, vs1, vs2, vs3, N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                           P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr):
        """The pairs kernel's rows (_pair_offsets) and tile points (t, a's, b's) computed again after a barrier,
        through _unseen_zero, so that the compiler recomputes them instead of holding them in registers through
        what came before."""
        zero = _unseen_zero(rows)
        x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b = _pair_offsets(R, rows + zero, size1, size2, size3, xs0, xs1, xs2,
                                                                 xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3)
        t, in_a = _tile_index(ok_a, A, B, C, P1, P2, P3)
        t = t + zero
        in_a = in_a & (t < N)
        return x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b, t, in_a, in_a & ok_b

    @triton.jit
    def _bluestein_pairs_kernel(X, Tables, Out, Window, Weight, rows, in_len, out_len, scale,
                                size0, size1, size2, size3, xs0, xs1, xs2, xs3, xs_t, xs_p,
                                os0, os1, os2, os3, os_t, os_p, ws, vs0, vs1, vs2, vs3, vs_t, vs_p,
                                N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                                P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr,
                                KIND: tl.constexpr, PRECISION: tl.constexpr, WINDOW: tl.constexpr,
                                WEIGHT: tl.constexpr, SCALED: tl.constexpr, PARTS: tl.constexpr):
        # _bluestein_kernel's arguments, for r2c (KIND 1, float32 out, out_len = N // 2 + 1), c2r (KIND 2) and
        # conv (KIND 3): R pairs of rows a program, each pair one complex convolution (_pair_half). r2c's result is
        # separated into its two rows through Out (_keep_pair, a barrier, _separate); c2r's and conv's real and
        # imaginary parts are the two rows.
        x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b = _pair_offsets(R, rows, size1, size2, size3, xs0, xs1, xs2, xs3,
                                                                 os0, os1, os2, os3, vs0, vs1, vs2, vs3)
        CHIRP: tl.constexpr = 2 * (P1 * P1 + P2 * P2 + P3 * P3 + P2 * P1 + P3 * P1 + P3 * P2)
        SPECTRUM: tl.constexpr = CHIRP + PARTS * 4 * N
        TILE: tl.constexpr = P1 * P2 * P3
        t, in_a = _tile_index(ok_a, A, B, C, P1, P2, P3)
        in_a = in_a & (t < N)
        in_b = in_a & ok_b
        yr, yi, undo_a, undo_b = _pair_half(X, Window, Weight, Tables, x_a, v_a, x_b, v_b, t, in_a, in_b, in_len,
                                            xs_t, xs_p, ws, vs_t, vs_p, scale, CHIRP, CHIRP + 2 * N, SPECTRUM, N,
                                            A, B, C, P1, P2, P3, R, KIND, PRECISION, WINDOW, WEIGHT, SCALED)
        if PARTS == 2:  # as _bluestein_kernel's: float32 out keeps the first half in Out through the second
            READ_BACK: tl.constexpr = Out.dtype.element_ty == tl.float32
            if READ_BACK:
                _keep_pair(Out, o_a, o_b, t, in_a, in_b, out_len, yr, yi, os_t, os_p, N, KIND)
                tl.debug_barrier()
                x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b, t, in_a, in_b = _pair_points_again(
                    R, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                    N, A, B, C, P1, P2, P3)
            vr, vi, undo_a, undo_b = _pair_half(X, Window, Weight, Tables, x_a, v_a, x_b, v_b, t, in_a, in_b,
                                                in_len, xs_t, xs_p, ws, vs_t, vs_p, scale, CHIRP + 4 * N,
                                                CHIRP + 6 * N, SPECTRUM + 2 * TILE, N, A, B, C, P1, P2, P3, R, KIND,
                                                PRECISION, WINDOW, WEIGHT, SCALED)
            if READ_BACK:
                kr, ki = _kept_pair(Out, o_a, o_b, t, in_a, in_b, out_len, os_t, os_p, N, KIND)
                yr = vr + kr
                yi = vi + ki
            else:
                yr += vr
                yi += vi
        if KIND >= 2:  # c2r, conv: the real rows a + i·b (conv: a real kernel keeps them apart)
            _keep_pair(Out, o_a, o_b, t, in_a, in_b, out_len, yr * undo_a, yi * undo_b, os_t, os_p, N, KIND)
        else:
            _keep_pair(Out, o_a, o_b, t, in_a, in_b, out_len, yr, yi, os_t, os_p, N, KIND)
            tl.debug_barrier()
            # Recomputed rather than held from before the barrier: compiled for sm_90 at 1009 (m = 2048), 88 bytes
            # spilled a thread when held, and none so.
            x_a, o_a, v_a, ok_a, x_b, o_b, v_b, ok_b, t, in_a, in_b = _pair_points_again(
                R, rows, size1, size2, size3, xs0, xs1, xs2, xs3, os0, os1, os2, os3, vs0, vs1, vs2, vs3,
                N, A, B, C, P1, P2, P3)
            _separate(Out, o_a, o_b, ok_b, t, in_a, in_b, out_len, undo_a, undo_b, os_t, os_p, N, A * B * C, 1)
