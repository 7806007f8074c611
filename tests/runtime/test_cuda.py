"""The runtime on CUDA: eager runs, CUDA graphs (warm-up, capture, replay, re-capture), caller outputs,
and loading a CUDA package in a fresh process without LD_PRELOAD. Run on the H200."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from runtime_programs import Twice, twice_package

from aotcuda.errors import InputError, RuntimeCallError
from aotcuda.runtime.program import load

pytestmark = pytest.mark.cuda


def storage(t):
    return t.untyped_storage().data_ptr()


def assert_twice_outputs(outputs, x):
    expected = Twice()(x)
    for got, want in zip(outputs, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert storage(outputs[0]) == storage(outputs[2]) and storage(outputs[1]) != storage(outputs[0])


class ComplexRope(torch.nn.Module):
    """Llama-style rotary embedding written with complex numbers; aotcuda.lower rewrites it as real math
    (AOTI alone would call fallback kernels and the proxy executor for it)."""

    def __init__(self, seq=16, dim=32):
        super().__init__()
        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        angles = torch.outer(torch.arange(seq).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def forward(self, x):  # x: (batch, seq, heads, dim), float32
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        rotated = pairs * self.freqs_cis[None, :, None, :]
        return torch.view_as_real(rotated).flatten(3).type_as(x)


@pytest.fixture(scope="module")
def twice_cuda(tmp_path_factory):
    return twice_package(tmp_path_factory.mktemp("twice_cuda") / "twice.pt2", device="cuda")


@pytest.fixture(scope="module")
def rope_cuda(tmp_path_factory):
    import aotcuda

    module = ComplexRope().cuda()
    x = torch.randn(2, 16, 4, 32, device="cuda")
    lowered = aotcuda.lower(module, (x,), device="cuda", package_path=tmp_path_factory.mktemp("rope") / "rope.pt2")
    return lowered.package_path, module


def test_twice_eager_on_cuda(twice_cuda):
    with load(twice_cuda) as program:
        assert program.device.type == "cuda"
        for _ in range(3):
            x = torch.randn(5, 4, device="cuda")
            assert_twice_outputs(program(x), x)
        x = torch.randn(5, 4, device="cuda")
        buffers = [torch.empty(5, 4, device="cuda") for _ in range(3)]
        program.execute([x], buffers)
        assert_twice_outputs([buffers[0], buffers[1], buffers[0]], x)
        torch.testing.assert_close(buffers[2], x * 2)
        # a shape accepted before, on another device: the accepted signatures' device test (is_cuda, get_device)
        with pytest.raises(InputError, match=r"is on cpu, but the program runs on cuda"):
            program(x.cpu())
        with pytest.raises(InputError):
            program(torch.empty(5, 4, device="meta"))
        assert_twice_outputs(program(x), x)  # and the program still runs


def test_twice_with_cuda_graphs_warmup_capture_replay(twice_cuda):
    with load(twice_cuda, cuda_graphs=True) as program:
        kept = []
        for call in range(6):  # 3 eager warm-up calls, the capture, then replays
            x = torch.randn(7, 4, device="cuda")
            outputs = program(x)
            assert_twice_outputs(outputs, x)
            kept.append((x, outputs))
            assert program._graphs.num_graphs == (1 if call >= 3 else 0)
        # Returned outputs are copies: later replays must not have overwritten earlier results.
        for x, outputs in kept:
            assert_twice_outputs(outputs, x)


def test_graph_outputs_are_handed_out_without_copies_and_never_overwritten_while_held(twice_cuda, monkeypatch):
    # The captures that copy their inputs in: a fresh x may land where the last one was, which a capture in place
    # serves instead (test_graphs_in_place.py holds its results the same way), so the counts below hold with it off.
    monkeypatch.setenv("AOTCUDA_GRAPHS_IN_PLACE", "0")
    with load(twice_cuda, cuda_graphs=True) as program:
        for _ in range(3):  # warm-up
            program(torch.randn(6, 4, device="cuda"))
        # A loop that drops each result before the next call but one alternates between two captures:
        # the results are the graphs' own buffers (two sets of addresses), never copies.
        addresses = set()
        for _ in range(8):
            x = torch.randn(6, 4, device="cuda")
            outputs = program(x)
            assert_twice_outputs(outputs, x)
            addresses.add((storage(outputs[0]), storage(outputs[1])))
        assert len(addresses) == 2 and program._graphs.num_captures == 2
        # A view outlives its result: the graph that wrote it must not replay while the view lives.
        x = torch.randn(6, 4, device="cuda")
        kept_view, kept_values = program(x)[1][2:], (x + 1)[2:]
        for _ in range(6):
            x = torch.randn(6, 4, device="cuda")
            outputs = program(x)
            assert_twice_outputs(outputs, x)
        torch.testing.assert_close(kept_view, kept_values, rtol=0, atol=0)
        outputs[0].resize_(0)  # what a caller does to its tensors never changes the graph's own
        del kept_view, outputs
        for _ in range(3):
            x = torch.randn(6, 4, device="cuda")
            assert_twice_outputs(program(x), x)
        # A caller that keeps every result gets copies once no capture is left to lend: none is overwritten.
        kept = [(x, program(x)) for x in [torch.randn(6, 4, device="cuda") for _ in range(6)]]
        for x, outputs in kept:
            assert_twice_outputs(outputs, x)
        assert program._graphs.num_captures == 3


def test_cuda_graphs_with_caller_outputs_and_a_new_shape(twice_cuda):
    with load(twice_cuda, cuda_graphs=True) as program:
        for batch in (3, 9):  # each shape gets its own warm-up and capture
            for _ in range(5):
                x = torch.randn(batch, 4, device="cuda")
                buffers = [torch.empty(batch, 4, device="cuda") for _ in range(3)]
                program.execute([x], buffers)
                for got, want in zip(buffers, Twice()(x)):
                    torch.testing.assert_close(got, want)
                assert len({storage(b) for b in buffers}) == 3
        assert program._graphs.num_graphs == 2


@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_complex_rope_with_and_without_cuda_graphs(rope_cuda, cuda_graphs):
    path, module = rope_cuda
    with load(path, cuda_graphs=cuda_graphs) as program:
        for _ in range(5):
            x = torch.randn(2, 16, 4, 32, device="cuda")
            torch.testing.assert_close(program(x), module(x), rtol=1e-5, atol=1e-5)


def test_cuda_package_loads_in_a_fresh_process_without_ld_preload(twice_cuda):
    code = textwrap.dedent(f"""
        import torch
        from aotcuda.runtime.program import load
        program = load({twice_cuda!r})
        x = torch.randn(4, 4, device="cuda")
        a, b, c = program(x)
        assert torch.equal(a, x * 2) and torch.equal(b, x + 1) and a.data_ptr() == c.data_ptr()
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_failed_capture_releases_every_handle_once_and_the_shape_runs_eagerly(twice_cuda, monkeypatch):
    import aotcuda.runtime.handles as handles_module
    import aotcuda.runtime.program as program_module

    released = []
    real_release = program_module.delete_handle
    for module in (program_module, handles_module):  # a failed run's releases live in handles.py
        monkeypatch.setattr(module, "delete_handle", lambda h: (released.append(h), real_release(h)))
    with load(twice_cuda, cuda_graphs=True) as program:
        real_run = program._container.run

        def fail_in_capture(input_handles, output_handles, stream=None, single_threaded=False):
            real_run(input_handles, output_handles, stream, single_threaded)
            if single_threaded:
                raise RuntimeCallError("running the model failed with AOTIRuntimeError 1: injected")

        monkeypatch.setattr(program._container, "run", fail_in_capture)
        for _ in range(3):
            x = torch.randn(6, 4, device="cuda")
            assert_twice_outputs(program(x), x)
        with pytest.raises(RuntimeCallError, match=r"capturing the model into a CUDA graph failed.*injected"):
            program(torch.randn(6, 4, device="cuda"))
        assert len(released) == 2 and len(set(released)) == 2  # 3 slots, 2 handles, each released once
        for _ in range(2):  # this shape now runs without a graph
            x = torch.randn(6, 4, device="cuda")
            assert_twice_outputs(program(x), x)
        assert program._graphs.num_graphs == 0
