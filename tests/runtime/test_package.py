"""Opening AOTI packages: errors for bad files, and the aotcuda signature entry."""

import json
import zipfile

import pytest
import torch

from aotcuda.errors import PackageError
from aotcuda.package_format import write_signature
from aotcuda.runtime.package import open_package, read_signature
from aotcuda.runtime.program import load


def test_missing_file(tmp_path):
    with pytest.raises(PackageError, match="does not exist"):
        load(tmp_path / "nope.pt2")


def test_a_directory_is_named_as_one(tmp_path):
    (tmp_path / "adir.pt2").mkdir()
    with pytest.raises(PackageError, match=r"no AOTInductor package at '.*adir.pt2': it is a directory; pass the .pt2 file"):
        load(tmp_path / "adir.pt2")
    with pytest.raises(PackageError, match="does not exist"):  # still said for a path with nothing there
        load(tmp_path / "adir.pt2" / "nope.pt2")


def test_a_truncated_zip_is_damaged_and_random_bytes_are_not_a_package(tmp_path):
    whole = write_zip(tmp_path / "whole.pt2", {"whole/data/x": b"x" * 5000, "whole/data/y": b"y" * 5000})
    data = whole.read_bytes()
    for cut in (data[: len(data) // 2], data[:-100], data[:-1]):
        (tmp_path / "trunc.pt2").write_bytes(cut)
        with pytest.raises(PackageError, match=r"'.*trunc.pt2' is damaged or incomplete \(a truncated copy\?\): "
                                               r".*copy the package again, or lower the model again"):
            load(tmp_path / "trunc.pt2")
    for other in (b"", b"PK", bytes(range(256)) * 40, b"hello, a text file\n" * 50):
        (tmp_path / "other.pt2").write_bytes(other)
        with pytest.raises(PackageError, match=r"not an AOTInductor package \(.pt2 zip archive\)"):
            load(tmp_path / "other.pt2")


def write_zip(path, entries):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def copy_package(source, path):
    path.write_bytes(open(source, "rb").read())
    return path


def test_not_a_zip(tmp_path):
    path = tmp_path / "bad.pt2"
    path.write_bytes(b"not a zip")
    with pytest.raises(PackageError, match=r"not an AOTInductor package \(.pt2 zip archive\)"):
        load(path)


@pytest.mark.parametrize(
    "entries, message",
    [
        ({"empty/archive_format": "pt2", "empty/data/other.txt": ""}, r"holds no AOTInductor model"),
        ({"cpp/archive_format": "pt2", "cpp/data/aotinductor/model/abc.wrapper.cpp": "// source"},
         r"C\+\+ sources but no compiled .so.*package_cpp_only"),
    ],
)
def test_package_without_a_compiled_model_is_refused(tmp_path, entries, message):
    with pytest.raises(PackageError, match=message):
        load(write_zip(tmp_path / "bad.pt2", entries))


def test_a_torch_export_save_or_torch_save_file_is_named_as_such(tmp_path):
    """A new user's trial (2026-12-06): aotcuda.load / `aotcuda inspect` of a torch.export.save archive (a .pt2 too)
    or of a torch.save inputs file said only "holds no AOTInductor model"; the error now says what the file is."""

    class AddOne(torch.nn.Module):
        def forward(self, x):
            return x + 1

    exported = tmp_path / "exported.pt2"
    torch.export.save(torch.export.export(AddOne(), (torch.ones(2),)), exported)
    with pytest.raises(PackageError, match=r"holds no AOTInductor model .*: it is a torch\.export\.save archive "
                                           r"\(an ExportedProgram, not compiled\)\. Compile it first: aotcuda\.lower"):
        load(exported)
    saved = tmp_path / "inputs.pt"
    torch.save({"x": torch.ones(2)}, saved)
    with pytest.raises(PackageError, match=r"holds no AOTInductor model .*: it is a torch\.save file \(inputs, "
                                           r"outputs or a state dict\), not a package"):
        load(saved)


def test_unknown_model_name_lists_the_models(twice_pt2):
    with pytest.raises(PackageError, match=r"no model 'other'; it has: model"):
        open_package(twice_pt2, "other")


def test_signature_of_the_twice_package(twice_pt2, twice_unsigned_pt2):
    signature = read_signature(twice_pt2)
    (x,) = signature["inputs"]
    assert x["name"] == "x" and x["dtype"] == "float32" and x["device"] == "cpu"
    assert x["shape"][1] == 4 and x["shape"][0]["min"] == 2 and x["shape"][0]["max"] == 64
    assert [o["shape"][1] for o in signature["outputs"]] == [4, 4, 4]
    assert read_signature(twice_unsigned_pt2) is None


def test_write_signature_replaces_an_existing_entry(twice_pt2, tmp_path):
    path = copy_package(twice_pt2, tmp_path / "copy.pt2")
    signature = read_signature(path)
    signature["inputs"][0]["name"] = "renamed"
    write_signature(path, signature)
    assert read_signature(path)["inputs"][0]["name"] == "renamed"
    with zipfile.ZipFile(path) as archive:
        assert sum(n.endswith("aotcuda/signature.json") for n in archive.namelist()) == 1
    with load(path) as program:
        assert program.input_specs[0].name == "renamed"


def test_signature_of_another_format_is_refused(twice_pt2, tmp_path):
    path = copy_package(twice_pt2, tmp_path / "copy.pt2")
    write_signature(path, {"format": "aotcuda.signature", "version": 99})
    with pytest.raises(PackageError, match="version 99"):
        read_signature(path)


def test_package_needing_the_proxy_executor_is_refused(twice_pt2, tmp_path):
    """AOTI runs ops without a C shim through a proxy executor, listed in <hash>.wrapper.json; we have none."""
    path = tmp_path / "proxy.pt2"
    with zipfile.ZipFile(twice_pt2) as source, zipfile.ZipFile(path, "w") as target:
        for info in source.infolist():
            target.writestr(info, source.read(info))
            if info.filename.endswith(".wrapper.so"):
                nodes = {"nodes": [{"name": "buf2", "node": {"target": "aten::unsqueeze"}}]}
                target.writestr(info.filename[: -len(".so")] + ".json", json.dumps(nodes))
    with pytest.raises(PackageError, match=r"1 op\(s\) through AOTInductor's proxy executor \('aten::unsqueeze'\)"):
        load(path)


def _within(seconds: float, call, fifo=None):
    """call()'s result or exception, failing the test (not hanging it) when the call blocks: a thread that
    waits on ``fifo`` is released by opening the FIFO for writing."""
    import os
    import threading

    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"{call} waited more than {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def test_a_fifo_or_a_device_is_named_and_refused_without_waiting(tmp_path):
    """Found by a breaker (session 21): a FIFO was said not to exist, and one renamed over a package between the
    check and the open left load and inspect waiting for a writer for ever."""
    import os

    fifo = tmp_path / "fifo.pt2"
    os.mkfifo(fifo)
    with pytest.raises(PackageError, match=r"'.*fifo.pt2': it is a FIFO \(named pipe\), not a regular file"):
        _within(20, lambda: load(fifo), fifo)
    device = tmp_path / "zero.pt2"
    device.symlink_to("/dev/zero")
    with pytest.raises(PackageError, match=r"'.*zero.pt2': it is a character device, not a regular file"):
        _within(20, lambda: read_signature(device))


def test_a_package_is_read_through_the_one_descriptor_it_was_opened_with(tmp_path, monkeypatch):
    """Another process renames a FIFO over the package right after it is opened: every check and zipfile read the
    opened file, so the package opens as it was (before, the directory count, zipfile and the truncation check
    each opened the path again: the first of them to find the FIFO waited for ever)."""
    import os

    import aotcuda.package_format as package_format
    from aotcuda.runtime.archive import ArchiveLimits, open_archive

    path = write_zip(tmp_path / "pkg.pt2", {"pkg/data/x": b"x" * 5000, "pkg/archive_format": b"pt2"})
    fifo = tmp_path / "swap"
    os.mkfifo(fifo)
    real = package_format.open_regular

    def open_then_swapped(name):
        handle = real(name)
        os.replace(fifo, name)  # what the other process does: the path now names a FIFO
        return handle

    monkeypatch.setattr(package_format, "open_regular", open_then_swapped)
    archive = _within(20, lambda: open_archive(str(path), ArchiveLimits()), path)
    with archive:
        assert archive.read("pkg/data/x") == b"x" * 5000
    assert archive.fp is None  # closed with the archive: the descriptor it owned is not left open

    # A damaged file's truncation check reads the opened file too
    damaged = tmp_path / "cut.pt2"
    damaged.write_bytes(write_zip(tmp_path / "w.pt2", {"w/x": b"x" * 5000}).read_bytes()[:-100])
    os.mkfifo(fifo)
    with pytest.raises(PackageError, match="damaged or incomplete"):
        _within(20, lambda: open_archive(str(damaged), ArchiveLimits()), damaged)


def test_an_interrupt_as_a_package_file_is_opened_closes_its_descriptor_once(tmp_path, monkeypatch):
    """A signal's KeyboardInterrupt that came right after ``open_regular`` made its file object (Python runs a handler
    as a call returns; a fuzz of Ctrl-C around ``aotcuda.load`` hit it 8 times in 3,600 loads) dropped that object,
    which closed the package's descriptor, and the cleanup closed the same number again: a file another thread opened
    in between, which took that number, was closed under it, and the caller got ``PackageError: ... cannot be read (Bad
    file descriptor)`` instead of its interrupt (break38, 2026-12-07). Here the other file is opened at that moment:
    it stays open, and the interrupt reaches the caller."""
    from aotcuda import regular_files

    package = tmp_path / "pkg.pt2"
    package.write_bytes(b"a package")
    other_path = tmp_path / "other.log"
    other_path.write_bytes(b"another thread's file")
    real, others = regular_files._NonBlockingFile, []

    def made_then_interrupted(*args, **kwargs):
        made = real(*args, **kwargs)
        made.close()  # what dropping it does: its descriptor is closed
        others.append(open(other_path, "rb"))  # another thread opens a file: it takes the number just freed
        raise KeyboardInterrupt  # the handler, as the call that made it returns

    monkeypatch.setattr(regular_files, "_NonBlockingFile", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        regular_files.open_regular(str(package))
    monkeypatch.undo()
    with others[0] as other:
        assert other.read() == b"another thread's file", "another thread's file was closed under it"
    with regular_files.open_regular(str(package)) as handle:
        assert handle.read() == b"a package"
