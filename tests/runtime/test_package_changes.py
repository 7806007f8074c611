"""A package file another process writes into, in place, while it is read (``cp new.pt2 model.pt2`` writes over
the same file): every reader of a package (load, inspect, serve's digest and signature check) sees one version
of it or refuses it, saying how to publish a package safely; a read that saw a change leaves nothing behind,
and the next read of the file, once its writer is done, works.

Each change is made at one chosen step of the reading (a patched read step writes into the file, keeping its
inode), never by a race: the tests are deterministic."""

import io
import json
import re
import os
import time
import zipfile

import pytest
import torch
from click.testing import CliRunner
from runtime_programs import Twice

import aotcuda.runtime.archive as archive_module
import aotcuda.runtime.package as package_module
import aotcuda.runtime.package_checks as package_checks
from aotcuda.cli import main
from aotcuda.errors import PackageChangedError, PackageError
from aotcuda.runtime.package import describe_package, open_package, read_signature
from aotcuda.runtime.package_checks import package_sha256
from aotcuda.runtime.program import load

SO_ENTRY = "pkg/data/aotinductor/model/abc.wrapper.so"
CHANGED = r"changed while it was read .*another process wrote into the file.*renaming it over the old one"
SIGNATURE = {"format": "aotcuda.signature", "version": 2, "inputs": [], "outputs": []}


def fake_package(path, library: bytes = b"\x7fELF" + bytes(range(256)) * 16, kernel: str = "aoti_torch_cpu_foo"):
    """A package as load reads it, up to opening its library (which is no library here): nothing is lowered."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/archive_format", "pt2")
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper_metadata.json", json.dumps({"AOTI_DEVICE_KEY": "cpu"}))
        archive.writestr(SO_ENTRY, library)
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper.cpp", f"void run() {{ {kernel}(x); }}\n")
        archive.writestr("pkg/aotcuda/signature.json", json.dumps(SIGNATURE))
    return settled(path)


def settled(path):
    """The file dated an hour back, as a package published a while ago is: a write into it then changes its
    modification time even within the clock tick it was written in (the tests write and read it at once)."""
    past = time.time() - 3600
    os.utime(path, (past, past))
    return path


def write_into(path, entry: str = SO_ENTRY):
    """What another process does: write a whole other version of the package over the file itself (same inode),
    ``entry``'s bytes changed, as ``cp new.pt2 model.pt2`` writes one with other weights."""
    with zipfile.ZipFile(path) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as archive:
        for info, data in entries:
            middle = len(data) // 2
            changed = data[:middle] + bytes(byte ^ 0xFF for byte in data[middle:middle + 16]) + data[middle + 16:]
            archive.writestr(info, changed if info.filename == entry else data)
    inode = os.stat(path).st_ino
    with open(path, "r+b") as file:
        file.write(other.getvalue())
        file.truncate()
    assert os.stat(path).st_ino == inode


def writing_into_after(monkeypatch, module, name: str, path, count: int = 1, entry: str = SO_ENTRY):
    """Patch ``module.name`` (a read step) so that the file is written into right after its ``count``-th call."""
    real, calls = getattr(module, name), []

    def step(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(name)
        if len(calls) == count:
            write_into(path, entry)
        return result

    monkeypatch.setattr(module, name, step)
    return calls


def extraction_folders(monkeypatch) -> list[str]:
    """The folders open_package extracts into, as it makes them."""
    made, real = [], package_module._extraction_folder
    monkeypatch.setattr(package_module, "_extraction_folder",
                        lambda path, *rest: made.append(real(path, *rest)) or made[-1])
    return made


def entry_order(path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        return [info.filename for info in archive.infolist()]


@pytest.mark.parametrize("library_read", [True, False], ids=["library-already-extracted", "library-not-yet-read"])
def test_a_package_written_into_while_it_is_extracted_is_refused_and_nothing_is_left(tmp_path, monkeypatch,
                                                                                      library_read):
    """Before: a write into a part already extracted went unseen (the library of one version, the rest of
    another: a mix of two models, or a torn library that dlopen crashes on), and one into a part not yet read
    was called damaged ('Bad CRC-32'), with the fix of copying the package again."""
    path = fake_package(tmp_path / "model.pt2")
    extracted = [name for name in entry_order(path) if "/aotinductor/" in name]
    # copy_entry extracts the model's entries in the archive's order: the write comes after the library's
    # extraction, or after the entry before it
    count = extracted.index(SO_ENTRY) + (1 if library_read else 0)
    made = extraction_folders(monkeypatch)
    calls = writing_into_after(monkeypatch, package_module, "copy_entry", path, count=max(count, 1))
    with pytest.raises(PackageChangedError, match=CHANGED):
        open_package(path)
    assert calls and made and not any(os.path.exists(folder) for folder in made)  # extracted, then removed
    monkeypatch.undo()
    package = open_package(path)  # the writer is done: the file reads as one version again
    try:
        with zipfile.ZipFile(path) as archive, open(package.so_path, "rb") as library:
            assert library.read() == archive.read(SO_ENTRY)
    finally:
        package.cleanup()


def test_a_write_that_puts_the_modification_time_back_is_still_seen(tmp_path, monkeypatch):
    """``cp -p`` and ``rsync --inplace -t`` write over the file and then set its modification time back to the
    source's: the change time (ctime), which no one can set, still says the file changed."""
    path = fake_package(tmp_path / "model.pt2")
    before = os.stat(path)

    def write_and_backdate(*args):
        write_into(path)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    real = package_module._describe_model
    monkeypatch.setattr(package_module, "_describe_model", lambda *args: write_and_backdate() or real(*args))
    with pytest.raises(PackageChangedError, match=r"its status change time changed\)"):
        open_package(path)


def assert_the_file_opened_is_read_whole(tmp_path, monkeypatch, publish) -> None:
    """A load during which ``publish(path, other)`` puts another package at the path: the file opened is read
    whole, as it was, and no change is said."""
    path = fake_package(tmp_path / "model.pt2")
    other = fake_package(tmp_path / "other.pt2", library=b"\x7fELF another library")
    real = package_module._describe_model
    monkeypatch.setattr(package_module, "_describe_model", lambda *args: publish(path, other) or real(*args))
    package = open_package(path)
    try:
        with open(package.so_path, "rb") as library:
            assert library.read() == b"\x7fELF" + bytes(range(256)) * 16  # the one opened, whole
    finally:
        package.cleanup()


def test_a_file_renamed_over_the_path_while_it_is_read_is_not_a_change(tmp_path, monkeypatch):
    """Publishing by rename is the safe way: the file opened is read whole, as it was."""
    assert_the_file_opened_is_read_whole(tmp_path, monkeypatch, lambda path, other: os.replace(other, path))


def test_a_file_renamed_away_while_it_is_read_is_not_a_change(tmp_path, monkeypatch):
    """Publishing by rename while keeping the old package (``mv model.pt2 model.pt2.bak; mv new.pt2 model.pt2``, as
    ``install -b`` does): the rename of the file opened moves its change time, as a write does, and the load was
    refused as 'another process wrote into the file', with the fix of publishing by rename."""

    def rotate(path, other):
        os.replace(path, tmp_path / "model.pt2.bak")
        os.replace(other, path)

    assert_the_file_opened_is_read_whole(tmp_path, monkeypatch, rotate)


@pytest.mark.parametrize("change", ["chmod", "chown"])
def test_a_permission_or_owner_change_while_it_is_read_is_not_a_change(tmp_path, monkeypatch, change):
    """A deploy script's ``chmod 644 model.pt2`` (or a ``chown``) while a server loads it moves the file's change
    time, as a write does, and the load was refused as 'another process wrote into the file'."""

    def retouch(path, other):
        if change == "chmod":
            os.chmod(path, 0o600 if os.stat(path).st_mode & 0o077 else 0o644)
        elif os.getuid() == 0:
            os.chown(path, os.getuid(), os.getgid() + 1)
        else:  # only root gives a file away: its own group is all a user may set, which changes nothing
            os.chmod(path, 0o600)

    assert_the_file_opened_is_read_whole(tmp_path, monkeypatch, retouch)


def test_the_digest_serve_checks_is_of_one_version(tmp_path, monkeypatch):
    """serve's digest (every replica must load these bytes) of a file written into while it was hashed is of no
    version: before, it was returned, and every replica then refused the package as 'not the one checked'."""
    path = fake_package(tmp_path / "model.pt2")
    unchanged = package_sha256(path)
    writing_into_after(monkeypatch, package_checks, "file_sha256", path)
    with pytest.raises(PackageChangedError, match=CHANGED):
        package_sha256(path)
    monkeypatch.undo()
    assert package_sha256(settled(path)) != unchanged  # the new version, whole


def test_a_replica_loading_the_checked_bytes_sees_a_later_write_as_a_change(tmp_path, monkeypatch):
    """A replica compares the file with the checked digest, then extracts it: a write after the comparison
    would have had it extract bytes that were never checked."""
    path = fake_package(tmp_path / "model.pt2")
    digest = package_sha256(path)
    writing_into_after(monkeypatch, package_module, "check_same_bytes", path)
    with pytest.raises(PackageChangedError, match=CHANGED):
        open_package(path, expected_sha256=digest)


def test_signature_and_description_readers_see_one_version(tmp_path, monkeypatch):
    """serve's check reads the signature (read_signature), inspect the metadata and signature
    (describe_package): each refuses a file written into while it read it."""
    path = fake_package(tmp_path / "model.pt2")
    signature_entry = "pkg/aotcuda/signature.json"
    for reader in (read_signature, describe_package):
        monkeypatch.undo()
        writing_into_after(monkeypatch, package_module, "read_json_entry", path, entry=signature_entry)
        with pytest.raises(PackageChangedError, match=CHANGED):
            reader(path)
        settled(path)
    monkeypatch.undo()
    assert read_signature(path) is not None and describe_package(path)[0] == {"AOTI_DEVICE_KEY": "cpu"}


def test_inspect_shows_nothing_of_a_package_written_into_while_it_was_read(tmp_path, monkeypatch):
    """inspect read the metadata and signature from one opening, then the generated sources from another: it
    could show two versions' (and a file renamed over the path between the two: two files'). Now all of it is
    read from one opening, checked unchanged, before anything is printed."""
    path = fake_package(tmp_path / "model.pt2")
    runner = CliRunner()
    writing_into_after(monkeypatch, archive_module, "read_entry", path)  # the sources, read last
    result = runner.invoke(main, ["inspect", str(path)])
    assert result.exit_code == 1
    assert re.search(CHANGED, result.output) and "device" not in result.output, result.output

    monkeypatch.undo()
    other = fake_package(tmp_path / "other.pt2", kernel="aoti_torch_cpu_bar")  # its sources call another kernel
    real = package_module.describe_package
    monkeypatch.setattr(package_module, "describe_package",
                        lambda *args, **kwargs: (real(*args, **kwargs), os.replace(other, path))[0])
    result = runner.invoke(main, ["inspect", str(path)])
    assert result.exit_code == 0 and "aoti_torch_cpu_foo" in result.output and "bar" not in result.output, result.output


def test_load_of_a_real_package_written_into_while_extracted_is_refused_then_loads(twice_pt2, tmp_path, monkeypatch):
    """The whole load, on a lowered package: refused with nothing opened, then loaded and run once the file
    holds one version again."""
    path = tmp_path / "twice.pt2"
    path.write_bytes(open(twice_pt2, "rb").read())
    settled(path)
    so_entry = next(name for name in entry_order(path) if name.endswith(".so"))
    made = extraction_folders(monkeypatch)
    writing_into_after(monkeypatch, package_module, "copy_entry", path, entry=so_entry)
    with pytest.raises(PackageError, match=CHANGED) as refused:  # what every caller of load already catches
        load(path)
    assert isinstance(refused.value, PackageChangedError)
    assert not any(os.path.exists(folder) for folder in made)
    monkeypatch.undo()
    path.write_bytes(open(twice_pt2, "rb").read())  # the writer puts the whole package back
    x = torch.randn(5, 4)
    with load(path) as program:
        torch.testing.assert_close(program(x), Twice()(x))



def test_hashing_reads_no_more_than_the_file_held_when_it_was_opened(tmp_path, monkeypatch):
    """serve's digest (and a replica's comparison with it) read up to the end of the file, wherever that was by then:
    a writer that kept appending to the package held the hashing for as long as it wrote (a 1.3 GB package read as
    3.1 GB while another process appended 1.9 GB), all of it to be refused at the end. Now the bytes the file held
    when it was opened are read, and the growth is what the refusal names."""
    import hashlib

    path = fake_package(tmp_path / "model.pt2")
    size, hashed, real = os.path.getsize(path), [], hashlib.sha256

    class AppendingWhileHashed:  # another process appends 1 MiB each time the reader hashes a piece
        def __init__(self):
            self.hasher = real()

        def update(self, piece):
            hashed.append(len(piece))
            self.hasher.update(piece)
            if len(hashed) < 20:
                with open(path, "ab") as file:
                    file.write(b"\0" * (1 << 20))

        def hexdigest(self):
            return self.hasher.hexdigest()

    monkeypatch.setattr(package_checks.hashlib, "sha256", AppendingWhileHashed)
    with pytest.raises(PackageChangedError, match=rf"its size went from {size:,} to"):
        package_sha256(path)
    assert sum(hashed) == size, f"{sum(hashed):,} bytes hashed of a file of {size:,} bytes when it was opened"
