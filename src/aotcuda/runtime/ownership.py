"""Who releases which output handle, and when.

AOTInductor's generated code puts ONE handle into every output slot that returns the same tensor::

    output_handles[0] = buf1.release();
    output_handles[1] = buf0.release();
    output_handles[2] = output_handles[0];

A runtime that releases each slot's handle releases ``buf1`` twice (``free(): double free detected``).
The rule here, as in PyTorch's own AOTI runner: each distinct non-null handle is released exactly once,
at the LAST slot that holds it, so that every earlier slot can still read it. Null slots (0 or None)
hold nothing. These functions are pure over a list of handles (plain ints); the runtime passes in the
functions that release or adopt a handle, which makes the rule testable without a GPU or a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Handle = int | None
T = TypeVar("T")


def release_slots(handles: Sequence[Handle]) -> list[bool]:
    """For each slot, whether it is the one that releases its handle (the last slot holding it).

    >>> release_slots([7, 8, 7, 0])
    [False, True, True, False]
    """
    last_slot = {handle: slot for slot, handle in enumerate(handles) if handle}
    return [bool(handle) and last_slot[handle] == slot for slot, handle in enumerate(handles)]


def distinct_handles(handles: Sequence[Handle]) -> list[int]:
    """The distinct non-null handles, in the order of the slot that releases each (its last slot)."""
    return [handle for handle, releases in zip(handles, release_slots(handles)) if releases]


def release_all(handles: Sequence[Handle], release: Callable[[int], object]) -> None:
    """Release every handle still held in ``handles``, each exactly once, at its last slot.

    For error paths: whatever was not yet handed on is released. A slot whose handle was already handed
    on must have been cleared (see ``take_slot``), or that handle would be released a second time.
    Keeps going when one release raises, and re-raises the first error after all were tried.
    """
    first_error = None
    for handle in distinct_handles(handles):
        try:
            release(handle)
        except Exception as exc:  # noqa: BLE001 - release the rest before reporting
            first_error = first_error or exc
    if first_error is not None:
        raise first_error


def take_slot(handles: list[Handle], slot: int) -> Handle:
    """Hand on the handle of one slot: clear EVERY slot that holds it and return it (None if empty).

    The caller now owns the handle; ``release_all`` on the same list can no longer release it.
    """
    handle = handles[slot]
    if handle:
        for other, held in enumerate(handles):
            if held == handle:
                handles[other] = None
    return handle or None


def adopt_all(handles: list[Handle], adopt: Callable[..., list[T]]) -> list[T | None]:
    """Turn the handles into objects, one per distinct handle, shared by every slot that held it.

    ``adopt`` takes the distinct handles and returns one owning object each (for tensors:
    ``torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs``), so that slots that shared a handle get
    one tensor, i.e. one storage, as in eager. On success every slot of ``handles`` is cleared (the
    objects own the handles now); if ``adopt`` raises, ``handles`` is left as it was, for ``release_all``,
    unless adopt has cleared it: ``adopt(distinct, record=handles)`` clears it the moment the handles are
    handed on (``handles.steal_handles``), so that an exception raised after that (a signal's
    KeyboardInterrupt as the adopting call returns) cannot have them released twice. Null slots become None.
    """
    slots, distinct = list(handles), distinct_handles(handles)
    objects = adopt(distinct, record=handles)
    if len(objects) != len(distinct):
        raise ValueError(f"adopt returned {len(objects)} objects for {len(distinct)} handles")
    by_handle = dict(zip(distinct, objects))
    adopted = [by_handle[handle] if handle else None for handle in slots]
    handles[:] = [None] * len(handles)
    return adopted
