"""``aotcuda::row_product``: a matrix product with few rows on the left, at the weight's read speed.

    out[m, n] = Σ_k x[m, k] · w[k, n]  (+ bias[n])

x [M, K] with M small (the tokens of a decode step), w [K, N] with any strides (a linear layer's weight
[N, K] transposed is w with strides (1, K)), bias None or [N] (any stride). Returns [M, N] in x's dtype; the products
are summed in float32. Such a product reads the whole weight to make a few rows: it is bound by memory,
and its speed is the weight's bytes over its time.

The CUDA kernel gives each program BLOCK_N output columns and a slice of K, which it walks in steps of
BLOCK_K, every row of x at once (tl.dot on a block of rows padded to 16), so each weight element is read
once whatever the number of rows. The loop is software-pipelined (``num_stages`` tiles of the weight in
flight per program, loaded asynchronously into shared memory), and along K, contiguous in a linear layer's
weight, each thread loads 16 bytes at a time.

Two forms, chosen by the shape (``splits_wanted``):

- *whole*: one program per block of columns walks all of K and writes the output (bias added, converted
  to x's dtype). Right where the column blocks alone give every multiprocessor work: the LM head, w1/w3.
- *split-K*: where they do not (w2 of a decoder, 8192 → 2048: 32 blocks of 64 columns for 132
  multiprocessors), each column block's K is cut into SPLIT_K slices, one program each, which write their
  float32 partial sums for the real rows to a workspace [SPLIT_K, M, N]; a second small kernel sums the
  slices in order (deterministic: the same bits every call, unlike atomic adds), adds the bias and
  converts. The workspace is M · N · SPLIT_K floats (512 KB for w2 at 8 rows, split 8), read back from L2.

Why few-row products were slow before: with 8 rows and 16 columns a program (what filled 132
multiprocessors on a 2048-column weight), every step read half as many bytes of x (from L2) as of the
weight, and one program per multiprocessor kept too few bytes in flight; split-K lets a program take 64
columns (x's share an eighth) and still gives each multiprocessor two programs.

Block sizes, warps, stages and the split are autotuned for the shape when AOTInductor compiles it
(triton.autotune over ``WHOLE`` or ``SPLIT``, keyed on M, N, K). The workspace is sized for the largest
split in the list; the first kernel writes its SPLIT_K to a one-element buffer that the second reads, so
the summing kernel follows whichever config the tuning chose. ``launch(..., plan=Plan(...))`` runs one
fixed config instead (the sweep, the tests; benchmarks/scripts/row_product_sweep.py).
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import torch

from aotcuda.kernels import HAVE_TRITON, launcher

OP = "aotcuda::row_product"
SUM_BLOCK = 256  # outputs a program of the summing kernel makes


class Plan(NamedTuple):
    """One config of the kernel: columns and K-step a program, K slices (1: the whole form), warps, stages.
    BLOCK_K is for 2-byte elements; a float32 weight takes half (``_for_dtype``), the same bytes a stage."""
    block_n: int
    block_k: int
    split_k: int
    warps: int
    stages: int


# The whole form, for weights with many columns (LM head, w1/w3): blocks of 64-128 columns give 256 to
# 2000 programs; 16 and 32 are the old kernel's choices, kept for the tuning to compare.
WHOLE = (Plan(64, 128, 1, 4, 4), Plan(64, 256, 1, 4, 3), Plan(128, 128, 1, 4, 4), Plan(128, 64, 1, 4, 5),
         Plan(32, 256, 1, 4, 4), Plan(16, 256, 1, 4, 4), Plan(64, 128, 1, 8, 4))
# The split-K form, for weights of few columns (wq/wo, q/k/v, w2): 2-8 programs per multiprocessor.
SPLIT = (Plan(64, 128, 4, 4, 4), Plan(64, 128, 8, 4, 3), Plan(64, 256, 4, 4, 3), Plan(64, 256, 8, 4, 3),
         Plan(32, 256, 4, 4, 4), Plan(32, 128, 8, 4, 4), Plan(128, 128, 8, 4, 3), Plan(64, 128, 16, 4, 3))
# Split when 64-column blocks would give fewer programs than SPLIT_BELOW times the multiprocessors.
SPLIT_BELOW = 1.0


def reference(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The same math in plain torch (float32 sums), the CPU implementation and the tests' reference."""
    _check(x, w, bias)
    out = x.float() @ w.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)


def splits_wanted(columns: int, depth: int, processors: int) -> bool:
    """Whether a weight of ``columns`` × ``depth`` (N × K) takes the split-K form: its 64-column blocks
    are fewer than SPLIT_BELOW programs a multiprocessor, and K holds at least two 128-deep steps."""
    return -(-columns // 64) < SPLIT_BELOW * processors and depth >= 256


def _check(x, w, bias):
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"{OP}: x [M, K] and w [K, N] expected; got x {tuple(x.shape)} and w {tuple(w.shape)}")
    if bias is not None and tuple(bias.shape) != (w.shape[1],):
        raise ValueError(f"{OP}: bias must be [N] = [{w.shape[1]}]; got {tuple(bias.shape)}")


def _for_dtype(plans: tuple[Plan, ...], element_size: int) -> tuple[Plan, ...]:
    """The plans with BLOCK_K scaled to the same bytes a stage (a float32 tile of 256 × 128 in 4 stages
    would pass the 228 KB of shared memory a multiprocessor has)."""
    scale = max(1, element_size // 2)
    return tuple(plan._replace(block_k=max(16, plan.block_k // scale)) for plan in plans)


if HAVE_TRITON:
    import triton
    import triton.language as tl
    from torch.library import triton_op

    @triton.jit
    def _row_product_kernel(X, W, Bias, Out, Part, Splits, M, N, K, sxm, sxk, swk, swn, som, son, sb,
                            HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, IEEE: tl.constexpr, UNIT_K: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
        # Offsets in int64: Triton types an integer argument below 2**31 as int32, and a weight of more
        # elements than that (a 128k-vocabulary head of width 16k) would wrap k · swk or n · swn.
        columns = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        rows = tl.arange(0, BLOCK_M).to(tl.int64)
        # this program's K slice: a whole number of BLOCK_K steps (the last slice shorter, or empty), so a
        # step never crosses into the next slice and `k < K` is the only mask K needs
        steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
        begin = tl.program_id(1) * steps * BLOCK_K
        end = tl.minimum(begin + steps * BLOCK_K, K)
        # UNIT_K: x and w are contiguous along K (a linear layer's), written as a literal stride of 1 so
        # that the loads are 16 bytes wide whether or not the caller's compiler specializes a 1 argument
        if UNIT_K:
            x_at = X + rows[:, None] * sxm
            w_at = W + columns[None, :] * swn
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for start in range(begin, end, BLOCK_K):
            k = start + tl.arange(0, BLOCK_K).to(tl.int64)
            if UNIT_K:
                x_ptr = x_at + k[None, :]
                w_ptr = w_at + k[:, None]
            else:
                x_ptr = X + rows[:, None] * sxm + k[None, :] * sxk
                w_ptr = W + k[:, None] * swk + columns[None, :] * swn
            x = tl.load(x_ptr, mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
            w = tl.load(w_ptr, mask=(k[:, None] < K) & (columns[None, :] < N), other=0.0)
            if IEEE:  # a float32 operand: both in float32 (x.to(w.dtype) would round a float32 x to w's half type)
                acc += tl.dot(x.to(tl.float32), w.to(tl.float32), input_precision="ieee")
            else:
                acc += tl.dot(x.to(w.dtype), w)
        keep = (rows[:, None] < M) & (columns[None, :] < N)
        if SPLIT_K == 1:
            if HAS_BIAS:
                acc += tl.load(Bias + columns * sb, mask=columns < N, other=0.0).to(tl.float32)[None, :]
            tl.store(Out + rows[:, None] * som + columns[None, :] * son, acc.to(Out.dtype.element_ty), mask=keep)
        else:
            # the real rows' partials at [slice, m, n]; the summing kernel reads how many slices there are
            part = (tl.program_id(1) * M + rows[:, None]).to(tl.int64) * N + columns[None, :]
            tl.store(Part + part, acc, mask=keep)
            tl.store(Splits, SPLIT_K, mask=(tl.program_id(0) == 0) & (tl.program_id(1) == 0))

    @triton.jit
    def _sum_kernel(Part, Splits, Bias, Out, M, N, som, son, sb, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
        # out[m, n] = Σ_s part[s, m, n] (+ bias[n]), the slices added in order: the same bits every call
        at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        keep = at < M * N
        acc = tl.zeros([BLOCK], tl.float32)
        for s in range(0, tl.load(Splits)):
            acc += tl.load(Part + s * M * N + at, mask=keep, other=0.0)
        m = at // N
        n = at % N
        if HAS_BIAS:
            acc += tl.load(Bias + n * sb, mask=keep, other=0.0).to(tl.float32)
        tl.store(Out + m * som + n * son, acc.to(Out.dtype.element_ty), mask=keep)

    @functools.cache
    def _tuned(plans: tuple[Plan, ...]):
        """The kernel autotuned over ``plans`` at its first call for each (M, N, K) (one plan: no timing)."""
        configs = [triton.Config({"BLOCK_N": p.block_n, "BLOCK_K": p.block_k, "SPLIT_K": p.split_k},
                                 num_warps=p.warps, num_stages=p.stages) for p in plans]
        return triton.autotune(configs=configs, key=["M", "N", "K"])(_row_product_kernel)

    def _processors(device: torch.device) -> int:
        return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132

    def tuned_plans(x: torch.Tensor, w: torch.Tensor) -> tuple[Plan, ...]:
        """The plans the op's tuning chooses among for x @ w: SPLIT or WHOLE, BLOCK_K fitted to the dtype."""
        plans = SPLIT if splits_wanted(w.shape[1], w.shape[0], _processors(x.device)) else WHOLE
        return _for_dtype(plans, max(x.element_size(), w.element_size()))

    def tuned_choice(x: torch.Tensor, w: torch.Tensor) -> Plan | None:
        """The plan the tuning chose for x @ w in this process (None before the first call of its shape)."""
        config = getattr(_tuned(tuned_plans(x, w)), "best_config", None)
        if config is None:
            return None
        meta = config.kwargs
        return Plan(meta["BLOCK_N"], meta["BLOCK_K"], meta["SPLIT_K"], config.num_warps, config.num_stages)

    def launch(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, plan: Plan | None = None) -> torch.Tensor:
        """The kernel on x's device (the op's CUDA implementation; the interpreter runs it on CPU tensors).
        ``plan``: one fixed config instead of the tuned choice among WHOLE or SPLIT."""
        _check(x, w, bias)
        rows, depth, columns = x.shape[0], x.shape[1], w.shape[1]
        plans = _for_dtype((plan,), max(x.element_size(), w.element_size())) if plan is not None else tuned_plans(x, w)
        split = plans[0].split_k > 1  # a list holds one form only
        out = torch.empty((rows, columns), dtype=x.dtype, device=x.device)
        # the whole form touches neither buffer: one element each (not ``out`` again, which a caller's
        # functionalization, seeing one tensor in two mutable arguments, might copy back twice)
        most = max(p.split_k for p in plans) if split else 0
        part = torch.empty((max(1, most * rows * columns),), dtype=torch.float32, device=x.device)
        splits = torch.empty((1,), dtype=torch.int32, device=x.device)
        block_m = max(16, 1 << (max(rows, 1) - 1).bit_length())
        ieee = torch.float32 in (x.dtype, w.dtype)
        bias_arg = bias if bias is not None else w
        bias_stride = bias.stride(0) if bias is not None else 0  # a bias sliced from a longer one: stride ≠ 1

        def grid(meta):
            return (triton.cdiv(columns, meta["BLOCK_N"]), meta["SPLIT_K"])

        kernel, fixed = _tuned(plans), {}
        if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot time configs: the first one
            kernel = _row_product_kernel
            fixed = {"BLOCK_N": plans[0].block_n, "BLOCK_K": plans[0].block_k, "SPLIT_K": plans[0].split_k}
        launcher(kernel)[grid](
            x, w, bias_arg, out, part, splits, rows, columns, depth, *x.stride(), *w.stride(), *out.stride(),
            bias_stride, HAS_BIAS=bias is not None, BLOCK_M=block_m, IEEE=ieee,
            UNIT_K=x.stride(1) == 1 and w.stride(0) == 1,
            **fixed)
        if split:
            launcher(_sum_kernel)[(triton.cdiv(rows * columns, SUM_BLOCK),)](
                part, splits, bias_arg, out, rows, columns, *out.stride(), bias_stride, HAS_BIAS=bias is not None,
                BLOCK=SUM_BLOCK)
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
