"""The aotcuda command, through click's CliRunner; inspect and run reuse the session's demo package."""

import pytest
import torch
from click.testing import CliRunner

from aotcuda.cli import dynamic_shapes_from, main
from lowered_demo import lowered_demo


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


class Scale(torch.nn.Module):
    """Small enough to compile in seconds: a linear layer and a complex rotation."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x, angle):
        z = torch.view_as_complex(self.linear(x).reshape(*x.shape[:-1], 4, 2))
        rotated = z * torch.polar(torch.ones_like(angle), angle)
        return torch.view_as_real(rotated).flatten(-2), angle * 2


def scale_factory():
    torch.manual_seed(0)
    return Scale(), (torch.randn(3, 8), torch.randn(3, 4))


@pytest.fixture(scope="module")
def demo():
    return lowered_demo()


@pytest.fixture
def runner():
    return CliRunner()


def test_inspect_lists_signature_and_kernels(demo, runner):
    lowered, _, _ = demo
    result = runner.invoke(main, ["inspect", lowered.package_path])
    assert result.exit_code == 0, result.output
    assert "device cpu" in result.output
    assert "fallback kernels: 0" in result.output
    assert "_scaled_dot_product_flash_attention_for_cpu" in result.output
    assert "float32" in result.output and "[2, 128]" in result.output  # the dynamic seq range


def test_run_saves_outputs_that_match_eager(demo, runner, tmp_path):
    lowered, model, x = demo
    fresh = torch.randn(2, 9, x.shape[-1])
    torch.save({"args": (fresh,), "kwargs": {}}, tmp_path / "inputs.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt"),
                                  "--save-outputs", str(tmp_path / "outputs.pt")])
    assert result.exit_code == 0, result.output
    assert "(2, 9, 256)" in result.output and "float32" in result.output
    with torch.no_grad():
        expected = model(fresh)
    assert relative_error(torch.load(tmp_path / "outputs.pt"), expected) < 1e-5


def test_run_with_bad_inputs_is_one_clean_line(demo, runner, tmp_path):
    lowered, _, _ = demo
    torch.save(torch.randn(2, 9, 7), tmp_path / "bad.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "bad.pt")])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_run_refuses_cuda_graphs_on_cpu(demo, runner, tmp_path):
    lowered, _, x = demo
    torch.save((x,), tmp_path / "inputs.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt"), "--cuda-graphs"])
    assert result.exit_code == 1 and "cuda_graphs" in result.output and "Traceback" not in result.output


def test_lower_then_run_a_factory_with_a_dynamic_dim(runner, tmp_path):
    package, inputs = tmp_path / "scale.pt2", tmp_path / "inputs.pt"
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(package), "--device", "cpu",
                                  "--dynamic", "x:0:1:64:batch", "--dynamic", "angle:0:1:64:batch",
                                  "--save-inputs", str(inputs)])
    assert result.exit_code == 0, result.output
    assert "0 fallback kernels" in result.output
    model, _ = scale_factory()
    fresh = (torch.randn(11, 8), torch.randn(11, 4))
    torch.save({"args": fresh, "kwargs": {}}, inputs)
    result = runner.invoke(main, ["run", str(package), "--inputs", str(inputs), "--save-outputs", str(tmp_path / "o.pt")])
    assert result.exit_code == 0, result.output
    for actual, expected in zip(torch.load(tmp_path / "o.pt"), model(*fresh)):
        assert relative_error(actual, expected) < 1e-5


@pytest.mark.parametrize("spec, expected", [
    ("no_colon", "MODULE:FACTORY"),
    ("aotcuda.models.attention:nope", "no callable 'nope'"),
    ("missing_file.py:f", "no such file"),
])
def test_lower_bad_factory_spec(runner, tmp_path, spec, expected):
    result = runner.invoke(main, ["lower", spec, "-o", str(tmp_path / "m.pt2"), "--device", "cpu"])
    assert result.exit_code != 0 and expected in result.output and "Traceback" not in result.output


def test_dynamic_option_parsing():
    model, args = scale_factory()
    shapes = dynamic_shapes_from(("x:0:1:64:batch", "angle:0:1:64:batch", "x:1:2:8"), model, args, {})
    assert shapes["x"][0] is shapes["angle"][0]
    assert shapes["x"][0].min == 1 and shapes["x"][0].max == 64
    assert shapes["x"][1].__name__ == "x_1"
    assert dynamic_shapes_from((), model, args, {}) is None
    with pytest.raises(Exception, match="no argument 'y'"):
        dynamic_shapes_from(("y:0:1:4",), model, args, {})
    with pytest.raises(Exception, match="NAME:DIM:MIN:MAX"):
        dynamic_shapes_from(("x:0:1",), model, args, {})


def test_demo_on_cpu_end_to_end(runner):
    result = runner.invoke(main, ["demo", "--device", "cpu", "--calls", "5", "--seq", "16"])
    assert result.exit_code == 0, result.output
    output = result.output
    assert "relative error vs eager" in output
    assert "fallback kernels" in output and "│ fallback kernels" in output
    fallback_row = next(line for line in output.splitlines() if "fallback kernels" in line)
    assert fallback_row.split("│")[2].strip() == "0"
    for step in ("export", "decompose", "passes", "compile"):
        assert f"lowering: {step}" in output
    assert "latency per call, aotcuda" in output and "latency per call, eager" in output
