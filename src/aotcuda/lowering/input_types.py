"""Input containers the package cannot store, refused before compiling.

An AOTI package stores the call's input structure as torch pytree JSON, which names each container type by the
serialized name it was registered with. ``torch.export.register_dataclass(Batch)`` (as torch's own docs write
it) and ``register_pytree_node`` without ``serialized_type_name=`` register none, and AOTInductor then failed at
the end of the compile with torch's ``NotImplementedError: No registered serialization name for <class
'models.Batch'> found. Please update your _register_pytree_node call with a `serialized_type_name` kwarg`` (a call
the user never made). So the exported program's input spec is read here, and such a container is refused with
the argument that holds it and the registration that fixes it. Outputs of such a type come back as a plain
tuple instead (``pipeline._make_outputs_serializable``); for a type of the user's (not torch's named tuples, which
have no serialized name in torch 2.11-2.14) a warning says so and gives the same registration.
"""

from __future__ import annotations

import inspect
import warnings

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram


def _unnamed(cls) -> bool:
    entry = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
    name = getattr(entry, "serialized_type_name", None)
    return not isinstance(name, str) or name == pytree.NO_SERIALIZED_TYPE_NAME_FOUND


def _first_unnamed(spec: pytree.TreeSpec) -> type | None:
    stack = [spec]
    while stack:
        node = stack.pop()
        if node.is_leaf():
            continue
        if _unnamed(node.type):
            return node.type
        children = node.children() if hasattr(node, "children") else node.children_specs  # torch 2.13 / 2.11
        stack.extend(reversed(list(children)))
    return None


def _arguments(model: torch.nn.Module, in_spec: pytree.TreeSpec) -> list[tuple[str, pytree.TreeSpec]]:
    """(forward's argument name, its spec) for each argument of the exported call: (args, kwargs)."""
    args_spec, kwargs_spec = (in_spec.children() if hasattr(in_spec, "children") else in_spec.children_specs)
    try:
        names = [name for name, parameter in inspect.signature(model.forward).parameters.items()
                 if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    positional = args_spec.children() if hasattr(args_spec, "children") else args_spec.children_specs
    by_keyword = kwargs_spec.children() if hasattr(kwargs_spec, "children") else kwargs_spec.children_specs
    return ([(names[i] if i < len(names) else f"#{i}", spec) for i, spec in enumerate(positional)] +
            list(zip(kwargs_spec.context or [], by_keyword)))


def _registration(cls) -> str:
    qualified = f"{cls.__module__}.{cls.__qualname__}"
    if hasattr(cls, "__dataclass_fields__"):
        return f"torch.export.register_dataclass({cls.__qualname__}, serialized_type_name={qualified!r})"
    return f"torch.utils._pytree.register_pytree_node({cls.__qualname__}, ..., serialized_type_name={qualified!r})"


def warn_of_unnamed_output_type(out_spec: pytree.TreeSpec) -> None:
    """A UserWarning where forward returns a type of the user's registered without a serialized name: the package
    returns its tensors as a plain tuple (a ``Out(logits, hidden)`` came back as ``(logits, hidden)`` without a word)."""
    cls = _first_unnamed(out_spec)
    if cls is None or cls.__module__ == "torch.return_types":
        return
    warnings.warn(
        f"forward returns a {cls.__module__}.{cls.__qualname__}, a type registered with torch's pytree without a "
        f"serialized name, which the package cannot store: a call returns its tensors as a plain tuple, in order. "
        f"To get the {cls.__qualname__} back, register it with one, where it is defined: {_registration(cls)}, then "
        "lower again.", UserWarning, stacklevel=2)


def check_input_types_serializable(ep: ExportedProgram, model: torch.nn.Module) -> None:
    """Raise TypeError where an argument of the exported call holds a container type registered with torch's pytree
    without a serialized name (which the package needs), naming the argument, the type and the fix."""
    signature = ep.module_call_graph[0].signature
    if signature is None or _first_unnamed(signature.in_spec) is None:
        return
    try:
        arguments = _arguments(model, signature.in_spec)
    except (TypeError, ValueError):  # a call spec of another form: named by the type alone
        arguments = [("", signature.in_spec)]
    for name, spec in arguments:
        cls = _first_unnamed(spec)
        if cls is None:
            continue
        qualified = f"{cls.__module__}.{cls.__qualname__}"
        registration = _registration(cls)
        where = f"input {name!r} holds" if name else "the inputs hold"
        raise TypeError(
            f"{where} a {qualified}, a type registered with torch's pytree without a serialized name, which the "
            f"package needs to store the inputs' structure (AOTInductor would fail at the end of the compile: No "
            f"registered serialization name for {cls}). Register it with one, where it is defined: {registration} "
            f"(the module's path and the class's name, the module aotcuda.load imports to rebuild it), then lower "
            f"again; or pass its tensors as arguments of their own.")
