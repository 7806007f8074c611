"""Packages signed with a key: an HMAC-SHA256 tag over everything load trusts of a package.

Why: the aotcuda signature (``aotcuda/signature.json``: the inputs' dtypes and shape ranges) and the model's
metadata (its device, ``AOTI_CPU_ISA``) are JSON that anyone may edit without the model library, whose
``library_sha256`` then stays true: an edited signature removes aotcuda's checks, and a call the library cannot
take ends the process (SIGSEGV; docs/reliability.md). Nothing in the library can check that JSON. A key the
lowering host and the loading host share can: ``lower(..., signing_key=)`` adds a tag, and ``load(...,
signing_key=)`` refuses a package without one, or whose tag, or any entry it covers, does not match the key.

The tag entry, ``<archive>/aotcuda/tag.json`` (written by ``sign_package``)::

    {"format": "aotcuda.tag", "version": 2, "algorithm": "hmac-sha256",
     "key_id": "3f2a9c0d1e4b5a67",            # names the key (a digest of it; nothing of the key can be had
                                              # from it): an error tells "another key" from "altered"
     "entries": {"m/aotcuda/signature.json": {"sha256": "<hex>", "size": 1234}, ...},
                                              # the SHA-256 and size (bytes, inflated) of every file entry of
                                              # the archive but this one
     "tag": "<hex>"}                          # HMAC-SHA256(key, _signed_bytes(entries, 2))

The sizes bound what load extracts of an entry before its digest can be compared: an entry whose archive declares
another size than was signed is refused before anything is extracted, and none is read past its signed size (a
signed entry replaced, under its own name, by gigabytes within the extraction limits was extracted whole, then
refused by its digest). Version 1 (the same, with each entry's digest alone, before 2026-12-06 evening) is still
read and checked by its digests: its HMAC authenticates them as before, only this early bound is missing (the
archive's limits and the free-space check still bound it), and refusing it would stop every loader of a package
signed before until each is signed again. `aotcuda sign` writes version 2 over either.

What the tag covers is the bytes of the entries, not what is parsed from them: the signature, the metadata, the
op table, the library, its weights and CUDA kernels, each as load reads it (an entry of two versions in the zip,
or the same JSON written otherwise, is another entry). Load compares the digests of what it reads itself (the
signature's bytes, each file as it is extracted, before the library is opened), against the list the tag
authenticates, so that an error names the entry that was altered. Entries load does not read (the generated
sources, another model's folder) are listed but not compared at load.

Keys: bytes given to the call, or a file (``signing_key="/path"``, ``--signing-key-file``, the switch
AOTCUDA_SIGNING_KEY_FILE): its bytes as they are, at least MIN_KEY_BYTES, readable by its owner alone (as ssh
refuses a private key others may read). Never on a command line (``ps`` shows it to every user), and never in a
Ray config: serving passes the file's path to its replicas, and a ``SigningKey`` refuses to be pickled.

This module needs no torch: the lowering signs with it, the runtime checks with it (runtime/package.py).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import pathlib
import re
import shutil
import stat
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from aotcuda import standard_descriptors
from aotcuda import switches
from aotcuda.errors import PackageError, SigningKeyError, clipped, names_quoted
from aotcuda.os_errors import bytes_shown
from aotcuda.package_format import archive_root, entry_sha256, load_json, write_archive_with, write_entry
from aotcuda.regular_files import NotARegularFileError, open_regular

TAG_ENTRY = "aotcuda/tag.json"
TAG_FORMAT, TAG_VERSION, ALGORITHM = "aotcuda.tag", 2, "hmac-sha256"
READ_VERSIONS = (1, 2)  # 1: digests without sizes (module docstring)
KEY_FILE_SWITCH = "AOTCUDA_SIGNING_KEY_FILE"
# 32 bytes: HMAC-SHA256's own strength (RFC 2104 asks for at least the hash's output length). The most a key file
# may hold is a bound on a read, not on strength: HMAC hashes a longer key first.
MIN_KEY_BYTES, MAX_KEY_BYTES = 32, 64 << 10
MAX_TAG_ENTRIES = 100_000  # the archive's own entry limit (AOTCUDA_MAX_ENTRIES' default)
MAX_ENTRY_SIZE = (1 << 63) - 1  # the most a zip64 entry can declare
_HEX64, _HEX16 = re.compile(r"[0-9a-f]{64}"), re.compile(r"[0-9a-f]{16}")
_NEW_KEY = "e.g. head -c 32 /dev/urandom > aotcuda.key && chmod 600 aotcuda.key"
# The command lines' --signing-key-file: a file, never the key itself (a command line shows in `ps` to every user).
KEY_FILE_HELP = (f"The file holds the key's bytes (at least {MIN_KEY_BYTES}; {_NEW_KEY}), readable by its owner "
                 f"alone. Default: the file {KEY_FILE_SWITCH} names; unset: no key.")


class SigningKey:
    """A key to sign packages with and check them by (``signing_key`` builds one). Its bytes are never shown,
    and never pickled: a process that needs it (a serving replica) reads the file itself."""

    __slots__ = ("_key", "source", "key_id")

    def __init__(self, key: bytes, source: str):
        self._key, self.source = key, source
        self.key_id = hashlib.sha256(b"aotcuda signing key id\0" + key).hexdigest()[:16]

    def tag(self, entries: dict, version: int = TAG_VERSION) -> str:
        import hmac  # here: loading a package imports nothing beyond torch's own (tests/test_imports.py)

        return hmac.new(self._key, _signed_bytes(entries, version), hashlib.sha256).hexdigest()

    def __repr__(self) -> str:
        return f"SigningKey({self.source}, key id {self.key_id})"

    def __reduce__(self):
        raise TypeError("a SigningKey is not pickled (its bytes would travel in the clear); pass its key file's path, "
                        "and read it where it is used (signing_key='/path/to/key')")


def signing_key(value=None) -> SigningKey | None:
    """The key a lower() or load() call uses: ``value`` (bytes: the key; a str or os.PathLike: a key file's path; a
    SigningKey), else the file the switch AOTCUDA_SIGNING_KEY_FILE names (read now), else None (no key).
    Raises SigningKeyError naming the problem and the fix."""
    if value is None:
        path = key_file_switch()
        return None if path is None else read_key_file(path, f"{KEY_FILE_SWITCH}={path!r}")
    if isinstance(value, SigningKey):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        key, names_a_file = bytes(value), False
        with contextlib.suppress(OSError, ValueError):  # bytes no file system takes as a name: a key, as they are
            names_a_file = b"\0" not in key and os.path.lexists(key)
        if names_a_file:
            # os.fsencode(path) of a key file of 32 characters or more was the key itself: the path's text, which
            # anyone who knows the path can sign with, in place of the file's bytes (neither is shown)
            raise SigningKeyError(f"signing_key is bytes ({len(key)} of them), which are taken as the key itself, "
                                  "but they name a file: pass a key file's path as a str or os.PathLike "
                                  "(signing_key='/path/to/key'), or the key's own bytes (open(path, 'rb').read())")
        return checked_key(key, "signing_key (bytes)")
    if isinstance(value, (str, os.PathLike)):
        path = os.fsdecode(value)
        with contextlib.suppress(ValueError):  # "~a\0b", "~\ud800": pwd refuses the name; read_key_file says why
            path = os.path.expanduser(path)
        # a str is read as a path; one that names no file may be the key itself, so it is not shown
        return read_key_file(path, f"the key file {path!r}", shown=not isinstance(value, str) or os.path.exists(path))
    raise SigningKeyError(f"signing_key must be bytes (the key) or the path of a file holding it, got "
                          f"{type(value).__name__}")


def key_file_path(path) -> pathlib.Path | None:
    """A key file's path given as one (``--signing-key-file``, ``ServeOptions.signing_key_file``), as a Path, so that
    ``signing_key`` names it in its errors: a str given to ``signing_key=`` may be the key itself and is not shown,
    which told a user who mistyped --signing-key-file of "signing_key (a str of 8 characters ...)" and bytes."""
    return None if path is None else pathlib.Path(path)


def key_file_switch() -> str | None:
    """The key file AOTCUDA_SIGNING_KEY_FILE names, or None where it is unset. Set to nothing (or blanks) is refused
    (SigningKeyError), not read as unset: ``AOTCUDA_SIGNING_KEY_FILE=$KEY`` with KEY unset in a deploy script, or a
    secret's path left empty, loaded every package unsigned without a word, where the deployer meant a key."""
    if KEY_FILE_SWITCH in os.environ and not os.environ[KEY_FILE_SWITCH].strip():
        raise SigningKeyError(f"{KEY_FILE_SWITCH} is set but empty ({os.environ[KEY_FILE_SWITCH]!r}): it names no key "
                              "file, and packages would load unchecked. Set it to the key file's path, or unset it "
                              f"(unset {KEY_FILE_SWITCH}) to load without a key")
    return switches.path(KEY_FILE_SWITCH)


def checked_key(key: bytes, source: str) -> SigningKey:
    if len(key) < MIN_KEY_BYTES:
        raise SigningKeyError(f"{source} holds {len(key)} bytes; a signing key has at least {MIN_KEY_BYTES} "
                              f"random bytes (256 bits): make one, {_NEW_KEY}")
    if len(key) > MAX_KEY_BYTES:
        raise SigningKeyError(f"{source} holds more than {MAX_KEY_BYTES >> 10} KiB: not a key file; a signing key is "
                              f"{MIN_KEY_BYTES} random bytes or more: make one, {_NEW_KEY}")
    return SigningKey(key, source)


def read_key_file(path: str, source: str, shown: bool = True) -> SigningKey:
    """The key in the file at ``path`` (its bytes as they are), refused where it is no regular file, where users
    other than its owner may read or write it (``chmod 600``; a FIFO is refused, never waited on), or where its owner
    is another user than this process's (or root): that user could write their own key into it (a server run as
    root read a key file of uid 1000's, mode 600, and took what uid 1000 signed)."""
    if "\0" in path:
        raise SigningKeyError("the key file's path holds a NUL character; pass the path of the file holding the key")
    where = source if shown else (f"signing_key (a str of {len(path)} characters, read as a key file's path: no "
                                  "file is there, and it is not shown, as it may be the key itself)")
    try:
        handle = open_regular(path)
    except NotARegularFileError as exc:
        raise SigningKeyError(f"{where} is {exc.kind}, not a regular file; put the key in a file") from None
    except FileNotFoundError:
        fix = ("check the path, or make a key file" if shown else
               "pass the key as bytes, or the path of a file holding it")
        raise SigningKeyError(f"{where}: no such file; {fix} ({_NEW_KEY})") from None
    except OSError as exc:
        raise SigningKeyError(f"{where} cannot be read ({exc.strerror or exc}); check its path and permissions") \
            from None
    except ValueError:  # a str no file system takes as a name (a lone surrogate): its text is not shown
        raise SigningKeyError(f"{where} is no file name this system takes"
                              " (it holds characters that have no bytes in the file system's "
                              "encoding); pass the key as bytes, or the path of a file holding it") from None
    import shlex  # here: loading a package imports nothing beyond torch's own (tests/test_imports.py)

    with handle:
        status = os.fstat(handle.fileno())
        mode = status.st_mode
        if status.st_uid not in (os.geteuid(), 0):
            raise SigningKeyError(f"{source} belongs to another user (uid {status.st_uid}), who may read it and write "
                                  f"another key into it: packages that user signs would load here. Keep the key in a "
                                  f"file of this user's (uid {os.geteuid()}) or root's, readable by its owner alone "
                                  f"(chown and chmod 600 {shlex.quote(path)}), and make a new key if others may have "
                                  "read it")
        if mode & 0o077:
            who = "read or written" if mode & 0o022 else "read"
            raise SigningKeyError(f"{source} may be {who} by other users than its owner (mode "
                                  f"{stat.filemode(mode)}): a key others can read signs packages for them too. "
                                  f"Run chmod 600 {shlex.quote(path)} (a Kubernetes secret: defaultMode 0600), and make a new key "
                                  "if others may have read it")
        _refuse_replaceable_key_file(path, source)
        try:
            key = handle.read(MAX_KEY_BYTES + 1)
        except OSError as exc:  # a kernel file (/proc/kmsg: EAGAIN), a disk's EIO: os's raw error named no key file
            raise SigningKeyError(f"{where} cannot be read ({exc.strerror or exc}); keep the key in a regular file on "
                                  f"disk ({_NEW_KEY})") from None
    return checked_key(key, source)


def _refuse_replaceable_key_file(path: str, source: str) -> None:
    """SigningKeyError where another user could put another file at the key file's path: a symbolic link of theirs
    on the way to it, or a folder of it they may write into (not sticky) or rename away
    (``shared_folders.unsafe_file``).
    Its owner and mode are checked on the file opened, but not what the path leads to: a server run as root whose key
    lay in a folder a group of users may write into read, through a link one of them put there, a file of root's of
    mode 0400 whose bytes anyone with such a machine knows (/sys/firmware/acpi/tables/DSDT), and took what they
    signed with them. AOTCUDA_TRUST_SHARED_FOLDERS=1 allows it where only users you trust can write there."""
    from aotcuda import switches
    from aotcuda.shared_folders import unsafe_file

    if switches.flag("AOTCUDA_TRUST_SHARED_FOLDERS"):
        return
    problem = unsafe_file(path)
    if problem:
        raise SigningKeyError(f"{source} could be replaced by another user: {problem}, so they could put a file whose "
                              "bytes they know in its place (a link to a file of root's they know), and packages they "
                              "sign would load here. Keep the key in a folder of your own (mkdir -m 700 ~/.aotcuda), "
                              "or, where only users you trust can write there, set AOTCUDA_TRUST_SHARED_FOLDERS=1")


# --- signing ------------------------------------------------------------------------------------------------


def _signed_bytes(entries: dict, version: int) -> bytes:
    """The canonical bytes the HMAC is of: one text for one set of (name, digest, size) triples (version 1: (name,
    digest) pairs), whatever their order. The version is part of them: a tag of one version is no tag of another."""
    items = sorted(entries.items()) if version == 1 else \
        sorted([name, entry["sha256"], entry["size"]] for name, entry in entries.items())
    pairs = json.dumps(items, ensure_ascii=True, separators=(",", ":"))
    return f"{TAG_FORMAT} {version} {ALGORITHM}\n{pairs}".encode()


def tag_entry_names(root: str) -> tuple[str, ...]:
    return (f"{root}{TAG_ENTRY}", TAG_ENTRY)


def archive_entries(archive: zipfile.ZipFile, path: str) -> dict[str, dict]:
    """{name: {"sha256": its SHA-256, "size": its size}} of every file entry of the archive but its tag (the size
    its directory declares, which bounds what zipfile reads of it). PackageError for a name held twice (the entry a
    reader gets would depend on the reader), and for an entry whose data is damaged (``entry_digest``)."""
    infos = [info for info in archive.infolist() if not info.is_dir()]
    skipped = tag_entry_names(archive_root([info.filename for info in infos]))
    infos = [info for info in infos if info.filename not in skipped]
    twice = sorted(name for name, count in Counter(info.filename for info in infos).items() if count > 1)
    if twice:
        raise PackageError(f"{path!r} holds the entries {names_quoted(twice)} more than once: which one a reader "
                           "gets depends on the reader, so it is not signed. Lower the model again")
    return {info.filename: {"sha256": entry_digest(archive, info, path), "size": info.file_size} for info in infos}


def entry_digest(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> str:
    """``entry_sha256``, or PackageError naming the entry where its data is damaged (a flipped byte: zipfile's "Bad
    CRC-32"; a broken deflate stream: zlib.error): `aotcuda sign` of such a package, and the key check of inspect and
    serve (``package_key_id``), ended in zipfile's raw ``BadZipFile`` (serve's: a traceback), naming no fix."""
    from aotcuda.runtime.package_checks import DAMAGED_ZIP  # no torch (test_imports)

    try:
        return entry_sha256(archive, info)
    except DAMAGED_ZIP as exc:
        raise PackageError(f"{path!r} is damaged: its entry {clipped(repr(info.filename), 120)} cannot be read "
                           f"({exc}); nothing of it was used. Copy the package again, or lower the model again") \
            from exc


def sign_package(package_path: str | os.PathLike, key, *, by_rename: bool = False) -> str:
    """Sign the package at ``package_path`` with ``key`` (as ``signing_key`` takes it): its tag entry is written (or
    replaced), in place, for a file no one reads yet (lower()'s build file, as write_signature); with ``by_rename``,
    into a copy beside it that is then renamed over it, for a published package (a reader meanwhile reads the old
    one whole). Sign only a package you trust: the key then vouches for it. Returns the key id."""
    key = signing_key(key) if not isinstance(key, SigningKey) else key
    if key is None:
        raise SigningKeyError(f"no signing key: pass one, or set {KEY_FILE_SWITCH}")
    path = os.fspath(package_path)
    if by_rename:
        return _signed_by_rename(path, key)
    with _archive_within_limits(path) as archive:
        entries = archive_entries(archive, path)
        root = archive_root(archive.namelist())
    tag = {"format": TAG_FORMAT, "version": TAG_VERSION, "algorithm": ALGORITHM, "key_id": key.key_id,
           "entries": entries, "tag": key.tag(entries)}
    write_entry(path, f"{root}{TAG_ENTRY}", json.dumps(tag, separators=(",", ":")).encode())
    return key.key_id


def refuse_shared_folder(folder: str, path: str) -> None:
    """SigningKeyError where another user could put a file of theirs in place of the copy this signs (a folder they
    may write into that is not sticky, or one they may rename away: ``shared_folders.unsafe_folder``): lower()'s
    build beside its package is written, then opened again by its name to be signed, and `aotcuda sign`'s signed
    copy is renamed over the package from a name in that folder (its named copy where the file system takes no
    O_TMPFILE, else the name it is linked to just before), so the key would vouch for, or publish, their bytes, not
    the package's. AOTCUDA_TRUST_SHARED_FOLDERS=1 allows it where only users you trust can write there."""
    from aotcuda.shared_folders import temporary_folder_problem

    problem = temporary_folder_problem(folder)
    if problem:
        raise SigningKeyError(f"will not sign {path!r} in its folder {folder!r}: it {problem}, so another user could "
                              "put a package of theirs in place of the signed copy made there, and the key would vouch "
                              "for it; nothing was signed. Move the package into a folder of your own, sign it there, "
                              "then publish it (mv), or, where only users you trust can write there, set "
                              "AOTCUDA_TRUST_SHARED_FOLDERS=1")


@contextlib.contextmanager
def _archive_within_limits(path: str):
    """The package opened as load opens one (its directory, names and layout checked), every entry within the
    limits (``AOTCUDA_MAX_*``) before any is inflated: `aotcuda sign` of an 11 MB package holding 8 GiB of zeros
    hashed them all, and re-signing it read them into memory (MemoryError)."""
    from aotcuda.runtime.archive import ArchiveLimits, check_extraction, open_archive  # no torch (test_imports)

    limits = ArchiveLimits.from_environment()
    with open_archive(path, limits) as archive:
        check_extraction(path, [info for info in archive.infolist() if not info.is_dir()], limits)
        yield archive


def _signed_by_rename(path: str, key: SigningKey) -> str:
    # The file a symbolic link names is signed, the link kept: a rename over the link put a signed file in its place
    # and left the file it named (current.pt2 -> v7.pt2: v7.pt2, which other links and paths name) unsigned.
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    refuse_shared_folder(folder, path)
    copy = None
    try:
        with _archive_within_limits(path) as archive:  # one opening: what is hashed is what is copied
            _check_room(path, folder, archive.fp.opened_version.size)
            entries = archive_entries(archive, path)
            root = archive_root(archive.namelist())
            tag = {"format": TAG_FORMAT, "version": TAG_VERSION, "algorithm": ALGORITHM, "key_id": key.key_id,
                   "entries": entries, "tag": key.tag(entries)}
            try:
                copy = _SignedCopy(folder)
                _write_signed(archive, copy.file, root, json.dumps(tag, separators=(",", ":")).encode(), path)
                opened = os.fstat(archive.fp.fileno())
                # Its permissions, never its set-user-ID, set-group-ID or sticky bits: the copy is this user's file,
                # and a package of another user's of mode 4755 (a zip may follow an executable: bytes before its
                # first entry) became this user's set-user-ID program (root's, signed by root).
                # Its group too, where this user may give it (a member of it, or root): the copy took the signer's
                # own, and a package of mode 640 of the group a server reads it as was unreadable to it once signed.
                with contextlib.suppress(OSError):
                    os.fchown(copy.file.fileno(), -1, opened.st_gid)
                os.fchmod(copy.file.fileno(), stat.S_IMODE(opened.st_mode) & 0o777)
            except OSError as exc:
                raise _not_written(path, folder, exc) from None
        # leaving the block found the package unchanged while it was read: the copy is of one version of it
        try:
            copy.publish(path, (opened.st_dev, opened.st_ino))
        except OSError as exc:
            raise _not_written(path, folder, exc) from None
    finally:
        if copy is not None:
            copy.discard()  # never leave a half-written copy next to the package
    return key.key_id


def _check_room(path: str, folder: str, size: int) -> None:
    """PackageError where the package's folder has less room than its signed copy needs (the package's size, its
    holes written as zeros: a sparse package within the ratio limit, 330 MB on disk, is a copy of 64 GiB), before
    anything is hashed or written: the copy filled the disk, failing every process that writes there, before it was
    refused for want of room."""
    free = shutil.disk_usage(folder).free
    if size > free:
        raise PackageError(f"could not sign {path!r}: its signed copy needs {bytes_shown(size)} in {folder!r}, "
                           f"which has {bytes_shown(free)} free; nothing was written, the package is as it was. "
                           "Free space there, or sign it in a folder with room for a copy of it, then move it into "
                           "place")


def _write_signed(archive: zipfile.ZipFile, target, root: str, tag: bytes, path: str = "") -> None:
    """The package ``archive`` holds, with the tag entry ``tag``, into ``target`` (a binary file): its bytes as they
    are with the tag appended, or, where it holds a tag already, its entries but that one rewritten."""
    from aotcuda.runtime.package_checks import DAMAGED_ZIP  # no torch (test_imports)

    held = [name for name in tag_entry_names(root) if name in archive.NameToInfo]
    if held:
        try:
            write_archive_with(archive, target, f"{root}{TAG_ENTRY}", tag, held)
        except DAMAGED_ZIP as exc:
            raise PackageError(f"{path!r} is damaged: an entry cannot be read ({exc}); nothing was signed. Copy "
                               "the package again, or lower the model again") from exc
        return
    source, left = archive.fp, archive.fp.opened_version.size
    source.seek(0)
    while left and (chunk := source.read(min(left, 1 << 20))):
        target.write(chunk)
        left -= len(chunk)
    target.flush()
    with zipfile.ZipFile(target, "a") as appended:
        appended.writestr(f"{root}{TAG_ENTRY}", tag)


class _SignedCopy:
    """The signed copy `aotcuda sign` writes beside the package, then renames over it. Unnamed while it is written
    (O_TMPFILE) and linked into the folder only to be renamed: a process killed meanwhile (SIGKILL, the OOM killer:
    no handler runs) left its ``tmpXXXX.pt2``, a package's size, beside the package for good; an unnamed file goes
    with the process. Where the file system takes no O_TMPFILE (or the copy cannot be linked), a named temporary
    file, as before."""

    def __init__(self, folder: str):
        self.folder, self.name = folder, None
        fd = _open_unnamed(folder)
        if fd is None:
            fd, self.name = tempfile.mkstemp(suffix=".pt2", dir=folder)
        self.file = os.fdopen(fd, "w+b")

    def publish(self, path: str, opened: tuple[int, int]) -> None:
        """Rename the copy over ``path`` (linked into the folder first, where it has no name), where ``path`` still
        names the file the copy was made of (``opened``: its st_dev, st_ino); PackageChangedError where another
        process renamed another file over it meanwhile (a deploy's new package: the rename put the old one, signed,
        in its place, and the new one was lost). The two are exchanged (renameat2's RENAME_EXCHANGE) and what was at
        the path compared after, so that no rename in between is lost; where the file system has no exchange, the
        path is compared just before the rename."""
        self.file.flush()
        if self.name is None:
            self.name = _linked(self.file, self.folder)
        exchanged = _exchange(self.name, path)
        if exchanged is None:  # no exchange here: compared, then renamed (a rename between the two is not seen)
            if not _names(path, opened):
                raise _replaced_while_signed(path)
            os.replace(self.name, path)
            self.name = None
            return
        if not exchanged or not _names(self.name, opened):  # removed, or another file: theirs goes back
            if exchanged:
                try:
                    back = _exchange(self.name, path)
                except OSError:
                    back = False
                if not back:  # theirs is kept where it is, never removed as the copy would be
                    kept, self.name = self.name, None
                    raise _replaced_while_signed(path, kept)
            raise _replaced_while_signed(path)
        # self.name is the package as it was read, which discard removes

    def discard(self) -> None:
        self.file.close()
        if self.name is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.name)
            self.name = None


def _names(path: str, opened: tuple[int, int]) -> bool:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    return (status.st_dev, status.st_ino) == opened


def _exchange(first: str, second: str) -> bool | None:
    """Exchange the files at two paths at once (renameat2 with RENAME_EXCHANGE): True; False where ``second`` is
    gone; None where the platform or the file system has no exchange. Other errors are raised (OSError)."""
    import ctypes  # here: loading a package imports nothing beyond torch's own (tests/test_imports.py)

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code == errno.ENOENT:
        return False
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return None
    raise OSError(code, os.strerror(code))


def _replaced_while_signed(path: str, kept: str | None = None) -> PackageError:
    from aotcuda.errors import PackageChangedError

    where = ("what is at the path is as that process left it" if kept is None else
             f"the file that process put at the path could not be put back and is at {kept!r}: move it back "
             f"(mv {kept} {path})")
    return PackageChangedError(f"{path!r} was replaced (or removed) while it was signed: another process renamed "
                               "another file over it, and the signed copy, of the package as it was read, would have "
                               f"taken the new one's place; nothing was signed, {where}. Sign it again once it is "
                               "published (aotcuda sign)")


def _open_unnamed(folder: str) -> int | None:
    """A descriptor of a new unnamed file in ``folder`` (O_TMPFILE, mode 0600), or None where the file system or
    the platform has none (the errors open(2) names for that); any other error (no room, no permission) is raised."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        return standard_descriptors.opener(folder, flag | os.O_RDWR | os.O_CLOEXEC, 0o600)  # never fd 0-2
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None
        raise


def _linked(file, folder: str) -> str:
    """A new name in ``folder`` for the unnamed ``file``: linkat through /proc/self/fd (what open(2) shows), else
    with AT_EMPTY_PATH (where /proc is not this mount's, and the process may), else a named copy of it."""
    name = os.path.join(folder, f".aotcuda-sign.{os.getpid()}.{os.urandom(6).hex()}.pt2")
    with contextlib.suppress(OSError):
        os.link(f"/proc/self/fd/{file.fileno()}", name, follow_symlinks=True)
        return name
    import ctypes  # here: loading a package imports nothing beyond torch's own (tests/test_imports.py)

    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, at_empty_path = -100, 0x1000
    if libc.linkat(file.fileno(), b"", at_fdcwd, os.fsencode(name), at_empty_path) == 0:
        return name
    fd, name = tempfile.mkstemp(suffix=".pt2", dir=folder)
    try:
        with os.fdopen(fd, "wb") as named:
            file.seek(0)
            shutil.copyfileobj(file, named, 1 << 20)
            os.fchmod(named.fileno(), stat.S_IMODE(os.fstat(file.fileno()).st_mode))
    except BaseException:
        os.remove(name)
        raise
    return name


def _not_written(path: str, folder: str, exc: OSError) -> PackageError:
    """The error of a signed copy that could not be written beside the package (a folder this user may not write
    into, a full or read-only disk): os's own error named only the temporary file."""
    return PackageError(f"could not sign {path!r}: its signed copy could not be written in {folder!r} "
                        f"({exc.strerror or exc}); the package is as it was. Sign it in a folder you may write into "
                        "(with room for a copy of it), then move it into place")


# --- checking -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignedEntries:
    """What a tag checked under a key says: the key's id, {name: SHA-256} of the entries it signs, and {name: size}
    of them (None for a tag of version 1, which records no sizes)."""

    key_id: str
    digests: dict[str, str]
    sizes: dict[str, int] | None


def parse_tag(data: bytes, entry: str, path: str) -> dict:
    """The tag entry's JSON, checked to be of this format (bounded as every package JSON: ``load_json``), with
    every field of the type and form ``sign_package`` writes (of a version this aotcuda reads). PackageError
    otherwise."""
    tag = load_json(data, path, entry)

    def refuse(what: str):
        raise PackageError(f"{path!r}: {entry} {what}; it is not a tag aotcuda writes, so the package is damaged or "
                           "hostile, nothing of it was used. Lower the model again with the key")

    if not isinstance(tag, dict):
        refuse(f"is a {type(tag).__name__}, not a JSON object")
    version = tag.get("version")
    if (tag.get("format"), tag.get("algorithm")) != (TAG_FORMAT, ALGORITHM) or type(version) is not int or \
            version not in READ_VERSIONS:
        refuse(f"has format {clipped(repr(tag.get('format')), 40)} version {clipped(repr(version), 20)} "
               f"algorithm {clipped(repr(tag.get('algorithm')), 40)}, where this aotcuda reads {TAG_FORMAT} version "
               f"{' or '.join(map(str, READ_VERSIONS))} {ALGORITHM}")
    for field, form, digits in (("key_id", _HEX16, 16), ("tag", _HEX64, 64)):
        if not isinstance(tag.get(field), str) or not form.fullmatch(tag[field]):
            refuse(f"has a {field} {clipped(repr(tag.get(field)), 80)} that is not {digits} hexadecimal digits")
    entries = tag.get("entries")
    if not isinstance(entries, dict) or len(entries) > MAX_TAG_ENTRIES:
        refuse("has no object of entries" if not isinstance(entries, dict) else
               f"lists {len(entries):,} entries, more than the {MAX_TAG_ENTRIES:,} a package may hold")
    for name, listed in entries.items():
        digest = listed if version == 1 else listed.get("sha256") if isinstance(listed, dict) else None
        if version > 1 and (not isinstance(listed, dict) or set(listed) != {"sha256", "size"}):
            refuse(f"gives the entry {clipped(repr(name), 80)} {clipped(repr(listed), 80)}, not an object of its "
                   '"sha256" and "size"')
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            refuse(f"gives the entry {clipped(repr(name), 80)} a digest that is not a SHA-256 (64 hexadecimal digits)")
        if version > 1 and (type(listed["size"]) is not int or not 0 <= listed["size"] <= MAX_ENTRY_SIZE):
            refuse(f"gives the entry {clipped(repr(name), 80)} a size {clipped(repr(listed['size']), 40)} that is not "
                   "a number of bytes (an integer from 0 to 2**63 - 1)")
    return tag


def signed_entries(data: bytes | None, entry: str, key: SigningKey, path: str) -> SignedEntries:
    """The entries the tag in ``data`` (the bytes of ``entry``; None: the package has none) signs, once the tag is
    found to be ``key``'s HMAC of them (compared in constant time). PackageError for a package without a tag, of
    another key, or whose tag was altered."""
    if data is None:
        raise PackageError(f"{path!r} is not signed with a key (it has no {TAG_ENTRY}), and a signing key was given "
                           f"({key.source}): only a package signed with it is loaded, nothing of this one was used. "
                           "Lower the model again with the key (aotcuda.lower(..., signing_key=...), `aotcuda lower "
                           "--signing-key-file`), or, for a package you trust, sign it: `aotcuda sign PACKAGE "
                           "--signing-key-file KEY`")
    import hmac

    tag = parse_tag(data, entry, path)
    if not hmac.compare_digest(key.tag(tag["entries"], tag["version"]), tag["tag"]):
        if tag["key_id"] != key.key_id:
            raise PackageError(f"{path!r} was signed with another key (key id {tag['key_id']}) than the one given "
                               f"({key.source}, key id {key.key_id}); nothing of it was used. Load it with the key it "
                               "was lowered with, or lower the model again with this one")
        raise PackageError(f"{path!r}: its {TAG_ENTRY} does not match the entries it lists under the key given "
                           f"({key.source}): the tag or its list was altered after signing; nothing of the package was "
                           "used. Lower the model again with the key")
    if tag["version"] == 1:
        return SignedEntries(tag["key_id"], tag["entries"], None)
    return SignedEntries(tag["key_id"], {name: listed["sha256"] for name, listed in tag["entries"].items()},
                         {name: listed["size"] for name, listed in tag["entries"].items()})


def check_entries(signed: SignedEntries, read: dict[str, str], in_scope: Callable[[str], bool], path: str) -> None:
    """PackageError unless the entries ``read`` ({name: SHA-256} of what load read) are exactly the entries of
    ``signed`` that ``in_scope`` picks (those load reads), with the same digests: one changed, added or removed
    after signing is named. A digest of None: the entry is not read yet, only its name is compared (load refuses
    an entry added or removed before it extracts anything)."""
    expected = {name: digest for name, digest in signed.digests.items() if in_scope(name)}
    changed = sorted(name for name in read if name in expected and read[name] not in (None, expected[name]))
    added = sorted(name for name in read if name not in expected)
    removed = sorted(name for name in expected if name not in read)
    problems = ([f"its entries {names_quoted(changed)} are not what was signed"] if changed else []) + \
        ([f"its entries {names_quoted(added)} were not signed"] if added else []) + \
        ([f"its signed entries {names_quoted(removed)} are missing"] if removed else [])
    if problems:
        raise PackageError(f"{path!r} was altered after it was signed: {'; '.join(problems)}. Nothing of it was used "
                           "(its model library was not opened). Lower the model again with the key, or copy the "
                           "package again from where it was lowered")


def check_sizes(signed: SignedEntries, declared: dict[str, int], path: str) -> None:
    """PackageError where an entry of ``declared`` ({name: the size the archive declares for it}) declares another
    size than was signed, before any of it is read: zipfile reads an entry up to its declared size, so a signed
    entry replaced by a larger one under its own name would be read whole before its digest could be compared.
    Nothing to compare for a tag of version 1."""
    if signed.sizes is None:
        return
    other = sorted(name for name, size in declared.items() if name in signed.sizes and size != signed.sizes[name])
    if other:
        sizes = "; ".join(f"{declared[name]:,} bytes where {signed.sizes[name]:,} were signed" for name in other[:5])
        raise PackageError(f"{path!r} was altered after it was signed: its entries {names_quoted(other)} declare "
                           f"other sizes than were signed ({sizes}). Nothing of it was extracted or used. Lower the "
                           "model again with the key, or copy the package again from where it was lowered")
