"""``aotcuda inspect`` on hostile strings (issue 12, item 12): names and metadata from a package reach the
terminal escaped, never as ESC sequences, carriage returns or rich markup."""

import json
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
