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
from aotcuda.lowering.cache_folders import check_temporary_folder
from aotcuda.lowering.devices import target_device
from aotcuda.models.attention import attention_block
from aotcuda.runtime.devices import available_bytes

# The share of the cores other work keeps busy from which the demo's timing is marked unreliable
# (DemoResult.machine_busy).
BUSY_SHARE_OF_CORES = 0.75
# How long the CPU time of other work is sampled before the timing (other_work_cores).
SAMPLE_S = 0.5

# Relative-error bound per dtype: eager and the generated code sum in different orders.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10, torch.bfloat16: 2e-2, torch.float16: 5e-3}


# The demo's memory in (batch, seq, dim) tensors of its dtype: x, the fresh input, eager's answer and the program's,
# and the block's intermediates at the peak of a call (eager, batch 16, seq 8192, float32: 9.1 more, measured).
HELD_TENSORS = 12
DIM = 256  # the block's width (models.attention.attention_block's default)


def check_demo_size(device: str | torch.device, dtype: torch.dtype, batch: int, seq: int) -> None:
    """ValueError, before anything is made, when the demo's tensors for ``batch`` and ``seq`` would take more than half
    the memory available on the device: the sizes are the caller's (``aotcuda demo --batch --seq``), and the demo
    makes its input, runs eager and the program on it, whatever they cost (``--batch 100000 --seq 100000`` ended in
    the allocator's raw RuntimeError for 10 TB, sizes a few GB short of the memory would swap)."""
    need = HELD_TENSORS * batch * seq * DIM * dtype.itemsize
    available = available_bytes(torch.device(device))
    if available is not None and need > available // 2:
        raise ValueError(f"batch {batch} x seq {seq}: the demo's tensors would take about {need / 2**30:.3g} GiB "
                         f"({HELD_TENSORS} of shape ({batch}, {seq}, {DIM}) in {str(dtype).removeprefix('torch.')}), "
                         f"more than half the memory available on {device} ({available / 2**30:.1f} GiB); "
                         "choose a smaller batch or seq")


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
    busy_cores: float | None = None  # cores other work kept busy just before the timing (None: unknown)
    cores: int = 1  # the CPU cores this process may run on
    inputs: torch.Tensor | None = None  # the input the comparison and the timing used, (batch, seq, dim)

    @property
    def passed(self) -> bool:
        return self.relative_error <= self.tolerance and not self.lowered.fallback_kernels

    @property
    def machine_busy(self) -> bool:
        """Whether other work kept most cores busy (≥ 3/4 of them) as the timing began: eager and the program
        both run a thread per core, so the latencies, and the speed-up against eager, then measure the
        contention more than the program (a new user's 4.90× with 2 cores busy, 1.04-1.50× idle)."""
        return self.busy_cores is not None and self.busy_cores >= BUSY_SHARE_OF_CORES * self.cores


def _busy_ticks() -> int | None:
    """The busy clock ticks of all CPUs since boot (/proc/stat's first line), or None without it."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(field) for field in stat.readline().split()[1:9]]  # user .. steal
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    return sum(fields) - fields[3] - fields[4]  # idle and iowait are not busy


def other_work_cores(sample_s: float = SAMPLE_S) -> float | None:
    """How many cores other processes kept busy over the next ``sample_s`` seconds: the CPUs' busy time
    (/proc/stat) less this process's own (``time.process_time``), per second. Measured right before the
    timing, it sees the work that competes with it; the 1-minute load average, used before, also counted the
    demo's own compile that had just ended (a new user's 1.89 on an idle 2-core machine). None where there
    is no /proc/stat: then the 1-minute load average, the only figure such a system gives."""
    before, own = _busy_ticks(), time.process_time()
    if before is None:
        try:
            return os.getloadavg()[0]
        except OSError:
            return None
    time.sleep(sample_s)
    after, own = _busy_ticks(), time.process_time() - own
    if after is None:
        return None
    busy_s = (after - before) / os.sysconf("SC_CLK_TCK")
    return max(0.0, busy_s - own) / sample_s


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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
    check_demo_size(device, dtype, batch, seq)
    model, (x,) = attention_block(device=device, dtype=dtype, batch=batch, seq=seq)
    with contextlib.ExitStack() as cleanup:
        if package_path is None:  # a demo run leaves nothing behind unless asked (7 MB a run)
            check_temporary_folder("the demo's package")  # before the lowering: not in a folder others may replace
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="aotcuda-demo-"))
            package_path = os.path.join(folder, "attention_block.pt2")
        lowered = lower(model, (x,), device=device, package_path=package_path, progress=progress)
        program = cleanup.enter_context(lowered.load())
        fresh = torch.randn_like(x)
        busy_cores = other_work_cores()  # before the timing loops, whose threads would count themselves
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
                      graphs_latency, busy_cores, usable_cores(), fresh)
