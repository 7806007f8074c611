"""``aotcuda::decode_attention``: attention of a few query rows over a KV cache, one pass over the cache.

    out[b, h, s, :] = softmax_l(scale · q[b, h, s] · k[b, h // group, l] + bias[b, h, s, l]) · v[b, h // group, l]

q [B, Hq, Sq, D], k [B, Hkv, L, D], v [B, Hkv, L, Dv] (any strides; Hq = group · Hkv; a cache of batch 1
is shared by the whole batch, as a repeat_kv that expands it over the batch reads it), bias None or a float
tensor that broadcasts to [B, Hq, Sq, L] (an additive mask; −inf hides a position: its logit is −inf whatever
its key holds, as in eager's ``where(visible, s, −inf)``, so a cache's unfilled NaN or ±inf keys are never
mixed in; a finite bias is added; a NaN is not −inf: its row is NaN, as eager's). Returns [B, Hq, Sq, Dv]
in q's dtype. The products and the softmax run in float32 (probabilities are rounded to v's dtype before
their product with v, as eager's attention rounds them).

The CUDA kernel is flash-decoding (Dao, Haziza, Massa, Sizov, 2023): the cache is cut into ``splits``
chunks; one program per (batch, KV head, chunk) reads its chunk of K and V once for all the group's query
rows (grouped-query heads share the read), keeps a running max and sum (the online softmax of Milakov and
Gimelshein, 2018) and writes a partial result; a second kernel combines the chunks with weights
exp(max_c − max). A block of positions that the bias hides for every row is skipped without reading its
K and V (a static cache filled to position p reads p positions, not L). A row hidden everywhere gives NaN,
as eager's softmax does.

How the chunk kernel reads the cache (chosen on the H200, benchmarks/scripts/decode_attention_sweep.py,
docs/performance.md): the chunk's visible positions [begin, end) are found from its bias first, in one load
at a decoder's sizes, so that the block loop over them holds no branch and Triton's software pipelining
(``STAGES``, tl.range's num_stages) copies the next block's K, V and bias while one is computed (a per-block
"is it hidden" branch kept K and V out of the pipeliner's reach); chunk c reads the blocks c, c + chunks,
c + 2·chunks, ... (interleaved, not a run), so that a cache filled to position p leaves every chunk its
share of the p visible positions instead of leaving the last chunks idle; a bias row shared by every query
row (a decoder's [1, 1, 1, L] mask) is loaded once a block, not once a row. Blocks of ``BLOCK_L`` = 128
positions. One layer of the 1.2B decoder's attention (32 query heads over 8 KV heads of 64, bf16) took 8.6 µs
at batch 8, position 1024 (12.5 with the kernel before: a run of 64-position blocks a chunk, each behind a
branch), 10.8 at position 2047 (14.5), and 5.3 and 5.4 at batch 1 (5.8).
"""

from __future__ import annotations

import math

import torch

from aotcuda.kernels import HAVE_TRITON, launcher

OP = "aotcuda::decode_attention"
BLOCK_L = 128  # cache positions a program reads per step
STAGES = 2  # software pipelining of the block loop (tl.range num_stages): 2 beat 1, 3 and 4 on the H200


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float,
              group: int) -> torch.Tensor:
    """The same math in plain torch (float32), the CPU implementation and the tests' reference."""
    _check(q, k, v, bias, group)
    k32 = k.float().repeat_interleave(group, dim=1)
    v32 = v.float().repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float(), k32.transpose(-1, -2)) * scale
    if bias is not None:
        bias = bias.float()
        scores = (scores + bias).masked_fill(bias == -math.inf, -math.inf)  # a hidden key is not read
    probs = torch.softmax(scores, dim=-1).to(v.dtype).float()
    return torch.matmul(probs, v32).to(q.dtype)


def splits_for(batch_heads: int, length: int, processors: int) -> int:
    """Chunks of the cache: enough programs (batch_heads · chunks) for about two per multiprocessor, each
    chunk a whole number of BLOCK_L blocks (a power of two, so that the combine kernel reads them in one
    tile). More chunks than that make each program's fixed work (its q rows, its partial writes, the
    combine's reads) outweigh its share of the cache: at batch 8, 32 chunks of one block each wrote 8 MB of
    partials for 17 MB of cache read."""
    blocks = max(1, -(-length // BLOCK_L))
    want = max(1, -(-2 * processors // max(batch_heads, 1)))
    return min(1 << (want - 1).bit_length(), 1 << (blocks.bit_length() - 1))


def _strides4(t: torch.Tensor) -> list:
    """t's strides as a [B, H, S, L]-shaped operand: a dim of static size 1 broadcasts (stride 0), and
    missing leading dims are broadcast ones. A symbolic size (a dynamic batch) is never compared with 1:
    that would guard on it; such a dim is q's own, read with its stride."""
    shape, strides = [1] * (4 - t.dim()) + list(t.shape), [0] * (4 - t.dim()) + list(t.stride())
    return [0 if type(size) is int and size == 1 else stride for size, stride in zip(shape, strides)]


def _check(q, k, v, bias, group):
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"{OP}: q, k and v must be 4-d [B, H, S, D]; got {q.dim()}, {k.dim()} and {v.dim()} dims")
    if q.shape[1] != k.shape[1] * group or k.shape[:3] != v.shape[:3] or q.shape[-1] != k.shape[-1] \
            or k.shape[0] not in (1, q.shape[0]):
        raise ValueError(f"{OP}: shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not "
                         f"fit group {group} (q heads = group x KV heads, k and v of one cache, of q's batch or 1)")
    if bias is not None and (bias.dim() > 4 or not bias.is_floating_point() or not _broadcasts(bias, q, k)):
        raise ValueError(f"{OP}: bias must be a float tensor of at most 4 dims that broadcasts to [B, Hq, Sq, L] = "
                         f"{[*q.shape[:3], k.shape[2]]}; got {bias.dtype} of shape {tuple(bias.shape)}")


def _broadcasts(bias, q, k) -> bool:
    """Whether bias's static sizes broadcast to [B, Hq, Sq, L] (the kernel reads it with _strides4's
    strides: a size that neither is 1 nor matches would be read past its end). A symbolic size on either
    side is not compared: that would guard on it."""
    target = [*q.shape[:3], k.shape[2]][4 - bias.dim():]
    return all(type(size) is not int or type(want) is not int or size in (1, want)
               for size, want in zip(bias.shape, target))


if HAVE_TRITON:
    import triton
    import triton.language as tl
    from torch.library import triton_op

    @triton.jit
    def _bias_rows(Bias, b, head, pos, at, ok, row_ok, sbb, sbh, sbs, sbl, BIAS_ROW: tl.constexpr):
        """The bias at positions ``at`` ([N]) of the program's rows in float32, −inf where not ``ok``: [BLOCK_M,
        N], or [1, N] where every row shares one bias row (the decoder's causal mask [1, 1, 1, L]), loaded
        once instead of as BLOCK_M copies."""
        at64 = at.to(tl.int64)
        if BIAS_ROW:
            tile = tl.load(Bias + b * sbb + at64[None, :] * sbl, mask=ok[None, :], other=float("-inf"))
        else:
            tile = tl.load(Bias + b * sbb + head[:, None] * sbh + pos[:, None] * sbs + at64[None, :] * sbl,
                           mask=row_ok[:, None] & ok[None, :], other=float("-inf"))
        return tile.to(tl.float32)

    @triton.jit
    def _visible(bias):
        """[N] of a bias [rows, N]: whether any row sees the position. A NaN is seen (it is not −inf), so that
        its row's result is NaN, as eager's softmax gives: tl.max, which on CUDA drops a NaN, would hide it."""
        return tl.max((bias != float("-inf")).to(tl.int32), 0) > 0

    @triton.jit
    def _attend(q, K, V, kbase, vbase, at, ok, bias, m_i, l_i, acc, scale, skl, skd, svl, svd,
                D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                IEEE: tl.constexpr):
        """One block of positions ``at`` folded into the running max, sum and output; K and V are read at
        the ``ok`` positions only (0 elsewhere, where the bias is −inf)."""
        d = tl.arange(0, BLOCK_D)
        dv = tl.arange(0, BLOCK_DV)
        at64 = at.to(tl.int64)  # a sequence-major cache: position · stride passes 2**31
        k = tl.load(K + kbase + at64[None, :] * skl + d[:, None] * skd, mask=(d[:, None] < D) & ok[None, :],
                    other=0.0)
        # V's load is issued with K's, before the scores that do not need it
        vals = tl.load(V + vbase + at64[:, None] * svl + dv[None, :] * svd, mask=ok[:, None] & (dv[None, :] < DV),
                       other=0.0)
        if IEEE:
            s = tl.dot(q, k, input_precision="ieee")
        else:
            s = tl.dot(q, k)
        # float32 whatever type the scale argument gets: AOTInductor passes a Python float as fp64
        s = (s * scale).to(tl.float32)
        s = tl.where(bias == float("-inf"), float("-inf"), s + bias)  # hidden: keys not read
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(vals.dtype), vals, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(vals.dtype), vals)
        return m_new, l_i, acc

    @triton.jit
    def _chunk_kernel(Q, K, V, Bias, PartO, PartM, PartL,
                      sqb, sqh, sqs, sqd, skb, skh, skl, skd, svb, svh, svl, svd,
                      sbb, sbh, sbs, sbl, scale, length, chunk_blocks,
                      KV_HEADS: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr, SQ: tl.constexpr,
                      D: tl.constexpr, DV: tl.constexpr, SPLITS: tl.constexpr, HAS_BIAS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                      BLOCK: tl.constexpr, IEEE: tl.constexpr, BIAS_ROW: tl.constexpr, STAGES: tl.constexpr,
                      SCAN: tl.constexpr):
        pair = tl.program_id(0)  # b · KV_HEADS + kv head
        split = tl.program_id(1)
        b = (pair // KV_HEADS).to(tl.int64)  # int64 offsets: a cache may hold over 2**31 elements, and Triton
        kv = (pair % KV_HEADS).to(tl.int64)  # types a stride below 2**31 as int32 (b · stride would wrap)
        rows = tl.arange(0, BLOCK_M)  # row m of the KV head = (g, s): query head kv · GROUP + g, position s
        head = kv * GROUP + rows // SQ
        pos = rows % SQ
        row_ok = rows < ROWS
        d = tl.arange(0, BLOCK_D)
        dv = tl.arange(0, BLOCK_DV)
        q = tl.load(Q + b * sqb + head[:, None] * sqh + pos[:, None] * sqs + d[None, :] * sqd,
                    mask=row_ok[:, None] & (d[None, :] < D), other=0.0)
        q = q.to(K.dtype.element_ty)
        kbase = b * skb + kv * skh
        vbase = b * svb + kv * svh
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
        offsets = tl.arange(0, BLOCK)
        # block i of the chunk starts at first + i · step: every SPLITS-th block from the split's own, so that a
        # mask hiding the cache's end leaves each chunk its share of the visible blocks (a run of blocks a chunk
        # left the last chunks idle at position 1024 of 2048)
        first = split * BLOCK
        step = SPLITS * BLOCK
        lo = 0
        hi = chunk_blocks
        begin = 0
        end = length
        if HAS_BIAS:
            # the chunk's visible positions [begin, end) from its bias first (SCAN positions a load,
            # the whole chunk in one at the decoder's sizes), then a loop with no test in it over the blocks
            # that hold them, which Triton pipelines; K and V are not read outside [begin, end)
            begin = length
            end = 0
            cols = tl.arange(0, SCAN)
            for g in range(0, chunk_blocks, SCAN // BLOCK):
                i = g + cols // BLOCK
                at = first + i * step + cols % BLOCK
                seen = _visible(_bias_rows(Bias, b, head, pos, at, (i < chunk_blocks) & (at < length), row_ok,
                                           sbb, sbh, sbs, sbl, BIAS_ROW))
                begin = tl.minimum(begin, tl.min(tl.where(seen, at, length), 0))
                end = tl.maximum(end, tl.max(tl.where(seen, at + 1, 0), 0))
            lo = tl.where(end > begin, (begin - first) // step, 0)
            hi = tl.where(end > begin, (end - 1 - first) // step + 1, 0)
        for i in tl.range(lo, hi, num_stages=STAGES):
            at = first + i * step + offsets
            # the bias's mask is `at < length` alone (whole 16-element runs, which the pipeliner's
            # asynchronous copies need): outside [begin, end) the bias is −inf for every row anyway
            if HAS_BIAS:
                bias = _bias_rows(Bias, b, head, pos, at, at < length, row_ok, sbb, sbh, sbs, sbl, BIAS_ROW)
            else:
                bias = tl.where(at < length, 0.0, float("-inf"))[None, :]
            ok = (at >= begin) & (at < end)
            m_i, l_i, acc = _attend(q, K, V, kbase, vbase, at, ok, bias, m_i, l_i, acc, scale,
                                    skl, skd, svl, svd, D, DV, BLOCK_D, BLOCK_DV, IEEE)
        base = pair * SPLITS + split
        # only the real rows: BLOCK_M pads the group's rows to tl.dot's 16 (4 at a group of 4), and the padding's
        # partials would be written for nothing (the combine kernel reads real rows only)
        tl.store(PartM + base * BLOCK_M + rows, m_i, mask=row_ok)
        tl.store(PartL + base * BLOCK_M + rows, l_i, mask=row_ok)
        tl.store(PartO + (base * BLOCK_M + rows[:, None]) * BLOCK_DV + dv[None, :], acc, mask=row_ok[:, None])

    @triton.jit
    def _combine_kernel(PartO, PartM, PartL, Out, sob, soh, sos, sod,
                        KV_HEADS: tl.constexpr, GROUP: tl.constexpr, SQ: tl.constexpr, DV: tl.constexpr,
                        SPLITS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr):
        # One program per (batch · KV head, query row): its [SPLITS, BLOCK_DV] partials fit in registers (a
        # program for all the rows of a KV head held [SPLITS, BLOCK_M, BLOCK_DV] and spilled: 6 µs a call on
        # the H200 at 32 splits, more than the chunk kernel).
        pair = tl.program_id(0)
        row = tl.program_id(1)
        b = (pair // KV_HEADS).to(tl.int64)
        kv = pair % KV_HEADS
        dv = tl.arange(0, BLOCK_DV)
        c = tl.arange(0, SPLITS)
        at = (pair * SPLITS + c) * BLOCK_M + row  # [SPLITS]
        m = tl.load(PartM + at)
        l = tl.load(PartL + at)
        top = tl.max(m, 0)  # −inf for a row hidden everywhere: its weights are NaN, as eager's softmax gives
        w = tl.exp(m - top)  # 0 for an empty chunk (m = −inf), NaN where top = −inf too
        total = tl.sum(w * l, 0)
        o = tl.load(PartO + at[:, None] * BLOCK_DV + dv[None, :])  # [SPLITS, BLOCK_DV]
        out = tl.sum(o * w[:, None], 0) / total
        head = kv * GROUP + row // SQ
        pos = row % SQ
        tl.store(Out + b * sob + head * soh + pos * sos + dv * sod, out.to(Out.dtype.element_ty), mask=dv < DV)

    def launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float,
               group: int) -> torch.Tensor:
        """The two kernels on q's device (the op's CUDA implementation; on CPU tensors under
        TRITON_INTERPRET=1, Triton's interpreter runs them, as the tests do)."""
        _check(q, k, v, bias, group)
        batch, heads, sq, width = q.shape
        kv_heads, length, width_v = k.shape[1], k.shape[2], v.shape[3]
        k, v = k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)  # a shared cache: batch stride 0
        rows = group * sq
        block_m = max(16, 1 << (rows - 1).bit_length())
        block_d, block_dv = max(16, 1 << (width - 1).bit_length()), max(16, 1 << (width_v - 1).bit_length())
        processors = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
        # chunks for the programs there are: batch · KV heads where the batch is static; a symbolic batch
        # (exported dynamic) cannot choose a constexpr from its size, so the chunks are chosen for batch 1
        splits = splits_for(batch * kv_heads if type(batch) is int else kv_heads, length, processors)
        blocks = -(-length // BLOCK_L)
        chunk_blocks = -(-blocks // splits)
        out = torch.empty((batch, heads, sq, width_v), dtype=q.dtype, device=q.device)
        if type(length) is int and length == 0:  # an empty cache: eager's product of empty probabilities, zeros
            return out.zero_()
        part_o = torch.empty((batch * kv_heads * splits * block_m * block_dv,), dtype=torch.float32, device=q.device)
        part_m = torch.empty((batch * kv_heads * splits * block_m,), dtype=torch.float32, device=q.device)
        part_l = torch.empty_like(part_m)
        bias_arg = bias if bias is not None else q
        bias_strides = _strides4(bias) if bias is not None else [0, 0, 0, 0]
        # every row of a program reads one bias row: strides 0 over heads and query positions
        bias_row = bias is not None and all(type(s) is int and s == 0 for s in bias_strides[1:3])
        # positions of the bias a load of the bounds' scan reads: the chunk, up to 2048 values a program
        scan = min(1 << (chunk_blocks - 1).bit_length(), max(1, (2048 if bias_row else 4096 // block_m) // BLOCK_L))
        ieee = q.dtype == torch.float32 or k.dtype == torch.float32
        launcher(_chunk_kernel)[(batch * kv_heads, splits)](
            q, k, v, bias_arg, part_o, part_m, part_l, *q.stride(), *k.stride(), *v.stride(), *bias_strides,
            float(scale), length, chunk_blocks, KV_HEADS=kv_heads, GROUP=group, ROWS=rows, SQ=sq, D=width, DV=width_v,
            SPLITS=splits, HAS_BIAS=bias is not None, BLOCK_M=block_m, BLOCK_D=block_d, BLOCK_DV=block_dv,
            BLOCK=BLOCK_L, IEEE=ieee, BIAS_ROW=bias_row, STAGES=STAGES, SCAN=scan * BLOCK_L)
        launcher(_combine_kernel)[(batch * kv_heads, rows)](
            part_o, part_m, part_l, out, *out.stride(), KV_HEADS=kv_heads, GROUP=group, SQ=sq, DV=width_v,
            SPLITS=splits, BLOCK_M=block_m, BLOCK_DV=block_dv)
        return out

    @triton_op(OP, mutates_args=())
    def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None,
                         scale: float, group: int) -> torch.Tensor:
        return launch(q, k, v, bias, scale, group)

    decode_attention.register_kernel("cpu")(reference)
else:
    decode_attention = torch.library.custom_op(OP, reference, mutates_args=())

    @decode_attention.register_fake
    def _(q, k, v, bias, scale, group):
        _check(q, k, v, bias, group)
        return q.new_empty((*q.shape[:3], v.shape[3]))


def scale_of(width: int) -> float:
    """SDPA's default scale for a head width."""
    return 1.0 / math.sqrt(width)
