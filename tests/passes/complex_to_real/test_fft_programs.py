"""Whole spectral programs: a Whisper log-mel front end over a dynamic number of samples (stft n_fft 400,
mixed radix 20·20), rewritten and matched with eager at two lengths, and lowered once with AOTInductor
on the CPU (one compile, module-scoped); the same on CUDA where there is one (cuda-marked)."""

import pytest
import torch
from comparisons import torch_aoti_load

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import assert_no_complex, export, ops_in

aten = torch.ops.aten
FFT_OPS = {aten._fft_r2c.default, aten._fft_c2c.default, aten._fft_c2r.default}
LENGTHS = (16000, 24160)  # 1 s and 1.51 s of 16 kHz audio: 101 and 152 frames


class WhisperFrontEnd(torch.nn.Module):
    """Whisper's log_mel_spectrogram (n_fft 400, hop 160, 80 mels), with a random filterbank."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(400))
        self.register_buffer("filters", torch.rand(80, 201))

    def forward(self, audio):
        stft = torch.stft(audio, 400, 160, window=self.window, return_complex=True)
        power = stft[..., :-1].abs() ** 2
        log_spec = torch.clamp(self.filters @ power, min=1e-10).log10()
        log_spec = torch.maximum(log_spec, log_spec.amax(dim=(-2, -1), keepdim=True) - 8.0)
        return (log_spec + 4.0) / 4.0


def whisper_program(device):
    model = WhisperFrontEnd().to(device)
    # Dim.AUTO: a named Dim is refused by export itself (its guard 2 % (2 + 2·(samples // 160)) != 0
    # comes from torch's stft, before the pass).
    ep = export(model, (torch.randn(2, 16000, device=device),), dynamic_shapes=({1: torch.export.Dim.AUTO},))
    assert FFT_OPS & ops_in(ep)
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert not FFT_OPS & ops_in(new)
    return model, new


def assert_matches_eager(model, run, device):
    for length in LENGTHS:
        audio = torch.randn(2, length, device=device)
        torch.testing.assert_close(run(audio), model(audio), rtol=1e-5, atol=1e-5)


def test_whisper_front_end_rewritten_matches_eager():
    model, new = whisper_program("cpu")
    assert_matches_eager(model, new.module(), "cpu")


@pytest.fixture(scope="module")
def whisper_package(tmp_path_factory):
    model, new = whisper_program("cpu")
    path = torch._inductor.aoti_compile_and_package(new, package_path=str(tmp_path_factory.mktemp("aoti") / "w.pt2"))
    return model, torch_aoti_load(path)


@pytest.mark.slow
def test_whisper_front_end_aoti_package_matches_eager(whisper_package):
    model, runner = whisper_package
    assert_matches_eager(model, runner, "cpu")


@pytest.mark.cuda
def test_whisper_front_end_aoti_package_on_cuda(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model, new = whisper_program("cuda")
    path = torch._inductor.aoti_compile_and_package(new, package_path=str(tmp_path / "w.pt2"))
    assert_matches_eager(model, torch_aoti_load(path), "cuda")
