"""Issue 28 item 3: try to reproduce `InductorError: AssertionError: not bool like VR[0, int_oo]` on a
bf16 Hyena-style long convolution lowered with aotcuda.lower(device="cpu").

Each variant is lowered, loaded and compared with eager on fresh random inputs at lengths/batches other
than the example's. One line per variant: OK (max relative error) or the exception's first line.

    python benchmarks/scripts/hyena_bf16_repro.py                                   # every variant
    python benchmarks/scripts/hyena_bf16_repro.py safari_operator_bf16_dynbatch     # the named ones

The lines of the last runs are in benchmarks/results/hyena_bf16_repro.txt (docs/versions.md, "Open").
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
import traceback

import torch
from torch import nn
from torch.export import Dim

import aotcuda

BF16 = torch.bfloat16


def fftconv_float(u, k, skip=None, norm_forward=False):
    """y = irfft(rfft(u.float(), 2L) · rfft(k.float(), 2L), 2L)[..., :L] (+ u·skip), back to u's dtype."""
    length = u.shape[-1]
    n = 2 * length
    k_f = torch.fft.rfft(k.float(), n=n)
    if norm_forward:
        k_f = k_f / n
    u_f = torch.fft.rfft(u.float(), n=n)
    y = torch.fft.irfft(u_f * k_f, n=n, norm="forward" if norm_forward else "backward")[..., :length]
    if skip is not None:
        y = y + u.float() * skip.float().unsqueeze(-1)
    return y.to(u.dtype)


class LearnedFilter(nn.Module):
    """x [B, D, L] bf16, h [D, Lmax] a parameter (float32 or bf16), sliced to L."""

    def __init__(self, d, lmax, filter_dtype=torch.float32, skip=False, norm_forward=False):
        super().__init__()
        self.h = nn.Parameter(torch.randn(d, lmax, dtype=filter_dtype) / lmax)
        self.skip = nn.Parameter(torch.randn(d, dtype=filter_dtype)) if skip else None
        self.norm_forward = norm_forward

    def forward(self, x):
        return fftconv_float(x, self.h[:, : x.shape[-1]], self.skip, self.norm_forward)


class FilterInput(nn.Module):
    """The filter as a second input, [D, L]."""

    def forward(self, x, h):
        return fftconv_float(x, h)


class Sin(nn.Module):
    def __init__(self, dim, w=10.0):
        super().__init__()
        self.freq = nn.Parameter(w * torch.ones(1, dim))

    def forward(self, x):
        return torch.sin(self.freq * x)


class ImplicitFilter(nn.Module):
    """safari's HyenaFilter: positional features → MLP with Sin → exponential decay; computed in forward."""

    def __init__(self, d, lmax, emb_dim=5, order=16, dtype=torch.float32):
        super().__init__()
        t = torch.linspace(0, 1, lmax)[None, :, None]
        bands = (emb_dim - 1) // 2
        t_rescaled = torch.linspace(0, lmax - 1, lmax)[None, :, None]
        w = 2 * math.pi * t_rescaled / lmax
        f = torch.linspace(1e-4, bands - 1, bands)[None, None]
        z = torch.exp(-1j * f * w)
        self.register_buffer("z", torch.cat([t, z.real, z.imag], dim=-1).to(dtype))
        self.register_buffer("t", t.to(dtype))
        self.mlp = nn.Sequential(nn.Linear(emb_dim, order), Sin(order), nn.Linear(order, order), Sin(order),
                                 nn.Linear(order, d, bias=False)).to(dtype)
        max_decay, min_decay = math.log(1e-2) / 0.3, math.log(1e-2) / 1.5
        self.register_buffer("deltas", torch.linspace(min_decay, max_decay, d)[None, None].to(dtype))

    def forward(self, length):
        z, t = self.z[:, :length], self.t[:, :length]
        h = self.mlp(z)
        return (h * (torch.exp(-t * self.deltas.abs()) + 0.05))[0].transpose(0, 1)  # [D, L]


class SafariOperator(nn.Module):
    """safari's HyenaOperator (order 2) on [B, L, D], whole module in `dtype`; the FFT in float32."""

    def __init__(self, d, lmax, dtype=BF16, use_min=True):
        super().__init__()
        self.d, self.lmax, self.use_min = d, lmax, use_min
        self.in_proj = nn.Linear(d, 3 * d).to(dtype)
        self.out_proj = nn.Linear(d, d).to(dtype)
        self.short_filter = nn.Conv1d(3 * d, 3 * d, 3, padding=2, groups=3 * d).to(dtype)
        self.filter = ImplicitFilter(d, lmax, dtype=dtype)
        self.bias = nn.Parameter(torch.randn(d).to(dtype))

    def forward(self, u):
        length = u.size(-2)
        l_filter = min(length, self.lmax) if self.use_min else length
        u = self.in_proj(u).transpose(1, 2)
        uc = self.short_filter(u)[..., :l_filter]
        x0, x1, v = uc.split(self.d, dim=1)
        k = self.filter(l_filter)
        v = fftconv_float(v * x1, k, self.bias, norm_forward=True)
        return self.out_proj((v * x0).transpose(1, 2))


def batch_dim():
    return Dim("batch", min=1, max=64)


def variants():
    d, lmax = 8, 256
    out = {}

    def add(name, make, example, dynamic, tries):
        out[name] = (make, example, dynamic, tries)

    x = lambda b, length: torch.randn(b, d, length, dtype=BF16)
    add("param_f32_dynbatch", lambda: LearnedFilter(d, 64), lambda: (x(2, 64),), lambda: ({0: batch_dim()},),
        lambda: [(x(5, 64),), (x(1, 64),)])
    add("param_bf16_dynbatch", lambda: LearnedFilter(d, 64, BF16), lambda: (x(2, 64),),
        lambda: ({0: batch_dim()},), lambda: [(x(5, 64),)])
    add("param_bf16_skip_normfwd_dynbatch", lambda: LearnedFilter(d, 64, BF16, skip=True, norm_forward=True),
        lambda: (x(2, 64),), lambda: ({0: batch_dim()},), lambda: [(x(3, 64),)])
    add("param_f32_skip_dynbatch_unbounded", lambda: LearnedFilter(d, 64, skip=True), lambda: (x(2, 64),),
        lambda: ({0: Dim("batch")},), lambda: [(x(7, 64),)])
    add("param_f32_skip_dynbatch_dynlen", lambda: LearnedFilter(d, 2 * lmax, skip=True), lambda: (x(2, 64),),
        lambda: ({0: batch_dim(), 2: Dim("length", min=8, max=lmax)},), lambda: [(x(3, 100),), (x(1, 256),)])
    add("input_filter_bf16_dynbatch_dynlen", FilterInput, lambda: (x(2, 64), torch.randn(d, 64, dtype=BF16)),
        lambda: ({0: batch_dim(), 2: (length := Dim("length", min=8, max=lmax))}, {1: length}),
        lambda: [(x(3, 100), torch.randn(d, 100, dtype=BF16))])
    add("input_filter_bf16_dynbatch_static_len1024", FilterInput,
        lambda: (x(2, 1024), torch.randn(d, 1024, dtype=BF16)), lambda: ({0: batch_dim()}, None),
        lambda: [(x(3, 1024), torch.randn(d, 1024, dtype=BF16))])
    add("implicit_filter_f32_dynbatch", lambda: _ImplicitConv(d, 64, torch.float32), lambda: (x(2, 64),),
        lambda: ({0: batch_dim()},), lambda: [(x(4, 64),)])
    add("implicit_filter_bf16_dynbatch", lambda: _ImplicitConv(d, 64, BF16), lambda: (x(2, 64),),
        lambda: ({0: batch_dim()},), lambda: [(x(4, 64),)])
    ul = lambda b, length: torch.randn(b, length, d, dtype=BF16)
    add("safari_operator_bf16_dynbatch", lambda: SafariOperator(d, 64), lambda: (ul(2, 64),),
        lambda: ({0: batch_dim()},), lambda: [(ul(3, 64),)])
    add("safari_operator_bf16_dynbatch_dynlen", lambda: SafariOperator(d, 2 * lmax, use_min=False),
        lambda: (ul(2, 64),), lambda: ({0: batch_dim(), 1: Dim("length", min=8, max=lmax)},),
        lambda: [(ul(3, 100),), (ul(1, 256),)])
    add("evo_modal_gelu_bf16_dynbatch_unbounded", lambda: ModalConv(d, 4), lambda: (x(2, 64),),
        lambda: ({0: Dim("batch")},), lambda: [(x(5, 64),), (x(1, 64),)])
    add("evo_modal_gelu_bf16_dynbatch_dynlen", lambda: ModalConv(d, 4), lambda: (x(2, 64),),
        lambda: ({0: batch_dim(), 2: Dim("length", min=8, max=lmax)},), lambda: [(x(3, 100),), (x(1, 256),)])
    add("evo_modal_pow_bf16_dynbatch", lambda: ModalConv(d, 4, by_pow=True), lambda: (x(2, 64),),
        lambda: ({0: batch_dim()},), lambda: [(x(5, 64),)])
    add("param_f32_skip_dynbatch_auto_example_batch1", lambda: LearnedFilter(d, 64, skip=True),
        lambda: (x(1, 64),), lambda: ({0: Dim.AUTO},), lambda: [(x(1, 64),)])
    add("param_f32_dynbatch_bounded_example_batch1", lambda: LearnedFilter(d, 64, skip=True),
        lambda: (x(1, 64),), lambda: ({0: Dim("batch", min=1, max=32)},), lambda: [(x(6, 64),), (x(1, 64),)])
    add("seq_major_dim1_ortho_dynbatch", SeqMajor, lambda: (ul(2, 64), torch.randn(64, d)),
        lambda: ({0: Dim("batch")}, None), lambda: [(ul(5, 64), torch.randn(64, d))])
    add("complex_fft_dynbatch", ComplexFFT, lambda: (x(2, 64), torch.randn(d, 64)),
        lambda: ({0: Dim("batch")}, None), lambda: [(x(5, 64), torch.randn(d, 64))])
    add("unbacked_length_item_dynbatch", UnbackedLength, lambda: (x(2, 64), torch.tensor(40)),
        lambda: ({0: batch_dim()}, None), lambda: [(x(3, 64), torch.tensor(17)), (x(1, 64), torch.tensor(64))])
    return out


class UnbackedLength(nn.Module):
    """The convolution over the first n steps, n a tensor read with .item() (an unbacked size, range [0, ∞)
    before the checks: the VR[0, int_oo] of the reported assertion)."""

    def __init__(self, d=8, lmax=64):
        super().__init__()
        self.h = nn.Parameter(torch.randn(d, lmax) / lmax)

    def forward(self, x, n):
        length = n.item()
        torch._check(length >= 2)
        torch._check(length <= x.shape[-1])
        return fftconv_float(x[..., :length], self.h[:, :length])


class SeqMajor(nn.Module):
    """[B, L, D] bf16, the transforms over dim 1 with norm="ortho", filter [L, D] float32."""

    def forward(self, u, k):
        length = u.shape[1]
        spectrum = torch.fft.rfft(u.float(), n=2 * length, dim=1, norm="ortho") * torch.fft.rfft(
            k, n=2 * length, dim=0, norm="ortho")
        return torch.fft.irfft(spectrum, n=2 * length, dim=1, norm="ortho")[:, :length].to(u.dtype)


class ComplexFFT(nn.Module):
    """The full complex fft/ifft pair at 2L, the real part, bf16 in/out."""

    def forward(self, u, k):
        length = u.shape[-1]
        y = torch.fft.ifft(torch.fft.fft(u.float(), n=2 * length) * torch.fft.fft(k, n=2 * length), n=2 * length)
        return y.real[..., :length].to(u.dtype)


class ModalConv(nn.Module):
    """StripedHyena's (Evo's) long convolution: a modal filter h[d, t] = Re Σ_s r[d, s] p[d, s]^t made in
    forward from complex poles/residues (float32), fftconv with norm="forward", skip, gelu, bf16 in/out."""

    def __init__(self, d, state, by_pow=False):
        super().__init__()
        self.poles = nn.Parameter(torch.randn(d, state, 2) * 0.3)
        self.residues = nn.Parameter(torch.randn(d, state, 2))
        self.skip = nn.Parameter(torch.randn(d))
        self.by_pow = by_pow

    def forward(self, x):
        length = x.shape[-1]
        poles, residues = torch.view_as_complex(self.poles), torch.view_as_complex(self.residues)
        t = torch.arange(length, device=x.device)[None, None]
        if self.by_pow:
            powers = poles[..., None] ** t
        else:
            powers = torch.exp(torch.log(poles)[..., None] * t)
        h = (residues[..., None] * powers).sum(1).real  # [D, L] float32
        return torch.nn.functional.gelu(fftconv_float(x, h, self.skip, norm_forward=True).float()).to(x.dtype)


class _ImplicitConv(nn.Module):
    def __init__(self, d, lmax, dtype):
        super().__init__()
        self.filter = ImplicitFilter(d, lmax, dtype=dtype)
        self.skip = nn.Parameter(torch.randn(d, dtype=dtype))

    def forward(self, x):
        return fftconv_float(x, self.filter(x.shape[-1]), self.skip, norm_forward=True)


def relative_error(actual, expected):
    return ((actual.float() - expected.float()).abs().max() / expected.float().abs().max()).item()


def try_variant(name, make, example, dynamic, tries):
    torch.manual_seed(0)
    module = make().eval()
    start = time.time()
    try:
        with tempfile.TemporaryDirectory() as folder:
            lowered = aotcuda.lower(module, example(), dynamic_shapes=dynamic(), device="cpu",
                                    package_path=f"{folder}/{name}.pt2")
            program = lowered.load()
            errors = []
            for inputs in tries():
                with torch.no_grad():
                    expected = module(*inputs)
                errors.append(relative_error(program(*inputs), expected))
        return f"OK   {name}: max relative error {max(errors):.1e} ({time.time() - start:.0f} s)"
    except Exception as error:  # noqa: BLE001 - a repro reports every failure
        traceback.print_exc(file=sys.stderr)
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"FAIL {name}: {type(error).__name__}: {first[:300]} ({time.time() - start:.0f} s)"


def main(names):
    print("torch", torch.__version__, flush=True)
    table = variants()
    for name in names or table:
        print(try_variant(name, *table[name]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
