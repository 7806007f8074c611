"""Special values through lower() + load() on the CPU: the compiled kernels keep what the rules compute.

One AOTInductor compile (~40 s) of a program holding the cases issue 12 found wrong end to end (a
where(z.to(bool), …) mask that ignored the imaginary part, division by a huge divisor, exp/sqrt/log
and reciprocal at their edges); each output is compared with eager as test_special_values does.
"""

import pytest
import torch

import aotcuda

from .special_values import describe, mismatches, on_scalar_kernel

pytestmark = pytest.mark.slow  # one AOTInductor compile

INF = float("inf")
Z = [0, 1j, 1, 1 + 1j, complex(0, -0.0), complex(INF, 0), 3e38 + 3e38j, 1 + 1e-4j, -4 - 1e-30j, complex("nan")]
W = [1 + 1j, 3e19 + 3e19j, 2e19 + 0j, 0j, complex(0, INF), 1e-30 + 1e-30j, 6e19 - 6e19j, 1, 1j, -2 + 0j]


class SpecialValues(torch.nn.Module):
    """Masks from complex truth, and the complex functions at their edges; real pairs in and out."""

    def forward(self, x, y):
        z, w = torch.view_as_complex(x), torch.view_as_complex(y)
        as_pairs = torch.view_as_real
        return (torch.where(z.to(torch.bool), 1.0, 0.0), (z != 0).float(), torch.logical_not(w).float(),
                as_pairs(z / w), as_pairs(torch.reciprocal(z)), as_pairs(torch.exp(z)), as_pairs(torch.sqrt(z)),
                as_pairs(torch.log(z)), z.abs())


def special_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.view_as_real(torch.tensor(v, dtype=torch.complex64)) for v in (Z, W))


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    x, y = special_inputs()
    path = tmp_path_factory.mktemp("special") / "special_values.pt2"
    program = aotcuda.lower(SpecialValues(), (x, y), device="cpu", package_path=path).load()
    return x, y, program


def test_bool_mask_keeps_the_imaginary_part(lowered):
    x, y, program = lowered
    mask, nonzero, _ = program(x, y)[:3]
    assert mask[:4].tolist() == [0, 1, 1, 1]  # 0+1j is True, as eager: it came out [0, 0, 1, 1]
    assert nonzero.tolist() == (torch.view_as_complex(x) != 0).float().tolist()


def test_every_output_matches_eager_on_special_values(lowered):
    x, y, program = lowered
    expected = SpecialValues()(*[torch.view_as_real(on_scalar_kernel(torch.view_as_complex(t))) for t in (x, y)])
    for i, (got, eager) in enumerate(zip(program(x, y), expected)):
        bad = mismatches(got, eager, complex_result=got.ndim == 2)
        assert not bad.any(), f"output {i}: " + describe([x, y], got, eager, bad)


@pytest.mark.cuda
def test_cuda_package_matches_eager_cuda_on_special_values(tmp_path):
    """The same program lowered for CUDA, against eager's CUDA kernels (c10::complex and thrust)."""
    x, y = (t.cuda() for t in special_inputs())
    program = aotcuda.lower(SpecialValues(), (x, y), device="cuda", package_path=tmp_path / "sv_cuda.pt2").load()
    expected = SpecialValues()(x, y)
    for i, (got, eager) in enumerate(zip(program(x, y), expected)):
        got, eager = got.cpu(), eager.cpu()
        bad = mismatches(got, eager, complex_result=got.ndim == 2)
        assert not bad.any(), f"output {i}: " + describe([x.cpu(), y.cpu()], got, eager, bad)
