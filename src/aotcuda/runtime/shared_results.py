"""Output slots that hold one result (``return out, out, k``, ``{"y": y, "again": y}``): one tensor object, as from
eager.

Eager hands back the same object in every slot where forward returns one tensor twice (``o[0] is o[1]``). The
generated code puts one handle in those slots when the result is a buffer of its own, and the ownership rule adopts
it once (``ownership.adopt_all``); but where the result is a view (``(x * 2).t()``, ``x.view(-1)``, ``y[1:]``) it
makes a new handle per slot over the same memory, so the caller got two tensors: ``o[0] is o[1]`` False, and a
``resize_`` or ``set_`` of one missed the other. The complex boundary's views and the CUDA graphs' copies out of
their static buffers make one object per slot too. The lowering marks each slot whose result is an earlier slot's
(the same node of the exported graph: the signature's ``"same_result_as"``, that slot's place among the outputs;
``aotcuda.lowering.signature``), and each call hands the earlier slot's tensor there.

The exported graph cannot tell ``return y, y`` from ``return y.detach(), y.detach()`` (export drops the detach):
both are one node, so both slots get one tensor, where eager's second program gives two objects over one memory.
"""

from __future__ import annotations

from aotcuda.errors import PackageError
from aotcuda.runtime.returned_inputs import differing_fields

KEY = "same_result_as"


def shared_results(signature: dict | None, path: str = "") -> tuple[tuple[int, int], ...]:
    """(output slot, earlier slot) for each output the signature marks ``"same_result_as"``; () where none is
    (older packages, programs that return no result twice).

    Raises PackageError for a mark that is not an earlier output's place, names a slot itself marked (the mark
    names the first slot of the result), or an output whose dtype, shape or complex dtype differ: a package edited
    or damaged, whose calls would hand back a tensor of another kind than the output's.
    """
    outputs = (signature or {}).get("outputs")
    if not isinstance(outputs, list):
        return ()
    found = []
    for slot, spec in enumerate(outputs):
        if not isinstance(spec, dict) or KEY not in spec:
            continue
        first = spec[KEY]
        if type(first) is not int or not 0 <= first < slot or not isinstance(outputs[first], dict) \
                or KEY in outputs[first] or differing_fields(outputs[first], spec):
            raise PackageError(f"{path!r}: its signature says output #{slot} is the result of output {first!r}, "
                               "which is not an earlier output of the same dtype, shape and complex dtype: the "
                               "package was edited or damaged; lower the model again")
        found.append((slot, first))
    return tuple(found)


def with_shared_results(results: list, shared: tuple[tuple[int, int], ...]) -> list:
    """``results`` with each marked slot holding its first slot's tensor (a new list)."""
    results = list(results)
    for slot, first in shared:
        results[slot] = results[first]
    return results
