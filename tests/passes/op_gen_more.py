"""Generators (and reasons for none) of the rules added for issue 27's last gaps: the anchors' nn and random ops,
the OpInfo walk's memory, selection and linear-algebra ops, for op_gen.GENERATORS (op_gen imports this module at
its end)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from op_gen import NOT_GENERATED, complex_with, dim_of, draw, exact, generates
from op_gen_indexing import _scatter_index, index_tensor
from program_gen import shapes

aten = torch.ops.aten


@generates(aten.scatter.reduce)
def scatter_reduce(b, op):
    x = complex_with(b, min_ndim=1, nonempty=True)  # index values need a non-empty dim
    dim = dim_of(b, x.ndim)
    index_ = _scatter_index(b, x, dim, unique=False)  # repeats: they add up or multiply, in eager's order
    source = exact(b, tuple(index_.shape), complex_=True, dtype=x.example.dtype)  # eager wants x's dtype
    b.step(op, x.ref, dim, b.constant(index_), source.ref, reduce=draw(b, st.sampled_from(["add", "multiply"])))


@generates(aten.put.default)
def put(b, op):
    x = complex_with(b, nonempty=True)
    accumulate = draw(b, st.booleans())
    shape = draw(b, shapes(0, 2))
    count = max(1, int(torch.Size(shape).numel()))
    if accumulate:  # repeats add up; negative positions count from the end
        index_ = index_tensor(b, x.example.numel(), shape)
    else:  # no position twice (writes to one would race)
        count = min(count, x.example.numel())
        index_ = torch.randperm(x.example.numel(), generator=b.generator)[:count] - x.example.numel() * draw(
            b, st.integers(0, 1))
    source = exact(b, tuple(index_.shape), complex_=True, dtype=x.example.dtype)
    b.step(op, x.ref, b.constant(index_), source.ref, accumulate)


_LINALG = ("linear algebra on random matrices is ill conditioned: test_linalg_embedding.py and test_factorizations.py "
           "check it")
_SIZE = "a data-dependent result size, which generated programs (static shapes) do not carry: test_memory_ops.py"
_MEMORY = "addresses storage: generated programs' values have no fixed storage layout: test_memory_ops.py"
NOT_GENERATED.update({
    aten.convolution.default: "eager has no complex kernel for aten.convolution (F.conv* reach it only through a "
                              "composite of real convolutions): test_nn.py compares it with F.conv*",
    aten.avg_pool2d.default: "eager has no complex average pooling: test_nn.py compares it with the pool of each part",
    aten.avg_pool3d.default: "eager has no complex average pooling: test_nn.py compares it with the pool of each part",
    aten.randn.default: "random values: test_random.py compares statistics",
    aten.randn_like.default: "random values: test_random.py compares statistics",
    aten.allclose.default: "export refuses it on complex values (a Python bool): test_scalar_results.py",
    aten._local_scalar_dense.default: "export refuses a complex item: test_scalar_results.py",
    aten.as_strided.default: _MEMORY,
    aten.as_strided_scatter.default: _MEMORY,
    aten.resize.default: _MEMORY + " (and its new elements are uninitialised)",
    aten.masked_select.default: _SIZE,
    aten.nonzero.default: _SIZE,
    aten.nonzero_static.default: "a selection by exact zeros, which random values never have: test_memory_ops.py",
    **{op: _LINALG for op in (
        aten.triangular_solve.default, aten.linalg_solve_triangular.default, aten.cholesky_solve.default,
        aten.cholesky_inverse.default, aten.linalg_matrix_exp.default, aten.linalg_pinv.atol_rtol_tensor,
        *([aten.cholesky.default] if hasattr(aten, "cholesky") else []), aten.linalg_cholesky_ex.default, aten.linalg_inv_ex.default,
        aten._linalg_solve_ex.default, aten._linalg_eigh.default, aten._linalg_svd.default, aten.lu_unpack.default,
        aten.linalg_lu_solve.default, aten.geqrf.default, aten.linalg_householder_product.default,
        aten.ormqr.default, aten.linalg_qr.default, aten._linalg_det.default, aten._linalg_slogdet.default, aten.linalg_lu_factor_ex.default,
        aten.linalg_lu.default)},
})
