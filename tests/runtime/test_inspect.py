"""``aotcuda inspect`` on hostile strings (issue 12, item 12): names and metadata from a package reach the
terminal escaped, never as ESC sequences, carriage returns or rich markup."""

import json
import re
import zipfile

import pytest
from click.testing import CliRunner

from aotcuda.cli import main, terminal_safe
from runtime_programs import with_edited_signature

HOSTILE = "x\x1b[2J\x1b]0;pwned\x07\r[bold red]BOOM[/bold red]\u202e"


def _hostile_copy(source, target, name="out"):
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("aotcuda/signature.json"):
                signature = json.loads(data)
                signature["outputs"][0]["name"] = name  # a name holding one is refused as the signature is read
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
    # an output's name holding them: refused as load refuses it (names42), the refusal escaped
    result = CliRunner().invoke(main, ["inspect", _hostile_copy(twice_pt2, tmp_path / "named.pt2", name=HOSTILE)],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 1 and "outputs[0] name holds 'x\\x1b[2J" in result.output, result.output
    assert "\x1b" not in result.output and "\r" not in result.output and "\u202e" not in result.output


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
    with zipfile.ZipFile(twice_pt2) as archive:  # the genuine source's size is the compiler's and the ISA's
        total = sum(i.file_size for i in archive.infolist() if i.filename.endswith(".wrapper.cpp")) + 4 * 5 * (1 << 20)
    message = f"5 wrapper.cpp entries) are {total / (1 << 20):.1f} MiB together, more than the 8 MiB"
    assert result.exit_code == 1 and message in " ".join(result.output.split()), result.output


def test_op_tables_are_read_within_a_bound_together(twice_pt2, tmp_path, monkeypatch):
    """Each model folder's op table (``<hash>.wrapper.json``) was bounded alone (max_json_bytes, ratio-checked from 1
    MiB): 200 model folders added, each with an empty wrapper.cpp and a table of 1 MiB of ``{}`` (packed to 1 KiB),
    held inspect 53 s parsing them, one after another (a 2.4 MB package). Now they are bounded together too, refused
    before any is read."""
    monkeypatch.setenv("AOTCUDA_MAX_JSON_BYTES", str(1 << 20))
    table = ('{"nodes":[' + ",".join(["{}"] * (1 << 17)) + "]}").encode()  # 768 KiB: not ratio-checked
    extra = [entry for i in range(3) for entry in ((f"twice/data/aotinductor/m{i}/w.wrapper.cpp", b"", True),
                                                  (f"twice/data/aotinductor/m{i}/w.wrapper.json", table, True))]
    path = _copy_with(twice_pt2, tmp_path / "tables.pt2", extra=extra)
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    message = (f"the op tables of its generated sources (3 wrapper.json entries) are {3 * len(table) / (1 << 20):.1f} "
               "MiB together, more than the 1 MiB that are read")
    assert result.exit_code == 1 and message in " ".join(result.output.split()), result.output


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
            signature["inputs"][0]["name"] = "x" * 1024  # the longest a name may be (MAX_TENSOR_NAME_CHARS)
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


# --- review 9: markup, emoji, entry names and file names -------------------------------------------------


def test_no_package_string_is_read_as_markup_or_emoji_on_any_inspect_line(twice_pt2, tmp_path):
    """Found by a breaker (review 9): the unbounded-size line printed repr(shown(name)), whose doubled backslash
    let a rich tag through: an output named 'out[/]' made inspect fail (MarkupError), '[link=...]' made a live
    link; and ':lock:' in a name was drawn as an emoji."""
    name = "out[/][link=https://evil.example/]click[/link]:lock:"

    def edit(entry, data):
        if not entry.endswith("aotcuda/signature.json"):
            return data
        signature = json.loads(data)
        signature["inputs"][0]["name"] = "x :white_check_mark: signed"
        signature["outputs"][0]["name"] = name
        signature["outputs"][0]["shape"][0] = {"expr": "u0", "min": 1, "max": None}
        return json.dumps(signature).encode()

    path = _copy_with(twice_pt2, tmp_path / "markup.pt2", edit)
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert f"unbounded data-dependent size: output {name!r} dim 0" in result.output  # as text, tags and all
    assert ":white_check_mark:" in result.output and "\u2705" not in result.output and "\U0001f512" not in result.output


@pytest.mark.parametrize("folder", ["model\nhint: this package is verified", "model\x1b[2J", "model\u202egnp"])
def test_an_entry_name_with_a_control_or_format_character_is_refused(twice_pt2, tmp_path, folder):
    """Found by a breaker (review 9): model folder names, the metadata file's and the library's names reached
    error messages as they were, so a newline in one printed a line of the package's choosing ('hint: ...')."""
    from aotcuda.errors import PackageError
    from aotcuda.runtime.program import load

    model = _model_folder(twice_pt2)
    renamed = model.replace("/model/", f"/{folder}/") if "/model/" in model else model[:-1] + folder + "/"

    def copy(source, target):
        with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
            for info in zin.infolist():
                zout.writestr(info.filename.replace(model, renamed), zin.read(info))
        return str(target)

    path = copy(twice_pt2, tmp_path / "named.pt2")
    with pytest.raises(PackageError, match="an entry whose name has a control or format character") as refused:
        load(path)
    assert "\n" not in str(refused.value) and "\x1b" not in str(refused.value) and "\u202e" not in str(refused.value)
    result = CliRunner().invoke(main, ["inspect", path])
    assert result.exit_code == 1 and "control or format character" in result.output
    assert "\nhint: this package is verified" not in result.output


def test_run_shows_a_package_file_name_as_text(twice_pt2, tmp_path):
    """Found by a breaker (review 9): `aotcuda run` titled its table with the package's file name, markup on and
    control characters kept: a file named 'a\\x1b[2J...' cleared the screen, '[link=...]' made a live link."""
    import shutil

    import torch

    path = tmp_path / "a\x1b[2J[link=https:evil.example]b.pt2"
    shutil.copy(twice_pt2, path)
    torch.save({"args": (torch.randn(3, 4),), "kwargs": {}}, tmp_path / "inputs.pt")
    result = CliRunner().invoke(main, ["run", str(path), "--inputs", str(tmp_path / "inputs.pt")],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert "outputs of" in result.output and "a\\x1b[2J[link=https:evil.example]b.pt2" in result.output


def test_inspect_of_a_package_without_a_signature_says_so_on_one_line(twice_pt2, tmp_path):
    """A new user inspected a package torch's aoti_compile_and_package wrote: the line that says it has no aotcuda
    signature was wrapped at 80 columns ("inputs/outputs" / "unknown"), where every other line of inspect is whole
    whatever the terminal's width (a log or a grep gets whole lines)."""
    target = tmp_path / "plain.pt2"
    with zipfile.ZipFile(twice_pt2) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("aotcuda/signature.json"):
                zout.writestr(info, zin.read(info))
    result = CliRunner().invoke(main, ["inspect", str(target)], env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.output
    assert f"{target}: device cpu\n" in result.output, result.output
    assert "no aotcuda signature entry (not written by aotcuda.lower): inputs/outputs unknown\n" in result.output, \
        result.output


def test_inspect_lists_the_inputs_and_state_a_call_writes_in_place(stateful_pt2, twice_pt2):
    """``cache += x`` writes the caller's tensor at every call: inspect said nothing of it (main: only the buffers,
    as state), though the signature marks the input "mutated"."""
    shown = CliRunner().invoke(main, ["inspect", stateful_pt2])
    assert shown.exit_code == 0, shown.output
    assert "inputs written in place at every call: cache (" in shown.output, shown.output
    assert "state written at every call: step0, step1, small, large, strided" in shown.output, shown.output
    plain = CliRunner().invoke(main, ["inspect", twice_pt2])
    assert plain.exit_code == 0 and "written" not in plain.output, plain.output


def test_inspect_says_the_likely_cause_of_norm_statistics_written(twice_pt2, tmp_path):
    """A new user (2026-12-06, second): inspect listed a BatchNorm's running_mean/var as "state written at every
    call", with no word of a BatchNorm left in training mode (call model.eval() before lowering)."""
    state = ["stem.1.running_mean", "stem.1.running_var", "stem.1.num_batches_tracked"]
    path = with_edited_signature(twice_pt2, tmp_path / "norm.pt2", lambda signature: signature.update(
        state_written=state))
    shown = CliRunner().invoke(main, ["inspect", str(path)])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "state written at every call: stem.1.running_mean, stem.1.running_var, stem.1.num_batches_tracked (the " \
           "state written is a norm's running statistics: likely a BatchNorm left in training mode" in text, text
    assert "model.eval() before lowering" in text, text


@pytest.mark.parametrize("inputs", [7, 1.5, True])
def test_inspect_of_a_signature_whose_inputs_are_a_number_warns_and_shows_the_rest(twice_pt2, tmp_path, inputs):
    """main: `error: TypeError: 'int' object is not iterable` (the unchecked-index line iterated the field as it was)."""
    path = with_edited_signature(twice_pt2, tmp_path / "inputs_number.pt2",
                                 lambda signature: signature.update(inputs=inputs))
    shown = CliRunner().invoke(main, ["inspect", str(path)])
    assert shown.exit_code == 0 and "TypeError: inputs is" in shown.output and "aotcuda.load refuses" in shown.output, \
        shown.output
    assert "out[0]" in shown.output and "fallback kernels: 0" in shown.output, shown.output


@pytest.mark.parametrize("columns", ["0", "10"])
def test_a_narrow_or_zero_columns_never_drops_what_inspect_and_errors_say(twice_pt2, tmp_path, columns):
    """rich draws at the width COLUMNS says: COLUMNS=0 in aotcuda's environment made inspect print nothing (exit 0),
    and an error (a damaged package) exit 1 with no line at all; COLUMNS=10 drew the inputs and outputs tables with
    every cell empty. The consoles now draw at least 40 columns wide (cli.MIN_WIDTH). In a process of its own: the
    consoles are made as the CLI is imported."""
    import os
    import subprocess
    import sys

    (tmp_path / "damaged.pt2").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    env = {**os.environ, "COLUMNS": columns, "PYTHONPATH": os.pathsep.join(sys.path)}
    said = [subprocess.run([sys.executable, "-m", "aotcuda", "inspect", path], env=env, capture_output=True,
                           text=True, timeout=120) for path in (twice_pt2, str(tmp_path / "damaged.pt2"))]
    assert said[0].returncode == 0, said[0].stderr
    for text in ("device cpu", "name", "float32", "batch", "out[2]", "generated kernels: 1"):
        assert text in said[0].stdout, said[0].stdout
    assert said[1].returncode == 1 and "error: " in said[1].stderr and "is damaged or incomplete" in said[1].stderr, \
        said[1].stderr


def test_a_stdout_whose_encoding_lacks_a_character_gets_its_escape(twice_pt2):
    """With PYTHONIOENCODING=ascii (or a Latin-1 locale), `aotcuda inspect` of any package with a dynamic dim ended
    with `error: UnicodeEncodeError: 'ascii' codec can't encode character '\\u2208'` after its first line, no table
    (a name of the package's that is not ASCII did the same): the character is now written as its escape, as Python
    writes it to stderr."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "aotcuda", "inspect", twice_pt2], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "UnicodeEncodeError" not in done.stderr, done.stderr
    assert "batch\\u2208[2, 64]" in done.stdout and "generated kernels: 1" in done.stdout, done.stdout


@pytest.mark.parametrize("name", ["#\u00b2", "#" + "1" * 1000, "#\u0660"],
                         ids=["superscript two", "1000 digits", "arabic-indic zero"])
def test_inspect_of_a_constant_named_by_digits_int_cannot_read_shows_the_name(twice_pt2, tmp_path, name):
    """A constant_inputs name of "#N" is shown as forward's N-th argument name; str.isdigit() is true of '²' and of
    5,000 digits (and '٠', which int() reads as 0): main ended inspect in `error: ValueError: invalid literal for int()`
    (or `Exceeds the limit (4300 digits)`) after the outputs' table, printing nothing of the rest. A name of 5,000
    digits is now refused at load (names are at most 1,024 characters); 1,000 digits, a position int() reads but far
    past any argument count, is shown as the name."""
    path = with_edited_signature(twice_pt2, tmp_path / "constant_name.pt2", lambda signature: signature.update(
        constant_inputs=[{"leaf": 0, "value": 1, "name": name}]))
    shown = CliRunner().invoke(main, ["inspect", str(path)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert "fallback kernels: 0" in shown.output, shown.output
    line = next(line for line in shown.output.splitlines() if line.startswith("arguments fixed at lowering"))
    assert f"{name[:20]}" in line and "x=1" not in line, line


def test_inspect_json_writes_numbers_json_has_not_as_strings(twice_pt2, tmp_path):
    """A constant of float('inf') or a NaN in a signature: main wrote them as json.dumps does, Infinity and NaN, which
    no strict JSON reader takes (jq: "Invalid numeric literal"; here json.loads with parse_constant refusing them)."""
    path = with_edited_signature(twice_pt2, tmp_path / "non_finite.pt2", lambda signature: signature.update(
        constant_inputs=[{"leaf": 0, "value": float("inf"), "name": "'eps'"},
                         {"leaf": 1, "value": float("-inf"), "name": "'low'"},
                         {"leaf": 2, "value": float("nan"), "name": "'fill'"}]))
    shown = CliRunner().invoke(main, ["inspect", "--json", str(path)])
    assert shown.exit_code == 0, shown.output

    def refuse(constant):
        raise ValueError(f"{constant} is no JSON number")

    report = json.loads(shown.output, parse_constant=refuse)
    constants = report["signature"]["constant_inputs"]
    assert [entry["value"] for entry in constants] == ["inf", "-inf", "nan"], constants
