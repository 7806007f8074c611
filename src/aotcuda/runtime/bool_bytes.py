"""Bool inputs whose bytes are not 0 or 1, refused before the call.

torch's bool is one byte holding 0 or 1. Memory viewed as bool (``u8.view(torch.bool)``, ``torch.frombuffer(data,
dtype=torch.bool)``, a serving request's BOOL tensor, a bool storage of a torch.save file) may hold any byte, and eager
reads each byte but 0 as True (``c10::load<bool>``). The generated code may read the byte as it is:
``table[mask.long()]`` over a 2-row table read rows 7 and 255, memory past the weights, and returned it where eager
returns row 1 (Inductor drops the bounds check there: it knows a bool is 0 or 1). A copy into the exported layout reads
each byte as eager does, so only what the program reads in place is checked; on the CPU (a CUDA program's callers get
the check where serving decodes a request: ``serving.deployment``).
"""

from __future__ import annotations

import ctypes

import torch

from aotcuda.errors import InputError


def bool_positions(specs) -> tuple[int, ...]:
    """The places of the bool inputs among ``specs`` (a Program without specs looks at every input instead)."""
    return tuple(index for index, spec in enumerate(specs or ()) if spec.dtype == torch.bool)


def checked_bool_copies(tensors: list, positions, labels, callers: list) -> list:
    """``tensors`` checked (``check_bool_bytes``), with each CPU bool input at ``positions`` that is still the caller's
    own tensor (``callers``) replaced by a copy holding 0 for a byte of 0 and 1 for any other, which the run reads: the
    caller's memory may change after the check, and the copy reads each byte as eager does, whenever it was written.
    A copy this call made (into the exported layout) no one else can write, and already holds 0 and 1 only. A written
    input's copy is copied back after the run (``checks.copies_back``), as the exported-layout copies are."""
    check_bool_bytes(tensors, positions, labels)
    copies = tensors
    for index in positions:
        tensor = tensors[index]
        if tensor is callers[index] and isinstance(tensor, torch.Tensor) and tensor.dtype == torch.bool \
                and tensor.device.type == "cpu" and tensor.numel():
            if copies is tensors:
                copies = list(tensors)
            # != 0 on the bytes, not clone(): a copy of the same dtype may copy the bytes as they are
            copies[index] = copy = torch.empty_like(tensor, memory_format=torch.preserve_format)
            torch.ne(tensor.view(torch.uint8), 0, out=copy)
    return copies


def check_bool_bytes(tensors, positions, labels) -> None:
    """InputError naming the first bool input at ``positions`` of ``tensors`` (CPU tensors; others are skipped) that
    holds a byte other than 0 and 1, with the byte, where it is, and the fix."""
    for index in positions:
        tensor = tensors[index]
        if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.bool or tensor.device.type != "cpu" \
                or not tensor.numel():
            continue
        if not tensor.is_contiguous():  # rare (the exported layout is): a copy of its bytes, as they are
            tensor = tensor.view(torch.uint8).contiguous()
        values = _bytes_of(tensor)  # on the memory of ``tensor``, which this frame holds while they are read
        if values.max() <= 1:
            continue
        import numpy

        where = tuple(int(i) for i in numpy.unravel_index(int((values > 1).argmax()), values.shape))
        label = labels[index] if index < len(labels) else str(index)
        raise InputError(f"input {label!r} (#{index}) is a torch.bool tensor holding the byte {int(values[where])} at "
                         f"{where}, where a bool holds 0 or 1 (its memory was written as another dtype and viewed as "
                         "bool: .view(torch.bool), torch.frombuffer): eager reads every byte but 0 as True, the program "
                         "reads the byte's value (a wrong answer, or memory past a table it indexes); pass "
                         "tensor.view(torch.uint8) != 0, the same truth values as bytes of 0 and 1")


def _bytes_of(tensor: torch.Tensor):
    """The bytes of a contiguous tensor as a NumPy array of its shape, on its memory (which the caller keeps alive):
    NumPy's max takes 11 µs a MiB here, torch's 80 µs on one thread and milliseconds where its threads contend. Not
    ``tensor.numpy()``, which marks the caller's storage as never to be resized again."""
    import numpy

    memory = (ctypes.c_uint8 * tensor.numel()).from_address(tensor.data_ptr())
    return numpy.frombuffer(memory, dtype=numpy.uint8).reshape(tuple(tensor.shape))
