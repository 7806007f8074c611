"""Conversion rules against eager: casts between complex and real dtypes, real/imag, conjugation."""

import pytest
import torch

from .helpers import check, pair, run_rule

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("source,target", [(torch.float32, torch.complex128), (torch.float64, torch.complex64)])
def test_casts_between_complex64_and_complex128(source, target):
    new = check(lambda a: a.to(target) * 1j, pair(3, 4, dtype=source), dtype=torch.float32,
                expect_ops=[aten._to_copy.default])
    expected = {torch.complex64: torch.float32, torch.complex128: torch.float64}[target]
    assert new.graph.output_node().args[0][0].meta["val"].dtype == expected


@pytest.mark.parametrize("real_dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_real_to_complex_has_zero_imaginary_part(real_dtype):
    check(lambda a, r: (r.to(torch.complex64) * a, r.to(torch.complex64)), pair(3, 4), torch.randn(3, 4).to(real_dtype),
          dtype=torch.float32 if real_dtype != torch.bfloat16 else torch.bfloat16)


@pytest.mark.parametrize("target", [torch.float32, torch.float64, torch.bfloat16])
def test_complex_to_real_keeps_the_real_part(target):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager warns that the imaginary part is discarded, then does so
        check(lambda a: (a * 1j).to(target), pair(3, 4), dtype=target if target == torch.bfloat16 else torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_real_and_imag(dtype):
    check(lambda a: (a.real * 2, a.imag - 1, (a * 1j).real), pair(3, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_conj_resolve_conj_and_conj_physical(dtype):
    def fn(a):
        return a.conj().resolve_conj() * 2, torch.conj_physical(a), a.conj() * a

    check(fn, pair(3, 4, dtype=dtype), expect_ops=[aten._conj.default, aten._conj_physical.default])


def test_type_as_bfloat16_output_after_complex_math():
    check(lambda a, x: torch.view_as_real(a * 1j).flatten(-2).type_as(x), pair(3, 4), torch.randn(3, 8).bfloat16(),
          dtype=torch.bfloat16)


@pytest.mark.parametrize("op,args", [(aten.real.default, ()), (aten.imag.default, ()),
                                     (aten.conj_physical.default, ()), (aten.resolve_conj.default, ())])
def test_conversion_rule_on_its_own(op, args):
    run_rule(op, (3, 4), *args)


def test_convert_element_type_rule():
    from aotcuda.passes.complex_to_real.pair import Pair
    from aotcuda.passes.complex_to_real.registry import rule_for

    z = torch.randn(3, 4, dtype=torch.complex64)
    out = torch.empty(3, 4, dtype=torch.complex128)
    got = rule_for(torch.ops.prims.convert_element_type.default).fn(out, Pair(torch.view_as_real(z)), torch.complex128)
    torch.testing.assert_close(got.t, torch.view_as_real(z.to(torch.complex128)))
