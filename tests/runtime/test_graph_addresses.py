"""GraphRunner's captures that read the caller's inputs in place (runtime/graphs.py), on the CPU: a stand-in graph
that reads its inputs BY ADDRESS at each replay, and writes the input the program writes by address, as a CUDA graph
captured on those addresses does. Every call is compared with the same program run eagerly on copies; results the
caller keeps must never change. (The CUDA side, with AOTInductor's own graphs: test_graphs_in_place.py.)"""

import ctypes
import random

import torch

from aotcuda.runtime import graphs


def _at(address: int, numel: int) -> torch.Tensor:
    return torch.frombuffer((ctypes.c_float * numel).from_address(address), dtype=torch.float32)


class _AddressGraph:
    """Replays ``_run`` on the memory at the captured addresses into its own output buffers."""

    def __init__(self, addresses, numel, outputs):
        self.addresses, self.numel, self.outputs = addresses, numel, outputs

    def replay(self):
        x, cache = (_at(address, self.numel) for address in self.addresses)
        for buffer, result in zip(self.outputs, _run([x, cache])):
            buffer.copy_(result)


def _run(inputs, **_):
    """The program: writes its second input (a cache passed as an argument), returns two results."""
    x, cache = inputs
    cache.add_(x)
    return [cache * 2, x + 1]


def _runner(monkeypatch, captured: list, warmup_calls: int = 3):
    def capture(run, device, inputs, then=None):
        if inputs[0].data_ptr() == inputs[1].data_ptr() or any(t.dim() != 1 for t in inputs):
            raise AssertionError("the stand-in reads two distinct 1-d float tensors")
        captured.append(tuple(t.data_ptr() for t in inputs))
        outputs = [torch.empty_like(inputs[0]), torch.empty_like(inputs[0])]
        return _AddressGraph([t.data_ptr() for t in inputs], inputs[0].numel(), outputs), outputs

    monkeypatch.setattr(graphs, "capture", capture)
    runner = graphs.GraphRunner(_run, torch.device("cpu"), warmup_calls=warmup_calls, mutated=frozenset({1}))
    monkeypatch.setattr(runner, "_raw_stream", lambda: 0)
    return runner


def _finish(outputs, static):
    return [t.clone() for t in outputs] if static else outputs


def _call(runner, x, cache, lend=True):
    want_cache = cache + x
    want = [want_cache * 2, x + 1]
    got = runner([x, cache], _finish, lend=lend)
    assert torch.equal(cache, want_cache) and all(torch.equal(g, w) for g, w in zip(got, want))
    return got, want


def test_captures_in_place_give_eagers_results_whatever_the_callers_pattern(monkeypatch):
    """Refilled buffers, fresh tensors, results kept or dropped, lent or not: each call's results and its cache are
    eager's, and no kept result changes afterwards."""
    rng, served = random.Random(0), 0
    for _ in range(60):
        captured = []
        runner = _runner(monkeypatch, captured, warmup_calls=rng.choice([0, 1, 3]))
        pool = [(torch.randn(8), torch.randn(8)) for _ in range(3)]
        kept = []
        for _ in range(40):
            if rng.random() < 0.6:
                x, cache = pool[rng.randrange(3)]
                x.copy_(torch.randn(8))
            else:
                x, cache = torch.randn(8), pool[rng.randrange(3)][1]
            got, want = _call(runner, x, cache, lend=rng.random() < 0.8)
            if rng.random() < 0.3:
                kept.append((got, [w.clone() for w in want]))
            if kept and rng.random() < 0.1:
                kept.pop(rng.randrange(len(kept)))
            for got, want in kept:
                assert all(torch.equal(g, w) for g, w in zip(got, want))
        served += runner.num_in_place_captures
    assert served > 0  # the patterns above reach the captures in place


def test_a_buffer_refilled_in_place_is_read_there_with_no_copy(monkeypatch):
    captured, copies = [], []
    runner = _runner(monkeypatch, captured)
    monkeypatch.setattr(graphs, "copy_into", lambda statics, news: copies.append(1))
    x, cache = torch.empty(8), torch.randn(8)
    for _ in range(12):
        x.copy_(torch.randn(8))
        result = _call(runner, x, cache)
    del result
    assert captured == [(x.data_ptr(), cache.data_ptr())] * 2 and not copies  # two captures alternate
    assert runner.num_in_place_captures == 2 and runner.num_captures == 0


def test_inputs_moving_between_address_sets_stop_capturing_in_place(monkeypatch):
    """The review of session 38: two callers taking two turns each (or double buffering, A A B B ...) dropped the
    shape's captures in place and captured again at each change: 100 captures in 200 calls, each synchronizing the
    device and emptying the caching allocator. A shape now captures in place for at most MOST_ADDRESS_SETS sets of
    addresses; after that its calls copy."""
    captured = []
    runner = _runner(monkeypatch, captured)
    buffers = [(torch.empty(8), torch.randn(8)), (torch.empty(8), torch.randn(8))]
    for turn in range(200):
        x, cache = buffers[turn // 2 % 2]
        x.copy_(torch.randn(8))
        _call(runner, x, cache)
    in_place = [c for c in captured if c in {(x.data_ptr(), cache.data_ptr()) for x, cache in buffers}]
    assert len(in_place) <= 3 * 2, len(in_place)  # three sets, two captures each (before: 100)
    assert len(captured) <= len(in_place) + runner.max_captures
