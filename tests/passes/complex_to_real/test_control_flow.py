"""torch.cond, while_loop, scan and map whose subgraphs read or write complex values, against eager.

Every subgraph is rewritten with the same rules as the program; the op's operands and results that are
complex in eager become pairs. One program is lowered with aotcuda.lower(device="cpu") and run through
aotcuda.load (one AOTInductor compile, shared by the tests that use it).
"""

import pytest
import torch
from torch._higher_order_ops import scan, while_loop
from functorch.experimental.control_flow import map as control_flow_map

import aotcuda

from .helpers import assert_matches, ops_in, pair, rewrite

higher_order = torch.ops.higher_order


class CondBothBranchesComplex(torch.nn.Module):
    """cond on the sign of a real input; both branches do complex math on a complex operand computed
    outside the cond, on a real operand and on a complex buffer; one complex and one real result."""

    def __init__(self, dtype=torch.complex64):
        super().__init__()
        self.register_buffer("weight", torch.randn(4, dtype=dtype))

    def forward(self, x, y):
        z = torch.view_as_complex(x) * (1 + 0.5j)

        def true_branch(z, y, w):
            return (z * w + y).exp(), z.abs()

        def false_branch(z, y, w):
            return z.conj() * 2 - y / w, (z * z).imag * 1.0

        a, b = torch.cond(y.sum() > 0, true_branch, false_branch, (z, y, self.weight))
        return torch.view_as_real(a), b


class NestedCond(torch.nn.Module):
    """A cond inside a cond branch, each level with complex math."""

    def forward(self, x, y):
        z = torch.view_as_complex(x)

        def inner_true(z):
            return z * 1j

        def inner_false(z):
            return z.conj() + 1

        def outer_true(z, y):
            return torch.cond(y.mean() > 0.5, inner_true, inner_false, (z * z,))

        def outer_false(z, y):
            return z - y

        return torch.view_as_real(torch.cond(y.sum() > 0, outer_true, outer_false, (z, y)))


class ComplexWhileLoop(torch.nn.Module):
    """n steps of z ← z · (0.9 + 0.1j) + c, with n a program input."""

    def forward(self, x, n):
        z = torch.view_as_complex(x)

        def keep_going(i, z):
            return i < n.sum()

        def step(i, z):
            return i + 1, z * (0.9 + 0.1j) + z.abs()

        _, z = while_loop(keep_going, step, (torch.zeros((), dtype=torch.int64), z))
        return torch.view_as_real(z)


class ComplexScan(torch.nn.Module):
    """A complex linear recurrence (the state-space layer shape): h ← h · a_t + 1j, with |h_t| stacked."""

    def forward(self, x):
        a = torch.view_as_complex(x)

        def combine(h, a_t):
            h = h * a_t + 1j
            return h, h.abs()

        h, magnitudes = scan(combine, a[0], a)
        return torch.view_as_real(h), magnitudes


class ComplexMap(torch.nn.Module):
    def forward(self, x):
        z = torch.view_as_complex(x)
        return torch.view_as_real(control_flow_map(lambda row: row * row.conj() + row, z))


def _check(module, make_args, op, dtype=torch.float32, calls=2):
    """Rewrite `module` exported at make_args(), then compare with eager on `calls` fresh inputs."""
    _, new = rewrite(module, make_args(), expect_ops=[op])
    assert op in ops_in(new)
    for _ in range(calls):
        args = make_args()
        assert_matches(module(*args), new.module()(*args), dtype)
    return new


def _signed(shape, dtype=torch.float32):
    """Random inputs whose sum is positive or negative with equal chance: both branches get taken."""
    return lambda: torch.randn(shape, dtype=dtype).abs() * (1 if torch.rand(()) > 0.5 else -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cond_both_branches_against_eager(dtype):
    module = CondBothBranchesComplex({torch.float32: torch.complex64, torch.float64: torch.complex128}[dtype])
    y = _signed(4, dtype)
    _, new = rewrite(module, (pair(4, dtype=dtype), y()), expect_ops=[higher_order.cond])
    for sign in (1, -1):  # each branch, explicitly
        x, y_ = pair(4, dtype=dtype), y().abs() * sign
        assert_matches(module(x, y_), new.module()(x, y_), dtype)


def test_cond_subgraphs_have_no_complex_value():
    _, new = rewrite(CondBothBranchesComplex(), (pair(4), torch.randn(4)))
    subgraphs = [m for name, m in new.graph_module.named_modules() if name]
    assert len(subgraphs) == 2
    for gm in subgraphs:
        for node in gm.graph.nodes:
            val = node.meta.get("val")
            assert not (isinstance(val, torch.Tensor) and val.dtype.is_complex), f"{node.name} is complex"
    cond = next(n for n in new.graph.nodes if n.target is higher_order.cond)
    assert [tuple(v.shape) for v in cond.meta["val"]] == [(4, 2), (4,)]


def test_nested_cond_against_eager():
    module = NestedCond()
    y = _signed(3)
    new = _check(module, lambda: (pair(3), y()), higher_order.cond, calls=6)
    nested = [m for name, m in new.graph_module.named_modules() if name.count(".") == 1]
    assert nested, "the inner cond's branches should be nested submodules"


def test_while_loop_against_eager():
    _check(ComplexWhileLoop(), lambda: (pair(4), torch.randint(0, 6, (1,))), higher_order.while_loop)


def test_scan_against_eager():
    _check(ComplexScan(), lambda: (pair(6, 3),), higher_order.scan)


def test_map_against_eager():
    _check(ComplexMap(), lambda: (pair(5, 3),), higher_order.map_impl)


class CondAndScan(torch.nn.Module):
    """The cond and the scan programs in one, so that one AOTInductor compile serves both lowered tests."""

    def __init__(self):
        super().__init__()
        self.cond, self.scan = CondBothBranchesComplex(), ComplexScan()

    def forward(self, x, y, a):
        return (*self.cond(x, y), *self.scan(a))


@pytest.fixture(scope="module")
def lowered_cond(tmp_path_factory):
    """lower(device="cpu") + load() of CondAndScan. On torch 2.11 the scan's stacked outputs failed to
    compile (InductorError: AssertionError in codegen_while_loop) until aotcuda.lowering.torch_fixes."""
    module = CondAndScan()
    path = tmp_path_factory.mktemp("cond") / "cond.pt2"
    lowered = aotcuda.lower(module, (pair(4), torch.randn(4), pair(6, 3)), device="cpu", package_path=path)
    return module, aotcuda.load(lowered.package_path)


@pytest.mark.slow
@pytest.mark.parametrize("sign", [1, -1])
def test_cond_lowered_and_loaded_matches_eager(lowered_cond, sign):
    module, program = lowered_cond
    x, y, a = pair(4), torch.randn(4).abs() * sign, pair(6, 3)
    assert_matches(module(x, y, a)[:2], program(x, y, a)[:2], torch.float32)


@pytest.mark.slow
def test_scan_with_a_complex_carry_lowered_and_loaded_matches_eager(lowered_cond):
    module, program = lowered_cond
    for _ in range(2):
        x, y, a = pair(4), torch.randn(4), pair(6, 3)
        assert_matches(module(x, y, a)[2:], program(x, y, a)[2:], torch.float32)
