"""Inputs that forward returns (``return y, x``, ``x.add_(1); return x``): the caller gets its own tensor back, as
from eager.

Eager's ``return y, x`` hands back the very object the caller passed: a write into that output reaches ``x``, and
``out[1] is x``; so does ``x.add_(1); return x``, with ``x`` holding the write. The generated code returns a handle for
every slot, so without this the caller got another tensor: over the storage the call ran on where the call read ``x``
in place, but a copy where the checks had laid ``x`` out as exported first (a non-contiguous ``x``), so that a write
into the output missed ``x``; and for a written input, a tensor of the written values that is not ``x``. The
lowering records each output that is a user input, written in place or not (the signature's ``"returns_input"``, the
input's index: ``aotcuda.lowering.signature``, ``aotcuda.lowering.returned_writes``); each call puts the caller's
tensor in that slot, after the run's writes reached it. A slot whose result goes into a caller's buffer
(``execute(..., outputs=...)``) is copied into it as any other (functionalization gives that result the input's
value after every write of the call).

``return torch.view_as_complex(x)`` (or ``torch.view_as_real(z)``) returns the input too, seen as the other kind:
eager's result is a view of the caller's tensor (a write into either reaches the other). The package takes and
returns complex values as their real pairs, so that output is the input's pair as it is, but of another complex
kind; the signature marks it ``"returns_view_of_input"`` (not ``"returns_input"``, which a runtime from before
refuses where the complex kinds differ: it then returns the package's result, of eager's values), and each call puts
that view of the caller's tensor in the slot. Where the caller's tensor has no such view (eager's
``view_as_complex`` refuses its strides), the slot keeps the package's result.
"""

from __future__ import annotations

from typing import Callable

import torch

from aotcuda.errors import PackageError

# What must agree between an output and the input it says it returns (the specs as the signature writes them).
_SAME_FIELDS = ("dtype", "shape", "complex")


def _field(spec: dict, field: str):
    """A spec's field as compared: a shape as its sizes and expressions (an input dim may add "narrowed")."""
    value = spec.get(field)
    if field == "shape" and isinstance(value, list):
        return [dim.get("expr") if isinstance(dim, dict) else dim for dim in value]
    return value


def differing_fields(input_spec: dict, output_spec: dict) -> list[str]:
    """The fields of ``_SAME_FIELDS`` in which an output's spec differs from the input it would return."""
    return [field for field in _SAME_FIELDS if _field(input_spec, field) != _field(output_spec, field)]


# The complex dtype whose real pair has each real dtype (ReplaceComplexWithRealPass's boundary, as the specs name them).
_PAIR_COMPLEX = {"float16": "complex32", "float32": "complex64", "float64": "complex128"}


def view_of_input(input_spec: dict, output_spec: dict) -> str | None:
    """"view_as_complex" or "view_as_real" where an output is that view of an input (the same pair: dtype and shape
    agree, and exactly one of them is complex, of that pair's complex dtype); None otherwise."""
    if differing_fields(input_spec, output_spec) != ["complex"]:
        return None
    complex_dtype = output_spec.get("complex") or input_spec.get("complex")
    if None not in (input_spec.get("complex"), output_spec.get("complex")):
        return None
    if complex_dtype != _PAIR_COMPLEX.get(output_spec.get("dtype")):
        return None
    return "view_as_complex" if output_spec.get("complex") else "view_as_real"


_VIEWS: dict[str, Callable] = {"view_as_complex": torch.view_as_complex, "view_as_real": torch.view_as_real}


def _marked_input(signature_inputs: list, slot: int, spec: dict, key: str, path: str) -> int:
    index = spec[key]
    if type(index) is not int or not 0 <= index < len(signature_inputs) or not isinstance(signature_inputs[index], dict):
        raise PackageError(f"{path!r}: its signature says output #{slot} returns input {index!r}, which is not "
                           f"the index of one of its {len(signature_inputs)} inputs: the package was edited or "
                           "damaged; lower the model again")
    return index


def returned_inputs(signature: dict | None, path: str = "") -> tuple[tuple[int, int, Callable | None], ...]:
    """(output slot, input index, view) for each output the signature marks ``"returns_input"`` (view None: the
    caller's tensor itself) or ``"returns_view_of_input"`` (view: ``torch.view_as_complex`` or
    ``torch.view_as_real``); () where none is (older packages, programs that return no input).

    Raises PackageError for a mark that is not an input's index, or names an input whose dtype, shape or complex
    dtype differ from the output's (for a view: that is not the output's pair of another complex kind): a package
    edited or damaged, whose calls would hand back a tensor of another kind than the output's.
    """
    inputs, outputs = (signature or {}).get("inputs"), (signature or {}).get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        return ()
    found = []
    for slot, spec in enumerate(outputs):
        if not isinstance(spec, dict):
            continue
        if "returns_input" in spec:
            index = _marked_input(inputs, slot, spec, "returns_input", path)
            differ = differing_fields(inputs[index], spec)
            if differ:
                raise PackageError(f"{path!r}: its signature says output #{slot} returns input #{index} as it is, "
                                   f"but their {', '.join(differ)} differ: the package was edited or damaged; lower "
                                   "the model again")
            found.append((slot, index, None))
        elif "returns_view_of_input" in spec:
            index = _marked_input(inputs, slot, spec, "returns_view_of_input", path)
            view = view_of_input(inputs[index], spec)
            if view is None:
                raise PackageError(f"{path!r}: its signature says output #{slot} is input #{index} seen as the "
                                   "other complex kind (view_as_complex or view_as_real), but it is not (dtype, "
                                   "shape or complex): the package was edited or damaged; lower the model again")
            found.append((slot, index, _VIEWS[view]))
    return tuple(found)


def _view_or_result(view: Callable, tensor: torch.Tensor, result):
    try:
        return view(tensor)
    except RuntimeError:  # strides view_as_complex cannot take (eager refuses them): the package's own result
        return result


def with_returned_inputs(results: list, callers_inputs: list,
                         returned: tuple[tuple[int, int, Callable | None], ...]) -> list:
    """``results`` with each returned input's slot holding the caller's own tensor, or that view of it (a new
    list)."""
    results = list(results)
    for slot, index, view in returned:
        tensor = callers_inputs[index]
        results[slot] = tensor if view is None else _view_or_result(view, tensor, results[slot])
    return results
