"""FFTs as real math (ReplaceComplexWithRealPass) against the library FFT, per length n, in one table.

    python benchmarks/fft.py                        # CPU: pocketfft
    python benchmarks/fft.py --device cuda          # the H200: cuFFT

Two programs, both compiled with torch.compile (Inductor, the code AOTInductor generates too) of the
ExportedProgram's module, float32:
- "filter": a spectral filter (FNO layers, spectral mixers): rfft along the last dim → a complex
  weight per frequency → irfft, on x = [signals, n], for every n of --sizes.
- "whisper": a Whisper log-mel front end: stft (n_fft 400, hop 160, hann window, center, reflect) →
  |.|² → 80-mel matmul → log10, on --batch × 30 s of 16 kHz audio.
"library" compiles the exported program as it is (Inductor calls pocketfft/cuFFT for the FFT ops);
"aotcuda" compiles it after the pass. Times are medians of torch.utils.benchmark per call, in µs.
Prints one table and writes the rows as JSON to benchmarks/results/fft-<device>-torch<version>.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib

import torch
from torch.utils import benchmark

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral.plan import plan

from _common import relative_error


class SpectralFilter(torch.nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n // 2 + 1, dtype=torch.complex64) / n)

    def forward(self, x):
        return torch.fft.irfft(torch.fft.rfft(x) * self.weight, n=x.shape[-1])


class WhisperFrontEnd(torch.nn.Module):
    """Whisper's log_mel_spectrogram: stft → power → mel filterbank → log10, clamped and rescaled."""

    def __init__(self, n_fft: int = 400, hop: int = 160, mels: int = 80):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("filters", torch.rand(mels, n_fft // 2 + 1))

    def forward(self, audio):
        stft = torch.stft(audio, self.n_fft, self.hop, window=self.window, return_complex=True)
        power = stft[..., :-1].abs() ** 2
        log_spec = torch.clamp(self.filters @ power, min=1e-10).log10()
        log_spec = torch.maximum(log_spec, log_spec.amax(dim=(-2, -1), keepdim=True) - 8.0)
        return (log_spec + 4.0) / 4.0


def _median_us(fn, x) -> float:
    fn(x), fn(x)  # compile and warm up
    timer = benchmark.Timer("fn(x)", globals={"fn": fn, "x": x})
    return timer.blocked_autorange(min_run_time=1.0).median * 1e6


def measure(model: torch.nn.Module, x: torch.Tensor) -> dict:
    ep = torch.export.export(model, (x,)).run_decompositions()
    rewritten = ReplaceComplexWithRealPass(strict=True)(ep)
    torch._dynamo.reset()
    library, ours = torch.compile(ep.module()), torch.compile(rewritten.module())
    with torch.no_grad():
        error = relative_error(ours(x), model(x))
        library_us, ours_us = _median_us(library, x), _median_us(ours, x)
    return dict(library_us=library_us, aotcuda_us=ours_us, ratio=ours_us / library_us, rel_error=error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 400, 512, 1024, 2048, 4096])
    parser.add_argument("--signals", type=int, default=512, help="rows of the filter's x (batch × channels)")
    parser.add_argument("--batch", type=int, default=8, help="clips of 30 s of 16 kHz audio (whisper)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--no-whisper", action="store_true")
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    machine = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    library = "cuFFT" if cuda else "pocketfft"
    print(f"{machine}, torch {torch.__version__}; library = {library} via torch.compile; float32")
    print(f"| program | n | plan | {library} (µs) | aotcuda (µs) | aotcuda / {library} | rel. error |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    cases = [("filter", n, SpectralFilter(n), torch.randn(args.signals, n)) for n in args.sizes]
    if not args.no_whisper:
        cases.append(("whisper", 400, WhisperFrontEnd(), torch.randn(args.batch, int(16000 * args.seconds))))
    for program, n, model, x in cases:
        row = dict(program=program, n=n, plan=plan(n).describe(),
                   **measure(model.to(args.device), x.to(args.device)))
        rows.append(row)
        print(f"| {program} | {n} | {row['plan']} | {row['library_us']:.1f} | {row['aotcuda_us']:.1f} | "
              f"{row['ratio']:.2f}× | {row['rel_error']:.1e} |", flush=True)
    results = pathlib.Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    name = f"fft-{'cuda' if cuda else 'cpu'}-torch{torch.__version__.split('+')[0]}.json"
    (results / name).write_text(json.dumps(dict(machine=machine, torch=torch.__version__, rows=rows), indent=1))
    print(f"wrote benchmarks/results/{name}")


if __name__ == "__main__":
    main()
