"""One CPU lowering, per test session, of the demo block with a dynamic batch dim, for the serving tests."""

from __future__ import annotations

import warnings

import pytest
import torch

import aotcuda
from aotcuda.models import attention_block
from serving_cases import BATCH_MAX, SEQ


def pytest_collection_modifyitems(config, items):
    """Ray Serve is an optional dependency (aotcuda[serve], part of the test extras): where it is missing,
    its tests skip and say why."""
    try:
        import ray.serve  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as error:
        skip = pytest.mark.skip(reason=f"needs aotcuda[serve] ({error}); pip install -e '.[test]'")
        for item in items:
            if "tests/serving/" in str(item.fspath) and "test_batching" not in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def served_block(tmp_path_factory):
    """(package path, eager model): x [batch ∈ 1..16, 16, 256] float32 → [batch, 16, 256]."""
    torch.manual_seed(0)
    model, (x,) = attention_block(device="cpu", dtype=torch.float32, batch=2, seq=SEQ)
    path = tmp_path_factory.mktemp("serving") / "block.pt2"
    batch = torch.export.Dim("batch", min=1, max=BATCH_MAX)
    aotcuda.lower(model, (x,), device="cpu", package_path=str(path), dynamic_shapes={"x": {0: batch}})
    return str(path), model


@pytest.fixture(scope="session")
def mask_packages(tmp_path_factory):
    """{None: the lengths-to-mask program with an unbounded width, 512: the same bounded by torch._check,
    "intermediate": a program whose output is (1,) but which allocates a tensor as long as an input's value}."""
    from serving_cases import LastOfARange, LengthsToMask

    folder = tmp_path_factory.mktemp("masks")
    batch = torch.export.Dim("b", min=1, max=64)
    paths = {}
    for bound in (None, 512):
        paths[bound] = str(folder / f"mask_{bound}.pt2")
        aotcuda.lower(LengthsToMask(bound), (torch.tensor([3, 5]),), device="cpu", package_path=paths[bound],
                      dynamic_shapes=({0: batch},))
    paths["intermediate"] = str(folder / "intermediate.pt2")
    aotcuda.lower(LastOfARange(), (torch.tensor([3, 5]),), device="cpu", package_path=paths["intermediate"],
                  dynamic_shapes=({0: batch},))
    return paths


@pytest.fixture(scope="session")
def index_packages(tmp_path_factory):
    """Programs whose integer inputs reach an index: {"rows": x[ids] over the batch dim (ids' range mentions the
    batch symbol), "embed": an embedding over a fixed table and a gather along t (ranges without it), "unchecked":
    positions from mask.cumsum(-1) - 1 (mask's values reach an embedding unchecked), "clamped": those positions
    clamped into the table}, lowered for the CPU."""
    from serving_cases import ClampedPositionsFromAMask, EmbedAndGather, PositionsFromAMask, RowsOfTheBatch

    folder = tmp_path_factory.mktemp("indices")
    batch, t = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("t", min=1, max=32)
    ids = torch.zeros(2, 3, dtype=torch.long)
    cases = {"rows": (RowsOfTheBatch(), (torch.randn(3, 4), torch.zeros(3, dtype=torch.long)), ({0: batch}, {0: batch})),
             "embed": (EmbedAndGather(), (ids, ids.clone(), torch.randn(2, 3)), ({0: batch, 1: t},) * 3),
             "unchecked": (PositionsFromAMask(), (ids, torch.ones(2, 3, dtype=torch.long)), ({0: batch, 1: t},) * 2),
             "clamped": (ClampedPositionsFromAMask(), (ids, torch.ones(2, 3, dtype=torch.long)), ({0: batch, 1: t},) * 2)}
    paths = {}
    for name, (model, inputs, dynamic) in cases.items():
        paths[name] = str(folder / f"{name}.pt2")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "unchecked": lower() warns that mask's values are not checked
            aotcuda.lower(model, inputs, device="cpu", package_path=paths[name], dynamic_shapes=dynamic)
    return paths


@pytest.fixture(scope="session")
def shape_packages(tmp_path_factory):
    """Programs whose outputs' sizes follow an input's size with no max: {"outer": x [b, n] -> [b, n, n], "sum":
    x [b, n] -> [n] with b from 0, "gram": x [n, 8] -> [n, n] scores -> [n, 8], n at most 2**20}."""
    from serving_cases import GramAttention, OuterProduct, SumOfRows

    folder = tmp_path_factory.mktemp("shapes")
    n = torch.export.Dim("n")
    paths = {"outer": str(folder / "outer.pt2"), "sum": str(folder / "sum.pt2"), "gram": str(folder / "gram.pt2")}
    aotcuda.lower(OuterProduct(), (torch.randn(2, 8),), device="cpu", package_path=paths["outer"],
                  dynamic_shapes={"x": {0: torch.export.Dim("b", max=64), 1: n}})
    aotcuda.lower(SumOfRows(), (torch.randn(3, 8),), device="cpu", package_path=paths["sum"],
                  dynamic_shapes={"x": {0: torch.export.Dim("b", min=0, max=64), 1: n}})
    aotcuda.lower(GramAttention(), (torch.randn(4, 8),), device="cpu", package_path=paths["gram"],
                  dynamic_shapes={"x": {0: torch.export.Dim("n", max=1 << 20)}})
    return paths


@pytest.fixture(scope="session")
def runaway_package(tmp_path_factory):
    """(x [4] float32, n () int64) -> x after n halvings (serving_cases.RepeatedHalving), lowered for the CPU."""
    from serving_cases import RepeatedHalving

    path = str(tmp_path_factory.mktemp("runaway") / "halving.pt2")
    aotcuda.lower(RepeatedHalving(), (torch.randn(4), torch.tensor(3)), device="cpu", package_path=path)
    return path


class FixedScale(torch.nn.Module):
    def forward(self, x, scale: float = 1.0):
        return x * scale


@pytest.fixture(scope="session")
def fixed_scale_package(tmp_path_factory):
    """forward(x, scale=1.0) lowered with scale=0.5, x [batch ∈ 1..8, 4] float32, for the CPU."""
    path = str(tmp_path_factory.mktemp("fixed_scale") / "fixed.pt2")
    aotcuda.lower(FixedScale(), (torch.randn(2, 4),), {"scale": 0.5}, device="cpu", package_path=path,
                  dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=8)}, "scale": None})
    return path
