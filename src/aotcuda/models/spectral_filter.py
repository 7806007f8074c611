"""A spectral filter: a convolution by FFT with a short kernel (32 taps), as a new user wrote it (session 24).

    y = irfft(rfft(x, 2n) · rfft(taps, 2n), 2n)[..., :n]        x [..., n], real

Both transforms are zero-padded to 2n, so that their product is the linear convolution of x by the taps, not a
circular one, cut to x's length. The lowering tests lower it with n dynamic (an FFT length with no bound is
refused, tests/lowering/test_pipeline.py); benchmarks/scripts/cpu_threads_tail.py times its calls by OpenMP
thread count.
"""

from __future__ import annotations

import torch
from torch import nn


class SpectralFilter(nn.Module):
    """forward(x [..., n]) → x convolved with 32 random taps (randn / 32), [..., n]."""

    def __init__(self):
        super().__init__()
        self.taps = nn.Parameter(torch.randn(32) / 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        spectrum = torch.fft.rfft(x, n=2 * n) * torch.fft.rfft(self.taps, n=2 * n)
        return torch.fft.irfft(spectrum, n=2 * n)[..., :n]
