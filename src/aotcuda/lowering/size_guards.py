"""Checks of guards on input sizes at every size of the Dim ranges (the export step's, aotcuda.lowering.exporting):
whether a runtime assertion torch deferred holds over the ranges, and where it does not, the first size that fails
it and, where it fails only at one end of a range, the range without that end.

A guard is checked value by value (compiled once with sympy.lambdify), at most MAX_CHECKED_POINTS combinations of
sizes; a size the guard reads only through one quotient ``(size + b) // c`` is checked at each value of the quotient
instead, which is the same check (an stft's frame count over seconds of audio).
"""

from __future__ import annotations

import itertools
import math
import operator

import torch
from torch.export import ExportedProgram

from aotcuda.lowering.dynamic_shapes_checks import as_int

# The most size combinations checked per assertion (a Dim of [1, 32768], or two of about [1, 181]).
MAX_CHECKED_POINTS = 1 << 15


def first_failing_size_assertion(ep: ExportedProgram) -> str | None:
    """None when every runtime assertion of ``ep`` on its input sizes holds for every size in the
    program's ranges (``ep.range_constraints``); otherwise what fails, or why it could not be checked."""
    inputs = _input_symbols(ep)
    for node in ep.graph.find_nodes(op="call_function", target=torch.ops.aten._assert_scalar.default):
        condition = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else node.args[0]
        expr = condition.node.expr if isinstance(condition, torch.SymBool) else None
        if expr is None or not expr.free_symbols <= inputs:
            continue  # an assertion of the model's own (torch._check) or on data-dependent sizes
        failure = first_failure(expr, {s: ep.range_constraints[s] for s in sorted(expr.free_symbols, key=str)})
        if failure is not None:
            return failure
    return None


def _input_symbols(ep: ExportedProgram) -> set:
    """The symbols of the input sizes that have a range (the caller's Dims)."""
    symbols = set()
    for node in ep.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            symbols.update(s.node.expr for s in value.shape if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol)
    return {s for s in symbols if s in ep.range_constraints}


def first_failure(expr, ranges: dict) -> str | None:
    import sympy

    bounds = []
    for symbol, value_range in ranges.items():
        low, high = as_int(value_range.lower), as_int(value_range.upper)
        if low is None or high is None:
            return (f"the guard {expr} holds at the exported sizes but could not be checked for an unbounded "
                    f"{symbol}: give its Dim a max= and lower again")
        bounds.append(range(low, high + 1))
    checked, quotients = _through_quotients(expr, ranges, bounds)
    if math.prod(len(b) for b in bounds) > MAX_CHECKED_POINTS:
        return (f"the guard {expr} could not be checked over {math.prod(len(b) for b in bounds)} sizes (at most "
                f"{MAX_CHECKED_POINTS}): narrow the Dim ranges")
    symbols = list(ranges)
    holds = _as_python(checked, [quotients.get(s, (s,))[0] for s in symbols])
    for values in itertools.product(*bounds):
        if not holds(*values):
            sizes = [quotients[s][1](v) if s in quotients else v for s, v in zip(symbols, values)]
            at = ", ".join(f"{s} = {v}" for s, v in zip(symbols, sizes))
            fix = _one_end_off(expr, ranges) or _failing_end_off(holds, bounds, symbols, quotients)
            return f"the guard {expr} does not hold at {at}{fix}"
    return None


def _failing_end_off(holds, bounds: list[range], symbols: list, quotients: dict) -> str:
    """Where a guard on one size read through a quotient fails only at one end of its range (a prefix or a suffix
    of it), the range without that end, as the fix: an stft without centring over ``Dim("samples", min=400)``
    guards that it makes more than one frame, ``Ne((samples - 400)//160, 0)``, which every size from 560 holds.
    (Torch suggests such a range itself for a guard on the size alone, not for one through a quotient.)"""
    if len(bounds) != 1 or symbols[0] not in quotients:
        return ""
    values, (symbol,) = bounds[0], symbols
    held = [holds(value) for value in values]
    if not any(held):
        return ""
    first, last = held.index(True), len(held) - 1 - held[::-1].index(True)
    if not all(held[first:last + 1]) or (first > 0 and last < len(held) - 1):
        return ""
    smallest, largest = quotients[symbol][1:]
    if first > 0:
        size = smallest(values[first])
        return f": every size of {symbol} from {size} holds it; give its Dim min={size}"
    size = largest(values[last])
    return f": every size of {symbol} up to {size} holds it; give its Dim max={size}"


def _through_quotients(expr, ranges: dict, bounds: list[range]):
    """(the guard to check, {size symbol: (quotient symbol, the smallest and the largest size in range of a quotient
    value)}), with ``bounds`` changed in place to the quotients' ranges: a size the guard reads only as
    ``(size + b) // c`` (c > 0) is checked at each value of that quotient, which takes every integer between its
    values at the range's ends.

    Why: an stft front end over a dynamic sample count (Whisper, Parakeet, Voxtral: hop 160) guards
    ``2 % (2 + 2*(samples // 160)) != 0``, true at every size; over 3 s of 16 kHz audio (48000 sizes) it was
    more sizes than MAX_CHECKED_POINTS, and export was refused with advice to make the length a multiple of 160,
    which the model does not need. Its 300 quotients are the same check."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv

    quotients = {}
    for index, (symbol, size_range) in enumerate(zip(ranges, list(bounds))):
        terms = {term for term in expr.atoms(FloorDiv) if symbol in term.free_symbols}
        if len(terms) != 1:
            continue
        term = terms.pop()
        base, divisor = term.args
        offset = sympy.expand(base - symbol)
        if not (divisor.is_Integer and divisor > 0 and offset.is_Integer):
            continue
        quotient = sympy.Symbol(f"{symbol}_quotient", integer=True)
        replaced = expr.xreplace({term: quotient})
        if symbol in replaced.free_symbols:  # read outside the quotient too: every size is checked
            continue
        c, b, low = int(divisor), int(offset), size_range.start
        expr, bounds[index] = replaced, range((low + b) // c, (size_range.stop - 1 + b) // c + 1)
        high = size_range.stop - 1
        quotients[symbol] = (quotient, lambda value, c=c, b=b, low=low: max(low, value * c - b),
                             lambda value, c=c, b=b, high=high: min(high, (value + 1) * c - b - 1))
    return expr, quotients


def _one_end_off(expr, ranges: dict) -> str:
    """Where the guard refuses one size alone, at an end of its Dim's range (``Ne(t, 128)`` for t in [2, 128]: a
    128-row causal-mask buffer sliced ``mask[:t, :t]``), the range without it, as the fix."""
    import sympy

    if not isinstance(expr, sympy.Ne) or len(ranges) != 1:
        return ""
    (symbol, value_range), = ranges.items()
    sizes = [side for side in expr.args if side.is_Integer]
    others = [side for side in expr.args if not side.is_Integer]
    if len(sizes) != 1 or len(others) != 1 or str(others[0]) != str(symbol):
        return ""
    value, low, high = sizes[0], as_int(value_range.lower), as_int(value_range.upper)
    if value == high:
        return f": every other size of {symbol} holds it; give its Dim max={int(value) - 1}"
    if value == low:
        return f": every other size of {symbol} holds it; give its Dim min={int(value) + 1}"
    return ""


# torch's integer functions in size expressions (torch.utils._sympy.functions), as Python computes them.
_INTEGER_FUNCTIONS = {
    "FloorDiv": operator.floordiv, "CleanDiv": operator.floordiv, "PythonMod": operator.mod, "Mod": operator.mod,
    "aotcuda_remainder": operator.mod,
    "Min": min, "Max": max, "Identity": lambda x: x, "ModularIndexing": lambda x, div, mod: (x // div) % mod,
}


def _as_python(expr, symbols: list):
    """A function of the sizes that says whether `expr` holds: compiled once (sympy.lambdify), with a
    fallback to substituting into the sympy expression where the compiled form cannot evaluate it."""
    import sympy

    def substituted(*sizes) -> bool:
        return expr.xreplace({s: sympy.Integer(v) for s, v in zip(symbols, sizes)}) is sympy.true

    # sympy prints torch's Mod and PythonMod as an infix % without parentheses around its operands:
    # Mod(4*(x//2) + 4, x//2 + 1) became "4*(x//2) + 4 % (x//2) + 1", a guard that holds at every size read as
    # failing at the first (a user's dynamic FFT). As calls of a function of our own they print as calls.
    remainder = sympy.Function("aotcuda_remainder")
    as_calls = expr.replace(lambda e: type(e).__name__ in ("Mod", "PythonMod"), lambda e: remainder(*e.args))
    try:
        compiled = sympy.lambdify(symbols, as_calls, modules=[_INTEGER_FUNCTIONS, "math"])
    except Exception:  # noqa: BLE001 - a function lambdify cannot print: substitute instead
        return substituted

    def holds(*sizes) -> bool:
        try:
            value = compiled(*sizes)
        except Exception:  # noqa: BLE001 - e.g. a torch function missing from _INTEGER_FUNCTIONS
            return substituted(*sizes)
        return value is True or (value is not False and substituted(*sizes))

    return holds
