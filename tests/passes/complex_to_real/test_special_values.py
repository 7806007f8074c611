"""Every elementwise, comparison and conversion rule on tables of special values, against eager.

Each case is exported at the table's shape, rewritten strictly, and its ExportedProgram run (`.module()`)
on ±0, denormals, 1e±38 (1e±308), values near 1 and sqrt(max), ±inf and nan in every combination of
real and imaginary part (special_values.py says how the reference is taken and compared). A case names
the ops it exercises; `test_every_rule_has_a_special_value_case` keeps the list in step with the registry.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import RULES, rule_for

from .helpers import ComplexFn, rewrite
from .special_values import (REAL_OF, RTOL, complex_table, describe, finite_rows, mismatches, on_scalar_kernel,
                             annex_g_quotient, pairs_of_tables, prefer_true_value, real_values, true_value)

aten = torch.ops.aten
COMPLEX_DTYPES = [torch.complex64, torch.complex128]
FAMILIES = ("elementwise", "elementary", "comparison", "conversion")


@dataclasses.dataclass(frozen=True)
class Case:
    """fn(*operands); `operands` says each one's kind: "z" complex, "r" real; `ops` those it must export.

    `reference`, where given, replaces fn as the eager reference; `either_kernel` accepts eager's
    vectorized kernel as well as its scalar one (see EITHER_KERNEL and BY_PARTS for why).
    """

    name: str
    fn: Callable
    operands: str
    ops: tuple = ()
    finite: bool = False  # only finite inputs (a cast of inf/nan to an integer is undefined in C)
    reference: Callable | None = None
    either_kernel: bool = False


def C(name, fn, operands="z", *ops, finite=False):
    return Case(name, fn, operands, ops, finite, BY_PARTS.get(name), name in EITHER_KERNEL)


# Eager adds `alpha · b` with alpha a complex number (1 + 0i), multiplies a real operand as r + 0i and
# z · 1 as z · (1 + 0i): a part that is inf then gives inf · 0 = nan in the *other* part (eager's
# (0, 0) + (0, inf) is (nan, inf), on CPU and CUDA alike). The rules add and scale each part on its
# own, as C99 Annex G defines mixed real/complex arithmetic, which also costs fewer ops; these cases
# are compared with eager's real arithmetic on the parts, the definition both share.
def _complex(re, im):
    return torch.complex(re, im)


BY_PARTS = {
    "add": lambda z, w: _complex(z.real + w.real, z.imag + w.imag),
    "add_alpha": lambda z, w: _complex(z.real + 2 * w.real, z.imag + 2 * w.imag),
    "sub": lambda z, w: _complex(z.real - w.real, z.imag - w.imag),
    "rsub": lambda z, w: _complex(w.real - z.real, w.imag - z.imag),
    "add_real": lambda z, r: _complex(z.real + r, z.imag),
    "real_sub": lambda z, r: _complex(r - z.real, -z.imag),
    "mul_scalar_op": lambda z: _complex(z.real * 2.5, z.imag * 2.5),
    "div_scalar_op": lambda z: _complex(z.real / 3, z.imag / 3),
    "rsub_scalar_op": lambda z: _complex(2 - z.real, -z.imag),
    "mul_imaginary_unit": lambda z: _complex(-z.imag, z.real),
    # export decomposes sgn into z / |z| (abs, div, where): eager's sgn kernel gives (nan, inf) at
    # denormals (it multiplies by 1 / |z|); the decomposition, as the rules compute it, gives 1 + 1i at
    # 1e-45(1 + i) (|z| rounds to 1e-45) and 0 at 3e38(1 + i) (|z| overflows): torch's definition taken
    # part by part. The sgn rule itself (pair_math.sign) is held to the true value (RULE_ONLY).
    "sgn": lambda z: torch.where(z == 0, 0, _complex(z.real / z.abs(), z.imag / z.abs())),
}
# Products: eager's scalar kernel contracts a·c − b·d into an FMA, its vectorized one (and the rule) does
# not; a cancelled part (1e-4 · 3.7e19 − 3.7e19 · 1e-4) or an overflowing one (inf − inf against an FMA's
# −inf) then differs by more than an ulp of that part. Either kernel's answer is eager's.
EITHER_KERNEL = {"mul", "pow_2", "pow_3", "mul_complex_scalar"}


# Where eager itself is wrong on finite operands (an intermediate overflows or underflows: Smith's
# division gives inf for (3e38+3e38i)/(6e19−6e19i), whose value is (0, 5e18); sgn gives nan + inf·i at
# denormals and 0 at 3e38(1 + i)), the rule must give the true value instead: each case here is also
# computed in a wider type (special_values.true_value), and that value is the reference wherever eager's
# is not close to it. Written for torch and numpy alike (numpy's long double is complex128's wider type).
def _xp(z):
    return np if isinstance(z, np.ndarray) else torch


_NUMPY_NAME = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
               "atanh": "arctanh"}


def _in_mpmath(name: str, z):
    """log1p or expm1 at 60 digits (mpmath, which sympy brings with torch): 1 + z in any binary type rounds away
    the digits these functions keep (log1p(3.7e-155) is 3.7e-155; numpy's and glibc's log(1 + z) give 0)."""
    import mpmath

    values = z.reshape(-1).tolist() if isinstance(z, torch.Tensor) else [complex(v) for v in z.reshape(-1)]
    def value(v: complex) -> complex:  # mpmath has no signed zero: a −0 imaginary part by conjugation
        if not np.isfinite(v):
            return complex("nan")
        flip = math.copysign(1, v.imag) < 0
        out = complex(getattr(mpmath, name)(mpmath.mpc(v.real, -v.imag if flip else v.imag)))
        return out.conjugate() if flip else out

    with mpmath.workdps(60):
        out = [value(v) for v in values]
    result = np.array(out, dtype=np.complex128).reshape(z.shape)
    return torch.from_numpy(result) if isinstance(z, torch.Tensor) else result


def _in_numpy(function, z):
    """function on z in numpy (FreeBSD's msun functions, right where glibc's, which torch calls, lose the
    small part: acos(1 + 1e-45i) is 3.7e-23 − 3.7e-23i, glibc's real part 0, in complex128 too)."""
    if isinstance(z, np.ndarray):
        return function(z)
    return torch.from_numpy(function(z.numpy()))


TRUE_VALUE = {
    "div": lambda z, w: z / w,
    "real_div": lambda z, r: r / z,
    "reciprocal": lambda z: 1 / z,
    "pow_-1": lambda z: 1 / z,
    "div_complex_scalar": lambda z: z / (3 + 4j),
    "div_huge_complex_scalar": lambda z: z / complex(1e30, 1e30),
    "abs": abs,
    "angle": lambda z: _xp(z).angle(z),
    "exp": lambda z: _xp(z).exp(z),
    "log": lambda z: _xp(z).log(z),
    "sqrt": lambda z: _xp(z).sqrt(z),
    "pow_0.5": lambda z: _xp(z).sqrt(z),
    # the elementary functions: eager (glibc) loses digits where the true value is representable, e.g.
    # acos(1 + 5e-324i) = 2.2e-162 − 2.2e-162i, whose real part eager gives as 0
    **{name: (lambda name: lambda z: _in_numpy(getattr(np, _NUMPY_NAME.get(name, name)), z))(name)
       for name in ("sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
                    "log2", "log10")},
    "log1p": lambda z: _in_mpmath("log1p", z),
    "expm1": lambda z: _in_mpmath("expm1", z),
    "sigmoid": lambda z: 1 / (1 + _xp(z).exp(-z)),
    "exp2": lambda z: _xp(z).exp(z * math.log(2)),
    "rsqrt": lambda z: 1 / _xp(z).sqrt(z),
    "pow_tensor": lambda z, w: _xp(z).exp(w * _xp(z).log(z)),
    "pow_real_base": lambda z: _xp(z).exp(z * math.log(2.5)),
    "pow_imaginary_unit": lambda z: _xp(z).exp(1j * _xp(z).log(z)),
    "pow_complex_scalar": lambda z: _xp(z).exp((0.5 - 2j) * _xp(z).log(z)),
}
# The elementary functions where eager's result is not finite (a part inf or nan): glibc (eager's) gives nan
# where C99 Annex G, or the true value, is a number (log1p(1e-4 + i·inf) = inf + iπ/2, rsqrt(x + i·inf) = 0,
# sigmoid(−1e154 + i) = 0, expm1(1e154 + 0i) = inf + 0i), and an overflowing pow's infinities carry the signs
# of cos and sin of an angle beyond 1/eps, which no rounding determines ((3i)^(3.7e19 − 3.7e19i)). There the
# rule's result is accepted when it is not finite either, or when eager's has a nan part (each such row was
# read: the rules give Annex G's value). Every row where eager's result is finite is compared as any other.
NONFINITE_BY_CLASS = {"sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
                    "log1p", "expm1", "log2", "log10", "sigmoid", "rsqrt", "pow_tensor", "pow_real_base", "exp2",
                      "ldexp", "pow_imaginary_unit", "pow_complex_scalar"}
TRUE_SGN = lambda z: _xp(z).where(z == 0, 0 * z, z / abs(z))  # noqa: E731
# Division: C99 Annex G's _Cdivd, computed in the wider type, is accepted beside eager's (or the true)
# value: with an infinite or nan operand, where eager's Smith's method gives nan + nan·i for an infinity
# (infinite / finite) or a zero (finite / infinite), or nan·i where a part underflowed in its ratio
# ((0 + inf·i) / (1e-45 + 3i) is inf + inf·i). Each case's (numerator, denominator) as complex tensors.
ANNEX_G_QUOTIENT = {
    "div": lambda z, w: (z, w),
    "real_div": lambda z, r: (r.to(z.dtype), z),
    "reciprocal": lambda z: (torch.ones_like(z), z),
    "pow_-1": lambda z: (torch.ones_like(z), z),
    "pow_-2": lambda z: (torch.ones_like(z), z * z),  # the reciprocal of eager's z²
    "pow_-0.5": lambda z: (torch.ones_like(z), torch.sqrt(z)),
    "div_complex_scalar": lambda z: (z, torch.full_like(z, 3 + 4j)),
    "div_huge_complex_scalar": lambda z: (z, torch.full_like(z, complex(1e30, 1e30))),
}


CASES = [
    # arithmetic
    C("add", lambda z, w: z + w, "zz", aten.add.Tensor),
    C("add_alpha", lambda z, w: torch.add(z, w, alpha=2), "zz", aten.add.Tensor),
    C("sub", lambda z, w: z - w, "zz", aten.sub.Tensor),
    C("mul", lambda z, w: z * w, "zz", aten.mul.Tensor),
    C("div", lambda z, w: z / w, "zz", aten.div.Tensor),
    C("rsub", lambda z, w: torch.rsub(z, w), "zz", aten.sub.Tensor),
    C("add_real", lambda z, r: z + r, "zr", aten.add.Tensor),
    C("real_sub", lambda z, r: r - z, "zr", aten.sub.Tensor),
    C("real_div", lambda z, r: r / z, "zr", aten.div.Tensor),
    C("mul_scalar_op", lambda z: aten.mul.Scalar(z, 2.5), "z", aten.mul.Scalar),
    C("add_scalar_op", lambda z: aten.add.Scalar(z, -1.5), "z", aten.add.Scalar),
    C("sub_scalar_op", lambda z: aten.sub.Scalar(z, 1e-4), "z", aten.sub.Scalar),
    C("div_scalar_op", lambda z: aten.div.Scalar(z, 3.0), "z", aten.div.Scalar),
    C("rsub_scalar_op", lambda z: aten.rsub.Scalar(z, 2.0), "z", aten.sub.Tensor),
    C("mul_complex_scalar", lambda z: z * (0.5 - 2j), "z", aten.mul.Tensor),
    C("mul_imaginary_unit", lambda z: z * 1j, "z", aten.mul.Tensor),
    C("div_complex_scalar", lambda z: z / (3 + 4j), "z", aten.div.Tensor),
    C("div_huge_complex_scalar", lambda z: z / complex(1e30, 1e30), "z", aten.div.Tensor),
    C("div_by_python_zero", lambda z: z / 0, "z", aten.div.Tensor),
    C("div_by_complex_zero", lambda z: z / 0j, "z", aten.div.Tensor),
    C("neg", lambda z: -z, "z", aten.neg.default),
    C("reciprocal", torch.reciprocal, "z", aten.reciprocal.default),
    # complex functions
    C("abs", torch.abs, "z", aten.abs.default),
    C("angle", torch.angle, "z", aten.angle.default),
    C("sgn", torch.sgn, "z", aten.abs.default, aten.div.Tensor, aten.where.self),
    C("exp", torch.exp, "z", aten.exp.default),
    C("log", torch.log, "z", aten.log.default),
    C("sqrt", torch.sqrt, "z", aten.sqrt.default),
    *[C(f"pow_{p}", (lambda p: lambda z: z ** p)(p), "z", aten.pow.Tensor_Scalar)
      for p in (2, 3, 0.5, -0.5, -1, -2, 1.5, 0, 1)],
    # elementary functions (rules/elementary.py)
    *[C(name, getattr(torch, name), "z", getattr(aten, name).default)
      for name in ("sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
                   "log1p", "expm1", "log2", "log10", "sigmoid", "rsqrt")],
    # pow with a tensor exponent on finite operands below 1e9 only: on the others eager's two CPU kernels
    # disagree with each other (0^(1 + nan·i) is 0 on the scalar kernel, nan on the vectorized one), and past
    # |Im(w · log z)| = 1/eps the result's angle is the cos and sin of an argument where torch's vectorized
    # cos and glibc's differ (2.5^(2.7e154i)); the random-input tests cover the rest (test_opinfo.py)
    C("exp2", torch.exp2, "z", aten.exp2.default, finite=True),  # as pow below: an angle y·log 2 beyond 1/eps
    C("ldexp", torch.ldexp, "zr", aten.ldexp.Tensor, finite=True),  # a cast of inf to the exponent: undefined
    C("pow_tensor", torch.pow, "zz", aten.pow.Tensor_Tensor, finite=True),
    C("pow_real_base", lambda z: torch.pow(2.5, z), "z", aten.pow.Scalar, finite=True),
    # a complex scalar exponent (`z ** 1j`, a new user's program): exp(w · log z) as the tensor exponent's rule
    C("pow_imaginary_unit", lambda z: z ** 1j, "z", aten.pow.Tensor_Scalar, finite=True),
    C("pow_complex_scalar", lambda z: z ** (0.5 - 2j), "z", aten.pow.Tensor_Scalar, finite=True),
    # selection, copies, aliases
    C("where", lambda z, w: torch.where(z.real > w.imag, z, w), "zz", aten.where.self),
    C("where_scalar", lambda z: torch.where(z.imag > 0, z, 2.5), "z", aten.where.self),
    C("masked_fill", lambda z: z.masked_fill(z.real < 0, 1 - 1j), "z", aten.where.self),
    C("clone", lambda z: z.clone(), "z", aten.clone.default),
    C("alias", lambda z: aten.alias(z).detach(), "z", aten.alias.default),
    # conversion
    C("to_bool", lambda z: z.to(torch.bool), "z", aten._to_copy.default),
    C("to_float", lambda z: z.to(torch.float32), "z", aten._to_copy.default),
    C("to_double", lambda z: z.double(), "z", aten._to_copy.default),
    C("to_int", lambda z: z.to(torch.int32), "z", aten._to_copy.default, finite=True),
    C("to_complex", lambda z: z.to(torch.complex128) if z.dtype == torch.complex64 else z.to(torch.complex64), "z",
      aten._to_copy.default),
    C("type_as_bool", lambda z, r: z.type_as(r > 0), "zr", aten._to_copy.default),
    C("convert_element_type", lambda z: torch.ops.prims.convert_element_type(z, torch.bool), "z",
      torch.ops.prims.convert_element_type.default),
    C("copy_into_bool", lambda z, r: (r > 0).copy_(z), "zr", aten.copy.default),
    C("copy_into_real", lambda z, r: r.clone().copy_(z), "zr", aten.copy.default),
    C("slice_scatter_into_real", lambda z: torch.slice_scatter(torch.zeros(z.shape), z[1:], 0, 1), "z",
      aten.slice_scatter.default),
    C("where_on_bool_mask", lambda z, w: torch.where(z.bool(), w, 0), "zz", aten._to_copy.default),
    C("real_imag", lambda z: (z.real, z.imag), "z"),
    C("conj", lambda z: (z.conj().resolve_conj(), torch.conj_physical(z)), "z", aten._conj.default,
      aten._conj_physical.default),
    # comparison
    C("eq_zero", lambda z: z == 0, "z", aten.eq.Scalar),
    C("ne_zero", lambda z: z != 0, "z", aten.ne.Scalar),
    C("ne_complex_scalar", lambda z: z != 1j, "z", aten.ne.Scalar),
    C("eq", lambda z, w: z == w, "zz", aten.eq.Tensor),
    C("ne", lambda z, w: z != w, "zz", aten.ne.Tensor),
    C("eq_real", lambda z, r: z == r, "zr", aten.eq.Tensor),
    C("isnan", torch.isnan, "z", aten.isnan.default),
    C("isinf", torch.isinf, "z", aten.isinf.default),
    C("isfinite", torch.isfinite, "z"),
    C("logical_not", torch.logical_not, "z", aten.logical_not.default),
    C("logical_and", torch.logical_and, "zz", aten.logical_and.default),
    C("logical_or_real", lambda z, r: torch.logical_or(z, r), "zr", aten.logical_or.default),
    C("logical_xor", torch.logical_xor, "zz", aten.logical_xor.default),
    C("any_all", lambda z: (z.any(), z.all(), z.view(-1, 3).any(1), z.view(-1, 3).all(0, keepdim=True),
                            torch.count_nonzero(z)), "z", aten.any.default, aten.any.dim, aten.any.dims),
    C("nonzero", lambda z: (torch.nonzero(z), torch.nonzero_static(z, size=z.numel() + 1)), "z", aten.nonzero.default,
      aten.nonzero_static.default),
]

# Ops that export never leaves in a program (decompositions replace them), checked on their rule directly:
# op → (eager fn of (z, mask), the rule's arguments after `out`, given (pair, mask)).
RULE_ONLY = {
    aten.detach.default: (lambda z, m: z.detach(), lambda p, m: (p,)),
    aten.lift_fresh.default: (lambda z, m: z, lambda p, m: (p,)),
    aten.lift_fresh_copy.default: (lambda z, m: z.clone(), lambda p, m: (p,)),
    aten.resolve_conj.default: (lambda z, m: z.resolve_conj(), lambda p, m: (p,)),
    aten.resolve_neg.default: (lambda z, m: z.resolve_neg(), lambda p, m: (p,)),
    aten.conj_physical.default: (lambda z, m: torch.conj_physical(z), lambda p, m: (p,)),
    aten.real.default: (lambda z, m: z.real, lambda p, m: (p,)),
    aten._neg_view.default: (lambda z, m: torch._neg_view(z), lambda p, m: (p,)),
    aten.imag.default: (lambda z, m: z.imag, lambda p, m: (p,)),
    aten.sgn.default: (lambda z, m: BY_PARTS["sgn"](z), lambda p, m: (p,)),  # and the true value: TRUE_SGN
    aten.rsub.Tensor: (lambda z, m: BY_PARTS["rsub"](z, z.flip(0)), lambda p, m: (p, Pair(p.t.flip(0)))),
    aten.rsub.Scalar: (lambda z, m: BY_PARTS["rsub_scalar_op"](z), lambda p, m: (p, 2.0)),
    # torch's decomposition of select_scatter promotes a real destination to complex (docs/reliability.md)
    aten.select_scatter.default: (lambda z, m: torch.select_scatter(torch.zeros(z.shape, dtype=z.real.dtype), z[1], 0, 1),
                                  lambda p, m: (torch.zeros(p.shape, dtype=p.dtype), Pair(p.t[1]), 0, 1)),
    aten.where.ScalarSelf: (lambda z, m: aten.where.ScalarSelf(m, 1.5, z), lambda p, m: (m, 1.5, p)),
    aten.where.ScalarOther: (lambda z, m: aten.where.ScalarOther(m, z, -0.5), lambda p, m: (m, p, -0.5)),
    aten.masked_fill.Scalar: (lambda z, m: z.masked_fill(m, 2.0), lambda p, m: (p, m, 2.0)),
    aten.masked_fill.Tensor: (lambda z, m: z.masked_fill(m, torch.tensor(1j, dtype=z.dtype)),
                              lambda p, m: (p, m, Pair(torch.tensor([0.0, 1.0], dtype=p.dtype)))),
}
NOT_CHECKED_HERE = {
    aten.where.Scalar,  # both branches are Python scalars: complex only with complex scalars, no table
    aten._assert_tensor_metadata.default,  # dropped: it has no value
    # Python scalars, not tensors (export refuses both on complex values): test_scalar_results.py checks them on
    # nan, inf and finite values
    aten.allclose.default,
    aten._local_scalar_dense.default,
}


def group_of(case: Case) -> tuple[str, bool]:
    """Cases on the same inputs share one exported program (an export costs seconds, a case microseconds)."""
    return case.operands, case.finite


GROUPS = {}
for _case in CASES:
    GROUPS.setdefault(group_of(_case), []).append(_case)


def operands(group: tuple[str, bool], dtype: torch.dtype) -> list[torch.Tensor]:
    """A group's inputs: complex operands as pairs; every combination of table rows across operands."""
    kinds, finite = group
    real = REAL_OF[dtype]
    rich = len(kinds) == 1
    tables = [complex_table(real, rich) if kind == "z" else real_values(real, rich)[:, None] for kind in kinds]
    if finite:
        tables = [t[torch.isfinite(t).all(-1) & (t.abs() < 1e9).all(-1)] for t in tables]
    if len(tables) == 2:
        tables = list(pairs_of_tables(*tables))
    return [t if kind == "z" else t[:, 0] for t, kind in zip(tables, kinds)]


def eager(case: Case, inputs: list[torch.Tensor], scalar_kernel: bool = True):
    """The case's reference in eager (on its scalar kernel unless told): results back as pairs."""
    args = [torch.view_as_complex(t) if kind == "z" else t for t, kind in zip(inputs, case.operands)]
    if scalar_kernel:
        args = [on_scalar_kernel(a) for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex → real casts warn that they discard the imaginary part
        out = (case.reference or case.fn)(*args)
    return pytree.tree_map(lambda t: torch.view_as_real(t.resolve_conj()) if t.is_complex() else t, out)


def reference(case: Case, inputs: list[torch.Tensor], expected=None):
    """eager's result (or `expected`, another reference for the case), with the true value where eager is
    wrong on finite operands (TRUE_VALUE)."""
    expected = eager(case, inputs) if expected is None else expected
    if case.name not in TRUE_VALUE:
        return expected
    args = [torch.view_as_complex(t) if kind == "z" else t for t, kind in zip(inputs, case.operands)]
    return prefer_true_value(expected, true_value(TRUE_VALUE[case.name], args), finite_rows(args),
                             complex_result=expected.ndim == 2)


def also_accepted(case: Case, inputs: list[torch.Tensor]):
    """A second reference the case may match instead (element by element): eager's vectorized kernel for
    EITHER_KERNEL, Annex G's quotient for ANNEX_G_QUOTIENT, C99 Annex G's special values as numpy computes
    them (FreeBSD's msun) for NONFINITE_BY_CLASS; None for the others."""
    if case.either_kernel:
        return eager(case, inputs, scalar_kernel=False)
    if case.name in NONFINITE_BY_CLASS:
        return NONFINITE_BY_CLASS_MARK
    if case.name in ANNEX_G_QUOTIENT:
        args = [torch.view_as_complex(t) if kind == "z" else t for t, kind in zip(inputs, case.operands)]
        numerator, denominator = ANNEX_G_QUOTIENT[case.name](*args)
        return annex_g_quotient(torch.view_as_real(numerator), torch.view_as_real(denominator))
    return None


NONFINITE_BY_CLASS_MARK = object()


def _nonfinite_by_class(got: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """`got` where eager's `expected` is not finite and got is not finite either, or eager's has a nan part
    (see NONFINITE_BY_CLASS); `expected` elsewhere."""
    eager_nonfinite = ~torch.isfinite(expected).all(-1, keepdim=True)
    # at the overflow threshold one rounding decides between max and inf ((2.8e-309(1 + i))^(−1) = 1.797e308(1 − i))
    at_max = (torch.isinf(expected) & (got.abs() >= torch.finfo(got.dtype).max * (1 - RTOL[got.dtype])))
    at_max = at_max | torch.isfinite(expected) & torch.isclose(got, expected, rtol=1e-5, atol=0)
    accept = eager_nonfinite & (~torch.isfinite(got).all(-1, keepdim=True) | torch.isnan(expected).any(-1, keepdim=True)
                                | at_max.all(-1, keepdim=True))
    return torch.where(accept, got, expected)


def differences(inputs, got, expected, also=None) -> list[str]:
    """Where got differs from expected (and, element by element, from `also`, the other eager kernel's)."""
    if also is NONFINITE_BY_CLASS_MARK:
        also = [_nonfinite_by_class(g, e) for g, e in zip(pytree.tree_leaves(got), pytree.tree_leaves(expected))]
    also = pytree.tree_leaves(also) if also is not None else [None] * len(pytree.tree_leaves(expected))
    found = []
    for i, (g, e, e2) in enumerate(zip(pytree.tree_leaves(got), pytree.tree_leaves(expected), also)):
        if g.dtype != e.dtype or g.shape != e.shape:
            found.append(f"output {i}: {g.dtype} {tuple(g.shape)}, eager {e.dtype} {tuple(e.shape)}")
            continue
        complex_result = e.ndim == inputs[0].ndim and e.shape[-1:] == (2,) and e.is_floating_point() \
            and e.shape[:-1] == inputs[0].shape[:-1]
        bad = mismatches(g, e, complex_result=complex_result)
        if e2 is not None:
            bad &= mismatches(g, e2, complex_result=complex_result)
        if bad.any():
            per_element = bad.ndim and bad.shape[0] == inputs[0].shape[0]
            found.append(f"output {i}: " + (describe(inputs, g, e, bad) if per_element else f"{g}, eager {e}"))
    return found


def assert_matches_eager(inputs, got, expected) -> None:
    found = differences(inputs, got, expected)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES, ids=str)
@pytest.mark.parametrize("group", list(GROUPS), ids=lambda g: g[0] + ("_finite" if g[1] else ""))
def test_rules_on_special_values_match_eager(group, dtype):
    cases, inputs = GROUPS[group], operands(group, dtype)
    module = ComplexFn(lambda *args: [case.fn(*args) for case in cases], n_complex=group[0].count("z"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, new = rewrite(module, tuple(inputs), expect_ops={op for case in cases for op in case.ops})
        results = new.module()(*inputs)
    found = []
    for case, got in zip(cases, results):
        found += [f"{case.name}, {line}" for line in differences(inputs, got, reference(case, inputs),
                                                                 also_accepted(case, inputs))]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(RULE_ONLY), ids=str)
def test_rule_of_an_op_export_removes_matches_eager(op, dtype):
    pairs = complex_table(REAL_OF[dtype])
    mask = pairs[:, 0] > pairs[:, 1]
    eager_fn, rule_args = RULE_ONLY[op]
    expected = eager_fn(torch.view_as_complex(pairs), mask)
    got = rule_for(op).fn(expected, *rule_args(Pair(pairs), mask))
    got = got.t if isinstance(got, Pair) else got
    if expected.is_complex():
        expected = torch.view_as_real(expected.resolve_conj().resolve_neg())
    if op == aten.sgn.default:  # the rule scales z first: the true value where z / |z| is not
        z = torch.view_as_complex(pairs)
        expected = prefer_true_value(expected, true_value(TRUE_SGN, [z]), finite_rows([z]), complex_result=True)
    assert_matches_eager([pairs], got, expected)


def test_every_rule_has_a_special_value_case():
    rule_for(None)
    covered = {op for case in CASES for op in case.ops} | set(RULE_ONLY) | NOT_CHECKED_HERE
    missing = {op for op, rule in RULES.items() if rule.family in FAMILIES} - covered
    assert not missing, f"rules with no special-value case: {sorted(map(str, missing))}"


# ---- the cases issue 12 names, each through export → pass → .module(), against eager --------------------

INF = float("inf")
ISSUE_CASES = {
    "bool_mask": (lambda z: torch.where(z.to(torch.bool), 1.0, 0.0), [0, 1j, 1, 1 + 1j]),
    "ne_zero_mask": (lambda z: (z != 0).float(), [0, 1j, complex(0, -0.0), complex("nan")]),
    "exp_of_inf": (torch.exp, [complex(INF, 0), complex(-INF, 0), complex(INF, -0.0)]),
    "reciprocal_of_inf": (torch.reciprocal, [complex(INF, 0), complex(0, INF), 3e38 + 3e38j]),
    "sqrt_near_max": (torch.sqrt, [3e38 + 3e38j, -3e38 + 1j, complex(-4, -0.0)]),
    "log_near_one": (torch.log, [1 + 1e-4j, 1 - 1e-4j, 0.9999 + 0j]),
    "div_by_python_zero": (lambda z: z / 0, [1 + 1j, 0j, -1 + 0j]),
    "div_by_complex_zero": (lambda z: z / 0j, [1 + 1j, 0j, -1 + 0j]),
    "abs_angle_sgn_huge": (lambda z: (z.abs(), z.angle(), z.sgn()), [3e38 + 3e38j, 1e-45 + 1e-45j]),
}


@pytest.mark.parametrize("name", ISSUE_CASES)
def test_issue_12_case_matches_eager(name):
    fn, values = ISSUE_CASES[name]
    pairs = torch.view_as_real(torch.tensor(values, dtype=torch.complex64))
    module = ComplexFn(fn)
    _, new = rewrite(module, (pairs,))
    got = new.module()(pairs)
    # eager's sgn kernel overflows and underflows here (see BY_PARTS): the reference is its definition
    reference = (lambda z: (z.abs(), z.angle(), BY_PARTS["sgn"](z))) if name == "abs_angle_sgn_huge" else None
    case = Case(name, fn, "z", reference=reference)
    assert_matches_eager([pairs], got, eager(case, [pairs]))


def test_division_by_a_huge_complex64_divisor_is_not_nan_or_zero():
    a = torch.view_as_real(torch.tensor([1 + 1j, 3e19 + 3e19j, 1e-30 + 0j], dtype=torch.complex64))
    b = torch.view_as_real(torch.tensor([2e19 + 0j, 6e19 + 6e19j, 3e19 + 4e19j], dtype=torch.complex64))
    _, new = rewrite(ComplexFn(lambda x, y: x / y, n_complex=2), (a, b))
    got = torch.view_as_complex(new.module()(a, b))
    torch.testing.assert_close(got[1], torch.tensor(0.5 + 0j), rtol=1e-6, atol=0)  # squared |b|: nan
    expected = torch.view_as_complex(a.double()) / torch.view_as_complex(b.double())  # exact in complex128
    torch.testing.assert_close(got, expected.to(torch.complex64), rtol=1e-6, atol=0)


# ---- complex32: float16 pairs, math in float32 (half.py) ----------------------------------------------------

COMPLEX32_CASES = ["to_bool", "ne_zero", "eq_zero", "isnan", "isinf", "abs", "neg", "clone",
                   "reciprocal", "exp", "log", "sqrt", "angle", "pow_2", "pow_0.5", "div_by_python_zero",
                   "mul_complex_scalar", "any_all", "real_imag"]


def in_complex64_rounded(fn):
    """fn on complex32 values as eager computes complex32 (on CUDA; its CPU lacks most such kernels):
    in complex64, each result rounded to complex32 (a float16 result to float16)."""
    down = {torch.complex64: torch.complex32, torch.float32: torch.float16}

    def reference(z):
        out = fn(z.to(torch.complex64))
        return pytree.tree_map(lambda t: t.to(down.get(t.dtype, t.dtype)), out)

    return reference


def test_complex32_rules_on_special_values_match_eager():
    cases = [next(c for c in CASES if c.name == name) for name in COMPLEX32_CASES]
    pairs = complex_table(torch.float16)
    module = ComplexFn(lambda z: [case.fn(z) for case in cases])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, new = rewrite(module, (pairs,))
        results = new.module()(pairs)
    found = []
    for case, got in zip(cases, results):
        reference = dataclasses.replace(case, reference=in_complex64_rounded(case.reference or case.fn))
        also = also_accepted(case, [pairs]) if case.name in ANNEX_G_QUOTIENT else None  # Annex G: see there
        found += [f"{case.name}, {line}" for line in differences([pairs], got, eager(reference, [pairs]), also)]
    assert not found, "\n".join(found)


# ---- division over the whole float range, against the true value --------------------------------------------


def test_division_where_smiths_method_overflows_is_the_true_value():
    """(3e38+3e38i)/(6e19−6e19i) = (0, 5e18): eager's Smith's method (CPU and CUDA) gives inf, its
    x + y·ratio overflowing float32; the CUDA package gave (1.90e19, 7.88e18). complex128 alike at 1e308."""
    for dtype, a, b in [(torch.complex64, 3e38 + 3e38j, 6e19 - 6e19j), (torch.complex128, 1e308 + 1e308j, 6e153 - 6e153j)]:
        x, y = (torch.view_as_real(torch.tensor([v], dtype=dtype)) for v in (a, b))
        _, new = rewrite(ComplexFn(lambda z, w: z / w, n_complex=2), (x, y))
        got = new.module()(x, y)
        true = true_value(lambda z, w: z / w, [torch.view_as_complex(x), torch.view_as_complex(y)])
        assert torch.isfinite(got).all() and not mismatches(got, true, complex_result=True).any(), (got, true)


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES, ids=str)
def test_division_of_random_parts_over_the_whole_exponent_range(dtype):
    """Parts with random signs, mantissas and exponents from the smallest denormal to max (a tenth zero):
    the quotient matches the true one (computed wider, rounded once) everywhere."""
    real, generator = REAL_OF[dtype], torch.Generator().manual_seed(12)
    low, high = (-149, 128) if real == torch.float32 else (-1074, 1024)
    n = 20_000

    def part():
        exponent = torch.randint(low, high, (n,), generator=generator).double()
        mantissa = 1 + torch.rand(n, generator=generator, dtype=torch.float64)
        sign = torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0)
        value = torch.where(torch.rand(n, generator=generator) < 0.1, 0.0, sign * mantissa * 2.0 ** exponent)
        return value.to(real)

    x, y = torch.stack([part(), part()], -1), torch.stack([part(), part()], -1)
    _, new = rewrite(ComplexFn(lambda z, w: z / w, n_complex=2), (x, y))
    got = new.module()(x, y)
    true = true_value(lambda z, w: z / w, [torch.view_as_complex(x), torch.view_as_complex(y)])
    bad = mismatches(got, true, complex_result=True)
    assert not bad.any(), describe([x, y], got, true, bad)
