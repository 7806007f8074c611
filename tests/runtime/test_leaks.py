"""No leaks: thousands of calls of the Twice program (one tensor in two output slots) with memory flat and
every output handle released exactly once.

What is measured, per test:
  * memory: resident set size (psutil) on the CPU, ``torch.cuda.memory_allocated`` on CUDA, read after a
    warm-up (the first fifth of the calls: call 2,000 of 10,000) and at the end; the growth between the
    two must stay under the slack below;
  * output handles: the container's run is wrapped to see the distinct handles it wrote, and the runtime's
    two ways of giving a handle up (``steal_handles``: a tensor takes it over; ``delete_handle``: released
    on an error path) are wrapped to count them. Each call must give up exactly the handles it got, none
    twice;
  * input handles: the container steals them (and releases them in C++, where we cannot count); so after
    every call the input must be back to its reference count from before the call;
  * outputs: each returned output must be held once (by the returned tensor), as a fresh eager tensor
    is, so no hidden handle keeps it alive.

Run with ``-s`` to see the figures (docs/reliability.md quotes them).
"""

import gc
from dataclasses import dataclass, field

import psutil
import pytest
import torch
from runtime_programs import Twice, twice_package

import aotcuda.runtime.handles as handles_module
import aotcuda.runtime.program as program_module
from aotcuda.errors import InputError, RuntimeCallError
from aotcuda.runtime.program import load

CALLS = 10_000
SIDE_CALLS = 2_000  # caller outputs / rejected calls / failing runs
BATCH = 64  # the largest batch the package takes: a leaked input or output storage is >= 1 KiB per call
RSS_SLACK = 5 * 2**20  # allocator arenas and Python's free lists move RSS by a few hundred KiB at most
CUDA_SLACK = 2**20


def use_count(tensor: torch.Tensor) -> int:
    """How many at::Tensors hold this tensor's TensorImpl: a handle is a heap at::Tensor on it, so a handle
    that was never released shows here. (Where a torch lacks ``Tensor._use_count``: the storage's count,
    which sees only handles on new TensorImpls.)"""
    if hasattr(tensor, "_use_count"):
        return tensor._use_count()
    return torch._C._storage_Use_Count(tensor.untyped_storage()._cdata)


@dataclass
class HandleLedger:
    """Handles the runtime got from the container and gave up, settled after every call."""

    written: list = field(default_factory=list)  # this call's distinct output handles
    given_up: list = field(default_factory=list)  # this call's stolen + released output handles
    made: list = field(default_factory=list)  # this call's input handles
    inputs_made: int = 0
    inputs_released: int = 0  # by the runtime, after a run that failed before the model took them
    outputs_written: int = 0
    outputs_adopted: int = 0
    outputs_released: int = 0
    given_up_twice: int = 0
    never_given_up: int = 0

    def settle(self) -> None:
        written, given_up = set(self.written), list(self.given_up)
        self.given_up_twice += len(given_up) - len(set(given_up))
        self.never_given_up += len(written - set(given_up))
        self.written, self.given_up, self.made = [], [], []

    def summary(self) -> str:
        return (f"input handles made {self.inputs_made}, released by the runtime {self.inputs_released}; output handles written {self.outputs_written}, "
                f"adopted {self.outputs_adopted}, released {self.outputs_released}, released twice "
                f"{self.given_up_twice}, never released {self.never_given_up}")

    def assert_balanced(self) -> None:
        assert self.outputs_written == self.outputs_adopted + self.outputs_released, self.summary()
        assert self.given_up_twice == 0 and self.never_given_up == 0, self.summary()


@pytest.fixture
def ledger(monkeypatch):
    ledger = HandleLedger()
    real_new, real_steal, real_delete = (program_module.new_handle_array, program_module.steal_handles,
                                         program_module.delete_handle)

    def new_handle_array(tensors):
        handles = real_new(tensors)
        ledger.inputs_made += len(handles)
        ledger.made.extend(handles)
        return handles

    def steal_handles(handles, record=None):
        ledger.outputs_adopted += len(handles)
        ledger.given_up.extend(handles)
        return real_steal(handles, record)

    def delete_handle(handle):
        if handle in ledger.made:
            ledger.inputs_released += 1
        else:
            ledger.outputs_released += 1
            ledger.given_up.append(handle)
        real_delete(handle)

    monkeypatch.setattr(program_module, "new_handle_array", new_handle_array)
    monkeypatch.setattr(program_module, "steal_handles", steal_handles)
    for module in (program_module, handles_module):  # a failed run's releases live in handles.py
        monkeypatch.setattr(module, "delete_handle", delete_handle)
    return ledger


def watch_container(program, ledger, monkeypatch) -> None:
    """Record the distinct non-null handles the container writes, also when its run fails."""
    real_run = program._container.run

    def run(input_handles, output_handles, *args, **kwargs):
        try:
            return real_run(input_handles, output_handles, *args, **kwargs)
        finally:
            written = {h for h in output_handles if h}
            ledger.written.extend(written)
            ledger.outputs_written += len(written)

    monkeypatch.setattr(program._container, "run", run)


def resident_bytes() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def cuda_allocated_bytes() -> int:
    gc.collect()
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def assert_twice_outputs(outputs, x):
    for got, want in zip(outputs, Twice()(x), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def call_many(calls: int, one_call, memory, slack: int, label: str) -> None:
    """Run ``one_call(i)`` ``calls`` times; memory (bytes) after the first fifth of the calls (the warm-up:
    allocator pools and caches fill) and at the end must differ by less than ``slack``."""
    warmup = calls // 5
    for i in range(warmup):
        one_call(i)
    after_warmup = memory()
    for i in range(warmup, calls):
        one_call(i)
    at_end = memory()
    growth = at_end - after_warmup
    print(f"\n{label}: memory after call {warmup} {after_warmup / 2**20:.2f} MiB, after call {calls} "
          f"{at_end / 2**20:.2f} MiB, growth {growth / 2**10:+.0f} KiB")
    assert growth < slack, f"{label}: memory grew by {growth} bytes over {calls - warmup} calls"


def checked_call(program, ledger, make_input, outputs=None):
    """One call with the per-call ownership checks; returns the input and the outputs for spot checks."""
    x = make_input()
    inputs_before = use_count(x)
    results = program.execute([x], outputs)
    ledger.settle()
    assert use_count(x) == inputs_before, "an input handle was not released"
    fresh = use_count(torch.empty(1, device=x.device))
    assert [use_count(r) for r in results] == [fresh] * len(results), "an output handle is still held"
    return x, results


# --- the CPU (CI) -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def twice(twice_pt2):
    with load(twice_pt2) as program:
        yield program


def test_ten_thousand_calls_keep_rss_flat_and_handles_balanced(twice, ledger, monkeypatch):
    watch_container(twice, ledger, monkeypatch)

    def one_call(i):
        x, results = checked_call(twice, ledger, lambda: torch.randn(BATCH, 4))
        assert results[0] is results[2]
        if i % 1000 == 0:
            assert_twice_outputs(results, x)

    call_many(CALLS, one_call, resident_bytes, RSS_SLACK, "CPU, 10,000 calls")
    print(ledger.summary())
    assert ledger.inputs_made == CALLS and ledger.outputs_written == 2 * CALLS  # 3 slots, 2 distinct handles
    assert ledger.outputs_adopted == 2 * CALLS and ledger.outputs_released == 0
    ledger.assert_balanced()


def test_caller_outputs_keep_rss_flat(twice, ledger, monkeypatch):
    watch_container(twice, ledger, monkeypatch)
    buffers = [torch.empty(BATCH, 4) for _ in range(3)]
    held = [use_count(b) for b in buffers]

    def one_call(i):
        x, _ = checked_call(twice, ledger, lambda: torch.randn(BATCH, 4), buffers)
        if i % 500 == 0:
            assert_twice_outputs(buffers, x)

    call_many(SIDE_CALLS, one_call, resident_bytes, RSS_SLACK, "CPU, 2,000 calls into caller outputs")
    print(ledger.summary())
    assert [use_count(b) for b in buffers] == held
    assert ledger.inputs_made == SIDE_CALLS and ledger.outputs_written == 2 * SIDE_CALLS
    ledger.assert_balanced()


def test_rejected_calls_keep_rss_flat_and_make_no_handles(twice, ledger):
    bad = torch.randn(BATCH, 4, dtype=torch.float64)

    def one_call(i):
        with pytest.raises(InputError, match="dtype torch.float64"):
            twice(bad)

    call_many(SIDE_CALLS, one_call, resident_bytes, RSS_SLACK, "CPU, 2,000 rejected calls (bad dtype)")
    assert ledger.inputs_made == 0 and ledger.outputs_written == 0
    x = torch.randn(5, 4)
    assert_twice_outputs(twice(x), x)


def test_runs_failing_in_the_container_release_their_inputs(twice_unsigned_pt2, ledger, monkeypatch):
    """Without a signature the container's own input checks reject a bad shape, after the runtime made the
    input handles and before the model takes them over: the runtime must release them, every call (this
    leaked one input tensor per call, 1.5 KiB here, until the runtime learnt to tell)."""
    with load(twice_unsigned_pt2) as program:
        watch_container(program, ledger, monkeypatch)
        bad = torch.randn(BATCH, 5)
        held = use_count(bad)

        def one_call(i):
            with pytest.raises(RuntimeCallError, match="AOTIRuntimeError"):
                program(bad)
            ledger.settle()
            assert use_count(bad) == held

        call_many(SIDE_CALLS, one_call, resident_bytes, RSS_SLACK, "CPU, 2,000 runs failing in the container")
        print(ledger.summary())
        assert ledger.inputs_made == ledger.inputs_released == SIDE_CALLS and ledger.outputs_written == 0
        x = torch.randn(5, 4)
        assert_twice_outputs(program(x), x)


# --- CUDA (the H200) ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def twice_cuda_pt2(tmp_path_factory):
    return twice_package(tmp_path_factory.mktemp("twice_cuda_leaks") / "twice.pt2", device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graphs", [False, True], ids=["eager", "cuda_graphs"])
def test_cuda_ten_thousand_calls_keep_memory_allocated_flat(twice_cuda_pt2, cuda_graphs, ledger, monkeypatch):
    with load(twice_cuda_pt2, cuda_graphs=cuda_graphs) as program:
        watch_container(program, ledger, monkeypatch)

        def one_call(i):
            x, results = checked_call(program, ledger, lambda: torch.randn(BATCH, 4, device="cuda"))
            assert results[0] is results[2]
            if i % 1000 == 0:
                assert_twice_outputs(results, x)

        call_many(CALLS, one_call, cuda_allocated_bytes, CUDA_SLACK,
                  f"CUDA {'with' if cuda_graphs else 'without'} CUDA graphs, 10,000 calls")
        print(ledger.summary())
        # With graphs: 3 warm-up runs and the capture make handles; replays make none.
        runs = 4 if cuda_graphs else CALLS
        assert ledger.inputs_made == runs and ledger.outputs_written == 2 * runs
        ledger.assert_balanced()


@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graphs", [False, True], ids=["eager", "cuda_graphs"])
def test_cuda_caller_outputs_and_rejected_calls_keep_memory_allocated_flat(twice_cuda_pt2, cuda_graphs, ledger,
                                                                          monkeypatch):
    with load(twice_cuda_pt2, cuda_graphs=cuda_graphs) as program:
        watch_container(program, ledger, monkeypatch)
        buffers = [torch.empty(BATCH, 4, device="cuda") for _ in range(3)]
        bad = torch.randn(BATCH, 4, device="cuda", dtype=torch.float64)

        def one_call(i):
            x, _ = checked_call(program, ledger, lambda: torch.randn(BATCH, 4, device="cuda"), buffers)
            with pytest.raises(InputError, match="dtype torch.float64"):
                program(bad)
            if i % 500 == 0:
                assert_twice_outputs(buffers, x)

        call_many(SIDE_CALLS, one_call, cuda_allocated_bytes, CUDA_SLACK,
                  f"CUDA {'with' if cuda_graphs else 'without'} CUDA graphs, 2,000 calls into caller outputs "
                  "+ 2,000 rejected")
        ledger.assert_balanced()
