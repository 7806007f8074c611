"""Matrix products of two dtypes, which eager refuses and torch.export traces (a new user's trial, 2026-12-05):
an nn.Linear lowered with int64 example inputs compiled, and the package failed at every call with
`RuntimeCallError: ... aoti_torch_cpu_addmm_out(...) API call failed at ....wrapper.cpp`."""

from __future__ import annotations

import pytest
import torch

import aotcuda
from aotcuda.lowering.pipeline import before_compile


class Projects(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x, y):
        return self.proj(x), y @ self.proj.weight.T  # PRODUCT LINE


@pytest.mark.parametrize("x, y, says", [
    (torch.randint(0, 3, (2, 8)), torch.randn(3, 8), "multiplies torch.int64 by torch.float32 in aten.addmm"),
    (torch.randn(2, 8, dtype=torch.float64), torch.randn(3, 8), "multiplies torch.float64 by torch.float32"),
    (torch.randn(2, 8), torch.randn(3, 8, dtype=torch.float64), "multiplies torch.float64 by torch.float32 in aten.mm"),
])
def test_a_product_of_two_dtypes_is_refused_before_compiling_with_the_models_line(x, y, says):
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype") as caught:
        with pytest.raises(RuntimeError):  # eager refuses the same call
            Projects()(x, y)
        before_compile(Projects(), (x, y))
    said = str(caught.value)
    assert says in said and "test_operand_dtypes.py:" in said and "PRODUCT LINE" in said, said
    assert "Pass example inputs of the dtype the model computes in" in said, said


def test_a_model_of_another_dtype_is_told_its_own_dtype():
    """A new user's half-precision Linear given float32 example inputs was told `e.g. x.to(torch.float32) for a
    float32 model`: the example cast, for a float16 model, was the wrong way round."""
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype") as caught:
        before_compile(Projects().half(), (torch.randn(2, 8), torch.randn(3, 8, dtype=torch.float16)))
    said = str(caught.value)
    assert "(here torch.float16: proj.weight is torch.float16, so e.g. x.to(torch.float16);" in said, said
    assert "x.to(torch.float32)" not in said, said


def test_lower_writes_no_package_for_it(tmp_path):
    path = tmp_path / "p.pt2"
    with pytest.raises(RuntimeError, match="which eager refuses"):
        aotcuda.lower(Projects(), (torch.randint(0, 3, (2, 8)), torch.randn(3, 8)), device="cpu",
                      package_path=str(path))
    assert not path.exists()


def test_products_of_one_dtype_pass():
    before_compile(Projects(), (torch.randn(2, 8), torch.randn(3, 8)))
    wide = torch.float64
    before_compile(Projects().double(), (torch.randn(2, 8, dtype=wide), torch.randn(3, 8, dtype=wide)))
