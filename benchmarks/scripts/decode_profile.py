"""Where a decode step's time goes: the aotcuda package of benchmarks/decode.py's model, one step profiled
with and without CUDA graphs.

    python3 benchmarks/scripts/decode_profile.py --batch 8                  (CUDA: the 1.2B config)
    python3 benchmarks/scripts/decode_profile.py --tiny --device cpu        (CPU smoke run)
    python3 benchmarks/scripts/decode_profile.py --model llama --batch 1     (transformers' Llama, StaticCache)
    AOTCUDA_DECODE_ATTENTION=0 python3 benchmarks/scripts/decode_profile.py  (the kernel table without a pass)

decode.py measured (H200, torch 2.11) the plain aotcuda call at batch 8 slower than at batch 1 (4583 vs
1881 µs) while the CUDA-graph replay of the same package grew from 1033 to 1514 µs, and the graph row at
batch 1 at 49 % of the bandwidth bound. This prints, per way of running: the time of a step (decode.py's timer), the
device time its kernels add up to, how many kernels a step launches, and the kernels that take the most
device time (torch.profiler, summed over ``--steps`` steps), so that host work, launch count and slow
kernels can be told apart.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from decode import example_inputs, make_model, parse_inductor_configs, timer  # noqa: E402


def kernel_family(name: str) -> str:
    """Triton reductions, Triton pointwise kernels, cuBLAS/cutlass GEMMs, copies and the rest, by kernel name."""
    lowered = name.lower()
    if lowered.startswith("triton_red") or lowered.startswith("triton_per"):
        return "Triton reduction (generated; includes matrix-vector products at batch 1)"
    if lowered.startswith("triton_poi"):
        return "Triton pointwise (generated)"
    if lowered.startswith("triton"):
        return "Triton, other (generated)"
    if any(word in lowered for word in ("gemm", "gemv", "cutlass", "sm90", "xmma", "cublas", "nvjet")):
        return "cuBLAS / CUTLASS matrix product (library)"
    if "copy" in lowered or "memcpy" in lowered or "memset" in lowered:
        return "copies and fills"
    return "other"


def profile_steps(step, inputs, steps: int, device: torch.device, top: int, sequence: int = 0) -> None:
    """Run ``step(*inputs)`` ``steps`` times under torch.profiler; print µs per step (decode.py's timer), the kernels'
    summed device µs per step, kernels per step and the ``top`` kernels by device time; with ``sequence``, the
    first that many kernels of the last step in the order they ran (which kernels make one layer)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    step_us = timer(device)(lambda: step(*inputs))  # decode.py's measure (warms up first)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step(*inputs)
        sync()
    events = prof.key_averages()
    kernels = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    if not kernels:  # the CPU: no device kernels, the host ops instead
        print(f"{step_us:.1f} µs per step (decode.py's timer, unprofiled)")
        print(events.table(sort_by="self_cpu_time_total", row_limit=top))
        return
    device_us = sum(e.self_device_time_total for e in kernels) / steps
    launches = sum(e.count for e in kernels) / steps
    print(f"{step_us:.1f} µs per step (decode.py's timer, unprofiled); kernels' device time {device_us:.1f} µs per step; "
          f"{launches:.0f} kernels per step")
    families = {}
    for e in kernels:
        family = kernel_family(e.key)
        calls, us = families.get(family, (0, 0.0))
        families[family] = (calls + e.count / steps, us + e.self_device_time_total / steps)
    print("| kernel family | calls per step | device µs per step | share |")
    print("|---|---|---|---|")
    for family, (calls, us) in sorted(families.items(), key=lambda item: -item[1][1]):
        print(f"| {family} | {calls:.0f} | {us:.1f} | {us / device_us:.0%} |")
    print(f"idle device time in a step (step − kernels' time): {step_us - device_us:.1f} µs")
    print("| kernel | calls per step | device µs per step | share |")
    print("|---|---|---|---|")
    for e in sorted(kernels, key=lambda e: -e.self_device_time_total)[:top]:
        share = e.self_device_time_total / steps / device_us
        print(f"| {e.key[:90]} | {e.count / steps:.0f} | {e.self_device_time_total / steps:.1f} | {share:.0%} |")
    if sequence:
        print_sequence(prof, steps, sequence)
    host = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CPU]
    print("| host op (what launches the kernels) | calls per step | host µs per step (self) |")
    print("|---|---|---|")
    for e in sorted(host, key=lambda e: -e.self_cpu_time_total)[:top]:
        print(f"| {e.key[:90]} | {e.count / steps:.0f} | {e.self_cpu_time_total / steps:.1f} |")


def print_sequence(prof, steps: int, count: int) -> None:
    """The first ``count`` kernels of the last profiled step, in start order, with their device µs and the gap
    to the kernel before (launch and ramp cost inside a graph)."""
    ran = sorted((e for e in prof.events() if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA),
                 key=lambda e: e.time_range.start)
    per_step = len(ran) // steps
    last = ran[len(ran) - per_step:]
    print(f"| # | kernel (the last step, in order; {per_step} kernels) | device µs | gap before µs |")
    print("|---|---|---|---|")
    previous_end = None
    for index, e in enumerate(last[:count]):
        gap = "" if previous_end is None else f"{e.time_range.start - previous_end:.1f}"
        print(f"| {index} | {e.name[:100]} | {e.time_range.elapsed_us():.1f} | {gap} |")
        previous_end = e.time_range.end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--model", choices=("decoder", "llama"), default="decoder",
                        help="our decoder (default) or transformers' LlamaForCausalLM of the same sizes")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--sequence", type=int, default=0, metavar="N",
                        help="also print the first N kernels of one step in the order they ran")
    parser.add_argument("--package", help="an aotcuda package of this model and batch (default: build one)")
    parser.add_argument("--inductor-config", nargs="+", metavar="KEY=VALUE", help="for the package it builds")
    opts = parser.parse_args()
    import aotcuda
    from aotcuda.models.decoder import DecoderConfig

    device = torch.device(opts.device)
    config = DecoderConfig.tiny() if opts.tiny else DecoderConfig.llama_1b()
    example = example_inputs(opts.batch, device)
    with tempfile.TemporaryDirectory() as workdir, torch.no_grad():
        path = opts.package
        if path is None:
            model = make_model(opts.model, config, opts.batch, device)
            start = time.perf_counter()
            lowered = aotcuda.lower(model, example, device=device.type, package_path=f"{workdir}/decode.pt2",
                                    inductor_configs=parse_inductor_configs(opts.inductor_config))
            path = lowered.package_path
            print(f"built in {time.perf_counter() - start:.0f} s; passes: "
                  + "; ".join(result.summary() for result in lowered.pass_results))
            del model
        tokens = torch.randint(0, config.vocab_size, (opts.batch, 1), device=device)
        at = torch.tensor([config.max_seq_len // 2], device=device)
        for graphs in (False, True) if device.type == "cuda" else (False,):
            print(f"\n{opts.model}, batch {opts.batch}, aotcuda.load(cuda_graphs={graphs}), {torch.__version__}")
            with aotcuda.load(path, cuda_graphs=graphs) as program:
                profile_steps(program, (tokens, at), opts.steps, device, opts.top, opts.sequence)


if __name__ == "__main__":
    main()
