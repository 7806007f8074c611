"""lower()'s dynamic_shapes checked against forward and the example inputs before torch.export reads them: what torch
refused in its own words (a raw AssertionError or IndexError, "Unexpected input tensor shape ...", "Found different
definitions Dim(...)", each naming no argument and often ending in advice to try draft_export()), or took and lost
(a negative dim's Dim), is a DynamicShapesError here that names the argument, the dim and the fix."""

from __future__ import annotations

import inspect
import re

import torch
import torch.utils._pytree as pytree

from aotcuda.errors import DynamicShapesError, clipped


def checked_dynamic_shapes(model, args, kwargs, dynamic_shapes):
    """``dynamic_shapes`` as torch.export is to read it (``_as_structure``), its names checked against forward's
    (``_check_dynamic_shapes_names``) and each tensor's dims against the tensor (``_dims_checked``: negative dims
    counted from the end). Raises DynamicShapesError."""
    dynamic_shapes = _as_structure(model, args, kwargs, dynamic_shapes)
    _check_dynamic_shapes_names(model, dynamic_shapes, args, kwargs)
    return _dims_checked(model, args, kwargs, dynamic_shapes)


def _as_structure(model, args, kwargs, dynamic_shapes):
    """``dynamic_shapes`` as the dicts, lists and tuples torch.export reads it as: a ShapesCollection (keyed by the
    input tensors) or an AdditionalInputs resolved through its own ``dynamic_shapes(model, args, kwargs)``.

    Why: the checks of exporting.py (a Dim the retry narrowed or made a constant, a root given min 2) find the caller's
    Dims by walking those containers; a ShapesCollection is none of them, so Resynthesis's ``16 * frames`` asked for
    [4, 500] through one exported with frames in [50, 50] and no word (breaker 2)."""
    resolve = getattr(dynamic_shapes, "dynamic_shapes", None)
    if dynamic_shapes is None or isinstance(dynamic_shapes, (dict, list, tuple)):
        return _registered_types_as_lists(dynamic_shapes)
    if not callable(resolve):  # torch: a raw AssertionError ("expected dynamic_shapes to be dict, ...") or TypeError
        raise DynamicShapesError(
            f"dynamic_shapes must be a dict keyed by forward's argument names, a tuple of one entry per argument, or "
            f"None; got {clipped(repr(dynamic_shapes), 80)} ({type(dynamic_shapes).__name__}); e.g. "
            "dynamic_shapes={'x': {0: Dim('batch')}}")
    return resolve(model, args, kwargs or None)


def _registered_types_as_lists(spec):
    """``spec`` with each instance of a type registered with torch's pytree (a dataclass of dim dicts, as the input
    is a dataclass of tensors: ``Batch(tokens={0: batch}, weights={0: batch})``) as the list of its children, the
    form torch.export reads a registered type's dims in (it refused the instance with "Node type mismatch; expected
    <class 'list'>, but got <class 'Batch'>"); torch's own containers (tuple, list, dict, named tuples) as they are."""
    node_type = pytree._get_node_type(spec)
    entry = pytree.SUPPORTED_NODES.get(node_type)
    if entry is None:
        return spec
    values, context = entry.flatten_fn(spec)
    children = [_registered_types_as_lists(value) for value in values]
    return entry.unflatten_fn(children, context) if node_type in pytree.BUILTIN_TYPES else children


def _check_dynamic_shapes_names(model, dynamic_shapes, args=(), kwargs=None) -> None:
    """DynamicShapesError when ``dynamic_shapes`` is a dict with a key that is not an argument of the model's
    forward, or whose keys are not the arguments the example call passes (torch takes exactly those: a key for an
    argument left to forward's default, or none for one passed, is refused too), or a tuple or list of another length
    than the arguments the call passes (keyword arguments count: torch reads the tuple over them all, in forward's
    order). torch's own errors for those end with advice to try ``draft_export()``, which is not aotcuda's, and the
    tuple's (``inputs has 2 elements, but dynamic_shapes has 1 elements``) names no argument.

    A forward with ``*args`` or ``**kwargs`` (every transformers model's) is checked too, by the names torch binds
    the call to (those two under their own parameter's name): sixth new user, 2026-12-07."""
    if not isinstance(dynamic_shapes, (dict, list, tuple)) or not isinstance(model, torch.nn.Module):
        return
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):  # a forward without a signature Python can read: torch says what it says
        return
    parameters = signature.parameters.values()
    var_keyword = next((p.name for p in parameters if p.kind == p.VAR_KEYWORD), None)
    has_var = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
    names = [p.name for p in parameters]
    unknown = [key for key in dynamic_shapes if key not in names] if isinstance(dynamic_shapes, dict) else []
    if unknown and not has_var:
        shown = ", ".join(repr(clipped(str(key), 60)) for key in unknown[:5])
        raise DynamicShapesError(
            f"dynamic_shapes names {shown}, which {type(model).__name__}.forward does not take: its arguments are "
            f"{', '.join(names) or 'none'}. Key dynamic_shapes by those names (e.g. {{{names[0] if names else 'x'!r}: "
            "{0: Dim('batch')}}), or give a tuple with one entry per argument, in order")
    try:
        bound = signature.bind(*args, **(kwargs or {})).arguments
    except TypeError:  # the example call does not fit forward: torch.export says so
        return
    passed = list(bound)
    if not isinstance(dynamic_shapes, dict):
        if dynamic_shapes and len(dynamic_shapes) != len(passed):
            var_positional = any(p.kind == p.VAR_POSITIONAL for p in parameters)
            raise DynamicShapesError(_tuple_length_message(dynamic_shapes, passed, args, kwargs, var_positional))
        return
    through_var = dict(bound.get(var_keyword) or {}) if var_keyword else {}
    left_out = [key for key in dynamic_shapes if key not in passed]
    missing = [name for name in passed if name not in dynamic_shapes]
    if left_out or missing:
        said = []
        in_var = [key for key in left_out if key in through_var]
        if in_var:
            said.append(f"names {', '.join(repr(clipped(str(key), 60)) for key in in_var[:5])}, which forward takes "
                        f"through **{var_keyword}: torch.export gives no dims to an argument there (keyed under "
                        f"{var_keyword!r} too, torch 2.13 fails). Lower a wrapper module whose forward names "
                        f"{'it' if len(in_var) == 1 else 'them'} (def forward(self, ..., {clipped(str(in_var[0]), 60)}):"
                        f" return model(..., {clipped(str(in_var[0]), 60)}={clipped(str(in_var[0]), 60)}))")
            missing = [name for name in missing if name != var_keyword]
        left_out = [key for key in left_out if key not in through_var]
        if left_out:
            said.append(f"names {', '.join(repr(clipped(str(key), 60)) for key in left_out[:5])}, which the example "
                        "call leaves to forward's default: leave "
                        f"{'it' if len(left_out) == 1 else 'them'} out of dynamic_shapes (or pass "
                        f"{'it' if len(left_out) == 1 else 'them'} in the example call)")
        if missing:
            said.append(f"has no key for {', '.join(repr(name) for name in missing[:5])}, which the example call "
                        f"passes: give {'it' if len(missing) == 1 else 'each'} a key (None for a static input"
                        f"{' or a non-tensor' if any(not isinstance(bound[n], torch.Tensor) for n in missing) else ''})")
        raise DynamicShapesError(
            f"dynamic_shapes {'; and it '.join(said)}. torch.export takes a dict keyed by exactly the arguments the "
            f"example call passes ({', '.join(passed) or 'none'})")


def _tuple_length_message(dynamic_shapes, passed: list, args, kwargs, var_positional: bool) -> str:
    """The refusal of a tuple or list ``dynamic_shapes`` whose length is not the passed arguments': what torch reads
    it against, and the dict that says the same where the tuple held one entry per positional argument."""
    kind = type(dynamic_shapes).__name__
    entries = f"{len(dynamic_shapes)} entr{'y' if len(dynamic_shapes) == 1 else 'ies'}"
    message = (f"dynamic_shapes is a {kind} of {entries}, but the example call passes {len(passed)} argument"
               f"{'' if len(passed) == 1 else 's'} ({', '.join(passed)}, in forward's order): torch.export reads a "
               f"{kind} as one entry per argument the call passes, keyword arguments too")
    keywords = passed[len(args):]
    if keywords and not var_positional and len(dynamic_shapes) == len(args):
        as_dict = {name: (dynamic_shapes[i] if i < len(args) else None) for i, name in enumerate(passed)}
        return (f"{message}. Give {', '.join(keywords)} {'an entry' if len(keywords) == 1 else 'entries'} too (None "
                f"for a static input or a non-tensor), or key dynamic_shapes by name: {clipped(repr(as_dict), 300)}")
    return f"{message}. Give each an entry (None for a static input or a non-tensor), or a dict keyed by those names"


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
    while isinstance(getattr(dim, "root", None), dim_type) and dim.root is not dim:  # derived: its root's range
        dim = dim.root
    name, here = dim.__name__, (dim.min, dim.max, f"{where} dim {d}")
    first = ranges.setdefault(name, here)
    if first[:2] != here[:2]:
        raise DynamicShapesError(
            f"dynamic_shapes gives the Dim {name!r} two ranges: {shown_range(*first[:2])} at {first[2]} and "
            f"{shown_range(*here[:2])} at {here[2]}. A Dim's name is one size, shared by every dim it is given to: "
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


def shown_range(low, high) -> str:
    """A Dim's range as the messages write it: "[2, 64]", "[0, inf]"."""
    return f"[{low}, {as_int(high) if as_int(high) is not None else 'inf'}]"


def as_int(bound) -> int | None:
    """A range bound as an int; None for infinity (sympy's oo, or torch's int_oo, whose is_finite is True)."""
    try:
        return int(bound)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
