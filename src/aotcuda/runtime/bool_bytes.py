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
