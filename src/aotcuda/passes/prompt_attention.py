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

Not matched, and kept as written: a chain that is not affine in the scores (a soft cap ``tanh(s / c) · c``),
a non-4-d layout, and the few-row attentions of a decode step. The pass runs in the CUDA lowering behind
AOTCUDA_PROMPT_ATTENTION (aotcuda.switches).
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch.export import ExportedProgram

from aotcuda.passes import decode_attention
from aotcuda.passes.emit import emit, replace_uses
from aotcuda.passes.program_copy import with_graph
from aotcuda.passes.result import PassResult
from aotcuda.passes.score_chain import affine_chain

aten = torch.ops.aten
SDPA = decode_attention.SDPA


@dataclasses.dataclass
class _Prompt:
    """One written-out attention: ``match`` (decode_attention's _Match: q [B, Hq, M, D], the caches
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
    rows whose scale and mask are not ``scale · s + bias``)."""

    def __init__(self, min_rows: int = 17) -> None:
        self.min_rows = min_rows
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        graph_module = copy.deepcopy(ep.graph_module)  # the copy keeps the node names
        graph = graph_module.graph
        found = [p for node in list(graph.nodes) if (p := _match(node)) is not None]
        wanted = [p for p in found if type(p.rows) is int and p.rows * p.match.group >= self.min_rows]
        if not wanted:
            self.result = PassResult(type(self).__name__, False, {"rewritten": 0, "kept": 0})
            return ep
        signature = copy.deepcopy(ep.graph_signature)
        constants = decode_attention.lifted_constants(ep)
        rewritten = sum(_rewrite(graph, prompt, signature, constants) for prompt in wanted)
        self.result = PassResult(type(self).__name__, rewritten > 0,
                                 {"rewritten": rewritten, "kept": len(wanted) - rewritten})
        if not rewritten:
            return ep
        graph.eliminate_dead_code()
        graph.lint()
        graph_module.recompile()
        return with_graph(ep, graph_module, graph_signature=signature)


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
    dropped, node = [bmm, first, scores], scores
    while True:  # the scale, the mask and conversions, to the softmax
        user = decode_attention.only_user(node)
        if user is None:
            return None
        if user.target is aten._softmax.default:
            if user.args[1] not in (-1, 4) or _shape(user) != _shape(scores):
                return None
            logits, softmax = node, user
            break
        if user.target not in decode_attention.SCORE_OPS or _shape(user) != _shape(scores):
            return None
        node = user
    node, probs = softmax, None
    dropped.append(softmax)
    while probs is None:  # conversions, then the view to [B, Hkv, rep·Sq, L] into the second product
        user = decode_attention.only_user(node)
        if user is None:
            return None
        if user.target is aten.bmm.default and user.args[0] is node:
            probs = user
        elif user.target in decode_attention.THROUGH | decode_attention.CONVERSIONS:
            node = user
            dropped.append(user)
        else:
            return None
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


def _scale_only(first, last) -> float | None:
    """The factor of the ops from ``first`` to ``last`` where each multiplies or divides by a number or
    converts to a float dtype (the grouped form's scale before its view); None for anything else."""
    factor, node = 1.0, first
    while node is not last:
        user = decode_attention.only_user(node)
        if user is None:
            return None
        args = user.args
        number = args[1] if len(args) == 2 and args[0] is node else None
        if user.target in (aten.mul.Tensor, aten.mul.Scalar) and _is_number(number):
            factor *= number
        elif user.target in (aten.div.Tensor, aten.div.Scalar) and _is_number(number) and number != 0 \
                and not user.kwargs:
            factor /= number
        elif not (user.target in (aten._to_copy.default, aten.clone.default)
                  and user.meta["val"].is_floating_point()):
            return None
        node = user
    return factor


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shape(node) -> tuple:
    return decode_attention.shape_of(node)


def _repeated(graph, cache, times: int, like):
    """A cache [B, Hkv, L, D] as [B, Hkv·times, L, D], each KV head ``times`` times in a row (repeat_kv's
    order: query head h reads KV head h // times)."""
    if times == 1:
        return cache
    batch, heads, length, width = cache.meta["val"].shape
    expanded = emit(graph, aten.expand.default,
                    (emit(graph, aten.unsqueeze.default, (cache, 2), like=like), [batch, heads, times, length, width]),
                    like=like)
    copied = emit(graph, aten.clone.default, (expanded,), {"memory_format": torch.contiguous_format}, like=like)
    return emit(graph, aten.view.default, (copied, [batch, heads * times, length, width]), like=like)


def _heads_bias(graph, bias, prompt: _Prompt, like):
    """The grouped form's bias, broadcast over [B, Hkv, rep, Sq, L], as a 4-d bias over [B, Hkv·rep, Sq, L]:
    a view where it does not vary over Hkv and rep (a causal mask), else expanded and copied."""
    shape = list(bias.meta["val"].shape)
    if shape[1] == 1 and shape[2] == 1:
        return emit(graph, aten.view.default, (bias, [shape[0], 1, shape[3], shape[4]]), like=like)
    _, kv_heads, rep, _, _ = _shape(prompt.match.scores)
    full = [shape[0], kv_heads, rep, shape[3], shape[4]]
    expanded = emit(graph, aten.expand.default, (bias, full), like=like)
    copied = emit(graph, aten.clone.default, (expanded,), {"memory_format": torch.contiguous_format}, like=like)
    return emit(graph, aten.view.default, (copied, [shape[0], kv_heads * rep, shape[3], shape[4]]), like=like)


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
            before = _scale_only(*prompt.before_grouping)
            if before is None:
                return False
            scale *= before
        q = match.q
        if prompt.rep > 1:  # [B, Hkv, rep·Sq, D] → [B, Hkv·rep, Sq, D]: query head h = kv·rep + r
            batch, kv_heads, grouped, width = q_value.shape
            q = emit(graph, aten.reshape.default, (q, [batch, kv_heads * prompt.rep, grouped // prompt.rep, width]),
                     like=match.out)
            if bias is not None:
                bias = _heads_bias(graph, bias, prompt, match.out)
        if bias is not None and bias.meta["val"].dtype != q_value.dtype:
            bias = emit(graph, aten._to_copy.default, (bias,), {"dtype": q_value.dtype}, like=match.out)
        times = match.group * prompt.rep
        k = _repeated(graph, match.k, times, match.out)
        v = _repeated(graph, match.v, times, match.out)
        out = emit(graph, SDPA, (q, k, v), {"attn_mask": bias, "scale": scale}, like=match.out)
        if prompt.rep > 1:
            out = emit(graph, aten.reshape.default, (out, list(out_value.shape)), like=match.out)
        if out.meta["val"].dtype != out_value.dtype:
            out = emit(graph, aten._to_copy.default, (out,), {"dtype": out_value.dtype}, like=match.out)
        out = decode_attention.in_layout_of(graph, out, match.out)
    replace_uses(match.out, out, signature)
    decode_attention.erase_checks_of(graph, match.dropped + [match.out])
    return True
