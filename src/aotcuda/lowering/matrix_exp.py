"""A decomposition of ``torch.linalg.matrix_exp`` (``aten.linalg_matrix_exp``) into matrix products and elementwise
math, so that it becomes generated code.

Inductor has no lowering for the op and torch no C shim (torch 2.11-2.13): a model that calls it (a statevector step
``matrix_exp(-1j * H * t)``, a Lie-group exponential, a zero-order-hold discretization ``matrix_exp(A * dt)``) was
refused as a proxy-executor op, and so was a complex one, whose rule in ReplaceComplexWithRealPass writes the real
op on the 2n x 2n embedding (seventh new user, 2026-12-07).

The method is ATen's (``mexp_impl`` in aten/src/ATen/native/LinearAlgebra.cpp; Bader, Blanes and Casas, "Computing
the matrix exponential with an optimized Taylor polynomial approximation", Mathematics 2019): with the 1-norm
``|A|_1`` (the largest column sum of |a_ij|), ``s = max(0, ceil(log2(|A|_1 / theta)))``, a degree-18 Taylor
polynomial of ``A / 2^s`` and s squarings. theta is the norm up to which that polynomial is exact to the dtype's unit
roundoff (ATen's table; float32 and complex64 take the single-precision one), so the scaling, and the number of
squarings, are eager's. Where eager picks a lower degree for a small norm, its polynomial and this one agree to
rounding. The polynomial is evaluated by Paterson-Stockmeyer in powers of A^4 (7 matrix products).

s depends on the values, and a graph has a fixed number of products: every call runs MAX_SQUARINGS squarings, each
kept only where it is below that matrix's s (``torch.where``). A matrix that needs more (a 1-norm above theta *
2^MAX_SQUARINGS: 1.3e10 in single precision, 2.0e19 in double, where no digit of exp's phase survives the
rounding of A) gets NaN, rather than a wrong finite value. A 1 x 1 matrix is ``exp``, as in eager.
"""

from __future__ import annotations

import math

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten

# The largest 1-norm at which ATen's degree-18 approximation is accurate to the unit roundoff (thetas_float,
# thetas_double in LinearAlgebra.cpp).
THETA_18 = {torch.float32: 3.010066362817634e+00, torch.float64: 1.090863719290036e+00}
# Squarings every call runs (module docstring): past theta * 2^MAX_SQUARINGS the phase of exp(A) has no correct digit.
MAX_SQUARINGS = {torch.float32: 32, torch.float64: 64}
TAYLOR_DEGREE = 18
_BLOCK = 4  # Paterson-Stockmeyer's block: powers up to A^3 kept, Horner's rule in A^4


def _taylor(a: torch.Tensor, eye: torch.Tensor) -> torch.Tensor:
    """sum_{k <= 18} a^k / k!, Horner's rule in a^4 over blocks of four terms (7 products)."""
    powers = [eye, a]
    for _ in range(_BLOCK - 2):
        powers.append(powers[-1] @ a)
    step = powers[2] @ powers[2]
    blocks = []
    for start in range(0, TAYLOR_DEGREE + 1, _BLOCK):
        terms = [powers[i] * (1.0 / math.factorial(start + i))
                 for i in range(_BLOCK) if start + i <= TAYLOR_DEGREE]
        blocks.append(sum(terms[1:], terms[0]))
    result = blocks[-1]
    for block in reversed(blocks[:-1]):
        result = block + step @ result
    return result


def linalg_matrix_exp(a: torch.Tensor) -> torch.Tensor:
    real_dtype = a.real.dtype if a.is_complex() else a.dtype
    if real_dtype not in THETA_18:  # eager's own op refuses or computes it, in its words
        return NotImplemented
    n = a.shape[-1]
    if statically_known_true(n == 1):
        return a.exp()
    norm = a.abs().sum(-2).amax(-1)  # the 1-norm: the largest column sum
    squarings = torch.ceil(torch.log2(norm / THETA_18[real_dtype])).clamp(min=0)[..., None, None]
    eye = torch.eye(n, dtype=a.dtype, device=a.device)
    result = _taylor(a * torch.exp2(-squarings).to(a.dtype), eye)
    rounds = MAX_SQUARINGS[real_dtype]
    for round_ in range(rounds):
        result = torch.where(squarings > round_, result @ result, result)
    return torch.where(squarings > rounds, torch.full_like(result, math.nan), result)


MATRIX_EXP_DECOMPOSITIONS = {aten.linalg_matrix_exp.default: linalg_matrix_exp}
