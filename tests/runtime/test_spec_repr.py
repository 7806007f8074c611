"""How a Program's input/output specs read (``program.input_specs``, error messages): a static dim is its
size, a dynamic one its user-given Dim name with its range; never the dataclass defaults min=0/max=None."""

import pytest
import torch

from aotcuda.runtime.checks import DimSpec, TensorSpec

NAMES = {"s27": "seq", "s3": "batch"}


@pytest.mark.parametrize("dim, shown, low, high", [
    (4, "4", 4, 4),
    (1, "1", 1, 1),
    ({"expr": "s27", "min": 2, "max": 512}, "seq in [2, 512]", 2, 512),
    ({"expr": "s27", "min": 2, "max": None}, "seq in [2, inf]", 2, None),
    ({"expr": "2*s3", "min": 4, "max": 128}, "2*batch in [4, 128]", 4, 128),
    ({"expr": "s99", "min": 0, "max": 8}, "s99 in [0, 8]", 0, 8),  # a symbol the user did not name
])
def test_a_dim_reads_as_its_size_or_its_named_range(dim, shown, low, high):
    spec = DimSpec.from_json(dim, NAMES)
    assert str(spec) == shown and repr(spec) == f"DimSpec({shown})"
    assert (spec.min, spec.max) == (low, high)


def test_a_tensor_spec_reads_as_its_shape():
    spec = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu", "contiguous": True,
                                 "shape": [2, {"expr": "s27", "min": 2, "max": 512}, 256],
                                 "strides": [{"expr": "256*s27", "min": 512, "max": 131072}, 256, 1],
                                 "mutated": False}, NAMES)
    assert repr(spec) == ("TensorSpec('x', torch.float32, 'cpu', shape=(2, seq in [2, 512], 256), "
                          "strides=(256*seq in [512, 131072], 256, 1), contiguous=True, mutated=False)")
    assert "min=" not in repr(spec) and "None" not in repr(spec)
    assert spec.dtype is torch.float32


def test_a_one_dim_spec_reads_as_a_one_tuple():
    spec = TensorSpec.from_json({"name": "angle", "dtype": "float32", "device": "cpu", "shape": [64], "strides": [1]})
    assert repr(spec) == "TensorSpec('angle', torch.float32, 'cpu', shape=(64,), strides=(1,), contiguous=True, mutated=None)"
