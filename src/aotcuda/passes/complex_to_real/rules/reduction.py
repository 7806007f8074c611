"""Reduction rules: sum and mean over complex dims reduce both parts of the pair over the mapped dims; var and
norms reduce real functions of both parts; cumsum scans both parts; products (prod, cumprod) multiply pairs
in a tree."""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real import pair_math
from aotcuda.passes.complex_to_real.pair import Pair, pair_dim, pair_dims, scalar_pair
from aotcuda.passes.complex_to_real.pair_algebra import mul_pairs, result_dtype
from aotcuda.passes.complex_to_real.registry import register
from aotcuda.passes.complex_to_real.spectral.dynamic import upper_bound

aten = torch.ops.aten


def reduced_dims(a: Pair, dims) -> list[int]:
    """The pair dims a reduction over the complex `dims` (None or [] meaning all) covers."""
    if dims is None or len(dims) == 0:
        return list(range(a.ndim))
    return pair_dims(dims)


def _reduce(reduction, out, a: Pair, dims, keepdim: bool) -> Pair:
    if a.ndim == 0:  # a reduction over no dim at all would reduce the pair dim itself
        return Pair(a.t.to(result_dtype(out)).clone())
    return Pair(reduction(a.t, reduced_dims(a, dims), keepdim, dtype=result_dtype(out)))


def over_dims(reduction):
    """The rule of `reduction`.dim: reduce the pair over the mapped dims."""

    def rule(out, a, dim=None, keepdim=False, *, dtype=None):
        return _reduce(reduction, out, a, dim, keepdim)

    rule.__doc__ = f"{reduction.__name__} over the mapped dims."
    return rule


def over_all_dims(reduction):
    """The rule of `reduction`.default: reduce the pair over every complex dim."""

    def rule(out, a, *, dtype=None):
        return _reduce(reduction, out, a, None, False)

    rule.__doc__ = f"{reduction.__name__} over every complex dim."
    return rule


register(aten.sum.dim_IntList, computes=True)(over_dims(torch.sum))
register(aten.mean.dim, computes=True)(over_dims(torch.mean))
register(aten.sum.default, computes=True)(over_all_dims(torch.sum))
register(aten.mean.default, computes=True)(over_all_dims(torch.mean))


# ---- statistics and norms: real results from both parts ---------------------------------------------------


@register(aten.var.correction, computes=True)
def var(out, a, dim=None, *, correction=None, keepdim=False):
    """var z = var(re) + var(im) (the mean of |z − mean z|²), each part's over the mapped dims, as eager."""
    if a.ndim == 0:  # a scalar's var over no dim: each part's var over its one value
        return aten.var.correction(a.t.unsqueeze(0), [0], correction=correction).sum(-1)
    per_part = aten.var.correction(a.t, reduced_dims(a, dim), correction=correction, keepdim=keepdim)
    return per_part.sum(-1)


@register(aten.linalg_vector_norm.default, computes=True)
def linalg_vector_norm(out, a, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The norm of |z| (pair_math.magnitude: hypot, scaled where tiny), over the complex dims."""
    return aten.linalg_vector_norm.default(pair_math.magnitude(a.re, a.im).to(out.dtype), ord, dim, keepdim)


@register(aten.cumsum.default, computes=True)
def cumsum(out, a, dim, *, dtype=None):
    """cumsum of both parts along the mapped dim (eager's order: the same sums, rounded the same)."""
    if a.ndim == 0:
        return Pair(a.t.to(result_dtype(out)).clone())
    return Pair(aten.cumsum.default(a.t, pair_dim(dim), dtype=result_dtype(out)))


# ---- products: pairs multiplied in a tree ----------------------------------------------------------------
# Complex products cannot be reduced part by part. Both rules multiply pairs (pair_algebra.mul_pairs) in
# log2(n) rounds: the same products as eager's loop, in another order, so they differ from eager by rounding
# only (a relative error of about log2(n) ulp against eager's n, checked by test_opinfo.py); a zero or an
# infinity gives eager's zero or infinity, but where eager's loop gives nan (inf · 0) the tree may give it
# for other elements.


def _unbounded_length(node: torch.fx.Node) -> str | None:
    """`torch.prod(z, d)`, `torch.cumprod(z, d)` over a dynamic dim whose Dim has no max (the scan's rounds need it).
    """
    value = node.args[0].meta.get("val")
    if value.ndim == 0:  # dim 0 or -1 of a scalar: no length to know
        return None
    dims = [node.args[1]] if len(node.args) > 1 and node.args[1] is not None else range(value.ndim)
    for d in dims:
        size = value.shape[d]
        if not isinstance(size, int) and upper_bound(size) is None:
            return (f"prod/cumprod over dim {d} of dynamic size {size} with no upper bound: the running product "
                    f"takes ceil(log2(max)) rounds, counted from the largest size; give its torch.export.Dim a max "
                    f"(the longest the program must take)")
    return None


def _ones_like_slice(t: torch.Tensor, dim: int, length) -> torch.Tensor:
    """A pair of (1, 0) shaped like `t` with `length` along `dim`."""
    shape = list(t.shape)
    shape[dim] = length
    return torch.ones(shape, dtype=t.dtype, device=t.device) * scalar_pair(1, 0, t.dtype, t.device)


def _tree_product(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The complex product of a pair tensor along its (complex) `dim`, kept as a dim of size 1."""
    n = t.shape[dim]
    if not isinstance(n, int):  # a dynamic length: the last of the running products, 1 before the first
        return torch.cat([_ones_like_slice(t, dim, 1), _running_product(t, dim)], dim).narrow(dim, n, 1)
    if n == 0:
        return _ones_like_slice(t, dim, 1)
    while n > 1:
        if n % 2:
            t, n = torch.cat([t, _ones_like_slice(t, dim, 1)], dim), n + 1
        t, n = mul_pairs(Pair(t.narrow(dim, 0, n // 2)), Pair(t.narrow(dim, n // 2, n // 2))).t, n // 2
    return t


def _running_product(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The running complex product of a pair tensor along its (complex) `dim` by Hillis–Steele's scan: rounds of
    products with the tensor shifted by 1, 2, 4, … (filled with 1). A dynamic length runs the rounds its largest
    value needs; a round whose shift reaches past a call's length multiplies by ones only."""
    n, shift = t.shape[dim], 1
    bound = n if isinstance(n, int) else upper_bound(n)
    while shift < bound:
        if isinstance(n, int):
            shifted = torch.cat([_ones_like_slice(t, dim, shift), t.narrow(dim, 0, n - shift)], dim)
        else:  # n - shift may be negative at a call: shift by cutting the padded tensor to n instead
            shifted = torch.cat([_ones_like_slice(t, dim, shift), t], dim).narrow(dim, 0, n)
        t, shift = mul_pairs(Pair(t), Pair(shifted)).t, shift * 2
    return t


@register(aten.prod.default, aten.prod.dim_int, refuses=_unbounded_length, computes=True)
def prod(out, a, dim=None, keepdim=False, *, dtype=None):
    """The complex product over one dim (or all), pairs multiplied in a tree; a dynamic dim: cumprod's last.

    Over a dim of static size the tree above; over a dynamic one the last of the running products (cumprod's scan,
    the rounds of the Dim's max), after a 1 for a call of length 0."""
    t = a.t.to(result_dtype(out))
    if dim is None:
        return Pair(_tree_product(t.reshape(-1, 2), 0).reshape(2))
    if a.ndim == 0:
        return Pair(t.clone())
    d = dim % a.ndim
    product = _tree_product(t, d)
    return Pair(product if keepdim else product.squeeze(d))


@register(aten.cumprod.default, refuses=_unbounded_length, computes=True)
def cumprod(out, a, dim, *, dtype=None):
    """The running complex product along dim by Hillis–Steele's scan: log2(n) rounds of products with the
    tensor shifted by 1, 2, 4, … (filled with 1); over a dynamic dim, the rounds of its largest size."""
    t = a.t.to(result_dtype(out))
    if a.ndim == 0:
        return Pair(t.clone())
    return Pair(_running_product(t, dim % a.ndim))


@register(aten.var_mean.correction, computes=True)
def var_mean(out, a, dim=None, *, correction=None, keepdim=False):
    """(var z, mean z): var as `var`, the mean of both parts over the mapped dims."""
    mean = _reduce(torch.mean, out[1], a, dim, keepdim)
    return [var(out[0], a, dim, correction=correction, keepdim=keepdim), mean]


@register(aten.dist.default, computes=True)
def dist(out, a, b, p=2):
    """‖a − b‖_p over every element: the p-norm of |a − b| (either operand may be real)."""
    dtype = result_dtype(out)
    difference = [x.t if isinstance(x, Pair) else torch.stack([x, torch.zeros_like(x)], -1) for x in (a, b)]
    d = difference[0].to(dtype) - difference[1].to(dtype)
    return aten.linalg_vector_norm.default(pair_math.magnitude(d[..., 0], d[..., 1]), p)
