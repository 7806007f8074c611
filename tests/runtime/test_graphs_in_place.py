"""CUDA graphs that read the caller's inputs in place (runtime/graphs.py): a call whose inputs lie at the previous
call's addresses replays a capture made on those addresses, with no copy in and, for a written input, no copy back.
Every call is compared with eager on fresh values; the copies are counted. Run on the H200 (or any CUDA device)."""

import pytest
import torch

import aotcuda
from aotcuda.errors import RuntimeCallError
from aotcuda.runtime import graphs

pytestmark = pytest.mark.cuda


class Accumulates(torch.nn.Module):
    """Writes one input (a cache passed as an argument) and returns a product of it and a reduction of the other."""

    def forward(self, x, cache):
        cache.add_(x)
        return cache * 2, x.sum(0)


def _eager(x, cache):
    """Eager's outputs and cache after the call, on copies."""
    cache = cache.clone()
    return (*Accumulates()(x.clone(), cache), cache)


def _assert_call(program, x, cache, outputs=None):
    want_a, want_b, want_cache = _eager(x, cache)
    got = program.execute([x, cache], outputs) if outputs is not None else program(x, cache)
    torch.testing.assert_close(got[0], want_a, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], want_b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cache, want_cache, rtol=1e-5, atol=1e-5)
    return got


@pytest.fixture(scope="module")
def accumulates_cuda(tmp_path_factory):
    path = tmp_path_factory.mktemp("in_place") / "accumulates.pt2"
    args = (torch.randn(6, 8, device="cuda"), torch.randn(6, 8, device="cuda"))
    rows = torch.export.Dim("rows", min=2, max=64)
    return aotcuda.lower(Accumulates(), args, device="cuda", package_path=path,
                         dynamic_shapes=({0: rows}, {0: rows})).package_path


@pytest.fixture
def counted_copies(monkeypatch):
    """How many times a graph call copied inputs into static buffers, or written ones back."""
    counts = {"in": 0, "back": 0}
    real_copy_into, real_copies_back = graphs.copy_into, graphs.copies_back

    def copy_into(statics, news):
        counts["in"] += 1
        return real_copy_into(statics, news)

    def copies_back(*args):
        counts["back"] += 1
        return real_copies_back(*args)

    monkeypatch.setattr(graphs, "copy_into", copy_into)
    monkeypatch.setattr(graphs, "copies_back", copies_back)
    return counts


def test_inputs_refilled_in_place_are_read_in_place_and_the_written_one_written_there(accumulates_cuda,
                                                                                     counted_copies):
    x, cache = torch.empty(6, 8, device="cuda"), torch.randn(6, 8, device="cuda")
    with aotcuda.load(accumulates_cuda, cuda_graphs=True) as program:
        for call in range(10):  # 3 eager warm-ups, then replays of captures on x's and cache's addresses
            x.copy_(torch.randn(6, 8, device="cuda"))
            out = _assert_call(program, x, cache)  # each result dropped at the next but one: two captures alternate
        assert program._graphs.num_in_place_captures == 2 and program._graphs.num_captures == 0
        assert counted_copies == {"in": 0, "back": 0}
        # A view outlives its result: the capture that wrote it must not replay while the view lives.
        x.copy_(torch.randn(6, 8, device="cuda"))
        want_view = _eager(x, cache)[0][2:]
        kept_view = program(x, cache)[0][2:]
        for _ in range(4):
            x.copy_(torch.randn(6, 8, device="cuda"))
            out = _assert_call(program, x, cache)
        torch.testing.assert_close(kept_view, want_view, rtol=0, atol=0)
        del kept_view
        # A caller that keeps every result: the captures in place are lent, so the copying ones serve, and no
        # kept result is overwritten.
        kept = []
        for _ in range(5):
            x.copy_(torch.randn(6, 8, device="cuda"))
            want = _eager(x, cache)[:2]
            kept.append((program(x, cache), want))
        for got, want in kept:
            torch.testing.assert_close(list(got), list(want), rtol=1e-5, atol=1e-5)
        assert program._graphs.num_captures >= 1 and counted_copies["in"] >= 1
        del kept, out
        # Caller buffers: the results are copied into them, the inputs still read in place.
        buffers = [torch.empty(6, 8, device="cuda"), torch.empty(8, device="cuda")]
        copies_in = counted_copies["in"]
        for _ in range(4):
            x.copy_(torch.randn(6, 8, device="cuda"))
            _assert_call(program, x, cache, buffers)
        assert counted_copies["in"] == copies_in


def test_new_tensors_at_the_old_addresses_and_alternating_ones_give_eagers_results(accumulates_cuda, counted_copies):
    with aotcuda.load(accumulates_cuda, cuda_graphs=True) as program:
        cache = torch.randn(6, 8, device="cuda")
        for _ in range(8):  # each step's x freed before the next is made: the allocator gives its block again
            x = torch.randn(6, 8, device="cuda")
            _assert_call(program, x, cache)
            del x
        # Two sets of inputs, alternating: the addresses never repeat from one call to the next, so no capture in
        # place is made for them and the ones made above are dropped for none (they are still exact when reused).
        pairs = [(torch.empty(6, 8, device="cuda"), torch.randn(6, 8, device="cuda")) for _ in range(2)]
        for call in range(8):
            x, cache = pairs[call % 2]
            x.copy_(torch.randn(6, 8, device="cuda"))
            _assert_call(program, x, cache)
        # A shape of its own: its own warm-up, then captures on its addresses.
        x, cache = torch.empty(3, 8, device="cuda"), torch.randn(3, 8, device="cuda")
        for _ in range(6):
            x.copy_(torch.randn(3, 8, device="cuda"))
            _assert_call(program, x, cache)
        assert program._graphs.num_graphs == 2


def test_a_failed_capture_in_place_leaves_the_copying_captures_serving(accumulates_cuda, monkeypatch):
    real_capture, calls = graphs.capture, []

    def first_capture_fails(run, device, inputs, then=None):
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeCallError("capturing the model into a CUDA graph failed: injected")
        return real_capture(run, device, inputs, then)

    monkeypatch.setattr(graphs, "capture", first_capture_fails)
    x, cache = torch.empty(6, 8, device="cuda"), torch.randn(6, 8, device="cuda")
    with aotcuda.load(accumulates_cuda, cuda_graphs=True) as program:
        for _ in range(7):
            x.copy_(torch.randn(6, 8, device="cuda"))
            _assert_call(program, x, cache)
        assert program._graphs.num_in_place_captures == 0 and program._graphs.num_captures >= 1


def test_the_switch_off_copies_every_graph_calls_inputs(accumulates_cuda, counted_copies, monkeypatch):
    monkeypatch.setenv("AOTCUDA_GRAPHS_IN_PLACE", "0")
    x, cache = torch.empty(6, 8, device="cuda"), torch.randn(6, 8, device="cuda")
    with aotcuda.load(accumulates_cuda, cuda_graphs=True) as program:
        for _ in range(6):
            x.copy_(torch.randn(6, 8, device="cuda"))
            _assert_call(program, x, cache)
        assert program._graphs.num_in_place_captures == 0 and counted_copies["in"] == 2  # 3 warm-ups, the capture, 2 replays
