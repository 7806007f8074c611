"""``aotcuda::row_product``: a matrix product with few rows on the left, at the weight's read speed.

    out[m, n] = Σ_k x[m, k] · w[k, n]  (+ bias[n])

x [M, K] with M small (the tokens of a decode step), w [K, N] with any strides (a linear layer's weight
[N, K] transposed is w with strides (1, K)), bias None or [N]. Returns [M, N] in x's dtype; the products
are summed in float32. Such a product reads the whole weight to make a few rows: it is bound by memory,
and its speed is the weight's bytes over its time.

The CUDA kernel gives each program BLOCK_N output columns and walks K in steps of BLOCK_K, every row of x
at once (tl.dot on a block of rows padded to 16), so each weight element is read once. BLOCK_N and
BLOCK_K are tuned for the shape when AOTInductor compiles it (triton.autotune over ``CONFIGS``): few
columns per program where N is small, so that every multiprocessor has work.
"""

from __future__ import annotations

import os

import torch

from aotcuda.kernels import HAVE_TRITON, launcher

OP = "aotcuda::row_product"


def reference(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The same math in plain torch (float32 sums), the CPU implementation and the tests' reference."""
    out = x.float() @ w.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)


def _check(x, w, bias):
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"{OP}: x [M, K] and w [K, N] expected; got x {tuple(x.shape)} and w {tuple(w.shape)}")
    if bias is not None and tuple(bias.shape) != (w.shape[1],):
        raise ValueError(f"{OP}: bias must be [N] = [{w.shape[1]}]; got {tuple(bias.shape)}")


if HAVE_TRITON:
    import triton
    import triton.language as tl
    from torch.library import triton_op

    CONFIGS = [triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=warps, num_stages=stages)
               for n, k, warps, stages in ((16, 256, 4, 4), (16, 512, 4, 3), (32, 256, 4, 4), (32, 128, 4, 4),
                                           (64, 128, 8, 4), (16, 128, 2, 4))]

    @triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
    @triton.jit
    def _row_product_kernel(X, W, Bias, Out, M, N, K, sxm, sxk, swk, swn, som, son,
                            HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, IEEE: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        # Offsets in int64: Triton types an integer argument below 2**31 as int32, and a weight of more
        # elements than that (a 128k-vocabulary head of width 16k) would wrap k · swk or n · swn.
        columns = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        rows = tl.arange(0, BLOCK_M).to(tl.int64)
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for start in range(0, K, BLOCK_K):
            k = start + tl.arange(0, BLOCK_K).to(tl.int64)
            x = tl.load(X + rows[:, None] * sxm + k[None, :] * sxk, mask=(rows[:, None] < M) & (k[None, :] < K),
                        other=0.0)
            w = tl.load(W + k[:, None] * swk + columns[None, :] * swn,
                        mask=(k[:, None] < K) & (columns[None, :] < N), other=0.0)
            if IEEE:
                acc += tl.dot(x.to(w.dtype), w, input_precision="ieee")
            else:
                acc += tl.dot(x.to(w.dtype), w)
        if HAS_BIAS:
            acc += tl.load(Bias + columns, mask=columns < N, other=0.0).to(tl.float32)[None, :]
        tl.store(Out + rows[:, None] * som + columns[None, :] * son, acc.to(Out.dtype.element_ty),
                 mask=(rows[:, None] < M) & (columns[None, :] < N))

    def launch(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """The kernel on x's device (the op's CUDA implementation; the interpreter runs it on CPU tensors)."""
        _check(x, w, bias)
        rows, columns = x.shape[0], w.shape[1]
        out = torch.empty((rows, columns), dtype=x.dtype, device=x.device)
        block_m = max(16, 1 << (max(rows, 1) - 1).bit_length())
        ieee = torch.float32 in (x.dtype, w.dtype)

        def grid(meta):
            return (triton.cdiv(columns, meta["BLOCK_N"]),)

        kernel, fixed = _row_product_kernel, {}
        if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot time configs: the first one
            kernel, fixed = _row_product_kernel.fn, dict(CONFIGS[0].kwargs)
        launcher(kernel)[grid](
            x, w, bias if bias is not None else w, out, rows, columns, x.shape[1], *x.stride(), *w.stride(),
            *out.stride(), HAS_BIAS=bias is not None, BLOCK_M=block_m, IEEE=ieee, **fixed)
        return out

    @triton_op(OP, mutates_args=())
    def row_product(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return launch(x, w, bias)

    row_product.register_kernel("cpu")(reference)
else:
    row_product = torch.library.custom_op(OP, reference, mutates_args=())

    @row_product.register_fake
    def _(x, w, bias):
        _check(x, w, bias)
        return x.new_empty((x.shape[0], w.shape[1]))
