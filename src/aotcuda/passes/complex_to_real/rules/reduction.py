"""Reduction rules: sum and mean over complex dims reduce both parts of the pair over the mapped dims; var and
norms reduce real functions of both parts; cumsum scans both parts; products (prod, cumprod) multiply pairs
in a tree; logcumsumexp scans a scaled sum and then eager's branch of its imaginary part."""

from __future__ import annotations

import math

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
    return _unbounded_scan(node, "prod/cumprod", "the running product")


def _unbounded_scan(node: torch.fx.Node, ops: str, scan: str) -> str | None:
    """Why `node`'s scan over a dynamic dim cannot be rewritten: its Dim has no max, which the scan's rounds need."""
    value = node.args[0].meta.get("val")
    if value.ndim == 0:  # dim 0 or -1 of a scalar: no length to know
        return None
    dims = [node.args[1]] if len(node.args) > 1 and node.args[1] is not None else range(value.ndim)
    for d in dims:
        size = value.shape[d]
        if not isinstance(size, int) and upper_bound(size) is None:
            return (f"{ops} over dim {d} of dynamic size {size} with no upper bound: {scan} "
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
    if n <= 1:  # a length of 1: the product is the factor, as a new tensor (eager's is never its operand)
        return _ones_like_slice(t, dim, 1) if n == 0 else t.clone()
    while n > 1:
        if n % 2:
            t, n = torch.cat([t, _ones_like_slice(t, dim, 1)], dim), n + 1
        t, n = mul_pairs(Pair(t.narrow(dim, 0, n // 2)), Pair(t.narrow(dim, n // 2, n // 2))).t, n // 2
    return t


def _running_product(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The running complex product of a pair tensor along its (complex) `dim` (Hillis–Steele's scan, filled with 1)."""
    return _hillis_steele(t, dim, lambda earlier, later: mul_pairs(Pair(later), Pair(earlier)).t, _ones_like_slice)


def _hillis_steele(t: torch.Tensor, dim: int, combine, identity) -> torch.Tensor:
    """The inclusive scan of ``combine(earlier, later)`` (associative) along `dim` by Hillis–Steele's rounds: each
    element combined with the one 1, 2, 4, … before it, an ``identity(t, dim, length)`` slice filling in before the
    first. A dynamic length runs the rounds its largest value needs; a round whose shift reaches past a call's length
    combines with the identity only."""
    n, shift = t.shape[dim], 1
    bound = n if isinstance(n, int) else upper_bound(n)
    while shift < bound:
        shifted = _shifted(t, dim, identity(t, dim, shift), shift)
        t, shift = combine(shifted, t), shift * 2
    # no round (a length of 0 or 1): the scan is its operand, as a new tensor: returned as it is, the program's
    # output was its input (cumprod over a length-1 dim: a write into the result wrote into the caller's input)
    return t if shift > 1 else t.clone()


def _shifted(t: torch.Tensor, dim: int, fill: torch.Tensor, shift) -> torch.Tensor:
    """`t` moved `shift` places along `dim`, `fill` (of that length) before it."""
    n = t.shape[dim]
    if isinstance(n, int):
        return torch.cat([fill, t.narrow(dim, 0, n - shift)], dim)
    return torch.cat([fill, t], dim).narrow(dim, 0, n)  # n - shift may be negative at a call: cut the padded one


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


# ---- logcumsumexp: a running log-sum-exp, on eager's branch of the imaginary part --------------------------------
# Eager scans log_add_exp(z_k, acc) = max + log1p(exp(min − max)) from acc = −inf, min and max by real part (ties to
# z_k; ATen's _log_add_exp_helper): a real part log|S_k| of the sum S_k = Σ exp(z_j), and an imaginary part arg S_k
# on no fixed branch: within π/2 of the imaginary part of that step's max (|exp(min − max)| ≤ 1, so log1p's angle is
# in [−π/2, π/2]), acc's or z_k's. The rule takes S_k by a parallel scan in a scaled form (its running max of the
# real parts, and the sum of exp(z_j − that max): no overflow, no underflow of the largest terms), then eager's branch
# by a second: m_k, the multiple of 2π on arg S_k, is m_{k−1} + round((arg S_{k−1} − arg S_k) / 2π) where acc was the
# max, else round((Im z_k − arg S_k) / 2π), a first-order recurrence m_k = a_k m_{k−1} + b_k scanned as affine maps.
# Matches CPU eager (ATen's serial loop; CUDA's parallel scan may land on another multiple of 2π) in value and branch
# wherever the real parts of acc and z_k are not within rounding of a tie; a −inf real part adds nothing (eager's
# masked entries), nan infects what follows; an infinite imaginary part of a finite real part is eager's
# (_infinite_steps). From the first +inf real part on, eager's result is set by the +inf entries alone (every other
# entry adds exp(−inf) = 0): the first one's value exactly, an infinite imaginary part included; from the second on,
# C's special values (_infinite_steps).
# Eager's log1p is nan at a subnormal argument (real parts 708–745 apart), and its scan nan from there: not copied.


def _scaled_sum(earlier: torch.Tensor, later: torch.Tensor) -> torch.Tensor:
    """Σ exp(z) kept as (M, u): exp(M)·u, M the running max of the real parts; two such sums added on the larger M.
    An M equal to the larger (both −inf, both +inf) weighs 1, never exp(inf − inf)."""
    m = torch.maximum(earlier[..., 0], later[..., 0])
    weight = [torch.where(p[..., 0] == m, 1.0, torch.exp(p[..., 0] - m)).unsqueeze(-1) for p in (earlier, later)]
    return torch.cat([m.unsqueeze(-1), earlier[..., 1:] * weight[0] + later[..., 1:] * weight[1]], -1)


def _composed(earlier: torch.Tensor, later: torch.Tensor) -> torch.Tensor:
    """The affine maps m ↦ a·m + b (last dim (a, b)): `earlier`'s, then `later`'s."""
    a1, b1, a2, b2 = earlier[..., 0], earlier[..., 1], later[..., 0], later[..., 1]
    return torch.stack([a2 * a1, a2 * b1 + b2], -1)


def _filled(*values: float):
    """An identity slice for _hillis_steele: `values` along the last dim."""

    def identity(t: torch.Tensor, dim: int, length) -> torch.Tensor:
        shape = list(t.shape)
        shape[dim], shape[-1] = length, 1
        return torch.cat([torch.full(shape, v, dtype=t.dtype, device=t.device) for v in values], -1)

    return identity


def _before(t: torch.Tensor, dim: int, value: float) -> torch.Tensor:
    """Each element's predecessor along `dim`, `value` before the first."""
    return _shifted(t.unsqueeze(-1), dim, _filled(value)(t.unsqueeze(-1), dim, 1), 1).squeeze(-1)


EARLY = slice(6, 8)  # the channels of _infinite_steps counted before the first +inf real part only


def _counts_before_and_after_the_first_inf(earlier: torch.Tensor, later: torch.Tensor) -> torch.Tensor:
    """The sums of _infinite_steps' channels, but for its EARLY ones, counted up to the first +inf real part (channel
    0 counts those): `later`'s count there only where `earlier` holds no +inf. Associative (a count of the entries
    before the first +inf of the two slices joined), so the one scan counts them all."""
    total = earlier + later
    early = earlier[..., EARLY] + torch.where((earlier[..., :1] == 0), later[..., EARLY], 0.0)
    return torch.cat([total[..., :EARLY.start], early, total[..., EARLY.stop:]], -1)


def _infinite_steps(x: torch.Tensor, y: torch.Tensor, d: int, scanned: torch.Tensor) -> torch.Tensor:
    """`scanned` (the pairs of the scans above) with eager's value wherever a +inf real part came before (and no nan),
    and wherever an infinite imaginary part of a finite real part did (the scaled sum's cos and sin of it: nan).

    Eager's step on two +inf real parts (ATen's _log_add_exp_helper) is log(exp(acc) + exp(z)) in C's complex
    special values: exp(inf + iy) is (inf, y) at y = 0, (inf, nan) at an infinite y, else (±inf, ±inf) by the signs
    of cos y and sin y; the sum is IEEE's (inf − inf is nan), and its log (inf, ±π/4 or ±3π/4 or 0) stands for the
    same signs at the next step. So the second +inf on gives (inf, the angle of the running signs), (inf, nan) at the
    step where a part's signs first disagree (both parts: nan + nan i), and nan + nan i after it (an acc of nan).
    The scaled sum took the mean of their directions instead (found by fix40b: 0.75 for eager's π/4 from 0.3 and 1.2,
    a value for eager's nan from 0.3 and 2.5). Counted by one more scan: how many +inf entries, of which signs.

    An entry of finite real part and infinite imaginary part ("endless") meets eager's log1p(exp(min − max)) + max:
    against a −inf or +inf real part the difference's real part is −inf, exp(−inf ± inf i) is 0, and the larger is
    kept as it is; against another finite real part (before or after it) the difference is finite ± inf i, whose exp
    is nan, for good. So before the first +inf: the endless entry itself while it is the one finite entry so far, nan
    from a second finite entry on; after the first +inf it adds nothing (review40a: counted a break there, it gave nan
    where eager keeps the +inf's value). Hence two more channels counted up to the first +inf (EARLY): the finite
    entries, and the endless ones; and the endless entry's value, a sum read where it is the one finite entry."""
    first = x == torch.inf
    finite_y = torch.isfinite(y)
    cos, sin = torch.cos(y), torch.sin(y)  # nan at an infinite y: no sign
    nans = torch.isnan(x) | torch.isnan(y)
    finite = torch.isfinite(x)
    endless = finite & torch.isinf(y)
    channels = [first, first & finite_y & (cos < 0), first & (sin > 0), first & (sin < 0), first & torch.isinf(y),
                nans, finite, endless]  # EARLY: the last two
    counted = torch.stack([c.to(x.dtype) for c in channels]
                          + [torch.where(endless, x, 0.0), torch.where(endless, y, 0.0), torch.where(first, y, 0.0)], -1)
    counts = _hillis_steele(counted, d, _counts_before_and_after_the_first_inf, _filled(*[0.0] * counted.shape[-1]))
    # only_y: the +inf entry's y where n is 1; endless_x, endless_y: the endless entry's, where it is the one finite one
    n, left, up, down, endless_inf, nan_count, finite_early, endless_early, endless_x, endless_y, only_y = \
        counts.unbind(-1)
    re_nan = (left > 0) & (left < n)  # cos signs that disagree: inf − inf
    im_nan = (n >= 2) & ((endless_inf > 0) | ((up > 0) & (down > 0)))  # one +inf entry is itself, an infinite y too
    # the sum's real part +inf, else −inf (constants of x's dtype: a Python float in where is float32)
    quarter = torch.where(left < n, torch.full_like(x, math.pi / 4), torch.full_like(x, 3 * math.pi / 4))
    angle = torch.where(up > 0, quarter, torch.where(down > 0, -quarter, 0.0))
    after_nan = _before((re_nan | im_nan).to(x.dtype), d, 0.0) > 0
    nan = torch.full_like(x, math.nan)
    re = torch.where(after_nan | (re_nan & im_nan), nan, torch.full_like(x, math.inf))
    im = torch.where(after_nan | re_nan | im_nan, nan, angle)
    steps = torch.where((n == 1).unsqueeze(-1), torch.stack([torch.full_like(x, math.inf), only_y], -1),
                        torch.stack([re, im], -1))
    poisoned = (endless_early > 0) & (finite_early >= 2)  # an endless entry met another finite one: nan for good
    lone = (n == 0) & (endless_early == 1) & (finite_early == 1) & (nan_count == 0)
    result = torch.where(((n >= 1) & (nan_count == 0)).unsqueeze(-1), steps, scanned)
    result = torch.where(lone.unsqueeze(-1), torch.stack([endless_x, endless_y], -1), result)
    return torch.where(poisoned.unsqueeze(-1), torch.stack([nan, nan], -1), result)


def _unbounded_logcumsumexp(node: torch.fx.Node) -> str | None:
    """`torch.logcumsumexp(z, d)` over a dynamic dim whose Dim has no max (the scan's rounds need it)."""
    return _unbounded_scan(node, "logcumsumexp", "the running log-sum-exp")


@register(aten.logcumsumexp.default, refuses=_unbounded_logcumsumexp, computes=True)
def logcumsumexp(out, a, dim):
    """log Σ_{j≤k} exp(z_j) along dim on CPU eager's branch: a scaled scan of the sums, then one of its 2π multiples.

    Both scans are Hillis–Steele's (see above); over a dynamic dim, the rounds of its largest size."""
    if a.ndim == 0 or a.shape[dim % a.ndim] == 0:  # nothing to scan (a dynamic length's 0 is the scans' own case)
        return Pair(a.t.clone())
    d, x, y = dim % a.ndim, a.re, a.im
    adds_nothing = (x == -torch.inf) & ~torch.isnan(y)  # exp(−inf + iy) = 0; a nan still infects, as in eager
    unit = [torch.where(adds_nothing, 0.0, f(y)) for f in (torch.cos, torch.sin)]
    sums = _hillis_steele(torch.stack([x, *unit], -1), d, _scaled_sum, _filled(-torch.inf, 0.0, 0.0))
    # A sum one entry dominates has |u| = 1 up to rounding, and eager's real part is that entry's exactly: where its
    # real part ties the next entry's (a phase-only input: every real part 0), eager takes the entry as the step's max,
    # and a log|u| of +1 ulp took the sum instead, another branch (2π off in a quarter of random phase-only rows).
    log_u = pair_math.log_abs(sums[..., 1], sums[..., 2])
    re = sums[..., 0] + torch.where(log_u.abs() <= 4 * torch.finfo(log_u.dtype).eps, 0.0, log_u)
    angle = pair_math.angle(sums[..., 1], sums[..., 2])
    # the step's max was acc (eager's min/max: z_k.real < acc.real; acc kept where both are −inf)
    acc_was_max = (x < _before(re, d, -torch.inf)) | (x == -torch.inf)
    turns = torch.where(acc_was_max, _before(angle, d, 0.0) - angle, y - angle) / (2 * math.pi)
    maps = torch.stack([acc_was_max.to(x.dtype), torch.round(turns)], -1)
    multiple = _hillis_steele(maps, d, _composed, _filled(1.0, 0.0))[..., 1]
    return Pair(_infinite_steps(x, y, d, torch.stack([re, angle + (2 * math.pi) * multiple], -1)))


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
