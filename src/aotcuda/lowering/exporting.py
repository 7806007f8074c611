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

import re
import warnings

import torch
from torch.export import ExportedProgram

from aotcuda.errors import DynamicShapesError
from aotcuda.lowering.dynamic_shapes_checks import as_int, checked_dynamic_shapes, shown_range
from aotcuda.lowering.size_guards import first_failing_size_assertion

# torch's notice for a module attribute holding tensors that forward assigned while it was exported, telling to
# register it as a buffer: nn.GRU/LSTM/RNN refresh their own ``_flat_weights`` list (references to their parameters)
# under export, which torch restores afterwards and the program does not read; the advice cannot apply to torch's
# own modules, and showed on every lowering of a recurrent layer
_RNN_WEIGHT_NOTICE = r"The tensor attributes? (self\.[\w.]*_flat_weights\[\d+\](, )?)+ (were|was) assigned during export"


def export_program(model, args, kwargs, dynamic_shapes, narrowed: dict[str, str] | None = None) -> ExportedProgram:
    """``_export_program`` without torch's notice about nn.GRU/LSTM/RNN's own ``_flat_weights`` (_RNN_WEIGHT_NOTICE)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RNN_WEIGHT_NOTICE, category=UserWarning)
        return _export_program(model, args, kwargs, dynamic_shapes, narrowed)


def _export_program(model, args, kwargs, dynamic_shapes, narrowed: dict[str, str] | None = None) -> ExportedProgram:
    """torch.export.export(strict=False); a violated dynamic-shape constraint is checked as described
    above, and one that does not hold becomes a DynamicShapesError that keeps torch's why-lines and
    suggested fixes (its UserError's first line alone says neither). narrowed: filled with {symbol: why}
    for each root Dim whose asked range the program does not take (``said_narrowed_roots``)."""
    dynamic_shapes = checked_dynamic_shapes(model, args, kwargs, dynamic_shapes)
    try:
        return said_narrowed_roots(
            torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False), dynamic_shapes,
            narrowed)
    except torch._dynamo.exc.UserError as exc:
        if "Constraints violated" not in str(exc):
            raise
        violation, error = exc, DynamicShapesError(constraint_violation_message(str(exc)))
    except AssertionError as exc:
        if not _raised_writing_suggested_fixes(exc):
            raise
        violation, error = exc, DynamicShapesError(_unwritten_violation_message(exc))
    try:
        ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False,
                                 prefer_deferred_runtime_asserts_over_guards=True)
    except Exception as retried:  # noqa: BLE001 - the first error is the one the caller can act on
        if _divided_guards_deferred(violation, retried):
            error = DynamicShapesError(constraint_violation_message(str(violation), multiple_hint=False))
        raise error from violation
    failure = first_failing_size_assertion(ep) or narrowed_in_retry(ep, dynamic_shapes)
    if failure is None:
        return said_narrowed_roots(ep, dynamic_shapes, narrowed)
    from aotcuda.runtime.specs import under_dim_names
    from aotcuda.lowering.signature import dim_names

    error.add_note(f"aotcuda: {under_dim_names(failure, dim_names(ep))}")
    raise error from violation


def _divided_guards_deferred(violation: Exception, retried: Exception) -> bool:
    """Whether the retry with deferred asserts failed on a violation with no guard that divides a size, where the
    first one had such a guard: torch could defer it, so the violation is the other guards' (``201 <= samples`` of
    an stft's reflect padding beside ``2 % (2 + 2*(samples // 160)) != 0``), and no multiple is needed for it."""
    return (isinstance(violation, torch._dynamo.exc.UserError) and isinstance(retried, torch._dynamo.exc.UserError)
            and "Constraints violated" in str(retried) and _size_divided(str(retried)) is None)


def _raised_writing_suggested_fixes(exc: AssertionError) -> bool:
    """Whether torch raised ``exc`` while it wrote the suggested fixes of a constraint violation.

    Why: torch.export (2.13) writes them by parsing its own guard text, and a range it solved to a fraction
    fails there: ``x[:, 1:-1] * x[:, :-2]`` with ``Dim("s", min=2)`` (a new user's finite difference, complex or
    real) raised ``AssertionError: Expected op to be '==', got <= for 9/4 <= s`` from ``prettify_results``, in
    place of the constraint violation it was writing, which the user can act on."""
    import traceback

    return any(frame.name == "prettify_results" for frame in traceback.extract_tb(exc.__traceback__))


def _unwritten_violation_message(exc: AssertionError) -> str:
    return ("Constraints violated: some sizes in the dynamic_shapes ranges do not satisfy the model's guards, and "
            f"torch.export failed while it wrote which and its suggested fixes (AssertionError: {exc}, from torch's "
            f"prettify_results).{_fractional_bound_fix(str(exc))} Narrow or change the dynamic_shapes ranges (or the "
            "CLI's --dynamic) so that the guards hold over them, or change the model.")


_FRACTIONAL_BOUND = re.compile(r"for (?:(\d+)/(\d+) (<=|<) (\w+)|(\w+) (<=|<) (\d+)/(\d+))$")


def _fractional_bound_fix(text: str) -> str:
    """Torch's solved bound in the assertion (``9/4 <= s``) as the Dim's min or max it means (s >= 3)."""
    found = _FRACTIONAL_BOUND.search(text.strip())
    if found is None:
        return ""
    if found.group(4) is not None:  # p/q <= name, p/q < name: a min
        p, q, op, name = int(found.group(1)), int(found.group(2)), found.group(3), found.group(4)
        bound, which = (-(-p // q) if op == "<=" else p // q + 1), "min"
    else:  # name <= p/q, name < p/q: a max
        name, op, p, q = found.group(5), found.group(6), int(found.group(7)), int(found.group(8))
        bound, which = (p // q if op == "<=" else -(-p // q) - 1), "max"
    return (f" The range torch solved for the Dim {name} is {'at least' if which == 'min' else 'at most'} {bound} "
            f"({found.group(0)[4:]}): give it {which}={bound}, and lower again to see any guard left.")


def said_narrowed_roots(ep: ExportedProgram, dynamic_shapes, narrowed: dict[str, str] | None = None
                        ) -> ExportedProgram:
    """``ep`` unchanged; a UserWarning for each root Dim of a derived Dim that no input has as a size of its own
    (``seq`` of ``8 * seq``) where torch gave it min 2 instead of the asked 0 or 1, and ``narrowed`` gets
    {symbol: why} for the package's signature, so that a size refused at run time is refused with that reason.

    Why: torch.export records a plain Dim's range as asked (min 1 stays 1, though it traces with sizes of 2
    or more: its 0/1 specialization), but it makes such a root a symbol of its own whose range is the shape
    environment's, which starts at 2, and says nothing: ``8 * Dim("seq", min=1)`` becomes ``8*seq`` in
    [16, ...]. That range is the one the program was traced for, and it is kept: torch decides from it without
    recording a guard (``x.reshape(-1, 8).squeeze(0)`` squeezes nothing because ``b*seq >= 2``), and guards
    that involve other symbols (``b*seq != b``) are not looked at here, so no check of the recorded guards
    can show that a wider range is sound (an earlier widening made that program return (1, 8) where eager
    returns (8,)). The warning says the range the program got, why (a recorded guard that fails at a smaller
    root, where one on the root alone does), and what to do."""
    roots = _derived_roots(dynamic_shapes)
    if not roots:
        return ep
    from aotcuda.lowering.signature import dim_names

    for symbol, name in dim_names(ep).items():
        key = next((s for s in ep.range_constraints if str(s) == symbol), None)
        if name not in roots or key is None:
            continue
        low, high = roots[name]
        got = ep.range_constraints[key]
        _say_narrowed_max(ep, key, symbol, name, as_int(high), as_int(got.upper), narrowed)
        if low >= 2 or as_int(got.lower) != 2:
            continue
        failing = _failing_guard(ep, key, name, range(low, 2))
        why = (f"torch.export traced the model assuming {failing}" if failing is not None else
               "torch.export gives the root of a derived Dim min 2 (its 0/1 specialization) and traced the model "
               f"for {name} >= 2")
        if narrowed is not None:
            _add_reason(narrowed, symbol, f"lowering was asked for {name} >= {low}, but {why}", "min")
        upper = as_int(got.upper)
        warnings.warn(f"aotcuda: the Dim {name} (the root of a derived Dim) was asked for min {low}, but the program "
                      f"takes {name} in [2, {'inf' if upper is None else upper}]: {why}, so the program refuses sizes "
                      f"with {name} < 2, and says why. To take them, lower another program with those dims static at "
                      f"the size {name} < 2 gives" + (f", or change the model's line that needs {failing}"
                                                       if failing is not None else "") + ".",
                      UserWarning, stacklevel=6)  # lower()'s caller: here, export_program, before_compile, lower()
    return ep


class NarrowedReason(str):
    """Why a root Dim's range is narrower than asked (the text a refusal says), with ``bounds``: the ends of the
    asked range the program does not take, ("min",), ("max",) or both. Why: a size past the other end (above an
    asked max of 4096 where only the min was narrowed) was refused with the narrowing's reason and no advice to
    widen the Dim, which is the fix there (a new user's trial, 2026-12-06)."""

    bounds: tuple[str, ...] = ()


def _add_reason(narrowed: dict[str, str] | None, symbol: str, text: str, bound: str) -> None:
    """``narrowed[symbol]`` with this reason added (a root narrowed at both ends keeps both reasons)."""
    if narrowed is None:
        return
    earlier = narrowed.get(symbol)
    reason = NarrowedReason(text if earlier is None else f"{earlier}; {text}")
    reason.bounds = tuple(sorted({*getattr(earlier, "bounds", ()), bound}))
    narrowed[symbol] = reason


def _say_narrowed_max(ep: ExportedProgram, key, symbol: str, name: str, high: int | None, got_high: int | None,
                      narrowed: dict[str, str] | None) -> None:
    """A UserWarning, and ``narrowed[symbol]``, where torch gave the root of a derived Dim a lower max than asked.

    Why: for a derived Dim torch.export narrows the root to what a guard of the model needs, without an error (for a
    plain Dim the same guard is a constraint violation): ``if x.shape[1] > 64`` on ``2 * Dim("m", max=64)`` exported
    with m in [2, 32] and not a word, and the package refused m = 33 with advice to lower it again with a wider range,
    the range that had been asked (breaker 2)."""
    if got_high is None or (high is not None and got_high >= high):
        return
    asked = "no max" if high is None else f"max {high}"
    failing = _failing_guard(ep, key, name, range(got_high + 1, got_high + 2))
    why = (f"torch.export traced the model assuming {failing}" if failing is not None else
           f"torch.export narrowed it to what the model's guards need")
    if narrowed is not None:
        _add_reason(narrowed, symbol, f"lowering was asked for {name} with {asked}, but {why}", "max")
    warnings.warn(f"aotcuda: the Dim {name} (the root of a derived Dim) was asked for {asked}, but the program takes "
                  f"{name} up to {got_high}: {why}, so the program refuses sizes with {name} > {got_high}, and says "
                  f"why. Give {name} max={got_high} to lower it as it is, or change the model's line that needs it "
                  "to take larger sizes.", UserWarning, stacklevel=7)


def narrowed_in_retry(ep: ExportedProgram, dynamic_shapes) -> str | None:
    """None when every Dim the caller named in ``dynamic_shapes`` is a dim of ``ep``'s inputs over the whole range
    asked; otherwise which one is not, and what the program takes instead.

    Why: with ``prefer_deferred_runtime_asserts_over_guards`` torch defers guards, but a specialization is no guard:
    a model that makes a dim a constant (``istft(..., length=x.shape[-1])`` made ``64*frames`` the example's 3200)
    exported without an error, its root's range [50, 50], and lower() wrote a package that took one size where
    the caller had asked for [256, 32000]. Torch's own error (the first export's) says so; the retry must not
    hide it. A root of a derived Dim asked for min 0 or 1 may get min 2 (its 0/1 specialization, which
    ``said_narrowed_roots`` reports)."""
    asked = _asked_dims(dynamic_shapes)
    if not asked:
        return None
    from aotcuda.lowering.signature import dim_names

    ranges = {}
    for symbol, name in dim_names(ep).items():
        key = next((s for s in ep.range_constraints if str(s) == symbol), None)
        if key is not None:
            ranges[name] = ep.range_constraints[key]
    for name, (low, high) in asked.items():
        shown = shown_range(low, high)
        got = ranges.get(name)
        if got is None:
            return (f"the model made the Dim {name} (asked {shown}) a constant: the program takes one size there, "
                    "so it is refused")
        got_low, got_high, high = as_int(got.lower), as_int(got.upper), as_int(high)
        low_kept = got_low is not None and got_low <= max(low, 2)
        high_kept = got_high is None if high is None else (got_high is None or got_high >= high)
        if not (low_kept and high_kept):
            return (f"the program takes the Dim {name} only in [{got_low}, {got_high if got_high is not None else 'inf'}]"
                    f", where {shown} was asked: the model narrowed it, so it is refused")
    return None


def _asked_dims(dynamic_shapes, roots_only: bool = False) -> dict[str, tuple[int, object]]:
    """{name: (min, max)} of the named Dims in ``dynamic_shapes`` (the root of a derived Dim for it); only the roots
    of derived Dims (``seq`` of ``8 * Dim("seq")``) with ``roots_only``. Dim.AUTO, Dim.DYNAMIC and Dim.STATIC are
    hints, not Dims, and are left out."""
    try:
        from torch.export.dynamic_shapes import _DerivedDim, _Dim  # torch 2.11-2.15
    except ImportError:  # a torch without them: its ranges are kept as torch gives them
        return {}
    asked, stack = {}, [dynamic_shapes]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, _Dim) and (isinstance(value, _DerivedDim) or not roots_only):
            while isinstance(value, _DerivedDim):
                value = value.root
            asked[value.__name__] = (value.min, value.max)
    return asked


def _failing_guard(ep: ExportedProgram, symbol, name: str, values: range) -> str | None:
    """A guard of ``ep``'s shape environment on ``symbol`` alone that fails at one of ``values``, as text with
    ``symbol`` written ``name``."""
    import sympy

    shape_env = next((v.fake_mode.shape_env for v in (n.meta.get("val") for n in ep.graph.find_nodes(op="placeholder"))
                      if isinstance(v, torch.Tensor) and getattr(v, "fake_mode", None) is not None), None)
    replacements = getattr(shape_env, "replacements", {})  # the inputs' symbols as the root's (8*seq)
    for guard in getattr(shape_env, "guards", ()):
        expr = guard.expr.xreplace(replacements)
        if expr.free_symbols == {symbol}:
            for value in values:
                if expr.xreplace({symbol: sympy.Integer(value)}) is not sympy.true:
                    shown = f"{expr.lhs} != {expr.rhs}" if isinstance(expr, sympy.Ne) else str(expr)
                    return shown.replace(str(symbol), name)
    return None


def _derived_roots(dynamic_shapes) -> dict[str, tuple[int, int | float]]:
    """{root name: (min, max) asked} for the derived Dims (``8 * Dim("seq")``) anywhere in ``dynamic_shapes``."""
    return _asked_dims(dynamic_shapes, roots_only=True)


def constraint_violation_message(text: str, multiple_hint: bool = True) -> str:
    """torch's constraint-violation text without its pointers to TORCH_LOGS, draft_export and the docs, and
    aotcuda's advice; ``multiple_hint=False`` where the guards that divide a size are known to hold (no multiple
    of their divisor is needed)."""
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
    fixed = _sizes_fixed(text_kept)
    name, dim, divisor = (_size_divided(text_kept) if multiple_hint else None) or (None, None, None)
    if fixed:  # torch's fix is a constant: no multiple of anything fits, whatever the guards divide by
        divisor = None
        advice.extend(_fixed_size_advice(*entry) for entry in fixed)
    elif divisor is not None:
        advice.append(f"The model needs this size to be a multiple of {divisor} (a guard divides it by {divisor}): "
                      f"export it as {divisor} * torch.export.Dim(...), e.g. dynamic_shapes={{{name!r}: {{{dim}: "
                      f"{divisor} * torch.export.Dim('n', min=..., max=...)}}}} (on the CLI: --dynamic "
                      f"{name}:{dim}:MIN:MAX:n*{divisor}, MIN and MAX the sizes' range), whatever torch's own "
                      "suggestion above leaves open (a max of oo: aotcuda's lowering may need a finite one).")
    if "Suggested fixes" in text_kept and not fixed:
        advice.append("Adjust dynamic_shapes (or the CLI's --dynamic) as suggested, or change the model.")
    elif divisor is None and not specialized and not fixed:  # a constant is no guard to narrow to: export_hints' note says why
        advice.append("Narrow or change the dynamic_shapes ranges (or the CLI's --dynamic) so that the guard above "
                      "holds over them, or change the model.")
    return "\n".join([text_kept, *advice])


_SPECIALIZED_VALUE = re.compile(r"for (\w+) = L\['(\w+)'\]\.size\(\)\[(\d+)\] resulted in a specialized value of (-?\d+)")
_CONSTANT_FIX = re.compile(r"^\s+(\w+) = (-?\d+)\s*$", re.MULTILINE)
_DIM_OF = re.compile(r"values of (\w+) = L\['(\w+)'\]\.size\(\)\[(\d+)\]")


def _sizes_fixed(text: str) -> list[tuple[str, str, int | None, int]]:
    """(torch's Dim name, input, dim, value) of each dynamic size torch says the model fixes: "solving the guards
    generated for H = L['x'].size()[2] resulted in a specialized value of 32", or a suggested fix ``H = 32``
    (the input and dim from the guard lines where they name it, else None)."""
    found = {dim_name: (dim_name, arg, int(dim), int(value))
             for dim_name, arg, dim, value in _SPECIALIZED_VALUE.findall(text)}
    fixes = text.partition("Suggested fixes:")[2]
    where = {dim_name: (arg, int(dim)) for dim_name, arg, dim in _DIM_OF.findall(text)}
    for dim_name, value in _CONSTANT_FIX.findall(fixes):
        if dim_name not in found:
            arg, dim = where.get(dim_name, (None, None))
            found[dim_name] = (dim_name, arg, dim, int(value))
    return list(found.values())


def _fixed_size_advice(dim_name: str, arg: str | None, dim: int | None, value: int) -> str:
    where = f" (input {arg!r}, dim {dim})" if arg is not None else ""
    cli = f" (on the CLI: no --dynamic for {arg}:{dim})" if arg is not None else ""
    return (f"The model fixes {dim_name}{where} to {value}: its guards hold at that size alone, so no dynamic range "
            f"(and no multiple of a Dim) fits it. Keep that size static: drop it from dynamic_shapes{cli} and lower "
            f"at {value}; or change the line of the model that fixes it: the guards above show what the size is compared "
            f"with (an if on the size, a window clamped to it such as min(window, {dim_name})).")


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
