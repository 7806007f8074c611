"""``aotcuda inspect`` on hostile strings (issue 12, item 12): names and metadata from a package reach the
terminal escaped, never as ESC sequences, carriage returns or rich markup."""

import json
import re
import zipfile

import pytest
from click.testing import CliRunner

from aotcuda.cli import main, terminal_safe

HOSTILE = "x\x1b[2J\x1b]0;pwned\x07\r[bold red]BOOM[/bold red]\u202e"


def _hostile_copy(source, target):
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("aotcuda/signature.json"):
                signature = json.loads(data)
                signature["inputs"][0]["name"] = HOSTILE
                signature["outputs"][0]["dtype"] = HOSTILE
                data = json.dumps(signature).encode()
            if info.filename.endswith("wrapper_metadata.json"):
                metadata = json.loads(data)
                metadata["AOTI_DEVICE_KEY"] = "cpu" + HOSTILE
                data = json.dumps(metadata).encode()
            zout.writestr(info, data)
    return str(target)


@pytest.mark.parametrize("text, shown", [("\x1b[31m", "\\x1b[31m"), ("a\rb", "a\\rb"), ("\u202e", "\\u202e"),
                                         ("tab\there", "tab\\there"), ("s77∈[2, ∞]", "s77∈[2, ∞]")])
def test_terminal_safe_escapes_control_and_format_characters(text, shown):
    assert terminal_safe(text) == shown


def test_inspect_escapes_package_strings(twice_pt2, tmp_path):
    path = _hostile_copy(twice_pt2, tmp_path / "hostile.pt2")
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\r" not in result.output and "\u202e" not in result.output
    assert "\\x1b[2J" in result.output and "[bold red]BOOM" in result.output  # shown, as text


# --- what inspect reads of the generated sources, and how much it prints (issue 26 review) ----------------


def _copy_with(source, target, edit=None, extra=()):
    """A copy of a package: ``edit(name, data)`` gives each entry's new bytes; ``extra``: (name, bytes, deflate)."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, edit(info.filename, data) if edit else data)
        for name, data, deflate in extra:
            zout.writestr(name, data, zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED)
    return str(target)


def _model_folder(package) -> str:
    with zipfile.ZipFile(package) as archive:
        return next(n for n in archive.namelist() if n.endswith(".wrapper.so")).rsplit("/", 1)[0] + "/"


def test_a_source_crafted_against_the_kernel_scan_is_read_in_linear_time(twice_pt2, tmp_path):
    """"Source Nodes: [" repeated without a "]": the node-list pattern ([^\\]]*) scanned from each occurrence to
    the end of the text, twice per inspect (120 KB: 3.4 s; these 3 MB: about an hour)."""
    import time

    hostile = ("Source Nodes: [" * 200_000).encode()
    path = _copy_with(twice_pt2, tmp_path / "slow.pt2",
                      lambda name, data: hostile if name.endswith(".wrapper.cpp") else data)
    started = time.monotonic()
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 30


def test_generated_sources_are_read_within_the_archive_limits(twice_pt2, tmp_path, monkeypatch):
    """inspect read every *.wrapper.cpp of the archive, each up to max_source_bytes, and held them all: a few
    KiB of package made it read and keep any multiple of the limit. Now only those in a model's folder are
    read (each within the ratio limit, as load extracts it), and together within max_source_bytes, refused
    before any is read."""
    monkeypatch.setenv("AOTCUDA_MAX_SOURCE_BYTES", str(8 << 20))
    folder = _model_folder(twice_pt2)
    extra = [(f"{folder}extra{i}.wrapper.cpp", b"// x\n" * (1 << 20), True) for i in range(4)]  # 4 x 5 MiB
    path = _copy_with(twice_pt2, tmp_path / "sources.pt2", extra=extra)
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    message = r"5 wrapper.cpp entries\) are 20.\d MiB together, more than the 8 MiB"
    assert result.exit_code == 1 and re.search(message, " ".join(result.output.split())), result.output


def test_a_source_outside_the_model_folders_is_not_read(twice_pt2, tmp_path):
    """Load extracts (and checks) the model's folder only; inspect read a wrapper.cpp anywhere in the archive."""
    path = _copy_with(twice_pt2, tmp_path / "elsewhere.pt2",
                      extra=[("twice/elsewhere/x.wrapper.cpp", b"aoti_torch_cpu_evil_op(a, b);\n", False)])
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 0 and "evil_op" not in result.output, result.output


def test_inspect_output_is_bounded_whatever_the_package_lists(twice_pt2, tmp_path):
    """A signature of 5,000 outputs and inputs with 5,000 unchecked-index lines, and a source calling 5,000
    kernels: inspect printed every one (200,000 outputs: 106 s and 12 MB). Now 50 rows of each, and a count."""
    def edit(name, data):
        if name.endswith("signature.json"):
            signature = json.loads(data)
            signature["outputs"] = signature["outputs"][:1] * 5000
            signature["inputs"][0]["index_unchecked"] = ["reaches aten.index at model.py:1 " * 10] * 5000
            signature["inputs"][0]["name"] = "x" * 100_000
            return json.dumps(signature).encode()
        if name.endswith(".wrapper.cpp"):
            return data + "".join(f"aoti_torch_cpu_op{i}(a);\n" for i in range(5000)).encode()
        return data

    path = _copy_with(twice_pt2, tmp_path / "long.pt2", edit)
    # 2.5 MiB of signature: past AOTCUDA_MAX_SIGNATURE_BYTES, lifted here, as this is about what is printed
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "200", "AOTCUDA_MAX_SIGNATURE_BYTES": "0"})
    assert result.exit_code == 0, result.output
    assert len(result.output) < 30_000, len(result.output)
    assert "... and 4950 more" in result.output and "fallback kernels: 5000" in result.output, result.output
