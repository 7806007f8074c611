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
"""

from __future__ import annotations

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


def returned_inputs(signature: dict | None, path: str = "") -> tuple[tuple[int, int], ...]:
    """(output slot, input index) for each output the signature marks ``"returns_input"``; () where none is
    (older packages, programs that return no input as it is).

    Raises PackageError for a mark that is not an input's index, or names an input whose dtype, shape or complex
    dtype differ from the output's: a package edited or damaged, whose calls would hand back a tensor of another
    kind than the output's.
    """
    inputs, outputs = (signature or {}).get("inputs"), (signature or {}).get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        return ()
    found = []
    for slot, spec in enumerate(outputs):
        if not isinstance(spec, dict) or "returns_input" not in spec:
            continue
        index = spec["returns_input"]
        if type(index) is not int or not 0 <= index < len(inputs) or not isinstance(inputs[index], dict):
            raise PackageError(f"{path!r}: its signature says output #{slot} returns input {index!r}, which is not "
                               f"the index of one of its {len(inputs)} inputs: the package was edited or damaged; "
                               "lower the model again")
        differ = differing_fields(inputs[index], spec)
        if differ:
            raise PackageError(f"{path!r}: its signature says output #{slot} returns input #{index} as it is, but "
                               f"their {', '.join(differ)} differ: the package was edited or damaged; lower the model "
                               "again")
        found.append((slot, index))
    return tuple(found)


def with_returned_inputs(results: list, callers_inputs: list, returned: tuple[tuple[int, int], ...]) -> list:
    """``results`` with each returned input's slot holding the caller's own tensor (a new list)."""
    results = list(results)
    for slot, index in returned:
        results[slot] = callers_inputs[index]
    return results
