"""The wire format of `POST /predict`: safetensors files in, safetensors files out.

A request body is one safetensors file (https://huggingface.co/docs/safetensors) holding the program's
flat inputs under their names (`Program.input_specs[i].name`, which `aotcuda inspect` lists: the exported
forward's argument names, e.g. ``x``). A response body is one safetensors file holding the flat outputs
as ``output_0``, ``output_1``, … in the container's order.

safetensors stores every tensor dtype aotcuda packages use except complex128 (and the 8-bit float
kinds); `unsupported_dtypes` says which of a program's do not travel, so that a server refuses to start
rather than failing on every request.
"""

from __future__ import annotations

import functools
import json
import math
import struct

import torch

from aotcuda.package_format import json_depth
from aotcuda.serving.body import (LateBodyError, RequestError, SlowBodyError, read_body,  # noqa: F401 - re-exported
                                  shown, too_large)

__all__ = ["LateBodyError", "RequestError", "SlowBodyError", "check_answer_size", "check_tensor_sizes", "decode_inputs",
           "encode_outputs", "read_body", "unsupported_dtypes"]


def _safetensors():
    try:
        import safetensors.torch as safetensors_torch
    except ModuleNotFoundError as error:
        # a missing module (an ImportError too): pytest.importorskip skips on it; any other ImportError (an
        # install that is there but broken) propagates as it is
        raise ModuleNotFoundError("aotcuda.serving needs safetensors and ray[serve]: pip install 'aotcuda[serve]' "
                                  "(from a clone: pip install -e '.[serve]')", name=error.name) from error
    return safetensors_torch


def decode_inputs(body: bytes, names: list[str], max_bytes: int, fixed: dict | None = None) -> list[torch.Tensor]:
    """The flat inputs of one request, in the container's order.

    Args:
        body: the request body, a safetensors file.
        names: the program's input names, in the container's order.
        max_bytes: refuse bodies larger than this (bytes).
        fixed: the arguments fixed at lowering (``Program.constant_inputs``: {name: value}), which a request that
            names one is told are no part of it.

    Raises RequestError (an InputError) naming what is wrong: too large, not safetensors, a missing or an
    unknown input name, an empty tensor whose other dims hold more elements than the body has bytes.
    """
    if len(body) > max_bytes:
        raise too_large(len(body), max_bytes, "has")
    _check_header_names(body, names, fixed or {})  # before a tensor is built: a million names cost the header's parse only
    try:
        tensors = _safetensors().load(body)
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types, all meaning "not a file"
        raise RequestError(_NOT_A_FILE.format(shown(str(exc)))) from None
    inputs = [tensors[name] for name in names]
    for name, tensor in zip(names, inputs):
        _check_dims_carried(name, tensor, len(body))
    return inputs


def _check_dims_carried(name: str, tensor: torch.Tensor, body_bytes: int) -> None:
    """RequestError for an empty tensor whose other dims hold more elements than the body has bytes: the program's
    memory follows the request's shape, not its bytes, and an empty tensor's dims cost none. A 112-byte body of x
    with shape (0, 2**28) made a program that sums over dim 0 allocate and return 1 GiB (2**32: 16 GiB). A tensor
    with elements has at most as many as its bytes, so the request's bytes now bound every size it sets, as they
    would for a tensor of those dims with elements."""
    if tensor.numel() or not tensor.dim():
        return
    held = math.prod(size for size in tensor.shape if size)
    if held > body_bytes:
        raise RequestError(f"input {name!r} has shape {shown(str(tuple(tensor.shape)), 100)}: an empty tensor whose "
                           f"other dims hold {held} elements, in a request body of {body_bytes} bytes. Its dims cost "
                           "no bytes, but the program's memory follows them, so this server takes no empty tensor "
                           "whose other dims hold more elements than the body has bytes; send the tensor's real shape")


# A safetensors header of the program's inputs is a few hundred bytes; one of this size holds no more.
MAX_HEADER_BYTES = 1 << 20
_NOT_A_FILE = ("the request body is not a safetensors file ({}); send the inputs as "
               "safetensors.torch.save({{name: tensor, ...}})")


def _check_header_names(body: bytes, names: list[str], fixed: dict) -> None:
    """RequestError unless the body's safetensors header names exactly the program's inputs (read from the
    header alone: 8 bytes of length, then JSON, bounded in size and depth before it is parsed)."""
    if len(body) < 8:
        raise RequestError(_NOT_A_FILE.format("shorter than its 8-byte header length"))
    (size,) = struct.unpack("<Q", body[:8])
    if size > min(MAX_HEADER_BYTES, len(body) - 8):
        raise RequestError(_NOT_A_FILE.format(f"its header claims {size} bytes; a header of this program's "
                                              f"inputs is at most {MAX_HEADER_BYTES}"))
    header = body[8:8 + size]
    try:
        # Decoded strictly as UTF-8 (safetensors' header encoding) before anything reads it: json.loads(bytes)
        # would detect UTF-16/32 where json_depth reads the bytes as UTF-8, so both read this one str.
        text = header.decode("utf-8")  # a UnicodeDecodeError is a ValueError: refused below
        if json_depth(text, stop=4) > 3:  # {name: {"shape": [...]}}: three levels
            raise ValueError("its header nests deeper than a safetensors header")
        entries = json.loads(text)
        if not isinstance(entries, dict):
            raise ValueError("its header is not a JSON object")
    except (ValueError, RecursionError) as exc:
        raise RequestError(_NOT_A_FILE.format(shown(str(exc)))) from None
    given = [name for name in entries if name != "__metadata__"]
    missing = [name for name in names if name not in entries]
    unknown = [name for name in given if name not in names]
    constants = [name for name in unknown if name in fixed]
    if constants:  # a client that sends forward's every argument: say why this one is no input, not "unknown"
        said = ", ".join(f"{name!r} (the program computes with {fixed[name]!r})" for name in constants[:5])
        others = [name for name in unknown if name not in fixed]
        rest = (f"; {'missing input(s) ' + _names_listed(missing) if missing else ''}"
                f"{'; ' if missing and others else ''}"
                f"{'unknown input(s) ' + ', '.join(repr(shown(name, 40)) for name in others[:5]) if others else ''}"
                if missing or others else "")
        raise RequestError(f"{said} {'is an argument' if len(constants) == 1 else 'are arguments'} fixed at lowering, "
                           f"no part of a request: leave {'it' if len(constants) == 1 else 'them'} out (the program "
                           f"takes {_names_listed(names)}; another value needs the model lowered again with "
                           f"it){rest}")
    if missing or unknown:
        parts = ([f"missing input(s) {_names_listed(missing)}"] if missing else []) + (
            [f"unknown input(s) {_names_listed(unknown, 5, 40)}"] if unknown else [])
        raise RequestError(f"{'; '.join(parts)}: the program takes {_names_listed(names)}")


def _names_listed(names: list[str], limit: int = 20, chars: int = 60) -> str:
    """``names`` quoted, at most ``limit`` of them, each cut to ``chars``: a signature may list 10,000 inputs of 1,024 characters,
    and a replica built the whole list for every bad request before cutting its answer (review41c: 20 MB a
    refusal)."""
    listed = ", ".join(repr(shown(name, chars)) for name in names[:limit])
    return listed + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_answer_size(output_specs, bindings: dict[str, int], max_bytes: int) -> None:
    """RequestError when the outputs a request's shapes give (``bindings``: each shape symbol's value, from
    check_inputs) would pass ``max_bytes`` together, before the program runs. Why: an output's size is an
    expression of the inputs' sizes, and may grow faster than the request's bytes: a 128 KiB request of x (2, 16384)
    to x[:, :, None] * x[:, None, :] (no max on dim 1) made the program allocate and return 2 GiB (43 s, 6.4 GiB
    peak on one replica), a 256 KiB one 8 GiB. A dim the shapes do not give (data-dependent) counts at its max,
    or not at all where it has none (a program served with allow_unbounded_outputs)."""
    from aotcuda.runtime.checks import evaluate_dim

    total, largest = 0, None
    for spec in output_specs or ():
        size = spec.dtype.itemsize
        for dim in spec.dims:
            value = evaluate_dim(dim, bindings)
            size *= max(0, value if value is not None else dim.max if dim.max is not None else 1)
        total += size
        if largest is None or size > largest[0]:
            largest = (size, spec)
    if total > max_bytes:
        size, spec = largest
        shape = shown(str(tuple(evaluate_dim(dim, bindings) for dim in spec.dims)), 100)
        raise RequestError(f"the answer to this request would be {total} bytes (output {shown(spec.name, 40)!r} of "
                           f"shape {shape} and {spec.dtype}: {size} bytes), more than this server's limit of "
                           f"{max_bytes} (--max-response-bytes); the program's outputs grow with the inputs' sizes: "
                           "send smaller inputs, or start the server with a larger --max-response-bytes")


def check_answer_bytes(outputs: list[torch.Tensor], max_bytes: int) -> None:
    """RequestError when the outputs a run made pass ``max_bytes`` together, before they are encoded. Why:
    check_answer_size counts a data-dependent dim with no max (a program served with allow_unbounded_outputs) as
    nothing, so a request of a few bytes (lengths=[2**22]) got a 4 MiB answer from a server started with
    --max-response-bytes 1000000 (a new user's trial), and its encoding would have held it twice more; the run's
    memory is what the deployer accepted, the answer's size is still the limit's."""
    total = sum(t.numel() * t.element_size() for t in outputs)
    if total > max_bytes:
        largest = max(range(len(outputs)), key=lambda i: outputs[i].numel() * outputs[i].element_size())
        tensor = outputs[largest]
        raise RequestError(f"the answer to this request is {total} bytes (output #{largest} of shape "
                           f"{shown(str(tuple(tensor.shape)), 100)} and {tensor.dtype}), more than this server's limit "
                           f"of {max_bytes} (--max-response-bytes): a size computed from the request's values has no "
                           "upper bound in this program (served with --allow-unbounded-outputs), so it is checked "
                           "after the run. Send values that give a smaller answer, or start the server with a larger "
                           "--max-response-bytes")


def check_tensor_sizes(sizes, bindings: dict[str, int], max_bytes: int) -> None:
    """RequestError when one of the tensors the program makes (``sizes``: batching.tensor_size_records of the
    signature's "tensor_sizes", outputs and intermediates) would be larger than ``max_bytes`` for a request's
    shapes (``bindings``), before the program runs. Why: an intermediate may grow faster than every output and
    than the request: ``(x @ x.T).softmax(-1) @ x`` answers a 1 MiB request of x (32768, 8) with 1 MiB, and made a
    4 GiB tensor for it (the process peaked at 8.4 GiB, 36 s on 2 cores; 2 MiB: 16 GiB a tensor)."""
    from aotcuda.runtime.shape_expressions import EVALUATION_ERRORS, evaluate_expression

    for text, expression in sizes:
        try:
            value = evaluate_expression(expression, bindings)
            size = int(value) if value.is_number else None
        except EVALUATION_ERRORS:
            size = None
        if size is not None and size > max_bytes:
            raise RequestError(f"for this request's shapes the program would make a tensor of {size} bytes "
                               f"({shown(text, 60)} bytes in the inputs' dims), more than this server's limit of "
                               f"{max_bytes} (--max-tensor-bytes); its memory grows faster than the request: send "
                               "smaller inputs, or start the server with a larger --max-tensor-bytes")


def encode_outputs(outputs: list[torch.Tensor]) -> bytes:
    """A safetensors file with ``output_<i>`` per flat output, on the CPU. Slots sharing one tensor, and outputs
    viewing one storage, are written as separate copies: safetensors refuses shared storage."""
    seen: set[int] = set()
    named = {}
    for index, tensor in enumerate(outputs):
        tensor = tensor.detach().cpu().contiguous()
        storage = tensor.untyped_storage().data_ptr()
        named[f"output_{index}"] = tensor.clone() if storage in seen else tensor
        seen.add(storage)
    return _safetensors().save(named)


def unsupported_dtypes(dtypes) -> list[torch.dtype]:
    """The dtypes among ``dtypes`` that safetensors cannot store."""
    return [dtype for dtype in dict.fromkeys(dtypes) if not _carried(dtype)]


@functools.cache
def _carried(dtype: torch.dtype) -> bool:
    """Whether safetensors stores ``dtype``: asked once a dtype (Client.predict asks at every call)."""
    try:
        _safetensors().save({"probe": torch.zeros(1, dtype=dtype)})
    except Exception:  # noqa: BLE001 - a dtype safetensors has no code for
        return False
    return True
