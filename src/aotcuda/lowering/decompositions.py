"""The decomposition table of lower(), and decompositions of the window factory ops (hann, hamming, blackman, bartlett, kaiser) into arange and
elementwise math, so that a window built inside forward becomes generated code instead of a fallback kernel.

Inductor has no lowering for any of them (torch 2.11–2.13): ``torch.hann_window(n_fft)`` inside an stft
front end (Cosmos3-audio's spectrogram encoder) compiles to ``aoti_torch_cuda_hann_window``. torch 2.13
ships a decomposition for hann_window only (torch/_decomp/decompositions.py), torch 2.11 for none; where
torch has one, ``decomposition_table`` keeps torch's and adds these only for the rest.

Each function follows ATen's own formula (aten/src/ATen/native/TensorFactories.cpp) step by step, in the
window's dtype, so that it matches eager to rounding: a periodic window of length N is the symmetric window
of length N + 1 without its last element; lengths 0 and 1 give an empty tensor and ``[1.]``. Registered for
the functional overloads export emits (``.default``, ``.periodic``, and hamming's ``.periodic_alpha`` /
``.periodic_alpha_beta``, kaiser's ``.beta``); their positional arguments are prefixes of one signature, so
one function serves every overload of an op, with eager's defaults.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from aotcuda.lowering.antialias import ANTIALIAS_DECOMPOSITIONS
from aotcuda.lowering.data_dependent import DATA_DEPENDENT_DECOMPOSITIONS
from aotcuda.lowering.matrix_exp import MATRIX_EXP_DECOMPOSITIONS
from aotcuda.lowering.overlap_add import UNFOLD_BACKWARD, expanded_first, needs_expanding
from aotcuda.passes.view_copy import VIEW_OF_COPY

aten = torch.ops.aten


def _window(formula: Callable[[torch.Tensor, int], torch.Tensor], window_length, periodic: bool, dtype, device):
    """formula(k, n) -> the symmetric window of length n at k = arange(n) (in the window's dtype)."""
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    if window_length == 0:
        return torch.empty((0,), dtype=dtype, device=device)
    if window_length == 1:
        return torch.ones((1,), dtype=dtype, device=device)
    n = window_length + 1 if periodic else window_length
    window = formula(torch.arange(n, dtype=dtype, device=device), n)
    return window[:window_length] if periodic else window


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=None):
    """alpha - beta * cos(2 pi k / (n - 1)), as ATen: k * c, cos, * -beta, + alpha."""
    def formula(k, n):
        return torch.cos(k * (2.0 * math.pi / (n - 1))) * -beta + alpha
    return _window(formula, window_length, periodic, dtype, device)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=None):
    """ATen's hann_window is hamming_window with alpha = beta = 0.5."""
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dtype, device=device)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=None):
    """0.42 - 0.5 cos(2w) + 0.08 cos(4w), w = pi k / (n - 1)."""
    def formula(k, n):
        w = k * (math.pi / (n - 1))
        return torch.cos(w * 4) * 0.08 - torch.cos(w * 2) * 0.5 + 0.42
    return _window(formula, window_length, periodic, dtype, device)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=None):
    """w = 2k / (n - 1) up to the middle ((n - 1) // 2 inclusive), 2 - w after it."""
    def formula(k, n):
        w = k * (2.0 / (n - 1))
        return torch.where(k < (n - 1) // 2 + 1, w, w * -1 + 2)
    return _window(formula, window_length, periodic, dtype, device)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=None):
    """I0(beta sqrt(1 - ((k - a) / a)^2)) / I0(beta), a = (n - 1) / 2 (aten.i0 is generated code)."""
    def formula(k, n):
        half = (n - 1) / 2.0
        ratio = (k - half) / half
        return torch.i0(torch.sqrt(1 - ratio * ratio) * beta) / torch.i0(torch.full((), beta, dtype=k.dtype,
                                                                                   device=k.device))
    return _window(formula, window_length, periodic, dtype, device)


def fft_fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, pin_memory=None):
    """ATen's fftfreq: [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] in the result's dtype, times 1 / (n d)."""
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    if not (dtype.is_floating_point or dtype.is_complex):  # eager refuses it, in its words
        return NotImplemented
    k = torch.arange(n, device=device)
    k = torch.where(k < (n + 1) // 2, k, k - n)
    return k.to(dtype) * _reciprocal(n * d)


def fft_rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, pin_memory=None):
    """ATen's rfftfreq: [0, 1, ..., n // 2] in the result's dtype, times 1 / (n d)."""
    dtype = dtype if dtype is not None else torch.get_default_dtype()
    if not (dtype.is_floating_point or dtype.is_complex):  # eager refuses it, in its words
        return NotImplemented
    return torch.arange(n // 2 + 1, device=device).to(dtype) * _reciprocal(n * d)


def _reciprocal(value):
    """1 / value as ATen's C++ double division takes it: ±inf at ±0 (n = 0 or d = 0), where Python raises
    ZeroDivisionError; a symbolic value (a dynamic n) as it is."""
    if isinstance(value, (int, float)) and value == 0:
        return math.copysign(math.inf, value) if isinstance(value, float) else math.inf
    return 1.0 / value


# Sample frequencies of an FFT (torch.fft.fftfreq, rfftfreq), factory ops with no Inductor lowering and no C shim in
# torch 2.11-2.13, like the windows: an FNO's or a spectral derivative's wavenumbers built in forward were refused as
# proxy-executor ops (sixth new user, 2026-12-07).
FREQUENCY_DECOMPOSITIONS: dict[torch._ops.OpOverload, Callable] = {
    aten.fft_fftfreq.default: fft_fftfreq,
    aten.fft_rfftfreq.default: fft_rfftfreq,
}


def nan_to_num_of_each_part(real_decomposition: Callable) -> Callable:
    """aten.nan_to_num as eager computes it for a complex tensor, each part replaced on its own (a nan real part by
    `nan`, an infinite imaginary part by `posinf` or `neginf`, ...); a real one by torch's own decomposition.

    torch's decomposition calls isneginf, which refuses complex values: `torch.nan_to_num(Y / H)` after a spectral
    division (a Wiener deconvolution) failed in lower()'s decompose step with torch's `RuntimeError: Complex dtype is
    not supported for isneginf`, though eager takes it (seventh new user, 2026-12-07)."""
    def nan_to_num(a, nan=None, posinf=None, neginf=None):
        if not a.is_complex():
            return real_decomposition(a, nan, posinf, neginf)
        return torch.complex(torch.nan_to_num(a.real, nan, posinf, neginf),
                             torch.nan_to_num(a.imag, nan, posinf, neginf))
    return nan_to_num


def _overloads(packet, names) -> list:
    return [getattr(packet, name) for name in names if hasattr(packet, name)]


WINDOW_DECOMPOSITIONS: dict[torch._ops.OpOverload, Callable] = {
    op: fn
    for packet, names, fn in (
        (aten.hann_window, ("default", "periodic"), hann_window),
        (aten.hamming_window, ("default", "periodic", "periodic_alpha", "periodic_alpha_beta"), hamming_window),
        (aten.blackman_window, ("default", "periodic"), blackman_window),
        (aten.bartlett_window, ("default", "periodic"), bartlett_window),
        (aten.kaiser_window, ("default", "periodic", "beta"), kaiser_window),
    )
    for op in _overloads(packet, names)
}


def decomposition_table() -> dict:
    """torch.export's default table, minus what Inductor does better undecomposed:

    - scaled_dot_product_attention: kept whole, Inductor picks a fused kernel (flash / memory-efficient
      on CUDA, the flash-attention CPU kernel) instead of the matmul-softmax-matmul decomposition.
    - the ``*_copy`` view ops: ReplaceViewCopyWithViewPass turns them into free views; decomposed,
      they would become clones first.

    plus what Inductor cannot lower at all:

    - the window factory ops (hann, hamming, blackman, bartlett, kaiser): without a decomposition a window
      built inside forward is a fallback kernel (``aoti_torch_cuda_hann_window``); torch's own
      decomposition is kept where the installed torch has one (hann_window on 2.13), ours fill the rest
      (WINDOW_DECOMPOSITIONS below); so do the FFT sample frequencies (fftfreq, rfftfreq: FREQUENCY_DECOMPOSITIONS);
    - antialiased resampling (``F.interpolate(..., antialias=True)``, bilinear and bicubic): two matrix products
      with ATen's interpolation weights (lowering/antialias.py);
    - the matrix exponential (``torch.linalg.matrix_exp``, real and complex): ATen's scaling and squaring of a
      degree-18 Taylor polynomial, as matrix products (lowering/matrix_exp.py);
    - ``nan_to_num`` of a complex tensor, which torch's decomposition refuses (nan_to_num_of_each_part);
    - ``unfold_backward`` of a broadcast grad (istft's window envelope), which torch 2.13's decomposition writes as a
      loop over the window's offsets: expanded first, it takes torch's one vectorized index_put
      (lowering/overlap_add.py);
    - the data-dependent ops model libraries emit (masked_scatter, the tensor checks ``_is_all_true`` and
      ``_assert_async``): lowering/data_dependent.py.
    """
    table = torch.export.default_decompositions()
    for op in (torch.ops.aten.scaled_dot_product_attention.default, *VIEW_OF_COPY):
        table.pop(op, None)
    if aten.nan_to_num.default in table:  # torch's, for real tensors; complex ones by part (a CustomDecompTable's
        table[aten.nan_to_num.default] = nan_to_num_of_each_part(table[aten.nan_to_num.default])  # get() says None)
    if UNFOLD_BACKWARD in table and needs_expanding():
        table[UNFOLD_BACKWARD] = expanded_first(table[UNFOLD_BACKWARD])
    for op, decomposition in {**WINDOW_DECOMPOSITIONS, **FREQUENCY_DECOMPOSITIONS, **ANTIALIAS_DECOMPOSITIONS,
                                    **MATRIX_EXP_DECOMPOSITIONS, **DATA_DEPENDENT_DECOMPOSITIONS}.items():
        if op not in table:  # a CustomDecompTable: setdefault would bypass its own bookkeeping
            table[op] = decomposition
    return table
