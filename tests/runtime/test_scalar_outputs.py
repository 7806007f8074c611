"""Outputs that eager returns as Python numbers (``ids.shape[0]``, ``2 * n + 1``, a constant, a comparison of sizes).

The container returns each as a 0-d CPU tensor (AOTI's scalar_to_tensor_handle). Before, the signature listed
tensor outputs only, so its output count differed from the container's: the Program took the signature for a stale
one and dropped it for checks (index ranges off: an out-of-range token id reached the generated code's own check),
a call returned ``tensor(5)`` where eager returns ``5``, and ``aotcuda inspect`` listed no such output. Now the
signature records them (``"scalar"``, ``"value"``), a call returns eager's numbers (``execute`` the 0-d tensors, the
flat low-level form), and inspect and run list them.
"""

import pytest
import torch
from click.testing import CliRunner

import aotcuda
from aotcuda.cli import main
from runtime_programs import with_edited_signature


class SizesOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 4)

    def forward(self, ids):
        n = ids.shape[0]
        return self.emb(ids) * 2, n, 2 * n + 1, 3, n > 4, None


@pytest.fixture(scope="module")
def sizes_out(tmp_path_factory):
    torch.manual_seed(0)
    module = SizesOut().eval()
    path = tmp_path_factory.mktemp("scalar_outputs") / "sizes.pt2"
    batch = torch.export.Dim("batch", min=2, max=64)
    aotcuda.lower(module, (torch.tensor([1, 2, 3]),), device="cpu", dynamic_shapes={"ids": {0: batch}},
                  package_path=path)
    return str(path), module


def test_a_call_returns_python_numbers_where_eager_does(sizes_out):
    path, module = sizes_out
    program = aotcuda.load(path)
    ids = torch.tensor([0, 5, 7, 15, 2])
    got, expected = program(ids), module(ids)
    assert [type(value) for value in got[1:]] == [int, int, int, bool, type(None)], got
    assert got[1:] == expected[1:] == (5, 11, 3, True, None)
    assert torch.equal(got[0], expected[0])
    flat = program.execute([ids])  # the flat, low-level form: the container's 0-d tensors
    assert [tuple(t.shape) for t in flat[1:5]] == [()] * 4 and flat[1].item() == 5 and flat[5] is None


def test_a_program_with_number_outputs_keeps_its_signature_and_checks(sizes_out):
    path, _ = sizes_out
    program = aotcuda.load(path)
    assert program.output_specs is not None and [s.scalar for s in program.output_specs] == \
        [None, "int", "int", "int", "bool", "none"]
    assert program.output_names == ("out[0]", "out[1]", "out[2]", "out[3]", "out[4]", "out[5]")
    with pytest.raises(aotcuda.InputError, match=r"input 'ids' \(#0\) holds 99 .*outside \[0, 15\]"):
        program(torch.tensor([1, 99, 3]))  # main: the index check was off (the signature was dropped)
    assert program(torch.tensor([1, 2, 3]))[1] == 3


def test_inspect_and_run_list_the_number_outputs(sizes_out, tmp_path):
    path, _ = sizes_out
    shown = CliRunner().invoke(main, ["inspect", path])
    assert shown.exit_code == 0, shown.output
    rows = [line for line in shown.output.splitlines() if line.startswith("│ out[")]
    assert len(rows) == 6, shown.output  # main: out[0] alone
    assert "int (Python number)" in rows[1] and "= batch" in rows[1], rows[1]
    assert "= 2*batch + 1" in rows[2] and "= 3" in rows[3] and "bool (Python number)" in rows[4], rows
    assert "None" in rows[5], rows
    inputs = tmp_path / "in.pt"
    torch.save({"args": (torch.tensor([1, 2, 3, 4, 5]),), "kwargs": {}}, inputs)
    ran = CliRunner().invoke(main, ["run", path, "--inputs", str(inputs)])
    assert ran.exit_code == 0, ran.output
    assert "int = 5" in ran.output and "int = 11" in ran.output and "bool = True" in ran.output, ran.output
    rows = [line for line in ran.output.splitlines() if line.startswith("│ out[")]
    assert [row.split()[1] for row in rows] == [f"out[{index}]" for index in range(6)], ran.output
    assert "None" in rows[5], rows  # main: the None output had no row


def test_caller_outputs_and_serving_of_a_program_with_a_none_output(sizes_out):
    """A None output leaves its caller buffer as it is; serving, whose answer holds one tensor per output, refuses the
    program at its start, naming the output (main: the signature was dropped, and each request's answer failed)."""
    path, module = sizes_out
    program = aotcuda.load(path)
    ids = torch.tensor([0, 5, 7])
    buffers = [torch.empty(3, 4), *(torch.empty((), dtype=t) for t in (torch.int64,) * 3), torch.empty((), dtype=torch.bool),
               torch.zeros((), dtype=torch.bool)]
    program.execute([ids], outputs=buffers)
    assert torch.equal(buffers[0], module(ids)[0]) and buffers[1].item() == 3 and buffers[5].item() is False
    pytest.importorskip("ray")
    from aotcuda.errors import ServingConfigError
    from aotcuda.serving.server import ServeOptions, check_package

    with pytest.raises(ServingConfigError, match=r"output 'out\[5\]' is None at every call"):
        check_package(path, ServeOptions())


def test_a_signature_written_without_the_number_outputs_is_said_at_load(sizes_out, tmp_path):
    """A package lowered before the signature recorded Python-number and None outputs: its signature's counts differ
    from the model's, so the Program does not use it, and went without its index-range checks in silence (main: no
    warning)."""
    path, _ = sizes_out

    def tensor_outputs_only(signature):
        signature["outputs"] = [spec for spec in signature["outputs"] if "scalar" not in spec]

    old = with_edited_signature(path, tmp_path / "old.pt2", tensor_outputs_only)
    with pytest.warns(UserWarning, match=r"lists 1 inputs and 1 outputs, the model takes 1 and returns 6, so the "
                                         r"signature is not used and this Program runs without its index-range checks"):
        program = aotcuda.load(str(old))
    assert program.output_specs is None
