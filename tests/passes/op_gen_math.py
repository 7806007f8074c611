"""Generators of the elementary functions, and of the reductions and matrix products beyond sum, mean and matmul,
for op_gen.GENERATORS (split from op_gen.py to keep each module short; op_gen imports this module at its end,
so importing op_gen registers every generator).

Where a function's operand comes from (program_gen's docstring says why operands matter):
- entire functions (sin, cos, sinh, cosh, expm1, exp2): any complex value of magnitude at most 3, as for exp
  (beyond it they only grow like exp);
- log2, log10, rsqrt: safe values, as for log and sqrt;
- functions with poles or branch cuts just outside the unit box (tan, tanh, sigmoid, the inverse trigonometric
  and hyperbolic functions, log1p): values in it by construction (Builder.in_unit_box);
- products and powers: operands of magnitude at most 3, so that no product overflows (where a product tree
  and eager's loop may differ: the prod rules' comment).
"""

from __future__ import annotations

import math
import operator

import torch
from hypothesis import strategies as st

from op_gen import (ALPHAS, broadcast_into, broadcasts_to, complex_with, draw, exact, generates, matrix_pair,
                    unary)
from program_gen import Value, shapes

aten = torch.ops.aten


def moderate(v: Value) -> bool:
    """At most 3 in magnitude (as a new input always is: program_gen draws none beyond 2·sqrt(2))."""
    return v.example.numel() == 0 or float(v.example.abs().amax()) <= 3


def moderate_operand(b, shape: tuple, *, complex_: bool | None = None) -> Value:
    """A moderate value that broadcasts against `shape`: from the pool, or a new input."""
    complex_ = draw(b, st.booleans()) if complex_ is None else complex_
    found = b.pick(complex_=complex_, where=lambda v: moderate(v) and broadcasts_to(v.shape, shape))
    return found or b.new_input(draw(b, broadcast_into(shape)), complex_=complex_)


def moderate_complex(b) -> Value:
    return b.pick(where=moderate) or b.new_input(draw(b, shapes()))


# ---- elementary functions -----------------------------------------------------------------------------------


for _op in (aten.sin.default, aten.cos.default, aten.sinh.default, aten.cosh.default, aten.expm1.default,
            aten.exp2.default):
    unary(_op, where=moderate)
for _op in (aten.log2.default, aten.log10.default, aten.rsqrt.default):
    unary(_op, needs_safe=True)


@generates(aten.tan.default, aten.tanh.default, aten.sigmoid.default, aten.asin.default, aten.acos.default,
           aten.atan.default, aten.asinh.default, aten.acosh.default, aten.atanh.default, aten.log1p.default)
def near_poles_and_cuts(b, op):
    b.step(op, b.in_unit_box().ref)


@generates(aten.pow.Tensor_Tensor)
def pow_tensor(b, op):
    if draw(b, st.booleans()):  # a complex base, away from 0 and the cut of its log; any moderate exponent
        base = complex_with(b, safe=True)
        b.step(op, base.ref, moderate_operand(b, base.shape).ref)
    else:  # a positive real base, a complex exponent
        base = b.pick(complex_=False, safe=True) or b.new_input(draw(b, shapes()), complex_=False, safe=True)
        b.step(op, base.ref, moderate_operand(b, base.shape, complex_=True).ref)


@generates(aten.pow.Scalar)
def pow_scalar_base(b, op):
    base = draw(b, st.sampled_from([2, 0.5, 3.0, -2, 1j, 1.5 - 0.5j]))  # -2: log's imaginary part is pi
    exponent = moderate_complex(b) if not isinstance(base, complex) or draw(b, st.booleans()) else (
        b.pick(complex_=False, where=moderate) or b.new_input(draw(b, shapes()), complex_=False))
    b.step(op, base, exponent.ref)


@generates(aten.ldexp.Tensor)
def ldexp(b, op):
    x = moderate_complex(b)
    kind = draw(b, st.sampled_from(["int", "real", "complex"]))
    if kind == "int":
        other = b.constant(torch.randint(-3, 4, draw(b, broadcast_into(x.shape)), generator=b.generator))
    else:
        other = moderate_operand(b, x.shape, complex_=kind == "complex").ref
    b.step(op, x.ref, other)


# ---- reductions -----------------------------------------------------------------------------------------------


def _some_dims(b, ndim: int):
    """None or a list of distinct dims (maybe negative) of a rank-`ndim` tensor, as reductions take them."""
    n = max(ndim, 1)
    return draw(b, st.one_of(st.none(), st.lists(st.integers(-n, n - 1), max_size=n, unique_by=lambda d: d % n)))


def _wider(b) -> dict:
    return {"dtype": torch.complex128} if draw(b, st.booleans()) else {}


@generates(aten.cumsum.default, aten.cumprod.default)
def scan(b, op):
    x = complex_with(b) if op is aten.cumsum.default else moderate_complex(b)
    n = max(x.ndim, 1)
    b.step(op, x.ref, draw(b, st.integers(-n, n - 1)), **_wider(b))


@generates(aten.logcumsumexp.default)
def running_log_sum_exp(b, op):
    x = complex_with(b)
    n = max(x.ndim, 1)
    b.step(op, x.ref, draw(b, st.integers(-n, n - 1)))


@generates(aten.prod.default, aten.prod.dim_int)
def product(b, op):
    x = moderate_complex(b)
    if op is aten.prod.default:
        b.step(op, x.ref, **_wider(b))
        return
    n = max(x.ndim, 1)
    b.step(op, x.ref, draw(b, st.integers(-n, n - 1)), draw(b, st.booleans()), **_wider(b))


@generates(aten.dist.default)
def dist(b, op):
    x = complex_with(b)
    other = b.operand(x.shape)  # complex or real
    args = (x.ref, other.ref) if draw(b, st.booleans()) else (other.ref, x.ref)
    b.step(op, *args, draw(b, st.sampled_from([2, 1, 3, 0, 0.5, math.inf])))


@generates(aten.linalg_vector_norm.default)
def vector_norm(b, op):
    order = draw(b, st.sampled_from([2, 1, 3, 0, 0.5, -1, math.inf, -math.inf]))
    x = complex_with(b, nonempty=order < 0 or math.isinf(order))  # eager refuses these over no element
    b.step(op, x.ref, order, _some_dims(b, x.ndim), draw(b, st.booleans()))


@generates(aten.var.correction, aten.var_mean.correction)
def variance(b, op):
    x = complex_with(b)
    kwargs = {"keepdim": draw(b, st.booleans())}
    if draw(b, st.booleans()):
        kwargs["correction"] = draw(b, st.sampled_from([0, 1, 2]))
    if op is aten.var.correction:
        b.step(op, x.ref, _some_dims(b, x.ndim), **kwargs)
        return
    b.step(op, x.ref, _some_dims(b, x.ndim), readout=False, **kwargs)  # (var, mean): read out one by one
    both = type(x.ref)(len(b.examples) - 1)
    b.step(operator.getitem, both, 0)
    b.step(operator.getitem, both, 1)


# ---- beta · bias + alpha · product ----------------------------------------------------------------------------


@generates(aten.addmm.default, aten.addmv.default, aten.addbmm.default, aten.baddbmm.default)
def scaled_product(b, op):
    m, k, n, batch = (draw(b, st.integers(1, 4)) for _ in range(4))
    out_shape, a_shape, b_shape = {
        aten.addmm.default: ((m, n), (m, k), (k, n)),
        aten.addmv.default: ((m,), (m, k), (k,)),
        aten.addbmm.default: ((m, n), (batch, m, k), (batch, k, n)),
        aten.baddbmm.default: ((batch, m, n), (batch, m, k), (batch, k, n)),
    }[op]
    a, other = matrix_pair(b, a_shape, b_shape)
    bias = exact(b, draw(b, broadcast_into(out_shape)), complex_=True, dtype=a.example.dtype)  # eager: one dtype
    kwargs = {}
    if draw(b, st.booleans()):
        kwargs["beta"] = draw(b, st.sampled_from([0, 1, 0.5, 1j, 1.5 - 0.5j]))
    if draw(b, st.booleans()):
        kwargs["alpha"] = draw(b, ALPHAS)
    b.step(op, bias.ref, a.ref, other.ref, **kwargs)
