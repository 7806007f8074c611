"""SplitCacheAttentionPass: attention of a few query rows over a long KV cache, in one pass over the cache.

A decode step attends with one new position (a few rows per KV head) to a whole static cache. Written
as ``matmul → scale → mask → softmax → matmul`` (Meta's and our decoder's code, transformers' eager
attention over a StaticCache) the two products go to cuBLAS batched GEMMs of 1-4 rows, and the softmax
between them to a kernel over rows of the full cache length: on the H200 the step's attention ran at 9%
of copy speed (166 µs for 67 MB, benchmarks/decode.py's profile). ``scaled_dot_product_attention`` with a
mask and a grouped cache that ``repeat_kv`` expanded is no better: the expansion is a copy of the cache.

This pass writes such attention in the flash-decoding form (Dao et al., 2023), in plain ATen ops that
Inductor turns into a few generated reductions (no new library kernel: lower() refuses fallbacks):

    scores[b, kv, m, l] = Σ_d q[b, kv, m, d] · k[b, kv, l, d]          the query rows of each KV head
                                                                     together (m = group × Sq): each
                                                                     KV head is read once, never repeated
    the program's own scale and mask on scores                        (its nodes, unchanged)
    per chunk c of the cache (l = c·Lc + i):  max_c, Σ exp(s − max_c), Σ exp(s − max_c) · v
    combined over chunks with the weights exp(max_c − max)            out = Σ_c w_c o_c / Σ_c w_c l_c

The products and the softmax are computed in float32 from the cache's values (eager rounds the scores
to the query dtype and the probabilities to the value dtype: the results differ by that rounding).
A chunk that the mask hides entirely contributes nothing (its max is −inf: its weight is 0).

What it matches, after lower()'s decompositions:
- ``bmm(q, kᵀ) → view [B, H, Sq, L]`` → pointwise ops (scale, additive or ``where`` mask, dtype
  conversions) → ``_softmax(-1)`` → dtype conversions → ``bmm(p, v) → view [B, H, Sq, Dv]``, where q, k and
  v are views of 4-d tensors, k and v possibly ``repeat_kv``'s ``expand → clone → view`` of a
  [B, Hkv, L, D] cache;
- ``scaled_dot_product_attention(q, k, v, attn_mask=None|bool|float, dropout_p=0, is_causal=False,
  scale=, enable_gqa=)`` with the same k and v.
Only where the query rows per KV head (group × Sq) are at most ``max_rows``, and the cache length L is
static and at least ``min_cache_len``; the batch may be dynamic. Elsewhere (prefill, short sequences)
Inductor's own attention is kept. A call of a few tokens within the limit (Sq > 1: a short prefill over the
cache, its mask per query row) is rewritten too, its result laid out in the memory order of the node it
replaces (``in_layout_of``).

With ``kernel=True`` (the default where Triton is installed) the attention becomes one call of
``aotcuda::decode_attention`` instead (kernels/decode_attention.py: a Triton op, flash-decoding in two
kernels that AOTInductor compiles into the package), where the program's scale and mask read as
``scale · s + bias`` (passes/score_chain.py); elsewhere the plain-ATen form above.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import torch
from torch.export import ExportedProgram

from aotcuda.kernels import HAVE_TRITON
from aotcuda.passes.emit import emit, replace_uses
from aotcuda.passes.program_copy import copied_graph_module, with_graph
from aotcuda.passes.result import PassResult
from aotcuda.passes.score_chain import affine_chain

aten = torch.ops.aten
ASSERT = aten._assert_tensor_metadata.default
THROUGH = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
            aten.clone.default}
CONVERSIONS = {aten._to_copy.default, aten.clone.default}
# Pointwise ops allowed between the scores and the softmax (scale, mask, conversions).
SCORE_OPS = CONVERSIONS | {
    aten.div.Tensor, aten.div.Scalar, aten.mul.Tensor, aten.mul.Scalar, aten.add.Tensor, aten.sub.Tensor,
    aten.where.self, aten.masked_fill.Scalar, aten.masked_fill.Tensor,
}
SDPA = aten.scaled_dot_product_attention.default


@dataclasses.dataclass
class Match:
    """One attention: q [B, Hq, Sq, D], k / v [B, Hkv, L, D / Dv] (the cache, before any repeat), group =
    Hq / Hkv; ``start`` is where the new scores go, ``scores`` the node they replace (or None: SDPA),
    ``logits`` the softmax's input, ``out`` the node whose value [B, Hq, Sq, Dv] the result replaces."""

    q: torch.fx.Node
    k: torch.fx.Node
    v: torch.fx.Node
    group: int
    start: torch.fx.Node
    scores: torch.fx.Node | None
    logits: torch.fx.Node | None
    out: torch.fx.Node
    dropped: list


class SplitCacheAttentionPass:
    """``pass(ep) → ep``: decode attention over a KV cache in the split-cache form (module docstring).

    max_rows: the most query rows per KV head (group × Sq) rewritten. min_cache_len: the shortest cache
    rewritten. chunk: the cache positions per chunk of the plain-ATen form (the largest divisor of L not
    above it is used). kernel: write aotcuda::decode_attention where the scale and mask allow (module
    docstring). A GraphPass (passes/result.py): ``result.counts`` has ``rewritten``, ``kernel`` (of those,
    how many as the kernel) and ``kept`` (attentions that matched the shape of the pattern but not its
    size limits)."""

    def __init__(self, max_rows: int = 16, min_cache_len: int = 512, chunk: int = 128,
                 kernel: bool = HAVE_TRITON) -> None:
        self.max_rows, self.min_cache_len, self.chunk, self.kernel = max_rows, min_cache_len, chunk, kernel
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        graph_module = copied_graph_module(ep)
        graph = graph_module.graph
        matches = [m for node in list(graph.nodes) if (m := match_attention(node)) is not None]
        wanted = [m for m in matches if self._wanted(m)]
        if not wanted:
            self.result = PassResult(type(self).__name__, False, {"rewritten": 0, "kernel": 0, "kept": len(matches)})
            return ep
        signature = copy.deepcopy(ep.graph_signature)
        fused = 0
        for match in wanted:
            if self.kernel and _rewrite_as_kernel(graph, match, signature, lifted_constants(ep)):
                fused += 1
            else:
                _rewrite(graph, match, self._chunk(_static(match.k.meta["val"].shape[2])), signature)
        graph.eliminate_dead_code()
        graph.lint()
        graph_module.recompile()
        self.result = PassResult(type(self).__name__, True,
                                 {"rewritten": len(wanted), "kernel": fused, "kept": len(matches) - len(wanted)})
        return with_graph(ep, graph_module, graph_signature=signature)

    def _wanted(self, match: Match) -> bool:
        q, k = match.q.meta["val"], match.k.meta["val"]
        rows, length = _static(q.shape[2]), _static(k.shape[2])
        return rows is not None and length is not None and rows * match.group <= self.max_rows \
            and length >= self.min_cache_len

    def _chunk(self, length: int) -> int:
        return max(d for d in range(1, min(self.chunk, length) + 1) if length % d == 0)


def _static(size) -> int | None:
    return size if type(size) is int else None


def shape_of(node) -> tuple:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


def _users(node) -> list:
    """The users that compute something (not _assert_tensor_metadata's dtype checks)."""
    return [u for u in node.users if u.target is not ASSERT]


def only_user(node):
    users = _users(node)
    return users[0] if len(users) == 1 else None


def back_to_4d(node, shape: tuple):
    """Walk back from a product's operand through views, expands and clones to a 4-d node of ``shape``."""
    while isinstance(node, torch.fx.Node):
        if shape_of(node) == shape and node.meta["val"].dim() == 4:
            while node.op == "call_function" and node.target in THROUGH and shape_of(node.args[0]) == shape:
                node = node.args[0]  # an expand to its own shape, a clone: the same values
            return node
        if node.op != "call_function" or node.target not in THROUGH:
            return None
        node = node.args[0]
    return None


def cache_of(node):
    """(cache [B, Hkv, L, D], group) for k or v of [B, H, L, D]: repeat_kv's ``unsqueeze(2) → expand →
    clone → view`` undone, else (node, 1)."""
    inner = node
    while inner.op == "call_function" and inner.target in (aten.view.default, aten._unsafe_view.default,
                                                            aten.reshape.default, aten.clone.default):
        inner = inner.args[0]
    if inner.op == "call_function" and inner.target is aten.expand.default and len(shape_of(inner)) == 5:
        source = _whole(inner.args[0])
        if source.op == "call_function" and source.target is aten.unsqueeze.default and source.args[1] == 2:
            base = _whole(source.args[0])
            if len(shape_of(base)) == 4 and shape_of(base)[2:] == shape_of(inner)[3:]:
                return base, shape_of(inner)[2]
    return node, 1


def _whole(node):
    """Through slices that keep a whole dim (``x[:, :, None]`` is one per ``:`` in some torch versions)."""
    while node.op == "call_function" and node.target is aten.slice.Tensor:
        source = node.args[0]
        start = node.args[2] if len(node.args) > 2 else None
        step = node.args[4] if len(node.args) > 4 else 1
        if (start or 0) != 0 or step != 1 or shape_of(node) != shape_of(source):
            break
        node = source
    return node


def match_attention(node) -> Match | None:
    if node.op != "call_function":
        return None
    if node.target is SDPA:
        return _match_sdpa(node)
    if node.target is aten.bmm.default:
        return _match_products(node)
    return None


def _match_products(bmm) -> Match | None:
    scores = only_user(bmm)
    if scores is None or scores.target is not aten.view.default or len(shape_of(scores)) != 4:
        return None
    batch, heads, rows, length = shape_of(scores)
    width = shape_of(bmm.args[0])[-1]
    q = back_to_4d(bmm.args[0], (batch, heads, rows, width))
    transposed = back_to_4d(bmm.args[1], (batch, heads, width, length))
    if q is None or transposed is None or transposed.target is not aten.permute.default \
            or list(transposed.args[1]) != [0, 1, 3, 2]:
        return None
    chain = softmax_chain(scores)
    if chain is None:
        return None
    logits, softmax, probs, passed = chain
    dropped = [bmm, scores, softmax, *passed]
    out = only_user(probs)
    if out is None or out.target is not aten.view.default or shape_of(out)[:3] != (batch, heads, rows):
        return None
    v = back_to_4d(probs.args[1], (batch, heads, length, shape_of(out)[3]))
    if v is None:
        return None
    k, group = cache_of(transposed.args[0])
    v, v_group = cache_of(v)
    if group != v_group or shape_of(k)[1] * group != heads:
        return None
    return Match(q, k, v, group, bmm, scores, logits, out, dropped + [probs])


def softmax_chain(scores) -> tuple | None:
    """(logits, softmax, probs, passed) from the scores node of a written-out attention: pointwise ops of the
    scores' shape (SCORE_OPS: scale, mask, conversions) to a ``_softmax`` over the last dim (logits, its input),
    then conversions and views (``passed``) into the second product (probs, a bmm that reads them first).
    None where the chain is anything else."""
    node, last = scores, len(shape_of(scores)) - 1
    while True:  # the scale, the mask and conversions, to the softmax
        user = only_user(node)
        if user is None:
            return None
        if user.target is aten._softmax.default:
            if user.args[1] not in (-1, last) or shape_of(user) != shape_of(scores):
                return None
            logits, softmax = node, user
            break
        if user.target not in SCORE_OPS or shape_of(user) != shape_of(scores):
            return None
        node = user
    node, passed = softmax, []
    while True:  # conversions, then the expand and view into the second product
        user = only_user(node)
        if user is None:
            return None
        if user.target is aten.bmm.default and user.args[0] is node:
            return logits, softmax, user, passed
        if user.target not in THROUGH | CONVERSIONS:
            return None
        node = user
        passed.append(user)


def _sdpa_arguments(sdpa) -> dict:
    """scaled_dot_product_attention's arguments by name, positional or not."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    return dict(zip(names, sdpa.args)) | dict(sdpa.kwargs)


def _match_sdpa(sdpa) -> Match | None:
    arguments = _sdpa_arguments(sdpa)
    if arguments.get("dropout_p", 0.0) != 0.0 or arguments.get("is_causal", False):
        return None
    q, k, v = arguments["query"], arguments["key"], arguments["value"]
    if any(len(shape_of(t)) != 4 for t in (q, k, v)):
        return None
    heads = shape_of(q)[1]
    k, group = cache_of(k)
    v, v_group = cache_of(v)
    if group == 1 and shape_of(k)[1] != heads:  # enable_gqa: the cache has Hkv heads as it is
        if not arguments.get("enable_gqa", False) or heads % shape_of(k)[1]:
            return None
        group = v_group = heads // shape_of(k)[1]
    if group != v_group or shape_of(k)[1] * group != heads or shape_of(v)[1] != shape_of(k)[1]:
        return None
    return Match(q, k, v, group, sdpa, None, None, sdpa, [])


def _rewrite(graph, match: Match, chunk: int, signature) -> None:
    q_value, k_value = match.q.meta["val"], match.k.meta["val"]
    batch, heads, rows, width = q_value.shape
    kv_heads, length = k_value.shape[1], k_value.shape[2]
    group_rows, chunks = match.group * rows, length // chunk
    f32 = {"dtype": torch.float32}

    def op(target, *args, **kwargs):
        return emit(graph, target, args, kwargs, like=match.out)

    with graph.inserting_before(match.start):
        q = op(aten._to_copy.default, op(aten.reshape.default, match.q, [-1, kv_heads, group_rows, width]), **f32)
        k = op(aten._to_copy.default, match.k, **f32)
        products = op(aten.mul.Tensor, op(aten.unsqueeze.default, q, 3), op(aten.unsqueeze.default, k, 2))
        raw = op(aten.sum.dim_IntList, products, [-1])  # [B, Hkv, group * Sq, L], float32
        if match.scores is not None:  # the program's own scale and mask follow, on its dtype
            scores = op(aten.reshape.default, op(aten._to_copy.default, raw, dtype=match.scores.meta["val"].dtype),
                        [-1, heads, rows, length])
    if match.scores is not None:
        match.scores.replace_all_uses_with(scores)
        logits = match.logits
    else:
        with graph.inserting_before(match.start):
            logits = _sdpa_logits(op, match.start, raw, width)
    with graph.inserting_before(match.out):
        x = op(aten.reshape.default, op(aten._to_copy.default, logits, **f32),
               [-1, kv_heads, group_rows, chunks, chunk])
        chunk_max = op(aten.amax.default, x, [-1], True)
        hidden = op(aten.eq.Scalar, chunk_max, -math.inf)  # a chunk the mask hides entirely
        zero = op(aten.scalar_tensor.default, 0.0, **f32, device=k_value.device)
        safe_max = op(aten.where.self, hidden, zero, chunk_max)
        p = op(aten.exp.default, op(aten.sub.Tensor, x, safe_max))
        chunk_sum = op(aten.sum.dim_IntList, p, [-1], True)  # [B, Hkv, M, C, 1]
        v = op(aten.reshape.default, op(aten._to_copy.default, match.v, **f32),
               [-1, kv_heads, 1, chunks, chunk, match.v.meta["val"].shape[-1]])
        chunk_out = op(aten.sum.dim_IntList, op(aten.mul.Tensor, op(aten.unsqueeze.default, p, -1), v), [-2])
        weight = op(aten.exp.default, op(aten.sub.Tensor, chunk_max, op(aten.amax.default, chunk_max, [3], True)))
        total = op(aten.sum.dim_IntList, op(aten.mul.Tensor, chunk_sum, weight), [3])  # [B, Hkv, M, 1]
        out = op(aten.sum.dim_IntList, op(aten.mul.Tensor, chunk_out, weight), [3])  # [B, Hkv, M, Dv]
        out = op(aten._to_copy.default, op(aten.div.Tensor, out, total), dtype=match.out.meta["val"].dtype)
        out = op(aten.reshape.default, out, [-1, heads, rows, match.v.meta["val"].shape[-1]])
        out = in_layout_of(graph, out, match.out)
    replace_uses(match.out, out, signature)
    erase_checks_of(graph, match.dropped + [match.out])
    if not match.out.users:  # SDPA counts as impure (it may draw dropout): dead-code elimination keeps it
        graph.erase_node(match.out)


def in_layout_of(graph, out, like):
    """out [B, H, Sq, Dv] (contiguous) in the memory order of ``like``, the node it replaces, where Sq > 1.

    SDPA returns [B, H, Sq, Dv] laid out as [B, Sq, H, Dv], and the program after it (transformers'
    ``transpose(1, 2)`` then ``view`` to [B, Sq, H·Dv]) relies on that: with several query rows (a
    multi-token call over the cache) a contiguous result makes that ``view`` fail. One row per head
    (a decode step) views either way, and keeps its graph as it was."""
    want, got = like.meta["val"], out.meta["val"]
    if want.shape[2] == 1 or want.stride() == got.stride():
        return out
    order = sorted(range(want.dim()), key=lambda d: -want.stride()[d])  # outermost dim first
    inverse = [order.index(d) for d in range(want.dim())]
    laid = emit(graph, aten.clone.default, (emit(graph, aten.permute.default, (out, order), like=like),),
                {"memory_format": torch.contiguous_format}, like=like)
    return emit(graph, aten.permute.default, (laid, inverse), like=like)


def lifted_constants(ep: ExportedProgram) -> dict:
    """{placeholder name: tensor} of ep's lifted tensor constants."""
    names = ep.graph_signature.inputs_to_lifted_tensor_constants
    return {node: ep.constants[name] for node, name in names.items() if name in ep.constants}


def _rewrite_as_kernel(graph, match: Match, signature, constants: dict) -> bool:
    """The attention as one aotcuda::decode_attention call; False (the graph unchanged but for dead nodes)
    where its scale and mask are not ``scale · s + bias``."""
    import aotcuda.kernels.decode_attention  # noqa: F401 - registers the op

    q_value = match.q.meta["val"]
    with graph.inserting_before(match.out):
        if match.scores is not None:
            read = affine_chain(graph, match.scores, match.logits, q_value.device, match.out, constants)
        else:
            read = _sdpa_scale_and_bias(graph, match.start, q_value, match.out)
        if read is None:
            return False
        scale, bias = read
        out = emit(graph, torch.ops.aotcuda.decode_attention.default,
                   (match.q, match.k, match.v, bias, scale, match.group), like=match.out)
        if out.meta["val"].dtype != match.out.meta["val"].dtype:
            out = emit(graph, aten._to_copy.default, (out,), {"dtype": match.out.meta["val"].dtype}, like=match.out)
        out = in_layout_of(graph, out, match.out)
    replace_uses(match.out, out, signature)
    erase_checks_of(graph, match.dropped + [match.out])
    if not match.out.users:
        graph.erase_node(match.out)
    return True


def _sdpa_scale_and_bias(graph, sdpa, q_value, like):
    """SDPA's scale and its mask as an additive bias (a bool mask keeps True)."""
    arguments = _sdpa_arguments(sdpa)
    scale = _sdpa_scale(arguments, q_value.shape[-1])
    mask = arguments.get("attn_mask")
    if mask is None or mask.meta["val"].dtype != torch.bool:
        return scale, mask
    return scale, emit(graph, aten.where.Scalar, (mask, 0.0, -math.inf), like=like)


def _sdpa_scale(arguments: dict, width: int) -> float:
    """SDPA's scale: its argument where given (0.0 included: ``scale or default`` would drop it), else 1/√d."""
    scale = arguments.get("scale")
    return 1.0 / math.sqrt(width) if scale is None else scale


def _sdpa_logits(op, sdpa, raw, width):
    """SDPA's scores: raw × scale, then its mask (a bool mask keeps True; a float mask is added)."""
    arguments = _sdpa_arguments(sdpa)
    q_value = arguments["query"].meta["val"]
    batch, heads, rows, _ = q_value.shape
    length = raw.meta["val"].shape[-1]
    scale = _sdpa_scale(arguments, width)
    logits = op(aten.reshape.default, op(aten.mul.Tensor, raw, scale), [-1, heads, rows, length])
    mask = arguments.get("attn_mask")
    if mask is None:
        return logits
    if mask.meta["val"].dtype == torch.bool:
        hidden = op(aten.scalar_tensor.default, -math.inf, dtype=torch.float32, device=q_value.device)
        return op(aten.where.self, mask, logits, hidden)
    return op(aten.add.Tensor, logits, op(aten._to_copy.default, mask, dtype=torch.float32))


def erase_checks_of(graph, nodes) -> None:
    """Erase the dtype checks (_assert_tensor_metadata) on nodes the rewrite made dead, so that dead-code
    elimination can take those nodes (a check counts as a use, and is kept as a side effect)."""
    for node in nodes:
        for user in list(node.users):
            if user.target is ASSERT:
                graph.erase_node(user)
