"""AOTInductor's own input checks, for packages whose inputs aotcuda cannot check itself (no signature), and for
every package under AOTCUDA_LIBRARY_INPUT_CHECKS (a signature may be edited without its library).

The generated code checks each input's dtype, sizes, strides and device when AOTI_RUNTIME_CHECK_INPUTS is
set, and reads that variable once per library, at its first run. ``latch_aoti_input_checks`` makes that
first run with the variable set (``aoti_input_checks``) and a probe input that every check rejects.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
import warnings

import torch

from aotcuda import standard_descriptors
from aotcuda.errors import InputError, PackageError, RuntimeCallError
from aotcuda.runtime import container as _container
from aotcuda.runtime.container import ModelContainer
from aotcuda.runtime.handles import delete_handle, handle_array_type, new_handle_array

AOTI_CHECKS_VARIABLE = "AOTI_RUNTIME_CHECK_INPUTS"


@contextlib.contextmanager
def aoti_input_checks(package_path: str, why: str | None = None):
    """``with aoti_input_checks(path):`` AOTI_RUNTIME_CHECK_INPUTS=1 for the block, and the environment as
    it was after it (also on error): child processes (Ray workers, subprocesses) never inherit it, and
    packages loaded later keep their own setting. For a package whose inputs aotcuda cannot check itself
    (no aotcuda signature), around the first run of its library (``latch_aoti_input_checks``).

    Raises PackageError when the environment turns the checks off: such a package must never run
    unchecked (a float64 input read as float32 bytes, a small input read past its end). ``why``: why the package
    needs them, where it has a signature (AOTCUDA_LIBRARY_INPUT_CHECKS, a signature that does not fit).
    """
    signing = "" if why else (", or add the signature: lower the model with aotcuda.lower, or write it with "
                              "aotcuda.package_format.write_signature")
    why = why or "has no aotcuda signature, so only AOTInductor's own input checks can check its inputs"
    # One block at a time, and no other library's first run inside it (container.ENVIRONMENT_LOCK): the variable is
    # process-wide, and a load in another thread that entered first and left first removed it while this one's library
    # had yet to read it, so that library latched its checks off for good (its probe ran unchecked; every later load of
    # that package in the process was refused).
    with _container.ENVIRONMENT_LOCK:
        previous = os.environ.get(AOTI_CHECKS_VARIABLE)
        if previous is not None and previous.startswith("0"):  # the generated code: on unless it starts with '0'
            raise PackageError(
                f"{package_path!r} {why}, and {AOTI_CHECKS_VARIABLE}={previous!r} in the environment turns them off. "
                f"Unset {AOTI_CHECKS_VARIABLE} (or set it to 1){signing}")
        try:  # set inside the try: an interrupt as it is set still restores it
            if previous is None:
                _SET_BY_A_BLOCK[:] = [True]  # a child forked inside the block removes it (_new_lock_in_a_child)
            os.environ.setdefault(AOTI_CHECKS_VARIABLE, "1")
            yield
        finally:
            if previous is None:
                os.environ.pop(AOTI_CHECKS_VARIABLE, None)
                _SET_BY_A_BLOCK[:] = []


def latch_aoti_input_checks(container: ModelContainer, device: str, package_path: str) -> None:
    """Turn on, for good, the input checks in a library's generated code (dtype, sizes, strides, device).

    The generated code reads AOTI_RUNTIME_CHECK_INPUTS once, into a function-local static, at the first
    run of its library (``_check_aoti_runtime_check_inputs_env`` in torch's cpp_wrapper_cpu.py, called at
    the top of ``run_impl``), not when the container is created. So, inside ``aoti_input_checks``, this makes
    that first run: one input per slot that every check rejects at its first comparison (complex32, 16
    dims of size 0; the checks take handles before the model steals them), so nothing runs and the
    variable can be restored at once. Such packages get libraries of their own kind (``open_library``'s
    kind). Raises PackageError if the probe is not rejected.
    """
    if container.num_inputs == 0:  # no input to check: the checks have nothing to do
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental": not computed with here
        probes = [torch.empty((0,) * 16, dtype=torch.complex32, device=device) for _ in range(container.num_inputs)]
    outputs = handle_array_type(container.num_outputs)()
    handles = new_handle_array(probes)
    try:  # entered with no call in between: an interrupt from here on still releases the handles
        _run_with_stderr_discarded(container, handles, outputs)  # the rejection is expected: its C++ trace off stderr
    except (RuntimeCallError, InputError):  # a probe every check refuses: whichever the refusal is
        rejected = True
    else:
        rejected = False
    finally:
        for handle in {h for h in outputs if h}:
            delete_handle(handle)
        if probes[0]._use_count() > 1:  # our list and the handle: the model did not take the handles over
            for handle in handles:
                delete_handle(handle)
    if not rejected:
        raise PackageError(f"{package_path!r}: AOTInductor's input checks did not reject a probe "
                           "input, so they cannot be turned on for this package; add aotcuda's signature")


_STDERR_LOCK = threading.Lock()
_NO_STDERR = -1  # in _SAVED_STDERR: fd 2 was closed before the probe, and is closed again after it
_SAVED_STDERR: list[int] = []  # the copy of fd 2 while a probe has fd 2 on /dev/null (one at a time: the lock)
_SET_BY_A_BLOCK: list[bool] = []  # [True] while a block holds the variable it set


def _new_lock_in_a_child() -> None:  # a lock another thread of the parent held at the fork stays held in the child
    global _STDERR_LOCK
    _STDERR_LOCK = threading.Lock()
    if _SET_BY_A_BLOCK:  # another thread's block had set the variable, and its restore never runs here
        _SET_BY_A_BLOCK.clear()
        os.environ.pop(AOTI_CHECKS_VARIABLE, None)
    if _SAVED_STDERR:  # another thread's probe had fd 2 on /dev/null, and its restore never runs here
        _restore_stderr(_SAVED_STDERR.pop())


def _restore_stderr(copy: int) -> None:
    """Put back what fd 2 was before a probe: its copy, or closed again (``_NO_STDERR``)."""
    if copy == _NO_STDERR:
        os.close(2)
    else:
        os.dup2(copy, 2)
        os.close(copy)


os.register_at_fork(after_in_child=_new_lock_in_a_child)


def _run_with_stderr_discarded(container: ModelContainer, handles, outputs) -> None:
    """``container.run`` with file descriptor 2 on /dev/null (a probe's run at load, microseconds): the generated
    code prints the rejection it expects, with 18 lines of C++ stack trace, on std::cerr. Through the OS's
    file descriptors, so nothing of libstdc++ is written; what other threads print in those microseconds
    is lost with it.

    Not a context manager: a signal's handler may raise where a Python function begins (``__exit__``) and as a
    call returns, and fd 2 must come back whatever ends the run. The copy of fd 2 lands in ``_SAVED_STDERR``
    inside one C call, within the ``try``, and the ``finally`` restores it before any call returns; a child
    forked meanwhile restores it from there (``_new_lock_in_a_child``)."""
    with _STDERR_LOCK:
        if sys.stderr is not None:  # None in a process started with fd 2 closed (a daemon's, `2>&-`)
            sys.stderr.flush()
        saved = _SAVED_STDERR
        try:
            with open(os.devnull, "wb", opener=standard_descriptors.opener) as null:  # above 2: fd 2 may be closed
                try:
                    saved.extend(map(os.dup, (2,)))  # one C call: an interrupt cannot come between the copy and this
                except OSError as error:  # no fd 2 (a daemon's, `2>&-`): /dev/null takes the number for the run too,
                    if error.errno != errno.EBADF:  # so that no file another thread opens meanwhile gets the trace
                        raise
                    saved.append(_NO_STDERR)
                os.dup2(null.fileno(), 2)
            container.run(handles, outputs)
        finally:
            if saved:
                copy = saved[-1]
                del saved[-1]  # no call from here to the restore (an interrupt as it returns leaves the copy open)
                if copy == _NO_STDERR:  # _restore_stderr inline
                    os.close(2)
                else:
                    os.dup2(copy, 2)
                    os.close(copy)
