"""lower(): nn.Module → AOTInductor package (.pt2) with no ATen fallback kernel left, step by step.

The steps, in order (``LoweredProgram.step_times`` has one entry each):

    to device     the model (a copy, if it lives elsewhere) and the example inputs on the target device
    export        torch.export.export(strict=False) there: device-specific choices made while tracing
                  (which fused attention kernel SDPA becomes) are the target's; then each whole-tensor write
                  (buffer.copy_(x)) is given its destination's dtype and shape explicitly, which the
                  decompositions would otherwise drop (lowering/whole_tensor_writes.py)
    decompose     ExportedProgram.run_decompositions(decomposition_table()), custom ops of model libraries
                  traced through their plain-torch implementation (lowering/library_ops.py)
    passes        passes(), in order: ReplaceViewCopyWithViewPass, ReplaceComplexWithRealPass; then the
                  device profile's (CUDA: ConcatSiblingProductsPass, SplitCacheAttentionPass,
                  PromptAttentionPass, RowProductsPass, FoldRMSNormIntoProductPass, StoreVectorOperandsPass,
                  EliminateCommonSubexpressionsPass; all but StoreVectorOperandsPass each behind a switch).
                  Each is a GraphPass (passes/result.py):
                  ``ep = graph_pass(ep)``, then ``graph_pass.result`` says what it did; then each 0-d tensor
                  constant becomes a full([], value) node, which Inductor can view (lowering/scalar_constants.py)
    compile       torch._inductor.aoti_compile_and_package, then the aotcuda signature entry
    (before compiling, the fallbacks known then are refused: an op AOTInductor would run through its proxy
    executor, lowering/proxy_ops.py; complex math left as it was and random ops, lowering/known_fallbacks.py)
    check         the fallback-kernel check (lowering/fallbacks.py) against the device's allow-list

The first three are before_compile(), which tests also call for the program Inductor would be given.
What differs between devices lives in lowering/devices.py (allow-list, Inductor options, passes), not in the
steps; every torch-version fix, with the step it is applied around, in lowering/torch_fixes.py.
The model passed in is not modified: when it is not on the target device, a copy is moved there
(so lowering a CPU model for CUDA holds its weights twice for a moment).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import errno
import logging
import os
import shutil
import tempfile
import time
import uuid
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from aotcuda import standard_descriptors
from aotcuda.errors import MissingFallbackKernelsError, PackageError, quoted
from aotcuda.lowering import torch_fixes
from aotcuda.lowering.archive_writer import ArchiveWriteError
from aotcuda.lowering.batch_row_flow import MIXES, row_flow, rows_record
from aotcuda.lowering.batch_rows import RowsProbe, not_probed_warning, probe_rows
from aotcuda.lowering.compile_failures import check_room, compile_resource_failure, interrupt_behind, package_unwritten
from aotcuda.lowering.cache_folders import check_cache_folders, check_temporary_folder
from aotcuda.lowering.compiler_variables import check_compiler_variables
from aotcuda.lowering.compile_lock import compiling_alone
from aotcuda.lowering.complex_scalars import complex_scalar_lines, complex_scalar_nodes, complex_scalars_message
from aotcuda.lowering.constant_outputs import check_constant_float_outputs
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.dependent_launch import with_pdl_codegen
from aotcuda.lowering.devices import DEVICE_PROFILES, target_device
from aotcuda.lowering.export_hints import export_hints
from aotcuda.lowering.exporting import export_program
from aotcuda.lowering.integer_division import integer_division_decompositions
from aotcuda.lowering.input_types import check_input_types_serializable, warn_of_unnamed_output_type
from aotcuda.lowering.operand_dtypes import check_product_dtypes
from aotcuda.lowering.options import (check_example_tensors, check_inputs_fit, check_options,
                                     model_kind_fix)
from aotcuda.lowering.fallbacks import (FallbackKernel, find_fallback_kernels, kernels_record, missing_kernels_message,
                                       refusal_advice, refusal_line, split_allowed)
from aotcuda.lowering.index_ranges import exported_index_ranges, merge_ranges
from aotcuda.lowering.item_ranges import item_value_ranges
from aotcuda.lowering.known_fallbacks import known_fallback_kernels
from aotcuda.lowering.library_ops import custom_op_decompositions
from aotcuda.lowering.loop_carries import loop_inductor_configs
from aotcuda.lowering.proxy_ops import proxy_executor_kernels, proxy_executor_message
from aotcuda.lowering.private_weights import program_files_kept_private
from aotcuda.lowering.returned_writes import returned_user_inputs
from aotcuda.lowering.scalar_constants import (note_subgraph_constants_left, scalar_constants_as_full,
                                               subgraph_scalar_constants_as_full)
from aotcuda.lowering.unbacked import sym_ite_for_symbool_casts
from aotcuda.lowering.signature import data_dependent_sizes, signature_from_exported_program, tensor_sizes
from aotcuda.lowering.whole_tensor_writes import convert_whole_tensor_writes
from aotcuda.package_format import bounded_name, lists_a_package, write_signature
from aotcuda.package_tags import refuse_shared_folder, sign_package
from aotcuda.package_tags import signing_key as signing_key_of
from aotcuda.passes.complex_to_real import ReplaceComplexWithRealPass
from aotcuda.passes.result import GraphPass, PassResult
from aotcuda.passes.view_copy import ReplaceViewCopyWithViewPass
from aotcuda.regular_files import open_regular
from aotcuda.runtime import named_tuples
from aotcuda.runtime.libraries import mark_owned, marked_owner_gone, remove_folders
from aotcuda.runtime.package import proxy_executor_ops
from aotcuda.switches import flag

STEPS = ("to device", "export", "decompose", "passes", "compile", "check")


def passes() -> list[GraphPass]:
    """The passes, in order. Views first, so the complex pass sees ``view_as_complex`` (not its copy)."""
    return [ReplaceViewCopyWithViewPass(), ReplaceComplexWithRealPass()]


@dataclass
class LoweredProgram:
    """The result of ``lower``.

    package_path: the AOTI package (.pt2), with the aotcuda signature entry.
    device: the device type it runs on, "cpu" or "cuda".
    fallback_kernels: kernels the generated code calls beyond the allow-list (empty unless
        allow_fallbacks=True), each with the user source lines of the ops that produced it.
    library_kernels: allow-listed library kernels it calls (matmul, convolution, attention).
    step_times: seconds per step, in STEPS order.
    exported_program: the program given to Inductor (after decompositions and passes).
    proxy_executor_ops: ops the package runs through AOTI's proxy executor (ops with no C shim, e.g.
        "aten::tanh" on complex values, and custom ops; only with allow_fallbacks=True). aotcuda's runtime
        has no proxy executor, so such a package runs only in torch's loader: see runs_in_aotcuda_runtime.
    pass_results: what each pass did, in passes() order (aotcuda.passes.result.PassResult: changed,
        counts, refusal).
    signing_key: the key the package was signed with (a ``package_tags.SigningKey``, whose bytes are never shown),
        or None; ``load()`` checks the package under it unless given another.
    """

    package_path: str
    device: str
    fallback_kernels: list[FallbackKernel]
    library_kernels: list[FallbackKernel]
    step_times: dict[str, float]
    exported_program: ExportedProgram
    proxy_executor_ops: list[str] = field(default_factory=list)
    pass_results: list[PassResult] = field(default_factory=list)
    signing_key: object = field(default=None, repr=False)

    @property
    def runs_in_aotcuda_runtime(self) -> bool:
        """False when the package runs ops through AOTI's proxy executor (``proxy_executor_ops``): then
        only torch's loader, ``torch._inductor.aoti_load_package``, can run it, not ``aotcuda.load``."""
        return not self.proxy_executor_ops

    def load(self, **kwargs):
        """``aotcuda.load(self.package_path, **kwargs)``: device=, cuda_graphs=; a package signed at lowering is
        checked under its key (``signing_key=`` another key, or the switch's where none was given)."""
        from aotcuda.runtime.program import load

        if self.signing_key is not None:
            kwargs.setdefault("signing_key", self.signing_key)
        return load(self.package_path, **kwargs)


def lower(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict | None = None,
    *,
    dynamic_shapes=None,
    device: str | torch.device = "cuda",
    package_path: str | os.PathLike | None = None,
    allow_fallbacks: bool = False,
    inductor_configs: dict[str, Any] | None = None,
    progress: Callable[[str, float | None], None] | None = None,
    signing_key=None,
) -> LoweredProgram:
    """Lower ``model(*args, **kwargs)`` to an AOTInductor package for ``device``.

    Args:
        model: the module; left unchanged (it may live on any device; a copy is moved to ``device``).
        args, kwargs: example inputs, as for torch.export.export; moved to ``device`` for export.
        dynamic_shapes: as for torch.export.export (e.g. ``{"x": {1: Dim("seq", min=2, max=512)}}``).
        device: "cuda" (or "cuda:N") or "cpu".
        package_path: where to write the .pt2; default: ``<model class>.pt2``, the class name as spelt
            (``AttentionBlock.pt2``), in a new temporary folder
            (the caller owns it; nothing is written to the working directory unless asked). A leading "~" is
            the home folder, as the shell reads it. Folders of
            the path that do not exist are created; a path that is a directory (or ends in "/"), whose folder
            is a file or not writable, or whose file name is too long to build under, raises PackageError
            before any work.
        allow_fallbacks: accept ATen fallback kernels outside the allow-list instead of raising (a bool:
            "False" is refused, not taken for True).
        inductor_configs: extra Inductor options, applied over the device profile's.
            On the CPU with max-autotune on, for a program that writes a buffer (or parameter) in place,
            ``cpp.weight_prepack=False`` is added unless given (``package_inductor_configs``: torch 2.13 packs
            such a buffer at its compile-time value).
        progress: called as ``progress(step, None)`` when a step starts and ``progress(step, seconds)``
            when it ends; the CLI shows it.
        signing_key: sign the package with this key (``aotcuda.package_tags``: an HMAC-SHA256 tag over its
            signature, metadata and files), so that ``load(..., signing_key=)`` with the same key takes it and
            refuses any edit of it: bytes (at least 32), or the path of a file holding them, readable by its owner
            alone (chmod 600). Default: the file the switch AOTCUDA_SIGNING_KEY_FILE names; unset: not signed.
            A key that cannot be used raises SigningKeyError before any work.

    Outputs keep the module's structure, except torch's named tuples (``torch.topk`` and the like), which
    a package cannot store: those come back as plain tuples of the same tensors.

    Raises:
        MissingFallbackKernelsError: the generated code calls kernels outside the allow-list and
            allow_fallbacks is False. The message lists each kernel with the user's source line and,
            when ReplaceComplexWithRealPass refused the program, the refused op, its source line and why
            (also as ``error.refusal``, else None). Like any error after the passes, it carries
            ``error.pass_results``.
        DynamicShapesError (a ValueError): the model does not hold over the dynamic_shapes ranges; the
            message has torch's reasons and suggested fixes, under the caller's Dim names. (A guard torch
            cannot prove is first checked by aotcuda over the ranges: aotcuda.lowering.exporting.)
        DeviceError (a ValueError): a device string torch cannot parse, a device type aotcuda does not
            lower for, a CPU index ("cpu:1": torch has one CPU; "cpu:0" is "cpu"), or CUDA asked for where there
            is none (or not that index).
        TypeError, ValueError: before any work, an argument of the wrong kind (args not a tuple, kwargs not a
            dict, allow_fallbacks not a bool, progress not callable) or an inductor_configs option that
            torch._inductor.config does not have, or a switch of it given a string (lowering/options.py).

    In a process whose descriptor 0, 1 or 2 is closed (a daemon's, ``2>&-``), /dev/null is put on it first
    (``aotcuda.standard_descriptors.fill_closed``), as glibc does for a set-user-ID program: else a file torch or
    Inductor writes (a compile lock, a generated header) took that number and any C output went into it.

    When compiling or checking fails, the package file this call wrote is removed, and a note on the
    error (``exc.__notes__``, shown in the traceback) says that no package was written.

    Warns (UserWarning) when the package runs ops through AOTI's proxy executor (only possible with
    allow_fallbacks=True): ``aotcuda.load`` cannot run it, ``torch._inductor.aoti_load_package`` can;
    ``LoweredProgram.runs_in_aotcuda_runtime`` is then False.
    """
    standard_descriptors.fill_closed()  # a closed 0-2: no file of torch's or Inductor's takes its number
    check_options(allow_fallbacks, inductor_configs, progress)  # before any work: "False" is true
    flag("AOTCUDA_BATCH_ROWS_PROBE")  # read again after the compile: a value that is no flag is said before it
    key = signing_key_of(signing_key)  # a key file others may read is said before the minutes of compile
    device = target_device(device)
    if package_path is not None:
        package_path = checked_package_path(package_path)  # before the minutes of export and compile; "~" expanded
        if key is not None:  # the build beside it is signed by its name: no other user may put theirs in its place
            refuse_shared_folder(os.path.dirname(os.path.abspath(package_path)), package_path)
    if package_path is None:  # another user must not replace the temporary folder the package is written to
        check_temporary_folder("the package")  # first: the next check makes torch's folders there
    check_cache_folders(device.type)  # nor get their code into the package through Inductor's folders
    check_compiler_variables()  # set since the import: the compile's workers import torch's config again
    _warn_if_training(model)
    profile = DEVICE_PROFILES[device.type]
    times: dict[str, float] = {}
    step = _step_timer(times, progress)
    with step("to device"):
        model, args, kwargs = _on_device(model, args, kwargs or {}, device)
    with _refusal_said_once():
        return _lower_on_device(model, args, kwargs, dynamic_shapes, device, package_path, allow_fallbacks,
                                inductor_configs, profile, step, times, key)


def _lower_on_device(model, args, kwargs, dynamic_shapes, device, package_path, allow_fallbacks, inductor_configs,
                     profile, step, times, key=None) -> LoweredProgram:
    """lower()'s steps from export on, on a model and inputs already on ``device``."""
    ep, pass_results, untraced, exported_ranges, exported_unchecked, narrowed, returned = before_compile(
        model, args, kwargs, dynamic_shapes, lambda: passes() + [make() for make in profile.enabled_passes()], step)
    refusal = _under_dim_names(next((r.refusal for r in pass_results if r.refusal is not None), None), ep)
    _say_refusal_as(refusal)
    complex_scalars = complex_scalar_nodes(ep)
    if not allow_fallbacks:  # what is known now is refused before a compile of minutes
        _refuse_known_fallbacks(ep, device, profile, untraced, refusal, pass_results, package_path, complex_scalars)
    if complex_scalars:  # allow_fallbacks or not, AOTInductor's C++ wrapper cannot pass them: a bare AssertionError
        known = known_fallback_kernels(ep, device.type, profile.allowed_kernels)
        _refuse(complex_scalars_message(complex_scalars, refusal and refusal_line(refusal)), (),
                proxy_executor_kernels(ep, device.type) + known, refusal, pass_results, package_path)
    path, own_folder = _package_path(package_path, model)
    with _written_on_success(path, own_folder) as building, _with_pass_results(pass_results):
        # a full disk is said before the minutes of compile, not after
        check_room(ep, building, {**profile.inductor_configs, **(inductor_configs or {})})
        with step("compile"), torch_fixes.applied("compile"):
            configs = with_pdl_codegen(device, package_inductor_configs(device, profile.inductor_configs,
                                                                        inductor_configs, ep))
            _compile(ep, building, configs)
        with step("check"):
            missing, library = split_allowed(find_fallback_kernels(building, ep), profile.allowed_kernels)
            if missing and not allow_fallbacks:
                error = MissingFallbackKernelsError(missing_kernels_message("forward", missing, refusal),
                                                    advice=refusal_advice(missing))
                error.kernels, error.refusal = missing, refusal
                raise error
            proxy_ops = proxy_executor_ops(building)
            signature = signature_from_exported_program(ep, more_index_ranges=exported_ranges,
                                                        more_unchecked=exported_unchecked, narrowed=narrowed,
                                                        module=model, returned_inputs=returned)
            # what this check found, with the model's lines, for `aotcuda inspect` (which has no program)
            state_written = state_written_in_place(ep)
            # never run where it writes state (a program that does is never batched anyway); the graph first: where
            # it shows a mix, the probe's forwards would only say it again
            flow = None if state_written else row_flow(ep)
            rows = RowsProbe(None) if state_written or (flow is not None and flow.verdict == MIXES) \
                else probe_rows(ep, args, kwargs)
            rows_fields = rows_record(rows, flow)
            signature = {**signature, "kernels": kernels_record(missing, library),
                         "state_written": [bounded_name(name) for name in state_written],
                         "data_dependent_sizes": data_dependent_sizes(ep),
                         "tensor_sizes": tensor_sizes(ep), **rows_fields}
            _warn_if_signature_too_large(signature, path)
            write_signature(building, signature)
            if key is not None:  # last: the tag lists every entry as it is published
                sign_package(building, key)
    if proxy_ops:
        warnings.warn(_proxy_executor_warning(path, proxy_ops), UserWarning, stacklevel=2)
    if "rows_not_probed" in rows_fields:  # serving would batch it unchecked: said once, here, not only in a debug log
        warnings.warn(not_probed_warning(rows.not_probed), UserWarning, stacklevel=2)
    return LoweredProgram(path, device.type, missing, library, times, ep, proxy_ops, pass_results, key)


def _under_dim_names(refusal, ep: ExportedProgram):
    """The complex pass's refusal with torch's shape symbols in its reason under the user's Dim names (a new user's
    dynamic FFT was refused for its length "2*s27", of an input dim they had named n)."""
    if refusal is None:
        return None
    from aotcuda.lowering.signature import dim_names
    from aotcuda.runtime.specs import under_dim_names

    return dataclasses.replace(refusal, reason=under_dim_names(refusal.reason, dim_names(ep)))


def _refuse_known_fallbacks(ep, device, profile, untraced, refusal, pass_results, package_path,
                            complex_scalars=()) -> None:
    """Raise MissingFallbackKernelsError for the fallbacks known before compiling: ops AOTInductor would run
    through its proxy executor (lowering/proxy_ops.py), then the kernels of complex math left as it was and of
    random ops (lowering/known_fallbacks.py), with what the complex pass refused. Where a kernel takes a complex
    number (``complex_scalars``, lowering/complex_scalars.py), it says that allow_fallbacks cannot ship them."""
    said = complex_scalar_lines(complex_scalars) if complex_scalars else []
    kernels = proxy_executor_kernels(ep, device.type)
    if kernels:
        message = proxy_executor_message(kernels, untraced, refusal, said)
    else:
        kernels = known_fallback_kernels(ep, device.type, profile.allowed_kernels)
        message = missing_kernels_message("forward", kernels, refusal, said)
    if kernels:
        _refuse(message, refusal_advice(kernels, shippable=not said), kernels, refusal, pass_results, package_path)


def _refuse(message, advice, kernels, refusal, pass_results, package_path) -> None:
    """Raise the MissingFallbackKernelsError of a refusal before compiling, with its advice (none: no fix
    applies by a keyword) and a note that no package was written."""
    error = MissingFallbackKernelsError(message)
    error.advice = tuple(advice)  # the class's default advises allow_fallbacks: not where it cannot ship them
    error.kernels, error.refusal, error.pass_results = kernels, refusal, pass_results
    if package_path is not None:
        error.add_note(_not_written(os.path.abspath(package_path)))
    raise error


class BeforeCompile(NamedTuple):
    """What lower()'s steps before the compile give: the program for Inductor, and what they found on the way.

    pass_results: one PassResult per pass, in order. untraced: {custom op: why its implementation could not
    be traced} (``_decomposed``). index_ranges, unchecked: ``exported_index_ranges`` of the exported program,
    read before the decompositions rewrite eager's ops (one_hot). narrowed: {symbol: why} for the root Dims
    whose asked range the program does not take (``exporting.said_narrowed_roots``). returned_inputs: {output place:
    input place} for forward's outputs that are its inputs, written in place or not (``returned_writes``), read
    before the decompositions make the writes functional."""

    program: ExportedProgram
    pass_results: list[PassResult]
    untraced: dict[str, str]
    index_ranges: dict
    unchecked: dict
    narrowed: dict
    returned_inputs: dict


def before_compile(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, dynamic_shapes=None,
                   make_passes: Callable[[], list[GraphPass]] = passes, step=None) -> BeforeCompile:
    """lower()'s steps export, decompose and passes, each in its torch-version fixes, on a model and inputs
    already on their device. make_passes: called when the passes step starts, the passes in order (default
    passes(), the common ones; lower() adds its device profile's). step: lower()'s step timer (none by
    default). Tests use it for the program lower() would give Inductor, without compiling it."""
    step = step or _step_timer({}, None)
    with step("export"), torch_fixes.applied("export"), export_hints(model):
        narrowed: dict[str, str] = {}
        ep = export_program(model, args, kwargs or {}, dynamic_shapes, narrowed)
        sym_ite_for_symbool_casts(ep)  # torch 2.11: before any re-trace (lowering/unbacked.py)
        check_input_types_serializable(ep, model)  # AOTInductor refuses them after its compile (lowering/input_types.py)
        _make_outputs_serializable(ep)
        check_constant_float_outputs(ep)  # Inductor asserts on one (lowering/constant_outputs.py)
        convert_whole_tensor_writes(ep)  # before the decompositions drop copy_'s cast (lowering/whole_tensor_writes.py)
        left_in_subgraphs = subgraph_scalar_constants_as_full(ep)  # run_decompositions fails on them
        exported_unchecked: dict = {}
        exported_ranges = exported_index_ranges(ep, exported_unchecked)  # eager's ops, before decompositions rewrite one_hot
        # the range export gave a value read with .item(), which the generated code checks itself (lowering/item_ranges.py)
        exported_ranges = merge_ranges(exported_ranges, item_value_ranges(ep))
        returned = returned_user_inputs(ep)  # `x.add_(1); return x`: the writes are still in place here
    with step("decompose"), torch_fixes.applied("decompose"):
        try:
            ep, untraced = _decomposed(ep)
        except RuntimeError as error:  # one left: torch's words, and which constant and the fix
            note_subgraph_constants_left(error, left_in_subgraphs)
            raise
        check_product_dtypes(ep)  # eager refuses them; torch.export traces them (lowering/operand_dtypes.py)
    with step("passes"), torch_fixes.applied("passes"), _warnings_in_dim_names(ep):
        pass_results = []
        for graph_pass in make_passes():
            ep = graph_pass(ep)
            pass_results.append(graph_pass.result)
        ep = scalar_constants_as_full(ep)  # Inductor cannot view a 0-d constant (lowering/scalar_constants.py)
    return BeforeCompile(ep, pass_results, untraced, exported_ranges, exported_unchecked, narrowed, returned)


@contextlib.contextmanager
def _warnings_in_dim_names(ep: ExportedProgram):
    """The block's warnings, each said once, aotcuda's own with torch's shape symbols under the user's Dim names: a
    pass's warning about a dynamic FFT said "2*s69" of a length the user named n, and said it once for each
    transform of that length. Said also when the block raises (a warning may say why); then a warning that the
    filters turn into an error (``-W error``) becomes a note on the block's exception instead of hiding it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except BaseException as error:
            caught_now = list(caught)
            raising = error
        else:
            caught_now, raising = list(caught), None
    _say_once(caught_now, ep, raising)
    if raising is not None:
        raise raising


def _say_once(caught: list, ep: ExportedProgram, raising: BaseException | None) -> None:
    from aotcuda.lowering.signature import dim_names
    from aotcuda.runtime.specs import under_dim_names

    names, said = dim_names(ep), set()
    for warning in caught:
        text = str(warning.message)
        if text.startswith("aotcuda:"):
            text = under_dim_names(text, names)
        if (warning.category, text) in said:
            continue
        said.add((warning.category, text))
        try:
            warnings.warn_explicit(text, warning.category, warning.filename, warning.lineno, source=warning.source)
        except Warning:
            if raising is None:
                raise
            raising.add_note(f"{warning.category.__name__}: {text}")


def _decomposed(ep: ExportedProgram) -> tuple[ExportedProgram, dict[str, str]]:
    """(ep decomposed, {custom op: why its implementation could not be traced}).

    Custom ops of model libraries are traced through their plain-torch implementation
    (lowering/library_ops.py). One whose implementation does not trace (Python control flow on tensor values)
    stays a custom op, and the first line of the tracer's error says why."""
    library = custom_op_decompositions(ep)
    guarded = integer_division_decompositions(ep)  # trunc division of integers: a zero divisor ended the process
    table = decomposition_table()
    for op, implementation in {**library, **guarded}.items():
        table[op] = implementation
    try:
        return ep.run_decompositions(table), {}
    except Exception as exc:  # noqa: BLE001 - retried without them; the refusal names the cause
        if not library:
            raise
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    table = decomposition_table()
    table.update(guarded)
    return ep.run_decompositions(table), {op._schema.name: why for op in library}


@contextlib.contextmanager
def _with_pass_results(results: list[PassResult]):
    """An error after the passes carries what they did: ``error.pass_results`` (PassResult.summary()
    gives each a line)."""
    try:
        yield
    except Exception as exc:
        exc.pass_results = results
        raise


def _proxy_executor_warning(path: str, ops: list[str]) -> str:
    names = ", ".join(sorted(set(ops)))
    # Inductor's own check of a LAPACK kernel's info comes from no line of the model and goes with that kernel: a
    # new user's torch.linalg.inv was told to "rewrite aten::_linalg_check_errors, aten::linalg_inv_ex in the model".
    written = ", ".join(op for op in sorted(set(ops)) if "_linalg_check_errors" not in op) or names
    return (f"{path} runs {names} through AOTInductor's proxy executor (no C shim; kept by allow_fallbacks=True): "
            f"aotcuda.load cannot run this package, torch._inductor.aoti_load_package can. To run it with "
            f"aotcuda, rewrite {written} in the model with ops that have a C shim and lower it again"
            + (" (_linalg_check_errors, Inductor's check of the LAPACK result, goes with it)." if written != names
               else "."))


@contextlib.contextmanager
def _written_on_success(path: str, own_folder: str | None):
    """Yield a path beside ``path`` to build the package at; move it to ``path`` when the block succeeds.

    On any error the partial build is removed and ``path`` is as it was: a failed build must not look like
    a good one, and must not destroy an earlier good one (re-lowering over a working package without
    ``allow_fallbacks`` used to remove it). A note on the error says which case it was.
    """
    folder, name = os.path.split(os.path.abspath(path))
    # AOTInductor names the archive's root folder after the file's stem, so the build gets the final name
    # (rope.pt2 -> rope/...) inside a private folder beside ``path``: os.replace stays on one file system.
    private = os.path.join(folder, _build_name(name, os.getpid(), uuid.uuid4().hex[:8]))
    _remove_dead_builds(folder, name)
    os.mkdir(private)
    try:
        mark_owned(private)  # so that a later lower() removes it if this process dies (SIGKILL, the OOM killer)
    except (OSError, PackageError):  # no room for this process's lock folder: the build goes on, unmarked
        pass
    building = os.path.join(private, name if name.endswith(".pt2") else f"{name}.pt2")  # AOTI wants .pt2
    try:
        try:
            yield building
            os.replace(building, path)
        finally:  # whole even past a second Ctrl-C, which ended a plain rmtree half-way (remove_folders)
            remove_folders([private])
    except BaseException as exc:
        if own_folder is not None:
            remove_folders([own_folder])
        exc.add_note(_not_written(path))
        raise


def _remove_dead_builds(folder: str, name: str) -> None:
    """Remove the private build folders of ``name`` (``_written_on_success``) that lower() processes of this user
    left in ``folder`` when they died before their cleanup: a lowering killed by SIGKILL or the OOM killer left
    its ``.NAME.PID.RAND.partial`` folder, a package's size, for good (a breaker's report). Only folders marked
    with an owner lock that nobody holds are removed (``libraries.marked_owner_gone``): a build running in
    another process, or on another host that shares the folder, holds its lock or names one not here."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(f".{name}.") and entry.name.endswith(".partial") and marked_owner_gone(entry.path):
            shutil.rmtree(entry.path, ignore_errors=True)


def _not_written(path: str) -> str:
    """The note on a failed lower()'s error: that it wrote no package, and what is at ``path``."""
    if os.path.exists(path):
        return f"No package was written: {path} is an earlier build, left as it was."
    return f"No package was written to {path}."


def _make_outputs_serializable(ep: ExportedProgram) -> None:
    """Give the program a flat tuple output spec when its own cannot be saved in a package.

    An AOTI package stores the output pytree spec as JSON, which needs a registered serialization name
    for every container type. torch's named tuples (``torch.return_types.topk`` from ``return
    torch.topk(x, k)``, ...) have none in torch 2.11-2.14, so packaging would fail. Such a program
    returns the same tensors, in order, as a plain tuple instead. A user's namedtuple is stored by its name and
    field names instead, and comes back as a namedtuple (runtime/named_tuples.py), its containers kept.
    """
    signature = ep.module_call_graph[0].signature
    if signature is None:
        return
    signature.out_spec = named_tuples.storable(signature.out_spec)
    try:
        pytree.treespec_dumps(signature.out_spec)
    except (NotImplementedError, TypeError):
        warn_of_unnamed_output_type(signature.out_spec)
        signature.out_spec = pytree.tree_flatten(tuple(range(signature.out_spec.num_leaves)))[1]


def _step_timer(times: dict[str, float], progress):
    @contextlib.contextmanager
    def step(name: str):
        if progress is not None:
            progress(name, None)
        start = time.perf_counter()
        yield
        times[name] = time.perf_counter() - start
        if progress is not None:
            progress(name, times[name])

    return step


def _on_device(model: torch.nn.Module, args: tuple, kwargs: dict, device: torch.device):
    """(model, args, kwargs) on device; the model is copied when any of its tensors lives elsewhere."""
    if not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple of example inputs, got {type(args).__name__}; wrap one input as (x,)")
    if not isinstance(kwargs, dict) or not all(isinstance(name, str) for name in kwargs):
        # The third positional parameter is kwargs: lower(model, (x,), "m.pt2") meant a package path, and
        # torch.export's "argument after ** must be a mapping, not str" said neither.
        if isinstance(kwargs, dict):
            name = next(name for name in kwargs if not isinstance(name, str))
            raise TypeError(f"kwargs must be a dict of the model's keyword inputs by name, got the key "
                            f"{quoted(name)} ({type(name).__name__})")
        path = isinstance(kwargs, (str, os.PathLike))
        raise TypeError(f"kwargs must be a dict of the model's keyword inputs by name, got {type(kwargs).__name__}"
                        + ("; to say where the package goes, pass package_path=... (a keyword argument)" if path
                           else ""))
    if not isinstance(model, torch.nn.Module) or isinstance(model, torch.jit.ScriptModule):
        raise TypeError(f"model must be a torch.nn.Module, got {model_kind_fix(model)}")
    while isinstance(model, (torch._dynamo.eval_frame.OptimizedModule, torch.nn.DataParallel,
                             torch.nn.parallel.DistributedDataParallel)):
        # torch.compile's and the data-parallel wrappers: their forward takes (*args, **kwargs), so dynamic_shapes
        # keyed by the model's own argument names were refused ("top-level keys must be the arg names ['args']");
        # they play no part in a package
        model = model._orig_mod if isinstance(model, torch._dynamo.eval_frame.OptimizedModule) else model.module
    check_inputs_fit(model, args, kwargs)
    check_example_tensors(model, args, kwargs)
    tensors = [*model.parameters(), *model.buffers()]
    if any(_differs(t.device, device) for t in tensors):
        model = copy.deepcopy(model).to(device)
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), (args, kwargs))
    return model, args, kwargs


def _differs(have: torch.device, want: torch.device) -> bool:
    return have.type != want.type or (want.index is not None and have.index != want.index)


def checked_package_path(package_path: str | os.PathLike) -> str:
    """``package_path`` as an absolute path, once it is known that a package can be written there; checked
    before any work (export and compile take minutes), nothing left behind (a file is made in the folder
    and removed: permission bits alone do not say it, e.g. for root in /proc or on a read-only mount). The
    folders it names that do not exist yet are created when the package is written (as ``mkdir -p``).

    Raises PackageError when the path is a directory, when a folder on the way to it is a file, when the
    folder that would hold it (the nearest one that exists) is not writable, or when a file that is not an
    AOTInductor package is there (an earlier package is replaced; ``aotcuda lower m.py:make -o m.py`` would
    have replaced the model's source).
    """
    return checked_output_path(package_path, "the package", _is_package_file, "an AOTInductor package", "model.pt2",
                               longer_by=_BUILD_NAME_EXTRA)


def _build_name(name: str, pid: int, tag: str) -> str:
    """The private folder _written_on_success builds the package ``name`` in: ".NAME.PID.TAG.partial"."""
    return f".{name}.{pid}.{tag}.partial"


# What that folder's name adds to the package's file name, at its longest (a pid of 32 bits, a tag of 8 hex digits)
_BUILD_NAME_EXTRA = len(_build_name("", 4294967295, "0" * 8))


def checked_output_path(path: str | os.PathLike, what: str, replaceable: Callable[[str], bool], kind: str,
                        example: str, longer_by: int = 0) -> str:
    """``path`` as an absolute path, once it is known that ``what`` (e.g. "the package") can be written there
    without losing anything: a path (str, bytes or os.PathLike, no NUL), not a directory, no file on the way to
    it, a writable folder (tried with a temporary file), a file name the folder's file system takes with
    ``longer_by`` more bytes (the name it is built under), and no file there unless ``replaceable(path)`` says
    it is ``kind`` (an earlier output of the same sort). ``example``: a file name to suggest inside a directory
    given instead. Raises PackageError naming the problem and the fix."""
    path = _as_path(path, what, example)
    if os.path.isdir(path):
        raise PackageError(f"cannot write {what} to {path!r}: it is a directory; give the "
                           f"{os.path.splitext(example)[1]} file to write, e.g. {os.path.join(path, example)!r}")
    if os.path.lexists(path) and not replaceable(path):
        raise PackageError(f"will not write {what} to {path!r}: {_what_is_there(path, kind)}")
    folder = os.path.dirname(path)
    while not os.path.exists(folder):  # the nearest part of the path that exists
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise PackageError(f"cannot write {what} to {path!r}: {folder!r} is a file, not a folder; "
                           "choose another path")
    try:  # the file system answers for itself (os.access's bits pass root in /proc or on a read-only mount)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise PackageError(f"cannot write {what} to {path!r}: {_why_no_file(folder, exc)}") from None
    _check_name_length(path, what, folder, longer_by)
    return path



def _what_is_there(path: str, kind: str) -> str:
    """Why the thing at ``path`` is not replaced, in the words of what it is. Only a regular file is ever replaced (the
    write renames a new file over the path), so a symbolic link, even to an earlier output, is the link that would go:
    a link to a torch.save file, or /dev/stdout, was refused as "a file that is not a torch.save file" (breakcall,
    2026-12-07), which it is, or is not a file at all."""
    if os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        leads = "nowhere (dangling)" if not os.path.exists(path) else f"to {target[:200]!r}"
        return (f"a symbolic link is there, leading {leads}, and writing would replace the link, not write through it; "
                "give the path of the file it leads to (or another path), or remove the link first")
    if not os.path.isfile(path):
        return ("something that is not a regular file is there (a device, FIFO or socket), and writing would replace "
                "it; choose another path")
    return f"a file that is not {kind} is there, and writing would replace it; choose another path, or remove that file first"

def _as_path(path, what: str, example: str) -> str:
    """``path`` as an absolute str path, a leading "~" expanded as the shell does (Python's paths do not: "~/m.pt2"
    was written under a folder named "~" in the working directory); PackageError for a value that is no path, one
    with a NUL (which no file system takes: os raised a raw TypeError or "ValueError: embedded null byte"), or one
    ending in a separator that is no folder yet (``example``: the file name to suggest in it)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise PackageError(f"the path of {what} must be a str or os.PathLike, got {quoted(path)} "
                           f"({type(path).__name__}); e.g. 'model.pt2'")
    path = os.fsdecode(os.fspath(path))
    if "\0" in path:
        raise PackageError(f"cannot write {what} to {quoted(path)}: the path holds a NUL character, which no file "
                           "system takes in a name; choose another path")
    path = os.path.expanduser(path)  # after the NUL check: "~a\0b" asked pwd for that user and raised ValueError
    if path.endswith(os.sep) and not os.path.isdir(path):  # abspath drops the "/": a file "out" was written
        raise PackageError(f"cannot write {what} to {quoted(path)}: the path ends in {os.sep!r}, which names a folder; "
                           f"give the file to write in it, e.g. {quoted(os.path.join(path, example))}")
    return os.path.abspath(path)


def _check_name_length(path: str, what: str, folder: str, longer_by: int) -> None:
    """PackageError when the file name of ``path`` (with ``longer_by`` more bytes: the name it is built under) is
    longer than the file system of ``folder`` takes: lower() found it only after the export, decompositions and
    passes, as a raw "OSError: [Errno 36] File name too long" from its build folder."""
    try:
        most = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        most = 255
    name = os.path.basename(path)
    size = len(os.fsencode(name))
    if most > 0 and size + longer_by > most:
        raise PackageError(f"cannot write {what} to {quoted(path)}: its file name is {size} bytes, and the file "
                           f"system of {folder!r} takes names of {most - longer_by} bytes at most here"
                           + (f" (it is built under a name {longer_by} bytes longer)" if longer_by else "")
                           + "; choose a shorter name")


def _why_no_file(folder: str, exc: OSError) -> str:
    """Why a file could not be made in ``folder``, which exists, and the fix: only a refused permission is
    "not writable" (/proc answers "No such file or directory": its file system makes no files at all)."""
    reason = exc.strerror or type(exc).__name__
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"the folder {folder!r} is not writable ({reason}); choose another path, or change its permissions"
    if exc.errno == errno.EROFS:
        return f"the folder {folder!r} is on a read-only file system; choose another path"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no room for a new file in the folder {folder!r} ({reason}); free some space, or choose another path"
    return (f"the file system of the folder {folder!r} makes no new file there (creating one failed: {reason}; "
            "a virtual file system such as /proc or /sys takes no new files); choose a folder on a disk")


def _warn_if_signature_too_large(signature: dict, path: str) -> None:
    """A UserWarning when the package's signature is larger than load reads by default (a program of
    thousands of inputs and outputs): say so at lowering, with the variable, not first at load time."""
    from aotcuda.package_format import signature_bytes
    from aotcuda.switches import SWITCHES

    size, limit = len(signature_bytes(signature)), SWITCHES["AOTCUDA_MAX_SIGNATURE_BYTES"].default
    if size > limit:
        warnings.warn(f"the signature of {path} is {size:,} bytes, more than the {limit:,} aotcuda.load reads by "
                      f"default: where the package is loaded, set AOTCUDA_MAX_SIGNATURE_BYTES={size} or more",
                      UserWarning, stacklevel=4)


def _warn_if_training(model) -> None:
    """A UserWarning when ``model`` is in training mode and holds a module that behaves otherwise in eval mode
    (dropout, batch or instance norm): torch.export records the training behaviour (random masks, batch
    statistics), which a user lowering for inference rarely wants, and a new user easily forgets .eval()."""
    if not isinstance(model, torch.nn.Module) or not model.training:
        return
    modes = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._NormBase)
    # a norm without running statistics (InstanceNorm's default) computes the same in eval mode: not one of them
    held = [m for m in model.modules() if m.training and isinstance(m, modes)
            and getattr(m, "track_running_stats", True)]
    kinds = sorted({type(m).__name__ for m in held})
    if kinds:
        warnings.warn(f"the model is in training mode (model.training is True) and holds {', '.join(kinds)}: the "
                      f"package computes {'it' if len(kinds) == 1 else 'them'} as in training "
                      f"({'; '.join(_training_effects(held))}). To lower for inference, call model.eval() first.",
                      UserWarning, stacklevel=3)


def _training_effects(held: list) -> list[str]:
    """What each kind of module the model holds in training mode does there, once a kind, in words."""
    effects = []
    if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in held):
        effects.append("random dropout masks at every call")
    if any(isinstance(m, torch.nn.modules.batchnorm._NormBase) for m in held):
        effects.append("normalized by each call's own batch statistics, with running_mean/running_var updated at "
                       "every call")
    return effects


def _is_package_file(path: str) -> bool:
    """Whether ``path`` is a regular file holding an AOTInductor package (``lists_a_package``), so that writing
    a new package there loses nothing."""
    names = _zip_names(path)
    return names is not None and lists_a_package(names)


# torch.save's pre-1.6 format begins with its magic number, pickled (protocol 2)
_LEGACY_TORCH_SAVE = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19."


def is_torch_save_file(path: str) -> bool:
    """Whether ``path`` is a regular file that torch.save wrote (a zip with a ``data.pkl`` entry, or its
    pre-1.6 format)."""
    names = _zip_names(path)
    if names is not None:
        return any(name.rsplit("/", 1)[-1] == "data.pkl" for name in names)
    if not os.path.isfile(path) or os.path.islink(path):
        return False
    try:  # a FIFO's open waits for a writer: opened once, checked on the descriptor (as _zip_names)
        with open_regular(path) as file:
            return file.read(len(_LEGACY_TORCH_SAVE)) == _LEGACY_TORCH_SAVE
    except OSError:
        return False


def _zip_names(path: str) -> list[str] | None:
    """The entry names of the zip at ``path``, a regular file; None for anything else. The file is opened once
    and checked on its descriptor (``regular_files.open_regular``): a FIFO another process renamed over the path
    after ``isfile`` left lower() (and run's --save-outputs check) waiting in zipfile's open for a writer."""
    from aotcuda.runtime.archive import ArchiveLimits, check_directory

    if not os.path.isfile(path) or os.path.islink(path):
        return None
    limits = ArchiveLimits.from_environment()
    try:
        with open_regular(path) as handle:
            # zipfile reads the directory its end record declares whole into memory: whatever file lies at an output
            # path (a shared folder's, another user's) is judged as a package's is first (the amplification breaker,
            # 2026-12-07: 22 bytes after a 2 GiB hole, 4 KiB on disk, made `run --save-outputs` read 2 GiB)
            check_directory(path, handle, limits)
            handle.seek(0)
            with zipfile.ZipFile(handle) as archive:
                return archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError, PackageError):
        return None


# The complex pass's refusal as lower() says it (under the user's Dim names), by the pass's own refusal (its node):
# _refusal_said_once logs the held line in these words.
_REFUSALS_SAID: contextvars.ContextVar[dict | None] = contextvars.ContextVar("aotcuda_refusals_said", default=None)


def _say_refusal_as(refusal) -> None:
    said = _REFUSALS_SAID.get()
    if refusal is not None and said is not None:
        said[refusal.node] = refusal


@contextlib.contextmanager
def _refusal_said_once() -> Iterator[None]:
    """lower()'s block, with ReplaceComplexWithRealPass's refusal line (its warning on the "aotcuda" logger)
    held back until the end: a MissingFallbackKernelsError that carries the refusal says it in its own
    message, so the line is then dropped; on success (fallback kernels allowed) and on any other error it
    is logged after the step lines instead of between them, in the user's Dim names where lower() got that far
    (``_say_refusal_as``; torch's symbols, "2*s27", before)."""
    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        if getattr(record, "aotcuda_refusal", None) is None:
            return True
        held.append(record)
        return False

    logger = logging.getLogger("aotcuda")
    logger.addFilter(hold)
    said_by_error = False
    said = _REFUSALS_SAID.set({})
    try:
        yield
    except MissingFallbackKernelsError as error:
        said_by_error = error.refusal is not None
        raise
    finally:
        logger.removeFilter(hold)
        renamed, _ = _REFUSALS_SAID.get(), _REFUSALS_SAID.reset(said)
        if not said_by_error:
            for record in held:
                refusal = renamed.get(record.aotcuda_refusal.node)
                if refusal is not None:  # the line in the user's Dim names ("2*n"), as the error would say it
                    record.msg, record.args = refusal.log_line(), ()
                logger.handle(record)


def _package_path(package_path, model: torch.nn.Module) -> tuple[str, str | None]:
    """(where the package goes, the temporary folder made for it when package_path is None)."""
    if package_path is not None:
        path = checked_package_path(package_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path, None
    folder = tempfile.mkdtemp(prefix="aotcuda-")
    return os.path.join(folder, f"{type(model).__name__}.pt2"), folder  # as spelt: LlamaForCausalLM.pt2


def package_inductor_configs(device: torch.device, profile_configs: dict[str, Any],
                             inductor_configs: dict[str, Any] | None, ep: ExportedProgram) -> dict[str, Any]:
    """The Inductor options ``ep`` is compiled with for ``device``: the device profile's, the caller's
    ``inductor_configs`` over them, and for the CPU ``cpp.weight_prepack=False`` when max-autotune is on and
    the program writes state in place (``state_written_in_place``); on every device ``inplace_buffers=False`` for a
    program with a loop (scan, map, while_loop), unless the caller set it (lowering/loop_carries.py).

    Why: with ``max_autotune`` (or ``max_autotune_gemm``) on the CPU, Inductor may write a matrix product as
    its C++ GEMM/BMM template (torch/_inductor/utils.py ``use_cpp_gemm_template``/``use_cpp_bmm_template``,
    which ``cpp.weight_prepack`` gates). The template takes an operand whose name is in
    ``V.graph.constants`` for a constant and blocks (packs) its value at compile time
    (codegen/cpp_gemm_template.py ``CppGemmTemplate.prep_weight``/``block_weight``, codegen/cpp_bmm_template.py
    ``CppBmmTemplate.check_if_block_weight``). In an AOTInductor package a mutated buffer is such a constant,
    so a product that reads a buffer written in place (a KV cache after ``index_copy_``) reads the packed
    copy of its compile-time value: measured on torch 2.13 (CPU), ``matmul(q, cache.transpose(2, 3))`` after
    ``cache.index_copy_(2, pos, k)`` gave a relative error of 0.30 (float32 and bfloat16), the tiny decoder's
    decode step 1.1, through ``torch._inductor.aoti_compile_and_package`` alike; with the template off, 0
    (``torch.compile(mode="max-autotune")`` does not hit it: its buffers are inputs, not constants).

    Only programs that write state in place are at risk: AOTInductor makes parameters and buffers its
    constants (compile_fx.py ``_unlift_graph``), user inputs stay graph inputs (a mutated input is read
    from memory), and torch.export refuses a plain tensor constant written in place ("register it as
    buffer"). A program that writes none keeps the template and torch's default (its weights do not change
    after compile, so packing them is right). For one that does, the template is turned off (the torch
    versions without the bug are not known), for every product of the program (the option is one switch
    for the whole compile): max-autotune then chooses among ATen's products only. The caller's own
    ``cpp.weight_prepack`` always wins. Whether max-autotune is on is read from the caller's options, else
    from torch._inductor.config (TORCHINDUCTOR_MAX_AUTOTUNE and the like), as Inductor reads it.
    """
    configs = loop_inductor_configs({**profile_configs, **(inductor_configs or {})}, ep)
    from torch._inductor import config as inductor_config
    if getattr(inductor_config.aot_inductor, "use_runtime_constant_folding", False):
        # Off where torch._inductor.config turns it on for the process (check_inductor_configs refuses it in
        # inductor_configs): torch's runtime constant folding computes wrong results for programs that slice a
        # constant (options.py says which)
        configs["aot_inductor.use_runtime_constant_folding"] = False
    if device.type != "cpu" or "cpp.weight_prepack" in configs or not state_written_in_place(ep):
        return configs
    if any(configs.get(name, getattr(inductor_config, name)) for name in ("max_autotune", "max_autotune_gemm")):
        configs["cpp.weight_prepack"] = False
    return configs


def state_written_in_place(ep: ExportedProgram) -> list[str]:
    """The buffers and parameters ``ep`` writes in place, by name: what AOTInductor holds as constants that
    change at run time. ``ep`` must be functional (after ``run_decompositions``): before it, torch.export's
    graph signature lists no mutation."""
    signature = ep.graph_signature
    parameters = getattr(signature, "parameters_to_mutate", {})  # not in every torch the pin admits
    return [*signature.buffers_to_mutate.values(), *parameters.values()]


def one_element_buffers_mutated(ep: ExportedProgram) -> list[str]:
    """The program's mutated buffers that hold one element (0-d or shape (1,), (1, 1), ...).

    Why: Inductor's joint-graph constant folding (``constant_fold_uniform_value``, torch 2.11-2.13) takes
    every one-element ``get_attr`` for a known constant, mutated or not, so ``self.step += 1`` on a (1,)
    buffer compiles to "store 1.0": the state never advances (1, 1, 1 where eager gives 1, 2, 3), in
    aotcuda's runtime and torch's loader alike. Larger buffers are read from memory and persist. Lowering
    turns that folding off for programs that mutate such a buffer (``joint_graph_constant_folding``).
    """
    state = {**ep.state_dict, **ep.constants}
    return [name for name in ep.graph_signature.buffers_to_mutate.values()
            if isinstance(state.get(name), torch.Tensor) and state[name].numel() == 1]


def _compile(ep: ExportedProgram, path: str, configs: dict[str, Any]) -> None:
    """The AOTInductor package of ``ep`` at ``path`` (its signature is written after the check step)."""
    if one_element_buffers_mutated(ep):
        configs = {**configs, "joint_graph_constant_folding": False}
    with torch.no_grad(), warnings.catch_warnings():  # torch-version fixes: torch_fixes.applied("compile")
        # Inductor's generic note on complex ops ("Performance may be worse than eager") adds nothing to what
        # lower() says of each fallback kernel, with its source line (the error, or fallback_kernels).
        warnings.filterwarnings("ignore", message="Torchinductor does not support code generation for complex")
        # another process lowering it at once rewrites the files packaged here; the library the compile leaves in
        # Inductor's cache folder holds the weights, whether the compile succeeds or not
        with compiling_alone(ep, configs), program_files_kept_private(path):
            try:
                torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=configs)
            except ArchiveWriteError as exc:  # torch_fixes.applied("compile") finished the writer: no abort
                raise package_unwritten(path, exc) from exc.__cause__
            except Exception as exc:
                interrupt = interrupt_behind(exc)
                if interrupt is not None:  # the interrupt, not its cleanup's failure: the CLI ends with 130
                    raise interrupt from None
                named = compile_resource_failure(exc)
                if named is None:
                    raise
                raise named from exc
