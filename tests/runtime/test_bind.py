"""Program.bind: a CUDA graph bound to caller-owned static buffers (zero-copy replay).

The CPU tests check what bind refuses (and that the Program still works afterwards) and the BoundGraph's
own behaviour with a stand-in graph; the cuda-marked tests capture real graphs on the H200."""

import pytest
import torch
from runtime_programs import Twice, twice_package

from aotcuda.errors import InputError, OutputError, RuntimeCallError
from aotcuda.runtime.bound import BoundGraph
from aotcuda.runtime.program import load


def assert_twice(outputs, x):
    for got, want in zip(outputs, Twice()(x), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# --- CPU: what bind refuses, and the BoundGraph's lifetime --------------------------------------------------


def test_bind_on_a_cpu_program_says_it_needs_cuda_and_the_program_still_runs(twice_pt2):
    with load(twice_pt2) as program:
        x = torch.randn(4, 4)
        with pytest.raises(RuntimeCallError, match=r"bind\(\) captures a CUDA graph; this Program runs on cpu"):
            program.bind([x])
        assert_twice(program(x), x)


@pytest.mark.parametrize("inputs, error, message", [
    (lambda: [torch.randn(4, 4, dtype=torch.float64)], InputError, "dtype torch.float64"),
    (lambda: [torch.randn(4, 4), torch.randn(4, 4)], InputError, "takes 1 tensor input"),
    (lambda: torch.randn(4, 4), InputError, "as a list of tensors"),
    (lambda: [torch.randn(4, 8).t()], InputError, r"reads input .* in place, but it is not in the layout"),
])
def test_bind_refuses_inputs_a_call_would_refuse_or_would_copy(twice_pt2, inputs, error, message):
    with load(twice_pt2) as program:
        with pytest.raises(error, match=message):
            program.bind(inputs())
        x = torch.randn(5, 4)
        assert_twice(program(x), x)


def test_bind_checks_caller_output_buffers_first(twice_pt2):
    with load(twice_pt2) as program:
        x = torch.randn(4, 4)
        with pytest.raises(OutputError, match="has dtype torch.float16"):
            program.bind([x], [torch.empty(4, 4, dtype=torch.float16), torch.empty(4, 4), torch.empty(4, 4)])


def test_bind_on_a_closed_program_raises(twice_pt2):
    program = load(twice_pt2)
    program.close()
    with pytest.raises(RuntimeCallError, match="closed"):
        program.bind([torch.randn(4, 4)])


class CountingGraph:
    replays = 0

    def replay(self):
        self.replays += 1


def test_bound_graph_replays_returns_the_same_structured_outputs_and_refuses_after_close():
    outputs = [torch.zeros(2), torch.ones(2)]
    is_open = [True]
    graph = CountingGraph()
    bound = BoundGraph([torch.zeros(1)], outputs, graph, tuple, lambda: is_open[0], [])
    first, second = bound.replay(), bound.replay()
    assert first is second and first[0] is outputs[0] and graph.replays == 2
    is_open[0] = False  # the Program was closed: the kernels may be gone
    with pytest.raises(RuntimeCallError, match="bound graph was closed"):
        bound.replay()
    is_open[0] = True
    with bound:
        pass
    with pytest.raises(RuntimeCallError, match="bound graph was closed"):
        bound.replay()
    assert graph.replays == 2


# --- CUDA: real captures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def twice_cuda_bind(tmp_path_factory):
    return twice_package(tmp_path_factory.mktemp("twice_cuda_bind") / "twice.pt2", device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_bound_graph_reads_inputs_in_place_and_writes_the_same_outputs(twice_cuda_bind, cuda_graphs):
    with load(twice_cuda_bind, cuda_graphs=cuda_graphs) as program:
        static = torch.randn(6, 4, device="cuda")
        bound = program.bind([static])
        assert bound.inputs[0] is static
        pointers = [t.data_ptr() for t in bound.outputs]
        for _ in range(4):
            x = torch.randn(6, 4, device="cuda")
            static.copy_(x)  # the caller writes the next inputs in place
            outputs = bound.replay()
            assert_twice(outputs, x)
            assert [t.data_ptr() for t in outputs] == pointers  # no copy: the graph's own buffers
            assert outputs[0].data_ptr() == outputs[2].data_ptr()  # one tensor in two slots, as in eager
        y = torch.randn(3, 4, device="cuda")
        assert_twice(program(y), y)  # the Program still runs other shapes


@pytest.mark.cuda
def test_bound_graph_fills_caller_output_buffers(twice_cuda_bind):
    with load(twice_cuda_bind) as program:
        static = torch.randn(5, 4, device="cuda")
        buffers = [torch.empty(5, 4, device="cuda") for _ in range(3)]
        bound = program.bind([static], buffers)
        for _ in range(3):
            x = torch.randn(5, 4, device="cuda")
            static.copy_(x)
            outputs = bound.replay()
            assert all(got is buffer for got, buffer in zip(outputs, buffers))
            assert_twice(buffers, x)


@pytest.mark.cuda
def test_a_bound_graph_keeps_its_program_alive(twice_cuda_bind):
    """`bound = load(path).bind(x)` keeps no other reference to the Program: the bound graph must (on the
    H200 the benchmarks' first version of this line replayed into a Program already collected)."""
    import gc

    static = torch.randn(4, 4, device="cuda")
    bound = load(twice_cuda_bind).bind([static])
    gc.collect()
    for _ in range(3):
        x = torch.randn(4, 4, device="cuda")
        static.copy_(x)
        assert_twice(bound.replay(), x)
    bound.close()
    assert bound.program is None


@pytest.mark.cuda
def test_bound_graph_refuses_to_replay_after_the_program_is_closed(twice_cuda_bind):
    program = load(twice_cuda_bind)
    bound = program.bind([torch.randn(4, 4, device="cuda")])
    bound.replay()
    program.close()
    with pytest.raises(RuntimeCallError, match="closed"):
        bound.replay()


@pytest.mark.cuda
def test_bound_graph_refuses_a_transposed_input_on_cuda(twice_cuda_bind):
    with load(twice_cuda_bind) as program:
        with pytest.raises(InputError, match="not in the layout"):
            program.bind([torch.randn(4, 6, device="cuda").t()])
