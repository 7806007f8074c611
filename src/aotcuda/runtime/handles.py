"""Tensors ↔ AtenTensorHandles, through torch's own helpers.

An ``AtenTensorHandle`` is an opaque pointer to a heap ``at::Tensor``. torch makes them from tensors
(``torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors``) and tensors from them
(``alloc_tensors_by_stealing_from_void_ptrs``), both as PyCapsules; the model container's C ABI takes and
writes plain pointers. So each handle crosses one capsule, read with ``PyCapsule_GetPointer`` or made with
``PyCapsule_New`` (CPython's public API, through ctypes.pythonapi).

With the switch AOTCUDA_FOREIGN_WRITES on, the capsules' pointer fields are read and written in place
instead, at an offset into CPython's capsule struct probed once (``_capsule_field_offset``): no foreign
call per handle, at the price of writing into another library's objects. The gain is measured in
docs/performance.md (benchmarks/scripts/foreign_writes.py); it is off by default.
"""

from __future__ import annotations

import ctypes
import functools
import os

import torch

from aotcuda import switches
from aotcuda.errors import RuntimeCallError
from aotcuda.runtime import ownership

Handle = ctypes.c_void_p
_OK = 0

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes, _capsule_pointer.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.argtypes, _capsule_new.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p], ctypes.py_object
_unsafe_alloc_handles = torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors
_alloc_by_stealing = torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs


def handle_array(handles) -> ctypes.Array:
    """A C array of AtenTensorHandle from ints (0/None for null)."""
    return (Handle * len(handles))(*[h or None for h in handles])


@functools.cache
def handle_array_type(length: int) -> type:
    """The ctypes type of a C array of ``length`` AtenTensorHandles (made once per length: a call
    allocates one with ``handle_array_type(n)()``, zero-filled, in well under a microsecond)."""
    return Handle * length


# --- the switch: capsule fields written in place ----------------------------------------------------------


@functools.cache
def _capsule_field_offset() -> int | None:
    """Where CPython's capsule struct keeps its pointer (after PyObject_HEAD), when AOTCUDA_FOREIGN_WRITES
    is on and a probe capsule shows that layout; None otherwise (then the pythonapi functions are used).
    Read once, at the first conversion in a process."""
    if not switches.flag("AOTCUDA_FOREIGN_WRITES"):
        return None
    offset = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # ob_refcnt, ob_type
    probe_value = 0x5EED1234
    probe = _capsule_new(probe_value, None, None)
    field = Handle.from_address(id(probe) + offset)
    if field.value != probe_value or _capsule_pointer(probe, None) != probe_value:
        return None
    field.value = probe_value + 8  # writing must show through PyCapsule_GetPointer too
    return offset if _capsule_pointer(probe, None) == probe_value + 8 else None


@functools.cache
def _capsule_reader():
    """The function that reads a capsule's pointer: the public one, or the field (switch on)."""
    offset = _capsule_field_offset()
    if offset is None:
        return lambda capsule: _capsule_pointer(capsule, None)
    from_address = Handle.from_address
    return lambda capsule: from_address(id(capsule) + offset).value


# --- tensors → handles --------------------------------------------------------------------------------------


def new_handles(tensors: list[torch.Tensor]) -> list[int]:
    """A new AtenTensorHandle (a new at::Tensor on the same storage) for each tensor; the caller owns them."""
    return list(new_handle_array(list(tensors)))


def new_handle_array(tensors: list[torch.Tensor]) -> ctypes.Array:
    """``new_handles`` as the C array ``ModelContainer.run`` takes (the per-call path: no list of ints).

    torch returns the new handles as capsules without a destructor: dropped, they leak their tensors for the
    life of the process. A signal's handler may raise (KeyboardInterrupt) as any call returns, torch's too,
    before its result is stored; so torch's list lands in ``made``, a list made before, inside one C call
    (``list.extend`` consuming a ``map``: no bytecode, so no handler, runs between torch's return and the
    append), and every exception after that releases the handles made (no Python call returns a handle)."""
    made = []
    try:
        made.extend(map(_unsafe_alloc_handles, (tensors,)))
        capsules = made[0]
        read = _capsule_reader()
        array = handle_array_type(len(capsules))()
        for index, capsule in enumerate(capsules):
            array[index] = read(capsule)
        return array
    except BaseException:
        for capsule in made[0] if made else ():
            delete_handle(_capsule_pointer(capsule, None))
        raise


# --- handles → tensors --------------------------------------------------------------------------------------


def steal_handles(handles: list[int], record: list | None = None) -> list[torch.Tensor]:
    """Tensors that take over (and later release) the given distinct, non-null handles.

    ``record``: the list of handles an error path would release (``ownership.release_all``), cleared the moment
    torch takes them over. A signal's handler may raise (KeyboardInterrupt) as torch's call returns, before its
    tensors reach us: they are dropped then, and release the handles themselves, so the error path must not
    release them too (a double free: SIGSEGV). Cleared just before the call, with no Python call in between,
    so that no signal lands between the two: at worst, one between the capsules and the clearing leaks them.
    """
    capsules = [_capsule_new(handle, None, None) for handle in handles]
    if record is not None:
        cleared = [None] * len(record)
        record[:] = cleared
    return _alloc_by_stealing(capsules)


class OutputStealer:
    """``steal_handles`` for one Program's output arrays.

    By default a call makes one capsule per handle (``PyCapsule_New``). With AOTCUDA_FOREIGN_WRITES on,
    each set of ``length`` capsules is made once and its pointer fields are rewritten per call (a plain
    memory write through a ctypes view of the field). Thread-safe: a call takes a set off the free list
    and puts it back after torch has read it (list pop/append are atomic), so concurrent calls never
    share one; a new set is made when all are in use.

    Args:
        length: the number of output slots.
    """

    __slots__ = ("_length", "_free", "_offset")

    def __init__(self, length: int) -> None:
        self._length = length
        self._free: list = []
        self._offset = _capsule_field_offset()

    def _new_set(self):
        capsules = [_capsule_new(1, None, None) for _ in range(self._length)]  # a capsule's pointer is never 0
        return capsules, [Handle.from_address(id(c) + self._offset) for c in capsules]

    def steal(self, output_array: ctypes.Array, record: list) -> list[torch.Tensor]:
        """Tensors taking over the array's handles, which must be distinct and non-null; ``record`` (the list
        an error path releases) is cleared as torch takes them (see ``steal_handles``)."""
        cleared = [None] * len(record)
        if self._offset is None:
            capsules = [_capsule_new(handle, None, None) for handle in output_array]
            record[:] = cleared
            return _alloc_by_stealing(capsules)
        free = self._free
        try:
            capsules, fields = free.pop()
        except IndexError:
            capsules, fields = self._new_set()
        try:
            for field, handle in zip(fields, output_array):
                field.value = handle
            record[:] = cleared
            return _alloc_by_stealing(capsules)
        finally:
            free.append((capsules, fields))


# --- releasing a handle -------------------------------------------------------------------------------------


@functools.cache
def _torch_shim() -> ctypes.CDLL:
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    shim = ctypes.CDLL(os.path.join(lib_dir, "libtorch_cpu.so"))
    shim.aoti_torch_delete_tensor_object.argtypes = [Handle]
    shim.aoti_torch_delete_tensor_object.restype = ctypes.c_int32
    return shim


def delete_handle(handle: int) -> None:
    """Release one AtenTensorHandle without making a tensor of it."""
    code = _torch_shim().aoti_torch_delete_tensor_object(handle)
    if code != _OK:
        raise RuntimeCallError(f"releasing output handle {handle:#x} failed (code {code})")


def release_written(output_array) -> None:
    """After a failed run: release whatever handles the container wrote, each once."""
    ownership.release_all(list(output_array), delete_handle)


def release_unstolen(alias: torch.Tensor | None, input_handles) -> None:
    """After a failed run: release the input handles if the model did not take them over.

    The model steals all its input handles at once at the start of its run (one loop with nothing in it
    that can fail), but AOTI's own input checks (AOTI_RUNTIME_CHECK_INPUTS, which unsigned packages turn
    on) throw BEFORE that, leaving them to us: one leaked tensor per input per rejected call otherwise.
    The first handle is the only reference to ``alias`` besides our own (the alias is private to this
    call), so a use count above 1 means that handle, and so every handle, is still alive. Call it after
    the output handles are released (an output may view an input).
    """
    if alias is not None and alias._use_count() > 1:
        for handle in input_handles:
            delete_handle(handle)
