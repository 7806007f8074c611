"""A package's shape expressions as sympy expressions, built from the contract's grammar, never evaluated.

A package is outside input: its ``{"expr": ...}`` strings are parsed by
``aotcuda.package_format.parse_shape_expression`` (integers, size symbols, + - * // % **, parentheses and
torch's shape functions, bounded in length, nesting and value) and the tree is built here with sympy's and
torch's constructors (``sympy.Integer``, ``sympy.Symbol``, ``FloorDiv``, ``Max``, ...). No string of a
package reaches ``sympify``, ``eval`` or ``parse_expr``, which run Python (``__import__('os').system(...)``).
"""

from __future__ import annotations

import functools

from aotcuda.package_format import ShapeExpressionError, parse_shape_expression


# What sympy and torch's shape functions raise for values they refuse: a division by zero (an ArithmeticError),
# torch's Mod of a negative value (an AssertionError), a negative shift (ValueError).
EVALUATION_ERRORS = (ArithmeticError, AssertionError, TypeError, ValueError)


@functools.lru_cache(maxsize=1024)
def shape_expression(text: str):
    """The sympy expression of a package's shape expression (symbols are integers); ShapeExpressionError
    (a ValueError) for a string outside the grammar, or one whose constants torch refuses (FloorDiv(s0, 0))."""
    tree = parse_shape_expression(text)
    try:
        return _build(tree, _constructors())
    except EVALUATION_ERRORS as exc:
        raise ShapeExpressionError(f"{text[:80]!r} cannot be built: {type(exc).__name__}: {exc}") from exc


@functools.cache
def _constructors() -> dict:
    import sympy
    import torch.utils._sympy.functions as shape_functions

    calls = {name: getattr(shape_functions, name) for name in
             ("Max", "Min", "FloorDiv", "CleanDiv", "CeilDiv", "Mod", "PythonMod", "ModularIndexing", "Identity",
              "CeilToInt", "FloorToInt", "TruncToInt", "IntTrueDiv")}
    return {
        "int": sympy.Integer,
        "symbol": lambda name: sympy.Symbol(name, integer=True),
        "neg": lambda a: -a,
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "//": shape_functions.FloorDiv,
        "%": shape_functions.PythonMod,
        "**": lambda a, n: sympy.Pow(a, sympy.Integer(n)),
        "call": lambda name, *args: calls[name](*args),
    }


def _build(tree: tuple, make: dict):
    """Fold the syntax tree bottom-up (its depth is bounded by the grammar)."""
    kind = tree[0]
    if kind in ("int", "symbol"):
        return make[kind](tree[1])
    if kind == "neg":
        return make["neg"](_build(tree[1], make))
    if kind == "**":
        return make["**"](_build(tree[1], make), tree[2])
    if kind == "call":
        return make["call"](tree[1], *(_build(arg, make) for arg in tree[2]))
    return make[kind](_build(tree[1], make), _build(tree[2], make))
