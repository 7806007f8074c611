"""Whole-tensor writes into buffers keep copy_'s cast and broadcast (aotcuda.lowering.whole_tensor_writes).

Without the conversion, run_decompositions (torch 2.11 and 2.13) replaces a buffer written whole by the
written value: dtype and shape silently become the value's. Each case: the returned values and the
buffer's state after the call match eager exactly, over two calls on fresh inputs; the same program
without the conversion does not (so each case is one the bug reaches). Then lower() itself, stopped
before its compile step, hands the compiler a program that matches eager. ExportedProgram level: no
AOTInductor compile.
"""

from __future__ import annotations

import copy

import pytest
import torch

import aotcuda.lowering.pipeline
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.whole_tensor_writes import convert_whole_tensor_writes


class WritesItsBuffer(torch.nn.Module):
    """A float32 [4] buffer written by `write`, then read."""

    def __init__(self, write):
        super().__init__()
        self.register_buffer("r", torch.zeros(4))
        self.write = write

    def forward(self, x):
        self.write(self.r, x)
        return self.r, self.r * 2 + 1


CASES = {
    "float64 value": (lambda r, x: r.copy_(x), lambda: torch.randn(4, dtype=torch.float64)),
    "int64 value": (lambda r, x: r.copy_(x), lambda: torch.randint(-9, 9, (4,))),
    "broadcast value": (lambda r, x: r.copy_(x), lambda: torch.randn(1)),
    "broadcast float64 value": (lambda r, x: r.copy_(x), lambda: torch.randn(1, dtype=torch.float64)),
    "fill_ with a 0-dim tensor": (lambda r, x: r.fill_(x[0]), lambda: torch.randn(3, dtype=torch.float64)),
}


def _decomposed(model, x, convert: bool):
    ep = torch.export.export(model, (x,))
    if convert:
        convert_whole_tensor_writes(ep)
    return ep.run_decompositions(decomposition_table()).module()


def _same(got, want) -> bool:
    return all(g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("case", list(CASES))
def test_buffer_written_whole_matches_eager(case):
    write, make = CASES[case]
    eager = WritesItsBuffer(write)
    module = _decomposed(copy.deepcopy(eager), make(), convert=True)
    for _ in range(2):
        x = make()
        assert _same(module(x), eager(x)), case
        assert module.r.dtype == eager.r.dtype and torch.equal(module.r, eager.r), case


@pytest.mark.parametrize("case", list(CASES))
def test_without_the_conversion_torch_drops_the_cast(case):
    """The bug this module works around. If a torch fixes it upstream this fails: then the conversion
    (a no-op on such a torch's result) can go, with this test."""
    write, make = CASES[case]
    eager, x = WritesItsBuffer(write), make()
    module = _decomposed(copy.deepcopy(eager), x, convert=False)
    assert not _same(module(x), eager(x)), case


def test_matching_writes_and_view_writes_are_left_alone():
    def writes(r, x):
        r.copy_(x)  # same dtype and shape: nothing to convert
        r[1:3].copy_(x[:2] * 2)  # a view's write keeps its cast already (aten.copy)

    ep = torch.export.export(WritesItsBuffer(writes), (torch.randn(4),))
    assert convert_whole_tensor_writes(ep) == 0


def test_a_dynamic_batch_writes_the_buffer_with_its_shape():
    class WritesFirstRow(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("r", torch.zeros(8))

        def forward(self, x):
            self.r.copy_(x[0])  # [1] float64 into [8] float32
            return self.r * 2 + x.sum(0)

    eager = WritesFirstRow()
    ep = torch.export.export(copy.deepcopy(eager), (torch.randn(3, 1, dtype=torch.float64),),
                             dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert convert_whole_tensor_writes(ep) == 1
    module = ep.run_decompositions(decomposition_table()).module()
    for batch in (2, 5):
        x = torch.randn(batch, 1, dtype=torch.float64)
        assert _same([module(x)], [eager(x)]), batch


class _Compiled(Exception):
    pass


def test_lower_hands_the_compiler_a_program_that_matches_eager(monkeypatch, tmp_path):
    """lower()'s own steps up to the compile: the program it would compile returns what eager does."""
    seen = {}

    def compile_stops(ep, path, configs, *more):
        seen["ep"] = ep
        raise _Compiled

    monkeypatch.setattr(aotcuda.lowering.pipeline, "_compile", compile_stops)
    eager = WritesItsBuffer(CASES["broadcast float64 value"][0])
    x = torch.randn(1, dtype=torch.float64)
    with pytest.raises(_Compiled):
        aotcuda.lowering.lower(copy.deepcopy(eager), (x,), device="cpu", package_path=str(tmp_path / "w.pt2"))
    module = seen["ep"].module()
    x = torch.randn(1, dtype=torch.float64)
    assert _same(module(x), eager(x))
