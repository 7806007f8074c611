"""Program: a loaded AOTInductor package, run through the model container's C ABI.

    program = aotcuda.load("model.pt2")                  # device from the package; cuda_graphs=False
    outputs = program(*args, **kwargs)                   # structured like the eager module's outputs
    flat = program.execute([x], outputs=[a, b, c])       # flat inputs; optional caller output buffers

What a call does:
  1. flattens the arguments with the package's input pytree spec and checks every input before running
     (``aotcuda.runtime.checks``), and the values of integer inputs that reach an index
     (``aotcuda.runtime.index_ranges``): a rejected call raises InputError and leaves the Program usable;
  2. makes one AtenTensorHandle per input (torch's ``unsafe_alloc_void_ptrs_from_tensors``; the
     container steals them, except those it rejects before its run, which we release) and runs the
     container;
  3. turns the output handles into tensors by the ownership rule (``aotcuda.runtime.ownership``): slots
     that hold one handle get one tensor, so a tensor returned in several slots comes back as one storage,
     as in eager; on a failed run every written handle is released exactly once;
  4. unflattens the outputs with the output pytree spec (library output types such as transformers'
     CausalLMOutputWithPast are imported from the module the signature records; where that cannot be
     imported they come back as a plain dict or tuple, with a warning: ``aotcuda.runtime.pytree_types``);
  5. writes back inputs the program updates in place into the caller's tensors, when the checks had
     copied them into the exported layout (``checks.copies_back``), also when an interrupt ends the call.

Threads: one Program may be called from many threads; ``close()`` waits for the calls in flight
(``aotcuda.runtime.lifetime``). Overlapping caller output buffers are refused (``checks.shares_memory``).

Caller-provided outputs (``execute(inputs, outputs=[...])``) each get their own copy of their slot's
result (device to device on CUDA), also slots that share a handle. Their dtype, device and shape are
checked before running where the package's signature allows, and after the run otherwise; a mismatch
raises OutputError. CUDA graphs: see ``aotcuda.runtime.graphs``.
"""

from __future__ import annotations

import contextlib
import copy

import functools
import os
import re
import sys
import threading
import warnings

import torch
import torch.utils._pytree as pytree

from aotcuda import standard_descriptors, switches
from aotcuda.errors import (Advice, InputError, OutputError, PackageError, RuntimeCallError, quoted,
                            terminal_clipped)
from aotcuda.package_tags import signing_key as signing_key_of
from aotcuda.runtime import ownership
from aotcuda.runtime.accepted import AcceptedSignatures
from aotcuda.runtime.archive import ArchiveLimits
from aotcuda.runtime.bool_bytes import bool_positions, checked_bool_copies
from aotcuda.runtime.bound import BoundGraph, bind_graph
from aotcuda.runtime.checks import (
    GPU_ALIGN_BYTES,
    aligned_written_inputs,
    check_buffers_match,
    check_caller_outputs,
    check_inputs,
    check_mutated_inputs,
    copies_back,
    not_a_tensor_error,
)
from aotcuda.runtime.complex_adapter import split_signature
from aotcuda.runtime.aoti_checks import aoti_input_checks, latch_aoti_input_checks
from aotcuda.runtime.container import ModelContainer, ValueCheckFailed, value_check_message
from aotcuda.runtime.libraries import LibraryDigestMismatch
from aotcuda.runtime.graphs import GraphRunner, per_distinct_tensor, raw_stream_function
from aotcuda.runtime.devices import resolve_device
from aotcuda.runtime.handles import (
    OutputStealer,
    delete_handle,
    handle_array_type,
    new_handle_array,
    release_unstolen,
    release_written,
    steal_handles,
)
from aotcuda.runtime.divisors import SizeDivisors
from aotcuda.runtime.index_ranges import IndexRangeChecks
from aotcuda.runtime.lifetime import OPENMP, CallGate
from aotcuda.runtime.constant_arguments import ConstantArguments
from aotcuda.runtime.keywords import (bind_keywords, holds_inner_dicts, in_spec_order, positional_names,
                                      structure_difference)
from aotcuda.runtime.plain_tensors import caller_modes_active, plain_inputs, plain_outputs, without_caller_modes
from aotcuda.runtime.package import ExtractedPackage, check_no_proxy_executor, open_package, read_signature
from aotcuda.runtime.pytree_types import load_spec
from aotcuda.runtime.returned_inputs import returned_inputs, with_returned_inputs
from aotcuda.runtime.shared_results import shared_results, with_shared_results
from aotcuda.runtime.specs import specs_from_signature

__all__ = ["Program", "load", "read_signature"]

_Tensor = torch.Tensor
_increment_version = torch.autograd.graph.increment_version
_thread = threading.get_ident
# torch.compile around a Program: dynamo cannot trace the container's calls (it failed inside them with "'dict'
# object has no attribute 'node'"), so a traced call runs as a graph break through these. is_compiling() costs
# ~0.05 µs an eager call; torch.compiler.disable on the methods themselves would cost ~0.45 µs on every call,
# and it imports Dynamo, which loading a package does not (the disabled call is made while traced).
_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


def _outside_dynamo(call):
    return torch.compiler.disable(call)()


def load(path: str | os.PathLike, *, device: str | torch.device | None = None, cuda_graphs: bool = False,
         model_name: str | None = None, limits: ArchiveLimits | None = None,
         check_index_ranges: bool | None = None, package_sha256: str | None = None, signing_key=None) -> Program:
    """Load an AOTInductor package (.pt2) and return a callable Program.

    Args:
        path: the package, as written by ``aotcuda.lower`` or ``torch._inductor.aoti_compile_and_package``
            (a leading "~" is the home folder, as the shell reads it).
        device: where to run; default: the package's device type ("cpu", or the current CUDA device).
            A CUDA package runs only on CUDA, a CPU package only on the CPU.
        cuda_graphs: capture the model in CUDA graphs after three warm-up calls per input shape (CUDA only).
            Results are the graph's own output buffers while the caller drops each before the next call but
            one (as a loop does), else copies of them (``aotcuda.runtime.graphs``).
        model_name: which model of a package with several (default: "model", or the only one).
        limits: bounds on what the package may inflate to when extracted (``aotcuda.runtime.archive``;
            default: ``ArchiveLimits.from_environment()``).
        check_index_ranges: check, before each call, that integer inputs which reach an index (token ids,
            positions) hold values eager accepts, raising InputError otherwise (``aotcuda.runtime.index_ranges``:
            one min/max per such input, and on CUDA one synchronization per call). False: trusted callers
            skip it, and an out-of-range value then reaches the generated code's own check: a RuntimeCallError
            where the kernel runs on one thread, the end of the process (SIGABRT) where it runs in an OpenMP
            parallel region, a device-side assert that breaks the CUDA context on CUDA.
            Default: the switch AOTCUDA_CHECK_INDEX_RANGES (on).
        package_sha256: the SHA-256 the package file must have (``aotcuda.runtime.package_checks.package_sha256``),
            compared with the bytes this load reads, before anything of them is used: a server's replicas load
            the package the server checked, not whatever another process put at the path since.
        signing_key: load only a package signed with this key at lowering (``lower(..., signing_key=)``): bytes
            (at least 32), or the path of a file holding them, readable by its owner alone (chmod 600).
            Default: the file the switch AOTCUDA_SIGNING_KEY_FILE names, read at each load; unset: no key, and a
            signed package loads as any other (its tag unchecked). With a key, a package without a tag, of
            another key, or with an entry changed since it was signed (its signature, metadata, library, ...) is
            refused before anything of it is used (``aotcuda.package_tags``).

    In a process whose descriptor 0, 1 or 2 is closed, /dev/null is put on it first, as ``lower`` does.

    Raises PackageError when the package cannot be opened or loaded on that device, exceeds the limits, or is not
    signed with the key given; SigningKeyError for a key that cannot be used (too short, a file others may read).
    """
    standard_descriptors.fill_closed()  # a closed 0-2: no file the load or torch opens takes its number
    _check_flags(cuda_graphs=cuda_graphs, check_index_ranges=check_index_ranges)
    if limits is not None and not isinstance(limits, ArchiveLimits):
        raise PackageError(f"limits must be an aotcuda.runtime.archive.ArchiveLimits, got {type(limits).__name__}; "
                           "pass e.g. ArchiveLimits.from_environment() with the fields changed, or leave it out")
    package = open_package(path, model_name, limits, expected_sha256=package_sha256,
                           signing_key=signing_key_of(signing_key))
    try:
        return Program(package, device=device, cuda_graphs=cuda_graphs, check_index_ranges=check_index_ranges)
    except BaseException:
        package.cleanup()
        raise


_INPUT_HANDLE = re.compile(r"input_handles\[(\d+)\]")  # AOTInductor's input checks name an input by its place


class Program:
    """A loaded AOTI package. Build it with ``aotcuda.load``.

    Read-only info: ``package_path``, ``device``, ``input_specs`` / ``output_specs`` (TensorSpec per flat
    input/output, or None when the package has no aotcuda signature), ``input_names`` / ``output_names``
    (the specs' names, in the container's order: ``execute`` and ``bind`` take their inputs in that order;
    the container's own names, ``arg5_1``, without a signature), ``constant_inputs`` (``{"scale": 2.0}``:
    the non-tensor arguments fixed at lowering, which the program computes with whatever a call passes:
    ``aotcuda.runtime.constant_arguments``), ``num_inputs``, ``num_outputs``, ``cuda_graphs``, ``closed``,
    ``signature`` (a copy of the package's aotcuda signature as loaded, the dict ``aotcuda.package_format``
    describes; None for a package without one), ``metadata`` (the model's AOTInductor metadata, each value a str),
    ``index_unchecked`` ({input name: lines}: inputs whose values reach an index that lowering could not bound,
    which no check covers before a call; empty for most programs).
    Complex inputs and outputs of the user's program (real pairs in the package) are passed and returned as
    complex tensors, and their specs say so (``aotcuda.runtime.complex_adapter``).
    """

    def __init__(self, package: ExtractedPackage, *, device=None, cuda_graphs: bool = False,
                 check_index_ranges: bool | None = None):
        self._package = package
        self._device = resolve_device(package, device)
        if cuda_graphs and self._device.type != "cuda":
            raise PackageError(f"cuda_graphs=True needs a CUDA package and device; this one runs on "
                               f"{self._device}. Load it with cuda_graphs=False.", advice=(Advice("cuda_graphs", False),))
        check_no_proxy_executor(package)
        self._gate = CallGate()
        self._grad_warning_due = True  # warn_if_inputs_require_grad: once per Program
        unchecked = package.signature is None
        # AOTI's checks for a package whose JSON aotcuda's checks would trust alone, or where the switch asks for them
        library_checks = unchecked or switches.flag("AOTCUDA_LIBRARY_INPUT_CHECKS")
        self._container = self._make_container(aoti_checks=library_checks)
        self._input_names = self._container.input_names()
        self._output_names = self._container.output_names()
        self._in_spec, self._out_spec = self._load_call_spec()
        signature, boundary = split_signature(package.signature, package.path)  # complex I/O: caller's terms
        self._input_specs, self._output_specs = self._load_specs(signature)
        if self._input_specs is None and not library_checks:  # a stale signature: AOTI's own checks, as unsigned
            self._container.delete()
            self._container = self._make_container(aoti_checks=True)
        usable = self._input_specs is not None and self._output_specs is not None
        self._boundary = boundary if usable else None  # a stale signature adapts nothing
        if not usable and signature:
            _warn_stale_signature(signature, self.num_inputs, self.num_outputs, package.path)
        self._mutated, self._written = _written_inputs(self._input_specs, self.num_inputs)
        # the package does not say which inputs its program writes: copy back only what a run changed (copies_back)
        self._writes_unknown = self._written != self._mutated
        self._align_written = self._device.type == "cuda" and bool(self._written)
        if check_index_ranges is None:
            check_index_ranges = switches.flag("AOTCUDA_CHECK_INDEX_RANGES")
        self._index_checks = IndexRangeChecks.from_signature(signature, self.num_inputs, self._device, package.path) \
            if check_index_ranges and usable else None
        self._divisors = SizeDivisors.from_signature(signature, package.path) if usable else None
        # outputs that are inputs as they are (`return y, x`): the caller's own tensor goes back there, as eager's
        self._returned_inputs = returned_inputs(package.signature, package.path) if usable else ()
        # slots that hold one result (`return out, out`): one tensor object there, as eager's
        self._shared_results = shared_results(package.signature, package.path) if usable else ()
        # bool inputs, whose bytes each call checks (CPU: bool_bytes); without usable specs, any input may be one
        self._bool_inputs = () if self._device.type != "cpu" else bool_positions(self._input_specs) \
            if self._input_specs is not None else tuple(range(self.num_inputs))
        # inputs that reach an index the lowering could not bound (signature "index_unchecked"): {name: lines}
        self.index_unchecked = {spec["name"]: list(spec["index_unchecked"])
                                for spec in (signature or {}).get("inputs") or []
                                if isinstance(spec, dict) and isinstance(spec.get("index_unchecked"), list)
                                and spec["index_unchecked"]}
        self._input_labels = tuple(spec.name for spec in self._input_specs or ()) or tuple(self._input_names)
        names = (signature or {}).get("dim_names")  # checked as an object of strings with the index ranges
        self._dim_names = names if isinstance(names, dict) and all(isinstance(v, str) for v in names.values()) else None
        self._graphs = None
        if cuda_graphs:  # a returned input is the caller's own memory: a capture reading it in place would hold it
            in_place = switches.flag("AOTCUDA_GRAPHS_IN_PLACE") and not self._returned_inputs
            self._graphs = GraphRunner(self._run, self._device, mutated=self._written, in_place_sets=2 if in_place else 0)
        self._arg_names = None
        self._constants: ConstantArguments | None = None
        self._constant_arguments()  # read at load: a malformed constant_inputs/forward_parameters is a PackageError
        self._accepted = AcceptedSignatures(self._input_specs, self._device, self.num_inputs)
        self._output_array = handle_array_type(self.num_outputs)
        self._stealer = OutputStealer(self.num_outputs)
        self._stream_of = raw_stream_function(self._device) if self._device.type == "cuda" else None
        self._fast_paths()

    def _stale_signature(self, opened: str) -> PackageError:
        """The refusal of a signature written for another model library than the package holds: the checks
        would pass inputs of its shapes and dtypes to generated code that reads others (past a buffer's end).
        Found before the library is opened (``libraries.open_shared``), so that nothing of it ran."""
        recorded = self._package.signature.get("library_sha256")
        hexadecimal = isinstance(recorded, str) and all(char in "0123456789abcdef" for char in recorded[:16])
        shown = f"{recorded[:16]}..." if hexadecimal else repr(recorded)[:80]  # not hex: the package's text, quoted
        return PackageError(f"{self._package.path!r}: its aotcuda signature was written for another model library "
                            f"(SHA-256 {shown}) than the one it holds ({opened[:16]}...): the package was damaged or "
                            "altered, or the signature is stale; the library was not opened. Lower the model again, or "
                            "write the signature again with write_signature (without its library_sha256)")

    def _make_container(self, aoti_checks: bool) -> ModelContainer:
        """The model container, on a library shared with other loads of the same .so. A package whose inputs
        only AOTI's own checks can check gets a library of its own kind, whose first run (here, with
        AOTI_RUNTIME_CHECK_INPUTS=1 for that run only) turns them on for good: aoti_checks.latch_aoti_input_checks.
        Raises PackageError (the environment turns the checks off; the container cannot be created)."""
        package = self._package
        if aoti_checks:
            why = None if package.signature is None else (
                "is loaded with AOTCUDA_LIBRARY_INPUT_CHECKS=1 (or a signature that does not fit its model), which "
                "asks for AOTInductor's own input checks")
            with aoti_input_checks(package.path, why):
                container = self._new_container("aoti-checks")
                try:
                    latch_aoti_input_checks(container, str(self._device), package.path)
                except BaseException:
                    container.delete()
                    raise
            return container
        return self._new_container("")

    def _new_container(self, kind: str) -> ModelContainer:
        """A model container on the package's library, refused before the library is opened where the signature
        records another library's SHA-256 (signatures without ``library_sha256``, from older aotcuda, are
        trusted as before)."""
        package = self._package
        try:
            container = ModelContainer(package.so_path, str(self._device), package.model_dir, library_kind=kind,
                                       expected_sha256=(package.signature or {}).get("library_sha256"))
        except LibraryDigestMismatch as mismatch:
            raise self._stale_signature(mismatch.opened) from None
        try:
            if package.blob_path:
                container.load_constants_blob(package.blob_path)
            else:
                container.check_weights_in_library(package.path)
        except BaseException:
            container.delete()
            raise
        if self._device.type == "cpu":  # a child forked after its runs must reach this library's OpenMP (OPENMP)
            OPENMP.note(container.address_of("omp_set_max_active_levels"))
        return container

    # --- read-only info ------------------------------------------------------------------------------

    package_path = property(lambda self: self._package.path)
    device = property(lambda self: self._device)
    input_specs = property(lambda self: self._input_specs)
    output_specs = property(lambda self: self._output_specs)
    # The names a user reads: those of input_specs / output_specs (forward's parameter, the place in its
    # result: "x", "out['logits']"); the container's own ("arg5_1", "output0") only where there is no usable
    # signature. The container's stay in self._input_names / self._output_names for the checks.
    input_names = property(lambda self: self._input_labels)
    output_names = property(lambda self: tuple(spec.name for spec in self._output_specs) if self._output_specs
                            else tuple(self._output_names))
    constant_inputs = property(lambda self: self._constant_arguments().shown() if self._in_spec is not None else {})
    num_inputs = property(lambda self: self._container.num_inputs)
    num_outputs = property(lambda self: self._container.num_outputs)
    cuda_graphs = property(lambda self: self._graphs is not None)
    # The signature as loaded (a copy): serving plans from this, not from a second read of the file, which another
    # process may have replaced in between.
    signature = property(lambda self: copy.deepcopy(self._package.signature))
    closed = property(lambda self: self._gate.closed)  # True from the moment close() begins
    metadata = property(lambda self: dict(self._package.metadata))

    def __repr__(self) -> str:
        state = "closed" if self._container.deleted else (
            f"{_counted(self.num_inputs, 'input')}, {_counted(self.num_outputs, 'output')}")
        return f"Program({self.package_path!r}, device={str(self._device)!r}, {state})"

    def _load_call_spec(self):
        in_text, out_text = self._container.call_spec()
        recorded = (self._package.signature or {}).get("pytree_types")
        in_spec = load_spec(in_text, recorded, self.package_path, "inputs")
        out_spec = load_spec(out_text, recorded, self.package_path, "outputs")
        if out_spec is not None and out_spec.num_leaves != self.num_outputs:
            out_spec = None  # non-tensor outputs: give the flat list rather than a wrong structure
        return in_spec, out_spec

    def _load_specs(self, signature: dict | None):
        if not signature:
            return None, None
        inputs, outputs = specs_from_signature(signature, self.package_path)  # PackageError when malformed
        # A signature that does not describe this container (e.g. a stale entry) is not used for checks.
        return (inputs if len(inputs) == self.num_inputs else None,
                outputs if len(outputs) == self.num_outputs else None)

    # --- calling -------------------------------------------------------------------------------------

    def __call__(self, /, *args, **kwargs):  # /: a keyword named self is the call's, refused as any unknown keyword
        """Run on the exported module's arguments; return outputs structured like the module's."""
        if _compiling():  # traced by torch.compile: run outside it (a graph break), as eager calls it
            return _outside_dynamo(lambda: self(*args, **kwargs))
        if not kwargs and len(args) == self._num_flat_args:
            for arg in args:  # a loop, not all(genexpr): the generator costs more than the checks
                if not isinstance(arg, _Tensor):
                    break
            else:  # fast path: the exported module takes plain tensors, positionally
                return self._structure_outputs(self._execute(list(args), None))
        return self._structure_outputs(self._execute(self._flatten_arguments(args, kwargs), None))

    def _fast_paths(self) -> None:
        """Spot the usual call shapes once, so that each call skips pytree work (tens of µs per call,
        the whole host budget of a CUDA-graph replay): ``forward(t0, t1, ...)`` taking tensors
        positionally, and outputs that are one tensor or a flat tuple of tensors."""
        n_in, n_out = self.num_inputs, self.num_outputs
        flat_in = pytree.tree_flatten((tuple(range(n_in)), {}))[1]
        self._num_flat_args = n_in if self._in_spec == flat_in else -1  # -1: never the fast path
        self._inner_dicts = self._in_spec is not None and holds_inner_dicts(self._in_spec)
        if self._out_spec is None:
            self._structure_outputs = lambda outputs: outputs
        elif n_out == 1 and self._out_spec.is_leaf():
            self._structure_outputs = lambda outputs: outputs[0]
        elif self._out_spec == pytree.tree_flatten(tuple(range(n_out)))[1]:
            self._structure_outputs = tuple
        else:
            self._structure_outputs = lambda outputs: pytree.tree_unflatten(outputs, self._out_spec)
        numbers = [(index, spec.scalar_type) for index, spec in enumerate(self._output_specs or ())
                   if spec.scalar_type is not None]
        if numbers:  # eager returns a Python number there (x.shape[0], a constant): the container, a 0-d tensor
            self._structure_outputs = functools.partial(_with_numbers, self._structure_outputs, numbers)

    def _flatten_arguments(self, args, kwargs) -> list:
        if self._in_spec is None:
            if kwargs:
                raise InputError("this package has no input pytree spec: pass its inputs positionally")
            return list(args)
        constants = self._constant_arguments()
        args, kwargs = constants.bind(args, kwargs)
        args, kwargs = bind_keywords(args, kwargs, self._in_spec, self._positional_names(),
                                     constants.unknown_keyword_hint())
        if self._inner_dicts:  # a dict's keys in any order, as eager takes them
            args, kwargs = in_spec_order((args, kwargs), self._in_spec)
        try:
            flat, spec = pytree.tree_flatten((args, kwargs))  # recursive: one Python frame per level
        except RecursionError:
            raise InputError("the arguments nest deeper than Python's recursion limit lets them be read (a list that "
                             "holds itself, or thousands of nested lists); call it as the exported module was called "
                             "(Program.input_specs lists the tensors it takes)") from None
        if spec != self._in_spec:
            said = structure_difference(spec, self._in_spec, self._positional_names(), (args, kwargs),
                                        self._refuse_list_for_a_tensor)
            raise InputError(f"{said}; call it as the exported module was called")
        if constants.constants:
            constants.check(flat)
        if len(flat) == self.num_inputs:
            return flat  # every leaf is an input: a non-tensor there is an error that check_inputs names
        # Non-tensor leaves (ints, floats) were specialized into the program at export: they are not inputs. Where
        # the signature records which leaves those are, the others are the inputs, a non-tensor among them named by
        # check_inputs (p(x, 10) for a tensor timestep said "takes 2 tensor input(s), got 1")
        fixed = constants.values  # {leaf index: value}, read once at load
        if fixed and len(flat) - len(fixed) == self.num_inputs:
            return [leaf for index, leaf in enumerate(flat) if index not in fixed]
        return [leaf for leaf in flat if isinstance(leaf, torch.Tensor)]

    def _refuse_list_for_a_tensor(self, leaf: int, value, where: str) -> None:
        """Raise the InputError for a list or tuple of numbers given where the program takes the tensor of the input
        spec's flat ``leaf``: the tensor it wants and ``torch.as_tensor(value, dtype=...)``, as a NumPy array there is told
        (``p([[1, 2, 3]])`` was told "is a list of 1, expected a tensor")."""
        fixed = self._constant_arguments().values
        if leaf in fixed or not all(isinstance(item, (bool, int, float, complex)) for item in pytree.tree_leaves(value)):
            return  # a number fixed at lowering, or tensors in a list (p([x]) for p(x)): the structure's own words
        index = leaf - sum(1 for other in fixed if other < leaf)
        specs = self._input_specs
        spec = specs[index] if specs is not None and index < len(specs) else None
        raise not_a_tensor_error(value, spec, where, self._device)

    def _constant_arguments(self) -> ConstantArguments:
        """The constant inputs the signature records and forward's parameters (none in older packages:
        those accept any value there, as torch's loader does), read once, at load (PackageError where malformed)."""
        if self._constants is None:
            tensors = [spec.name for spec in self._input_specs] if self._input_specs is not None else None
            self._constants = ConstantArguments(self._package.signature, self._in_spec, self._positional_names(),
                                                self._package.path, tensors)
        return self._constants

    def _positional_names(self) -> list[str | None]:
        """forward's positional parameter names (None where unknown), computed once."""
        if self._arg_names is None:
            self._arg_names = positional_names(self._in_spec, self._package.signature, self._input_specs)
        return self._arg_names

    def _warn_if_inputs_require_grad(self, inputs: list) -> None:
        """A package is inference-only: its outputs carry no autograd graph. Say so (a UserWarning, once per
        Program) when an input requires grad with grad mode on, where a caller may expect backward() to work."""
        for index, tensor in enumerate(inputs):
            if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
                self._grad_warning_due = False
                name = self._input_labels[index] if index < len(self._input_labels) else f"#{index}"
                warnings.warn(f"input {name!r} (#{index}) requires grad, but aotcuda programs are inference-only: "
                              "the outputs carry no autograd graph (requires_grad=False) and backward() will not "
                              f"reach {name!r}. Call under torch.no_grad() (or torch.inference_mode()), or pass "
                              "tensor.detach(), to silence this warning", UserWarning,
                              stacklevel=_caller_stacklevel())
                return

    def execute(self, inputs, outputs=None) -> list:
        """Run on flat inputs (the container's order: ``input_names``).

        Args:
            inputs: one tensor per input. Inputs the program writes in place are updated in the caller's
                tensor whatever its layout, as eager updates them.
            outputs: None, or one caller-owned tensor per output slot to copy the results into; they
                must not share memory with each other or with an input.

        Returns one tensor per output slot (the caller's buffers when given). Slots that hold one result
        share one tensor when ``outputs`` is None, and a slot where forward returns an input as it is holds the
        caller's own tensor, as eager's, also where the program writes that input first (``x.add_(1); return x``:
        ``aotcuda.runtime.returned_inputs``).

        Raises InputError / OutputError before running, RuntimeCallError when the container fails (every
        output handle released once; the next call can run) or the Program was closed. A buffer whose shape is
        known only from the run (a package without a signature, a data-dependent size) is refused after it, with an
        OutputError that says so and carries the run's results (``.results``).

        Thread-safe: one Program may be called from many threads at once (calls through one CUDA graph
        take turns); ``close()`` waits for the calls in flight.
        """
        if _compiling():  # traced by torch.compile: run outside it (a graph break)
            return _outside_dynamo(lambda: self.execute(inputs, outputs))
        return self._execute(inputs, outputs)

    def _execute(self, inputs, outputs) -> list:
        """execute() outside torch.compile's tracing (__call__ looked already: ~0.1 µs a look)."""
        gate = self._gate  # the call gate inline, not `with`: see lifetime.CallGate (a signal's exception)
        calls, thread = gate.calls, _thread()
        calls += (thread,)  # nothing is called from here into the try, so no handler runs in between
        try:
            if gate.refusal is not None:  # closed, or forked while another thread was inside a call
                raise RuntimeCallError(gate.refusal)
            if caller_modes_active():  # FakeTensorMode & co. must not make the runtime's own copies (plain_tensors)
                with without_caller_modes():
                    return self._checked_call(inputs, outputs)
            return self._checked_call(inputs, outputs)
        finally:
            calls.remove(thread)  # first: an exception raised as this returns comes after it
            gate.free_deferred()

    def _checked_call(self, inputs, outputs) -> list:
        """execute() inside the call gate."""
        # A copy of the caller's list: another thread may put another tensor in it between the checks and the run
        originals = inputs[:] if type(inputs) is list else _as_list(inputs, "inputs", InputError)
        callers = originals  # the caller's own objects, before any plain alias of a subclass
        for tensor in originals:  # a subclass's own Python is never what the checks read (plain_tensors)
            if type(tensor) is not _Tensor or tensor.__dict__:  # __dict__: methods set on the object
                originals = plain_inputs(originals, self._input_specs, self._input_names, self._device)
                break
        bindings = self._accepted.lookup(originals)
        if bindings is None:  # not a signature that passed before: the full checks (they raise InputError)
            prepared, bindings = check_inputs(originals, self._input_specs, self._input_names, self._device,
                                              self.num_inputs, self._mutated)
            if self._divisors is not None:  # sizes the program divides by: once per shape, as the checks above
                self._divisors.check(bindings)
            self._accepted.remember(originals, prepared, bindings)
        else:
            prepared = originals  # checked before, and needing no copy into the exported layout
            if self._mutated:  # these depend on the tensors themselves, not their signature
                check_mutated_inputs(originals, self._mutated, self._input_specs, self._input_names)
        if self._bool_inputs:  # the values, each call: a byte but 0 or 1 is read as its value (bool_bytes),
            prepared = checked_bool_copies(prepared, self._bool_inputs, self._input_labels, originals)  # on a copy
        if self._grad_warning_due and _grad_enabled():  # inline: a method's frame and enumerate cost ~0.3 µs a call
            for tensor in originals:
                if tensor.requires_grad:
                    self._warn_if_inputs_require_grad(originals)
                    break
        if self._index_checks is not None:  # the values, each call (before a CUDA graph's replay too),
            prepared = self._index_checks.checked_copies(prepared, bindings, originals)  # on a copy the call reads
        if self._align_written:  # CUDA: AOTI runs on its own copy of a written input that is not aligned
            prepared = aligned_written_inputs(prepared, self._written)
        if self._boundary is not None:
            prepared_pairs = self._boundary.inputs_as_pairs(prepared)
        else:
            prepared_pairs = prepared
        given = outputs
        if outputs is not None:
            given = _as_list(outputs, "outputs", OutputError)
            outputs = plain_outputs(given)  # the same memory: the results land in the caller's buffers
            check_caller_outputs(outputs, self._output_specs, bindings, self._device, self.num_outputs,
                                 originals, self._input_labels)
        # Inputs copied into the exported layout (or for their index check) are copied back in the finally, whatever
        # ends the call: an interrupt after the run (a signal's handler raises as any call returns) left the caller's
        # tensor without the run's write. One C call there (copies_back), so no handler runs before the copies; the
        # caller's tensor then holds what the run wrote, as it would had the run written it in place.
        back = copies_back(originals, prepared, self._written, self._writes_unknown) if prepared is not originals \
            else None
        try:
            if self._graphs is not None:
                finish = functools.partial(self._finish, outputs)
                results = self._graphs(prepared_pairs, finish, lend=outputs is None)  # lent: as they are
            else:
                results = self._run(prepared_pairs)
                if outputs is not None or self._boundary is not None:  # else _finish hands the results back as they are
                    results = self._finish(outputs, results, False)
        except ValueCheckFailed as failed:  # said with this call's sizes and the user's Dim names
            raise InputError(value_check_message(failed.check, failed.printed, bindings,
                                                 self._dim_names)) from None
        finally:
            if back is not None:
                list(back)
        if self._mutated:  # autograd sees the write, as eager's in-place op: a tensor saved for a backward that the
            _increment_version([originals[index] for index in self._mutated])  # program wrote is refused there
        if outputs is None and self._returned_inputs:  # `return y, x`, `x.add_(1); return x`: x itself, as eager's
            results = with_returned_inputs(results, callers, self._returned_inputs)
        if outputs is None and self._shared_results:  # `return out, out`: one object, as eager's
            return with_shared_results(results, self._shared_results)
        return given if outputs is not given and given is not None else results  # the caller's own buffers

    def _finish(self, outputs, results: list, static: bool) -> list:
        """The call's results: complex views where the caller's program had complex outputs, copied into
        the caller's buffers when given, or copied out of a CUDA graph's static buffers."""
        if self._boundary is not None:
            results = self._boundary.outputs_as_complex(results)
        if outputs is not None:
            try:
                check_buffers_match(outputs, results)
            except OutputError as mismatch:  # found after the run: the call is done, and its results are the caller's
                raise _ran_anyway(mismatch, per_distinct_tensor(results, torch.Tensor.clone) if static else results) \
                    from None
            for buffer, result in zip(outputs, results):
                if result is not None:  # a None output (forward returns None there) leaves its buffer as it was
                    buffer.copy_(result)
            return outputs
        return per_distinct_tensor(results, torch.Tensor.clone) if static else results  # one copy per tensor

    def _run(self, inputs: list[torch.Tensor], stream: int | None = None, single_threaded: bool = False) -> list:
        """One container run: handles in, handles out, adopted by the ownership rule.

        Per call this is one torch call to make the input handles, one ctypes call to run, one torch call
        to adopt the outputs; every ctypes type and function is looked up once, at load.
        """
        if stream is None and self._stream_of is not None:
            stream = self._stream_of()
        elif not OPENMP.used and self._stream_of is None:  # a CPU run: OpenMP's threads may start (see OPENMP)
            OPENMP.used = True
        output_array = self._output_array()
        # The first input's handle goes on a private alias (a new TensorImpl, same memory) so that after a
        # failed run we can tell whether the model took the handles over: see _release_unstolen.
        if inputs:
            alias = inputs[0].data  # a new TensorImpl without a dispatcher call (detach() costs twice as much)
            input_array = new_handle_array([alias, *inputs[1:]])
        else:
            alias, input_array = None, handle_array_type(0)()
        try:
            self._container.run(input_array, output_array, stream, single_threaded)
        except BaseException as exc:
            release_written(output_array)
            release_unstolen(alias, input_array)
            if isinstance(exc, RuntimeCallError) and self._input_specs is None:
                self._said_which_input(exc)
            elif isinstance(exc, RuntimeCallError):
                self._said_unchecked_index(exc)
            raise
        handles = None
        try:  # the handles not yet handed to torch's tensors stay in `handles`, which the steal clears
            handles = list(output_array)
            if None not in handles and (len(handles) == 1 or len(set(handles)) == len(handles)):
                return self._stealer.steal(output_array, handles)  # the usual case: one distinct handle per slot
            return ownership.adopt_all(handles, steal_handles)
        except BaseException as exc:
            ownership.release_all(list(output_array) if handles is None else handles, delete_handle)
            if not isinstance(exc, Exception):  # a KeyboardInterrupt from a signal's handler stays one
                raise
            raise RuntimeCallError(f"taking over the model's outputs failed: {exc}") from exc

    def _said_unchecked_index(self, error: RuntimeCallError) -> None:
        """A note on the generated code's own bounds check (``index out of bounds: 0 <= tmp22 < (-1L) + ...``, in its
        variables) where the signature lists inputs whose values reach an index lowering could not bound: which
        input, through which op. Sixth new user (2026-12-07): a Wav2Vec2Model called with an attention_mask of 2s
        (eager: ``IndexError: index 78 is out of bounds for dimension 1 with size 39``) got the bare check; only
        `aotcuda run` named the input."""
        if "index out of bounds" not in str(error) or not self.index_unchecked:
            return
        # the package's lines, cut and escaped: a traceback prints a note as it is (break41)
        lines = terminal_clipped("; ".join(str(line) for entries in self.index_unchecked.values()
                                           for line in entries[:1]), 600)
        error.add_note(f"Likely cause: the values of {', '.join(map(repr, self.index_unchecked))} reach an index "
                       f"that lowering could not bound, so nothing checked them before the call: {lines}. "
                       "Eager refuses such values too (an IndexError); pass values that index within the sizes "
                       "(`aotcuda inspect` lists these inputs; docs/serving.md, 'Index values no check covers', says "
                       "how to make such an index one that is checked).")

    def _said_which_input(self, error: RuntimeCallError) -> None:
        """A note on AOTInductor's own refusal of an input (a package without an aotcuda signature: ``input_handles[0]:
        unmatched dim value at 1, expected: 4, but got: 5``), naming the input it numbers and why its words are
        AOTInductor's: a new user of a package torch wrote could not tell which input ``input_handles[0]`` was."""
        found = _INPUT_HANDLE.search(str(error))
        if found is None or int(found[1]) >= len(self._input_labels):
            return
        index = int(found[1])
        error.add_note(f"input_handles[{index}] is input #{index} ({quoted(self._input_labels[index])}): the package "
                       "has no aotcuda signature (aotcuda.lower did not write it), so AOTInductor's own check in its "
                       "code refused the call, in its terms; aotcuda.lower writes packages whose checks name the input "
                       "and the fix")

    def bind(self, inputs, outputs=None, *, warmup_calls: int = 3) -> BoundGraph:
        """Capture a CUDA graph on caller-owned static buffers: zero-copy replays (``aotcuda.runtime.bound``).

        Args:
            inputs: one CUDA tensor per input (the container's order, ``input_names``), in the layout the
                program was exported with (contiguous for most). The graph reads them in place: write each
                call's inputs into these tensors, then ``replay()``. They stay the caller's; inputs the
                program writes in place are written there by each replay.
            outputs: None (read ``BoundGraph.outputs``, the graph's own static outputs, overwritten by each
                replay; a slot where forward returns an input holds that input tensor, as a call's does), or one
                caller-owned tensor per output slot, apart from each other and from the
                inputs, that the graph fills at the end of each replay (a device copy inside the graph).
            warmup_calls: eager runs on ``inputs`` before the capture (at least one). A program that
                mutates its buffers (a KV cache) sees these runs like calls.

        Works with ``cuda_graphs`` True or False; a bound graph does not count against ``max_graphs``.
        Returns a BoundGraph (``.replay()``, ``.inputs``, ``.outputs``, ``.graph``, ``.close()``); it
        stops working when the Program is closed. Replays of one bound graph must not run concurrently
        (one set of buffers); use one bound graph per thread. Do not call the Program from other threads
        while ``bind`` runs: its capture uses the container's single-threaded run, which must not overlap
        a pooled run (a Program loaded with ``cuda_graphs=True`` serializes its own calls, not bind).

        Raises InputError / OutputError as a call would (and InputError when an input is not in the
        exported layout, which would need a copy), RuntimeCallError on a CPU Program, a closed one, or a
        failed capture. Index ranges are checked on ``inputs`` here; replays read the buffers unchecked
        (the caller writes them: values outside a range end in the generated code's device-side assert).
        """
        gate = self._gate  # inline, as in execute: see lifetime.CallGate (a signal's exception)
        calls, thread = gate.calls, _thread()
        calls += (thread,)  # nothing is called from here into the try, so no handler runs in between
        try:
            if gate.refusal is not None:
                raise RuntimeCallError(gate.refusal)
            with without_caller_modes() if caller_modes_active() else contextlib.nullcontext():
                return self._bind(inputs, outputs, warmup_calls)
        finally:
            calls.remove(thread)  # first: an exception raised as this returns comes after it
            gate.free_deferred()

    def _bind(self, inputs, outputs, warmup_calls: int) -> BoundGraph:
        """bind() inside the call gate."""
        callers = _as_list(inputs, "inputs", InputError)
        tensors = plain_inputs(callers, self._input_specs, self._input_names, self._device)
        prepared, bindings = check_inputs(tensors, self._input_specs, self._input_names, self._device,
                                          self.num_inputs, self._mutated)
        if self._divisors is not None:
            self._divisors.check(bindings)
        for index in sorted(self._written) if self._align_written else ():  # see aligned_written_inputs
            if prepared[index].data_ptr() % GPU_ALIGN_BYTES:
                raise InputError(f"bind() reads input {self._input_labels[index]!r} (#{index}) in place and the "
                                 f"program writes it, but its memory is not {GPU_ALIGN_BYTES}-byte aligned (a "
                                 "slice such as buf[1:]), so the generated code would write a copy of its own "
                                 "and never this tensor; bind a tensor of its own, e.g. x.clone(), and write into it")
        if self._index_checks is not None:  # the warm-up inputs; replays read the buffers unchecked
            self._index_checks.check(prepared, bindings)
        if self._boundary is not None:
            prepared = self._boundary.inputs_as_pairs(prepared)
        if outputs is not None:
            outputs = plain_outputs(_as_list(outputs, "outputs", OutputError))
            check_caller_outputs(outputs, self._output_specs, bindings, self._device, self.num_outputs,
                                 tensors, self._input_labels)
        adapt = self._boundary.outputs_as_complex if self._boundary is not None else list
        gate = self._gate
        bound = bind_graph(self._run, self._device, tensors, prepared, self._input_names, outputs,
                           warmup_calls, adapt, self._structure_outputs, lambda: not gate.closed,
                           self._returned_inputs, callers, self._shared_results)
        # The graph replays into this Program's container and buffers: it must keep the Program alive
        # (`bound = aotcuda.load(path).bind(x)` holds no other reference to it).
        bound.program = self
        return bound

    # --- lifetime ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Free the CUDA graphs and the model container, and remove the extracted package (idempotent).

        Calls in flight on other threads finish first (close waits for them); a close made on a thread that
        is itself inside a call (a signal handler, a callback) returns at once, and that call frees when it
        returns; an interrupt (Ctrl-C) while close waits reaches its caller, and the last call in flight to leave
        frees. Later calls raise RuntimeCallError. Outputs already returned stay valid. The model's library stays loaded for the
        next load of the same package (``aotcuda.runtime.libraries``: such libraries cannot be unloaded),
        and with it a hard-linked copy of the package folder it was opened from, removed at exit: the
        generated code reads its own file (weights over 2 GB are appended to it).
        """
        gate = getattr(self, "_gate", None)
        if gate is None:  # __init__ failed before the gate: nothing can be in flight
            self._free()
        else:
            gate.close(self._free)  # frees once no call is in flight (after the caller's own, on this thread)

    def _free(self) -> None:
        graphs = getattr(self, "_graphs", None)
        if graphs is not None:
            graphs.clear()
        container = getattr(self, "_container", None)
        if container is not None:
            container.delete()
        package = getattr(self, "_package", None)
        if package is not None:
            package.cleanup()

    # A copy made by copy.copy shared the container and the gate, and its __del__ closed both: dropping a copy closed
    # the Program it was made from. A Program is a handle on one loaded model, as a file object is on one file.
    def __copy__(self) -> Program:
        return self

    def __reduce_ex__(self, protocol):  # pickle, copy.deepcopy: a raw "cannot pickle '_thread.lock' object" before
        raise TypeError(f"a Program holds a loaded model ({self.package_path!r}) and cannot be pickled or deep-copied; "
                        "load the package again where another one is needed (aotcuda.load(program.package_path)), "
                        "e.g. in each worker process")

    def __deepcopy__(self, memo) -> Program:
        self.__reduce_ex__(4)

    def __enter__(self) -> Program:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer (e.g. at interpreter exit)
            pass


def _warn_stale_signature(signature: dict, num_inputs: int, num_outputs: int, path: str) -> None:
    """A UserWarning where a signature that does not describe the container (its counts differ: written by an
    aotcuda that left Python-number or None outputs out of it, or for another model) held checks the Program now
    goes without: its inputs' index ranges and its complex adapter. Said once, at load: they were dropped silently."""
    specs = [spec for kind in ("inputs", "outputs") for spec in signature.get(kind) or [] if isinstance(spec, dict)]
    lost = [what for what, held in (("index-range checks", any(spec.get("index_ranges") for spec in specs)),
                                    ("complex inputs and outputs", any(spec.get("complex") for spec in specs)))
            if held]
    if lost:
        counts = {kind: len(signature[kind]) if isinstance(signature.get(kind), list) else "no"
                  for kind in ("inputs", "outputs")}
        warnings.warn(f"{path}: its aotcuda signature lists {counts['inputs']} inputs and {counts['outputs']} outputs, "
                      f"the model takes {num_inputs} and returns {num_outputs}, so the signature is not used and this "
                      f"Program runs without its {' and '.join(lost)} (an out-of-range index reaches the generated "
                      "code). Lower the model again with this aotcuda (it records Python-number and None outputs)",
                      UserWarning, stacklevel=4)


def _ran_anyway(mismatch: OutputError, results: list) -> OutputError:
    """The OutputError of a caller buffer that does not fit its result, found after the run (a package without an
    aotcuda signature, whose output shapes are known only from the run; a data-dependent output size): the program has
    run, so its state and the inputs it writes were updated, and a call made again to get the results would run it a
    second time (breakcall, 2026-12-07: an unsigned Stateful package refused a (3, 4) buffer for its (2, 4) output, its
    step counter had moved to 1 and its cache input was written, and the next call gave step 2, the refused call's
    results lost). The error says so and carries the results (``.results``, one tensor per output slot, as execute
    returns them without buffers)."""
    error = OutputError(f"{mismatch}. The program has run (its state and the inputs it writes in place were updated), "
                        "so its results were not lost: they are this error's .results (one tensor per output slot); "
                        "calling again to get them would run it a second time")
    error.results = list(results)
    return error


def _with_numbers(structure, numbers: list[tuple[int, type]], outputs: list):
    """``structure(outputs)`` with each Python-number output (``TensorSpec.scalar``) as its number: the container
    returns ``x.shape[0]`` as a 0-d CPU tensor, eager as an int (a caller's own output buffer stays as it is)."""
    outputs = list(outputs)
    for index, kind in numbers:
        if isinstance(outputs[index], _Tensor) and outputs[index].dim() == 0:
            outputs[index] = kind(outputs[index].item())
    return structure(outputs)


def _check_flags(**flags) -> None:
    """load()'s switches must be bools (None: the default): a string is true whatever it says, so
    check_index_ranges="no" turned the checks on and cuda_graphs="no" was refused as cuda_graphs=True."""
    for name, value in flags.items():
        if value is not None and not isinstance(value, bool) and not (type(value) is int and value in (0, 1)):
            raise PackageError(f"{name}={quoted(value)} is not a bool; pass True or False")


def _as_list(values, what: str, error: type) -> list:
    """execute()'s inputs/outputs as a list; a lone tensor (which would iterate over its rows) is refused."""
    if isinstance(values, (list, tuple)):
        return list(values)
    raise error(f"execute() takes its {what} as a list of tensors, got {type(values).__name__}; "
                f"pass [tensor, ...] (one per {what[:-1]}, in the container's order)")


def _written_inputs(specs, num_inputs: int) -> tuple[frozenset[int], frozenset[int]]:
    """(inputs known to be written in place, inputs to write back after a run).

    A signature with the ``mutated`` field names them. Without it (an older aotcuda signature, or none),
    nothing is known: every input the checks copied (a layout or a negation bit) is written back, which
    is right whether the program wrote it or not, and costs a copy only for inputs that were copied.
    """
    if specs is not None and all(spec.mutated is not None for spec in specs):
        known = frozenset(i for i, spec in enumerate(specs) if spec.mutated)
        return known, known
    return frozenset(), frozenset(range(num_inputs))


def _caller_stacklevel() -> int:
    """The stacklevel of warnings.warn, called from a method of this file, that points at the first frame
    outside aotcuda.runtime (the user's call, through __call__ or execute)."""
    here, level, frame = os.path.dirname(os.path.abspath(__file__)), 2, sys._getframe(2)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    return level


def _counted(number: int, noun: str) -> str:
    """"1 input", "2 inputs" (a new user's trial, 2026-12-07: the repr read "1 inputs")."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
