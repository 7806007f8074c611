"""The range torch.export gives a value read from an input with .item() (lowering/item_ranges.py): recorded in the
signature, checked before the call with the input's name, listed by `aotcuda inspect` (a new user's Llama-2 RoPE
with a tensor start_pos: `Error: Expected u3 <= 126 but received 127` on stderr and an InputError that named
neither start_pos nor why 126)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.export import Dim

import aotcuda
from aotcuda.errors import InputError


class StartPosRope(torch.nn.Module):
    """Llama-2's RoPE slice at a tensor start position (torch._check bounds after .item())."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("freqs", torch.randn(128, 64))

    def forward(self, x, start_pos):
        s = x.shape[1]
        sp = start_pos.item()
        torch._check(sp >= 0)
        torch._check(sp + s <= 128)
        return x * self.freqs[sp: sp + s]


_SHAPES = {"x": {1: Dim("seq", min=1, max=64)}, "start_pos": None}


def test_the_exported_range_of_an_item_read_names_its_input_and_exports_assumption():
    from aotcuda.lowering.item_ranges import item_value_ranges

    ep = torch.export.export(StartPosRope(), (torch.randn(2, 8, 64), torch.tensor(0)), dynamic_shapes=_SHAPES)
    entry, with_sizes = item_value_ranges(ep)["start_pos"]
    assert (entry["min"], entry["max"], entry["item"]) == (0, 126, True)
    assert (with_sizes["min"], with_sizes["max"]) == (None, {"expr": "128 - s27"})
    assert "start_pos.item()" in entry["reason"] and "at least 2" in entry["reason"]
    assert "static at 1" in entry["reason"]


@pytest.fixture(scope="module")
def start_pos_pt2(tmp_path_factory):
    module = StartPosRope().eval()
    path = tmp_path_factory.mktemp("item") / "rope.pt2"
    aotcuda.lower(module, (torch.randn(2, 8, 64), torch.tensor(0)), device="cpu", dynamic_shapes=_SHAPES,
                  package_path=str(path))
    return str(path), module


def test_a_start_pos_outside_exports_range_is_refused_by_name_before_the_run(start_pos_pt2, capfd):
    path, module = start_pos_pt2
    program = aotcuda.load(path)
    for start, seq in ((0, 8), (126, 1), (120, 8), (5, 64 - 5)):
        x = torch.randn(2, seq, 64)
        torch.testing.assert_close(program(x, torch.tensor(start)), module(x, torch.tensor(start)), rtol=0, atol=0)
    capfd.readouterr()
    with pytest.raises(InputError) as refused:
        program(torch.randn(2, 1, 64), torch.tensor(127))  # eager runs it: export took seq >= 2
    message = str(refused.value)
    assert "'start_pos'" in message and "[0, 126]" in message and "at least 2" in message, message
    assert "seq" in message and "u3" not in message and "u0" not in message, message
    assert "Expected" not in capfd.readouterr().err  # the generated code never ran
    with pytest.raises(InputError) as refused:  # the model's own check, at this call's seq = 8
        program(torch.randn(2, 8, 64), torch.tensor(125))
    message = str(refused.value)
    assert "'start_pos'" in message and "[0, 120]" in message and "seq + start_pos.item() <= 128" in message, message
    assert "Expected" not in capfd.readouterr().err
    x = torch.randn(2, 3, 64)
    torch.testing.assert_close(program(x, torch.tensor(7)), module(x, torch.tensor(7)), rtol=0, atol=0)


def test_inspect_lists_the_range_of_an_item_read(start_pos_pt2):
    from click.testing import CliRunner

    from aotcuda.cli import main

    path, _ = start_pos_pt2
    table = CliRunner().invoke(main, ["inspect", path])
    assert table.exit_code == 0, table.output
    assert "value read with .item() checked before every call: start_pos in [0, 126]" in table.output, table.output
    shown = CliRunner().invoke(main, ["inspect", "--json", path])
    entry, with_sizes = [spec for spec in json.loads(shown.output)["signature"]["inputs"]
                         if spec["name"] == "start_pos"][0]["index_ranges"]
    assert (entry["min"], entry["max"], entry["item"]) == (0, 126, True)
    assert "start_pos in [unchecked, 128 - seq]" in table.output, table.output
    assert "took seq as at least 2" in table.output and "s27" not in table.output, table.output
