"""The forms of the complex product (AOTCUDA_PAIR_MUL) and the folding of constant factors' tables.

Every form computes the same product (checked against eager on fresh random inputs for each kind of
factor); ``fold`` stores the tables of a factor that depends only on constants as program constants and
leaves every other factor (an input, a buffer the program writes, a table sliced to a dynamic length)
as ``flip`` does. ExportedProgram level: no compile.
"""

import copy

import pytest
import torch
from torch.export import Dim
from torch.export.graph_signature import InputKind

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.product_tables import FORMS, PAIR_MUL_VARIABLE, FoldConstantProductTablesPass

from .helpers import export

SEQ, HALF = 12, 4


def _table() -> torch.Tensor:
    angles = torch.outer(torch.arange(SEQ, dtype=torch.float32), torch.rand(HALF) + 0.1)
    return torch.polar(torch.ones_like(angles), angles)


class ConstantFactor(torch.nn.Module):
    """x · table[:s] (a buffer, read only), the RoPE pattern; and x · the same table a second time."""

    def __init__(self):
        super().__init__()
        self.register_buffer("freqs", _table(), persistent=False)

    def forward(self, x):
        z = torch.view_as_complex(x)
        f = self.freqs[: x.shape[1]].view(1, x.shape[1], 1, HALF)
        return torch.view_as_real(z * f), torch.view_as_real(f * z)


class InputFactor(torch.nn.Module):
    """x · y, both inputs: nothing to fold."""

    def forward(self, x, y):
        return torch.view_as_real(torch.view_as_complex(x) * torch.view_as_complex(y))


class WrittenFactor(torch.nn.Module):
    """x · state where the program writes state: its value changes between calls, never folded."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", _table())

    def forward(self, x):
        self.state.mul_(self.state)
        return torch.view_as_real(torch.view_as_complex(x) * self.state[: x.shape[1]].view(1, x.shape[1], 1, HALF))


def _x(seq=SEQ):
    return torch.randn(2, seq, 3, HALF, 2)


def _lifted(ep) -> int:
    return sum(spec.kind == InputKind.CONSTANT_TENSOR for spec in ep.graph_signature.input_specs)


def _rewrite(ep, form, monkeypatch):
    """The complex pass and the folding pass, as lowering runs them."""
    monkeypatch.setenv(PAIR_MUL_VARIABLE, form)
    rewritten = ReplaceComplexWithRealPass(strict=True)(ep)
    assert _lifted(rewritten) == _lifted(ep)  # the complex pass keeps the state as it is; folding adds
    return FoldConstantProductTablesPass()(rewritten)


@pytest.fixture(scope="module")
def exported():
    """Each module and its ExportedProgram, exported once for every form."""
    constant, inputs = ConstantFactor(), InputFactor()
    return constant, export(constant, (_x(),)), inputs, export(inputs, (_x(), _x()))


@pytest.mark.parametrize("form", FORMS)
def test_every_form_computes_the_product_of_each_kind_of_factor(form, exported, monkeypatch):
    constant, constant_ep, inputs, inputs_ep = exported
    new = _rewrite(constant_ep, form, monkeypatch)
    x = _x()
    for got, want in zip(new.module()(x), constant(x)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # fold: the table's two factors (one pair of tables for both products) are constants; others: none
    assert _lifted(new) == (2 if form == "fold" else 0)

    new = _rewrite(inputs_ep, form, monkeypatch)
    x, y = _x(), _x()
    torch.testing.assert_close(new.module()(x, y), inputs(x, y), rtol=1e-5, atol=1e-5)
    assert _lifted(new) == 0


def test_fold_leaves_written_buffers_and_dynamic_slices_alone(monkeypatch):
    model = WrittenFactor()
    new = _rewrite(export(copy.deepcopy(model), (_x(),)), "fold", monkeypatch)
    assert _lifted(new) == 0
    module, x = new.module(), _x()
    for _ in range(3):  # each call sees the state the one before wrote
        torch.testing.assert_close(module(x), model(x), rtol=1e-5, atol=1e-5)

    model = ConstantFactor()  # the table sliced to a dynamic length: computed per call, still right
    ep = export(model, (_x(),), ({1: Dim("s", min=2, max=SEQ)},))
    new = _rewrite(ep, "fold", monkeypatch)
    x = _x(seq=7)
    for got, want in zip(new.module()(x), model(x)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_an_unknown_form_is_refused_naming_the_choices(exported, monkeypatch):
    ep = exported[3]
    with pytest.raises(ValueError, match="AOTCUDA_PAIR_MUL='fast'.*fold, flip, flip-cat, unbind"):
        _rewrite(ep, "fast", monkeypatch)
