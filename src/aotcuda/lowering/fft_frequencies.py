"""``torch.fft.fftfreq`` and ``rfftfreq`` of a dynamic length, for the export step.

Both take ``int n`` (``aten::fft_fftfreq(int n, float d=1., ...)``), so torch.export makes a dynamic length a constant:
``n = x.shape[-1]; k = torch.fft.fftfreq(n)`` with a Dim on that dim failed with "Constraints violated (n)! ...
specialized it to be a constant (16)" (torch 2.13; sixth new user, 2026-12-07). For the export step the two functions
of ``torch.fft`` are wrapped: where n is a SymInt they compute ATen's formula with arange (the decompositions of
``decompositions.FREQUENCY_DECOMPOSITIONS``, the same values); with an int n torch's own op runs, which lower()'s
decomposition table then writes the same way. A model that imported the functions themselves (``from torch.fft import
fftfreq``) calls torch's, which still specializes.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch

_ORIGINALS = {"fftfreq": torch.fft.fftfreq, "rfftfreq": torch.fft.rfftfreq}


def _wrapped(name: str):
    original = _ORIGINALS[name]

    @functools.wraps(original)
    def frequencies(n, d=1.0, *, dtype=None, layout=torch.strided, device=None, requires_grad=False, **rest):
        if not isinstance(n, torch.SymInt) or rest or requires_grad:
            return original(n, d, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad, **rest)
        from aotcuda.lowering.decompositions import fft_fftfreq, fft_rfftfreq

        formula = fft_fftfreq if name == "fftfreq" else fft_rfftfreq
        result = formula(n, d, dtype=dtype, device=device)
        if result is NotImplemented:  # a dtype eager refuses (an integer one): torch's own op says so
            return original(n, d, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)
        return result

    return frequencies


@contextlib.contextmanager
def fft_frequencies_over_symbolic_lengths() -> Iterator[None]:
    """``torch.fft.fftfreq`` and ``rfftfreq`` as ``_wrapped`` for the step (see the module doc)."""
    if any(getattr(torch.fft, name) is not original for name, original in _ORIGINALS.items()):
        yield  # entered already (a nested lower()), or patched by another
        return
    for name in _ORIGINALS:
        setattr(torch.fft, name, _wrapped(name))
    try:
        yield
    finally:
        for name, original in _ORIGINALS.items():
            setattr(torch.fft, name, original)
