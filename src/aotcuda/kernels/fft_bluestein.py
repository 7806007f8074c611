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
registers): fft_plan.Bluestein.halves = 2 runs it as two convolutions of h = m/2 ≥ n (decimation in
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
"""

from __future__ import annotations

from aotcuda.kernels import HAVE_TRITON

if HAVE_TRITON:
    import triton
    import triton.language as tl

    from aotcuda.kernels.fft_rows import (_butterfly, _cdot, _forward_stages, _load_rows, _row_offsets,
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
    def _half(X, Window, Weight, Tables, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
              IN: tl.constexpr, OUT: tl.constexpr,
              SPECTRUM: tl.constexpr, N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
              P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr, KIND: tl.constexpr,
              PRECISION: tl.constexpr, WINDOW: tl.constexpr, WEIGHT: tl.constexpr, SCALED: tl.constexpr):
        """One convolution on the tiling (A, B, C) padded (P1, P2, P3): the rows loaded at points t (`inside`:
        a row's) times the chirp in at Tables + IN, the forward stages, times the spectrum at SPECTRUM
        (conjugated), the transposed stages, conjugated, times the chirp out at OUT: [R, P2, P3, P1] at
        (r, t2, t3, t1), t = B·C·t1 + C·t2 + t3 (zero where not `inside`)."""
        TILE: tl.constexpr = P1 * P2 * P3
        xr, xi = _load_rows(X, Window, Weight, x_row, v_row, t, inside, in_len, xs_t, xs_p, ws, vs_t, vs_p, scale,
                            N, KIND, WINDOW, WEIGHT, SCALED)
        # Tables read in the tile's own shape (0 · x_row): a broadcast row spills registers on sm_90.
        cr = tl.load(Tables + IN + (t + 0 * x_row), mask=inside, other=0.0)
        ci = tl.load(Tables + IN + N + (t + 0 * x_row), mask=inside, other=0.0)
        xr, xi = _twiddled(xr, xi, cr, ci)
        xr, xi = _forward_stages(xr, xi, Tables, R, A, B, C, P1, P2, P3, False, False, False, PRECISION)
        # (r, k1, k2, k3): times the kernel's spectrum (1/m in it), conjugated for the inverse.
        at = (tl.arange(0, P1)[None, :, None, None] * (P2 * P3) + tl.arange(0, P2)[None, None, :, None] * P3
              + tl.arange(0, P3)[None, None, None, :]) + 0 * x_row
        br = tl.load(Tables + SPECTRUM + at)
        bi = tl.load(Tables + SPECTRUM + TILE + at)
        xr, xi = xr * br - xi * bi, -(xr * bi + xi * br)
        xr, xi = _transposed_stages(xr, xi, Tables, R, A, B, C, P1, P2, P3, PRECISION)
        # (r, t2, t3, t1): the convolution is (xr, −xi); times the chirp out (read here: fewer registers held).
        cr = tl.load(Tables + OUT + (t + 0 * x_row), mask=inside, other=0.0)
        ci = tl.load(Tables + OUT + N + (t + 0 * x_row), mask=inside, other=0.0)
        return cr * xr + ci * xi, ci * xr - cr * xi

    @triton.jit
    def _bluestein_kernel(X, Tables, Out, Window, Weight, rows, in_len, out_len, scale,
                          size0, size1, size2, size3, xs0, xs1, xs2, xs3, xs_t, xs_p,
                          os0, os1, os2, os3, os_t, os_p, ws, vs0, vs1, vs2, vs3, vs_t, vs_p,
                          N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                          P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, R: tl.constexpr,
                          KIND: tl.constexpr, PRECISION: tl.constexpr, WINDOW: tl.constexpr,
                          WEIGHT: tl.constexpr, SCALED: tl.constexpr, HALVES: tl.constexpr):
        # fft_rows's arguments; N the transform's length, (A, B, C) padded (P1, P2, P3) the tiling of m / HALVES.
        x_row, o_row, v_row, row_ok = _row_offsets(R, rows, size1, size2, size3, xs0, xs1, xs2, xs3,
                                                   os0, os1, os2, os3, vs0, vs1, vs2, vs3)
        CHIRP: tl.constexpr = 2 * (P1 * P1 + P2 * P2 + P3 * P3 + P2 * P1 + P3 * P1 + P3 * P2)
        SPECTRUM: tl.constexpr = CHIRP + HALVES * 4 * N  # after each half's chirps in and out
        TILE: tl.constexpr = P1 * P2 * P3
        # The tile [R, P2, P3, P1] at (r, t2, t3, t1), t = B·C·t1 + C·t2 + t3: the points t < N of a row.
        t, in_tile = _tile_index(row_ok, A, B, C, P1, P2, P3)
        yr, yi = _half(X, Window, Weight, Tables, x_row, v_row, t, in_tile & (t < N), in_len, xs_t, xs_p, ws,
                       vs_t, vs_p, scale, CHIRP, CHIRP + 2 * N, SPECTRUM, N, A, B, C, P1, P2, P3, R, KIND,
                       PRECISION, WINDOW, WEIGHT, SCALED)
        if HALVES == 2:  # the odd bins' half, added to the even ones' (fft_plan.Bluestein)
            # float32 out: the first half stored and read back, nothing of it held through the second (sm_90,
            # 4093 c2c: 144 bytes spilled a thread against 408 held in registers; fft_kernel_resources.py).
            # float16 or bfloat16 out, whose rounding would be taken twice: held in float32 registers.
            READ_BACK: tl.constexpr = Out.dtype.element_ty == tl.float32
            if READ_BACK:
                _store_rows(Out, o_row, t, in_tile & (t < out_len), yr, yi, os_t, os_p, KIND)
                tl.debug_barrier()
                # rows // (rows + 1) is 0 (1 ≤ rows < 2**63), which the compiler cannot see: the row masks and
                # tile indices below are recomputed rather than held from the first half (328 → 144 bytes
                # spilled; the row offsets depend on the program id alone and may still be reused).
                many = tl.cast(rows, tl.int64)
                zero = (many // (many + 1)).to(tl.int32)
                x_row, o_row, v_row, row_ok = _row_offsets(R, rows + zero, size1, size2, size3, xs0, xs1, xs2, xs3,
                                                           os0, os1, os2, os3, vs0, vs1, vs2, vs3)
                t, in_tile = _tile_index(row_ok, A, B, C, P1, P2, P3)
                t = t + zero
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
