"""Generators of the shape and FFT ops for op_gen.GENERATORS (split from op_gen.py to keep each module
short; op_gen imports this module at its end, so importing op_gen registers every generator)."""

from __future__ import annotations

import operator

import torch
from hypothesis import assume
from hypothesis import strategies as st

from op_gen import complex_with, dim_of, draw, exact, generates, two_dims
from program_gen import Value, shapes

aten = torch.ops.aten


# ---- shape ------------------------------------------------------------------------------------------------


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] or [1]


@st.composite
def same_numel_shapes(draw_, numel: int) -> list[int]:
    """A shape with `numel` elements: numel split into up to 3 factors, maybe with one -1."""
    shape, rest = [], numel
    for _ in range(draw_(st.integers(0, 2))):
        d = draw_(st.sampled_from(divisors(rest)))
        shape.append(d)
        rest //= d if d else 1
    shape.append(rest)
    if draw_(st.booleans()):
        shape[draw_(st.integers(0, len(shape) - 1))] = -1
    return shape


@generates(aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten._reshape_copy.default)
def view(b, op):
    copies = op in (aten.reshape.default, aten._reshape_copy.default)  # any layout; views need a contiguous x
    x = complex_with(b) if copies else b.pick(where=lambda v: v.example.is_contiguous())
    if x is None:
        x = b.new_input(draw(b, shapes()))
    shape = draw(b, same_numel_shapes(x.example.numel())) if x.example.numel() else [0]
    b.step(op, x.ref, shape, safe=x.safe)


@generates(aten.expand.default)
def expand(b, op):
    x = complex_with(b)
    size = [draw(b, st.sampled_from([1, 2, 3])) if s == 1 else draw(b, st.sampled_from([s, -1])) for s in x.shape]
    leading = draw(b, st.lists(st.integers(1, 3), max_size=1))
    b.step(op, x.ref, [*leading, *size], safe=x.safe)


@generates(aten.unsqueeze.default)
def unsqueeze(b, op):
    x = complex_with(b)
    b.step(op, x.ref, dim_of(b, x.ndim, extra=1), safe=x.safe)


@generates(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(b, op):
    x = complex_with(b)
    n = max(x.ndim, 1)
    if op is aten.squeeze.default:
        b.step(op, x.ref, safe=x.safe)
    elif op is aten.squeeze.dim:
        b.step(op, x.ref, draw(b, st.integers(-n, n - 1)), safe=x.safe)
    else:
        dims = draw(b, st.lists(st.integers(-n, n - 1), max_size=n, unique_by=lambda d: d % n))
        b.step(op, x.ref, dims, safe=x.safe)


@generates(aten.transpose.int)
def transpose(b, op):
    x = complex_with(b, min_ndim=1)
    b.step(op, x.ref, dim_of(b, x.ndim), dim_of(b, x.ndim), safe=x.safe)


@generates(aten.flip.default, aten.permute.default)
def reorder(b, op):
    x = complex_with(b)
    n = x.ndim
    if op is aten.flip.default:
        dims = draw(b, st.lists(st.integers(-n, n - 1), max_size=n, unique_by=lambda d: d % n)) if n else []
    else:
        dims = [d - n if draw(b, st.booleans()) else d for d in draw(b, st.permutations(range(n)))]
    b.step(op, x.ref, dims, safe=x.safe)


@generates(aten.t.default)
def t(b, op):
    x = complex_with(b, max_ndim=2)
    b.step(op, x.ref, safe=x.safe)


@generates(aten.diagonal.default)
def diagonal(b, op):
    x = complex_with(b, min_ndim=2)
    b.step(op, x.ref, draw(b, st.integers(-3, 3)), *two_dims(b, x.ndim), safe=x.safe)


@generates(aten.unfold.default)
def unfold(b, op):
    """Windows of `size` every `step` along a dim; a scalar has one dim of length 1 here (size 0 or 1)."""
    x = complex_with(b)
    n = max(x.ndim, 1)
    dim = draw(b, st.integers(-n, n - 1))
    length = x.shape[dim] if x.ndim else 1
    b.step(op, x.ref, dim, draw(b, st.integers(0, length)), draw(b, st.integers(1, 3)), safe=x.safe)


@generates(aten.slice.Tensor, aten.select.int, aten.narrow.default)
def slicing(b, op):
    x = complex_with(b, min_ndim=1)
    dim = dim_of(b, x.ndim)
    size = x.shape[dim]
    if op is aten.slice.Tensor:
        end = draw(b, st.one_of(st.none(), st.integers(-size, size + 2)))
        b.step(op, x.ref, dim, draw(b, st.integers(-size, size)), end, draw(b, st.integers(1, 3)), safe=x.safe)
    elif op is aten.select.int:
        if size:
            b.step(op, x.ref, dim, draw(b, st.integers(-size, size - 1)), safe=x.safe)
    else:
        start = draw(b, st.integers(0, size))
        b.step(op, x.ref, dim, start, draw(b, st.integers(0, size - start)), safe=x.safe)


def _split_decomposition_takes_empty_dims() -> bool:
    """Whether this torch's decomposition of aten.split.Tensor, which torch.export's fake tensors run, takes
    a zero-size dim. torch 2.11's raises IndexError there (it builds zero chunks, then writes the last
    one), so torch.export itself fails on such a program, before any pass; 2.13's returns the tensor."""
    from torch._decomp.decompositions import split

    try:
        split(torch.empty(0, 2), 1, 0)
    except IndexError:
        return False
    return True


SPLIT_TAKES_EMPTY_DIMS = _split_decomposition_takes_empty_dims()


@generates(aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, aten.chunk.default)
def splitting(b, op):
    x = complex_with(b, min_ndim=1)
    dim = dim_of(b, x.ndim)
    size = x.shape[dim]
    if op is aten.split.Tensor:
        assume(size > 0 or SPLIT_TAKES_EMPTY_DIMS)  # a torch.export failure of this torch, not the pass's
        args = (draw(b, st.integers(1, 4)), dim)
    elif op is aten.split_with_sizes.default:
        cuts = sorted(draw(b, st.lists(st.integers(0, size), max_size=2)))
        args = ([e - s for s, e in zip([0, *cuts], [*cuts, size])], dim)
    elif op is aten.chunk.default:
        args = (draw(b, st.integers(1, 4)), dim)
    else:
        args = (dim,)
    parts = b.step(op, x.ref, *args, readout=False)
    n_parts = len(b.examples[-1])
    ref = type(x.ref)(len(b.examples) - 1)
    for i in range(n_parts):
        b.step(operator.getitem, ref, i, safe=x.safe)
    del parts


@generates(aten.flatten.using_ints)
def flatten(b, op):
    x = complex_with(b)
    n = max(x.ndim, 1)
    start = draw(b, st.integers(-n, n - 1))
    end = draw(b, st.integers(start % n, n - 1))
    b.step(op, x.ref, start, end, safe=x.safe)


@generates(aten.roll.default)
def roll(b, op):
    x = complex_with(b)
    if x.ndim == 0 or draw(b, st.booleans()):
        b.step(op, x.ref, [draw(b, st.integers(-5, 5))], safe=x.safe)
        return
    dims = draw(b, st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=x.ndim, unique=True))
    b.step(op, x.ref, [draw(b, st.integers(-5, 5)) for _ in dims], dims, safe=x.safe)


@generates(aten.cat.default, aten.stack.default)
def join(b, op):
    x = complex_with(b, min_ndim=1 if op is aten.cat.default else 0)
    dim = dim_of(b, x.ndim, extra=0 if op is aten.cat.default else 1)
    parts = [x]
    for _ in range(draw(b, st.integers(0, 2))):
        shape = list(x.shape)
        if op is aten.cat.default:
            shape[dim] = draw(b, st.integers(0, 3))
        parts.append(exact(b, tuple(shape)))
    order = draw(b, st.permutations(range(len(parts))))
    b.step(op, [parts[i].ref for i in order], dim, safe=all(p.safe for p in parts))


@generates(aten.repeat.default)
def repeat(b, op):
    x = complex_with(b)
    repeats = draw(b, st.lists(st.integers(0, 3), min_size=x.ndim, max_size=x.ndim + 1))
    b.step(op, x.ref, repeats, safe=x.safe)


@generates(aten.constant_pad_nd.default)
def pad(b, op):
    x = complex_with(b, min_ndim=1)
    k = draw(b, st.integers(1, x.ndim))
    pads = []
    for d in range(x.ndim - 1, x.ndim - 1 - k, -1):  # pads name the last dim first
        low = -(x.shape[d] // 2)  # negative padding crops, never below zero size
        pads += [draw(b, st.integers(low, 2)), draw(b, st.integers(0, 2))]
    b.step(op, x.ref, pads, draw(b, st.sampled_from([0, 1.5, -2, 1j, 0.5 - 1j])))


# ---- FFT ----------------------------------------------------------------------------------------------------


def _fft_dims(b, x: Value) -> list[int]:
    """1 or 2 distinct non-empty dims of x, in increasing order (as torch.fft passes them)."""
    nonempty = [d for d in range(x.ndim) if x.shape[d] > 0]
    return sorted(draw(b, st.lists(st.sampled_from(nonempty), min_size=1, max_size=2, unique=True)))


@generates(aten._fft_c2c.default, aten._fft_r2c.default, aten._fft_c2r.default)
def fft(b, op):
    """normalization: 0 none, 1 by 1/sqrt(n), 2 by 1/n (the FftNorm enum of aten)."""
    if op is aten._fft_r2c.default:
        x = b.pick(complex_=False, where=lambda v: v.example.numel() > 0 and v.ndim >= 1) or b.new_input(
            draw(b, shapes(1, 3)), complex_=False)
    else:
        x = complex_with(b, min_ndim=1, nonempty=True)
    dims, norm = _fft_dims(b, x), draw(b, st.integers(0, 2))
    if op is aten._fft_c2c.default:
        b.step(op, x.ref, dims, norm, draw(b, st.booleans()))
    elif op is aten._fft_r2c.default:
        b.step(op, x.ref, dims, norm, draw(b, st.booleans()))
    else:  # the last dim holds n // 2 + 1 one-sided bins of an n-point real signal
        bins = x.shape[dims[-1]]
        b.step(op, x.ref, dims, norm, draw(b, st.sampled_from([2 * bins - 2, 2 * bins - 1]).filter(lambda n: n > 0)))
