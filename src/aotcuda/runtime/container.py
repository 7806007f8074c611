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

import ctypes
import os
import re
import threading

from aotcuda.errors import InputError, PackageError, RuntimeCallError
from aotcuda.runtime.handles import Handle as _Handle
from aotcuda.runtime.handles import handle_array
from aotcuda.runtime.libloader import close_refused_library, cxx_error_mute, open_model_library
from aotcuda.runtime.libraries import digest_of, open_shared

_OK = 0
# A library's generated code reads AOTI_RUNTIME_CHECK_INPUTS once, at its first run, and aoti_checks sets the variable
# (process-wide) for a moment around an unsigned package's first run. That block and each container's first run take
# this lock, so that a library's first run reads the variable as the process's environment has it: a signed package's
# first call on another thread, inside that moment, latched its library's checks on for good (which refuse a size of 1
# of a Dim(min=1), that aotcuda's checks take), and one unsigned load's moment ended inside another's, whose library
# then latched them off. Reentrant: the block's own probe is a first run; a signal's handler may load inside one.
ENVIRONMENT_LOCK = threading.RLock()


def _new_environment_lock() -> None:  # a lock another thread of the parent held at the fork stays held in the child
    global ENVIRONMENT_LOCK
    ENVIRONMENT_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_new_environment_lock)
_CXX_TRACE = "\nException raised from "
# What the generated code throws when a model's own check on a value it computed from its inputs fails
# (torch._check(n <= 512) after n = lengths.max().item(): an unbacked symbol's runtime assert, written by
# Inductor's AssertScalar codegen as `throw std::runtime_error("Expected " MSG " but received " + value)`).
# The inputs' values decide it, so it is the caller's error (InputError; serving answers 400), not the program's.
_VALUE_CHECK = re.compile(r"Expected (?P<check>.+) but received (?P<value>-?\d+)", re.DOTALL)

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
    "AOTInductorModelContainerGetNumConstants": [_Handle, ctypes.POINTER(ctypes.c_size_t)],
    "AOTInductorModelContainerGetConstantFromFolded": [_Handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_bool)],
    "AOTInductorModelContainerGetConstantDataSize": [_Handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
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

class ValueCheckFailed(InputError):
    """The generated code's own check on a value computed from the inputs failed (``_VALUE_CHECK``): ``check`` as
    Inductor wrote it, in torch's symbols; ``printed``, the value it printed, which is that of one of the check's
    symbols, whichever Inductor took first (torch/_inductor/ir.py, AssertScalar.codegen): in ``u0 <= s45`` it may be
    s45's, a dim's size, not the value computed from the inputs. Program says it with the call's sizes and the
    user's Dim names (``value_check_message``)."""

    def __init__(self, check: str, printed: str):
        super().__init__(value_check_message(check, printed))
        self.check, self.printed = check, printed


def value_check_message(check: str, printed: str, bindings: dict[str, int] | None = None,
                        dim_names: dict[str, str] | None = None) -> str:
    """What a failed value check says: the check in the user's Dim names; the sizes its other symbols have in
    this call (``bindings``: each shape symbol's value, from the inputs' shapes), or, for a check of one symbol,
    the value printed, which is then that symbol's (a new user's ``u0 <= s45`` said "a value computed from
    them is 50": T's size, not the computed 100)."""
    from aotcuda.runtime.specs import _TORCH_SYMBOL, under_dim_names

    symbols = sorted(set(_TORCH_SYMBOL.findall(check)))
    sizes = {symbol: bindings[symbol] for symbol in symbols if bindings and symbol in bindings}
    if sizes:
        given = ", ".join(f"{under_dim_names(symbol, dim_names)} = {value}" for symbol, value in sizes.items())
        what = f"where {given} from the inputs' shapes; a value computed from their values is outside it"
    elif len(symbols) <= 1:
        what = f"a value computed from them is {printed}"
    else:
        what = f"the generated check printed {printed}, the value of one of {', '.join(symbols)}"
    return (f"the inputs' values fail the model's own check {under_dim_names(check, dim_names)} ({what}; the "
            "model's torch._check, recorded at export, allows no other): pass values the model accepts, or export "
            "it with a wider check. Nothing was returned; the program runs the next call as before")


def exports(lib: ctypes.CDLL, name: str) -> bool:
    """Whether the opened library exports ``name``. Not ``hasattr``: for a missing symbol CPython's ctypes builds
    its AttributeError from dlerror()'s text, which names the library's path, and a path that is not UTF-8 (a
    temporary folder named so) makes building that message raise UnicodeDecodeError instead, which hasattr
    passes on: a package of a torch whose library lacks an optional function then failed to load at all."""
    try:
        getattr(lib, name)
    except (AttributeError, UnicodeDecodeError):
        return False
    return True


def open_library(so_path: str, kind: str | None = None, expected_sha256: object = None) -> ctypes.CDLL:
    """dlopen a generated wrapper .so (``libloader``: safe against the libstdc++ scope crash) and declare
    the C ABI's signatures on it. With a ``kind``, the library is shared with other loads of a .so with the
    same bytes and kind (``aotcuda.runtime.libraries``), and a file whose SHA-256 is not ``expected_sha256``
    (None: any) is refused before it is opened; None loads it anew.

    Raises PackageError when the file cannot be opened or lacks the model-container functions;
    libraries.LibraryDigestMismatch for another digest.
    """
    if kind is None:
        return _open_and_declare(so_path)
    return open_shared(so_path, kind, _open_and_declare, expected_sha256)


def _open_and_declare(so_path: str) -> ctypes.CDLL:
    lib = open_model_library(so_path)
    for name in _REQUIRED:
        if not exports(lib, name):
            close_refused_library(lib)
            raise PackageError(f"{so_path!r} is not an AOTInductor model: it does not export {name}. The package "
                               "is damaged or was not written by AOTInductor; lower the model again.")
    for name, argtypes in _SIGNATURES.items():
        if exports(lib, name):
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int32
    return lib


_MMAP_SELF_HEADER = 16  # AOTI's constants blob where the weights are appended to the library file: (size, magic)


class ModelContainer:
    """One ``AOTInductorModelContainer`` made from a generated .so.

    Args:
        so_path: the package's ``<hash>.wrapper.so``.
        device: the container's device string, e.g. "cpu" or "cuda:0" (what the C ABI's
            ``device_str`` expects).
        cubin_dir: the folder that holds the package's kernel binaries (.cubin) for CUDA; the folder of
            the .so, as torch's own package loader passes it.
        num_models: how many model instances the container keeps for concurrent ``run`` calls.
        library_kind: share the loaded library with other containers of a .so with the same bytes and
            kind (``open_library``); None loads it anew.

    Raises PackageError when the container cannot be created.
    """

    def __init__(self, so_path: str, device: str, cubin_dir: str | None, num_models: int = 1,
                 library_kind: str | None = None, expected_sha256: object = None):
        self._lib = open_library(so_path, library_kind, expected_sha256)
        self._handle = _Handle()
        self._first_run = True  # under ENVIRONMENT_LOCK
        cubin = os.fsencode(cubin_dir) if cubin_dir else None  # a path's bytes (TMPDIR may not be UTF-8)
        # Entered before the container exists: it lands in self._handle inside the C call, so any exception after
        # (a KeyboardInterrupt as the call returns, a query that fails) deletes it. Nothing else would: a half-made
        # ModelContainer is dropped with its model (weights, on CUDA in device memory) for the life of the process.
        try:
            code = self._lib.AOTInductorModelContainerCreateWithDevice(
                ctypes.byref(self._handle), num_models, device.encode(), cubin)
            if code != _OK or not self._handle.value:
                raise PackageError(
                    f"creating the model container on {device!r} failed ({self.last_error() or f'code {code}'}). "
                    "Check that the package was built for this device and this torch version."
                )
            self.keeps_last_error = exports(self._lib, "AOTInductorGetLastError")
            self.num_inputs = self._get_size("AOTInductorModelContainerGetNumInputs")
            self.num_outputs = self._get_size("AOTInductorModelContainerGetNumOutputs")
            self._has_single_threaded = exports(self._lib, "AOTInductorModelContainerRunSingleThreaded")
        except BaseException:
            self.delete()
            raise

    # --- queries -------------------------------------------------------------------------------------

    def address_of(self, name: str) -> int | None:
        """The address of function ``name`` as the library's own calls find it (dlsym on its handle: the library,
        then the libraries it links, such as the OpenMP runtime of a CPU model), or None where none exports it."""
        if not exports(self._lib, name):
            return None
        return ctypes.cast(getattr(self._lib, name), ctypes.c_void_p).value

    @property
    def library_sha256(self) -> str | None:
        """The SHA-256 of the file the model library was opened from (None for a library not shared)."""
        return digest_of(self._lib)

    def last_error(self) -> str:
        """The generated code's last C++ exception message on this thread, or "" where unavailable."""
        if not exports(self._lib, "AOTInductorGetLastError"):
            return ""
        message = ctypes.c_char_p()
        if self._lib.AOTInductorGetLastError(ctypes.byref(message)) != _OK or not message.value:
            return ""
        text = message.value.decode(errors="replace")
        # c10::Error's what() appends the C++ stack trace (18 lines of frames): keep the message.
        return text.split(_CXX_TRACE, 1)[0].strip()

    def _check(self, code: int, what: str, error=RuntimeCallError, detail: str | None = None) -> None:
        """Raise ``error`` for a failed call, with the generated code's last error (``detail`` where the caller
        has read it already)."""
        if code != _OK:
            detail = (self.last_error() if detail is None else detail) or (
                "" if exports(self._lib, "AOTInductorGetLastError")
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
        if not exports(self._lib, function):
            return f"{'input' if 'Input' in function else 'output'}{index}"
        name = ctypes.c_char_p()
        self._check(getattr(self._lib, function)(self._live(), index, ctypes.byref(name)), function)
        return name.value.decode() if name.value else str(index)

    def call_spec(self) -> tuple[str, str]:
        """The (in_spec, out_spec) pytree specs as serialized by torch.utils._pytree.treespec_dumps ("" if none)."""
        if not exports(self._lib, "AOTInductorModelContainerGetCallSpec"):
            return "", ""
        in_spec, out_spec = ctypes.c_char_p(), ctypes.c_char_p()
        self._check(self._lib.AOTInductorModelContainerGetCallSpec(
            self._live(), ctypes.byref(in_spec), ctypes.byref(out_spec)), "GetCallSpec")
        return (in_spec.value or b"").decode(), (out_spec.value or b"").decode()

    # --- constants -----------------------------------------------------------------------------------

    def load_constants_blob(self, blob_path: str) -> None:
        """Load the weights of a package that stores them in a separate ``.blob`` file (not in the .so)."""
        if not exports(self._lib, "AOTInductorModelUpdateConstantsFromBlob"):
            raise PackageError("the package keeps its weights in a .blob file, but its model cannot load one")
        needed = self.blob_bytes()
        size = os.path.getsize(blob_path)
        if needed is not None and size != needed:
            # The generated code reads the constants one after another from the blob's start, with no length:
            # a shorter blob was read past its end (silent NaN weights, or a crash), a longer one is another model's.
            raise PackageError(f"the weights file {os.path.basename(blob_path)} has {size} bytes, but the model's "
                               f"constants take {needed}: it was {'cut short' if size < needed else 'made for another model'}"
                               "; nothing was loaded. Copy the package again, or lower the model again")
        with open(blob_path, "rb") as blob:
            data = blob.read()
        self._blob = data  # the container may keep pointers into it
        self._check(self._lib.AOTInductorModelUpdateConstantsFromBlob(self._live(), data),
                    f"loading the weights from {os.path.basename(blob_path)}", PackageError)

    def check_weights_in_library(self, package_path: str) -> None:
        """PackageError when the model keeps its weights outside its library and none were loaded (no ``.blob``):
        a package lowered with torch's ``package_constants_in_so=False`` keeps them in ``data/weights/`` (the
        ``pickle_weights`` format, which aotcuda does not read) or in a ``.blob`` that may be missing; its
        library then holds an empty constants blob, and the first run read the weights through null pointers
        (SIGSEGV). The library's ``_binary_constants_bin_start/end`` span the weights it holds, or 16 bytes
        where they are appended to its file (AOTI's mmap of itself, for weights over 2 GB)."""
        needed = self.blob_bytes()
        try:
            held = (ctypes.addressof(ctypes.c_uint8.in_dll(self._lib, "_binary_constants_bin_end"))
                    - ctypes.addressof(ctypes.c_uint8.in_dll(self._lib, "_binary_constants_bin_start")))
        except ValueError:  # a library without the symbols: nothing to compare
            return
        if not needed or held >= needed or held == _MMAP_SELF_HEADER:
            return
        raise PackageError(f"{package_path!r}: its model keeps its weights outside its library ({needed} bytes of "
                           f"constants; the library holds {held}), and the package gives none that aotcuda loads: it "
                           "was lowered with torch's package_constants_in_so=False, and keeps them in data/weights/ "
                           "(the pickle_weights format, which aotcuda does not read), or its .blob file is missing. "
                           "Running it would read weights that were never loaded; nothing was run. Lower the model "
                           "again with aotcuda.lower (weights inside the library), or with "
                           "package_constants_on_disk_format='binary_blob'")

    def blob_bytes(self) -> int | None:
        """The bytes the model reads from a weights blob: the data of its constants that are not folded, one
        after another (AOTI's ``load_constants``); None where the library does not say."""
        functions = ("AOTInductorModelContainerGetNumConstants", "AOTInductorModelContainerGetConstantFromFolded",
                     "AOTInductorModelContainerGetConstantDataSize")
        if not all(exports(self._lib, name) for name in functions):
            return None
        total, folded, size = 0, ctypes.c_bool(), ctypes.c_size_t()
        for index in range(self._get_size(functions[0])):
            self._check(self._lib.AOTInductorModelContainerGetConstantFromFolded(
                self._live(), index, ctypes.byref(folded)), functions[1], PackageError)
            if folded.value:
                continue
            self._check(self._lib.AOTInductorModelContainerGetConstantDataSize(
                self._live(), index, ctypes.byref(size)), functions[2], PackageError)
            total += size.value
        return total

    # --- running -------------------------------------------------------------------------------------

    def run(self, input_handles, output_handles: ctypes.Array, stream: int | None = None,
            single_threaded: bool = False) -> None:
        """Run the model once.

        Args:
            input_handles: one AtenTensorHandle per input, as a C array (``handles.new_handle_array``) or a list of
                ints; stolen by the container, also when the run fails, except when AOTI's input checks
                (AOTI_RUNTIME_CHECK_INPUTS) reject them first: those stay the caller's (``Program._run``
                tells them apart).
            output_handles: a C array of ``num_outputs`` handles (``handles.handle_array_type(n)()``); the container
                writes the outputs there and the caller owns them afterwards (also those written before a
                failure). Several slots may hold one handle.
            stream: the CUDA stream (``torch.cuda.Stream.cuda_stream``), or None for the default/CPU.
            single_threaded: use ``RunSingleThreaded``, which skips the container's model pool and its
                events and can be captured into a CUDA graph.

        Raises RuntimeCallError when the container reports an error, InputError when the error is a model's own
        check on a value computed from the inputs (torch._check after .item(): the values are the caller's).
        """
        if self._first_run:  # the library may read AOTI_RUNTIME_CHECK_INPUTS now: see ENVIRONMENT_LOCK
            with ENVIRONMENT_LOCK:
                self._first_run = False
                # The class's run, not the attribute: a wrapper set on the instance (a test's ledger, a profiler)
                # would see this one run twice.
                return type(self).run(self, input_handles, output_handles, stream, single_threaded)
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
        mute = cxx_error_mute() if self.keeps_last_error else None  # stderr is the only place without it
        if mute is None:  # the generated code prints each error, with its C++ stack trace, on stderr
            code = function(handle, input_handles, len(input_handles), output_handles, len(output_handles),
                            stream, None)
        else:  # AOTCUDA_FOREIGN_WRITES: std::cerr muted during the run (the message reaches the error)
            runs = mute.runs  # inline, not `with`: see libloader.CerrMute (a signal's exception)
            runs += (1,)  # nothing is called from here into the try, so no handler runs in between
            try:
                if not runs[1:]:  # the first run in flight mutes
                    mute.on()
                code = function(handle, input_handles, len(input_handles), output_handles, len(output_handles),
                                stream, None)
            finally:
                del runs[-1]  # first, and no call before the unmute: an exception raised as off() returns comes after
                if not runs:
                    mute.off()
        if code != _OK:
            detail = self.last_error()
            check = _VALUE_CHECK.fullmatch(detail)
            if check is not None:
                raise ValueCheckFailed(check["check"], check["value"])
            self._check(code, "running the model", detail=detail)

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
