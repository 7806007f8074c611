"""The caller's tensors as plain ``torch.Tensor`` objects, made by torch's C code alone, before any check reads them.

Every check and the handles the model container takes read a tensor's attributes (``.shape``, ``.data``,
``.contiguous()``, ``.untyped_storage()``). On a tensor subclass those are the subclass's Python: its
``__torch_function__`` or its own methods and properties, which may answer anything. A subclass whose ``.data``
gave a tensor of a shrunk storage after the checks had read an honest one ended the process (SIGSEGV in the
generated code), and an object that only claims to be a tensor (``__class__`` a property returning
``torch.Tensor``: ``isinstance`` believes it) was handed to torch's handle maker, which read it as a tensor
(SIGSEGV). A plain tensor too can answer for itself: an attribute set on the object (``x.contiguous = ...``) comes
before the class's method. So each argument that is not exactly a ``torch.Tensor`` (or a ``torch.nn.Parameter``,
torch's own, whose ``__torch_function__`` is off) without attributes of its own is replaced here by a plain tensor
on the same memory, made by torch's C methods with subclass ``__torch_function__`` off; a subclass whose C++
operations run Python (``__torch_dispatch__``: FakeTensor, DTensor, TwoTensor) is refused, as is anything whose
real type is no tensor. A plain tensor costs a type test and a look at its ``__dict__`` (~0.06 µs an input).
"""

from __future__ import annotations

import contextlib

import torch
import torch.utils._python_dispatch as python_dispatch

from aotcuda.errors import InputError, OutputError
from aotcuda.runtime.checks import _label, _not_a_tensor, memory_fault

_Tensor, _Parameter, _Base = torch.Tensor, torch.nn.Parameter, torch._C.TensorBase
_PYTHON = torch._C.DispatchKey.Python
_dispatch_stack, _function_stack = torch._C._len_torch_dispatch_stack, torch._C._len_torch_function_stack


def plain_inputs(tensors: list, specs, names, device: torch.device) -> list:
    """``plain_tensors`` of a call's inputs (``checks.check_inputs``' arguments)."""
    def label(index: int) -> str:  # the count is checked later: an index past the specs is named by number
        return _label(specs, names, index) if not specs or index < len(specs) else f"input #{index}"

    return plain_tensors(tensors, label, InputError, lambda value, index: _not_a_tensor(
        value, specs[index] if specs and index < len(specs) else None, label(index), device))


def plain_outputs(outputs: list) -> list:
    """``plain_tensors`` of a call's output buffers."""
    return plain_tensors(outputs, lambda index: f"output buffer #{index}", OutputError,
                         lambda value, index: OutputError(f"output buffer #{index} must be a torch.Tensor, got "
                                                          f"{type(value).__name__}; allocate one, e.g. with torch.empty"))


def plain_tensors(values: list, label, error: type, not_a_tensor) -> list:
    """``values`` with every tensor subclass replaced by a plain tensor on its memory (the caller's writes and
    the program's in-place writes reach the same bytes); anything else is left for the checks to name.

    Args:
        label: ``label(index)``, how a message names the argument (``input 'x' (#0)``).
        error: InputError or OutputError.
        not_a_tensor: ``not_a_tensor(value, index)``, the error for a value that is no tensor.

    Raises ``error`` for a ``__torch_dispatch__`` subclass (its sizes and operations are Python's answers), and
    ``not_a_tensor``'s error for an object that claims to be a tensor without being one.
    """
    plain = None
    for index, value in enumerate(values):
        kind = type(value)
        if (kind is _Tensor or kind is _Parameter) and not value.__dict__:  # no attribute of its own either
            continue
        if not issubclass(kind, _Tensor):  # the real type: isinstance reads a __class__ the object may fake
            if isinstance(value, _Tensor):
                raise not_a_tensor(value, index)
            continue  # None, a number, an array: the checks say what is wanted there
        if plain is None:
            plain = list(values)
        plain[index] = _plain(value, label(index), error)
    return values if plain is None else plain


def _plain(value: torch.Tensor, label: str, error: type) -> torch.Tensor:
    with torch._C.DisableTorchFunctionSubclass():  # the base's C methods, called unbound: no Python of the subclass
        if torch._C._dispatch_keys(value).has(_PYTHON):
            try:  # its own methods may raise anything: it is refused whatever they answer
                fault = memory_fault(value)
            except Exception:  # noqa: BLE001 - the subclass's code, not ours
                fault = None
            fault = fault or (f"is a {type(value).__name__}, a tensor subclass whose operations run "
                                            "Python code (__torch_dispatch__), which the generated code cannot run")
            raise error(f"{label} {fault}; the program reads and writes its tensors as plain memory: pass a plain "
                        "tensor holding the values (a DTensor's .full_tensor()), and call the program outside "
                        "torch.func transforms and FakeTensorMode")
        tensor = _Base.detach(value)  # a new plain tensor on the same storage, offset, sizes and strides
        if _Base.requires_grad.__get__(value):  # keep what the checks and the grad warning look at
            tensor.requires_grad_()
        return tensor


def caller_modes_active() -> bool:
    """Whether a TorchDispatchMode or TorchFunctionMode of the caller is active (FakeTensorMode, a tracer, a logging
    mode, ``with torch.device(...)``). The runtime's own tensor work (the copy into the exported layout, the copies
    of index inputs) went through it: under FakeTensorMode the copy of a transposed input was a FakeTensor, whose
    data pointer the generated code read (SIGSEGV), and a mode may answer anything. ~0.08 µs."""
    return bool(_dispatch_stack() or _function_stack() or python_dispatch._is_in_torch_dispatch_mode)  # infra modes too


@contextlib.contextmanager
def without_caller_modes():
    """The caller's dispatch and function modes set aside while the runtime works (restored after): a program's call
    is one opaque run, whose tensors are the caller's plain memory and the model's outputs."""
    with python_dispatch._disable_current_modes(), torch._C.DisableTorchFunction():
        yield
