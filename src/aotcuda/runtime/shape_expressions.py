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
# torch's Mod of a negative value (an AssertionError), a negative shift (ValueError); and sympy's comparisons of a
# tree that mixes its float functions (IntTrueDiv) into the integer ones, ModularIndexing(IntTrueDiv(s1, 2), s0, 1),
# which recurse without end (RecursionError): a package's divisor of 16 characters raised it at every call.
EVALUATION_ERRORS = (ArithmeticError, AssertionError, TypeError, ValueError, RecursionError)


def shape_expression(text: str):
    """``_shape_expression`` of a string; ShapeExpressionError for anything else, before the cache hashes
    it (a package's "expr" may be any JSON value: an array raised a raw ``TypeError: unhashable type``)."""
    if not isinstance(text, str):
        raise ShapeExpressionError(f"it is a {type(text).__name__}, not a string")
    return _shape_expression(text)


@functools.lru_cache(maxsize=1024)
def _shape_expression(text: str):
    """The sympy expression of a package's shape expression (symbols are integers), built UNEVALUATED:
    every node is made with ``evaluate=False``, so reading a package's expression costs time linear in its
    text (torch's evaluating constructors run sympy's gcd and simplification, which expand: an 85-character
    ``FloorDiv((s0+...+s5)**4*(s6+...+s11)**4, (s0+...+s5)**3+s99)`` took 78 s). Its value for concrete sizes
    is ``evaluate_expression``. ShapeExpressionError (a ValueError) for a string outside the grammar, or one
    whose constants torch refuses (a divisor that is the constant 0: ``FloorDiv(s0, 0)``)."""
    tree = parse_shape_expression(text)
    try:
        return _build(tree, _constructors())
    except EVALUATION_ERRORS as exc:
        raise ShapeExpressionError(f"{text[:80]!r} cannot be built: {type(exc).__name__}: {exc}") from exc


shape_expression.cache_clear = _shape_expression.cache_clear  # the tests time fresh reads


def evaluate_expression(expr, values: dict):
    """``expr`` (a ``shape_expression``) with its symbols replaced by ``values`` ({symbol name: int}), as
    a sympy number when every symbol has a value. The replacement is simultaneous and the tree is rebuilt
    bottom-up, so each node is evaluated on numbers only (arithmetic, never a symbolic gcd). Raises one of
    EVALUATION_ERRORS for a value torch's functions refuse (a divisor of 0 at these sizes)."""
    import sympy

    return expr.xreplace({symbol: sympy.Integer(values[str(symbol)])
                          for symbol in expr.free_symbols if str(symbol) in values})


# torch's functions whose arguments at these positions divide: a constant 0 there is refused when read.
_DIVISORS = {"FloorDiv": (1,), "CleanDiv": (1,), "CeilDiv": (1,), "Mod": (1,), "PythonMod": (1,),
             "IntTrueDiv": (1,), "ModularIndexing": (1, 2)}


@functools.cache
def _constructors() -> dict:
    import sympy
    import torch.utils._sympy.functions as shape_functions

    calls = {name: getattr(shape_functions, name) for name in
             ("Max", "Min", "FloorDiv", "CleanDiv", "Mod", "PythonMod", "ModularIndexing", "Identity",
              "CeilToInt", "FloorToInt", "TruncToInt", "IntTrueDiv")}
    # Constants only (a.is_Number and b.is_Number) are folded: arithmetic on numbers of bounded bits.
    add = lambda a, b: sympy.Add(a, b, evaluate=a.is_Number and b.is_Number)  # noqa: E731

    def neg(a):
        return -a if a.is_Number else sympy.Mul(sympy.S.NegativeOne, a, evaluate=False)

    def call(name, *args):
        if name == "Identity":  # torch's no-op wrapper: unevaluated, Max(1, Identity(1)) recursed without end in int()
            return args[0]
        if name in _DIVISORS and not all(arg.is_integer for arg in args):  # a float in an integer function:
            # ModularIndexing(s0, IntTrueDiv(s1, 2), 2) took 0.07 s to end in RecursionError at every evaluation
            raise ValueError(f"{name} of a value that is not an integer (IntTrueDiv gives a float)")
        for position in _DIVISORS.get(name, ()):
            if args[position] == 0:
                raise ZeroDivisionError(f"{name}'s divisor is 0")
        if all(arg.is_Number for arg in args):  # constants only: torch's own evaluation is arithmetic
            if name == "CeilDiv":
                return shape_functions.CeilDiv(*args)
            return calls[name](*args)
        if name == "CeilDiv":  # torch's CeilDiv takes no evaluate=False: its definition, unevaluated
            base, divisor = args
            return shape_functions.FloorDiv(add(base, add(divisor, sympy.S.NegativeOne)), divisor, evaluate=False)
        return calls[name](*args, evaluate=False)

    def chain(combine, parts):
        """One n-ary node for a chain of + (or of *): its constants folded, the rest unevaluated."""
        numbers = [part for part in parts if part.is_Number]
        rest = [part for part in parts if not part.is_Number]
        if numbers:
            rest.append(combine(*numbers))
        return rest[0] if len(rest) == 1 else combine(*rest, evaluate=False)

    return {
        "sum": lambda parts: chain(sympy.Add, parts),
        "product": lambda parts: chain(sympy.Mul, parts),
        "int": sympy.Integer,
        "symbol": lambda name: sympy.Symbol(name, integer=True),
        "neg": neg,
        "+": add,
        "-": lambda a, b: add(a, neg(b)),
        "*": lambda a, b: sympy.Mul(a, b, evaluate=a.is_Number and b.is_Number),
        "//": lambda a, b: call("FloorDiv", a, b),
        "%": lambda a, b: call("PythonMod", a, b),
        "**": lambda a, n: sympy.Pow(a, sympy.Integer(n), evaluate=a.is_Number),
        "call": call,
    }


def _build(tree: tuple, make: dict):
    """Fold the syntax tree bottom-up (its depth is bounded by the grammar). A chain of + and - (or of *), a
    left-deep tree as deep as it is long, becomes one n-ary node: ``s0+s0+...`` of 666 terms was a tree deeper
    than sympy's recursive walks (free_symbols, xreplace, diff) take, and every call raised RecursionError
    (review 11)."""
    kind = tree[0]
    if kind in ("+", "-", "*"):
        group, operands, node = ("*",) if kind == "*" else ("+", "-"), [], tree
        while node[0] in group:  # down the left spine, without recursing
            operands.append((node[0], node[2]))
            node = node[1]
        parts = [_build(node, make)]
        for op, operand in reversed(operands):
            built = _build(operand, make)
            parts.append(make["neg"](built) if op == "-" else built)
        return make["product" if kind == "*" else "sum"](parts)
    if kind in ("int", "symbol"):
        return make[kind](tree[1])
    if kind == "neg":
        return make["neg"](_build(tree[1], make))
    if kind == "**":
        return make["**"](_build(tree[1], make), tree[2])
    if kind == "call":
        return make["call"](tree[1], *(_build(arg, make) for arg in tree[2]))
    return make[kind](_build(tree[1], make), _build(tree[2], make))
