"""A Llama-3-shaped decoder for a decode step or a prefill, with a static KV cache held in mutated buffers.

    model = Decoder(DecoderConfig.llama_1b(), batch=1).to("cuda", torch.bfloat16)
    logits = model(tokens, input_pos)        # tokens [B, 1] int64, input_pos [1] int64 → logits [B, vocab] f32
    logits = model(prompt, torch.arange(S))  # a prefill: prompt [B, S], input_pos [S] → the last token's logits

The math is Meta's reference Llama code (facebookresearch/llama, llama/model.py): RMSNorm, rotary
embeddings with complex numbers (``precompute_freqs_cis`` with ``torch.polar``, ``view_as_complex`` on
pairs of the head dim, a complex product, ``view_as_real``), grouped-query attention, a SwiGLU MLP, and
float32 logits. Two changes make one step a static program that CUDA graphs can replay, as gpt-fast
writes it: the position is a tensor (``input_pos``), so the rotation is ``freqs_cis[input_pos]`` and the
new k/v rows are written into the cache with ``index_copy_`` at that position; and attention reads the
whole cache (``max_seq_len`` positions) with the positions after ``input_pos`` masked out, instead of
slicing it to a data-dependent length. The cache is [batch, kv_heads, max_seq_len, head_dim] per layer
(registered buffers, so torch.export records their mutation and AOTInductor updates them in place).
The grouped heads share the cache without copying it (a [B, kv, rep, hd] × [B, kv, hd, S] product), which
reads each cache row once where the reference's ``repeat_kv`` reads it ``n_heads / n_kv_heads`` times.

A prefill (S > 1 tokens, S static at export) writes its S rows of the cache first and then attends over the
whole cache with a causal mask [S, max_seq_len] (position p sees positions ≤ p), the group's rep·S query
rows of each KV head as one product with the cache ([B, kv, rep·S, hd] × [B, kv, hd, max_seq_len]); only
the last token goes through the LM head. The one-token code is kept apart, op for op: the lowering's passes
(passes/decode_attention.py) recognise its graph.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn
from torch.nn import functional as F

from aotcuda.models.attention import RMSNorm


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    dim: int = 2048
    n_layers: int = 16
    n_heads: int = 32
    n_kv_heads: int = 8
    ffn_dim: int = 8192
    vocab_size: int = 32000
    max_seq_len: int = 2048
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5

    @classmethod
    def llama_1b(cls) -> DecoderConfig:
        """16 layers, dim 2048, 32 query / 8 KV heads of 64, FFN 8192, vocab 32000: 1.24e9 parameters."""
        return cls()

    @classmethod
    def tiny(cls) -> DecoderConfig:
        """The same structure at test size: 2 layers, dim 64, 4 query / 2 KV heads of 16, 32 positions."""
        return cls(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128, vocab_size=256, max_seq_len=32)

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def precompute_freqs_cis(dim: int, end: int, theta: float) -> torch.Tensor:
    """[end, dim/2] complex64 rotations e^{i·p·θ_j}, θ_j = theta^(−2j/dim), as the reference computes them."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor):
    """xq, xk [B, S, H, hd] rotated by freqs_cis [S, hd/2] (complex), in float32, back in their dtype."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def apply_rotary_emb_real(xq: torch.Tensor, xk: torch.Tensor, freqs: torch.Tensor):
    """The same rotation written in real numbers, as gpt-fast writes it: freqs [S, hd/2, 2] float32 holds
    (cos, sin) pairs (``view_as_real`` of the complex table)."""
    def rotate(x):
        pairs = x.float().reshape(*x.shape[:-1], -1, 2)
        f = freqs.view(1, pairs.shape[1], 1, pairs.shape[3], 2)
        out = torch.stack([pairs[..., 0] * f[..., 0] - pairs[..., 1] * f[..., 1],
                           pairs[..., 1] * f[..., 0] + pairs[..., 0] * f[..., 1]], -1)
        return out.flatten(3).type_as(x)
    return rotate(xq), rotate(xk)


class Attention(nn.Module):
    def __init__(self, config: DecoderConfig, batch: int):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.wq = nn.Linear(config.dim, config.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(config.n_heads * self.head_dim, config.dim, bias=False)
        cache_shape = (batch, config.n_kv_heads, config.max_seq_len, self.head_dim)
        self.register_buffer("cache_k", torch.zeros(cache_shape))
        self.register_buffer("cache_v", torch.zeros(cache_shape))

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """x [B, S, dim] at positions input_pos [S] → [B, S, dim]; writes S rows of the cache."""
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        rotary = apply_rotary_emb if freqs_cis.is_complex() else apply_rotary_emb_real
        xq, xk = rotary(xq, xk, freqs_cis)
        self.cache_k.index_copy_(2, input_pos, xk.transpose(1, 2))
        self.cache_v.index_copy_(2, input_pos, xv.transpose(1, 2))
        if seqlen > 1:  # static at export: a prefill; one token keeps the graph the decode passes recognise
            return self.wo(self._prompt_attention(xq, input_pos))
        rep = self.n_heads // self.n_kv_heads
        q = xq.view(bsz, self.n_kv_heads, rep, self.head_dim)  # query heads grouped by their KV head
        scores = torch.matmul(q, self.cache_k.transpose(2, 3)).float() / math.sqrt(self.head_dim)
        visible = torch.arange(self.cache_k.shape[2], device=x.device) <= input_pos
        scores = scores.masked_fill(~visible, float("-inf"))
        probs = F.softmax(scores, dim=-1).type_as(xq)
        out = torch.matmul(probs, self.cache_v)  # [B, kv, rep, hd]
        return self.wo(out.reshape(bsz, seqlen, -1))

    def _prompt_attention(self, xq: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """Causal grouped-query attention of xq [B, S, H, hd] (rotated) over the cache, the prompt's rows
        already written: the query at input_pos[i] sees cache positions ≤ input_pos[i]. → [B, S, H·hd].

        Each KV head's rep·S query rows are one [rep·S, hd] × [hd, max_seq_len] product with the cache as
        it is (no repeat_kv copy of the cache); the mask [S, max_seq_len] broadcasts over the group."""
        bsz, seqlen, _, _ = xq.shape
        rep = self.n_heads // self.n_kv_heads
        max_len = self.cache_k.shape[2]
        q = xq.view(bsz, seqlen, self.n_kv_heads, rep, self.head_dim).permute(0, 2, 3, 1, 4)  # [B, kv, rep, S, hd]
        q = q.reshape(bsz, self.n_kv_heads, rep * seqlen, self.head_dim)
        scores = torch.matmul(q, self.cache_k.transpose(2, 3)).float() / math.sqrt(self.head_dim)
        scores = scores.view(bsz, self.n_kv_heads, rep, seqlen, max_len)
        visible = torch.arange(max_len, device=xq.device) <= input_pos.unsqueeze(-1)  # [S, max_len]
        scores = scores.masked_fill(~visible, float("-inf"))
        probs = F.softmax(scores, dim=-1).type_as(xq).view(bsz, self.n_kv_heads, rep * seqlen, max_len)
        out = torch.matmul(probs, self.cache_v)  # [B, kv, rep·S, hd]
        out = out.view(bsz, self.n_kv_heads, rep, seqlen, self.head_dim).permute(0, 3, 1, 2, 4)
        return out.reshape(bsz, seqlen, self.n_heads * self.head_dim)


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, config: DecoderConfig, batch: int):
        super().__init__()
        self.attention = Attention(config, batch)
        self.feed_forward = FeedForward(config.dim, config.ffn_dim)
        self.attention_norm = RMSNorm(config.dim, eps=config.norm_eps)
        self.ffn_norm = RMSNorm(config.dim, eps=config.norm_eps)

    def forward(self, x, freqs_cis, input_pos):
        h = x + self.attention(self.attention_norm(x), freqs_cis, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Decoder(nn.Module):
    """forward(tokens [B, S] int64, input_pos [S] int64) → float32 logits [B, vocab] of the last token;
    writes cache rows input_pos of every layer.

    S = 1 is a decode step; S > 1 a prefill of S prompt tokens at positions input_pos (usually
    ``arange(start, start + S)``), each attending causally to the cache (position p sees cache
    positions ≤ p, earlier calls' rows included). S is static once exported: a decode step and a
    prefill are two programs. input_pos must lie in [0, max_seq_len) (``index_copy_`` and the rotation
    table index by it; out of range is an IndexError in eager).

    Args:
        config: the sizes.
        batch: the batch; the KV cache holds that many sequences.
    """

    def __init__(self, config: DecoderConfig, batch: int):
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(TransformerBlock(config, batch) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, eps=config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        freqs = precompute_freqs_cis(config.head_dim, config.max_seq_len, config.rope_theta)
        self.register_buffer("freqs_cis", freqs, persistent=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[input_pos]
        for layer in self.layers:
            h = layer(h, freqs_cis, input_pos)
        if tokens.shape[1] > 1:  # a prefill: the LM head for the last token only (its logits are all we return)
            h = h[:, -1:]
        return self.output(self.norm(h)).float()[:, -1]


def make_decoder(config: DecoderConfig, batch: int, device="cpu", dtype=torch.bfloat16, seed: int = 0,
                 real_rope: bool = False) -> Decoder:
    """A Decoder with random weights of a trained model's scale (normal, std 0.02; norms 1, reproducible by
    seed) in ``dtype`` on ``device``, an empty cache, and the rotation table kept complex64 (``Module.to``
    would cast a complex buffer to a real dtype, dropping the imaginary part). ``real_rope``: the table as
    float32 (cos, sin) pairs instead, and the rotation in real numbers (gpt-fast's form; same values)."""
    model = Decoder(config, batch)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    freqs = model._buffers.pop("freqs_cis")
    model.to(device=device, dtype=dtype)
    if real_rope:
        freqs = torch.view_as_real(freqs).clone()
    model.register_buffer("freqs_cis", freqs.to(device), persistent=False)
    return model.eval()


def bytes_read_per_step(model: Decoder) -> int:
    """Bytes one decode step must read at least: every weight matrix (the embedding table only for the
    rows looked up, negligible) and the whole static KV cache that attention reads."""
    weights = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if not n.startswith("tok_"))
    cache = sum(b.numel() * b.element_size() for n, b in model.named_buffers() if "cache" in n)
    return weights + cache
