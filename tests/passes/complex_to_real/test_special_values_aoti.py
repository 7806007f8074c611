"""Special values through lower() + load(): the compiled kernels keep what the rules compute.

One AOTInductor compile (~40 s) of a program holding the cases issue 12 found wrong end to end (a
where(z.to(bool), …) mask that ignored the imaginary part, division by a huge divisor, exp/sqrt/log
and reciprocal at their edges) and the special-value tables of the whole kind: division on every pair of
the binary table (special_values.complex_table, 194,481 pairs), reciprocal, exp, sqrt, log, abs, angle and
sgn on every value of the unary one (2,025). Its `cuda` twin compiles the same program for CUDA, where
Triton contracts products and sums into FMAs.

The reference (special_values.py): eager (its scalar CPU kernel; on CUDA its CUDA kernels) where eager
is right, and the true value (complex128, rounded once) on finite operands where eager is not: eager's
Smith's division gives inf for (3e38+3e38i)/(6e19−6e19i), whose value is (0, 5e18). Division with an
infinite or nan operand may also give C99 Annex G's quotient instead of eager's.

On CUDA, each output value may instead match that reference on the input with its float32 subnormal
parts flushed to zero (sign kept; special_values.flush_subnormals), per value: Inductor's CUDA kernels
link libdevice with flush-to-zero (pytorch/pytorch#185878, #188546), eager's CUDA kernels do not. The
rules scale tiny operands so that, where only libdevice flushes (Triton's case), they compute the
unflushed reading (test_flush_to_zero.py simulates that on the CPU); the flushed reading stays accepted
for a kernel that flushes more (there the scaling flushes too), but never a mix of the two or a nan.
"""

import pytest
import torch

import aotcuda

from .special_values import (annex_g_quotient, complex_table, describe, finite_rows, flush_subnormals, mismatches,
                             on_scalar_kernel, pairs_of_tables, prefer_true_value, true_value)

pytestmark = pytest.mark.slow  # one AOTInductor compile

INF = float("inf")
Z = [0, 1j, 1, 1 + 1j, complex(0, -0.0), complex(INF, 0), 3e38 + 3e38j, 1 + 1e-4j, -4 - 1e-30j, complex("nan")]
W = [1 + 1j, 3e19 + 3e19j, 2e19 + 0j, 0j, complex(0, INF), 1e-30 + 1e-30j, 6e19 - 6e19j, 1, 1j, -2 + 0j]


class SpecialValues(torch.nn.Module):
    """Masks from complex truth on (x, y), x / y, and the complex functions of u; real pairs in and out."""

    def forward(self, x, y, u):
        z, w, v = torch.view_as_complex(x), torch.view_as_complex(y), torch.view_as_complex(u)
        as_pairs = torch.view_as_real
        return (torch.where(z.to(torch.bool), 1.0, 0.0), (z != 0).float(), torch.logical_not(w).float(),
                as_pairs(z / w), as_pairs(torch.reciprocal(v)), as_pairs(torch.exp(v)), as_pairs(torch.sqrt(v)),
                as_pairs(torch.log(v)), v.abs(), v.angle(), as_pairs(torch.sgn(v)))


# Each output's true value, from the complex operands (None: eager is the reference, see reference()).
TRUE = [None, None, None, lambda z, w, v: z / w, lambda z, w, v: 1 / v, lambda z, w, v: v.exp(),
        lambda z, w, v: v.sqrt(), lambda z, w, v: v.log(), lambda z, w, v: v.abs(), lambda z, w, v: v.angle(),
        None]  # sgn is decomposed into v / |v| (test_special_values.BY_PARTS): eager's definition
QUOTIENTS = {3: lambda z, w, v: (z, w), 4: lambda z, w, v: (torch.ones_like(v), v)}  # output → Annex G's operands
OPERANDS = [(0,), (0,), (1,), (0, 1), (2,), (2,), (2,), (2,), (2,), (2,), (2,)]  # which inputs each output reads


def special_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x, y): the issue's pairs, then every pair of the binary table; u: the unary table, then Z."""
    table = complex_table(torch.float32, rich=False)
    x, y = pairs_of_tables(table, table)
    issue = [torch.view_as_real(torch.tensor(v, dtype=torch.complex64)) for v in (Z, W)]
    u = torch.cat([torch.view_as_real(torch.tensor(Z, dtype=torch.complex64)), complex_table(torch.float32)])
    return torch.cat([issue[0], x]), torch.cat([issue[1], y]), u


def sgn_by_parts(v: torch.Tensor) -> torch.Tensor:
    return torch.where(v == 0, 0, torch.complex(v.real / v.abs(), v.imag / v.abs()))


def references(inputs, eager_outputs):
    """Per output: (the reference, a second accepted reference or None), as the module docstring says."""
    complex_inputs = [torch.view_as_complex(t.cpu()) for t in inputs]
    found = []
    for i, eager in enumerate(eager_outputs):
        eager = eager.cpu()
        operands = [complex_inputs[k] for k in OPERANDS[i]]
        if i == 10:
            eager = torch.view_as_real(sgn_by_parts(on_scalar_kernel(complex_inputs[2])))
        elif TRUE[i] is not None:
            true = true_value(lambda *wide: TRUE[i](*[wide[OPERANDS[i].index(k)] if k in OPERANDS[i] else None
                                                       for k in range(3)]), operands)
            eager = prefer_true_value(eager, true, finite_rows(operands), complex_result=eager.ndim == 2)
        also = None
        if i in QUOTIENTS:
            numerator, denominator = QUOTIENTS[i](*complex_inputs)
            also = annex_g_quotient(torch.view_as_real(numerator), torch.view_as_real(denominator))
        found.append((eager, also))
    return found


def assert_matches(inputs, outputs, eager_outputs, flushed=None) -> None:
    """Each output value matches one of its references (`flushed`: (inputs with float32 subnormals
    flushed, eager's outputs on them), whose references are accepted too, value by value)."""
    cpu_inputs = [t.cpu() for t in inputs]
    accepted = [[ref for ref in refs if ref is not None] for refs in references(inputs, eager_outputs)]
    if flushed is not None:
        for refs, more in zip(accepted, references(*flushed)):
            refs += [ref for ref in more if ref is not None]
    problems = []
    for i, (got, refs) in enumerate(zip(outputs, accepted)):
        got, expected = got.cpu(), refs[0]
        bad = mismatches(got, expected, complex_result=got.ndim == 2)
        for also in refs[1:]:
            bad &= mismatches(got, also, complex_result=got.ndim == 2)
        if bad.any():
            problems.append(f"output {i}: " + describe([cpu_inputs[k] for k in OPERANDS[i]], got, expected, bad))
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    inputs = special_inputs()
    path = tmp_path_factory.mktemp("special") / "special_values.pt2"
    program = aotcuda.lower(SpecialValues(), inputs, device="cpu", package_path=path).load()
    return inputs, program


def test_bool_mask_keeps_the_imaginary_part(lowered):
    (x, y, u), program = lowered
    mask, nonzero, _ = program(x, y, u)[:3]
    assert mask[:4].tolist() == [0, 1, 1, 1]  # 0+1j is True, as eager: it came out [0, 0, 1, 1]
    assert nonzero.tolist() == (torch.view_as_complex(x) != 0).float().tolist()


def test_division_near_the_float_range_is_finite_and_right(lowered):
    """(3e38+3e38i)/(6e19−6e19i) = (0, 5e18): eager's Smith's method gives inf (the intermediate
    x + y·ratio overflows float32); the package must give the value complex128 rounds to."""
    (x, y, u), program = lowered
    got = torch.view_as_complex(program(x, y, u)[3][6])
    exact = (torch.tensor(3e38 + 3e38j, dtype=torch.complex128) / (6e19 - 6e19j)).to(torch.complex64)
    assert torch.isfinite(got) and abs(got - exact) <= 1e-6 * abs(exact), (got, exact)


def test_every_output_matches_eager_or_the_true_value_on_special_values(lowered):
    inputs, program = lowered
    eager = SpecialValues()(*[torch.view_as_real(on_scalar_kernel(torch.view_as_complex(t))) for t in inputs])
    assert_matches(inputs, program(*inputs), eager)


@pytest.mark.cuda
def test_cuda_package_matches_eager_cuda_on_special_values(tmp_path):
    """The same program lowered for CUDA (Triton fuses products into sums: FMAs), against eager's CUDA
    kernels (c10::complex and thrust), or the true value where those are wrong; on the input, or on the
    input with its float32 subnormal parts flushed to zero (Inductor's CUDA kernels run libdevice with
    flush-to-zero: the module docstring), value by value."""
    inputs = tuple(t.cuda() for t in special_inputs())
    program = aotcuda.lower(SpecialValues(), inputs, device="cuda", package_path=tmp_path / "sv_cuda.pt2").load()
    outputs = program(*inputs)
    got = torch.view_as_complex(outputs[3][6].cpu())
    exact = (torch.tensor(3e38 + 3e38j, dtype=torch.complex128) / (6e19 - 6e19j)).to(torch.complex64)
    assert torch.isfinite(got) and abs(got - exact) <= 1e-6 * abs(exact), (got, exact)  # the issue's case
    flushed = tuple(flush_subnormals(t) for t in inputs)
    assert_matches(inputs, outputs, SpecialValues()(*inputs), flushed=(flushed, SpecialValues()(*flushed)))
