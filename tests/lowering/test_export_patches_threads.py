"""The export step's patches of torch functions (affine_grid.py, fft_frequencies.py) with two threads lowering at once.

fixlist (2026-12-07): each patch set torch's function on entry and put the original back on exit, and a thread that
entered while another's patch was in place took it as "entered already": when the first thread's export ended, it
put torch's function back while the second was still exporting, and the second's dynamic height, width and length
became constants (torch's own affine_grid_generator and fftfreq take ints: "Constraints violated"); and torch.export
keeps the export in module globals (another thread's ending: "_EXPORT_MODULE_HIERARCHY must not be None"). Now one
thread's patched steps run at a time in a process (torch_fixes._STEPS_LOCK).
"""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from aotcuda.lowering import torch_fixes
from aotcuda.lowering.exporting import export_program

TORCHS = (F.affine_grid, torch.fft.fftfreq, torch.fft.rfftfreq)
WAIT_S = 60
# how long each model's trace waits for the other thread's export to reach its point: the code before interleaved
# the two exports so; with the steps one thread at a time, the wait runs out and each export runs whole, alone
GATE_S = 2.0


class GridAndFrequencies(torch.nn.Module):
    """Needs both patches: a grid over a dynamic height and width, frequencies of a dynamic width. Its forward waits,
    while it is traced, until the other thread's export has ended (``gate``)."""

    def __init__(self, gate=None):
        super().__init__()
        self.gate = gate

    def forward(self, x, theta):
        if self.gate is not None:
            self.gate()
        grid = F.affine_grid(theta, x.shape, align_corners=False)
        frequencies = torch.fft.fftfreq(x.shape[-1]) + torch.fft.rfftfreq(x.shape[-2]).sum()
        return F.grid_sample(x, grid, align_corners=False) * frequencies


class Static(torch.nn.Module):
    """Needs neither patch: static sizes. Its forward waits until the other thread is inside its own trace."""

    def __init__(self, gate):
        super().__init__()
        self.gate = gate

    def forward(self, x):
        self.gate()
        return torch.nn.functional.affine_grid(torch.eye(2, 3).expand(x.shape[0], 2, 3), [x.shape[0], 1, 4, 4],
                                               align_corners=False).sum() + x


def relative_error(actual, expected) -> float:
    return float((actual.double() - expected.double()).norm() / expected.double().norm())


@pytest.mark.parametrize("other_exports", [True, False])
def test_two_threads_exporting_at_once_each_see_the_patch_they_need_and_torchs_functions_come_back(other_exports):
    """``other_exports`` True: the thread that needs the patches enters first, the other exports a static model in
    the middle of its trace (the code before: torch's globals); False: the other thread enters first and its step
    ends, without an export (a lowering refused early), in the middle of the trace of the one that needs the
    patches (the code before put torch's functions back there: "Constraints violated")."""
    dynamic_inside, static_done, static_entered = threading.Event(), threading.Event(), threading.Event()
    results, errors = {}, {}

    def wait_for_static_export():  # the dynamic model's trace goes on once the static export has ended, if it can
        dynamic_inside.set()
        static_done.wait(GATE_S)

    def wait_for_dynamic_trace():
        dynamic_inside.wait(GATE_S)

    def lower_dynamic():
        try:
            with torch_fixes.applied("export"):
                results["dynamic"] = export_program(
                    GridAndFrequencies(wait_for_static_export), (torch.randn(2, 3, 16, 16), torch.randn(2, 2, 3)), {},
                    ({2: Dim("h", min=2, max=64), 3: Dim("w", min=2, max=64)}, None))
        except Exception as error:  # noqa: BLE001 - reported by the test's thread
            errors["dynamic"] = error
            dynamic_inside.set()

    def lower_static():
        try:
            with torch_fixes.applied("export"):
                static_entered.set()
                if other_exports:
                    results["static"] = export_program(Static(wait_for_dynamic_trace), (torch.randn(3, 4, 4, 2),),
                                                       {}, None)
                else:
                    wait_for_dynamic_trace()
        except Exception as error:  # noqa: BLE001
            errors["static"] = error
        finally:
            static_done.set()

    dynamic, static = threading.Thread(target=lower_dynamic), threading.Thread(target=lower_static)
    first, second, entered = (dynamic, static, dynamic_inside) if other_exports else (static, dynamic, static_entered)
    first.start()
    entered.wait(WAIT_S)  # the first thread is inside its step (with the steps' lock: the second waits for it)
    second.start()
    static.join(WAIT_S)
    dynamic.join(WAIT_S)
    assert not errors, {name: f"{type(error).__name__}: {str(error)[:400]}" for name, error in errors.items()}
    assert (F.affine_grid, torch.fft.fftfreq, torch.fft.rfftfreq) == TORCHS, "torch's functions are back after both"
    torch.manual_seed(5)
    model = GridAndFrequencies()
    for h, w in [(9, 13), (40, 17), (16, 16)]:
        x, theta = torch.randn(2, 3, h, w), torch.randn(2, 2, 3)
        assert relative_error(results["dynamic"].module()(x, theta), model(x, theta)) < 1e-5, (h, w)
    if not other_exports:
        return
    x = torch.randn(3, 4, 4, 2)
    expected = Static(lambda: None)(x)
    assert torch.allclose(results["static"].module()(x), expected, rtol=1e-5, atol=1e-5)


def test_a_child_forked_while_another_thread_is_in_a_step_can_lower():
    """The steps' lock is the child's own after a fork: a child forked while another thread of its parent was inside
    a step would otherwise wait for that lock for good."""
    import os

    inside, leave = threading.Event(), threading.Event()

    def hold_a_step():
        with torch_fixes.applied("export"):
            inside.set()
            leave.wait(WAIT_S)

    holder = threading.Thread(target=hold_a_step)
    holder.start()
    assert inside.wait(WAIT_S)
    try:
        pid = os.fork()
        if pid == 0:  # the child: its own lock, free
            code = 1
            try:
                with torch_fixes.applied("decompose"):
                    code = 0
            finally:
                os._exit(code)
        deadline = __import__("time").monotonic() + WAIT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if __import__("time").monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise AssertionError("the forked child waited for its parent's other thread's step")
            __import__("time").sleep(0.05)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        leave.set()
        holder.join(WAIT_S)


def test_a_child_forked_inside_its_own_threads_step_leaves_it_and_lowers_again():
    """A child forked inside a step of the forking thread goes on in that step: the lock stays its own, so leaving the
    step and entering the next one work (a fresh lock there would raise "cannot release un-acquired lock")."""
    import os
    import time

    with torch_fixes.applied("export"):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                torch_fixes._STEPS_LOCK.release()  # what leaving the step does, here by hand: the block is the parent's
                with torch_fixes.applied("decompose"):
                    code = 0
            finally:
                os._exit(code)
    deadline = time.monotonic() + WAIT_S
    while not (status := os.waitpid(pid, os.WNOHANG))[0]:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child waited for its own step's lock")
        time.sleep(0.05)
    assert os.WIFEXITED(status[1]) and os.WEXITSTATUS(status[1]) == 0, status
