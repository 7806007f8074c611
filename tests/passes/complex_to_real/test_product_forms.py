"""The complex product (pair_algebra.mul_pairs, its one measured form) on each kind of factor.

Checked against eager on fresh random inputs: a constant factor (a read-only buffer sliced, the RoPE
pattern, used twice), two inputs, state the program writes, and a table sliced to a dynamic length. The
product stores nothing: no constant is lifted. The other forms of the A/B (benchmarks/scripts/
pair_mul_forms.py, whose ``--check`` runs these modules through each) are not part of the product.
ExportedProgram level: no compile.
"""

import copy

import torch
from torch.export import Dim
from torch.export.graph_signature import InputKind

from aotcuda.passes import ReplaceComplexWithRealPass

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
    """x · y, both inputs."""

    def forward(self, x, y):
        return torch.view_as_real(torch.view_as_complex(x) * torch.view_as_complex(y))


class WrittenFactor(torch.nn.Module):
    """x · state where the program writes state: its value changes between calls."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", _table())

    def forward(self, x):
        self.state.mul_(self.state)
        return torch.view_as_real(torch.view_as_complex(x) * self.state[: x.shape[1]].view(1, x.shape[1], 1, HALF))


def x_like(seq=SEQ):
    return torch.randn(2, seq, 3, HALF, 2)


def lifted(ep) -> int:
    return sum(spec.kind == InputKind.CONSTANT_TENSOR for spec in ep.graph_signature.input_specs)


def _rewrite(ep):
    rewritten = ReplaceComplexWithRealPass(strict=True)(ep)
    assert lifted(rewritten) == lifted(ep) == 0  # the product keeps the program's state as it is
    return rewritten


def test_the_product_of_a_constant_factor_and_of_two_inputs():
    constant = ConstantFactor()
    new, x = _rewrite(export(constant, (x_like(),))), x_like()
    for got, want in zip(new.module()(x), constant(x)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)

    inputs = InputFactor()
    new, x, y = _rewrite(export(inputs, (x_like(), x_like()))), x_like(), x_like()
    torch.testing.assert_close(new.module()(x, y), inputs(x, y), rtol=1e-5, atol=1e-5)


def test_the_product_of_written_state_and_of_a_dynamic_slice():
    model = WrittenFactor()
    module, x = _rewrite(export(copy.deepcopy(model), (x_like(),))).module(), x_like()
    for _ in range(3):  # each call sees the state the one before wrote
        torch.testing.assert_close(module(x), model(x), rtol=1e-5, atol=1e-5)

    model = ConstantFactor()  # the table sliced to a dynamic length
    new = _rewrite(export(model, (x_like(),), ({1: Dim("s", min=2, max=SEQ)},)))
    x = x_like(seq=7)
    for got, want in zip(new.module()(x), model(x)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
