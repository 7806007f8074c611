"""A thin ctypes binding of the AOTInductor model container's C ABI.

The generated ``<hash>.wrapper.so`` of an AOTI package exports the functions declared in
torch/csrc/inductor/aoti_runtime/interface.h. Every one returns an ``AOTIRuntimeError`` (int32, 0 = success);
the generated code also keeps the last C++ exception's message in a thread-local string that
``AOTInductorGetLastError`` (torch >= 2.11) returns, which we put into our error messages.

Handles: an ``AtenTensorHandle`` is an opaque pointer to a heap ``at::Tensor``. ``run`` steals the input
handles (the container releases them) and writes output handles that the caller then owns; who releases
which output handle is ``aotcuda.runtime.ownership``'s job, not this module's.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import shutil
import tempfile
import threading
import warnings

import torch

from aotcuda.errors import PackageError, RuntimeCallError
from aotcuda.runtime.libloader import open_model_library, quiet_cxx_errors

_Handle = ctypes.c_void_p
_OK = 0
_CXX_TRACE = "\nException raised from "
_QUIET = quiet_cxx_errors()  # one context manager object, entered around every run

# (name, argtypes) of every function we call; restype is AOTIRuntimeError (int32) for all of them.
_SIGNATURES = {
    "AOTInductorModelContainerCreateWithDevice": [
        ctypes.POINTER(_Handle), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p],
    "AOTInductorModelContainerDelete": [_Handle],
    "AOTInductorModelContainerRun": [
        _Handle, ctypes.POINTER(_Handle), ctypes.c_size_t, ctypes.POINTER(_Handle), ctypes.c_size_t,
        _Handle, _Handle],
    "AOTInductorModelContainerRunSingleThreaded": [
        _Handle, ctypes.POINTER(_Handle), ctypes.c_size_t, ctypes.POINTER(_Handle), ctypes.c_size_t,
        _Handle, _Handle],
    "AOTInductorModelContainerGetNumInputs": [_Handle, ctypes.POINTER(ctypes.c_size_t)],
    "AOTInductorModelContainerGetNumOutputs": [_Handle, ctypes.POINTER(ctypes.c_size_t)],
    "AOTInductorModelContainerGetInputName": [_Handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)],
    "AOTInductorModelContainerGetOutputName": [_Handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)],
    "AOTInductorModelContainerGetCallSpec": [
        _Handle, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)],
    "AOTInductorModelContainerGetConstantsBlobSize": [_Handle, ctypes.POINTER(ctypes.c_uint64)],
    "AOTInductorModelUpdateConstantsFromBlob": [_Handle, ctypes.c_char_p],
    "AOTInductorGetLastError": [ctypes.POINTER(ctypes.c_char_p)],
}
_REQUIRED = (
    "AOTInductorModelContainerCreateWithDevice",
    "AOTInductorModelContainerDelete",
    "AOTInductorModelContainerRun",
    "AOTInductorModelContainerGetNumInputs",
    "AOTInductorModelContainerGetNumOutputs",
)

# Loaded model libraries, by (content digest, kind): one per distinct .so for the life of the process.
# Why not dlclose: glibc cannot unload these libraries. They define C++ "unique" symbols (STB_GNU_UNIQUE:
# inline statics of libstdc++ headers, e.g. std::piecewise_construct), which mark the library NODELETE,
# and the AOTI runtime's thread_local last-error string registers a thread-exit destructor that pins it
# while the loading thread lives. Measured: after dlclose every one stays mapped. So a load reuses the
# library an earlier load of the same .so made (each load still gets its own model container, with its
# own weights and kernels); 200 load/close cycles of one package then map one library, not 200.
_LIBRARIES: dict[tuple, ctypes.CDLL] = {}
_LIBRARIES_LOCK = threading.Lock()


def open_library(so_path: str, key: tuple | None = None) -> ctypes.CDLL:
    """dlopen a generated wrapper .so (``libloader``: safe against the libstdc++ scope crash) and declare
    the C ABI's signatures on it. With a ``key`` (the .so's content digest and kind), a library opened
    before under that key is returned instead of loading another copy.

    Raises PackageError when the file cannot be opened or lacks the model-container functions.
    """
    if key is not None and key[0]:
        with _LIBRARIES_LOCK:
            if key not in _LIBRARIES:
                pinned = _pin_library_folder(so_path)
                try:
                    _LIBRARIES[key] = _open_and_declare(pinned)
                except BaseException:
                    shutil.rmtree(os.path.dirname(pinned), ignore_errors=True)
                    raise
            return _LIBRARIES[key]
    return _open_and_declare(so_path)


# A shared library must keep the files it was opened from: the generated code finds them by its own path
# (dladdr). A package whose weights exceed 2 GB (or lowered with aot_inductor.force_mmap_weights) has them
# appended to the .so and maps them from that file at each container's creation; CPU Triton kernels are
# looked up next to it. The folder of the load that first opened the library is removed when that
# program closes, while later loads of the same .so keep using the library: so the library is opened from
# a copy of that folder made of hard links (no bytes copied), kept until the process exits.
@functools.cache
def _pinned_root() -> str:
    """The folder that holds the pinned copies, made at the first pin and removed at exit."""
    root = tempfile.mkdtemp(prefix="aotcuda_libraries_")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _pin_library_folder(so_path: str) -> str:
    """Link the .so's folder into a folder that lives as long as the process; return the .so's path
    there. Files that cannot be hard-linked (another file system) are copied. Called under the lock."""
    target = tempfile.mkdtemp(dir=_pinned_root())
    shutil.copytree(os.path.dirname(so_path), target, copy_function=_link_or_copy, dirs_exist_ok=True)
    return os.path.join(target, os.path.basename(so_path))


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def loaded_libraries() -> int:
    """How many model libraries this process holds (for tests and leak checks)."""
    return len(_LIBRARIES)


def _open_and_declare(so_path: str) -> ctypes.CDLL:
    lib = open_model_library(so_path)
    for name in _REQUIRED:
        if not hasattr(lib, name):
            raise PackageError(f"{so_path} is not an AOTInductor model: it does not export {name}. The package "
                               "is damaged or was not written by AOTInductor; lower the model again.")
    for name, argtypes in _SIGNATURES.items():
        if hasattr(lib, name):
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int32
    return lib


def handle_array(handles) -> ctypes.Array:
    """A C array of AtenTensorHandle from ints (0/None for null)."""
    return (_Handle * len(handles))(*[h or None for h in handles])


@functools.cache
def handle_array_type(length: int) -> type:
    """The ctypes type of a C array of ``length`` AtenTensorHandles (made once per length: a call
    allocates one with ``handle_array_type(n)()``, zero-filled, in well under a microsecond)."""
    return _Handle * length


class ModelContainer:
    """One ``AOTInductorModelContainer`` made from a generated .so.

    Args:
        so_path: the package's ``<hash>.wrapper.so``.
        device: the container's device string, e.g. "cpu" or "cuda:0" (what the C ABI's
            ``device_str`` expects).
        cubin_dir: the folder that holds the package's kernel binaries (.cubin) for CUDA; the folder of
            the .so, as torch's own package loader passes it.
        num_models: how many model instances the container keeps for concurrent ``run`` calls.
        library_key: (content digest of the .so, kind) to share the loaded library with other containers
            of the same .so (``open_library``); None loads it anew.

    Raises PackageError when the container cannot be created.
    """

    def __init__(self, so_path: str, device: str, cubin_dir: str | None, num_models: int = 1,
                 library_key: tuple | None = None):
        self._lib = open_library(so_path, library_key)
        self._handle = _Handle()
        cubin = cubin_dir.encode() if cubin_dir else None
        code = self._lib.AOTInductorModelContainerCreateWithDevice(
            ctypes.byref(self._handle), num_models, device.encode(), cubin)
        if code != _OK or not self._handle.value:
            raise PackageError(
                f"creating the model container on {device!r} failed ({self.last_error() or f'code {code}'}). "
                "Check that the package was built for this device and this torch version."
            )
        self.keeps_last_error = hasattr(self._lib, "AOTInductorGetLastError")
        self.num_inputs = self._get_size("AOTInductorModelContainerGetNumInputs")
        self.num_outputs = self._get_size("AOTInductorModelContainerGetNumOutputs")
        self._has_single_threaded = hasattr(self._lib, "AOTInductorModelContainerRunSingleThreaded")

    # --- queries -------------------------------------------------------------------------------------

    def last_error(self) -> str:
        """The generated code's last C++ exception message on this thread, or "" where unavailable."""
        if not hasattr(self._lib, "AOTInductorGetLastError"):
            return ""
        message = ctypes.c_char_p()
        if self._lib.AOTInductorGetLastError(ctypes.byref(message)) != _OK or not message.value:
            return ""
        text = message.value.decode(errors="replace")
        # c10::Error's what() appends the C++ stack trace (18 lines of frames): keep the message.
        return text.split(_CXX_TRACE, 1)[0].strip()

    def _check(self, code: int, what: str, error=RuntimeCallError) -> None:
        if code != _OK:
            detail = self.last_error() or (
                "" if hasattr(self._lib, "AOTInductorGetLastError")
                else "the generated code printed the cause on stderr (this torch's AOTI keeps no last error)")
            raise error(f"{what} failed with AOTIRuntimeError {code}" + (f": {detail}" if detail else ""))

    def _get_size(self, name: str) -> int:
        value = ctypes.c_size_t()
        self._check(getattr(self._lib, name)(self._live(), ctypes.byref(value)), name, PackageError)
        return value.value

    def input_names(self) -> list[str]:
        return [self._name("AOTInductorModelContainerGetInputName", i) for i in range(self.num_inputs)]

    def output_names(self) -> list[str]:
        return [self._name("AOTInductorModelContainerGetOutputName", i) for i in range(self.num_outputs)]

    def _name(self, function: str, index: int) -> str:
        if not hasattr(self._lib, function):
            return f"{'input' if 'Input' in function else 'output'}{index}"
        name = ctypes.c_char_p()
        self._check(getattr(self._lib, function)(self._live(), index, ctypes.byref(name)), function)
        return name.value.decode() if name.value else str(index)

    def call_spec(self) -> tuple[str, str]:
        """The (in_spec, out_spec) pytree specs as serialized by torch.utils._pytree.treespec_dumps ("" if none)."""
        if not hasattr(self._lib, "AOTInductorModelContainerGetCallSpec"):
            return "", ""
        in_spec, out_spec = ctypes.c_char_p(), ctypes.c_char_p()
        self._check(self._lib.AOTInductorModelContainerGetCallSpec(
            self._live(), ctypes.byref(in_spec), ctypes.byref(out_spec)), "GetCallSpec")
        return (in_spec.value or b"").decode(), (out_spec.value or b"").decode()

    # --- constants -----------------------------------------------------------------------------------

    def load_constants_blob(self, blob_path: str) -> None:
        """Load the weights of a package that stores them in a separate ``.blob`` file (not in the .so)."""
        if not hasattr(self._lib, "AOTInductorModelUpdateConstantsFromBlob"):
            raise PackageError("the package keeps its weights in a .blob file, but its model cannot load one")
        with open(blob_path, "rb") as blob:
            data = blob.read()
        self._blob = data  # the container may keep pointers into it
        self._check(self._lib.AOTInductorModelUpdateConstantsFromBlob(self._live(), data),
                    f"loading the weights from {os.path.basename(blob_path)}", PackageError)

    # --- running -------------------------------------------------------------------------------------

    def run(self, input_handles, output_handles: ctypes.Array, stream: int | None = None,
            single_threaded: bool = False) -> None:
        """Run the model once.

        Args:
            input_handles: one AtenTensorHandle per input, as a C array (``new_handle_array``) or a list of
                ints; stolen by the container, also when the run fails, except when AOTI's input checks
                (AOTI_RUNTIME_CHECK_INPUTS) reject them first: those stay the caller's (``Program._run``
                tells them apart).
            output_handles: a C array of ``num_outputs`` handles (``handle_array_type(n)()``); the container
                writes the outputs there and the caller owns them afterwards (also those written before a
                failure). Several slots may hold one handle.
            stream: the CUDA stream (``torch.cuda.Stream.cuda_stream``), or None for the default/CPU.
            single_threaded: use ``RunSingleThreaded``, which skips the container's model pool and its
                events and can be captured into a CUDA graph.

        Raises RuntimeCallError when the container reports an error.
        """
        if not isinstance(input_handles, ctypes.Array):
            input_handles = handle_array(input_handles)
        # A plain attribute read (ctypes keeps each function in the library object's __dict__ after the first
        # lookup), not hasattr/getattr by name: those cost a microsecond a call.
        if single_threaded:
            if not self._has_single_threaded:
                raise RuntimeCallError("this package's model has no AOTInductorModelContainerRunSingleThreaded; "
                                       "rebuild it with torch >= 2.11")
            function = self._lib.AOTInductorModelContainerRunSingleThreaded
        else:
            function = self._lib.AOTInductorModelContainerRun
        handle = self._handle
        if not handle.value:
            raise RuntimeCallError("the model container was deleted (Program.close() was called)")
        if self.keeps_last_error:  # the message reaches the RuntimeCallError: keep stderr quiet
            with _QUIET:  # the generated code prints each error, with its C++ stack trace, on stderr
                code = function(handle, input_handles, len(input_handles), output_handles, len(output_handles),
                                stream, None)
        else:  # torch < 2.12's AOTI keeps no last error: stderr is the only place the cause is shown
            code = function(handle, input_handles, len(input_handles), output_handles, len(output_handles),
                            stream, None)
        if code != _OK:
            self._check(code, "running the model")

    # --- lifetime ------------------------------------------------------------------------------------

    def _live(self) -> _Handle:
        if not self._handle.value:
            raise RuntimeCallError("the model container was deleted (Program.close() was called)")
        return self._handle

    def delete(self) -> None:
        """Delete the container (idempotent). Outputs already handed out stay valid."""
        if self._handle.value:
            handle, self._handle = self._handle, _Handle()
            self._lib.AOTInductorModelContainerDelete(handle)

    @property
    def deleted(self) -> bool:
        return not self._handle.value


AOTI_CHECKS_VARIABLE = "AOTI_RUNTIME_CHECK_INPUTS"


@contextlib.contextmanager
def aoti_input_checks(package_path: str):
    """``with aoti_input_checks(path):`` AOTI_RUNTIME_CHECK_INPUTS=1 for the block, and the environment as
    it was after it (also on error): child processes (Ray workers, subprocesses) never inherit it, and
    packages loaded later keep their own setting. For a package whose inputs aotcuda cannot check itself
    (no aotcuda signature), around the first run of its library (``latch_aoti_input_checks``).

    Raises PackageError when the environment turns the checks off: such a package must never run
    unchecked (a float64 input read as float32 bytes, a small input read past its end).
    """
    previous = os.environ.get(AOTI_CHECKS_VARIABLE)
    if previous is not None and previous.startswith("0"):  # the generated code: on unless it starts with '0'
        raise PackageError(
            f"{package_path!r} has no aotcuda signature, so only AOTInductor's own input checks can check its "
            f"inputs, and {AOTI_CHECKS_VARIABLE}={previous!r} in the environment turns them off. Unset "
            f"{AOTI_CHECKS_VARIABLE} (or set it to 1), or add the signature: lower the model with aotcuda.lower, "
            "or write it with aotcuda.package_format.write_signature")
    os.environ.setdefault(AOTI_CHECKS_VARIABLE, "1")
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(AOTI_CHECKS_VARIABLE, None)


def latch_aoti_input_checks(container: ModelContainer, device: str, package_path: str) -> None:
    """Turn on, for good, the input checks in a library's generated code (dtype, sizes, strides, device).

    The generated code reads AOTI_RUNTIME_CHECK_INPUTS once, into a function-local static, at the first
    run of its library (``_check_aoti_runtime_check_inputs_env`` in torch's cpp_wrapper_cpu.py, called at
    the top of ``run_impl``), not when the container is created. So, inside ``aoti_input_checks``, this makes
    that first run: one input per slot that every check rejects at its first comparison (complex32, 16
    dims of size 0; the checks take handles before the model steals them), so nothing runs and the
    variable can be restored at once. Such packages get libraries of their own kind (``open_library``'s
    key). Raises PackageError if the probe is not rejected.
    """
    if container.num_inputs == 0:  # no input to check: the checks have nothing to do
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental": not computed with here
        probes = [torch.empty((0,) * 16, dtype=torch.complex32, device=device) for _ in range(container.num_inputs)]
    handles = new_handle_array(probes)
    outputs = handle_array_type(container.num_outputs)()
    try:
        with _QUIET:  # the rejection is expected: keep its message off stderr on every torch
            container.run(handles, outputs)
    except RuntimeCallError:
        rejected = True
    else:
        rejected = False
    for handle in {h for h in outputs if h}:
        delete_handle(handle)
    if probes[0]._use_count() > 1:  # our list and the handle: the model did not take the handles over
        for handle in handles:
            delete_handle(handle)
    if not rejected:
        raise PackageError(f"{package_path!r}: AOTInductor's input checks did not reject a probe "
                           "input, so they cannot be turned on for this package; add aotcuda's signature")


# --- tensors ↔ handles, through torch's own helpers ----------------------------------------------------

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes, _capsule_pointer.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.argtypes, _capsule_new.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p], ctypes.py_object


def _pointer_field_offset() -> int | None:
    """Where CPython's capsule struct keeps its pointer (after PyObject_HEAD), or None where that layout
    is not what a probe capsule shows (then the slow, portable pythonapi functions are used).

    ``PyCapsule_GetPointer`` / ``PyCapsule_New`` through ctypes.pythonapi cost ~0.5–1 µs per call
    (argument conversion, name check); reading or writing the field costs a fraction of that.
    """
    offset = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # ob_refcnt, ob_type
    probe_value = 0x5EED1234
    probe = _capsule_new(probe_value, None, None)
    field = _Handle.from_address(id(probe) + offset)
    if field.value != probe_value or _capsule_pointer(probe, None) != probe_value:
        return None
    field.value = probe_value + 8  # writing must show through PyCapsule_GetPointer too
    return offset if _capsule_pointer(probe, None) == probe_value + 8 else None


_FIELD_OFFSET = _pointer_field_offset()


def _pointer_reader():
    """The fastest correct way to read a PyCapsule's pointer (see _pointer_field_offset)."""
    if _FIELD_OFFSET is None:
        return lambda capsule: _capsule_pointer(capsule, None)
    from_address, offset = _Handle.from_address, _FIELD_OFFSET
    return lambda capsule: from_address(id(capsule) + offset).value


_read_capsule = _pointer_reader()


def new_handles(tensors: list[torch.Tensor]) -> list[int]:
    """A new AtenTensorHandle (a new at::Tensor on the same storage) for each tensor; the caller owns them."""
    capsules = torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors(list(tensors))
    return [_read_capsule(capsule) for capsule in capsules]


def new_handle_array(tensors: list[torch.Tensor]) -> ctypes.Array:
    """``new_handles`` as the C array ``ModelContainer.run`` takes (the per-call path: no list of ints)."""
    capsules = torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors(tensors)
    array = handle_array_type(len(capsules))()
    for index, capsule in enumerate(capsules):
        array[index] = _read_capsule(capsule)
    return array


def steal_handles(handles: list[int]) -> list[torch.Tensor]:
    """Tensors that take over (and later release) the given distinct, non-null handles."""
    capsules = [_capsule_new(handle, None, None) for handle in handles]
    return torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs(capsules)


class OutputStealer:
    """``steal_handles`` for one Program's output arrays, with capsules made once and reused.

    torch takes handles over only as PyCapsules; making ``n`` of them per call is ``n`` foreign calls. Here
    each set of ``n`` capsules is made once and its pointer fields are rewritten per call (a plain
    memory write through a ctypes view of the field). Thread-safe: a call takes a set off the free list
    and puts it back after torch has read it (list pop/append are atomic), so concurrent calls never
    share one; a new set is made when all are in use.

    Args:
        length: the number of output slots.
    """

    __slots__ = ("_length", "_free")

    def __init__(self, length: int) -> None:
        self._length = length
        self._free: list = []

    def _new_set(self):
        capsules = [_capsule_new(1, None, None) for _ in range(self._length)]  # a capsule's pointer is never 0
        return capsules, [_Handle.from_address(id(c) + _FIELD_OFFSET) for c in capsules]

    def steal(self, output_array: ctypes.Array) -> list[torch.Tensor]:
        """Tensors taking over the array's handles, which must be distinct and non-null."""
        if _FIELD_OFFSET is None:
            return steal_handles(list(output_array))
        free = self._free
        try:
            capsules, fields = free.pop()
        except IndexError:
            capsules, fields = self._new_set()
        try:
            for field, handle in zip(fields, output_array):
                field.value = handle
            return _alloc_by_stealing(capsules)
        finally:
            free.append((capsules, fields))


_alloc_by_stealing = torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs


@functools.cache
def _torch_shim() -> ctypes.CDLL:
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    shim = ctypes.CDLL(os.path.join(lib_dir, "libtorch_cpu.so"))
    shim.aoti_torch_delete_tensor_object.argtypes = [_Handle]
    shim.aoti_torch_delete_tensor_object.restype = ctypes.c_int32
    return shim


def delete_handle(handle: int) -> None:
    """Release one AtenTensorHandle without making a tensor of it."""
    code = _torch_shim().aoti_torch_delete_tensor_object(handle)
    if code != _OK:
        raise RuntimeCallError(f"releasing output handle {handle:#x} failed (code {code})")
