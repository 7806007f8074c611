"""The checks a package passes before anything of it is extracted, opened or run: the path it is named by, its
file's SHA-256 (the package serve checked), the plan of what load extracts (each target inside the package's
folder, no two entries on one file, within the archive's limits and the temporary folder's free space), and, under a
signing key, its tag entry and which entries the tag must cover.

``runtime/package.py`` opens and extracts packages by these checks; ``aotcuda inspect`` and serve's check before Ray
starts run them without extracting anything (``describe_package``, ``package_key_id``), so that they refuse what load
refuses.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import zipfile
import zlib
from collections.abc import Callable

from aotcuda.errors import PackageError, clipped
from aotcuda.os_errors import bytes_shown, cannot_read
from aotcuda.package_format import PackageFile
from aotcuda.package_tags import SignedEntries, check_entries, check_sizes, tag_entry_names
from aotcuda.runtime.archive import (
    READ_RATIO_FLOOR,
    ArchiveLimits,
    check_entry_path,
    check_extraction,
    check_ratio,
    entry_name,
    open_archive,
    read_entry,
)
# What zipfile raises for an archive whose directory looks fine but whose data is damaged
# (a flipped byte: "Bad CRC-32"; a cut-off entry: EOFError; a broken deflate stream: zlib.error; a local
# header whose name is not UTF-8 although its flag says so: UnicodeDecodeError).
DAMAGED_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, UnicodeDecodeError)


def read_json_entry(archive: zipfile.ZipFile, name: str, path: str, limits: ArchiveLimits,
                    limit_name: str = "max_json_bytes") -> bytes:
    """A JSON entry's bytes, within the limit ``limit_name`` of ``limits`` and their ratio; PackageError for a
    damaged entry."""
    try:
        return read_entry(archive, name, path, limits, limit_name)
    except DAMAGED_ZIP as exc:
        raise PackageError(f"{path!r} is damaged: its entry {name!r} cannot be read ({exc}); copy the "
                           "package again, or lower the model again") from exc


def safe_target(path: str, root_dir: str, name: str, relative: str) -> str:
    target = os.path.normpath(os.path.join(root_dir, relative))
    if not target.startswith(root_dir + os.sep):
        raise PackageError(f"{path!r}: refusing to extract its entry {name!r}: it points outside the package's "
                           "folder; AOTInductor writes no such entry, so the package was altered or is hostile, "
                           "nothing was loaded. Lower the model again")
    return target


def check_free_space(path: str, folder: str, sizes: list[int], folders: int = 1) -> None:
    """PackageError when the temporary folder's file system has less room than extracting files of ``sizes`` (bytes)
    needs: the ratio and total limits allow a 330 MB package 64 GiB, and a disk filled half-way fails every process
    on it. Each file takes whole blocks of the file system and an inode (its file entry): 99,000 one-byte entries
    took 405,732 KiB of blocks and 99,015 inodes, where a room check of their bytes counted 99,000 bytes (the
    amplification breaker, 2026-12-07). ``folders``: the folders the files go into, made too (a block and an inode
    each)."""
    block, inodes_free = _blocks_and_inodes(folder)
    need = sum(-(-size // block) * block for size in sizes) + folders * block
    free = shutil.disk_usage(folder).free
    if need > free:
        raise PackageError(f"{path!r} extracts to {bytes_shown(need)} of disk blocks ({len(sizes):,} files), but the "
                           f"temporary folder {os.path.dirname(folder)!r} has {bytes_shown(free)} free; nothing was "
                           "extracted. Free space there, or point TMPDIR to a larger disk")
    if inodes_free is not None and len(sizes) + folders > inodes_free:
        raise PackageError(f"{path!r} extracts to {len(sizes):,} files, but the temporary folder "
                           f"{os.path.dirname(folder)!r} has room for {inodes_free:,} more files (its file system's "
                           "free inodes); nothing was extracted. Free files there, or point TMPDIR to another disk")


def _blocks_and_inodes(folder: str) -> tuple[int, int | None]:
    """The block size of ``folder``'s file system and the inodes free there (None where it keeps no count: btrfs and
    some network file systems say 0 inodes in all)."""
    try:
        stats = os.statvfs(folder)
    except OSError:  # not known: the bytes' check and the writes themselves say what they find
        return 4096, None
    return max(stats.f_frsize or stats.f_bsize, 1), (stats.f_favail if stats.f_files else None)


def extraction_plan(archive: zipfile.ZipFile, model_dir_entry: str, root: str, model_dir: str, path: str,
                    limits: ArchiveLimits) -> list[tuple[zipfile.ZipInfo, str]]:
    """(entry, target file) for each file load extracts, checked before anything is written: load extracts by
    this plan, and inspect checks it, so that inspect refuses what load refuses.

    Raises PackageError naming both entries when two would be extracted to one file (a constant named like the
    model's .so) or one as a file where the other needs a folder, when the model has no or several .so files,
    and when the entries would inflate past ``limits`` (``aotcuda.runtime.archive``).
    """
    constants_entry = f"{root}data/constants/"
    wanted, sources = [], {}
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
        check_entry_path(path, name, relative)
        target = safe_target(path, model_dir, name, relative)
        if target in sources:
            raise PackageError(f"{path!r}: its entries {sources[target]!r} and {name!r} would both be extracted to "
                               f"{relative!r}, and the later would replace the earlier; the package was altered or "
                               "is damaged, nothing was loaded. Lower the model again")
        sources[target] = name
        wanted.append((info, target))
    _refuse_file_over_folder(path, model_dir, sources)
    check_extraction(path, [info for info, _ in wanted], limits)
    for info, target in wanted:  # load reads these whole into memory once extracted: ratio-checked as reads are
        if target.endswith(".json"):
            check_ratio(path, f"its entry {entry_name(info)}", info.file_size, info.compress_size, limits,
                        READ_RATIO_FLOOR)
    libraries = [target for target in sources if target.endswith(".so")]
    if len(libraries) != 1:
        what = "several .so files" if libraries else (
            "C++ sources but no compiled .so" if any(t.endswith(".cpp") for t in sources) else "no compiled .so")
        raise PackageError(f"{path!r} (model {model_dir_entry.rstrip('/').rsplit('/', 1)[-1]!r}) holds {what}; "
                           "rebuild it with torch._inductor.aoti_compile_and_package (without package_cpp_only)")
    return wanted


def _refuse_file_over_folder(path: str, model_dir: str, sources: dict[str, str]) -> None:
    """Refuse entries where one would be extracted as a file at a path another needs as a folder (``x`` beside
    ``x/y``): AOTInductor never writes such a pair, and extracting it would fail half-way with a raw OSError."""
    for target, name in sources.items():
        folder = os.path.dirname(target)
        while len(folder) > len(model_dir):
            if folder in sources:
                raise PackageError(f"{path!r}: its entry {sources[folder]!r} is a file where its entry {name!r} needs "
                                   "a folder; the package was altered or is damaged, nothing was loaded. Lower the "
                                   "model again")
            folder = os.path.dirname(folder)


def package_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a package file's bytes (read through one descriptor, as load reads it). PackageError for
    what is not a readable regular file, or not a zip archive of a layout load takes (archive.open_archive: bytes no
    entry holds are refused before the file is read whole); PackageChangedError where another process wrote into it while it was
    read (the digest would be of no version: every replica would refuse the package it was checked for)."""
    path = checked_path(path)
    # The archive's layout first (archive.check_layout): bytes no entry holds, which a digest would read all of, are
    # refused before the file is read whole
    with open_archive(path, ArchiveLimits.from_environment()) as archive:
        return file_sha256(path, archive.fp)  # leaving the block checks the file did not change meanwhile


def file_sha256(path: str, handle: PackageFile) -> str:
    """The SHA-256 of the bytes the file held when it was opened: a writer that appends to it meanwhile is not
    followed (read to the end, its growth was read for as long as it wrote, to be refused at the end), and the
    change is then the caller's check_unchanged to name."""
    hasher, left = hashlib.sha256(), handle.opened_version.size
    try:
        handle.seek(0)
        while left and (chunk := handle.read(min(left, 1 << 20))):
            hasher.update(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise PackageError(cannot_read(path, exc)) from exc
    return hasher.hexdigest()


def checked_path(path) -> str:
    """``path`` as a str, a leading "~" expanded as the shell does (load("~/m.pt2") looked for a folder named "~" in
    the working directory), or a PackageError naming what was passed (None, a number, a path with a NUL byte raised
    raw TypeError and ValueError from the os module)."""
    try:
        path = os.fsdecode(os.fspath(path))
    except TypeError:
        raise PackageError(f"the package path must be a str or os.PathLike, got {type(path).__name__}; pass the .pt2 "
                           "file's path") from None
    if "\0" in path:
        raise PackageError(f"the package path {clipped(repr(path), 120)} holds a NUL character, which no file name "
                           "can; pass the .pt2 file's path")
    return os.path.expanduser(path)  # after the NUL check: "~a\0b" asked pwd for that user and raised ValueError


def checked_sha256(expected) -> str:
    """The expected SHA-256 in hashlib's form (64 lower-case hex digits). An upper-case digest of the right file
    (as some tools write it) was refused as another package, and so was anything that is no digest at all."""
    if isinstance(expected, str) and len(expected) == 64 and all(c in "0123456789abcdefABCDEF" for c in expected):
        return expected.lower()
    raise PackageError(f"package_sha256={clipped(repr(expected), 80)} is not a SHA-256 (64 hexadecimal digits, as "
                       "hashlib's hexdigest() and sha256sum write it); pass the package file's digest "
                       "(aotcuda.runtime.package_checks.package_sha256)")


def check_same_bytes(path: str, handle, expected: str) -> None:
    """PackageError unless the open package file's bytes have the SHA-256 ``expected``: the package a server
    checked at its start, which each of its replicas must load (another process may replace the file at that
    path meanwhile, or a node may hold another copy), so that every replica serves the same model."""
    found = file_sha256(path, handle)
    if found != expected:
        raise PackageError(f"{path!r} is not the package that was checked when serving started: its SHA-256 is "
                           f"{found[:16]}..., the one checked {str(expected)[:16]}... (the file was replaced or "
                           "changed since, or this node holds another copy); nothing was loaded, so that every "
                           "replica serves one model. Put a new package at a new path and serve that, or restart "
                           "serving to serve what is at this path now")


def tag_entry(archive: zipfile.ZipFile, names: list[str], root: str, path: str,
              limits: ArchiveLimits) -> tuple[str, bytes | None]:
    """(the name of the package's key tag entry, its bytes, within the signature's limit; None where it has none)."""
    entry = next((name for name in tag_entry_names(root) if name in names), None)
    if entry is None:
        return tag_entry_names(root)[0], None
    return entry, read_json_entry(archive, entry, path, limits, "max_signature_bytes")


def in_model(root: str, model: str) -> Callable[[str], bool]:
    """Whether an entry name is one load reads of the model (what ``extraction_plan`` picks), for ``check_entries``."""
    folders = (f"{root}data/aotinductor/{model}/", f"{root}data/constants/")
    return lambda name: name.startswith(folders) and not name.endswith("/")


def check_signed_listing(signed: SignedEntries, archive: zipfile.ZipFile, in_scope: Callable[[str], bool],
                         path: str) -> None:
    """Under a key, before any entry of the model is read: the entries ``in_scope`` picks are by name exactly those
    the tag signs of them (one added or removed is named), and each declares the size that was signed (a signed
    entry replaced under its own name by a larger one was extracted whole before its digest was compared)."""
    infos = [info for info in archive.infolist() if in_scope(info.filename)]
    check_entries(signed, dict.fromkeys(info.filename for info in infos), in_scope, path)
    check_sizes(signed, {info.filename: info.file_size for info in infos}, path)
