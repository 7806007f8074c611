"""Named-tuple outputs in a package's call spec: stored by name and field names, rebuilt at load.

torch's pytree flattens any namedtuple, but serializes one only where its class was registered with a
serialized name (``_register_namedtuple``), which a user's ``Out = namedtuple("Out", ["a", "b"])`` never is:
the package's output spec could not be stored, and the lowering once replaced the whole spec with a flat tuple
(a ``{"out": Out(y, z)}`` came back as ``(y, z)``, the dict's keys lost too).

So, at lowering, ``storable`` turns each such namedtuple node into a node of ``NamedTupleNode``, a type
registered here, whose stored context is the class's module, qualified name and field names. At load, that
context becomes the class again (``_class``): the class itself where its module is imported, or importable and
the name lies in it (as for the other container types, runtime/pytree_types.py: the spec is the model library's,
which is code anyway), and it has the same fields; otherwise (a class of ``__main__`` or a function's) a
namedtuple of the same name and fields, so ``out.a`` works as in eager, though ``isinstance(out, Out)`` cannot.
Nothing read from the context is evaluated: names are looked up in module dicts, never through ``getattr``.
"""

from __future__ import annotations

import collections
import importlib
import json
import sys
import threading

import torch.utils._pytree as pytree

from aotcuda.errors import PackageError
from aotcuda.package_format import load_json


class NamedTupleNode(tuple):
    """The pytree type of a stored namedtuple node; never instantiated (unflatten builds the node's class)."""

    __slots__ = ()


_rebuilt: dict[tuple, type] = {}  # (module, name, fields) -> the class made for it: one class per process
_rebuilt_lock = threading.Lock()


def _to_context(cls: type) -> str:
    return json.dumps({"module": cls.__module__, "name": cls.__qualname__, "fields": list(cls._fields)})


def _from_context(text: str) -> type:
    try:
        context = load_json(text, "the package", "a named tuple's context in the outputs' call spec")
    except PackageError as exc:
        raise NotImplementedError(str(exc)) from None  # load_spec reads the structure plain then
    if not (isinstance(context, dict) and isinstance(context.get("module"), str) and isinstance(context.get("name"), str)
            and isinstance(context.get("fields"), list) and all(isinstance(f, str) for f in context["fields"])):
        raise NotImplementedError(f"a named tuple's context in the outputs' call spec is malformed: {text[:200]!r}")
    return _class(context["module"], context["name"], tuple(context["fields"]))


def _class(module: str, name: str, fields: tuple[str, ...]) -> type:
    found = _defined(module, name)
    if found is not None and pytree.is_namedtuple_class(found) and tuple(found._fields) == fields:
        return found
    with _rebuilt_lock:
        key = (module, name, fields)
        if key not in _rebuilt:
            short = name.rpartition(".")[2]
            cls = collections.namedtuple(short if short.isidentifier() else "NamedTuple", fields, rename=True)
            cls.__qualname__ = cls.__name__
            _rebuilt[key] = cls
        return _rebuilt[key]


def _defined(module: str, name: str):
    """The object ``module.name`` names: only through module and class dicts, importing ``module`` only where it is
    not a ``__main__`` nor under one (``__main__`` is the running script, not the lowering's; ``unittest.__main__``
    runs tests)."""
    if "<locals>" in name:
        return None
    found = sys.modules.get(module)
    # a __main__ module runs a program at import, and importing a.__main__.b imports a.__main__ first
    if found is None and "__main__" not in module.split("."):
        try:
            found = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - not importable here: the namedtuple is made from its fields
            return None
    for part in name.split("."):
        found = vars(found).get(part) if hasattr(found, "__dict__") else None
        if found is None:
            return None
    return found


pytree.register_pytree_node(
    NamedTupleNode,
    lambda node: (list(node), type(node)),
    lambda values, cls: cls(*values),
    serialized_type_name=f"{__name__}.NamedTupleNode",
    to_dumpable_context=_to_context,
    from_dumpable_context=_from_context,
)


def _serializable_name(cls: type) -> bool:
    entry = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
    return isinstance(getattr(entry, "serialized_type_name", None), str) and \
        entry.serialized_type_name != getattr(pytree, "NO_SERIALIZED_TYPE_NAME_FOUND", None)


def storable(spec: pytree.TreeSpec) -> pytree.TreeSpec:
    """``spec`` with each namedtuple node that torch cannot serialize made a ``NamedTupleNode`` node (same class as
    context, same children): the same unflatten, now storable in a package."""
    if spec.is_leaf():
        return spec
    children = [storable(child) for child in (spec.children() if hasattr(spec, "children") else spec.children_specs)]
    kind = spec.type
    if kind is collections.namedtuple and isinstance(spec.context, type) and not _serializable_name(spec.context):
        kind = NamedTupleNode
    return pytree.TreeSpec(kind, spec.context, children)
