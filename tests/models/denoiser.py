"""A speech denoiser as a new user wrote one (nu39, 2026-12-07): STFT -> a magnitude mask from two nn.Linear ->
iSTFT. Shared by tests/lowering/test_overlap_add.py (a small window) and benchmarks/scripts/istft_lowering_time.py
(the user's window); istft is called without length= (see docs/ops.md)."""

from __future__ import annotations

import torch


class Denoiser(torch.nn.Module):
    """wav (batch, samples) float32 -> the denoised wav (batch, samples rounded down to whole hops)."""

    def __init__(self, n_fft: int = 512, hop: int = 128, hidden: int = 64):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        bins = n_fft // 2 + 1
        self.net = torch.nn.Sequential(torch.nn.Linear(bins, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, bins),
                                       torch.nn.Sigmoid())

    def forward(self, wav):
        spec = torch.stft(wav, self.n_fft, self.hop, window=self.window, return_complex=True)
        mask = self.net(spec.abs().transpose(1, 2)).transpose(1, 2)
        return torch.istft(spec * mask, self.n_fft, self.hop, window=self.window)
