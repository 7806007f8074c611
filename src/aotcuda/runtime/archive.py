"""Reading an untrusted .pt2 zip within limits: no decompression bomb fills the disk or the memory.

A zip entry declares its sizes in the archive's central directory, and Python's zipfile never inflates
an entry past its declared size (it stops there and the CRC check fails). So the declared sizes bound
what extracting or reading writes, and they are checked BEFORE anything is written or read:

    limit                     default   environment variable             what it bounds
    max_extract_bytes          64 GiB   AOTCUDA_MAX_EXTRACT_BYTES        all entries extracted from one package
    max_ratio                     200   AOTCUDA_MAX_COMPRESSION_RATIO    uncompressed / compressed size, of each
                                                                         entry and of all extracted together,
                                                                         once more than ratio_floor bytes inflate;
                                                                         and the package file's size / the bytes
                                                                         its disk blocks hold (a sparse file)
    max_json_bytes              8 MiB   AOTCUDA_MAX_JSON_BYTES           another JSON entry read into memory
                                                                         (the op table: ~300 bytes an op); the
                                                                         op tables inspect reads, together
    max_signature_bytes         8 MiB   AOTCUDA_MAX_SIGNATURE_BYTES      the aotcuda signature, the model's
                                                                         metadata (real ones: about 1 KiB) and a
                                                                         signing key's tag (~140 bytes an entry)
    max_source_bytes          256 MiB   AOTCUDA_MAX_SOURCE_BYTES         a generated C++ source read into memory
    max_entries                100000   AOTCUDA_MAX_ENTRIES              entries in the archive, and the bytes of
                                                                         its directory (1 KiB an entry), which
                                                                         zipfile reads whole into memory

An entry read into memory (JSON, a generated source) is ratio-checked from 1 MiB (``READ_RATIO_FLOOR``), not
from ``ratio_floor``: json.loads turns 63 MiB of ``[{},{},...]`` into 5 GB of objects, packed in 65 KB. A stored
entry has no ratio to check: what bounds its objects is the count of arrays and objects
(``package_format.check_json_bounds``, before json parses it).
The entry count is read from the archive's end records, and the directory's records counted, before zipfile
builds an object for each of them (``check_directory``).
The packed sizes the ratios use must be really in the file, once: entries that overlap (many records naming one
stored stream) and extra fields two zip readers read differently are refused before anything is read
(``check_layout``).

Real packages are far inside them: a compiled .so deflates 2-4x, weights about 1.1x; bombs inflate
~1000x. A package of mostly-zero weights (a zero-initialized cache of a GiB) does exceed the ratio:
the error says so and names the override (the variable, or ``aotcuda.load(..., limits=ArchiveLimits(...))``).
Set a variable to 0 to lift that limit.
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
import unicodedata
import zipfile
from dataclasses import dataclass

from aotcuda import standard_descriptors, switches
from aotcuda.errors import PackageError, clipped
from aotcuda.os_errors import bytes_shown, cannot_read, size_and_limit_shown
from aotcuda.package_format import open_package_file, open_zip
from aotcuda.switches import SWITCHES

GiB, MiB = 1 << 30, 1 << 20
# Entries read whole into memory are ratio-checked above this size (extracted ones above ratio_floor): what they
# inflate to is parsed into objects many times its size, and real JSON entries are a few KiB.
READ_RATIO_FLOOR = 1 * MiB
_ENVIRONMENT = {
    "max_extract_bytes": "AOTCUDA_MAX_EXTRACT_BYTES",
    "max_ratio": "AOTCUDA_MAX_COMPRESSION_RATIO",
    "max_json_bytes": "AOTCUDA_MAX_JSON_BYTES",
    "max_signature_bytes": "AOTCUDA_MAX_SIGNATURE_BYTES",
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
    max_signature_bytes: int = SWITCHES["AOTCUDA_MAX_SIGNATURE_BYTES"].default
    max_source_bytes: int = SWITCHES["AOTCUDA_MAX_SOURCE_BYTES"].default
    max_entries: int = SWITCHES["AOTCUDA_MAX_ENTRIES"].default

    def __post_init__(self):
        """ValueError for a bound that is not a number of at least 0 (0 lifts it), or not finite: every check compares
        with ``value > limit``, which a NaN makes false and a string makes a TypeError, so ``max_ratio=float("nan")``
        lifted the ratio bound in silence (the breaker, 2026-12-06), as the environment's spellings are refused."""
        for field, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"ArchiveLimits({field}={value!r:.80}): a bound is a finite number of at least 0 "
                                 "(0: no bound)")

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


def entry_name(info: zipfile.ZipInfo) -> str:
    """An entry's name as a message shows it: its repr (no newline or escape sequence of the name reaches a
    terminal as such), at most 120 characters (a name may be 64 KiB)."""
    return clipped(repr(info.filename), 120)


# Unicode categories no entry name of a package (or of torch.save's archive) holds: control characters (newlines,
# ESC), format characters (bidi overrides, zero-width joiners), line and paragraph separators, private use and
# surrogates. Printed, such a name could move the cursor, forge a line of output or reorder what a reader sees.
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


def _printable_name(name: str) -> bool:
    return name.isascii() and name.isprintable() or \
        not any(unicodedata.category(char) in _UNPRINTABLE_CATEGORIES for char in name)


def check_entries(path: str, infos: list[zipfile.ZipInfo], limits: ArchiveLimits) -> None:
    """Refuse an archive with too many entries, with two entries of one name, or with a name holding a control or
    format character (``_UNPRINTABLE_CATEGORIES``), before anything is read.

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
        # orig_filename: the name as the archive holds it; zipfile cuts ``filename`` at a NUL ("a.so\0.txt" reads as
        # "a.so", "\0" as "", whose is_dir() raised a raw IndexError in `aotcuda sign`)
        if not info.filename or not _printable_name(info.orig_filename):
            what = "with no name" if not info.filename else "whose name has a NUL byte" if "\0" in \
                info.orig_filename else "whose name has a control or format character"
            raise PackageError(f"{path!r} holds an entry {what} ({clipped(repr(info.orig_filename), 120)}): an "
                               "archive torch writes never does, and printed (a model folder, a file name in a "
                               "message) it could forge or hide lines of output, and zip readers read a NUL in it "
                               "differently; it is damaged or hostile. Use the package as it was written, or lower "
                               "the model again")
        _check_readable(path, info)
        if info.filename in seen:
            raise PackageError(f"{path!r} holds the entry {entry_name(info)} more than once: a package written by "
                               "AOTInductor never does, so it was altered (an entry appended to it); nothing was "
                               "loaded. Use the package as it was written, or lower the model again")
        seen.add(info.filename)


_END, _END64, _LOCATOR64, _DIRECTORY_RECORD = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07", b"PK\x01\x02"
_END_SEARCH = 22 + (1 << 16)  # the end record and the longest comment after it, as far back as zipfile looks
_NO_ENTRIES, _NO_SIZE, _NO_OFFSET = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF  # "see the zip64 record" in the classic one


@dataclass(frozen=True)
class EndRecords:
    """A zip's end records read as Python's zipfile reads them (its private ``_EndRecData``, mirrored so that no
    check depends on it). ``classic`` holds the end record's entry count, directory size and directory offset
    (``0xFFFF``/``0xFFFFFFFF`` where it defers to the zip64 record); ``entries``, ``directory_size`` and
    ``directory_offset`` are what zipfile takes: the zip64 end record's, where one sits right before its
    locator, else the classic record's. ``directory_end``: where zipfile takes the directory to end (the zip64
    record's start, else the end record's)."""

    classic: tuple[int, int, int]
    entries: int
    directory_size: int
    directory_offset: int
    directory_end: int

    def disagreement(self) -> str | None:
        """Where the classic record states a value other than the zip64 record's (not the defer marker), which
        one: zipfile takes the zip64 value and a reader without zip64 support the classic one. None if none."""
        taken = (self.entries, self.directory_size, self.directory_offset)
        for what, stated, used, marker in zip(("entry counts", "directory sizes", "directory offsets"), self.classic,
                                              taken, (_NO_ENTRIES, _NO_SIZE, _NO_OFFSET)):
            if stated not in (used, marker):
                return f"its two end records state different {what} ({stated} and {used})"
        return None


def read_end_records(file) -> EndRecords | None:
    """The end records of the zip open in ``file`` (binary, seekable), or None where zipfile finds none: the
    end record without comment at the very end, else the last one in the file's last 64 KiB + 22 bytes; then a
    zip64 end record if its locator precedes that record. The file's position is left anywhere."""
    size = file.seek(0, os.SEEK_END)
    start = max(0, size - _END_SEARCH)
    file.seek(start)
    tail = file.read()
    end = len(tail) - 22 if tail[-22:-18] == _END and tail[-2:] == b"\0\0" else tail.rfind(_END)
    if end < 0 or end + 22 > len(tail):
        return None
    end_at = start + end
    entries, directory_size, directory_offset = struct.unpack("<HLL", tail[end + 10:end + 20])
    records = EndRecords((entries, directory_size, directory_offset), entries, directory_size, directory_offset,
                         end_at)
    if end_at < 76:
        return records
    file.seek(end_at - 20)
    if file.read(4) != _LOCATOR64:
        return records
    file.seek(end_at - 76)  # zipfile takes the zip64 end record to sit right before its locator
    record = file.read(56)
    if record[:4] != _END64:
        return records
    entries, directory_size, directory_offset = struct.unpack("<QQQ", record[32:56])
    return EndRecords(records.classic, entries, directory_size, directory_offset, end_at - 76)


def check_directory(path: str, file, limits: ArchiveLimits) -> None:
    """Refuse an archive whose directory lists more than ``limits.max_entries`` entries BEFORE zipfile reads it:
    zipfile builds an object for every record of the directory (1M records: 360 MB and 5 s) before
    ``check_entries`` can count them. zipfile reads the records the directory's declared size holds, whatever
    count the end record declares, so both are looked at: the declared count (of the zip64 record where there
    is one), then, when the size could hold more records than the limit, the records themselves, counted
    without building anything. A file whose end records cannot be read is left to zipfile, which says why.
    ``file`` is the archive zipfile will then read (opened once: the path, named in messages, may change).

    With the entry limit lifted (0), the count and the bytes a record may take are the user's to trust, but a
    directory past the default limit's room is still judged for holes and for records that fill it: its zeros are
    no entries (the file-system breaker, 2026-12-06: AOTCUDA_MAX_ENTRIES=0 let a 4 KiB sparse file declaring a
    1 GiB directory take 1 GiB of memory, as the row "a directory declared over zeros" had it before)."""
    records = read_end_records(file)
    if records is None:
        return
    _refuse_too_many(path, records.entries, limits)
    room = limits.max_entries or SWITCHES["AOTCUDA_MAX_ENTRIES"].default
    if records.directory_size <= 46 * room:  # a record takes at least 46 bytes: no room for more
        return
    # zipfile reads the declared directory whole into memory before it parses a record of it: an end record that
    # declares a directory of 1 GiB over a hole (a sparse file of 4 KiB on disk) took 1 GiB of memory before
    # "Bad magic number for central directory" (64 GiB: the OOM killer). So the file's disk blocks are judged now
    # (holes under records' extra fields and comments), and the records must fill the size declared.
    check_allocation(path, file, limits)
    # Records of real blocks: each may hold 192 KiB (a name, an extra field and a comment of 64 KiB each, which no
    # package writer makes), so max_entries of them would take 19 GiB of memory; torch's take ~150 bytes
    if _over(records.directory_size, DIRECTORY_BYTES_PER_ENTRY * limits.max_entries):
        raise PackageError(f"{path!r}: its directory declares {records.directory_size:,} bytes, more than "
                           f"{DIRECTORY_BYTES_PER_ENTRY:,} a record for the {limits.max_entries:,} entries a package "
                           "may have (a record of a package takes about 150): zipfile would read all of it into "
                           "memory; it is damaged or hostile, nothing was read. Copy the package again, or lower the "
                           f"model again; {_override('max_entries')}")
    file.seek(max(0, records.directory_end - records.directory_size))
    count, covered = _count_records(file, records.directory_size, limits.max_entries + 1 if limits.max_entries
                                    else math.inf)
    _refuse_too_many(path, count, limits)
    if covered + 46 <= records.directory_size:
        raise PackageError(f"{path!r}: its directory declares {records.directory_size:,} bytes, but its records end "
                           f"after {covered:,}: it is damaged or hostile (zipfile would read all of it into memory "
                           "before finding so); nothing was read. Copy the package again, or lower the model again")


# The most directory bytes a package may have for each entry it may have (``check_directory``): 1 KiB, where a record
# of torch's takes about 150 (46 bytes, its name, a zip64 or alignment extra field, no comment).
DIRECTORY_BYTES_PER_ENTRY = 1024


def _count_records(file, directory_size: int, most: int) -> tuple[int, int]:
    """The directory records from the file's position within ``directory_size`` bytes, counted up to ``most``, and
    the bytes they take (fewer than ``directory_size`` where something else follows them: damaged)."""
    count = read = 0
    while count < most and read + 46 <= directory_size:
        header = file.read(46)
        if len(header) < 46 or header[:4] != _DIRECTORY_RECORD:
            break  # damaged
        name, extra, comment = struct.unpack("<3H", header[28:34])
        file.seek(name + extra + comment, os.SEEK_CUR)
        read += 46 + name + extra + comment
        count += 1
    return count, read


def _refuse_too_many(path: str, count: int, limits: ArchiveLimits) -> None:
    if _over(count, limits.max_entries):
        raise PackageError(f"{path!r} has {count} entries, more than the {limits.max_entries} a package may have "
                           "(counted in its directory before it was read); it is damaged or hostile. "
                           f"{_override('max_entries')}")


def check_allocation(path: str, file, limits: ArchiveLimits, kind: str = "package") -> None:
    """Refuse a package file whose size is more than ``limits.max_ratio`` times the bytes its disk blocks hold
    (above ``ratio_floor``): a sparse file, whose holes read as zeros the disk does not hold. The ratio checks take a
    STORED entry's bytes to be in the file, so none applies to one (its ratio is 1): a 256 MiB stored entry over a
    hole (a package of 12 KiB on disk) was extracted whole, 256 MiB written to the temporary folder, and one of up to
    64 GiB (``max_extract_bytes``, the free space) would have been; serve's digest read every zero. The bound is the
    one a deflated entry has, measured against what the disk holds. A file system that reports no blocks (st_blocks
    0: some network and FUSE file systems, a file kept inline) is not judged: every zip has a directory on disk."""
    status = os.fstat(file.fileno())
    held = status.st_blocks * 512
    if held and status.st_size > limits.ratio_floor and _over(status.st_size, limits.max_ratio * held):
        raise PackageError(
            f"{path!r} is a sparse file: {status.st_size / MiB:.1f} MiB, of which its disk holds {held / MiB:.2f} MiB "
            f"({status.st_size / held:.0f}x, more than the {limits.max_ratio:g}x limit); the rest reads as zeros the "
            "disk does not hold, which reading or extracting it would make real: a zip bomb in the file system's "
            f"holes, or a {kind} copied with holes (cp --sparse=always) or kept on a file system that compresses "
            f"zeros away. Nothing was read. Copy a {kind} you trust without holes (cp --sparse=never {kind.upper()} "
            "COPY); "
            f"or, {_override('max_ratio')}")


def open_archive(path: str, limits: ArchiveLimits) -> zipfile.ZipFile:
    """The package's zip (``package_format.open_zip``: PackageError for what is no zip), its directory bounded
    before zipfile reads it, its entries checked and its size bounded by its disk blocks (``check_directory``,
    ``check_entries``, ``check_layout``, ``check_allocation``).
    The file is opened once and every check reads what zipfile reads (``package_format.open_package_file``).

    Read it in a ``with`` block: leaving the block checks that no other process wrote into the file while the
    block read it (PackageChangedError, which also replaces what the block raised where the change explains it:
    a file changed under its reader looks damaged), so that a reader that uses what it read after the block
    uses one version of the package."""
    handle = open_package_file(path)
    try:
        try:
            check_directory(path, handle, limits)
        except OSError as exc:
            raise PackageError(cannot_read(path, exc)) from exc
    except BaseException as exc:
        try:
            handle.check_unchanged(exc)
        finally:
            handle.close()
        raise
    archive = open_zip(path, handle)
    try:
        check_entries(path, archive.infolist(), limits)
        try:
            check_layout(path, archive.fp, archive.infolist(), archive.start_dir)
            check_allocation(path, archive.fp, limits)  # after the layout: bytes no entry holds are named as such
        except OSError as exc:
            raise PackageError(cannot_read(path, exc)) from exc
    except BaseException as exc:
        try:
            archive.check_unchanged(exc)
        finally:
            archive.close()
        raise
    return archive


_LOCAL_HEADER = b"PK\x03\x04"


def archive_or_open(path: str, limits: ArchiveLimits, archive: zipfile.ZipFile | None):
    """``archive`` as it is, where a caller that reads more of the package opened it (``open_archive``: that
    caller's block checks and closes it), else the package opened here (``open_archive``): for a reader that takes
    part in a larger reading of one opening, or reads alone."""
    return contextlib.nullcontext(archive) if archive is not None else open_archive(path, limits)


def check_layout(path: str, file, infos: list[zipfile.ZipInfo], directory_start: int,
                 fix: str = "Lower the model again") -> None:
    """Refuse, before any entry is read, an archive whose entries overlap, or one whose extra fields two zip
    readers could read differently; ``file`` is the archive, ``directory_start`` where its directory begins.

    Overlap: the ratio checks add up the DECLARED packed sizes, but many directory records can name one
    compressed stream stored once (40 entries of one 718 KB stream: 2.5 GiB from a 724 KB file), or quote each
    other's local headers (D. Fifield's overlapped bomb). Python 3.11.7's zipfile has no overlap check and
    torch's miniz does not even compare local names, so each entry's local header and packed data must end
    before the next entry's header (by offset), the last before the directory: the packed bytes then fit in the
    file once, and the ratios hold for what is really inflated. Gaps are allowed (torch writes data descriptors
    there). One pass over the local headers, each read once: I/O bounded by the entry count and the file.

    Extra fields: zipfile applies every zip64 block (a second one after the first left the 0xFFFFFFFF marker),
    miniz stops at the first: one entry was 64 bytes to every check and 4 GiB to torch.load. So neither the
    directory's nor the local header's extra field may hold a block ID twice, or end in a partial block."""
    entries = sorted(infos, key=lambda info: info.header_offset)
    unaccounted = max(entries[0].header_offset, 0) if entries else directory_start
    _check_unaccounted(path, unaccounted, fix)
    for index, info in enumerate(entries):
        _check_extra(path, info, info.extra, "directory record", fix)
        following = entries[index + 1] if index + 1 < len(entries) else None
        limit = following.header_offset if following is not None else directory_start
        file.seek(max(info.header_offset, 0))
        header = file.read(30)
        if info.header_offset < 0 or len(header) < 30 or header[:4] != _LOCAL_HEADER:
            raise PackageError(f"{path!r}: its entry {entry_name(info)} has no local header at byte "
                               f"{info.header_offset}, where its directory record says: it is damaged or was "
                               f"altered; nothing was read. {fix}")
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        end = info.header_offset + 30 + name_length + extra_length + info.compress_size
        if end > limit:
            other = (f"the entry {entry_name(following)} at byte {limit}" if following is not None else
                     f"the central directory at byte {limit}")
            raise PackageError(f"{path!r}: its entry {entry_name(info)} (bytes {info.header_offset} to {end}) runs "
                               f"into {other}: overlapping entries: a zip bomb (one packed stream inflated for many "
                               f"entries), which no zip writer makes; nothing was read. {fix}")
        unaccounted += limit - end
        _check_unaccounted(path, unaccounted, fix)
        file.seek(name_length, os.SEEK_CUR)  # within this entry's bytes, which no other entry shares
        _check_extra(path, info, file.read(extra_length), "local header", fix)


# The bytes of an archive that no entry, directory or end record holds: before its first entry, between entries, before
# its directory. A zip writer leaves a data descriptor after an entry (at most 24 bytes; torch's writer aligns with
# extra fields, not gaps), so 16 MiB is far past any package's, and far below what hurts.
MAX_UNACCOUNTED_BYTES = 16 << 20


def _check_unaccounted(path: str, unaccounted: int, fix: str) -> None:
    """PackageError when ``unaccounted`` bytes of the archive (so far) belong to no entry. Why: zipfile reads an
    archive with any amount of data before or between its entries, and whatever reads the whole file reads them:
    a package behind 20 GB of zeros (a sparse file, 2.7 MB on disk) loaded in 0.3 s, while `aotcuda serve`'s digest of
    it (``package_checks.package_sha256``, and every replica's again) took 76 s; 100 TB would hold serve for days."""
    if unaccounted > MAX_UNACCOUNTED_BYTES:
        raise PackageError(f"{path!r} holds more than {MAX_UNACCOUNTED_BYTES >> 20} MiB ({unaccounted:,} bytes so far) "
                           "that no entry of its archive accounts for, before its first entry or between entries: no "
                           "zip writer leaves them, and reading the file whole (its digest, which `aotcuda serve` takes) "
                           f"would read them all; nothing was read. {fix}")


def _check_extra(path: str, info: zipfile.ZipInfo, extra: bytes, where: str, fix: str) -> None:
    """PackageError when ``extra`` does not parse into whole (id, size, data) blocks of distinct IDs."""
    seen, at, problem = set(), 0, ""
    while at < len(extra) and not problem:
        if at + 4 > len(extra):
            problem = f"ends in {len(extra) - at} bytes that are no whole block"
            break
        ident, size = struct.unpack_from("<HH", extra, at)
        zip64 = " (two zip64 blocks: Python's zipfile reads the second, torch's reader the first)" if ident == 1 else ""
        problem = (f"has a block 0x{ident:04x} of {size} bytes that runs past its end" if at + 4 + size > len(extra)
                   else f"holds the block 0x{ident:04x} more than once{zip64}" if ident in seen else "")
        seen.add(ident)
        at += 4 + size
    if problem:
        raise PackageError(f"{path!r}: the extra field of its entry {entry_name(info)} ({where}) {problem}: "
                           "zip readers can read its sizes differently, so its checked sizes are not what would be "
                           f"inflated; no zip writer makes one, nothing was read. {fix}")


# How AOTInductor and zipfile's writers store entries. zipfile reads others too (bzip2, lzma), each with its own
# decompressor and its own errors; a package has no reason to use them, so they are refused with the fix.
READABLE_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


def _check_readable(path: str, info: zipfile.ZipInfo) -> None:
    """Refuse an entry zipfile would refuse only when it is read, half-way through a load, with its own errors
    (RuntimeError for an encrypted one, NotImplementedError for an unknown method)."""
    if info.flag_bits & 0x41:  # 0x40: strong encryption, which zipfile reads as NotImplementedError
        raise PackageError(f"{path!r}: its entry {entry_name(info)} is encrypted; a package written by AOTInductor "
                           "never is, and aotcuda reads no passwords. Use the package as it was written, or lower "
                           "the model again")
    if info.flag_bits & 0x20:  # zipfile: NotImplementedError("compressed patched data (flag bit 5)") at the read
        raise PackageError(f"{path!r}: its entry {entry_name(info)} is flagged as patch data (zip flag bit 5), which "
                           "no zip reader here reads and no package writer sets; it is damaged or hostile. Use the "
                           "package as it was written, or lower the model again")
    if info.is_dir() and info.file_size:
        # No reader takes a folder's data, so no size check counted it: `aotcuda sign` of a signed package (which copies
        # every entry, each inflated and packed again) inflated 4 GiB of zeros packed in 6 MB as `twice/notes/` for 79 s,
        # where a file entry of that ratio is refused at once
        raise PackageError(f"{path!r}: its entry {entry_name(info)} is a folder (its name ends in '/') that holds "
                           f"{info.file_size:,} bytes of data, which no zip writer stores in a folder, no reader uses "
                           "and no size check counts; it is damaged or hostile. Use the package as it was written, or "
                           "lower the model again")
    if info.compress_type not in READABLE_METHODS:
        raise PackageError(f"{path!r}: its entry {entry_name(info)} is compressed with zip method "
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
        # in bytes, a unit beside (bytes_shown): in GiB alone a limit below 5 MiB read "would extract to 0.00 GiB, more
        # than the 0.00 GiB limit" (AOTCUDA_MAX_EXTRACT_BYTES=1000000 for a 2.3 MB package; break38, 2026-12-07)
        raise PackageError(f"{path!r} would extract to {bytes_shown(total)}, more than the "
                           f"{bytes_shown(limits.max_extract_bytes)} limit. {_override('max_extract_bytes')}")
    for info in infos:
        check_ratio(path, f"its entry {entry_name(info)}", info.file_size, info.compress_size, limits)
    check_ratio(path, "its entries together", total, packed, limits)


def check_ratio(path: str, what: str, size: int, packed: int, limits: ArchiveLimits, floor: int | None = None) -> None:
    """PackageError when ``size`` bytes inflate from ``packed`` at more than the limit's ratio, above ``floor``
    (default: the limits' ratio_floor)."""
    floor = limits.ratio_floor if floor is None else floor
    if size > floor and _over(size, limits.max_ratio * max(packed, 1)):
        raise PackageError(
            f"{path!r}: {what} would inflate from {packed / MiB:.1f} MiB to {size / MiB:.1f} MiB "
            f"({size / max(packed, 1):.0f}x, more than the {limits.max_ratio:g}x limit): a decompression bomb, "
            f"or weights that are mostly zeros. Nothing was extracted. {_override('max_ratio')}")


def check_size(path: str, what: str, size: int, limits: ArchiveLimits, limit_name: str) -> None:
    """PackageError when ``size`` bytes (of ``what``) exceed the limit ``limit_name`` of ``limits``."""
    limit = getattr(limits, limit_name)
    if _over(size, limit):
        # the size in the limit's unit: "is 0.0 MiB, more than the 1000 bytes" said nothing a reader could compare
        size_shown, shown = size_and_limit_shown(size, limit)
        raise PackageError(f"{path!r}: {what} is {size_shown}, more than the {shown} an entry of its kind "
                           f"may have; it is damaged or hostile. {_override(limit_name)}")


def read_entry(archive: zipfile.ZipFile, name: str, path: str, limits: ArchiveLimits, limit_name: str) -> bytes:
    """An entry's bytes, refused (PackageError) when it declares more than the limit ``limit_name`` of ``limits``,
    or inflates at more than their ratio from READ_RATIO_FLOOR."""
    info = archive.getinfo(name)
    check_size(path, f"its entry {name!r}", info.file_size, limits, limit_name)
    check_ratio(path, f"its entry {name!r}", info.file_size, info.compress_size, limits, READ_RATIO_FLOOR)
    with archive.open(info) as source:
        return source.read(info.file_size + 1 if getattr(limits, limit_name) else -1)


def copy_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: str, hasher=None, most: int | None = None) -> int:
    """Extract one entry to ``target`` (at most its declared size: zipfile stops there), and return the bytes
    written; ``hasher`` (a hashlib object), where given, is fed them. ``most``: stop after one byte past it (the
    caller refuses an entry that gave more than it was signed with, having written no more of it)."""
    left = -1 if most is None else most + 1
    written = 0
    # never as descriptor 0-2, where a process without standard streams would write its C output into the library
    with archive.open(info) as source, open(target, "wb", opener=standard_descriptors.opener) as sink:
        while left and (chunk := source.read(1 << 20 if left < 0 else min(left, 1 << 20))):
            if hasher is not None:
                hasher.update(chunk)
            sink.write(chunk)
            written += len(chunk)
            left -= len(chunk) if left > 0 else 0
    return written
