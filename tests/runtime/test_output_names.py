"""Output names in packages (reusing the session's compiled packages): new packages name each output by its
place in forward's result, as ``aotcuda inspect`` and ``aotcuda run`` show it; a package written when the
signature held FX node names (``mul``, ``add``) still loads, runs and inspects."""

import json
import zipfile

import torch
from click.testing import CliRunner

from aotcuda.cli import main
from aotcuda.runtime.package import read_signature
from aotcuda.runtime.program import load


def _table_names(output: str, title: str) -> list[str]:
    """The first column of the rich table titled ``title`` in a CliRunner output."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    rows = []
    for line in lines[start + 4:]:
        if not line.startswith("│"):
            break
        rows.append(line.split("│")[1].strip())
    return rows


def test_inspect_and_run_name_outputs_by_their_place_in_the_result(structured_pt2, tmp_path):
    path, module = structured_pt2
    expected = ["out['h']", "out['pair'][0]", "out['pair'][1]"]
    with load(path) as program:
        assert [spec.name for spec in program.output_specs] == expected
    runner = CliRunner()
    result = runner.invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert _table_names(result.output, "outputs") == expected
    torch.save({"args": (torch.randn(5, 4),), "kwargs": {"extra": {"scale": torch.randn(5, 3)}, "use_cache": False}},
               tmp_path / "inputs.pt")
    result = runner.invoke(main, ["run", path, "--inputs", str(tmp_path / "inputs.pt")], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert _table_names(result.output, "outputs of structured.pt2") == expected


def _with_node_names(source, target, names):
    """A copy of the package whose signature names its outputs as packages did before: by FX node."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("aotcuda/signature.json"):
                signature = json.loads(data)
                for spec, name in zip(signature["outputs"], names, strict=True):
                    spec["name"] = name
                data = json.dumps(signature).encode()
            zout.writestr(info, data)
    return str(target)


def test_a_package_with_fx_node_output_names_still_loads_runs_and_inspects(twice_pt2, tmp_path):
    assert [spec["name"] for spec in read_signature(twice_pt2)["outputs"]] == ["out[0]", "out[1]", "out[2]"]
    old = _with_node_names(twice_pt2, tmp_path / "old.pt2", ["mul", "add", "mul"])
    x = torch.randn(5, 4)
    with load(old) as program:
        assert [spec.name for spec in program.output_specs] == ["mul", "add", "mul"]
        first, second, third = program(x)
    torch.testing.assert_close(first, x * 2, rtol=1e-6, atol=0)
    torch.testing.assert_close(second, x + 1, rtol=1e-6, atol=0)
    assert third.data_ptr() == first.data_ptr()  # one handle in two slots, still released once
    result = CliRunner().invoke(main, ["inspect", old], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert _table_names(result.output, "outputs") == ["mul", "add", "mul"]


def test_program_names_are_those_of_its_specs(twice_pt2, twice_unsigned_pt2):
    """input_names / output_names (the order execute and bind take and give) read as input_specs and
    output_specs do, not as the container's arg0_1 / output0; without a signature they are the container's."""
    with load(twice_pt2) as program:
        assert program.input_names == tuple(spec.name for spec in program.input_specs) == ("x",)
        assert program.output_names == tuple(spec.name for spec in program.output_specs) \
            == ("out[0]", "out[1]", "out[2]")
        assert program._input_names != ["x"]  # the container's own, kept for the checks
    with load(twice_unsigned_pt2) as program:
        assert program.input_names == tuple(program._container.input_names())
        assert program.output_names == tuple(program._container.output_names())
