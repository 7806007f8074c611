"""Inputs that forward returns, written in place or not, come back as the caller's own tensors
(aotcuda.runtime.returned_inputs).

Sixth new user (2026-12-07): `return ..., x` came back as another tensor over x's storage, or, for a non-contiguous x
(laid out as exported first), as a contiguous copy, so that a write into that output missed x, where eager returns x
itself. Review (2026-12-07): `x.add_(1); return x` came back as another tensor too.
"""

from __future__ import annotations

import pytest
import torch

import aotcuda
from aotcuda.errors import InputError, PackageError
from runtime_programs import with_edited_signature


class ReturnsItsInputs(torch.nn.Module):
    def forward(self, x, z, y):
        return y * 2 + x.sum(), x, z, x


def _inputs():
    return torch.randn(3, 4), torch.randn(3, 4, dtype=torch.complex64), torch.randn(5)


@pytest.fixture(scope="module")
def returns_inputs_pt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("returned") / "returns_inputs.pt2"
    aotcuda.lower(ReturnsItsInputs(), _inputs(), device="cpu", package_path=path)
    return path


def test_an_input_returned_as_it_is_is_the_callers_own_tensor_as_in_eager(returns_inputs_pt2):
    program = aotcuda.load(returns_inputs_pt2)
    assert [spec.get("returns_input") for spec in program.signature["outputs"]] == [None, 0, 1, 0]
    for layout in ("contiguous", "transposed"):
        x, z, y = _inputs()
        if layout == "transposed":  # the checks lay it out as exported, a copy, before the run
            x = x.t().contiguous().t()
        expected = ReturnsItsInputs()(x, z, y)
        out = program(x, z, y)
        torch.testing.assert_close(out[0], expected[0], rtol=1e-5, atol=1e-5)
        assert out[1] is x and out[3] is x and out[2] is z, layout  # eager's objects
        assert expected[1] is x and expected[2] is z
        out[1].add_(1)  # a write into the output is a write into x, as in eager
        assert torch.equal(x, out[3])


def test_a_callers_output_buffer_for_a_returned_input_gets_its_values(returns_inputs_pt2):
    program = aotcuda.load(returns_inputs_pt2)
    x, z, y = _inputs()
    buffers = [torch.empty(5), torch.empty(3, 4), torch.empty(3, 4, dtype=torch.complex64), torch.empty(3, 4)]
    got = program.execute([x, z, y], outputs=buffers)
    assert all(g is b for g, b in zip(got, buffers))
    assert torch.equal(buffers[1], x) and torch.equal(buffers[2], z) and torch.equal(buffers[3], x)
    with pytest.raises(InputError):  # a refused call, then the program still works
        program(x, z, torch.randn(5, dtype=torch.float64))
    out = program(x, z, y)
    assert out[1] is x


@pytest.mark.parametrize("mark, says", [(7, "not the index"), (-1, "not the index"), (True, "not the index"),
                                        ("0", "not the index"), (2, "shape differ"), (1, "shape, complex differ")])
def test_a_signature_whose_returned_input_is_not_that_outputs_kind_is_refused_at_load(returns_inputs_pt2, tmp_path,
                                                                                    mark, says):
    def edit(signature):
        signature["outputs"][1]["returns_input"] = mark

    edited = with_edited_signature(returns_inputs_pt2, tmp_path / "edited.pt2", edit)
    with pytest.raises(PackageError, match=f"output #1 .*{says}.*lower the model again"):
        aotcuda.load(edited)


class WritesAndReturns(torch.nn.Module):
    """Inputs written in place and returned: eager returns each caller's tensor, holding every write of the call."""

    def forward(self, x, y, z):
        x.add_(y)
        a = z.mul_(2)  # a is z: the next write shows in it too
        z.add_(1)
        y[1:].sub_(1)  # written through a view, returned as it is
        return x * 3, x, a, z, y


def _written_inputs():
    return torch.randn(3, 4), torch.randn(3, 4), torch.randn(5)


@pytest.fixture(scope="module")
def writes_and_returns_pt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("returned_writes") / "writes_and_returns.pt2"
    aotcuda.lower(WritesAndReturns(), _written_inputs(), device="cpu", package_path=path)
    return path


def _eager(inputs):
    """Eager's outputs and inputs after the call, on copies of ``inputs``."""
    copies = [t.clone() for t in inputs]
    return WritesAndReturns()(*copies), copies


def test_an_input_written_and_returned_is_the_callers_own_tensor_holding_every_write(writes_and_returns_pt2):
    """Review (2026-12-07): `x.add_(1); return x` came back as another tensor of eager's values, where eager returns
    x itself (and `a = z.mul_(2); z.add_(1); return a` returns z)."""
    program = aotcuda.load(writes_and_returns_pt2)
    assert [spec.get("returns_input") for spec in program.signature["outputs"]] == [None, 0, 2, 2, 1]
    for layout in ("contiguous", "transposed"):
        x, y, z = _written_inputs()
        if layout == "transposed":  # the checks lay it out as exported, a copy written back after the run
            x = x.t().contiguous().t()
        expected, after = _eager((x, y, z))
        out = program(x, y, z)
        assert out[1] is x and out[2] is z and out[3] is z and out[4] is y, layout  # eager's objects
        for got, want in zip((*out, x, y, z), (*expected, *after)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        out[1].add_(1)  # a write into the output is a write into x, as in eager
        assert torch.equal(x, out[1])


def test_a_callers_buffer_for_an_input_written_and_returned_gets_that_input_after_every_write(writes_and_returns_pt2):
    """Copied into as any other slot: the program's result there is the input after every write (`a` after
    `z.add_(1)`), as functionalization keeps an alias's value."""
    program = aotcuda.load(writes_and_returns_pt2)
    x, y, z = _written_inputs()
    expected, after = _eager((x, y, z))
    buffers = [torch.empty(3, 4), torch.empty(3, 4), torch.empty(5), torch.empty(5), torch.empty(3, 4)]
    got = program.execute([x, y, z], outputs=buffers)
    assert all(g is b for g, b in zip(got, buffers))
    for got, want in zip((*buffers, x, y, z), (*expected, *after)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class _RunsAgain:
    """A stand-in CUDA graph: each replay runs the program again on the inputs it was captured on."""

    def __init__(self, run, inputs):
        self.run, self.inputs = run, inputs

    def replay(self):
        self.run(self.inputs)


def test_a_bound_graphs_slot_for_a_returned_input_is_the_callers_tensor(writes_and_returns_pt2, monkeypatch):
    """Program.bind handed out the graph's own static output where forward returns an input (the review's open item,
    2026-12-07), where a call hands back the caller's tensor; it is the bound input tensor now, which each replay
    reads and writes in place. On the CPU: bind_graph told the device is CUDA, with a stand-in capture."""
    from aotcuda.runtime import bound, program as program_module

    real_bind_graph = bound.bind_graph
    monkeypatch.setattr(program_module, "bind_graph",
                        lambda run, device, *args: real_bind_graph(run, torch.device("cuda"), *args))
    monkeypatch.setattr(bound, "capture",
                        lambda run, device, inputs, then=None: (_RunsAgain(run, inputs), run(inputs)))
    x, y, z = _written_inputs()
    eager = [t.clone() for t in (x, y, z)]
    bound_graph = aotcuda.load(writes_and_returns_pt2).bind([x, y, z], warmup_calls=1)
    for replays in range(3):
        out = bound_graph.replay()
        assert out[1] is x and out[2] is z and out[3] is z and out[4] is y, replays
        assert bound_graph.outputs[1] is x
    for _ in range(5):  # one warm-up, the capture, three replays
        WritesAndReturns()(*eager)
    for got, want in zip((x, y, z), eager):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class ReturnsThroughWrites(torch.nn.Module):
    def forward(self, x, y, z, w):
        a = torch.add(x, 1, out=y)  # y itself
        return x.add_(1), a, z.view(-1).mul_(2), z.clone().add_(1), w, x.t()


class TransposesInPlace(torch.nn.Module):
    def forward(self, x):
        return x.t_()


def test_outputs_are_read_back_to_inputs_through_the_ops_that_write_and_return_them():
    """x.add_ and an out= tensor are the input; a view's write, a clone's and a view are not; nor an op that changes
    the input's metadata in place (t_), whose result no call could hand back as exported."""
    from aotcuda.lowering.returned_writes import returned_user_inputs

    ep = torch.export.export(ReturnsThroughWrites(), tuple(torch.randn(3, 3) for _ in range(4)))
    assert returned_user_inputs(ep) == {0: 0, 1: 1, 4: 3}
    assert returned_user_inputs(torch.export.export(TransposesInPlace(), (torch.randn(3, 3),))) == {}


class WritesInBlocks(torch.nn.Module):
    """The usual KV-cache write: in a no_grad block (export makes a higher-order op of it), returned after it or inside;
    and in an autocast block."""

    def forward(self, x, cache, other, kept):
        with torch.no_grad():
            cache.add_(x)
        with torch.autocast("cpu", enabled=False):
            written = other.mul_(2)
        with torch.no_grad():
            return x * 2, cache, written, kept.sub_(x), x.clone().add_(1)


def test_outputs_are_read_back_through_no_grad_and_autocast_blocks():
    """review (2026-12-07): an output that is ``getitem`` of a ``with torch.no_grad():`` (or autocast) block's
    higher-order op was not followed into the block: ``cache.add_(x)`` there, then ``return ..., cache``, came back as
    another tensor, where eager returns the caller's ``cache``. A new tensor written in a block stays unmarked."""
    from aotcuda.lowering.returned_writes import returned_user_inputs

    inputs = tuple(torch.randn(3, 3) for _ in range(4))
    ep = torch.export.export(WritesInBlocks(), tuple(t.clone() for t in inputs))
    eager_inputs = [t.clone() for t in inputs]
    eager = WritesInBlocks()(*eager_inputs)
    assert [place for place, out in enumerate(eager) if any(out is t for t in eager_inputs)] == [1, 2, 3]
    assert returned_user_inputs(ep) == {1: 1, 2: 2, 3: 3}


@pytest.mark.cuda
def test_returned_inputs_on_cuda_with_and_without_graphs(tmp_path):
    """On the GPU, also through CUDA graph replays, whose static buffers hold copies of the inputs."""
    cuda_inputs = lambda: tuple(t.cuda() for t in _inputs())  # noqa: E731
    path = tmp_path / "returns_inputs_cuda.pt2"
    aotcuda.lower(ReturnsItsInputs(), cuda_inputs(), device="cuda", package_path=path)
    for cuda_graphs in (False, True):
        with aotcuda.load(path, cuda_graphs=cuda_graphs) as program:
            # a capture reading the inputs in place would hold the caller's memory as its output: none is made
            assert program._graphs is None or program._graphs.in_place_sets == 0
            for call in range(6):  # 3 warm-ups, the capture, 2 replays
                x, z, y = cuda_inputs()
                if call % 2:
                    x = x.t().contiguous().t()
                expected = ReturnsItsInputs()(x, z, y)
                out = program(x, z, y)
                torch.testing.assert_close(out[0], expected[0], rtol=1e-5, atol=1e-5)
                assert out[1] is x and out[3] is x and out[2] is z, (cuda_graphs, call)
            x, z, y = cuda_inputs()  # and a bound graph: the bound input tensors themselves, as a call's
            bound_graph = program.bind([x, z, y])
            out = bound_graph.replay()
            assert out[1] is x and out[3] is x and out[2] is z, cuda_graphs
            torch.testing.assert_close(out[0], ReturnsItsInputs()(x, z, y)[0], rtol=1e-5, atol=1e-5)


class ReturnsItsInputsAsTheOtherKind(torch.nn.Module):
    """New user (2026-12-07): `return torch.view_as_complex(x)` lowered, and load refused the package as damaged
    (its signature said the output returns x as it is, though their complex kinds differ); since fixopen it loaded,
    but a call returned a copy wherever the checks laid x out as exported first (a write into the output missed x)."""

    def forward(self, x, z, w):
        return torch.view_as_complex(x), torch.view_as_real(z), w * 2


def _pairs_and_complex(layout: str):
    x, z, w = torch.randn(3, 4, 2), torch.randn(3, 4, dtype=torch.complex64), torch.randn(3)
    if layout == "strided":  # every-other row: eager's views take these strides; the checks copy them
        x, z = torch.randn(3, 8, 2)[:, ::2], torch.randn(3, 8, dtype=torch.complex64)[:, ::2]
    elif layout == "transposed":
        x, z = torch.randn(4, 3, 2).transpose(0, 1), torch.randn(4, 3, dtype=torch.complex64).t()
    return x, z, w


@pytest.fixture(scope="module")
def returns_views_pt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("returned_views") / "returns_views.pt2"
    aotcuda.lower(ReturnsItsInputsAsTheOtherKind(), _pairs_and_complex("contiguous"), device="cpu", package_path=path)
    return path


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
def test_view_as_complex_or_real_of_an_input_is_that_view_of_the_callers_tensor_as_in_eager(returns_views_pt2,
                                                                                           layout):
    program = aotcuda.load(returns_views_pt2)
    x, z, w = _pairs_and_complex(layout)
    expected = ReturnsItsInputsAsTheOtherKind()(x, z, w)
    out = program(x, z, w)
    for got, want in zip(out, expected):
        assert got.dtype == want.dtype and torch.equal(got, want)
    for got, want, given in zip(out[:2], expected[:2], (x, z)):  # views of the caller's tensors, as eager's
        assert got.data_ptr() == want.data_ptr() == given.data_ptr() and got.stride() == want.stride()
    out[0].mul_(2)  # a write into the output is a write into x (and z's into z), as in eager
    out[1].add_(1)
    assert torch.equal(torch.view_as_complex(x), out[0]) and torch.equal(torch.view_as_real(z), out[1])
    assert [spec.get("returns_view_of_input") for spec in program.signature["outputs"]] == [0, 1, None]
    assert all("returns_input" not in spec for spec in program.signature["outputs"])


def test_a_view_mark_on_an_output_that_is_not_that_inputs_other_kind_is_refused_at_load(returns_views_pt2, tmp_path):
    def edit(signature):
        signature["outputs"][0]["returns_view_of_input"] = 2  # w: float32 [3], not x's pair

    edited = with_edited_signature(returns_views_pt2, tmp_path / "edited.pt2", edit)
    with pytest.raises(PackageError, match="output #0 is input #2 seen as the other complex kind.*lower the model"):
        aotcuda.load(edited)
