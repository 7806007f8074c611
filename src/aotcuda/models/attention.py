"""The demo program: a Llama-style transformer block whose rotary embeddings use complex numbers.

    x ─ RMSNorm ─ q, k, v projections ─ RoPE(q), RoPE(k) ─ causal SDPA ─ output projection ─(+x)─ h
    h ─ RMSNorm ─ SwiGLU MLP ─(+h)─ out

RoPE is written the way Llama's reference code writes it (facebookresearch/llama, model.py): rotations
``torch.polar(1, position · inv_freq)`` (complex64), ``view_as_complex`` on pairs of the head dim, a
complex product, ``view_as_real`` back. Positions come from ``torch.arange(seq)`` inside forward, so the
sequence length can be dynamic. The math runs in float32 whatever the block's dtype, as in Llama.

Each piece is an nn.Module with its own forward: torch.export records source lines only for frames of
``forward`` methods, and the fallback-kernel check reports those lines.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x², last dim) + eps) · weight, computed in float32 (Zhang & Sennrich, 2019)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class RotaryEmbedding(nn.Module):
    """forward(q, k [batch, seq, heads, head_dim]) → q, k rotated pairwise by e^{i·p·θ_j}, same dtype.

    θ_j = theta^(-2j/head_dim) (Su et al., RoFormer, 2021); p is the position, torch.arange(seq).
    """

    def __init__(self, head_dim: int, theta: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(q.shape[1], device=q.device, dtype=torch.float32)
        angles = torch.outer(positions, self.inv_freq)
        freqs = torch.polar(torch.ones_like(angles), angles)[None, :, None, :]   # complex64
        q_pairs = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        k_pairs = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
        q_out = torch.view_as_real(q_pairs * freqs).flatten(3)
        k_out = torch.view_as_real(k_pairs * freqs).flatten(3)
        return q_out.type_as(q), k_out.type_as(k)


class Attention(nn.Module):
    """Causal multi-head self-attention with rotary embeddings; [batch, seq, dim] → same."""

    def __init__(self, dim: int, n_heads: int, theta: float = 10000.0):
        super().__init__()
        if dim % n_heads or (dim // n_heads) % 2:
            raise ValueError(f"dim={dim} must split into {n_heads} heads of an even size")
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.rotary = RotaryEmbedding(self.head_dim, theta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        split = (batch, seq, self.n_heads, self.head_dim)
        q, k = self.rotary(self.wq(x).view(split), self.wk(x).view(split))
        v = self.wv(x).view(split)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    """SwiGLU MLP (Shazeer, 2020): w2(silu(w1 x) · w3 x)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class AttentionBlock(nn.Module):
    """One pre-norm transformer block. forward(x [batch, seq, dim]) → [batch, seq, dim], x's dtype."""

    def __init__(self, dim: int = 256, n_heads: int = 4, hidden: int = 512, theta: float = 10000.0):
        super().__init__()
        self.attention_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.attention = Attention(dim, n_heads, theta)
        self.mlp = FeedForward(dim, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x))
        return h + self.mlp(self.mlp_norm(h))


def attention_block(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, batch: int = 2,
                    seq: int = 64, dim: int = 256, n_heads: int = 4, seed: int = 0):
    """(model, (x,)): an AttentionBlock with seeded random weights and x [batch, seq, dim], on device/dtype.

    The weights are scaled so activations stay O(1) (relative errors then mean what they say).
    """
    generator = torch.Generator().manual_seed(seed)
    model = AttentionBlock(dim, n_heads, hidden=2 * dim)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) / parameter.shape[1] ** 0.5)
    x = torch.randn(batch, seq, dim, generator=generator)
    return model.to(device=device, dtype=dtype).eval(), (x.to(device=device, dtype=dtype),)
