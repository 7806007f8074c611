"""allclose and item (_local_scalar_dense) of complex values: ops whose result is a Python scalar.

torch.export refuses both on complex tensors before the pass could see them (allclose's bool steers Python;
a complex item has no symbolic form), so their rules are checked here by calling them on eager pairs, against
eager's own allclose and item in complex64 and complex128, special values included.
"""

import math

import pytest
import torch

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import rule_for

from .helpers import ComplexFn, export, pair

aten = torch.ops.aten
nan, inf = math.nan, math.inf


def as_pair(z: torch.Tensor) -> Pair:
    return Pair(torch.view_as_real(z))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_allclose_as_eager(dtype):
    rule = rule_for(aten.allclose.default).fn
    a = torch.randn(4, 5, dtype=dtype)
    eps = 1e-6 if dtype == torch.complex64 else 1e-12
    cases = [
        (a, a.clone(), {}),
        (a, a + 1e-3, {}),
        (a, a * (1 + eps), {}),
        (a, a + 1e-3j, dict(atol=1e-2)),
        (a, a * (1 + 1e-3), dict(rtol=1e-2)),
        (a, a + 0.5j * a.abs(), dict(rtol=0.49)),
        (a, a + 0.5j * a.abs(), dict(rtol=0.51)),
    ]
    special = torch.tensor([complex(nan, 0), complex(1, nan), complex(inf, 1), complex(-inf, inf), 2 + 1j], dtype=dtype)
    cases += [(special, special.clone(), dict(equal_nan=flag)) for flag in (False, True)]
    cases += [(special[2:], special[2:].clone(), {}), (special[2:3], torch.tensor([complex(inf, 2)], dtype=dtype), {})]
    seen = set()
    for x, y, kwargs in cases:
        expected = torch.allclose(x, y, **kwargs)
        seen.add(expected)
        got = rule(None, as_pair(x), as_pair(y), **kwargs)
        assert got == expected, (x, y, kwargs)
    assert seen == {True, False}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_item_as_eager(dtype):
    rule = rule_for(aten._local_scalar_dense.default).fn
    for value in (torch.randn((), dtype=dtype), torch.randn(1, 1, dtype=dtype), torch.tensor(complex(inf, nan), dtype=dtype)):
        got, expected = rule(None, as_pair(value)), value.item()
        assert isinstance(got, complex)
        assert (got == expected) or (math.isnan(expected.imag) and got.real == expected.real and math.isnan(got.imag))


@pytest.mark.parametrize("fn", [lambda a, b: torch.tensor(torch.allclose(a, b)), lambda a, b: a * a.sum().item()],
                         ids=["allclose", "item"])
def test_export_refuses_them_on_complex_values(fn):
    with pytest.raises(Exception):
        export(ComplexFn(fn, 2), (pair(3), pair(3)))
