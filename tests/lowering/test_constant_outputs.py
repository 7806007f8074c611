"""A forward returning a constant float: a clear refusal before the compile, not Inductor's raw AssertionError.

Python-number outputs compile and come back as numbers (tests/runtime/test_scalar_outputs.py), but a constant float
(``return {"y": x * 2, "f": 2.5}``) ended lower() in ``InductorError: AssertionError: [TensorBox(StorageBox(...`` (a
screen of the graph's buffers, after export and decompositions).
"""

import pytest
import torch

import aotcuda


class ReturnsAFloat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)  # a buffer written in place: its output comes before the user's in the graph
        return {"y": x * 2, "n": x.shape[0], "f": 2.5, "none": None}


def test_a_constant_float_output_is_refused_before_the_compile_by_name(tmp_path):
    path = tmp_path / "f.pt2"
    with pytest.raises(ValueError, match=r"forward returns the constant float 2.5 at out\['f'\]: AOTInductor cannot "
                                         r"compile a constant float output .* as a tensor \(torch.tensor\(2.5\)\)"):
        aotcuda.lower(ReturnsAFloat(), (torch.randn(3, 2),), device="cpu", package_path=path)
    assert not path.exists()
