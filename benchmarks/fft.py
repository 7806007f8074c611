"""FFTs as real math (ReplaceComplexWithRealPass) against the library FFT, per length n, in one table.

    python3 benchmarks/fft.py                        # CPU: torch.fft's library (MKL on x86 wheels, else pocketfft)
    python3 benchmarks/fft.py --device cuda          # the H200: cuFFT (about 3-4 minutes)
    python3 benchmarks/fft.py --device cuda --forms gemm kernel   # both CUDA forms (the default there)
    python3 benchmarks/fft.py --programs stft_dynamic freeu filter_bf16     # issue 30's programs only
    python3 benchmarks/fft.py --device cuda --programs filter_bluestein  # Bluestein (A/B: --bluestein-tile 4096)
                          # (CPU, 2 cores: about 8 minutes; the H200: about 4, beside 3-4 for the other two)

The programs (--programs, default all), each compiled with torch.compile (Inductor, the code AOTInductor
generates too) of the ExportedProgram's module, float32 unless said:
- "filter": a spectral filter (FNO layers, spectral mixers): rfft along the last dim → a complex
  weight per frequency → irfft, on x = [signals, n], for every n of --sizes.
- "whisper": a Whisper log-mel front end: stft (n_fft --n-fft, default 400, hop 160, hann window,
  center, reflect) → |.|² → 80-mel matmul → log10, on --batch × 30 s of 16 kHz audio.
- "stft_dynamic": the same front end exported with the audio's length a dynamic dim (a torch.export Dim
  of frames, samples = hop·frames, up to --dynamic-max-seconds): the frame count is symbolic, one
  program (and one torch.compile graph, marked dynamic; a recompile is an error) timed at each length of
  --dynamic-seconds, a row each.
- "freeu": diffusers' FreeU fourier_filter on a feature map x [B, C, H, W] of --freeu-shapes (SDXL's
  up-block skips): fftn over (H, W) → fftshift → times a low-frequency mask (threshold 1, scale 0.9) →
  ifftshift → ifftn → real. n is H; a 2-D transform is one transform per dim.
- "filter_bf16": the filter on bfloat16 x [signals, n], n of --bf16-sizes: torch.fft takes no bfloat16 (and
  float16 only at powers of two on CUDA), so the program casts to float32, filters, and casts the result
  back, as a bf16 model's FFT has to; the pass therefore sees float32 FFTs and the casts stay kernels of
  their own. Its error is against the float64 program on the same bf16 values, the result not rounded;
  its check passes at most 2× the error of rounding that reference to bfloat16 itself.
- "filter_bluestein": the filter at the lengths of --bluestein-sizes (default 1009, 2039 and 4093: primes,
  which no tiling of kernels/fft_plan.py covers), which the kernel form runs as Bluestein inside one
  aotcuda::fft_rows kernel a transform (kernels/fft_bluestein.py) and the GEMM form as several DFT products.
  --bluestein-tile sets fft_plan.BLUESTEIN_TILE in every process: 8192 (the module's default: n ≤ 4096,
  m ≤ 8192) or 4096 (n ≤ 2048, so 4093 stays DFT products: the setting before, for A/B); --bluestein-halves
  fft_plan.BLUESTEIN_HALVES: yes (the default: an m past 4096 as two halves of m/2) or no (one tile of m, up
  to 8192 values in one program: the form before, for A/B); --bluestein-pairs fft_rows.BLUESTEIN_PAIRS: yes (the
  default: r2c and c2r two real rows to a complex transform) or no (one, the kernel before, for A/B);
  --halves-as-parts fft_rows.HALVES_AS_PARTS: no (the default) or yes (2049…4096 by the parted kernels, for A/B);
  --filter-convolution AOTCUDA_FFT_FILTER_CONVOLUTION: yes (the default: the filter, whose weight is a Parameter
  every row shares, as one convolution kernel, spectral/filter.py) or no (its r2c and c2r kernels, for A/B).
"library" compiles the exported program as it is (Inductor calls torch.fft's library for the FFT ops: cuFFT,
or MKL or pocketfft);
"aotcuda" compiles it after the pass, once per form (--forms, CUDA only; one row each): "gemm", the DFT
products of spectral/transform.py, and "kernel", one aotcuda::fft_rows Triton kernel per transform
(AOTCUDA_FFT_KERNEL=1; kernels/fft_rows.py; lengths it does not cover stay DFT products). On the CPU the
pass takes its CPU form (Stockham stages) whatever --forms says. On CUDA each row also gives the kernels
a call of both programs (torch.profiler: every CUDA kernel of one call, the filter's product and the
front end's mel matmul included) beside the FFTs in the program. Each time is the best of --repeat medians of
torch.utils.benchmark (µs per call), the two programs alternating; the load average (`uptime`'s first
figure) is read before each row. Every program's error is relative to the program run in float64 on
the CPU (‖out − ref‖/‖ref‖): the documented result, which eager cuFFT is not at every length; "check"
says ok where aotcuda's error is within 1e-5 (float32) or the bfloat16 bound above (the library's error
has its own column). Every program
is checked to leave no FFT op after the pass (an AssertionError otherwise); "fft_rows" counts the
aotcuda::fft_rows ops of the kernel form's program (one per transformed dim of a covered length).

On CUDA the cases compile in --workers spawned processes at once (each export, pass and torch.compile
is CPU work, tens of seconds per program); a process measures its case under a lock shared by all, so
that one case at a time runs on the GPU. Rows go to --json (default
benchmarks/results/fft-<device>-torch<version>.json) as each one finishes (a run stopped early keeps
them); the table, in --sizes order, comes at the end.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib.util
import json
import math
import multiprocessing
import os
import pathlib
import sys
import time

import torch
from torch.utils import benchmark

from aotcuda.kernels import fft_plan, fft_rows
from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral.plan import cpu_describe, plan

from _common import cuda_kernels_a_call, relative_error

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


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


class FilterInBfloat16(SpectralFilter):
    """The filter of a bfloat16 model: float32 FFTs between casts (torch.fft takes no bfloat16); a float64
    input (the reference) is filtered in float64."""

    def forward(self, x):
        return super().forward(x.float() if x.dtype == torch.bfloat16 else x).to(x.dtype)


class FreeUFourierFilter(torch.nn.Module):
    """diffusers' FreeU fourier_filter (utils/torch_utils.py) on a float32 feature map [B, C, H, W]."""

    def __init__(self, threshold: int = 1, scale: float = 0.9):
        super().__init__()
        self.threshold, self.scale = threshold, scale

    def forward(self, x):
        x_freq = torch.fft.fftshift(torch.fft.fftn(x, dim=(-2, -1)), dim=(-2, -1))
        B, C, H, W = x_freq.shape
        mask = torch.ones((B, C, H, W), device=x.device)
        crow, ccol, t = H // 2, W // 2, self.threshold
        mask[..., crow - t:crow + t, ccol - t:ccol + t] = self.scale
        x_freq = torch.fft.ifftshift(x_freq * mask, dim=(-2, -1))
        return torch.fft.ifftn(x_freq, dim=(-2, -1)).real


HOP = 160  # the Whisper front end's hop, samples = HOP·frames for stft_dynamic


def _shape(key: str) -> tuple[int, ...]:
    return tuple(int(size) for size in key.split("x"))


def make_case(program: str, key, args):
    """(model, example input, dynamic_shapes, the inputs timed) of one case, the same in every process
    (seeded by the case). key: n (filter, whisper's n_fft, stft_dynamic's n_fft, filter_bf16) or a shape
    "BxCxHxW" (freeu)."""
    torch.manual_seed(math.prod(_shape(key)) if program == "freeu" else key)
    if program in ("filter", "filter_bf16", "filter_bluestein"):
        dtype = torch.bfloat16 if program == "filter_bf16" else torch.float32
        x = torch.randn(args.signals, key).to(dtype)
        return (FilterInBfloat16 if program == "filter_bf16" else SpectralFilter)(key), x, None, [x]
    if program == "whisper":
        x = torch.randn(args.batch, int(16000 * args.seconds))
        return WhisperFrontEnd(n_fft=key), x, None, [x]
    if program == "freeu":
        x = torch.randn(_shape(key))
        return FreeUFourierFilter(), x, None, [x]
    frames = [int(16000 * s) // HOP for s in args.dynamic_seconds]
    timed = [torch.randn(args.batch, HOP * f) for f in frames]
    dim = torch.export.Dim("frames", min=8, max=max(int(16000 * args.dynamic_max_seconds) // HOP, *frames))
    return WhisperFrontEnd(n_fft=key), timed[0], {"audio": {1: HOP * dim}}, timed


def _best_median_us(fns, x, repeat: int, min_run_time: float) -> list[float]:
    """Best of `repeat` medians per fn, the fns alternating so that a change of load hits all of them."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            timer = benchmark.Timer("fn(x)", globals={"fn": fn, "x": x})
            best[i] = min(best[i], timer.blocked_autorange(min_run_time=min_run_time).median * 1e6)
    return best


def _documented_reference(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The program in float64 on the CPU (torch.fft's CPU library), on the device's input: the reference both errors are
    measured against. Not eager on the device: torch.fft.irfft is documented to ignore the imaginary
    parts of the zero-frequency and Nyquist bins, which the filter's complex weight makes nonzero, and
    cuFFT reads them at some lengths (pytorch/pytorch#154496: 1D, e.g. 8192 and 16384 points), which
    moves eager CUDA ~1e-2 away from the documented result there."""
    import copy

    reference_model = copy.deepcopy(model).cpu().double()
    return reference_model(x.detach().cpu().double())


def _form(n: int, device: str, form: str, program: str = "filter") -> str:
    """How the pass computes a real length-n transform there: on the CPU the Stockham stages of the n/2-point
    complex transform an even r2c/c2r runs (spectral/stockham.py); elsewhere the GEMM plan of n, or the
    kernel's tiling or Bluestein plan (kernels/fft_plan.py) where it covers n. A c2c (freeu's) runs n as it is."""
    if device == "cpu":
        complex_n = n if program == "freeu" or n % 2 else n // 2
        half = "" if complex_n == n else " (n/2)"
        if _cpu_kernel(n):
            from aotcuda.kernels import fft_cpu

            return f"kernel {fft_cpu.describe(complex_n)}{half}"
        return cpu_describe(complex_n) + half
    if form == "kernel" and fft_plan.covers(n):
        return f"kernel {fft_plan.kernel_plan(n).describe()}"
    return plan(n).describe()


def _cpu_kernel(n: int) -> bool:
    """Whether the pass computes a CPU transform of length n as aotcuda::fft_rows_cpu (one C++ template
    kernel a transform, kernels/fft_cpu.py: every n ≤ MAX_N, Bluestein inside it for a prime factor above
    13) rather than as Stockham stages of ATen ops."""
    from aotcuda import switches
    from aotcuda.kernels import fft_cpu, fft_cpu_template

    return switches.flag("AOTCUDA_FFT_CPU_KERNEL") and n <= fft_cpu.MAX_N and fft_cpu_template.available()


def _forms(args) -> list[str]:
    return ["stages"] if args.device == "cpu" else args.forms


@contextlib.contextmanager
def _fft_kernel_switch(on: bool):
    """AOTCUDA_FFT_KERNEL set for the pass's run (read at each transform it rewrites), then restored."""
    before = os.environ.get("AOTCUDA_FFT_KERNEL")
    os.environ["AOTCUDA_FFT_KERNEL"] = "1" if on else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["AOTCUDA_FFT_KERNEL"]
        else:
            os.environ["AOTCUDA_FFT_KERNEL"] = before


def _ffts(ep) -> int:
    fft_ops = {torch.ops.aten._fft_r2c.default, torch.ops.aten._fft_c2c.default, torch.ops.aten._fft_c2r.default}
    return sum(1 for node in ep.graph.nodes if node.target in fft_ops)


def _fft_rows_ops(ep) -> int:
    """aotcuda::fft_rows (CUDA) and aotcuda::fft_rows_cpu nodes: one kernel a transform each."""
    ops = [getattr(getattr(torch.ops, "aotcuda", None), name, None) for name in ("fft_rows", "fft_rows_cpu")]
    targets = {op.default for op in ops if op is not None}
    return sum(1 for node in ep.graph.nodes if node.target in targets)


def _convolutions(ep) -> int:
    """aotcuda::fft_rows nodes of kind conv: a constant filter as one convolution (spectral/filter.py)."""
    op = getattr(getattr(torch.ops, "aotcuda", None), "fft_rows", None)
    return sum(1 for node in ep.graph.nodes if op is not None and node.target is op.default and "conv" in node.args)


def _rewritten(ep, program: str, form: str):
    """The pass's program in `form`, checked to have no FFT op left."""
    with _fft_kernel_switch(form == "kernel"):
        new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert _ffts(new) == 0, f"{program}: {_ffts(new)} FFT ops left after the pass ({form})"
    return new


def _compiled(module, dynamic: bool, first: torch.Tensor):
    """torch.compile of module; dynamic: the input's dim 1 marked dynamic on the first input (one graph)."""
    if dynamic:
        torch._dynamo.mark_dynamic(first, 1)
    return torch.compile(module)


def _dim_spec(dynamic_shapes) -> str | None:
    """How the program's dynamic dim was exported: "160·frames ≤ N" (a named Dim) or "AUTO"."""
    if dynamic_shapes is None:
        return None
    (dim,) = [d for dims in dynamic_shapes.values() for d in dims.values()]
    return "AUTO" if dim is torch.export.Dim.AUTO else f"{dim.__name__} ≤ {dim.max}"


def _within(error: float, program: str, floor: float) -> bool:
    """The error check: bfloat16 rows within 2× the reference's own bfloat16 rounding, others 1e-5."""
    return error <= (2 * floor if program == "filter_bf16" else 1e-5)


def _export(model, x, dynamic_shapes, program: str):
    """torch.export (decomposed) and the dynamic_shapes it took: a named Dim where export takes it, else
    Dim.AUTO (tests/passes/complex_to_real/test_fft_programs.py: an stft's named Dim was refused by
    export itself in some torch versions, a guard from torch's stft)."""
    try:
        return torch.export.export(model, (x,), dynamic_shapes=dynamic_shapes).run_decompositions(), dynamic_shapes
    except Exception as error:
        if dynamic_shapes is None:
            raise
        print(f"{program}: export refused the named Dim ({type(error).__name__}: {str(error).splitlines()[0][:200]}); "
              f"exported with Dim.AUTO instead", file=sys.stderr, flush=True)
        auto = {name: {d: torch.export.Dim.AUTO for d in dims} for name, dims in dynamic_shapes.items()}
        return torch.export.export(model, (x,), dynamic_shapes=auto).run_decompositions(), auto


def run_case(program: str, key, args, lock=None) -> list[dict]:
    """Export, rewrite (once per form), compile and warm the programs (in parallel with other cases), then
    measure under `lock` (one case on the device at a time): one row per form and timed input."""
    torch._dynamo.config.cache_size_limit = 64
    fft_plan.set_bluestein_tile(args.bluestein_tile, args.bluestein_halves == "yes")  # in this process (a spawned worker's too)
    fft_rows.BLUESTEIN_PAIRS = args.bluestein_pairs == "yes"
    fft_rows.HALVES_AS_PARTS = args.halves_as_parts == "yes"
    os.environ["AOTCUDA_FFT_FILTER_CONVOLUTION"] = "1" if args.filter_convolution == "yes" else "0"
    model, x, dynamic_shapes, timed = make_case(program, key, args)
    model = model.to(args.device)
    x, timed = x.to(args.device), [t.to(args.device) for t in timed]
    cuda = args.device.startswith("cuda")
    dynamic = dynamic_shapes is not None
    n = _shape(key)[-2] if program == "freeu" else key
    started = time.perf_counter()
    ep, dynamic_shapes = _export(model, x, dynamic_shapes, program)
    forms = _forms(args)
    rewritten = {form: _rewritten(ep, program, form) for form in forms}
    fns = [_compiled(ep.module(), dynamic, x)] + [_compiled(new.module(), dynamic, x) for new in rewritten.values()]
    if dynamic:  # the timed inputs too: on CUDA, .to(device) made them other tensors than x
        for inputs in timed:
            torch._dynamo.mark_dynamic(inputs, 1)
    threads = torch.get_num_threads()
    rows = []
    with torch.no_grad():
        for i, inputs in enumerate(timed):
            expected = _documented_reference(model, inputs).to(inputs.device)  # float64, beside the outputs
            # Compile (at the first input) and warm up; a later length of a dynamic program must reuse its graph.
            # the thread count the graphs were compiled under (a guard of theirs): what ran between the
            # lengths (timing, profiling) may leave another, which would recompile for no reason of the program's
            torch.set_num_threads(threads)
            with torch._dynamo.config.patch(error_on_recompile=dynamic and i > 0):
                for fn in fns + fns:
                    fn(inputs)
            floor = relative_error(expected.to(torch.bfloat16), expected) if program == "filter_bf16" else 0.0
            errors = [relative_error(fn(inputs), expected) for fn in fns]
            kernels = [cuda_kernels_a_call(fn, inputs) for fn in fns] if cuda else [None] * len(fns)
            if i == 0:
                compile_s = time.perf_counter() - started
            with lock if lock is not None else contextlib.nullcontext():
                load = os.getloadavg()[0]
                if cuda:
                    torch.cuda.synchronize()
                times = _best_median_us(fns, inputs, args.repeat, args.min_run_time)
            shape = "×".join(str(size) for size in inputs.shape)
            rows += [dict(program=program, n=n, key=key, index=i, shape=shape, dtype=str(inputs.dtype).removeprefix("torch."),
                          dynamic=dynamic, dim=_dim_spec(dynamic_shapes), form=form,
                          plan=("conv: " if _convolutions(rewritten[form]) else "") + _form(n, args.device, form, program),
                          library_us=times[0], aotcuda_us=times[j + 1], ratio=times[j + 1] / times[0],
                          rel_error=errors[j + 1], library_rel_error=errors[0], error_floor=floor,
                          ok=_within(errors[j + 1], program, floor),  # the library's error has its column
                          ffts=_ffts(ep), fft_rows=_fft_rows_ops(rewritten[form]), library_kernels=kernels[0],
                          kernels=kernels[j + 1], load=load, compile_s=compile_s)
                     for j, form in enumerate(forms)]
    return rows


_LOCK = None


def _init_worker(lock, threads: int) -> None:
    global _LOCK
    _LOCK = lock
    torch._inductor.config.compile_threads = threads


def _run_in_worker(program: str, key, args) -> list[dict]:
    return run_case(program, key, args, _LOCK)


PROGRAMS = ("filter", "whisper", "stft_dynamic", "freeu", "filter_bf16", "filter_bluestein")


def _cases(args) -> list[tuple[str, object]]:
    """(program, key) in table order: filter's sizes, whisper's and stft_dynamic's n_fft, freeu's shapes,
    filter_bf16's sizes, filter_bluestein's sizes."""
    keys = {"filter": args.sizes, "whisper": [] if args.no_whisper else args.n_fft, "stft_dynamic": args.n_fft,
            "freeu": args.freeu_shapes, "filter_bf16": args.bf16_sizes, "filter_bluestein": args.bluestein_sizes}
    return [(program, key) for program in PROGRAMS if program in args.programs for key in keys[program]]


def _rows(args, cases, on_row):
    """Run every case, sequentially or in worker processes, calling on_row(row) for each of its rows as
    each one ends."""
    if args.workers <= 1:
        for program, key in cases:
            for row in run_case(program, key, args):
                on_row(row)
        return
    context = multiprocessing.get_context("spawn")
    lock = context.Lock()
    threads = max(1, (os.cpu_count() or 2) // args.workers)
    with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=context, initializer=_init_worker,
                                                initargs=(lock, threads)) as pool:
        futures = {pool.submit(_run_in_worker, program, key, args): (program, key) for program, key in cases}
        for future in concurrent.futures.as_completed(futures):
            try:
                for row in future.result():
                    on_row(row)
            except Exception as error:  # one failed case: say which, keep the others
                program, key = futures[future]
                print(f"{program} {key} failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 400, 512, 1024, 2048, 4096])
    parser.add_argument("--signals", type=int, default=512, help="rows of the filter's x (batch × channels)")
    parser.add_argument("--batch", type=int, default=8, help="clips of 30 s of 16 kHz audio (whisper)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--n-fft", type=int, nargs="+", default=[400], help="whisper's n_fft (one row each)")
    parser.add_argument("--no-whisper", action="store_true", help="leave out the whisper program")
    parser.add_argument("--programs", nargs="+", choices=PROGRAMS, default=list(PROGRAMS),
                        help="the programs (module docstring; default all)")
    parser.add_argument("--dynamic-seconds", type=float, nargs="+", default=[10.0, 30.0],
                        help="stft_dynamic: the audio lengths timed (s of 16 kHz), a row each")
    parser.add_argument("--dynamic-max-seconds", type=float, default=30.0,
                        help="stft_dynamic: the exported Dim's max (s); at least the longest timed")
    parser.add_argument("--freeu-shapes", nargs="+", default=["2x1280x32x32", "2x640x64x64"],
                        help="freeu: feature maps BxCxHxW (SDXL's up-block skips)")
    parser.add_argument("--bf16-sizes", type=int, nargs="+", default=[400, 1024, 4096],
                        help="filter_bf16: n of the bfloat16 filter, a row each")
    parser.add_argument("--bluestein-sizes", type=int, nargs="+", default=[1009, 2039, 4093],
                        help="filter_bluestein: n of the filter at lengths no tiling covers, a row each")
    parser.add_argument("--bluestein-tile", type=int, choices=[fft_plan.TILE, 2 * fft_plan.TILE],
                        default=fft_plan.BLUESTEIN_TILE, help="kernels/fft_plan.py's BLUESTEIN_TILE for the run "
                        "(default the module's, 8192: Bluestein up to n = 4096; 4096: up to n = 2048)")
    parser.add_argument("--bluestein-halves", choices=["yes", "no"], default="yes" if fft_plan.BLUESTEIN_HALVES else "no",
                        help="kernels/fft_plan.py's BLUESTEIN_HALVES for the run (default yes: an m past 4096 as two "
                        "halves of m/2; no: one tile of m)")
    parser.add_argument("--bluestein-pairs", choices=["yes", "no"], default="yes" if fft_rows.BLUESTEIN_PAIRS else "no",
                        help="kernels/fft_rows.py's BLUESTEIN_PAIRS for the run (default yes: a Bluestein length's r2c "
                        "and c2r two real rows to a complex transform; no: one, the kernel before)")
    parser.add_argument("--halves-as-parts", choices=["yes", "no"], default="yes" if fft_rows.HALVES_AS_PARTS else "no",
                        help="kernels/fft_rows.py's HALVES_AS_PARTS for the run (a Bluestein length of two halves, "
                        "2049…4096, run by fft_bluestein_parts's kernels as 2 parts: yes; by fft_bluestein's: no, the "
                        "default)")
    parser.add_argument("--filter-convolution", choices=["yes", "no"], default="yes",
                        help="AOTCUDA_FFT_FILTER_CONVOLUTION for the run (default yes: a filter with a constant weight "
                        "at a Bluestein length as one convolution kernel; no: its r2c and c2r kernels)")
    parser.add_argument("--forms", nargs="+", choices=["gemm", "kernel"], default=None,
                        help="the pass's forms on CUDA, a row each (default: gemm and, where Triton is installed, "
                             "kernel); the CPU always takes its stages")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many medians")
    parser.add_argument("--min-run-time", type=float, default=None, help="s per median (CPU 1.0, CUDA 0.3)")
    parser.add_argument("--json", type=pathlib.Path, default=None,
                        help="write the rows here (default benchmarks/results/fft-<device>-torch<version>.json)")
    parser.add_argument("--workers", type=int, default=None,
                        help="cases compiled at once in spawned processes (CUDA: one per case up to 8; CPU: 1)")
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    if args.forms is None:
        args.forms = ["gemm", "kernel"] if importlib.util.find_spec("triton") else ["gemm"]
    if "kernel" in args.forms and importlib.util.find_spec("triton") is None:
        parser.error("--forms kernel needs Triton (aotcuda::fft_rows is a Triton kernel)")
    for key in args.freeu_shapes:
        if len(key.split("x")) != 4 or not all(part.isdigit() for part in key.split("x")):
            parser.error(f"--freeu-shapes takes BxCxHxW, e.g. 2x1280x32x32; got {key!r}")
    cases = _cases(args)
    if args.workers is None:
        args.workers = min(len(cases), 8) if cuda else 1
    if args.min_run_time is None:
        args.min_run_time = 0.3 if cuda else 1.0
    # torch.utils.benchmark's Timer runs the timed calls on one thread (its num_threads default), both sides alike.
    machine = torch.cuda.get_device_name() if cuda else f"CPU ({os.cpu_count()} cores), timed on 1 thread"
    # torch.fft's CPU path: MKL's DFTI where this torch has MKL (x86 wheels), pocketfft elsewhere (ARM, macOS).
    library = "cuFFT" if cuda else ("MKL" if torch.backends.mkl.is_available() else "pocketfft")
    RESULTS.mkdir(exist_ok=True)
    path = args.json or RESULTS / f"fft-{'cuda' if cuda else 'cpu'}-torch{torch.__version__.split('+')[0]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = dict(machine=machine, torch=torch.__version__, library=library, forms=_forms(args), signals=args.signals,
                  batch=args.batch, seconds=args.seconds, programs=args.programs, dynamic_seconds=args.dynamic_seconds,
                  dynamic_max_seconds=args.dynamic_max_seconds, bluestein_tile=args.bluestein_tile,
                  bluestein_halves=args.bluestein_halves, bluestein_pairs=args.bluestein_pairs,
                  halves_as_parts=args.halves_as_parts,
                  repeat=args.repeat, min_run_time=args.min_run_time,
                  started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    rows = []

    def on_row(row):
        rows.append(row)
        path.write_text(json.dumps(dict(header, rows=rows), indent=1))
        print(f"done: {row['program']} {row['shape']} {row['form']} {row['ratio']:.2f}× (load {row['load']:.1f}, "
              f"compiled in {row['compile_s']:.0f} s)", file=sys.stderr, flush=True)

    started = time.perf_counter()
    _rows(args, cases, on_row)
    order = {case: i for i, case in enumerate(cases)}
    print(f"{machine}, torch {torch.__version__}; library = {library} via torch.compile; float32 (filter_bf16: "
          f"bfloat16 in and out); best of {args.repeat} medians; {time.perf_counter() - started:.0f} s in all")
    print(f"| program | n | input | form | plan | {library} (µs) | aotcuda (µs) | aotcuda / {library} | rel. error | "
          f"{library} rel. error | check | kernels a call ({library} / aotcuda), FFTs, fft_rows | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    forms = _forms(args)
    for row in sorted(rows, key=lambda r: (order[(r["program"], r["key"])], r["index"], forms.index(r["form"]))):
        shape = f"{row['shape']} {row['dtype']}" + (f" (dynamic: {row['dim']})" if row["dynamic"] else "")
        kernels = f"{row['library_kernels'] if cuda else '–'} / {row['kernels'] if cuda else '–'}, {row['ffts']}, {row['fft_rows']}"
        check = ("ok" if row["ok"] else "HIGH") + (f" (bf16 ≤ {2 * row['error_floor']:.1e})" if row["error_floor"] else "")
        print(f"| {row['program']} | {row['n']} | {shape} | {row['form']} | {row['plan']} | {row['library_us']:.1f} | "
              f"{row['aotcuda_us']:.1f} | {row['ratio']:.2f}× | {row['rel_error']:.1e} | "
              f"{row['library_rel_error']:.1e} | {check} | {kernels} | {row['load']:.1f} |")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
