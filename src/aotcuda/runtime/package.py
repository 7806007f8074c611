"""Opening an AOTInductor package (.pt2) and its input/output signature.

An AOTI package is a zip written by ``torch._inductor.aoti_compile_and_package``::

    <archive>/data/aotinductor/<model>/<hash>.wrapper.so        the compiled model (weights inside, by default)
    <archive>/data/aotinductor/<model>/<hash>.wrapper_metadata.json   {"AOTI_DEVICE_KEY": "cpu" | "cuda", ...}
    <archive>/data/aotinductor/<model>/*.cubin                  CUDA kernels, loaded from the .so's folder
    <archive>/data/aotinductor/<model>/*.blob                   weights, when not kept in the .so
    <archive>/data/aotinductor/<model>/<hash>.wrapper.json      ops run through the proxy executor, if any
    <archive>/data/constants/...                                extracted next to the .so, as torch does

``open_package`` extracts the model folder to a private temporary folder, the way torch's
AOTIModelPackageLoader does (torch/csrc/inductor/aoti_package/model_package_loader.cpp).

The signature: AOTI's own files say nothing about input dtypes or shape ranges (the generated code checks
them only with AOTI_RUNTIME_CHECK_INPUTS=1, and then as an opaque error code). So aotcuda adds one zip
entry, ``<archive>/aotcuda/signature.json``, written by ``write_signature`` from the ExportedProgram.
Format (version 1)::

    {"format": "aotcuda.signature", "version": 1,
     "inputs":  [TensorSpec, ...],      # in the container's (flattened) input order
     "outputs": [TensorSpec, ...],      # in the container's output order
     "dim_names": {"s27": "seq"},       # the Dim name the caller gave each input symbol (optional):
                                        # errors and `aotcuda inspect` say "seq", not "s27"
     "forward_arg_names": ["x", ...],   # forward's argument names, positional first (optional; torch's
                                        # ModuleCallSignature.forward_arg_names): lets a Program take a
                                        # positional argument by keyword, p(x=t), as ep.module() does
     "pytree_types": [{"type": "transformers.modeling_outputs.CausalLMOutputWithPast",
                       "module": "transformers.modeling_outputs"}, ...]}
                                        # (optional) container types of the input/output pytree specs
                                        # that torch does not register itself, with the module that does:
                                        # aotcuda.load imports it (runtime/pytree_types.py)
    TensorSpec = {"name": "x",                      # graph-signature name of the input / output
                  "dtype": "float32",               # torch dtype name, without "torch."
                  "device": "cpu" | "cuda",         # device type only
                  "shape": [Dim, ...],              # len(shape) is the rank
                  "contiguous": true,               # the exported example was contiguous (inputs)
                  "strides": [Dim, ...],            # the exported example's strides, which the generated
                                                    # code assumes (optional: absent in older packages)
                  "mutated": false,                 # inputs: the program writes it in place (optional:
                                                    # absent in older packages, see runtime/checks.py)
                  "complex": null}                  # or "complex64" (complex32, complex128): the caller's
                                                    # complex dtype of a tensor the package takes/returns
                                                    # as its real pair (ReplaceComplexWithRealPass); dtype,
                                                    # shape and strides are the pair's (float32, S + [2]).
                                                    # aotcuda.load adapts it with zero-copy views and checks
                                                    # it in the caller's terms (runtime/complex_boundary.py)
    Dim = 4                                         # a static size, or
        | {"expr": "s77", "min": 2, "max": 64}      # symbolic: a sympy expression of the input symbols;
                                                    # "max": null means unbounded
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shutil
import tempfile
import weakref
import zipfile
import zlib
from dataclasses import dataclass, field

from aotcuda.errors import PackageError
from aotcuda.runtime.archive import ArchiveLimits, check_entries, check_extraction, copy_entry, read_entry

SIGNATURE_ENTRY = "aotcuda/signature.json"
SIGNATURE_FORMAT, SIGNATURE_VERSION = "aotcuda.signature", 1


@dataclass
class ExtractedPackage:
    """An AOTI package's model, extracted to a temporary folder that is removed by ``cleanup()``
    (or when this object is garbage-collected)."""

    path: str
    model_name: str
    so_path: str
    model_dir: str  # the .so's folder: the cubin_dir of the container
    metadata: dict[str, str]
    blob_path: str | None
    signature: dict | None
    proxy_ops: list[str] = field(default_factory=list)
    so_digest: str = ""  # SHA-256 of the .so: which loads may share one loaded library
    _finalizer: weakref.finalize = field(repr=False, default=None)

    @property
    def device_type(self) -> str:
        return self.metadata.get("AOTI_DEVICE_KEY", "")

    def cleanup(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


def _archive_root(names: list[str]) -> str:
    """The top folder every entry shares ("twice/"), or "" for old archives without one."""
    tops = {name.split("/", 1)[0] for name in names if "/" in name}
    return f"{tops.pop()}/" if len(tops) == 1 and all("/" in n for n in names) else ""


def model_names(names: list[str]) -> list[str]:
    """The model names in a package's entry list (folders under data/aotinductor/)."""
    root = _archive_root(names)
    prefix = f"{root}data/aotinductor/"
    return sorted({n[len(prefix):].split("/", 1)[0] for n in names if n.startswith(prefix) and n.count("/") > prefix.count("/")})


def _open_zip(path: str) -> zipfile.ZipFile:
    if not os.path.isfile(path):
        raise PackageError(f"no AOTInductor package at {path!r}: the file does not exist")
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise PackageError(f"{path!r} is not an AOTInductor package (.pt2 zip archive): {exc}") from exc


def _pick_model(path: str, names: list[str], model_name: str | None) -> str:
    found = model_names(names)
    if model_name is not None:
        if model_name not in found:
            raise PackageError(f"{path!r} has no model {model_name!r}; it has: {', '.join(found) or 'none'}")
        return model_name
    if not found:
        raise PackageError(f"{path!r} holds no AOTInductor model (no data/aotinductor/<model>/ folder)")
    if len(found) > 1 and "model" not in found:
        raise PackageError(f"{path!r} holds several models ({', '.join(found)}); pass model_name=")
    return "model" if "model" in found else found[0]


def _safe_target(root_dir: str, relative: str) -> str:
    target = os.path.normpath(os.path.join(root_dir, relative))
    if not target.startswith(root_dir + os.sep):
        raise PackageError(f"refusing to extract {relative!r}: it points outside the package's folder")
    return target


# What zipfile raises for an archive whose directory looks fine but whose data is damaged
# (a flipped byte: "Bad CRC-32"; a cut-off entry: EOFError; a broken deflate stream: zlib.error).
_DAMAGED_ZIP = (zipfile.BadZipFile, zlib.error, EOFError)


def _extract_model(archive: zipfile.ZipFile, names: list[str], model_dir_entry: str, root: str,
                   out_dir: str, path: str, limits: ArchiveLimits) -> tuple[str, str]:
    """Extract the model folder (and data/constants/*, flattened into it) to out_dir/<model>; return it
    and the SHA-256 of its .so.

    Raises PackageError naming the damaged entry when an entry's data does not match its checksum, and
    before writing anything when the entries would inflate past ``limits`` (``aotcuda.runtime.archive``).
    """
    model_dir = os.path.join(out_dir, "model")
    os.makedirs(model_dir)
    constants_entry = f"{root}data/constants/"
    wanted = []
    for info in archive.infolist():
        name = info.filename
        if name.endswith("/"):
            continue
        if name.startswith(model_dir_entry):
            relative = name[len(model_dir_entry):]
        elif name.startswith(constants_entry):
            relative = posixpath.basename(name)
        else:
            continue
        wanted.append((info, _safe_target(model_dir, relative)))
    check_extraction(path, [info for info, _ in wanted], limits)
    so_digest = ""
    for info, target in wanted:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            digest = copy_entry(archive, info, target, digest=info.filename.endswith(".so"))
        except _DAMAGED_ZIP as exc:
            raise PackageError(f"{path!r} is damaged: its entry {info.filename!r} cannot be read ({exc}); copy the "
                               "package again, or lower the model again") from exc
        so_digest = so_digest or digest
    return model_dir, so_digest


def _files_with_suffix(folder: str, suffix: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(suffix))


@contextlib.contextmanager
def _opened(path: str, model_name: str | None, limits: ArchiveLimits):
    """The open zip, its entry names, the chosen model, the archive root and the signature (None if
    absent), with the entry count checked."""
    with _open_zip(path) as archive:
        check_entries(path, archive.infolist(), limits)
        names = archive.namelist()
        root = _archive_root(names)
        model = _pick_model(path, names, model_name)
        yield archive, names, model, root, _read_signature_entry(archive, names, root, path, limits)


def open_package(path: str | os.PathLike, model_name: str | None = None,
                 limits: ArchiveLimits | None = None) -> ExtractedPackage:
    """Extract the model of an AOTI package to a private temporary folder.

    ``limits``: bounds on what the package may inflate to (default: ``ArchiveLimits.from_environment()``).

    Raises PackageError when the file is missing, not a zip, holds no (or no such) model, holds C++
    sources without a compiled .so (packages built with ``aot_inductor.package_cpp_only``), or exceeds
    the limits (a decompression bomb: refused before anything is written).
    """
    path = os.fspath(path)
    limits = limits or ArchiveLimits.from_environment()
    with _opened(path, model_name, limits) as (archive, names, model, root, signature):
        out_dir = tempfile.mkdtemp(prefix="aotcuda-")
        try:
            model_dir, so_digest = _extract_model(archive, names, f"{root}data/aotinductor/{model}/", root,
                                                  out_dir, path, limits)
            package = _describe_model(path, model, model_dir, signature, limits)
            package.so_digest = so_digest
        except BaseException:
            shutil.rmtree(out_dir, ignore_errors=True)
            raise
    # The folder goes when the package object does (or at cleanup(), or at interpreter exit).
    package._finalizer = weakref.finalize(package, shutil.rmtree, out_dir, ignore_errors=True)
    return package


def _describe_model(path: str, model: str, model_dir: str, signature: dict | None,
                    limits: ArchiveLimits) -> ExtractedPackage:
    so_files = _files_with_suffix(model_dir, ".so")
    if len(so_files) != 1:
        what = "several .so files" if so_files else (
            "C++ sources but no compiled .so" if _files_with_suffix(model_dir, ".cpp") else "no compiled .so")
        raise PackageError(f"{path!r} (model {model!r}) holds {what}; rebuild it with "
                           "torch._inductor.aoti_compile_and_package (without package_cpp_only)")
    meta_files = _files_with_suffix(model_dir, "wrapper_metadata.json") or _files_with_suffix(model_dir, "_metadata.json")
    metadata = _read_metadata(path, meta_files[0], limits) if meta_files else {}
    blobs = _files_with_suffix(model_dir, ".blob")
    return ExtractedPackage(path, model, so_files[0], os.path.dirname(so_files[0]), metadata,
                            blobs[0] if blobs else None, signature, _proxy_executor_ops(so_files[0], limits))


def _read_small_file(path: str, file: str, limits: ArchiveLimits) -> bytes:
    size = os.path.getsize(file)
    if limits.max_json_bytes and size > limits.max_json_bytes:
        raise PackageError(f"{path!r}: the model's {os.path.basename(file)} is {size / (1 << 20):.1f} MiB, more than "
                           f"the {limits.max_json_bytes >> 20} MiB a JSON entry may have; it is damaged or hostile. "
                           "If you trust it, set AOTCUDA_MAX_JSON_BYTES (0: no limit)")
    with open(file, "rb") as f:
        return f.read()


def _read_metadata(path: str, meta_file: str, limits: ArchiveLimits) -> dict[str, str]:
    """The model's ``<hash>.wrapper_metadata.json``: a JSON object of strings (AOTI_DEVICE_KEY, ...)."""
    return _parse_metadata(path, os.path.basename(meta_file), _read_small_file(path, meta_file, limits))


def _parse_metadata(path: str, file_name: str, data: bytes) -> dict[str, str]:
    try:
        metadata = json.loads(data)
    except ValueError as exc:
        raise PackageError(f"{path!r}: the model's metadata {file_name} is not valid JSON "
                           f"({exc}); the package is damaged, lower the model again") from exc
    if not isinstance(metadata, dict):
        raise PackageError(f"{path!r}: the model's metadata {file_name} is a "
                           f"{type(metadata).__name__}, not a JSON object; the package is damaged, lower the model again")
    return {str(k): str(v) for k, v in metadata.items()}


def _proxy_executor_ops(so_path: str, limits: ArchiveLimits) -> list[str]:
    """The ops the model runs through AOTI's proxy executor (ops without a C shim, e.g. aten::tanh on
    complex values, and custom ops), listed in ``<hash>.wrapper.json`` next to the .so."""
    extern_file = so_path[: -len(".so")] + ".json"
    if not os.path.exists(extern_file):
        return []
    return _proxy_targets(_read_small_file(so_path, extern_file, limits), os.path.basename(extern_file))


def check_no_proxy_executor(package: ExtractedPackage) -> None:
    """Raise PackageError when the package runs ops through AOTI's proxy executor, which aotcuda's runtime
    does not provide. The message names the ops and what to do: run it with torch's loader, or rewrite the
    ops; for a package not written by aotcuda.lower (no signature), lowering with aotcuda may remove them."""
    if not package.proxy_ops:
        return
    ops = ", ".join(sorted(set(package.proxy_ops)))
    problem = (f"{package.path!r} runs {len(package.proxy_ops)} op(s) through AOTInductor's proxy executor ({ops}): "
               "ops with no C shim, which aotcuda's runtime cannot run. ")
    torch_loader = f"run this package with torch._inductor.aoti_load_package({package.path!r})"
    if package.signature is not None:  # written by aotcuda.lower(allow_fallbacks=True): lowering again won't help
        raise PackageError(f"{problem}Either {torch_loader}, or rewrite {ops} in the model with ops that have a "
                           "C shim and lower it again.")
    raise PackageError(f"{problem}Either {torch_loader}, or lower the model with aotcuda.lower (its passes rewrite "
                       f"complex math, which removes such ops on complex values), or rewrite {ops} in the model.")


def proxy_executor_ops(package_path: str | os.PathLike) -> list[str]:
    """The ops a .pt2 package runs through AOTI's proxy executor, read from the zip (no extraction).

    aotcuda's runtime has no proxy executor: a package that needs one runs only in torch's own loader
    (``torch._inductor.aoti_load_package``). Empty for a package without such ops.
    """
    path = os.fspath(package_path)
    limits = ArchiveLimits.from_environment()
    with _open_zip(path) as archive:
        check_entries(path, archive.infolist(), limits)
        names = archive.namelist()
        tables = [n for n in names if n.endswith(".wrapper.json") and "/data/aotinductor/" in f"/{n}"]
        return [op for table in tables for op in _proxy_targets(read_json_entry(archive, table, path, limits),
                                                                  posixpath.basename(table))]


def read_json_entry(archive: zipfile.ZipFile, name: str, path: str, limits: ArchiveLimits) -> bytes:
    """A JSON entry's bytes, within ``limits.max_json_bytes``; PackageError for a damaged entry."""
    try:
        return read_entry(archive, name, limits.max_json_bytes, path, "max_json_bytes")
    except _DAMAGED_ZIP as exc:
        raise PackageError(f"{path!r} is damaged: its entry {name!r} cannot be read ({exc}); copy the "
                           "package again, or lower the model again") from exc


def describe_package(package_path: str | os.PathLike, model_name: str | None = None,
                     limits: ArchiveLimits | None = None) -> tuple[dict[str, str], dict | None]:
    """(the model's metadata, the aotcuda signature or None), read from the zip within ``limits``:
    nothing is extracted and no code of the package runs (what ``aotcuda inspect`` shows). A package
    that load would refuse for its size is refused here too.

    Raises PackageError as open_package does."""
    path = os.fspath(package_path)
    limits = limits or ArchiveLimits.from_environment()
    with _opened(path, model_name, limits) as (archive, names, model, root, signature):
        folder = f"{root}data/aotinductor/{model}/"
        # What load would extract, checked as load checks it: inspect refuses what load refuses.
        check_extraction(path, [info for info in archive.infolist() if info.filename.startswith(
            (folder, f"{root}data/constants/")) and not info.filename.endswith("/")], limits)
        meta = sorted(n for n in names if n.startswith(folder) and n.endswith("wrapper_metadata.json")) or sorted(
            n for n in names if n.startswith(folder) and n.endswith("_metadata.json"))
        if not meta:
            return {}, signature
        data = read_json_entry(archive, meta[0], path, limits)
        return _parse_metadata(path, posixpath.basename(meta[0]), data), signature


def _proxy_targets(data: bytes, file_name: str) -> list[str]:
    """The op names of a proxy-executor table: {"nodes": [{"node": {"target": "aten::tanh", ...}}, ...]}."""
    try:
        nodes = json.loads(data).get("nodes", [])
        return [str(node.get("node", {}).get("target", "?")) for node in nodes]
    except (ValueError, AttributeError) as exc:
        raise PackageError(f"the model's op list {file_name} is damaged ({exc}); lower the model again") from exc


# --- the signature ----------------------------------------------------------------------------------------


def _read_signature_entry(archive: zipfile.ZipFile, names: list[str], root: str, path: str,
                          limits: ArchiveLimits) -> dict | None:
    entry = next((n for n in (f"{root}{SIGNATURE_ENTRY}", SIGNATURE_ENTRY) if n in names), None)
    if entry is None:
        return None
    data = read_json_entry(archive, entry, path, limits)
    try:
        signature = json.loads(data)
    except ValueError as exc:
        raise PackageError(f"{path!r}: {entry} is not valid JSON: {exc}") from exc
    if not isinstance(signature, dict):
        raise PackageError(f"{path!r}: {entry} is a {type(signature).__name__}, not a JSON object; "
                           "write it again with aotcuda.runtime.package.write_signature, or lower the model again")
    if signature.get("format") != SIGNATURE_FORMAT or signature.get("version") != SIGNATURE_VERSION:
        raise PackageError(f"{path!r}: {entry} has format {signature.get('format')!r} version "
                           f"{signature.get('version')!r}; this aotcuda reads {SIGNATURE_FORMAT} {SIGNATURE_VERSION}")
    return signature


def read_signature(package: str | os.PathLike | ExtractedPackage) -> dict | None:
    """The package's input/output signature (format in this module's docstring), or None.

    Uses, in order: the ``aotcuda/signature.json`` entry of the .pt2 zip; else None, because AOTI's own
    metadata carries no dtypes or shapes (a Program then checks only the number of inputs, and the
    package's device).
    """
    if isinstance(package, ExtractedPackage):
        return package.signature
    path = os.fspath(package)
    with _open_zip(path) as archive:
        names = archive.namelist()
        return _read_signature_entry(archive, names, _archive_root(names), path, ArchiveLimits.from_environment())


def _dim_spec(size, range_constraints) -> int | dict:
    if isinstance(size, int):
        return size
    from torch.utils._sympy.value_ranges import bound_sympy

    expr = size.node.expr
    if expr.is_number:
        return int(expr)
    bounds = bound_sympy(expr, range_constraints)
    lower = _finite_bound(bounds.lower)
    return {"expr": str(expr), "min": 0 if lower is None else max(lower, 0), "max": _finite_bound(bounds.upper)}


def _finite_bound(value) -> int | None:
    """A range bound as an int, or None when it is infinite or not a number.

    torch.export marks a Dim without max= with torch's own ``int_oo`` (and -int_oo below), whose sympy
    ``is_finite`` is True on torch 2.13 but which int() cannot convert; older ranges may hold sympy.oo.
    """
    from torch.utils._sympy.numbers import int_oo

    if value in (int_oo, -int_oo) or value.is_infinite or not value.is_number:
        return None
    return int(value)


def _tensor_spec(name: str, value, range_constraints, complex_dtype=None) -> dict:
    return {
        "name": name,
        "dtype": str(value.dtype).removeprefix("torch."),
        "device": value.device.type,
        "shape": [_dim_spec(size, range_constraints) for size in value.shape],
        "contiguous": bool(value.is_contiguous()),
        "strides": [_dim_spec(stride, range_constraints) for stride in value.stride()],
        "complex": None if complex_dtype is None else str(complex_dtype).removeprefix("torch."),
    }


def mutated_user_inputs(ep) -> set[str]:
    """Names of the user inputs the program writes in place: the graph signature's USER_INPUT_MUTATION
    targets (a functionalized program, as lower() compiles), and placeholders passed as a written
    argument (``Tensor(a!)``) of an op (an ExportedProgram not yet through run_decompositions)."""
    import torch

    from aotcuda.passes.complex_to_real.boundary import user_input_names

    user = {name for name in user_input_names(ep.graph_signature) if name is not None}  # constants have none
    written = set(ep.graph_signature.user_inputs_to_mutate.values()) & user
    for node in ep.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        given = [*zip(schema.arguments, node.args),
                 *((a, node.kwargs[a.name]) for a in schema.arguments if a.name in node.kwargs)]
        written.update(value.name for argument, value in given
                       if argument.alias_info is not None and argument.alias_info.is_write
                       and isinstance(value, torch.fx.Node) and value.op == "placeholder" and value.name in user)
    return written


def signature_from_exported_program(ep, device: str | None = None) -> dict:
    """The signature of an ExportedProgram's user inputs and tensor outputs (the AOTI container's order).

    Inputs and outputs that ReplaceComplexWithRealPass turned into real pairs get their complex dtype in
    the "complex" field (read from ``aotcuda.passes.complex_to_real.complex_boundary(ep)``).

    Args:
        ep: the ExportedProgram that was (or will be) compiled into the package.
        device: the device type the package runs on ("cpu" / "cuda"); default: the example inputs'.
    """
    import torch

    from aotcuda.passes.complex_to_real.boundary import complex_boundary, user_input_names

    sig, boundary = ep.graph_signature, complex_boundary(ep)
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    mutated = mutated_user_inputs(ep)
    # Constant inputs (None for them here) are baked into the package; like SymInt and custom-object
    # inputs, they are not tensors the container takes.
    inputs = [{**_tensor_spec(name, placeholders[name].meta["val"], ep.range_constraints, complex_dtype),
               "mutated": name in mutated}
              for name, complex_dtype in zip(user_input_names(sig), boundary.inputs)
              if name is not None and isinstance(placeholders[name].meta.get("val"), torch.Tensor)]
    output_node = next(n for n in ep.graph.nodes if n.op == "output")
    user_output_nodes = list(output_node.args[0])[len(output_node.args[0]) - len(sig.user_outputs):]
    outputs = [_tensor_spec(name, node.meta["val"], ep.range_constraints, complex_dtype)
               for name, node, complex_dtype in zip(sig.user_outputs, user_output_nodes, boundary.outputs)
               if hasattr(node, "meta") and isinstance(node.meta.get("val"), torch.Tensor)]
    if device is not None:
        for spec in inputs + outputs:
            spec["device"] = torch.device(device).type
    signature = {"format": SIGNATURE_FORMAT, "version": SIGNATURE_VERSION, "inputs": inputs, "outputs": outputs}
    names = dim_names(ep)
    if names:
        signature["dim_names"] = names
    constants = constant_inputs(sig)
    if constants:
        in_spec = ep.module_call_graph[0].signature.in_spec if ep.module_call_graph else None
        if in_spec is not None and in_spec.num_leaves == len([s for s in sig.input_specs
                                                              if s.kind.name == "USER_INPUT"]):
            from aotcuda.runtime.keywords import leaf_names

            names = leaf_names(in_spec)
            for entry in constants:
                entry["name"] = names[entry["leaf"]]
        signature["constant_inputs"] = constants
    call_signature = ep.module_call_graph[0].signature if ep.module_call_graph else None
    arg_names = getattr(call_signature, "forward_arg_names", None)
    if arg_names:
        signature["forward_arg_names"] = [str(name) for name in arg_names]
    if call_signature is not None:
        from aotcuda.runtime.pytree_types import recorded_types

        types = {t["type"]: t for spec in (call_signature.in_spec, call_signature.out_spec) for t in recorded_types(spec)}
        if types:
            signature["pytree_types"] = list(types.values())
    return signature


def constant_inputs(graph_signature) -> list[dict]:
    """The non-tensor inputs torch.export specialized into the program (``use_cache=False``, a float
    scale), as ``{"leaf": i, "value": v}``: i is the input's place among the flat leaves of the
    ``(args, kwargs)`` input spec (every user input is one leaf, constants included). The runtime checks a
    call against them: the package computes with these values whatever the caller passes."""
    from torch.export.graph_signature import ConstantArgument, InputKind

    user = [spec for spec in graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]
    return [{"leaf": leaf, "value": spec.arg.value} for leaf, spec in enumerate(user)
            if isinstance(spec.arg, ConstantArgument) and _plain_value(spec.arg.value)]


def _plain_value(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def dim_names(ep) -> dict[str, str]:
    """{symbol: the Dim name the caller gave it} for the input sizes that are one symbol ("s27": "seq").

    torch.export keeps the names in the shape environment of the program's fake tensors
    (``source_name_to_debug_name``, keyed by source, "L['x'].size()[1]"; the same on torch 2.11 and 2.13);
    a symbol torch named itself (Dim.AUTO, the CLI's x_1 is a name too) maps to that name.
    """
    import torch

    names = {}
    for node in ep.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        shape_env = getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if not isinstance(value, torch.Tensor) or shape_env is None:
            continue
        debug_names = getattr(shape_env, "source_name_to_debug_name", {})
        for size in value.shape:
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if expr is None or not expr.is_Symbol or str(expr) in names:
                continue
            for source in getattr(shape_env, "var_to_sources", {}).get(expr, []):
                key = source.name() if callable(source.name) else source.name  # a property on torch 2.13
                if (name := debug_names.get(key)) is not None:
                    names[str(expr)] = name
                    break
    return names


def write_signature(package_path: str | os.PathLike, signature: dict) -> None:
    """Add (or replace) the ``aotcuda/signature.json`` entry of a .pt2 package, in place."""
    path = os.fspath(package_path)
    with _open_zip(path) as archive:
        names = archive.namelist()
        root = _archive_root(names)
    entry = f"{root}{SIGNATURE_ENTRY}"
    data = json.dumps(signature, indent=1).encode()
    if entry not in names:
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(entry, data)
        return
    # zipfile cannot replace an entry: rewrite the archive without it.
    fd, tmp = tempfile.mkstemp(suffix=".pt2", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        with zipfile.ZipFile(path) as source, zipfile.ZipFile(tmp, "w") as target:
            for info in source.infolist():
                if info.filename != entry:
                    target.writestr(info, source.read(info))
            target.writestr(entry, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)  # never leave a half-written copy next to the package
        raise
