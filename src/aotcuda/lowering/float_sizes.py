"""Sizes torch computes in floating point, written in the integer grammar of the package's signature.

Why: ``F.interpolate(x, scale_factor=0.5)`` over a dynamic dim gives an output size of
``TruncToInt(0.5*ToFloat(4*s26))`` (torch multiplies the float size by the scale and truncates). The signature's
shape grammar (package_format) holds integers only, so the package lowered without a word and its own load refused
it as "damaged or hostile". A scale that is a binary fraction (0.5, 0.25, 1.5, 2.0: a float equal to p / 2**k) times
a size below 2**53 / p is exact in float arithmetic, so truncating it is ``(p * size) // 2**k``, eager's value for
every size; any other scale (0.7) rounds, and no integer expression matches eager's size for every input size.
"""

from __future__ import annotations

import sympy
from torch.utils._sympy.functions import CeilToInt, FloorDiv, FloorToInt, ToFloat, TruncToInt

# sizes times p stay exact in a float's 53-bit mantissa below this (a size of 2**40 with p up to 2**12)
_MOST_NUMERATOR = 2**12


def integer_form(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with each truncation of a binary fraction times a size as an integer division; the rest as it was
    (what cannot be rewritten keeps its float parts, which the grammar then refuses)."""
    return expr.replace(lambda node: isinstance(node, (TruncToInt, FloorToInt, CeilToInt)), _integer_rounding)


def _integer_rounding(node: sympy.Expr) -> sympy.Expr:
    inner = node.args[0].replace(lambda e: isinstance(e, ToFloat), lambda e: e.args[0])
    if inner.has(ToFloat) or not inner.free_symbols:
        return node
    exact = inner.xreplace({constant: sympy.Rational(float(constant)) for constant in inner.atoms(sympy.Float)})
    numerator, denominator = sympy.fraction(sympy.together(exact))
    coefficients = sympy.expand(numerator).as_coefficients_dict().values()
    if (not denominator.is_Integer or int(denominator) & (int(denominator) - 1) or not numerator.is_integer
            or not all(c.is_Integer and 0 < c <= _MOST_NUMERATOR for c in coefficients)):
        return node  # not a small positive binary fraction of sizes: float rounding decides the size
    if denominator == 1:
        return numerator
    # sizes are >= 0, so truncation is the floor; a ceiling is the floor of (a + q - 1) / q
    if isinstance(node, CeilToInt):
        return FloorDiv(numerator + denominator - 1, denominator)
    return FloorDiv(numerator, denominator)
