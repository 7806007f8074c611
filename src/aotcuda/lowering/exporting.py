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

import inspect
import itertools
import math
import operator
import re
import warnings

import torch
from torch.export import ExportedProgram

from aotcuda.errors import DynamicShapesError, clipped

# The most size combinations checked per assertion (a Dim of [1, 32768], or two of about [1, 181]).
MAX_CHECKED_POINTS = 1 << 15


def export_program(model, args, kwargs, dynamic_shapes, narrowed: dict[str, str] | None = None) -> ExportedProgram:
    """torch.export.export(strict=False); a violated dynamic-shape constraint is checked as described
    above, and one that does not hold becomes a DynamicShapesError that keeps torch's why-lines and
    suggested fixes (its UserError's first line alone says neither). narrowed: filled with {symbol: why}
    for each root Dim whose asked range the program does not take (``said_narrowed_roots``)."""
    dynamic_shapes = _as_structure(model, args, kwargs, dynamic_shapes)
    _check_dynamic_shapes_names(model, dynamic_shapes, args, kwargs)
    dynamic_shapes = _dims_checked(model, args, kwargs, dynamic_shapes)
    try:
        return said_narrowed_roots(
            torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False), dynamic_shapes,
            narrowed)
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
    failure = first_failing_size_assertion(ep) or narrowed_in_retry(ep, dynamic_shapes)
    if failure is None:
        return said_narrowed_roots(ep, dynamic_shapes, narrowed)
    from aotcuda.runtime.specs import under_dim_names
    from aotcuda.lowering.signature import dim_names

    error.add_note(f"aotcuda: {under_dim_names(failure, dim_names(ep))}")
    raise error from violation


def _as_structure(model, args, kwargs, dynamic_shapes):
    """``dynamic_shapes`` as the dicts, lists and tuples torch.export reads it as: a ShapesCollection (keyed by the
    input tensors) or an AdditionalInputs resolved through its own ``dynamic_shapes(model, args, kwargs)``.

    Why: the checks of this module (a Dim the retry narrowed or made a constant, a root given min 2) find the caller's
    Dims by walking those containers; a ShapesCollection is none of them, so Resynthesis's ``16 * frames`` asked for
    [4, 500] through one exported with frames in [50, 50] and no word (breaker 2)."""
    resolve = getattr(dynamic_shapes, "dynamic_shapes", None)
    if dynamic_shapes is None or isinstance(dynamic_shapes, (dict, list, tuple)):
        return dynamic_shapes
    if not callable(resolve):  # torch: a raw AssertionError ("expected dynamic_shapes to be dict, ...") or TypeError
        raise DynamicShapesError(
            f"dynamic_shapes must be a dict keyed by forward's argument names, a tuple of one entry per argument, or "
            f"None; got {clipped(repr(dynamic_shapes), 80)} ({type(dynamic_shapes).__name__}); e.g. "
            "dynamic_shapes={'x': {0: Dim('batch')}}")
    return resolve(model, args, kwargs or None)


def _check_dynamic_shapes_names(model, dynamic_shapes, args=(), kwargs=None) -> None:
    """DynamicShapesError when ``dynamic_shapes`` is a dict with a key that is not an argument of the model's
    forward, or whose keys are not the arguments the example call passes (torch takes exactly those: a key for an
    argument left to forward's default, or none for one passed, is refused too): torch's own error for it ends
    with advice to try ``draft_export()``, which is not aotcuda's."""
    if not isinstance(dynamic_shapes, dict) or not isinstance(model, torch.nn.Module):
        return
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):  # a forward without a signature Python can read: torch says what it says
        return
    parameters = signature.parameters.values()
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return
    names = [p.name for p in parameters]
    unknown = [key for key in dynamic_shapes if key not in names]
    if unknown:
        shown = ", ".join(repr(clipped(str(key), 60)) for key in unknown[:5])
        raise DynamicShapesError(
            f"dynamic_shapes names {shown}, which {type(model).__name__}.forward does not take: its arguments are "
            f"{', '.join(names) or 'none'}. Key dynamic_shapes by those names (e.g. {{{names[0] if names else 'x'!r}: "
            "{0: Dim('batch')}}), or give a tuple with one entry per argument, in order")
    try:
        passed = list(signature.bind(*args, **(kwargs or {})).arguments)
    except TypeError:  # the example call does not fit forward: torch.export says so
        return
    left_out = [key for key in dynamic_shapes if key not in passed]
    missing = [name for name in passed if name not in dynamic_shapes]
    if left_out or missing:
        said = []
        if left_out:
            said.append(f"names {', '.join(repr(clipped(str(key), 60)) for key in left_out[:5])}, which the example "
                        "call leaves to forward's default: leave "
                        f"{'it' if len(left_out) == 1 else 'them'} out of dynamic_shapes (or pass "
                        f"{'it' if len(left_out) == 1 else 'them'} in the example call)")
        if missing:
            said.append(f"has no key for {', '.join(repr(name) for name in missing[:5])}, which the example call "
                        f"passes: give {'it' if len(missing) == 1 else 'each'} a key (None for a static input)")
        raise DynamicShapesError(
            f"dynamic_shapes {'; and it '.join(said)}. torch.export takes a dict keyed by exactly the arguments the "
            f"example call passes ({', '.join(passed) or 'none'})")


def _dims_checked(model, args, kwargs, dynamic_shapes):
    """``dynamic_shapes`` with each tensor's dict keys checked against its rank and negative ones counted from the
    end; DynamicShapesError for a dim the input does not have, or a list or tuple of another length than its rank.

    Why: for a dict key outside [-rank, rank) torch raises a raw ``IndexError: list assignment index out of
    range``; and torch 2.13 takes a negative key but loses what it says: ``{-1: Dim("b", min=0)}`` got b in
    [2, oo], and ``{"x": {-2: b}, "y": {0: b}}`` a constraint violation though both are dim 0."""
    if not isinstance(dynamic_shapes, (dict, list, tuple)) or not isinstance(model, torch.nn.Module):
        return dynamic_shapes
    try:
        arguments = inspect.signature(model.forward).bind(*args, **(kwargs or {})).arguments
    except (TypeError, ValueError):  # torch says what it says about inputs that do not fit forward
        return dynamic_shapes
    ranges: dict = {}  # one Dim name, one range: {name: (min, max, where first given)}
    if isinstance(dynamic_shapes, dict):
        return {name: _dims_of(name, arguments[name], spec, ranges) if name in arguments else spec
                for name, spec in dynamic_shapes.items()}
    checked = [_dims_of(name, value, spec, ranges)
               for name, value, spec in zip(arguments, arguments.values(), dynamic_shapes)]
    return _same_kind(dynamic_shapes, checked)  # a tuple: in forward's order


def _same_kind(specs, checked: list):
    """``specs`` (a list or tuple) with its first entries replaced by ``checked``; itself when none changed."""
    if all(new is old for new, old in zip(checked, specs)):
        return specs
    return type(specs)(checked + list(specs[len(checked):]))


def _is_dim_hint(spec) -> bool:
    """Whether ``spec`` is Dim.AUTO, Dim.DYNAMIC or Dim.STATIC, which torch.export takes for a Python-number input."""
    return type(spec).__name__ == "_DimHint"


def _dims_of(where: str, value, spec, ranges: dict):
    """One input's ``spec`` checked against ``value`` (``_dims_checked``), through lists, tuples and dicts; each Dim
    given to a tensor's dim checked against ``ranges`` (``_check_dim``)."""
    if isinstance(value, torch.Tensor):
        rank, shape = value.dim(), tuple(value.shape)
        if spec is not None and not isinstance(spec, (dict, list, tuple)):
            # torch: "Unexpected input tensor shape Dim('b', min=0) specified at `dynamic_shapes['x']` (expected ...)"
            raise DynamicShapesError(
                f"dynamic_shapes for {where} is {clipped(repr(spec), 80)} ({type(spec).__name__}), but {where} is a "
                f"tensor of {rank} dims (shape {shape}): its entry says which of its dims are dynamic, as a dict "
                f"(e.g. {{0: {_as_dim(spec)}}}), a list or tuple of one entry per dim, or None for a static input")
        if isinstance(spec, dict):
            bad = [d for d in spec if isinstance(d, int) and not -rank <= d < rank]
            if bad:
                raise DynamicShapesError(
                    f"dynamic_shapes for {where} names dim {bad[0]}, but {where} has {rank} dims (shape {shape}): "
                    f"a dim must be in [{-rank}, {rank}) (negative counts from the end, as in torch). Key the dict by "
                    f"a dim {where} has (e.g. {{0: Dim('batch')}})")
            counted = {d % rank if isinstance(d, int) else d: d for d in spec}
            if len(counted) < len(spec):
                twice = next(d for d in spec if isinstance(d, int) and d < 0 and d % rank in spec)
                raise DynamicShapesError(f"dynamic_shapes for {where} names dim {twice % rank} twice, as {twice % rank} "
                                         f"and {twice} ({where} has {rank} dims): give each dim once")
            for d, given in counted.items():
                _check_dim(where, d, spec[given], ranges)
            return {d: spec[given] for d, given in counted.items()}
        if isinstance(spec, (list, tuple)) and len(spec) != rank:
            raise DynamicShapesError(
                f"dynamic_shapes for {where} has {len(spec)} entries, but {where} has {rank} dims (shape {shape}): "
                f"a list or tuple gives one entry per dim, in order (Dim.STATIC for a static one), or give a dict "
                f"of only the dynamic dims (e.g. {{0: Dim('batch')}})")
        for d, dim in enumerate(spec if isinstance(spec, (list, tuple)) else ()):
            _check_dim(where, d, dim, ranges)
    elif isinstance(value, (bool, int, float)) and not (spec is None or isinstance(spec, int) or _is_dim_hint(spec)):
        # torch: a raw "AssertionError: expected dynamic_shape to be None, int, or _DimHint for _IntWrapper", or
        # "Unable to specify input integers as dynamic through named Dims"
        raise DynamicShapesError(
            f"dynamic_shapes for {where} is {clipped(repr(spec), 80)}, but {where} is {type(value).__name__} "
            f"{clipped(repr(value), 40)}, not a tensor: it has no dims to make dynamic; give it None (the program is "
            f"exported with {where}={clipped(repr(value), 40)})")
    elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        return _same_kind(spec, [_dims_of(f"{where}[{i}]", item, item_spec, ranges)
                                 for i, (item, item_spec) in enumerate(zip(value, spec))])
    elif isinstance(value, dict) and isinstance(spec, dict):
        return {key: _dims_of(f"{where}[{key!r}]", value[key], item_spec, ranges) if key in value else item_spec
                for key, item_spec in spec.items()}
    return spec


def _check_dim(where: str, d: int, dim, ranges: dict) -> None:
    """DynamicShapesError for what dim ``d`` of the tensor ``where`` is given, when torch.export takes it for no dim
    (a str: "Unexpected dimension mapped to index 0 ... but got 'batch' instead"), or when it is a Dim whose name
    ``ranges`` holds with another range (torch: "Found different definitions Dim('b', max=8) and Dim('b', max=16)
    for the same symbolic dimension", naming no input). A derived Dim (``8 * seq``) is checked by its root."""
    dim_type = _dim_type()
    if dim_type is None or dim is None or isinstance(dim, int) or _is_dim_hint(dim):  # no dim type: torch says
        return
    if not isinstance(dim, dim_type):
        raise DynamicShapesError(
            f"dynamic_shapes for {where} gives dim {d} {clipped(repr(dim), 80)} ({type(dim).__name__}), which is no "
            f"dim: give it a Dim (e.g. {_as_dim(dim)}, from torch.export import Dim), an int for a static size, "
            "Dim.AUTO, Dim.DYNAMIC or Dim.STATIC, or None")
    while hasattr(dim, "root"):  # a derived Dim: its range follows its root's
        dim = dim.root
    name, here = dim.__name__, (dim.min, dim.max, f"{where} dim {d}")
    first = ranges.setdefault(name, here)
    if first[:2] != here[:2]:
        raise DynamicShapesError(
            f"dynamic_shapes gives the Dim {name!r} two ranges: {_shown_range(*first[:2])} at {first[2]} and "
            f"{_shown_range(*here[:2])} at {here[2]}. A Dim's name is one size, shared by every dim it is given to: "
            f"make the Dim once ({name} = Dim({name!r}, ...)) and give that one to each, or give dims whose sizes "
            "differ Dims of different names")


def _as_dim(spec) -> str:
    """``spec``, given where a dim's Dim goes, as the Dim it likely meant: itself for a Dim or Dim hint (as Python
    spells it: Dim.AUTO, where its repr is "DimHint(AUTO)"), Dim('batch') for the name "batch", else Dim('batch')."""
    if isinstance(spec, _dim_type() or ()):
        return clipped(repr(spec), 60)
    if _is_dim_hint(spec):
        hint = re.fullmatch(r"\w*\((\w+)\)", repr(spec))
        return f"Dim.{hint[1] if hint else 'AUTO'}"
    return f"Dim({spec!r})" if isinstance(spec, str) and spec.isidentifier() else "Dim('batch')"


def _dim_type() -> type | None:
    """The type of a Dim, derived ones too (``_Dim``, torch 2.11-2.15: a Dim's metaclass where a Dim is a class);
    None in a torch without it."""
    try:
        from torch.export.dynamic_shapes import _Dim
    except ImportError:
        return None
    return _Dim


def _shown_range(low, high) -> str:
    return f"[{low}, {_as_int(high) if _as_int(high) is not None else 'inf'}]"


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
        _say_narrowed_max(ep, key, symbol, name, _as_int(high), _as_int(got.upper), narrowed)
        if low >= 2 or _as_int(got.lower) != 2:
            continue
        failing = _failing_guard(ep, key, name, range(low, 2))
        why = (f"torch.export traced the model assuming {failing}" if failing is not None else
               "torch.export gives the root of a derived Dim min 2 (its 0/1 specialization) and traced the model "
               f"for {name} >= 2")
        if narrowed is not None:
            _add_reason(narrowed, symbol, f"lowering was asked for {name} >= {low}, but {why}", "min")
        upper = _as_int(got.upper)
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
        shown = f"[{low}, {_as_int(high) if _as_int(high) is not None else 'inf'}]"
        got = ranges.get(name)
        if got is None:
            return (f"the model made the Dim {name} (asked {shown}) a constant: the program takes one size there, "
                    "so it is refused")
        got_low, got_high, high = _as_int(got.lower), _as_int(got.upper), _as_int(high)
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
    elif divisor is None and not specialized:  # a constant is no guard to narrow to: export_hints' note says why
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
