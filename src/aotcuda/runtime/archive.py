"""Reading an untrusted .pt2 zip within limits: no decompression bomb fills the disk or the memory.

A zip entry declares its sizes in the archive's central directory, and Python's zipfile never inflates
an entry past its declared size (it stops there and the CRC check fails). So the declared sizes bound
what extracting or reading writes, and they are checked BEFORE anything is written or read:

    limit                     default   environment variable             what it bounds
    max_extract_bytes          64 GiB   AOTCUDA_MAX_EXTRACT_BYTES        all entries extracted from one package
    max_ratio                     200   AOTCUDA_MAX_COMPRESSION_RATIO    uncompressed / compressed size, of each
                                                                         entry and of all extracted together,
                                                                         once more than ratio_floor bytes inflate
    max_json_bytes             64 MiB   AOTCUDA_MAX_JSON_BYTES           a JSON entry read into memory
                                                                         (signature, metadata, op table)
    max_source_bytes          256 MiB   AOTCUDA_MAX_SOURCE_BYTES         a generated C++ source read into memory
    max_entries                100000   AOTCUDA_MAX_ENTRIES              entries in the archive

Real packages are far inside them: a compiled .so deflates 2-4x, weights about 1.1x; bombs inflate
~1000x. A package of mostly-zero weights (a zero-initialized cache of a GiB) does exceed the ratio:
the error says so and names the override (the variable, or ``aotcuda.load(..., limits=ArchiveLimits(...))``).
Set a variable to 0 to lift that limit.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from dataclasses import dataclass

from aotcuda import switches
from aotcuda.errors import PackageError
from aotcuda.switches import SWITCHES

GiB, MiB = 1 << 30, 1 << 20
_ENVIRONMENT = {
    "max_extract_bytes": "AOTCUDA_MAX_EXTRACT_BYTES",
    "max_ratio": "AOTCUDA_MAX_COMPRESSION_RATIO",
    "max_json_bytes": "AOTCUDA_MAX_JSON_BYTES",
    "max_source_bytes": "AOTCUDA_MAX_SOURCE_BYTES",
    "max_entries": "AOTCUDA_MAX_ENTRIES",
}


@dataclass(frozen=True)
class ArchiveLimits:
    """Bounds on reading one package (module docstring). 0 lifts a bound."""

    max_extract_bytes: int = SWITCHES["AOTCUDA_MAX_EXTRACT_BYTES"].default
    max_ratio: float = SWITCHES["AOTCUDA_MAX_COMPRESSION_RATIO"].default
    ratio_floor: int = 64 * MiB
    max_json_bytes: int = SWITCHES["AOTCUDA_MAX_JSON_BYTES"].default
    max_source_bytes: int = SWITCHES["AOTCUDA_MAX_SOURCE_BYTES"].default
    max_entries: int = SWITCHES["AOTCUDA_MAX_ENTRIES"].default

    @classmethod
    def from_environment(cls) -> ArchiveLimits:
        """The defaults, with each AOTCUDA_MAX_* variable that is set taking its place.

        Raises PackageError for a value that is not a number."""
        try:
            return cls(**{field: switches.number(variable) for field, variable in _ENVIRONMENT.items()})
        except ValueError as exc:
            raise PackageError(str(exc)) from exc


def _over(value: float, limit: float) -> bool:
    return bool(limit) and value > limit


def _override(name: str) -> str:
    return (f"if you trust this package, raise the limit: set {_ENVIRONMENT[name]} (0: no limit), or pass "
            f"limits=ArchiveLimits({name}=...) to aotcuda.load")


def check_entries(path: str, infos: list[zipfile.ZipInfo], limits: ArchiveLimits) -> None:
    """Refuse an archive with too many entries, or with two entries of one name, before anything is read.

    Why duplicates: zipfile's name lookup and an extraction in order both end on the LAST entry of a name,
    while a reader that stops at the first sees another file: a genuine package with a second .so appended
    (zipfile's append mode writes one) would run that one under the genuine one's identity. torch's own
    loader refuses such archives too.
    """
    if _over(len(infos), limits.max_entries):
        raise PackageError(f"{path!r} has {len(infos)} entries, more than the {limits.max_entries} a package may "
                           f"have; it is damaged or hostile. {_override('max_entries')}")
    seen: set[str] = set()
    for info in infos:
        _check_readable(path, info)
        if info.filename in seen:
            raise PackageError(f"{path!r} holds the entry {info.filename!r} more than once: a package written by "
                               "AOTInductor never does, so it was altered (an entry appended to it); nothing was "
                               "loaded. Use the package as it was written, or lower the model again")
        seen.add(info.filename)


# How AOTInductor and zipfile's writers store entries. zipfile reads others too (bzip2, lzma), each with its own
# decompressor and its own errors; a package has no reason to use them, so they are refused with the fix.
READABLE_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


def _check_readable(path: str, info: zipfile.ZipInfo) -> None:
    """Refuse an entry zipfile would refuse only when it is read, half-way through a load, with its own errors
    (RuntimeError for an encrypted one, NotImplementedError for an unknown method)."""
    if info.flag_bits & 0x1:
        raise PackageError(f"{path!r}: its entry {info.filename!r} is encrypted; a package written by AOTInductor "
                           "never is, and aotcuda reads no passwords. Use the package as it was written, or lower "
                           "the model again")
    if info.compress_type not in READABLE_METHODS:
        raise PackageError(f"{path!r}: its entry {info.filename!r} is compressed with zip method "
                           f"{info.compress_type}, which aotcuda does not read (only {' and '.join(READABLE_METHODS.values())}"
                           " entries, as AOTInductor and zipfile write them); pack it again with one of those, or "
                           "lower the model again")


# Bounds on the path an entry is extracted to (relative to the package's folder): a name component longer than
# a file system takes raised a raw OSError (File name too long), thousands of folders a RecursionError.
MAX_NAME_BYTES, MAX_PATH_BYTES, MAX_PATH_DEPTH = 255, 1024, 16


def check_entry_path(path: str, name: str, relative: str) -> None:
    """PackageError when the entry ``name`` would be extracted to a ``relative`` path no package needs: a
    component over 255 bytes, a path over 1024 bytes or 16 folders deep (AOTInductor writes a few levels)."""
    encoded = os.fsencode(relative)
    parts = [part for part in encoded.split(b"/") if part]
    problem = ("a name component longer than 255 bytes" if any(len(part) > MAX_NAME_BYTES for part in parts) else
               f"a path longer than {MAX_PATH_BYTES} bytes" if len(encoded) > MAX_PATH_BYTES else
               f"more than {MAX_PATH_DEPTH} folders deep" if len(parts) > MAX_PATH_DEPTH else "")
    if problem:
        shown = name if len(name) <= 120 else f"{name[:100]}... ({len(name)} characters)"
        raise PackageError(f"{path!r}: its entry {shown!r} would be extracted to {problem}; AOTInductor writes no "
                           "such entry, so the package was altered or is damaged, nothing was loaded. Lower the "
                           "model again")


def check_extraction(path: str, infos: list[zipfile.ZipInfo], limits: ArchiveLimits) -> None:
    """Refuse, before writing anything, to extract entries that inflate past the limits (sizes as the
    archive declares them, which bound what zipfile writes)."""
    total = sum(info.file_size for info in infos)
    packed = sum(info.compress_size for info in infos)
    if _over(total, limits.max_extract_bytes):
        raise PackageError(f"{path!r} would extract to {total / GiB:.2f} GiB, more than the "
                           f"{limits.max_extract_bytes / GiB:.2f} GiB limit. {_override('max_extract_bytes')}")
    for info in infos:
        check_ratio(path, f"its entry {info.filename!r}", info.file_size, info.compress_size, limits)
    check_ratio(path, "its entries together", total, packed, limits)


def check_ratio(path: str, what: str, size: int, packed: int, limits: ArchiveLimits) -> None:
    """PackageError when ``size`` bytes inflate from ``packed`` at more than the limit's ratio (above its floor)."""
    if size > limits.ratio_floor and _over(size, limits.max_ratio * max(packed, 1)):
        raise PackageError(
            f"{path!r}: {what} would inflate from {packed / MiB:.1f} MiB to {size / MiB:.1f} MiB "
            f"({size / max(packed, 1):.0f}x, more than the {limits.max_ratio:g}x limit): a decompression bomb, "
            f"or weights that are mostly zeros. Nothing was extracted. {_override('max_ratio')}")


def read_entry(archive: zipfile.ZipFile, name: str, limit: int, path: str, limit_name: str) -> bytes:
    """An entry's bytes, refused (PackageError) when it declares more than ``limit`` bytes."""
    info = archive.getinfo(name)
    if _over(info.file_size, limit):
        raise PackageError(f"{path!r}: its entry {name!r} is {info.file_size / MiB:.1f} MiB, more than the "
                           f"{limit / MiB:.0f} MiB an entry of its kind may have; it is damaged or hostile. "
                           f"{_override(limit_name)}")
    with archive.open(info) as source:
        return source.read(info.file_size + 1 if limit else -1)


def copy_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: str) -> None:
    """Extract one entry to ``target`` (at most its declared size: zipfile stops there)."""
    with archive.open(info) as source, open(target, "wb") as sink:
        shutil.copyfileobj(source, sink, 1 << 20)
