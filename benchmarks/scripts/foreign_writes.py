"""What AOTCUDA_FOREIGN_WRITES saves per call: capsule fields written in place, std::cerr muted by a field write.

    python3 benchmarks/scripts/foreign_writes.py [--device cpu|cuda] [--package PATH] [--calls N]

Off (the default) the runtime uses public APIs only: ``PyCapsule_GetPointer`` / ``PyCapsule_New`` through
ctypes.pythonapi per handle, and the generated code's C++ error lines reach stderr. On, it reads and writes
the capsules' pointer fields in place and mutes std::cerr around each run (aotcuda.runtime.handles,
aotcuda.runtime.libloader). Rows, each off and on, batches of 100 interleaved (the switch flipped between
batches, so a shared machine's load falls on both alike), medians and best batch of the calling thread's CPU
time (wall time ended by a synchronize on CUDA):

  * a plain call of benchmarks/overhead.py's tiny program (two inputs, one output);
  * tensors -> handles -> tensors for 1, 4 and 16 tensors (``new_handle_array`` then ``OutputStealer.steal``);
  * entering and leaving the std::cerr mute (what the switch adds to every run; off it adds nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _common import markdown_row  # noqa: E402
from overhead import build, per_call_us  # noqa: E402

from aotcuda.runtime import handles, libloader  # noqa: E402

SWITCH = "AOTCUDA_FOREIGN_WRITES"


def set_switch(on: bool, programs=()) -> None:
    """Flip the switch in this process: the env, the cached reads, each Program's output stealer."""
    os.environ[SWITCH] = "1" if on else "0"
    handles._capsule_field_offset.cache_clear()
    handles._capsule_reader.cache_clear()
    libloader.cxx_error_mute.cache_clear()
    handles._capsule_reader(), libloader.cxx_error_mute()  # resolved here, untimed, not in a batch's first call
    for program in programs:  # one stealer per state, kept (its capsule sets are made once)
        stealers = program.__dict__.setdefault("_bench_stealers", {})
        if on not in stealers:
            stealers[on] = handles.OutputStealer(program.num_outputs)
        program._stealer = stealers[on]


def round_trip(tensors: list):
    stealer = handles.OutputStealer(len(tensors))  # made under the switch state of its variant
    return lambda: stealer.steal(handles.new_handle_array(tensors))


def mute_cost():
    mute = libloader.cxx_error_mute()
    if mute is None:
        return lambda: None

    def enter_and_leave():
        with mute:
            pass

    return enter_and_leave


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--package")
    parser.add_argument("--calls", type=int, default=20000)
    opts = parser.parse_args()
    import aotcuda

    device = opts.device
    path = opts.package or build(device, os.path.join(tempfile.mkdtemp(prefix="aotcuda-fw-"), "tiny.pt2"))
    print(f"package: {path}", file=sys.stderr)
    program = aotcuda.load(path, device=device)
    x, y = torch.randn(8, 16, device=device), torch.randn(8, 16, device=device)
    on_cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    clock = time.perf_counter_ns if on_cuda else time.thread_time_ns
    rows = {"plain call, tiny program": lambda: (lambda: program(x, y))}
    for n in (1, 4, 16):
        tensors = [torch.randn(8, device=device) for _ in range(n)]
        rows[f"{n} tensor(s) -> handles -> tensors"] = lambda tensors=tensors: round_trip(tensors)
    rows["std::cerr mute, enter + leave"] = mute_cost
    fns = {}
    for on in (False, True):  # each variant's callable made under its own switch state
        set_switch(on, [program])
        fns.update({(name, on): make() for name, make in rows.items()})
    results = per_call_us(fns, opts.calls, sync, clock, prepare=lambda key: set_switch(key[1], [program]))
    print(markdown_row("what", "off µs (median / best)", "on µs (median / best)", "saved by the switch µs (median)"))
    print(markdown_row("---", "---", "---", "---"))
    for name in rows:
        off, on = results[(name, False)], results[(name, True)]
        print(markdown_row(name, f"{off[0]:.2f} / {off[1]:.2f}", f"{on[0]:.2f} / {on[1]:.2f}", f"{off[0] - on[0]:+.2f}"))
    program.close()


if __name__ == "__main__":
    main()
