"""Inputs that forward returns as they are come back as the caller's own tensors (aotcuda.runtime.returned_inputs).

Sixth new user (2026-12-07): `return ..., x` came back as another tensor over x's storage, or, for a non-contiguous x
(laid out as exported first), as a contiguous copy, so that a write into that output missed x, where eager returns x
itself.
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


@pytest.mark.cuda
def test_returned_inputs_on_cuda_with_and_without_graphs(tmp_path):
    """On the GPU, also through CUDA graph replays, whose static buffers hold copies of the inputs."""
    cuda_inputs = lambda: tuple(t.cuda() for t in _inputs())  # noqa: E731
    path = tmp_path / "returns_inputs_cuda.pt2"
    aotcuda.lower(ReturnsItsInputs(), cuda_inputs(), device="cuda", package_path=path)
    for cuda_graphs in (False, True):
        with aotcuda.load(path, cuda_graphs=cuda_graphs) as program:
            for call in range(6):  # 3 warm-ups, the capture, 2 replays
                x, z, y = cuda_inputs()
                if call % 2:
                    x = x.t().contiguous().t()
                expected = ReturnsItsInputs()(x, z, y)
                out = program(x, z, y)
                torch.testing.assert_close(out[0], expected[0], rtol=1e-5, atol=1e-5)
                assert out[1] is x and out[3] is x and out[2] is z, (cuda_graphs, call)
