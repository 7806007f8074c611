"""PromptAttentionPass: attention of many query rows written out becomes one fused attention call.

A prompt (prefill) attends with every new position at once. Written as ``matmul → scale → mask → softmax →
matmul`` (Meta's Llama code, our decoder, transformers' eager attention), Inductor computes it as two
batched GEMMs with the scores and probabilities of every head, [B, H, Sq, L], written to memory and read
back between them: at Sq = L = 2048 that is hundreds of MB a layer. ``scaled_dot_product_attention``
computes the same in one kernel that keeps a block of scores on chip (FlashAttention, Dao et al. 2022;
xFormers' memory-efficient attention where a mask is given), and is what transformers' default attention
calls: its Llama of our decoder's sizes prefilled 2048 tokens in 10.2 ms on the H200 where our decoder's
written-out attention took 15.0 (docs/performance.md, "Prefill").

This pass finds the written-out form (passes/decode_attention.py's matcher: q [B, H, Sq, D], k and v of
[B, Hkv, L, D] caches, possibly through ``repeat_kv``) where the query rows per KV head (group × Sq) are more
than ``min_rows`` − 1 (fewer belong to SplitCacheAttentionPass, which runs first) and the scale and mask
read as ``scale · s + bias`` (passes/score_chain.py), and writes::

    out = scaled_dot_product_attention(q, k', v', attn_mask=bias (q's dtype), scale=scale)

k' and v' are the caches repeated to H heads (a copy of [B, H, L, D]: what ``repeat_kv`` wrote, a small
fraction of the scores' bytes; SDPA's ``enable_gqa`` is taken by fewer of its kernels). The softmax is
computed in float32 inside the kernel from the scores of the inputs' dtype; the program's own form rounds
the scores and probabilities to its dtypes between its ops: results differ by that rounding. A query row
that the mask hides entirely is NaN in eager and may be 0 here.

The batch and the cache length may be symbolic (the new nodes name neither); the heads, the query rows and
the head dims must be static. Attentions are matched in graph order, each after the rewrites before it, so
that one reading another's result reads the new one.

Not matched, and kept as written: a chain that is not affine in the scores (a soft cap ``tanh(s / c) · c``),
a non-4-d layout, the few-row attentions of a decode step, and a mask the program builds in float32 for
queries of lower precision where q's dtype, which SDPA takes it in, would change it (a float32 bias of its
own such as ALiBi's, a −1e9 or finfo(float32).min fill in float16 or bfloat16: ``_fits``). The pass runs in the CUDA lowering, on by
default (AOTCUDA_PROMPT_ATTENTION=0 turns it off; aotcuda.switches has the measurement).
"""

from __future__ import annotations

import copy
import dataclasses
import math

import torch
from torch.export import ExportedProgram

from aotcuda.passes import decode_attention
from aotcuda.passes.emit import emit, replace_uses
from aotcuda.passes.program_copy import copied_graph_module, with_graph
from aotcuda.passes.result import PassResult
from aotcuda.passes.score_chain import affine_chain, fill_value, scale_only

aten = torch.ops.aten
SDPA = decode_attention.SDPA


@dataclasses.dataclass
class _Prompt:
    """One written-out attention: ``match`` (decode_attention.Match: q [B, Hq, M, D], the caches
    [B, Hkv, L, D], group = Hq / Hkv) and ``rep``, the query heads per KV head that its M rows hold as
    [rep, Sq] (our decoder's grouped form: scores [B, Hkv, rep, Sq, L]), 1 where each query head is a head
    of its own (M = Sq); ``before_grouping``, the grouped form's scores before their view to 5-d, where
    ops (a scale) come first."""

    match: object
    rep: int
    before_grouping: tuple | None = None  # (first, last) node of the [B, Hkv, rep·Sq, L] ops before the view

    @property
    def rows(self) -> int:
        return self.match.q.meta["val"].shape[2]


class PromptAttentionPass:
    """``pass(ep) → ep``: written-out attention of many query rows as one ``scaled_dot_product_attention``
    (module docstring).

    min_rows: the fewest query rows per KV head (group × Sq) rewritten (SplitCacheAttentionPass's
    ``max_rows`` + 1, so that the two passes split the attentions between them). A GraphPass
    (passes/result.py): ``result.counts`` has ``rewritten`` and ``kept`` (written-out attentions of enough
    rows whose scale and mask are not ``scale · s + bias``, or whose mask would lose values in the query's
    dtype)."""

    def __init__(self, min_rows: int = 17) -> None:
        self.min_rows = min_rows
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        graph_module = copied_graph_module(ep)
        graph = graph_module.graph
        signature = copy.deepcopy(ep.graph_signature)
        constants = decode_attention.lifted_constants(ep)
        rewritten = kept = 0
        # Matched in graph order, each after the rewrites before it: an attention that reads an earlier one's
        # result must read the new result, not the node it replaced (which would then stay alive).
        for node in list(graph.nodes):
            prompt = _match(node)
            if prompt is None or not self._wanted(prompt):
                continue
            if _rewrite(graph, prompt, signature, constants):
                rewritten += 1
            else:
                kept += 1
        self.result = PassResult(type(self).__name__, rewritten > 0, {"rewritten": rewritten, "kept": kept})
        if not rewritten:
            return ep
        graph.eliminate_dead_code()
        graph.lint()
        graph_module.recompile()
        return with_graph(ep, graph_module, graph_signature=signature)

    def _wanted(self, prompt: _Prompt) -> bool:
        """Enough query rows per KV head, and the sizes the new nodes name static (the batch and the cache
        length may be symbolic: the new nodes leave them to -1 and flattening)."""
        q, v = prompt.match.q.meta["val"], prompt.match.v.meta["val"]
        static = (q.shape[1], q.shape[2], q.shape[3], v.shape[1], v.shape[3])
        return all(type(size) is int for size in static) and prompt.rows * prompt.match.group >= self.min_rows


def _match(node) -> _Prompt | None:
    """A written-out attention at ``node`` (its first product): transformers' and Meta's 4-d form through
    decode_attention's matcher, or the grouped 5-d form; None elsewhere (SDPA calls included: they are
    fused already)."""
    if node.op != "call_function" or node.target is not aten.bmm.default:
        return None
    match = decode_attention.match_attention(node)
    if match is not None:
        return _Prompt(match, 1) if match.scores is not None else None
    return _match_grouped(node)


def _match_grouped(bmm) -> _Prompt | None:
    """``bmm(q, kᵀ) → view [B, Hkv, rep·Sq, L]`` → a scale → ``view [B, Hkv, rep, Sq, L]`` (or that view
    at once) → scale, mask, conversions → ``_softmax(-1)`` → conversions and views → ``bmm(p, v) → view
    [B, Hkv, rep·Sq, Dv]``, q of [B, Hkv, rep·Sq, D] and k, v [B, Hkv, L, D] caches read as they are
    (models/decoder.py's prompt attention: the mask [Sq, L] broadcasts over the group's rep heads)."""
    first = decode_attention.only_user(bmm)
    if first is None or first.target is not aten.view.default:
        return None
    flat, node = None, first
    if len(_shape(first)) == 4:  # [B, Hkv, rep·Sq, L]: ops of that shape (a scale), then the grouping view
        flat = first
        while True:
            user = decode_attention.only_user(node)
            if user is None:
                return None
            if user.target is aten.view.default and len(_shape(user)) == 5:
                break
            if user.target not in decode_attention.SCORE_OPS or _shape(user) != _shape(first):
                return None
            node = user
        scores = user
    else:
        scores = first
    if len(_shape(scores)) != 5:
        return None
    batch, kv_heads, rep, rows, length = _shape(scores)
    grouped = rep * rows
    if flat is not None and _shape(flat) != (batch, kv_heads, grouped, length):
        return None
    width = _shape(bmm.args[0])[-1]
    q = decode_attention.back_to_4d(bmm.args[0], (batch, kv_heads, grouped, width))
    transposed = decode_attention.back_to_4d(bmm.args[1], (batch, kv_heads, width, length))
    if q is None or transposed is None or transposed.target is not aten.permute.default \
            or list(transposed.args[1]) != [0, 1, 3, 2]:
        return None
    chain = decode_attention.softmax_chain(scores)
    if chain is None:
        return None
    logits, softmax, probs, passed = chain
    dropped = [bmm, first, scores, softmax, *passed]
    out = decode_attention.only_user(probs)
    if out is None or out.target is not aten.view.default or _shape(out)[:3] != (batch, kv_heads, grouped):
        return None
    v = decode_attention.back_to_4d(probs.args[1], (batch, kv_heads, length, _shape(out)[3]))
    if v is None:
        return None
    k, k_group = decode_attention.cache_of(transposed.args[0])
    v, v_group = decode_attention.cache_of(v)
    if k_group != 1 or v_group != 1:
        return None
    match = decode_attention.Match(q, k, v, 1, bmm, scores, logits, out, dropped + [probs])
    return _Prompt(match, rep, None if flat is None else (flat, scores.args[0]))


def _fits(prompt: _Prompt, dtype: torch.dtype, constants: dict) -> bool:
    """Whether the mask of an attention loses nothing that matters in ``dtype`` (q's), where the program
    builds it in another (float32): every tensor it adds is of ``dtype`` or narrower in range, and every
    fill is −inf or within ``dtype``'s range (a float32 −1e9 or finfo(float32).min is −inf in float16 or
    bfloat16: a row the mask hides entirely would then differ). A float32 bias of its own (ALiBi, a
    padding mask computed in float32) is not rounded to ``dtype``: the attention is kept."""
    largest = torch.finfo(dtype).max
    match, node = prompt.match, prompt.match.scores
    while node is not match.logits:
        user = decode_attention.only_user(node)
        others = [a for a in (*user.args, *user.kwargs.values()) if a is not node]
        if user.target in (aten.add.Tensor, aten.sub.Tensor):
            if any(isinstance(a, torch.fx.Node) and a.meta["val"].dtype != dtype for a in others):
                return False
        elif user.target in (aten.where.self, aten.masked_fill.Scalar, aten.masked_fill.Tensor):
            fill = others[-1]
            value = fill_value(fill, constants)
            if value is None and not (isinstance(fill, torch.fx.Node) and fill.meta["val"].dtype == dtype):
                return False
            if value is not None and value != -math.inf and abs(value) > largest:
                return False
        node = user
    return True


def _shape(node) -> tuple:
    return decode_attention.shape_of(node)


def _repeated(graph, cache, times: int, like):
    """A cache [B, Hkv, L, D] as [B, Hkv·times, L, D], each KV head ``times`` times in a row (repeat_kv's
    order: query head h reads KV head h // times)."""
    if times == 1:
        return cache
    expanded = emit(graph, aten.expand.default,
                    (emit(graph, aten.unsqueeze.default, (cache, 2), like=like), [-1, -1, times, -1, -1]), like=like)
    return _merged_heads(graph, expanded, like)


def _merged_heads(graph, x, like):
    """x [B, h1, h2, S, L] as [B, h1·h2, S, L], a copy where x is expanded; no size named (B, S and L may
    be symbolic)."""
    copied = emit(graph, aten.clone.default, (x,), {"memory_format": torch.contiguous_format}, like=like)
    return emit(graph, aten.flatten.using_ints, (copied, 1, 2), like=like)


def _heads_bias(graph, bias, prompt: _Prompt, like):
    """The grouped form's bias, broadcast over [B, Hkv, rep, Sq, L], as a 4-d bias over [B, Hkv·rep, Sq, L]:
    a view where it does not vary over Hkv and rep (a causal mask), else expanded and copied."""
    shape = bias.meta["val"].shape
    if shape[1] == 1 and shape[2] == 1:
        return emit(graph, aten.squeeze.dim, (bias, 2), like=like)  # [b, 1, S, L]: broadcast over the heads
    _, kv_heads, rep, _, _ = _shape(prompt.match.scores)
    expanded = emit(graph, aten.expand.default, (bias, [-1, kv_heads, rep, -1, -1]), like=like)
    return _merged_heads(graph, expanded, like)


def _rewrite(graph, prompt: _Prompt, signature, constants: dict) -> bool:
    """The attention as one SDPA call; False (the graph unchanged but for dead nodes) where its scale and
    mask are not ``scale · s + bias`` or its operands differ in dtype."""
    match = prompt.match
    q_value, v_value, out_value = match.q.meta["val"], match.v.meta["val"], match.out.meta["val"]
    if match.k.meta["val"].dtype != q_value.dtype or v_value.dtype != q_value.dtype:
        return False  # SDPA takes one dtype; the program's products promote
    with graph.inserting_before(match.out):
        read = affine_chain(graph, match.scores, match.logits, q_value.device, match.out, constants)
        if read is None:
            return False
        scale, bias = read
        if prompt.before_grouping is not None:  # a scale before the grouping view; a mask there is not read
            before = scale_only(*prompt.before_grouping, constants)
            if before is None:
                return False
            scale *= before
        if bias is not None and bias.meta["val"].dtype != q_value.dtype and not _fits(prompt, q_value.dtype, constants):
            return False  # SDPA takes the mask in q's dtype; eager adds it in float32 (kept, dead nodes removed)
        q = match.q
        if prompt.rep > 1:  # [B, Hkv, rep·Sq, D] → [B, Hkv·rep, Sq, D]: query head h = kv·rep + r
            _, kv_heads, grouped, width = q_value.shape
            q = emit(graph, aten.reshape.default, (q, [-1, kv_heads * prompt.rep, grouped // prompt.rep, width]),
                     like=match.out)
        if bias is not None and bias.meta["val"].dim() == 5:  # the grouped form's, rep = 1 included
            bias = _heads_bias(graph, bias, prompt, match.out)
        if bias is not None and bias.meta["val"].dtype != q_value.dtype:
            bias = emit(graph, aten._to_copy.default, (bias,), {"dtype": q_value.dtype}, like=match.out)
        times = match.group * prompt.rep
        k = _repeated(graph, match.k, times, match.out)
        v = _repeated(graph, match.v, times, match.out)
        out = emit(graph, SDPA, (q, k, v), {"attn_mask": bias, "scale": scale}, like=match.out)
        if prompt.rep > 1:
            out = emit(graph, aten.reshape.default, (out, [-1, *out_value.shape[1:]]), like=match.out)
        if out.meta["val"].dtype != out_value.dtype:
            out = emit(graph, aten._to_copy.default, (out,), {"dtype": out_value.dtype}, like=match.out)
        out = decode_attention.in_layout_of(graph, out, match.out)
    replace_uses(match.out, out, signature)
    decode_attention.erase_checks_of(graph, match.dropped + [match.out])
    return True
