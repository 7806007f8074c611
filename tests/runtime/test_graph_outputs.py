"""Lending a CUDA graph's outputs (runtime/graphs.py): a capture is free to replay again only once nothing
the caller got from it is alive. The liveness rule runs on the CPU; the graphs themselves are in test_cuda.py."""

import torch

from aotcuda.runtime.graphs import _aliases, _Capture, _use_count


def lent_capture(outputs):
    held = tuple((s, _use_count(s)) for s in {t.untyped_storage()._cdata for t in outputs if t is not None})
    return _Capture(graph=None, static_inputs=[], static_outputs=outputs, held=held, lent=True)


def test_a_capture_is_free_only_when_no_alias_or_view_of_its_outputs_lives():
    shared, other = torch.randn(6, 4), torch.randn(3)
    capture = lent_capture([shared, other, shared, None])
    aliases = _aliases(capture.static_outputs)
    assert aliases[0] is aliases[2] and aliases[3] is None  # slots that shared one tensor still share
    assert aliases[0] is not shared and aliases[0].data_ptr() == shared.data_ptr()
    assert not capture.free()
    view = aliases[1][1:]
    del aliases
    assert not capture.free(), "a view of one output keeps the capture busy"
    storage_object = view.untyped_storage()  # a caller may look at the storage too
    del view, storage_object
    assert capture.free() and not capture.lent


def test_what_the_caller_does_to_an_alias_never_changes_the_capture():
    output = torch.randn(5)
    capture = lent_capture([output])
    (alias,) = _aliases(capture.static_outputs)
    alias.resize_(0)
    alias.set_(torch.zeros(2).untyped_storage())
    assert output.shape == (5,) and capture.static_outputs[0] is output
    del alias
    assert capture.free()


def test_a_capture_never_lent_is_free():
    capture = lent_capture([torch.randn(2)])
    capture.lent = False
    keep = capture.static_outputs[0][:1]  # our own references do not count: it was never handed out
    assert capture.free() and keep.numel() == 1


class _InterruptedReplay:
    """A stand-in CUDA graph whose replay writes the program's in-place update into its static input and is then
    interrupted, as a KeyboardInterrupt from a signal's handler surfaces as the replay returns."""

    def __init__(self, static_input: torch.Tensor):
        self.static_input, self.replays = static_input, 0

    def replay(self):
        self.static_input.add_(1.0)
        self.replays += 1
        raise KeyboardInterrupt


def test_a_replay_interrupted_as_it_returns_still_writes_the_written_input_back(monkeypatch):
    """GraphRunner copies an input the program writes from the graph's static copy back into the caller's tensor; the
    copy ran after the replay as a Python call, so an interrupt as the replay (or the capture's first replay)
    returned left the caller's tensor (a KV cache) without that replay's write while the graph's copy had it (main:
    the caller's tensor unchanged both times). The copies are now made before the replay and run in its finally."""
    from aotcuda.runtime import graphs

    def capture(run, device, inputs):
        return _InterruptedReplay(inputs[0]), [inputs[0]]

    monkeypatch.setattr(graphs, "capture", capture)
    runner = graphs.GraphRunner(lambda inputs, **_: [inputs[0]], torch.device("cpu"), warmup_calls=0,
                                mutated=frozenset({0}), in_place_sets=0)  # the copying captures' copy back
    monkeypatch.setattr(runner, "_raw_stream", lambda: 0)
    cache = torch.zeros(4)
    for replays in (1, 2):  # the capture's own replay, then a replay of the capture
        try:
            runner([cache], lambda outputs, static: outputs)
        except KeyboardInterrupt:
            pass
        assert runner._states[graphs.shape_key([cache])].captures[0].graph.replays == replays
        torch.testing.assert_close(cache, torch.full((4,), float(replays)))


class _Replay:
    """A stand-in CUDA graph whose replay writes twice its static input into its static output and then runs
    ``during`` (as a signal's handler runs between the outer call's Python lines)."""

    def __init__(self, static_input, static_output, during):
        self.static_input, self.static_output, self.during = static_input, static_output, during

    def replay(self):
        self.static_output.copy_(self.static_input * 2)
        self.during()


def _returns_within(seconds, call):
    """``call()``'s result, or a failure where it has not returned in ``seconds`` (a thread: a hang must not hang the
    test run)."""
    import threading

    done = []
    worker = threading.Thread(target=lambda: done.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"the call did not return in {seconds} s: it waits for a lock its own thread holds"
    return done[0]


def test_a_call_from_inside_a_graph_call_on_its_own_thread_runs_eagerly_or_is_refused(monkeypatch):
    """GraphRunner held a plain lock across Python code (the warm-up run, the copies, the replay, the capture): a
    second call from the same thread (a signal's handler, a __del__ run by the garbage collector, a weakref callback, a
    trace hook) waited for that lock forever (the breaker's cpu_graph_lock.py; the code before: no return). It now runs
    eagerly, with its own outputs, never the static buffers the outer call fills; during a capture it is refused."""
    import pytest

    from aotcuda.errors import RuntimeCallError
    from aotcuda.runtime import graphs

    inner = []  # what each call from inside got
    runner = None

    def call_inside():
        try:
            inner.append(runner([torch.full((2,), 5.0)], lambda outputs, static: outputs)[0])
        except RuntimeCallError as refused:
            inner.append(refused)

    state = {"inside": None}  # what the run does for the outer call, once

    def run(inputs, **_):
        during, state["inside"] = state["inside"], None
        if during is not None:
            during()
        return [inputs[0] * 2]

    def capture(run_, device, inputs):
        output = torch.empty_like(inputs[0])
        return _Replay(inputs[0], output, lambda: (during := state.pop("replay", None)) and during()), [output]

    monkeypatch.setattr(graphs, "capture", capture)
    runner = graphs.GraphRunner(run, torch.device("cpu"), warmup_calls=1, in_place_sets=0)  # the static buffers
    monkeypatch.setattr(runner, "_raw_stream", lambda: 0)
    finish = lambda outputs, static: [t.clone() for t in outputs] if static else outputs  # noqa: E731

    state["inside"] = call_inside  # a warm-up (eager) run
    result = _returns_within(10, lambda: runner([torch.ones(2)], finish))
    torch.testing.assert_close(result[0], torch.full((2,), 2.0))
    torch.testing.assert_close(inner.pop(), torch.full((2,), 10.0))

    real_capture = graphs.capture  # a capture: refused, naming why; the outer call's capture goes on

    def capturing(run_, device, inputs):
        call_inside()
        return real_capture(run_, device, inputs)

    monkeypatch.setattr(graphs, "capture", capturing)
    result = _returns_within(10, lambda: runner([torch.ones(2)], finish))
    torch.testing.assert_close(result[0], torch.full((2,), 2.0))
    refused = inner.pop()
    assert isinstance(refused, RuntimeCallError) and "captures a CUDA graph" in str(refused)
    assert "cuda_graphs=False" in str(refused)

    state["replay"] = call_inside  # a replay: eager, and the outer call's static output is its own
    result = _returns_within(10, lambda: runner([torch.full((2,), 3.0)], finish))
    torch.testing.assert_close(result[0], torch.full((2,), 6.0))
    torch.testing.assert_close(inner.pop(), torch.full((2,), 10.0))
    assert runner.num_captures == 1
    with pytest.raises(KeyError):
        state["replay"]
