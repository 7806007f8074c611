"""The export step: torch.export.export(strict=False), with guards torch cannot prove checked by aotcuda.

Why: torch.export refuses a dynamic dim when the model needs a guard on it that torch's symbolic
reasoning cannot prove over the Dim's range, even when the guard holds for every value in it. torch 2.11
cannot prove, for example, ``Eq(Min(16*seq, 32*seq), 16*seq)`` (the stride of a reshaped expand: Llama's
``repeat_kv``) or ``seq*(8 + seq - seq % 8) > 1`` (the size of an attention mask padded to a multiple of 8
for CUDA's memory-efficient SDPA), where torch 2.13 emits or proves neither. Both hold for every seq >= 1.
(In lower() the first is no longer emitted: torch_fixes backports 2.13's simplification of that Min.)

So when export fails with a constraint violation, it is run again with
``prefer_deferred_runtime_asserts_over_guards=True`` (an option of torch.export.export in 2.11 and 2.13),
which turns each such guard into a runtime assertion in the graph instead. That program is used only if
aotcuda checks, value by value over the Dim ranges the caller gave, that every assertion on the input
sizes holds there: then it is the same program, and its assertions never fire. Otherwise (a guard that
fails for some value, or ranges too large to check) the caller gets torch's original error, with its
reasons and suggested fixes (``seq = Dim('seq', max=256)``), and a note naming a value that fails.
"""

from __future__ import annotations

import itertools
import math
import operator
import re

import torch
from torch.export import ExportedProgram

from aotcuda.errors import DynamicShapesError

# The most size combinations checked per assertion (a Dim of [1, 32768], or two of about [1, 181]).
MAX_CHECKED_POINTS = 1 << 15


def export_program(model, args, kwargs, dynamic_shapes) -> ExportedProgram:
    """torch.export.export(strict=False); a violated dynamic-shape constraint is checked as described
    above, and one that does not hold becomes a DynamicShapesError that keeps torch's why-lines and
    suggested fixes (its UserError's first line alone says neither)."""
    try:
        return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    except torch._dynamo.exc.UserError as exc:
        if "Constraints violated" not in str(exc):
            raise
        violation = exc
    error = DynamicShapesError(constraint_violation_message(str(violation)))
    try:
        ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False,
                                 prefer_deferred_runtime_asserts_over_guards=True)
    except Exception:  # noqa: BLE001 - the first error is the one the caller can act on
        raise error from violation
    failure = first_failing_size_assertion(ep)
    if failure is None:
        return ep
    from aotcuda.runtime.specs import under_dim_names
    from aotcuda.lowering.signature import dim_names

    error.add_note(f"aotcuda: {under_dim_names(failure, dim_names(ep))}")
    raise error from violation


def first_failing_size_assertion(ep: ExportedProgram) -> str | None:
    """None when every runtime assertion of ``ep`` on its input sizes holds for every size in the
    program's ranges (``ep.range_constraints``); otherwise what fails, or why it could not be checked."""
    inputs = _input_symbols(ep)
    for node in ep.graph.find_nodes(op="call_function", target=torch.ops.aten._assert_scalar.default):
        condition = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else node.args[0]
        expr = condition.node.expr if isinstance(condition, torch.SymBool) else None
        if expr is None or not expr.free_symbols <= inputs:
            continue  # an assertion of the model's own (torch._check) or on data-dependent sizes
        failure = _first_failure(expr, {s: ep.range_constraints[s] for s in sorted(expr.free_symbols, key=str)})
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


def _first_failure(expr, ranges: dict) -> str | None:
    import sympy

    bounds = []
    for symbol, value_range in ranges.items():
        low, high = _as_int(value_range.lower), _as_int(value_range.upper)
        if low is None or high is None:
            return (f"the guard {expr} holds at the exported sizes but could not be checked for an unbounded "
                    f"{symbol}: give its Dim a max= and lower again")
        bounds.append(range(low, high + 1))
    if math.prod(len(b) for b in bounds) > MAX_CHECKED_POINTS:
        return (f"the guard {expr} could not be checked over {math.prod(len(b) for b in bounds)} sizes (at most "
                f"{MAX_CHECKED_POINTS}): narrow the Dim ranges")
    symbols = list(ranges)
    holds = _as_python(expr, symbols)
    for sizes in itertools.product(*bounds):
        if not holds(*sizes):
            at = ", ".join(f"{s} = {v}" for s, v in zip(symbols, sizes))
            return f"the guard {expr} does not hold at {at}"
    return None


def _as_int(bound) -> int | None:
    """A range bound as an int; None for infinity (sympy's oo, or torch's int_oo, whose is_finite is True)."""
    try:
        return int(bound)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None


# torch's integer functions in size expressions (torch.utils._sympy.functions), as Python computes them.
_INTEGER_FUNCTIONS = {
    "FloorDiv": operator.floordiv, "CleanDiv": operator.floordiv, "PythonMod": operator.mod, "Mod": operator.mod,
    "Min": min, "Max": max, "Identity": lambda x: x, "ModularIndexing": lambda x, div, mod: (x // div) % mod,
}


def _as_python(expr, symbols: list):
    """A function of the sizes that says whether `expr` holds: compiled once (sympy.lambdify), with a
    fallback to substituting into the sympy expression where the compiled form cannot evaluate it."""
    import sympy

    def substituted(*sizes) -> bool:
        return expr.xreplace({s: sympy.Integer(v) for s, v in zip(symbols, sizes)}) is sympy.true

    try:
        compiled = sympy.lambdify(symbols, expr, modules=[_INTEGER_FUNCTIONS, "math"])
    except Exception:  # noqa: BLE001 - a function lambdify cannot print: substitute instead
        return substituted

    def holds(*sizes) -> bool:
        try:
            value = compiled(*sizes)
        except Exception:  # noqa: BLE001 - e.g. a torch function missing from _INTEGER_FUNCTIONS
            return substituted(*sizes)
        return value is True or (value is not False and substituted(*sizes))

    return holds


def constraint_violation_message(text: str) -> str:
    """torch's constraint-violation text without its pointers to TORCH_LOGS, draft_export and the docs."""
    kept = []
    for line in text.strip().splitlines():
        if line.startswith("The error above occurred") or line.startswith("For more information"):
            break
        kept.append(line.split(" For more information")[0].rstrip())
    while kept and not kept[-1].strip():
        kept.pop()
    specialized = _ZERO_ONE_SPECIALIZED.findall("\n".join(kept))
    if specialized and all(size in ("0", "1") for size in specialized):
        # torch's fix for its 0/1 specialization ("ids_1 = 1": make the dim static) contradicts the one that
        # keeps it dynamic (an example of size 2 or more), which export_hints adds as a note: that note is the
        # advice
        return "\n".join(_without_suggested_fixes(kept))
    text_kept = "\n".join(kept)
    advice = []
    name, dim, divisor = _size_divided(text_kept) or (None, None, None)
    if divisor is not None:
        advice.append(f"The model needs this size to be a multiple of {divisor} (a guard divides it by {divisor}): "
                      f"export it as {divisor} * torch.export.Dim(...), e.g. dynamic_shapes={{{name!r}: {{{dim}: "
                      f"{divisor} * torch.export.Dim('n', min=..., max=...)}}}} (on the CLI: --dynamic "
                      f"{name}:{dim}:MIN:MAX:n*{divisor}, MIN and MAX the sizes' range), whatever torch's own "
                      "suggestion above leaves open (a max of oo: aotcuda's lowering may need a finite one).")
    if "Suggested fixes" in text_kept:
        advice.append("Adjust dynamic_shapes (or the CLI's --dynamic) as suggested, or change the model.")
    elif divisor is None:
        advice.append("Narrow or change the dynamic_shapes ranges (or the CLI's --dynamic) so that the guard above "
                      "holds over them, or change the model.")
    return "\n".join([text_kept, *advice])


_ZERO_ONE_SPECIALIZED = re.compile(r"your code specialized it to be a constant \((\d+)\)")


def _without_suggested_fixes(lines: list[str]) -> list[str]:
    """``lines`` without torch's "Suggested fixes:" header and the indented fixes under it."""
    kept, skipping = [], False
    for line in lines:
        if line.strip() == "Suggested fixes:":
            skipping = True
            continue
        if skipping and line.startswith((" ", "\t")):
            continue
        skipping = False
        kept.append(line)
    return kept


_SIZE_DIVIDED = re.compile(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]\s*(?://|%)\s*(\d+)")


def _size_divided(text: str) -> tuple[str, int, int] | None:
    """(input, dim, N) where a violated guard divides an input's size by N (``L['audio'].size()[1] // 160``:
    ("audio", 1, 160); the largest N where several do), else None."""
    found = [(name, int(dim), int(n)) for name, dim, n in _SIZE_DIVIDED.findall(text) if int(n) > 1]
    return max(found, key=lambda entry: entry[2]) if found else None
