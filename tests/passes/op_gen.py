"""How to call each op of the rule registry in a random program: GENERATORS[op](builder) appends one call
(sometimes with a helper step, e.g. empty then copy) to the program under construction.

Every op overload registered in aotcuda.passes.complex_to_real.registry.RULES has an entry in GENERATORS (here,
or in op_gen_shape, op_gen_indexing or op_gen_math, which this module imports) or in NOT_GENERATED with the
reason; test_properties.py fails when a new rule has neither. Ops are called as their aten overloads, so the
exported graph holds them as long as run_decompositions keeps them.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from program_gen import COMPLEX_OF, Builder, Value, shapes

aten, prims = torch.ops.aten, torch.ops.prims

# Python scalars of each kind; DIVISORS keep |s| >= 0.5 so that dividing by them amplifies no error.
SCALARS = st.sampled_from([2, -3, 0, 0.5, -1.25, 1j, 0.5 - 2j, 2 + 0j, -1j])
DIVISORS = st.sampled_from([2, -3, 0.5, -1.25, 1j, 0.5 - 2j, 2 + 0j])
ALPHAS = st.sampled_from([1, 2, -0.5, 1j, 1.5 - 0.5j])

NOT_GENERATED = {
    aten.sym_size.int: "appears only in programs exported with dynamic shapes; generated programs are static",
    aten.sym_stride.int: "appears only in programs exported with dynamic shapes",
    aten.sym_numel.default: "appears only in programs exported with dynamic shapes",
    aten.sym_storage_offset.default: "appears only in programs exported with dynamic shapes",
}
# Control flow (torch.cond, while_loop, scan, map) carries subgraphs; generated programs are straight-line.
NOT_GENERATED.update({getattr(torch.ops.higher_order, name): "control flow: generated programs are straight-line"
                      for name in ("cond", "while_loop", "scan", "map_impl")
                      if hasattr(torch.ops.higher_order, name)})

GENERATORS: dict = {}


def generates(*ops):
    def decorate(fn):
        for op in ops:
            GENERATORS[op] = lambda b, op=op: fn(b, op)
        return fn

    return decorate


def draw(b: Builder, strategy):
    return b.draw(strategy)


def complex_dtype(b: Builder) -> torch.dtype:
    return COMPLEX_OF[b.dtype()]


def dim_of(b: Builder, ndim: int, extra: int = 0) -> int:
    """A dim of a rank-`ndim` tensor (plus `extra` positions, for unsqueeze/stack), maybe negative."""
    n = ndim + extra
    return draw(b, st.integers(-n, n - 1))


def two_dims(b: Builder, ndim: int) -> tuple[int, int]:
    """Two different dims of a tensor of rank `ndim` >= 2, each maybe negative (diagonal's dim1 and dim2)."""
    first = dim_of(b, ndim)
    return first, draw(b, st.sampled_from([d for d in range(-ndim, ndim) if (d - first) % ndim]))


def complex_with(b: Builder, min_ndim=0, max_ndim=None, safe=False, nonempty=False) -> Value:
    """A complex pool value of at least `min_ndim` dims, with elements if `nonempty` (else a new input)."""
    fits = lambda v: (v.ndim >= min_ndim and (max_ndim is None or v.ndim <= max_ndim)
                      and (v.example.numel() > 0 or not nonempty))
    found = b.pick(safe=safe, where=fits)
    if found is not None:
        return found
    shape = draw(b, shapes(min_ndim, max(min_ndim, max_ndim or 3)))
    if nonempty:  # a new input must keep the promise too (a drawn size may be 0)
        shape = tuple(max(1, size) for size in shape)
    return b.new_input(shape, safe=True if safe else None)


def exact(b: Builder, shape: tuple, complex_=None, dtype=None) -> Value:
    """A value of exactly `shape`: a pool value of that shape or a new input."""
    complex_ = draw(b, st.booleans()) if complex_ is None else complex_
    found = b.pick(complex_=complex_, where=lambda v: v.shape == tuple(shape)
                   and (dtype is None or v.example.dtype == dtype))
    return found or b.new_input(tuple(shape), complex_=complex_, dtype=dtype and real_dtype(dtype))


def real_dtype(dtype):
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)


# ---- elementwise -------------------------------------------------------------------------------------


@generates(aten.mul.Tensor, aten.add.Tensor, aten.sub.Tensor, aten.rsub.Tensor)
def binary_tensor(b, op):
    x = complex_with(b)
    scalar_ok = op is not aten.rsub.Tensor  # rsub.Tensor takes no Python scalar
    other = draw(b, SCALARS) if scalar_ok and draw(b, st.booleans()) else b.operand(x.shape).ref
    args = (x.ref, other) if not isinstance(other, type(x.ref)) or draw(b, st.booleans()) else (other, x.ref)
    kwargs = {"alpha": draw(b, ALPHAS)} if op is not aten.mul.Tensor and draw(b, st.booleans()) else {}
    b.step(op, *args, **kwargs)


@generates(aten.mul.Scalar, aten.add.Scalar, aten.sub.Scalar, aten.rsub.Scalar)
def binary_scalar(b, op):
    x = complex_with(b)
    alpha = (draw(b, ALPHAS),) if op is not aten.mul.Scalar and draw(b, st.booleans()) else ()
    b.step(op, x.ref, draw(b, SCALARS), *alpha)


@generates(aten.div.Tensor)
def div_tensor(b, op):
    if draw(b, st.booleans()):  # complex numerator; the divisor (complex, real or scalar) is safe
        x = complex_with(b)
        divisor = draw(b, DIVISORS) if draw(b, st.booleans()) else b.operand(x.shape, safe=True).ref
        b.step(op, x.ref, divisor)
    else:  # complex safe divisor; the numerator is anything that broadcasts against it
        y = complex_with(b, safe=True)
        b.step(op, b.operand(y.shape).ref, y.ref)


@generates(aten.div.Scalar)
def div_scalar(b, op):
    b.step(op, complex_with(b).ref, draw(b, DIVISORS))


def unary(op, *, needs_safe=False, keeps_safe=False, where=lambda v: True):
    def generate(b, _op):
        x = b.pick(safe=needs_safe, where=where) or b.new_input(draw(b, shapes()), safe=needs_safe or None)
        b.step(op, x.ref, safe=keeps_safe and x.safe)

    GENERATORS[op] = lambda b: generate(b, op)


# Singular or branch-cut ops take safe operands only (see program_gen's docstring).
for _op in (aten.reciprocal.default, aten.angle.default, aten.log.default, aten.sqrt.default, aten.sgn.default):
    unary(_op, needs_safe=True)
unary(aten.neg.default)
unary(aten.abs.default)
unary(aten.exp.default, where=lambda v: v.example.numel() == 0 or float(v.example.real.abs().amax()) <= 3)
for _op in (aten.alias.default, aten.detach.default, aten.lift_fresh.default, aten.resolve_conj.default,
            aten.resolve_neg.default, aten.lift_fresh_copy.default, aten.conj_physical.default,
            aten._conj_physical.default):
    unary(_op, keeps_safe=True)  # conjugation keeps |z| and |angle z|


@generates(aten._conj.default)
def lazy_conj(b, op):
    """The conjugate bit: eager cannot view_as_real it until resolved, so resolve_conj follows, as in models."""
    x = complex_with(b)
    made = b.step(op, x.ref, pooled=False, readout=False)
    b.step(aten.resolve_conj.default, made.ref, safe=x.safe)


@generates(aten._neg_view.default)
def lazy_neg(b, op):
    """The negative bit, resolved by resolve_neg as the conjugate bit is by resolve_conj."""
    x = complex_with(b)
    made = b.step(op, x.ref, pooled=False, readout=False)
    b.step(aten.resolve_neg.default, made.ref, safe=x.safe)


unary(aten.real.default)
unary(aten.imag.default)
unary(aten.view_as_real.default)


@generates(aten.pow.Tensor_Scalar)
def pow_scalar(b, op):
    exponent = draw(b, st.sampled_from([2, 3, 1, 0, 2.0, 3 + 0j, -1, -2, 0.5, 1.5, -0.5]))
    whole_positive = exponent.real >= 0 and exponent.real == int(exponent.real)
    x = complex_with(b, safe=not whole_positive)  # negative or fractional powers: away from 0 and the cut
    b.step(op, x.ref, exponent)


@generates(aten.clone.default)
def clone(b, op):
    x = complex_with(b)
    fmt = draw(b, st.sampled_from([None, torch.contiguous_format, torch.preserve_format]))
    b.step(op, x.ref, memory_format=fmt, safe=x.safe)


@generates(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther)
def where(b, op):
    x = complex_with(b)
    cond = b.mask(draw(b, broadcast_into(x.shape)))
    if op is aten.where.self:
        y = b.operand(x.shape).ref
        b.step(op, cond, *((x.ref, y) if draw(b, st.booleans()) else (y, x.ref)))
    elif op is aten.where.ScalarSelf:
        b.step(op, cond, draw(b, SCALARS), x.ref)
    else:
        b.step(op, cond, x.ref, draw(b, SCALARS))


@generates(aten.where.Scalar)
def where_scalars(b, op):
    cond = b.mask(draw(b, shapes()))
    b.step(op, cond, draw(b, st.sampled_from([1j, 2 - 1j])), draw(b, SCALARS))


def broadcast_into(shape):
    from program_gen import broadcast_shapes

    return broadcast_shapes(shape)


@generates(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(b, op):
    x = complex_with(b)
    mask = b.mask(draw(b, broadcast_into(x.shape)))
    value = draw(b, SCALARS) if op is aten.masked_fill.Scalar else b.new_input(()).ref
    if op is aten.masked_fill.Tensor and draw(b, st.booleans()):
        value = b.new_input((), complex_=False).ref
    b.step(op, x.ref, mask, value)


# ---- conversion -------------------------------------------------------------------------------------------


@generates(aten._to_copy.default, prims.convert_element_type.default)
def cast(b, op):
    x = b.pick(complex_=None) or complex_with(b)
    targets = [torch.complex64, torch.complex128] + ([torch.float32, torch.float64] if x.is_complex else [])
    dtype = draw(b, st.sampled_from(targets))
    keeps_safe = x.safe and dtype.is_complex
    if op is aten._to_copy.default:
        b.step(op, x.ref, dtype=dtype, safe=keeps_safe)
    else:
        b.step(op, x.ref, dtype, safe=keeps_safe)


@generates(aten._assert_tensor_metadata.default)
def assert_metadata(b, op):
    x = complex_with(b)
    b.step(op, x.ref, dtype=x.example.dtype, readout=False)


# ---- creation ---------------------------------------------------------------------------------------------


@generates(aten.polar.default, aten.complex.default)
def from_real_parts(b, op):
    first = b.pick(complex_=False) or b.new_input(draw(b, shapes()), complex_=False)
    dtype = first.example.dtype
    fits = lambda v: v.example.dtype == dtype and broadcasts_to(v.shape, first.shape)
    second = (b.pick(complex_=False, where=fits) if draw(b, st.booleans()) else None) or b.new_input(
        draw(b, broadcast_into(first.shape)), complex_=False, dtype=dtype)
    b.step(op, first.ref, second.ref)


def broadcasts_to(shape, into) -> bool:
    from program_gen import _broadcasts

    return _broadcasts(shape, into)


@generates(aten.view_as_complex.default)
def view_as_complex(b, op):
    pairs = lambda v: v.ndim >= 1 and v.shape[-1] == 2 and v.example.is_contiguous()
    x = b.pick(complex_=False, where=pairs)
    if x is None or draw(b, st.booleans()):
        z = complex_with(b)
        x = b.step(aten.view_as_real.default, z.ref)
    b.step(op, x.ref)


def _fill(b):
    return draw(b, SCALARS)


@generates(aten.full.default, aten.zeros.default, aten.ones.default, aten.scalar_tensor.default)
def creation(b, op):
    dtype, size = complex_dtype(b), list(draw(b, shapes()))
    if op is aten.full.default:
        b.step(op, size, _fill(b), dtype=dtype)
    elif op is aten.scalar_tensor.default:
        b.step(op, _fill(b), dtype=dtype)
    else:
        b.step(op, size, dtype=dtype)


@generates(aten.empty.memory_format, aten.empty_permuted.default)
def empty(b, op):
    """Uninitialised values: filled by a copy before anything reads them (which also exercises copy)."""
    dtype, size = complex_dtype(b), list(draw(b, shapes()))
    if op is aten.empty.memory_format:
        made = b.step(op, size, dtype=dtype, pooled=False, readout=False)
    else:
        layout = draw(b, st.permutations(range(len(size))))
        made = b.step(op, size, list(layout), dtype=dtype, pooled=False, readout=False)
    b.step(aten.copy.default, made.ref, b.operand(tuple(size)).ref)


@generates(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default)
def like(b, op):
    x = b.pick(complex_=None) or complex_with(b)
    kwargs = {} if x.is_complex and draw(b, st.booleans()) else {"dtype": complex_dtype(b)}
    if op is aten.full_like.default:
        b.step(op, x.ref, _fill(b), **kwargs)
    elif op is aten.empty_like.default:
        made = b.step(op, x.ref, pooled=False, readout=False, **kwargs)
        b.step(aten.copy.default, made.ref, b.operand(x.shape).ref)
    else:
        b.step(op, x.ref, **kwargs)


@generates(aten.new_full.default, aten.new_zeros.default, aten.new_ones.default, aten.new_empty.default)
def new(b, op):
    x = b.pick(complex_=None) or complex_with(b)
    kwargs = {} if x.is_complex and draw(b, st.booleans()) else {"dtype": complex_dtype(b)}
    size = list(draw(b, shapes()))
    if op is aten.new_full.default:
        b.step(op, x.ref, size, _fill(b), **kwargs)
    elif op is aten.new_empty.default:
        made = b.step(op, x.ref, size, pooled=False, readout=False, **kwargs)
        b.step(aten.copy.default, made.ref, b.operand(tuple(size)).ref)
    else:
        b.step(op, x.ref, size, **kwargs)


# ---- linear algebra ---------------------------------------------------------------------------------------


def matrix_pair(b, a_shape, b_shape):
    a = exact(b, a_shape, complex_=True)
    other = exact(b, b_shape, complex_=True, dtype=a.example.dtype)
    return a, other


@generates(aten.mm.default, aten.bmm.default, aten.matmul.default)
def matmul(b, op):
    m, k, n, batch = (draw(b, st.integers(1, 4)) for _ in range(4))
    if op is aten.mm.default:
        a_shape, b_shape = (m, k), (k, n)
    elif op is aten.bmm.default:
        a_shape, b_shape = (batch, m, k), (batch, k, n)
    else:
        a_shape = draw(b, st.sampled_from([(k,), (m, k), (batch, m, k)]))
        b_shape = draw(b, st.sampled_from([(k,), (k, n), (batch, k, n), (1, k, n)]))
    a, other = matrix_pair(b, a_shape, b_shape)
    b.step(op, a.ref, other.ref)


# ---- reductions -------------------------------------------------------------------------------------------


@generates(aten.sum.dim_IntList, aten.mean.dim, aten.sum.default, aten.mean.default)
def reduction(b, op):
    x = complex_with(b)
    kwargs = {"dtype": torch.complex128} if draw(b, st.booleans()) else {}
    if op in (aten.sum.default, aten.mean.default):
        b.step(op, x.ref, **kwargs)
        return
    n = max(x.ndim, 1)
    dims = draw(b, st.one_of(st.none(), st.lists(st.integers(-n, n - 1), max_size=n, unique_by=lambda d: d % n)))
    b.step(op, x.ref, dims, draw(b, st.booleans()), **kwargs)


# ---- comparisons: complex → bool (results are read out as they are, and do not join the pool) ----------


@generates(aten.eq.Tensor, aten.ne.Tensor, aten.eq.Scalar, aten.ne.Scalar)
def comparison(b, op):
    x = complex_with(b)
    if op in (aten.eq.Scalar, aten.ne.Scalar):
        b.step(op, x.ref, draw(b, SCALARS))
    elif draw(b, st.booleans()):  # equal values somewhere: compare with a copy where a mask says so
        b.step(op, x.ref, b.step(aten.where.self, b.mask(x.shape), x.ref, b.operand(x.shape).ref).ref)
    else:
        b.step(op, x.ref, b.operand(x.shape).ref)


@generates(aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default)
def logical_binary(b, op):
    x = complex_with(b)
    b.step(op, x.ref, b.operand(x.shape).ref)


for _op in (aten.isnan.default, aten.isinf.default, aten.logical_not.default, aten.any.default):
    unary(_op)


@generates(aten.any.dim, aten.any.dims)
def any_over_dims(b, op):
    x = complex_with(b)
    n = max(x.ndim, 1)
    if op is aten.any.dim:
        b.step(op, x.ref, draw(b, st.integers(-n, n - 1)), draw(b, st.booleans()))
        return
    dims = draw(b, st.one_of(st.none(), st.lists(st.integers(-n, n - 1), max_size=n, unique_by=lambda d: d % n)))
    b.step(op, x.ref, dims, draw(b, st.booleans()))


# The other generators live in op_gen_shape.py (shape, FFT), op_gen_indexing.py and op_gen_math.py (elementary
# functions, the reductions and matrix products beyond sum, mean and matmul); importing them registers them.
import op_gen_indexing  # noqa: E402, F401
import op_gen_math  # noqa: E402, F401
import op_gen_more  # noqa: E402, F401
import op_gen_shape  # noqa: E402, F401
