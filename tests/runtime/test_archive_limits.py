"""Decompression bombs and other oversized packages (issue 12, item 8), on small hostile zips built here.

``aotcuda.load`` and ``aotcuda inspect`` must refuse them from the sizes the archive declares, BEFORE
writing to the temporary folder or reading into memory; the limits can be raised (environment variable
or ``limits=``). Each bomb is ~80-100 MiB of zeros that deflates to ~100 KiB (real bombs: GiBs).
"""

import os
import tempfile
import zipfile

import pytest
from click.testing import CliRunner

import aotcuda
from aotcuda.cli import main
from aotcuda.errors import PackageError
from aotcuda.runtime.archive import ArchiveLimits
from aotcuda.runtime.package import describe_package, read_signature

MODEL = "bomb/data/aotinductor/model/"
ZEROS = b"\0" * (1 << 20)


def _write_bomb(path, entry, mib, extra=()):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{MODEL}abc.wrapper_metadata.json", '{"AOTI_DEVICE_KEY": "cpu"}')
        with archive.open(entry, "w", force_zip64=True) as sink:
            for _ in range(mib):
                sink.write(ZEROS)
        for name, data in extra:
            archive.writestr(name, data)
    assert os.path.getsize(path) < 2 << 20
    return str(path)


@pytest.fixture(scope="module")
def so_bomb(tmp_path_factory):
    """A 'model library' entry of 100 MiB of zeros (~100 KiB packed)."""
    return _write_bomb(tmp_path_factory.mktemp("bomb") / "so_bomb.pt2", f"{MODEL}abc.wrapper.so", 100)


@pytest.fixture(scope="module")
def signature_bomb(tmp_path_factory):
    """A signature entry of 80 MiB: refused before it is read into memory."""
    return _write_bomb(tmp_path_factory.mktemp("bomb") / "signature_bomb.pt2", "bomb/aotcuda/signature.json", 80)


@pytest.fixture
def watched_temp(tmp_path, monkeypatch):
    """A private temporary folder for the extraction, to see that nothing is written there."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _written(folder) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)


def test_load_refuses_a_library_bomb_before_writing(so_bomb, watched_temp):
    with pytest.raises(PackageError, match=r"its entry '.*wrapper.so' would inflate from .* MiB to 100.0 MiB "
                                           r".*decompression bomb.*AOTCUDA_MAX_COMPRESSION_RATIO"):
        aotcuda.load(so_bomb)
    assert _written(watched_temp) == 0 and not os.listdir(watched_temp)


def test_signature_bomb_is_refused_before_it_is_read(signature_bomb, watched_temp):
    for read in (aotcuda.load, read_signature, describe_package):
        with pytest.raises(PackageError, match=r"signature.json' is 80.0 MiB, more than the 64 MiB .*"
                                               r"AOTCUDA_MAX_JSON_BYTES"):
            read(signature_bomb)
    assert _written(watched_temp) == 0


@pytest.mark.parametrize("bomb", ["so_bomb", "signature_bomb"])
def test_inspect_refuses_bombs_and_writes_nothing(request, bomb, watched_temp):
    result = CliRunner().invoke(main, ["inspect", request.getfixturevalue(bomb)])
    assert result.exit_code == 1, result.output
    assert "error:" in result.output and ("decompression bomb" in result.output or "MiB" in result.output)
    assert _written(watched_temp) == 0


def test_the_limits_can_be_raised(so_bomb, signature_bomb, watched_temp, monkeypatch):
    # past the ratio limit, the bomb is what it is: a package with a .so that is no library
    with pytest.raises(PackageError, match="cannot open the model library|invalid ELF|not an AOTInductor"):
        aotcuda.load(so_bomb, limits=ArchiveLimits(max_ratio=0))
    monkeypatch.setenv("AOTCUDA_MAX_JSON_BYTES", "0")
    with pytest.raises(PackageError, match="not valid JSON"):
        read_signature(signature_bomb)


def test_the_total_and_entry_count_are_bounded(tmp_path, monkeypatch):
    path = tmp_path / "many.pt2"
    with zipfile.ZipFile(path, "w") as archive:
        for index in range(50):
            archive.writestr(f"{MODEL}part{index}.bin", b"x" * 1000)
    monkeypatch.setenv("AOTCUDA_MAX_ENTRIES", "20")
    with pytest.raises(PackageError, match="has 50 entries, more than the 20 .*AOTCUDA_MAX_ENTRIES"):
        aotcuda.load(path)
    monkeypatch.delenv("AOTCUDA_MAX_ENTRIES")
    with pytest.raises(PackageError, match="would extract to .* GiB, more than the .* limit"):
        aotcuda.load(path, limits=ArchiveLimits(max_extract_bytes=10_000))
    monkeypatch.setenv("AOTCUDA_MAX_EXTRACT_BYTES", "lots")
    with pytest.raises(PackageError, match="AOTCUDA_MAX_EXTRACT_BYTES='lots' is not a number"):
        aotcuda.load(path)


def test_a_real_package_is_far_inside_the_limits(twice_pt2, watched_temp):
    metadata, signature = describe_package(twice_pt2)
    assert metadata["AOTI_DEVICE_KEY"] == "cpu" and signature["inputs"][0]["name"] == "x"
    assert _written(watched_temp) == 0  # describe_package (inspect) extracts nothing
    with zipfile.ZipFile(twice_pt2) as archive:
        infos = archive.infolist()
    worst = max(info.file_size / max(info.compress_size, 1) for info in infos if info.file_size > 1 << 16)
    assert worst < ArchiveLimits().max_ratio / 10
