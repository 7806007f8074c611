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

The signature (``aotcuda/signature.json``: dtypes, shapes, strides, complex inputs and outputs) is the
package contract of ``aotcuda.package_format``, which the lowering writes; this module only reads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import weakref
import zipfile
from dataclasses import dataclass, field

from aotcuda.errors import PackageError, clipped
from aotcuda.os_errors import temporary_folder_advice
from aotcuda.package_format import SIGNATURE_ENTRY, load_json, parse_signature
from aotcuda.package_format import archive_root as _archive_root
from aotcuda.package_tags import (
    SignedEntries,
    SigningKey,
    check_entries,
    check_sizes,
    entry_digest,
    parse_tag,
    signed_entries,
)
from aotcuda.runtime.archive import ArchiveLimits, archive_or_open, check_size, copy_entry, entry_name, open_archive
from aotcuda.runtime.package_checks import (
    DAMAGED_ZIP,
    check_free_space,
    check_same_bytes,
    check_signed_listing,
    checked_path,
    checked_sha256,
    extraction_plan,
    in_model,
    read_json_entry,
    tag_entry,
)
from aotcuda.runtime.libraries import (
    PACKAGE_PREFIX,
    mark_owned,
    new_private_folder,
    remove_folders,
    remove_in_creator,
)
from aotcuda.runtime.shape_expressions import shape_expression
from aotcuda.shared_folders import mounted_noexec, temporary_folder, temporary_folder_problem


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
    _finalizer: weakref.finalize = field(repr=False, default=None)

    @property
    def device_type(self) -> str:
        return self.metadata.get("AOTI_DEVICE_KEY", "")

    def cleanup(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


def model_names(names: list[str]) -> list[str]:
    """The model names in a package's entry list (folders under data/aotinductor/)."""
    root = _archive_root(names)
    prefix = f"{root}data/aotinductor/"
    return sorted({n[len(prefix):].split("/", 1)[0] for n in names if n.startswith(prefix) and n.count("/") > prefix.count("/")})


def _listed(names: list[str], most: int = 10) -> str:
    """Names of a package in a message: at most ``most`` of them, each at most 80 characters, and a count."""
    shown = ", ".join(name if len(name) <= 80 else f"{name[:60]}..." for name in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _what_it_is(names: list[str]) -> str:
    """What an archive without a compiled model is, where its entries say it, and the fix. A new user's trial
    (2026-12-06): a torch.export.save file (also a .pt2) and a torch.save file of inputs were both refused as
    holding "no AOTInductor model", which does not say that neither was ever compiled."""
    root = _archive_root(names)
    if any(name.startswith(f"{root}models/") and name.endswith(".json") for name in names):
        return (": it is a torch.export.save archive (an ExportedProgram, not compiled). Compile it first: "
                "aotcuda.lower(model, args, ...) on the model it was exported from, or `aotcuda lower`")
    if f"{root}data.pkl" in names:
        return (": it is a torch.save file (inputs, outputs or a state dict), not a package. aotcuda.lower and "
                "`aotcuda lower` write packages; `aotcuda run PACKAGE --inputs FILE` takes such a file as inputs")
    return ""


def pick_model(path: str, names: list[str], model_name: str | None = None) -> str:
    """The model of the package whose entries are ``names`` that load takes (``model_name``, else "model" or the one
    there is). Raises PackageError where there is none, saying what the file is where its entries say it (a
    torch.save file, a torch.export.save archive): load, `aotcuda run`/`inspect` and `aotcuda serve`'s check before
    Ray starts say it in the same words."""
    found = model_names(names)
    if model_name is not None:
        if model_name not in found:
            raise PackageError(f"{path!r} has no model {model_name!r}; it has: {_listed(found) or 'none'}")
        return model_name
    if not found:
        raise PackageError(f"{path!r} holds no AOTInductor model (no data/aotinductor/<model>/ folder)"
                           f"{_what_it_is(names)}")
    if len(found) > 1 and "model" not in found:
        raise PackageError(f"{path!r} holds several models ({_listed(found)}); pass model_name=")
    return "model" if "model" in found else found[0]


def _extract_model(archive: zipfile.ZipFile, model_dir_entry: str, root: str, out_dir: str, path: str,
                   limits: ArchiveLimits, digests: dict[str, str] | None = None,
                   sizes: dict[str, int] | None = None) -> str:
    """Extract the model folder (and data/constants/*, flattened into it) to out_dir/model; return it.
    ``digests``, where given, gets {entry name: SHA-256} of what was extracted of each entry; ``sizes`` (a key's
    tag's), where given, bounds each entry it lists: one that gives more is refused once it passes its size.

    Raises PackageError as ``extraction_plan`` does, before writing anything, and naming the damaged entry
    when an entry's data does not match its checksum.
    """
    model_dir = os.path.join(out_dir, "model")
    wanted = extraction_plan(archive, model_dir_entry, root, model_dir, path, limits)
    check_free_space(path, out_dir, [info.file_size for info, _ in wanted],
                     len({os.path.dirname(target) for _, target in wanted} | {model_dir}))
    try:
        os.makedirs(model_dir)
        for info, target in wanted:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                hasher = None if digests is None else hashlib.sha256()
                most = None if sizes is None else sizes.get(info.filename)
                if copy_entry(archive, info, target, hasher, most) > (most if most is not None else float("inf")):
                    raise PackageError(f"{path!r} was altered after it was signed: its entry {entry_name(info)} holds "
                                       f"more than the {most:,} bytes that were signed; its extraction stopped there "
                                       "and nothing of it was used. Lower the model again with the key, or copy the "
                                       "package again from where it was lowered")
                if hasher is not None:
                    digests[info.filename] = hasher.hexdigest()
            except DAMAGED_ZIP as exc:
                raise PackageError(f"{path!r} is damaged: its entry {entry_name(info)} cannot be read ({exc}); copy "
                                   "the package again, or lower the model again") from exc
    except OSError as exc:  # the free space checked above may be taken meanwhile (another process), or a file limit
        temp = os.path.dirname(out_dir)
        raise PackageError(f"{clipped(path, 200)!r} could not be extracted to the temporary folder "
                           f"{clipped(temp, 200)!r} ({exc.strerror or exc}); nothing was loaded: "
                           f"{temporary_folder_advice(exc, temp)}") from None
    return model_dir


def _files_with_suffix(folder: str, suffix: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(suffix))


@contextlib.contextmanager
def _opened(path: str, model_name: str | None, limits: ArchiveLimits, expected_sha256: str | None = None,
            archive: zipfile.ZipFile | None = None, signing_key: SigningKey | None = None):
    """The open zip, its entry names, the chosen model, the archive root, the signature (None if absent) and,
    with ``signing_key``, the entries its tag signs (``SignedEntries``, else None), with the entry count checked, and
    the file's bytes compared with ``expected_sha256`` (if given) before anything else is read. With a key, the
    tag is checked before the signature is parsed, and the signature's bytes against it. Leaving the block checks
    that the file did not change while the block read it (``open_archive``). ``archive``: one the caller opened
    with ``open_archive`` and reads more of (it checks and closes it)."""
    with archive_or_open(path, limits, archive) as archive:
        if expected_sha256 is not None:
            check_same_bytes(path, archive.fp, expected_sha256)
        names = archive.namelist()
        root = _archive_root(names)
        model = pick_model(path, names, model_name)
        signed = None
        if signing_key is not None:
            entry, data = tag_entry(archive, names, root, path, limits)
            signed = signed_entries(data, entry, signing_key, path)
        yield archive, names, model, root, _read_signature_entry(archive, names, root, path, limits, signed), signed


def open_package(path: str | os.PathLike, model_name: str | None = None,
                 limits: ArchiveLimits | None = None, expected_sha256: str | None = None,
                 signing_key: SigningKey | None = None) -> ExtractedPackage:
    """Extract the model of an AOTI package to a private temporary folder.

    ``limits``: bounds on what the package may inflate to (default: ``ArchiveLimits.from_environment()``).
    ``expected_sha256``: the package file's SHA-256 (``package_sha256``) it must have, else PackageError.
    ``signing_key``: the package must be signed with it (``aotcuda.package_tags``): its tag, its signature's bytes
    and every file extracted are checked against it before anything of them is used, else PackageError.

    Raises PackageError when the file is missing, not a zip, holds no (or no such) model, holds C++
    sources without a compiled .so (packages built with ``aot_inductor.package_cpp_only``), or exceeds
    the limits (a decompression bomb: refused before anything is written).
    """
    path = checked_path(path)
    limits = limits or ArchiveLimits.from_environment()
    if expected_sha256 is not None:
        expected_sha256 = checked_sha256(expected_sha256)
    made: list[str] = []  # the extraction folder, from the moment it exists: an interrupt after it left it behind
    try:
        with _opened(path, model_name, limits, expected_sha256, signing_key=signing_key) as (
                archive, names, model, root, signature, signed):
            if signed is not None:  # an entry added, removed or resized: refused before anything is written
                check_signed_listing(signed, archive, in_model(root, model), path)
            out_dir = _extraction_folder(path, made)
            digests = None if signed is None else {}
            model_dir = _extract_model(archive, f"{root}data/aotinductor/{model}/", root, out_dir, path, limits,
                                       digests, None if signed is None else signed.sizes)
            if signed is not None:  # before any of it is read: the metadata, the op table, the library
                check_entries(signed, digests, in_model(root, model), path)
            package = _describe_model(path, model, model_dir, signature, limits)
        # Leaving the block found the file unchanged since it was opened: the library extracted, which nothing
        # has opened yet, and the signature that describes it are of one version of the package.
    except BaseException:
        remove_folders(made)
        raise
    # The folder goes when the package object does (or at cleanup(), or at interpreter exit), in this process
    # only: a forked child inherits the finalizer, and its exit must not remove its parent's folder.
    package._finalizer = weakref.finalize(package, remove_in_creator, out_dir, os.getpid())
    return package


def _extraction_folder(path: str, made: list[str]) -> str:
    """A fresh private folder in the temporary folder for one package, marked with its owner (removed by a later
    process if this one dies without its exit handlers). PackageError where the temporary folder takes no folder or
    file (full, read-only, out of inodes), naming it and the fix; and where another user could replace what is
    extracted there (``shared_folders.unsafe_folder``): load opens the model library from this folder's files (an
    unsigned package's library is never compared with a digest), so a temporary folder others may write into
    without the sticky bit (or owned by another user) would let them put their own library in its place."""
    temp = temporary_folder()
    problem = temporary_folder_problem(temp)
    if problem:
        raise PackageError(f"will not extract {path!r} into the temporary folder {temp!r}: it {problem}, so another "
                           "user could replace the model library load opens from there; nothing was loaded. Point "
                           "TMPDIR to a folder of your own (e.g. mkdir -m 700 ~/tmp), or, where only users you trust "
                           "can write there (a container's emptyDir), set AOTCUDA_TRUST_SHARED_FOLDERS=1")
    if mounted_noexec(temp):  # dlopen's own words blamed the package: "failed to map segment from shared object"
        raise PackageError(f"will not extract {path!r} into the temporary folder {temp!r}: its file system is mounted "
                           "noexec, where no model library can be opened (the loader cannot map its code); nothing was "
                           "loaded. Point TMPDIR to a folder on a file system that allows running code (e.g. mkdir -m "
                           "700 ~/tmp, then TMPDIR=~/tmp)")
    try:
        out_dir = new_private_folder(temp, PACKAGE_PREFIX, made)  # the caller removes it on any error
    except OSError as exc:
        raise PackageError(f"cannot make a folder to extract {clipped(path, 200)!r} to in the temporary folder "
                           f"{clipped(temp, 200)!r} ({exc.strerror or exc}); nothing was loaded: "
                           f"{temporary_folder_advice(exc, temp)}") from None
    try:
        mark_owned(out_dir)
    except OSError as exc:
        raise PackageError(f"cannot write into {clipped(out_dir, 200)!r} to extract {clipped(path, 200)!r} "
                           f"({exc.strerror or exc}); nothing was loaded: {temporary_folder_advice(exc, temp)}") from None
    return out_dir


def _describe_model(path: str, model: str, model_dir: str, signature: dict | None,
                    limits: ArchiveLimits) -> ExtractedPackage:
    so_files = _files_with_suffix(model_dir, ".so")  # exactly one: extraction_plan checked it
    meta_files = _files_with_suffix(model_dir, "wrapper_metadata.json") or _files_with_suffix(model_dir, "_metadata.json")
    metadata = _read_metadata(path, meta_files[0], limits) if meta_files else {}
    blobs = _files_with_suffix(model_dir, ".blob")
    return ExtractedPackage(path, model, so_files[0], os.path.dirname(so_files[0]), metadata,
                            blobs[0] if blobs else None, signature, _proxy_executor_ops(path, so_files[0], limits))


def _read_small_file(path: str, file: str, limits: ArchiveLimits, limit_name: str = "max_json_bytes") -> bytes:
    check_size(path, f"the model's {os.path.basename(file)}", os.path.getsize(file), limits, limit_name)
    with open(file, "rb") as f:
        return f.read()


def _read_metadata(path: str, meta_file: str, limits: ArchiveLimits) -> dict[str, str]:
    """The model's ``<hash>.wrapper_metadata.json``: a JSON object of strings (AOTI_DEVICE_KEY, ...)."""
    data = _read_small_file(path, meta_file, limits, "max_signature_bytes")
    return _parse_metadata(path, os.path.basename(meta_file), data)


# The most entries a model's metadata may have. AOTInductor writes five (AOTI_DEVICE_KEY, AOTI_CPU_ISA, ...), and
# those of a user's aot_inductor.metadata option; the metadata is kept for as long as its Program, and its 8 MiB bound
# alone allowed 800,000 entries (`"1a":0,`), 140 MiB of objects held for each Program of a 2 MB package.
MAX_METADATA_ENTRIES = 10_000


def _parse_metadata(path: str, file_name: str, data: bytes) -> dict[str, str]:
    metadata = load_json(data, path, f"the model's metadata {file_name}")
    if not isinstance(metadata, dict):
        raise PackageError(f"{path!r}: the model's metadata {file_name} is a "
                           f"{type(metadata).__name__}, not a JSON object; the package is damaged, lower the model again")
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise PackageError(f"{path!r}: the model's metadata {file_name} holds {len(metadata):,} entries, more than the "
                           f"{MAX_METADATA_ENTRIES:,} a model's metadata may (AOTInductor writes about five, and those of "
                           "the aot_inductor.metadata option); it is damaged or hostile, nothing was loaded. Lower the "
                           "model again")
    return {str(k): str(v) for k, v in metadata.items()}


def _proxy_executor_ops(path: str, so_path: str, limits: ArchiveLimits) -> list[str]:
    """The ops the model runs through AOTI's proxy executor (ops without a C shim, e.g. aten::tanh on
    complex values, and custom ops), listed in ``<hash>.wrapper.json`` next to the .so."""
    extern_file = so_path[: -len(".so")] + ".json"
    if not os.path.exists(extern_file):
        return []
    return _proxy_targets(_read_small_file(path, extern_file, limits), os.path.basename(extern_file), path)


def check_no_proxy_executor(package: ExtractedPackage) -> None:
    """Raise PackageError when the package runs ops through AOTI's proxy executor, which aotcuda's runtime
    does not provide. The message names the ops and what to do: run it with torch's loader, or rewrite the
    ops; for a package not written by aotcuda.lower (no signature), lowering with aotcuda may remove them."""
    if not package.proxy_ops:
        return
    names = sorted(set(package.proxy_ops))  # the op table's text: each shown as its repr, the list clipped
    ops = ", ".join(clipped(repr(op), 80) for op in names[:10]) + (f" and {len(names) - 10} more"
                                                                   if len(names) > 10 else "")
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
    path = checked_path(package_path)
    limits = ArchiveLimits.from_environment()
    with open_archive(path, limits) as archive:
        names = archive.namelist()
        tables = [n for n in names if n.endswith(".wrapper.json") and "/data/aotinductor/" in f"/{n}"]
        return [op for table in tables for op in _proxy_targets(read_json_entry(archive, table, path, limits),
                                                                  posixpath.basename(table), path)]


def describe_package(package_path: str | os.PathLike, model_name: str | None = None,
                     limits: ArchiveLimits | None = None,
                     archive: zipfile.ZipFile | None = None) -> tuple[dict[str, str], dict | None]:
    """(the model's metadata, the aotcuda signature or None), read from the zip within ``limits``:
    nothing is extracted and no code of the package runs (what ``aotcuda inspect`` shows). A package
    that load would refuse for its size is refused here too. ``archive``: the package opened by the caller
    (``open_archive``), which reads more of it, from this one opening: one version of the file.

    Raises PackageError as open_package does."""
    path = checked_path(package_path)
    limits = limits or ArchiveLimits.from_environment()
    with _opened(path, model_name, limits, archive=archive) as (archive, names, model, root, signature, _):
        folder = f"{root}data/aotinductor/{model}/"
        # What load would extract, planned and checked as load does (nothing is written): inspect refuses what
        # load refuses. The folder is only a name here.
        extraction_plan(archive, folder, root, os.path.join(os.sep, "aotcuda-inspect", "model"), path, limits)
        meta = sorted(n for n in names if n.startswith(folder) and n.endswith("wrapper_metadata.json")) or sorted(
            n for n in names if n.startswith(folder) and n.endswith("_metadata.json"))
        if not meta:
            return {}, signature
        data = read_json_entry(archive, meta[0], path, limits, "max_signature_bytes")
        return _parse_metadata(path, posixpath.basename(meta[0]), data), signature


def package_key_id(package_path: str | os.PathLike, signing_key: SigningKey | None = None,
                   model_name: str | None = None, limits: ArchiveLimits | None = None,
                   archive: zipfile.ZipFile | None = None) -> str | None:
    """The id of the key the package is signed with (``aotcuda.package_tags``), or None where it is not signed; its
    tag is read (once) within the limits and checked to be of the format. With ``signing_key``, checked as load
    checks it, from the zip (every entry load would extract is hashed, nothing is extracted): PackageError where
    load with that key would refuse the package. ``archive``: as for describe_package."""
    path = checked_path(package_path)
    limits = limits or ArchiveLimits.from_environment()
    with _opened(path, model_name, limits, archive=archive, signing_key=signing_key) as (
            archive, names, model, root, _, signed):
        if signed is None:
            entry, data = tag_entry(archive, names, root, path, limits)
            return None if data is None else parse_tag(data, entry, path)["key_id"]
        # What load would extract, planned and checked as load does before any entry is inflated (nothing is
        # written): an entry of a bomb is refused by the limits, not hashed (8 GiB of zeros packed in 8 MiB, added
        # to the model's folder, kept serve's check hashing for 17 s before it found the entry unsigned).
        in_scope = in_model(root, model)
        check_signed_listing(signed, archive, in_scope, path)  # names and sizes first, as load
        extraction_plan(archive, f"{root}data/aotinductor/{model}/", root,
                        os.path.join(os.sep, "aotcuda-inspect", "model"), path, limits)
        check_entries(signed, {info.filename: entry_digest(archive, info, path) for info in archive.infolist()
                               if in_scope(info.filename)}, in_scope, path)
        return signed.key_id


def _proxy_targets(data: bytes, file_name: str, path: str) -> list[str]:
    return proxy_targets(load_json(data, path, f"the model's op list {file_name}"), file_name, path)


def proxy_targets(table, file_name: str, path: str) -> list[str]:
    """The op names of a proxy-executor table (``table``, parsed): {"nodes": [{"node": {"target": "aten::tanh",
    ...}}, ...]}, one a node, "?" for a node without one. PackageError naming the table for any other shape: load
    and inspect read the package's table as it is (a "nodes" of 5 raised a raw TypeError from load, a node of 5 or
    {} raw errors from inspect's fallback scan)."""
    nodes = table.get("nodes", []) if isinstance(table, dict) else None
    if not isinstance(nodes, list) or not all(isinstance(node, dict) and isinstance(node.get("node", {}), dict)
                                              for node in nodes):
        raise PackageError(f"{path!r}: the model's op list {file_name} is damaged (it is not "
                           '{"nodes": [{"node": {"target": ...}}, ...]}); lower the model again')
    return [str(node.get("node", {}).get("target", "?")) for node in nodes]


# --- the signature ----------------------------------------------------------------------------------------


def _read_signature_entry(archive: zipfile.ZipFile, names: list[str], root: str, path: str,
                          limits: ArchiveLimits, signed: SignedEntries | None = None) -> dict | None:
    """The signature, or None where the package has none; with ``signed`` (the entries a key's tag signs), its
    declared size and then its bytes are checked against the tag before they are parsed (PackageError where they are
    not what was signed)."""
    candidates = (f"{root}{SIGNATURE_ENTRY}", SIGNATURE_ENTRY)
    entry = next((n for n in candidates if n in names), None)
    if signed is not None and entry is not None:
        check_sizes(signed, {entry: archive.getinfo(entry).file_size}, path)
    data = None if entry is None else read_json_entry(archive, entry, path, limits, "max_signature_bytes")
    if signed is not None:
        check_entries(signed, {} if entry is None else {entry: hashlib.sha256(data).hexdigest()},
                      candidates.__contains__, path)
    if entry is None:
        return None
    # Every shape expression is read now, by the grammar (never evaluated): refused here, naming its field.
    return parse_signature(data, entry, path, shape_expression)


def read_signature(package: str | os.PathLike | ExtractedPackage, signing_key: SigningKey | None = None,
                   archive: zipfile.ZipFile | None = None) -> dict | None:
    """The package's input/output signature (format in this module's docstring), or None.

    Uses, in order: the ``aotcuda/signature.json`` entry of the .pt2 zip; else None, because AOTI's own
    metadata carries no dtypes or shapes (a Program then checks only the number of inputs, and the
    package's device). With ``signing_key``, the tag is checked and the signature's bytes against it before they
    are parsed, as load does (PackageError otherwise). ``archive``: as for describe_package (a caller that checks
    more of the package, ``package_key_id``, reads the signature from the same opening: one version of the file).
    """
    if isinstance(package, ExtractedPackage):
        return package.signature
    path = checked_path(package)
    limits = ArchiveLimits.from_environment()
    if signing_key is not None:
        with _opened(path, None, limits, archive=archive, signing_key=signing_key) as (*_, signature, _signed):
            return signature
    with archive_or_open(path, limits, archive) as archive:
        names = archive.namelist()
        return _read_signature_entry(archive, names, _archive_root(names), path, limits)


