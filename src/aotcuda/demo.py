"""The demo: lower the built-in attention block (complex RoPE), run it with aotcuda.load, compare with eager.

Used by ``aotcuda demo``; returns numbers, prints nothing.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from dataclasses import dataclass

import torch

from aotcuda.lowering import LoweredProgram, lower
from aotcuda.lowering.devices import target_device
from aotcuda.models.attention import attention_block

# The 1-minute load per core from which the demo's timing is marked unreliable (DemoResult.machine_busy).
BUSY_LOAD_PER_CORE = 0.75

# Relative-error bound per dtype: eager and the generated code sum in different orders.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10, torch.bfloat16: 2e-2, torch.float16: 5e-3}


def tolerance(dtype: torch.dtype) -> float:
    """The demo's bound for a block of this dtype. The block computes its RMSNorms and RoPE in float32
    whatever its dtype (as Llama's reference does: models/attention.py), so a float64 block is only as
    exact as float32 math: eager and the generated code round those float32 steps differently (~1e-7)."""
    return max(TOLERANCE[dtype], TOLERANCE[torch.float32])


@dataclass
class DemoResult:
    lowered: LoweredProgram
    device: str
    dtype: torch.dtype
    input_shape: tuple[int, ...]
    relative_error: float
    tolerance: float
    latency_s: float       # median per call, aotcuda
    eager_latency_s: float  # median per call, eager PyTorch
    graphs_latency_s: float | None = None  # median per call, aotcuda with CUDA graphs (CUDA only)
    load_average: float | None = None  # the machine's 1-minute load average when timing began (None: unknown)
    cores: int = 1  # the CPU cores this process may run on

    @property
    def passed(self) -> bool:
        return self.relative_error <= self.tolerance and not self.lowered.fallback_kernels

    @property
    def machine_busy(self) -> bool:
        """Whether other work kept most cores busy (1-minute load average ≥ 3/4 of the cores): eager and the
        program both run a thread per core, so the latencies, and the speed-up against eager, then measure the
        contention more than the program (a new user's 4.90× at a load of 1.96 on 2 cores, 1.04-1.50× idle)."""
        return self.load_average is not None and self.load_average >= BUSY_LOAD_PER_CORE * self.cores


def machine_load() -> tuple[float | None, int]:
    """(1-minute load average, or None where the OS has none; the cores this process may run on)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        return os.getloadavg()[0], cores
    except OSError:
        return None, cores


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """‖actual − expected‖ / ‖expected‖, in float64."""
    actual, expected = actual.double(), expected.double()
    return ((actual - expected).norm() / expected.norm().clamp_min(1e-300)).item()


def median_latency(fn, x: torch.Tensor, calls: int, warmup: int = 3) -> float:
    """Median wall time of fn(x) in seconds, synchronizing CUDA around each call."""
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    for _ in range(warmup):
        fn(x)
    times = []
    for _ in range(calls):
        sync()
        start = time.perf_counter()
        fn(x)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_demo(device: str = "auto", dtype: torch.dtype | None = None, batch: int = 2, seq: int = 64,
             calls: int = 50, package_path: str | None = None, progress=None) -> DemoResult:
    """Lower, load, compare and time the attention block. dtype default: bfloat16 on CUDA, float32 on CPU.
    package_path: where the package is written and kept; default: a temporary folder, removed before this
    returns (the result's ``lowered.package_path`` then names a file that is gone)."""
    device = str(target_device(device))  # "auto": CUDA when torch sees a GPU, else the CPU
    on_cuda = torch.device(device).type == "cuda"  # "cuda" or "cuda:N"
    dtype = dtype or (torch.bfloat16 if on_cuda else torch.float32)
    model, (x,) = attention_block(device=device, dtype=dtype, batch=batch, seq=seq)
    with contextlib.ExitStack() as cleanup:
        if package_path is None:  # a demo run leaves nothing behind unless asked (7 MB a run)
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="aotcuda-demo-"))
            package_path = os.path.join(folder, "attention_block.pt2")
        lowered = lower(model, (x,), device=device, package_path=package_path, progress=progress)
        program = cleanup.enter_context(lowered.load())
        fresh = torch.randn_like(x)
        # Read before the timing loops, whose threads would count themselves; the compile that ran before
        # adds at most its one thread's share to the 1-minute average.
        load_average, cores = machine_load()
        with torch.no_grad():
            expected = model(fresh)
            error = relative_error(program(fresh), expected)
            eager = median_latency(model, fresh, calls)
        latency = median_latency(program, fresh, calls)
        graphs_latency = None
        if on_cuda:  # warm-up calls and the capture happen inside median_latency's warm-up
            graphs = cleanup.enter_context(lowered.load(cuda_graphs=True))
            graphs_latency = median_latency(graphs, fresh, calls, warmup=5)
    return DemoResult(lowered, device, dtype, tuple(x.shape), error, tolerance(dtype), latency, eager,
                      graphs_latency, load_average, cores)
