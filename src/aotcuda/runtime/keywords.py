"""A Program's call arguments against the exported module's input pytree spec ``((args...), {kwargs})``.

Eager modules accept a positional parameter by keyword (``model(x=t)`` for ``forward(self, x)``), and so
does torch's ``ep.module()``, which rebuilds forward's signature from the ExportedProgram's
``forward_arg_names``. An AOTI package keeps only the input spec, so ``bind_keywords`` does that binding
with the names recorded in aotcuda's signature entry (or, for older packages, the graph-signature names
of inputs that are one tensor each, which torch.export takes from forward's parameters).

When the structure still differs, ``structure_difference`` names the first place, in the caller's terms
("input 'x' (#0) is a list of 2, expected a tensor", as every input check names an input), instead of
printing two TreeSpecs.
"""

from __future__ import annotations

from aotcuda.errors import InputError, clipped, names_quoted, quoted, terminal_safe

_MISSING = object()


def _children(spec) -> list:
    return [spec.child(i) for i in range(spec.num_children)] if hasattr(spec, "child") else list(spec.children_specs)


def _args_and_kwargs_specs(in_spec):
    """(positional spec, keyword spec) of an ``((args...), {kwargs})`` input spec, or (None, None)."""
    if in_spec.type is not tuple or in_spec.num_children != 2:
        return None, None
    args_spec, kwargs_spec = _children(in_spec)
    if args_spec.type is not tuple or kwargs_spec.type is not dict:
        return None, None
    return args_spec, kwargs_spec


def positional_names(in_spec, signature: dict | None, input_specs) -> list[str | None]:
    """forward's positional parameter names, one per positional argument of ``in_spec`` (None: unknown).

    From the signature's ``forward_arg_names`` (torch's ModuleCallSignature field, recorded by
    aotcuda.lower); else, for a positional argument that is one tensor, its input's graph-signature name.
    """
    args_spec, _ = _args_and_kwargs_specs(in_spec)
    if args_spec is None:
        return []
    count = args_spec.num_children
    recorded = (signature or {}).get("forward_arg_names")
    if isinstance(recorded, list) and len(recorded) >= count:
        return [str(name) for name in recorded[:count]]
    names: list[str | None] = []
    leaf = 0
    aligned = input_specs is not None and len(input_specs) == in_spec.num_leaves
    for child in _children(args_spec):
        names.append(input_specs[leaf].name if aligned and child.is_leaf() else None)
        leaf += child.num_leaves
    return names


def bind_keywords(args: tuple, kwargs: dict, in_spec, names: list[str | None],
                  unknown_hint: str = "") -> tuple[tuple, dict]:
    """(positional arguments, keyword arguments in the spec's order), with keywords that name a positional
    parameter moved to its position.

    Raises InputError for too many or missing positional arguments, one argument given twice, and
    unknown or missing keywords; each message says what the program takes (``unknown_hint``: added to the
    unknown-keyword message).
    """
    args_spec, kwargs_spec = _args_and_kwargs_specs(in_spec)
    if args_spec is None:
        if kwargs:
            raise InputError("this package's input spec has no keyword arguments: pass its inputs positionally")
        return tuple(args), {}
    count, keywords = args_spec.num_children, list(kwargs_spec.context)
    takes = _what_it_takes(names, keywords)
    if len(args) > count:
        raise InputError(f"the program takes {count} positional argument(s){_listed(names)}, got {len(args)}; "
                         f"{_by_keyword_hint(len(args) - count, keywords, kwargs)}")
    slots = list(args) + [_MISSING] * (count - len(args))
    rest = {}
    for key, value in kwargs.items():
        if key in keywords or key not in names:
            rest[key] = value
            continue
        position = names.index(key)
        if position < len(args):
            raise InputError(f"argument {key!r} given twice, as positional #{position} and by keyword")
        slots[position] = value
    unknown = sorted(set(rest) - set(keywords))
    if unknown:
        buffers = ("; caller-provided output buffers go to program.execute(inputs, outputs=[...])"
                   if "outputs" in unknown or "out" in unknown else "")
        raise InputError(f"keyword arguments {names_quoted(unknown)} do not match the exported module's: the program takes "
                         f"{takes}; call it as the exported module was called{buffers}{unknown_hint}")
    absent = [i for i, value in enumerate(slots) if value is _MISSING]
    if absent:
        if not set(kwargs) & set(filter(None, names)):  # nothing bound by keyword: a count problem
            raise InputError(f"the program takes {count} positional argument(s){_listed(names)}, got {len(args)}; "
                             "call it as the exported module was called")
        missing = ", ".join(repr(names[i]) if names[i] else f"#{i}" for i in absent)
        raise InputError(f"missing argument(s) {missing}; the program takes {takes}")
    lacking = [k for k in keywords if k not in rest]
    if lacking:
        raise InputError(f"missing keyword argument(s) {lacking}: the program takes {takes}; "
                         "call it as the exported module was called")
    return tuple(slots), {key: rest[key] for key in keywords}


def in_spec_order(value, spec):
    """``value`` with each plain dict that holds the same keys as the exported spec's dict at its place rebuilt in
    the spec's key order, at every level: eager and torch's ``ep.module()`` match a dict by its keys, but pytree
    flattens a dict in its keys' order, so ``{"y": y, "x": x}`` gave another spec than the exported ``{"x", "y"}``
    (and was refused). Containers are rebuilt only where something inside them moved; a dict with other keys is
    left as it is, for ``structure_difference`` to name the keys missing or not taken. Walks the spec, which the
    package bounds, never deeper than the value's own structure matches it."""
    if spec.is_leaf() or type(value) is not spec.type:
        return value
    if spec.type is dict:
        keys = spec.context
        if len(value) != len(keys) or any(key not in value for key in keys):
            return value
        ordered = {key: in_spec_order(value[key], child) for key, child in zip(keys, _children(spec))}
        same = list(value) == list(keys) and all(ordered[key] is value[key] for key in keys)
        return value if same else ordered
    if spec.type in (tuple, list) and len(value) == spec.num_children:
        items = [in_spec_order(item, child) for item, child in zip(value, _children(spec))]
        return value if all(a is b for a, b in zip(items, value)) else spec.type(items)
    return value


def holds_inner_dicts(in_spec) -> bool:
    """Whether an ``(args, kwargs)`` input spec holds a dict below its top level, whose keys a caller may give in
    another order (``in_spec_order``; the keyword dict itself ``bind_keywords`` puts in order): a program without one
    skips that walk at each call (5 µs on the 2-core machine for three tensors)."""
    args, kwargs = _args_and_kwargs_specs(in_spec)
    if args is None:
        return True  # not the usual form: let in_spec_order walk it

    def has_dict(spec) -> bool:
        return not spec.is_leaf() and (spec.type is dict or any(has_dict(child) for child in _children(spec)))

    return any(has_dict(child) for child in (*_children(args), *_children(kwargs)))


def leaf_names(in_spec) -> list[str]:
    """Each flat leaf of an ``(args, kwargs)`` input spec named as the caller writes it (``#0``,
    ``'use_cache'``, ``'extra'['scale']``)."""
    return [_caller_path(path) for path in _leaf_key_paths(in_spec)]


def output_leaf_names(out_spec) -> list[str]:
    """Each flat leaf of an output spec named as the caller reaches it in the result ``out``: ``out`` (one
    tensor), ``out[0]``, ``out['logits']``, ``out.last_hidden_state`` (a named tuple), ``out['pair'][1]``.

    Raises ValueError for a container type registered with torch's pytree without key paths.
    """
    return [f"out{path}" for path in _leaf_key_paths(out_spec)]


def _leaf_key_paths(spec) -> list[str]:
    """torch's key path (``pytree.keystr``) of each flat leaf of a TreeSpec, in flat order."""
    import torch.utils._pytree as pytree

    tree = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
    return [pytree.keystr(path) for path, _ in pytree.tree_flatten_with_path(tree)[0]]


def _caller_path(path: str) -> str:
    """``[0][1]`` → ``#1``; ``[1]['use_cache']`` → ``'use_cache'``: the (args, kwargs) pytree key path of a
    leaf, in the caller's terms."""
    if path.startswith("[1]"):
        rest = path[3:]
        key, _, tail = rest[1:].partition("]")
        return key + (f"{tail}" if tail else "")
    if path.startswith("[0]"):
        index, _, tail = path[4:].partition("]")
        return f"#{index}" + tail
    return path


def _by_keyword_hint(extra: int, keywords: list[str], kwargs: dict) -> str:
    """What to do with ``extra`` positional arguments too many: the keywords not given, which the extra ones likely
    are (forward's ``*, speaker_id``), passed by name; else call it as exported."""
    unpassed = [key for key in keywords if key not in kwargs][:extra]
    if not unpassed:
        return "call it as the exported module was called"
    one = len(unpassed) == 1
    passed = ", ".join(f"{key}=..." if key.isidentifier() else f"**{{{quoted(key)}: ...}}" for key in unpassed)
    return (f"{', '.join(map(quoted, unpassed))} {'is' if one else 'are'} keyword-only (the program takes "
            f"{'it' if one else 'them'} by name, as the exported module was called): pass {passed}")


def _shown(name: str) -> str:
    """A package's argument name as a message lists it: escaped and cut. forward_arg_names is checked at load
    (printable, at most 256 characters), but a package without it (an older one, or one whose lowering left it out)
    names its arguments by its inputs' names, which load takes as any string (break41's review: an ESC sequence in
    one came back raw in every count refusal)."""
    return clipped(terminal_safe(name), 256)


def _listed(names: list[str | None]) -> str:
    return f" ({', '.join(map(_shown, names))})" if names and all(names) else ""


def _what_it_takes(names: list[str | None], keywords: list[str]) -> str:
    positional = ", ".join(_shown(name) if name else f"#{i}" for i, name in enumerate(names)) or "no positional argument"
    return f"{positional}{' and keyword(s) ' + ', '.join(map(_shown, keywords)) if keywords else ''}"


_UNKNOWN = object()  # a value structure_difference was not given


def structure_difference(given, expected, names: list[str | None], values: tuple = (_UNKNOWN, _UNKNOWN),
                         not_a_tensor=None) -> str:
    """The first place where a call's ``(args, kwargs)`` spec differs from the exported one, in words.

    ``values``: the call's ``(args, kwargs)`` themselves, so that a leaf is named by its type: a spec's leaf
    may be any object that is no container pytree knows (a dict subclass was named "a tensor").
    ``not_a_tensor(leaf, value, where)``: called for a list or tuple given where the exported module took the flat
    leaf ``leaf`` (a tensor, which ``torch.as_tensor(value, dtype=...)`` would make); it may raise its own error."""
    given_args, given_kwargs = _args_and_kwargs_specs(given)
    expected_args, expected_kwargs = _args_and_kwargs_specs(expected)
    if given_args is None or expected_args is None:
        return f"the arguments are structured as {given}, but the program was exported with {expected}"
    args, kwargs = values
    arg_values = list(args) if isinstance(args, tuple) else [_UNKNOWN] * given_args.num_children
    pairs = [((f"input {names[i]!r} (#{i})" if i < len(names) and names[i] else f"input #{i}"), g, e, v)
             for i, (g, e, v) in enumerate(zip(_children(given_args), _children(expected_args), arg_values))]
    pairs += [(f"keyword input {key!r}", g, e, kwargs.get(key, _UNKNOWN) if isinstance(kwargs, dict) else _UNKNOWN)
              for key, g, e in zip(expected_kwargs.context, _children(given_kwargs), _children(expected_kwargs))]
    leaf = 0
    for where, g, e, v in pairs:
        found = _first_difference(g, e, where, v, leaf, not_a_tensor)
        if found:
            return found
        leaf += e.num_leaves
    return f"the arguments are structured as {given}, but the program was exported with {expected}"


def _first_difference(given, expected, where: str, value=_UNKNOWN, leaf: int = 0, not_a_tensor=None) -> str | None:
    if given == expected:
        return None
    if expected.is_leaf() and type(value) in (list, tuple) and not_a_tensor is not None:
        not_a_tensor(leaf, value, where)  # a nested list of numbers where a tensor goes: how to make one
    if (given.is_leaf() or expected.is_leaf() or given.type is not expected.type
            or given.num_children != expected.num_children or given.context != expected.context):
        import collections.abc

        hint = " (pass a plain dict, e.g. dict(value))" if (
            expected.type is dict and given.type is not dict and isinstance(value, collections.abc.Mapping)) else ""
        if expected.type is dict and given.type is dict and not given.is_leaf():
            hint = _keys_difference(list(given.context), list(expected.context))
        return f"{where} is {_describe(given, value)}, expected {_describe(expected)}{hint}"
    keys = expected.context if expected.type is dict else range(expected.num_children)
    for key, g, e, v in zip(keys, _children(given), _children(expected), _child_values(value, given)):
        found = _first_difference(g, e, f"{where}[{quoted(key)}]", v, leaf, not_a_tensor)
        if found:
            return found
        leaf += e.num_leaves
    return f"{where} is {_describe(given, value)}, expected {_describe(expected)}"


def _keys_difference(given: list, expected: list) -> str:
    """The keys a dict lacks and those it has that the program does not take (its keys' order does not matter)."""
    missing = [key for key in expected if key not in given]
    extra = [key for key in given if key not in expected]
    parts = ([f"missing key(s) {names_quoted(missing)}"] if missing else []) + (
        [f"key(s) {names_quoted(extra)} not taken by the program"] if extra else [])
    return f" ({'; '.join(parts)})" if parts else ""


def _child_values(value, spec) -> list:
    """The values of a container's children, as pytree flattened them (its own flatten function: a container pytree
    knows is one of Python's or torch's, whose flattening runs no caller code)."""
    import torch.utils._pytree as pytree

    node = pytree.SUPPORTED_NODES.get(spec.type)
    if value is not _UNKNOWN and node is not None:
        try:
            children = list(node.flatten_fn(value)[0])
            if len(children) == spec.num_children:
                return children
        except Exception:  # noqa: BLE001 - described without the values then
            pass
    return [_UNKNOWN] * spec.num_children


def _describe(spec, value=_UNKNOWN) -> str:
    if spec.is_leaf():
        import torch

        return "a tensor" if value is _UNKNOWN or isinstance(value, torch.Tensor) else _a(type(value).__name__)
    kind = getattr(spec.type, "__name__", str(spec.type))
    if spec.type is dict:
        return f"a dict with keys {names_quoted(spec.context)}"
    return f"{_a(kind)} of {spec.num_children}"


def _a(kind: str) -> str:
    kind = kind[:60]
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"
