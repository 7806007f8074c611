"""0-d tensor constants reach Inductor as full([], value) nodes (aotcuda.lowering.scalar_constants).

Inductor holds a 0-d constant as a number its view lowerings cannot take: a tensor built element by element in
forward (a Hilbert transform's mask, ``h[0] = 1; h[1:n // 2] = 2``) failed to compile with "'Constant' object has
no attribute 'data'". The unit tests work on ExportedPrograms and stop Inductor after its lowering (no C++
compile): each program fails there before the rewrite, lowers after it, and its values are eager's. One test
lowers the Hilbert transform (fft, the mask, ifft; complex) through aotcuda.lower and runs the package.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from torch._higher_order_ops.scan import scan
from torch.export import Dim
from torch.nn.attention.flex_attention import flex_attention

import aotcuda
from aotcuda.lowering.pipeline import before_compile
from aotcuda.lowering.scalar_constants import scalar_constants_as_full
from comparisons import Forward


class _Lowered(Exception):
    """Raised in place of Inductor's code generation: its lowering of the graph ended without an error."""


def _inductor_lowering_error(ep) -> str | None:
    """None when Inductor lowers ``ep``'s graph (stopped before code generation), else its error's first line."""
    import torch._inductor.graph as inductor_graph

    def stop(*args, **kwargs):
        raise _Lowered

    with mock.patch.object(inductor_graph.GraphLowering, "codegen_with_cpp_wrapper", stop), \
            mock.patch.object(inductor_graph.GraphLowering, "codegen", stop):
        try:
            torch._inductor.aoti_compile_and_package(ep)
        except Exception as error:  # noqa: BLE001 - the lowering's error is the result
            cause = error
            while cause is not None and not isinstance(cause, _Lowered):
                cause = cause.__cause__ or cause.__context__
            return None if cause is not None else (str(error).splitlines() or [repr(error)])[0]
    return None


def _mask_elements(x):
    h = torch.zeros(16)
    h[0] = 1
    h[1:8] = 2
    h[8] = 1
    return x * h


def _mask_2d(x):
    h = torch.zeros(4, 16)
    h[0, 1] = 3
    h[:, 5] = -2
    h[2, 7:11] = 0.5
    h[3] = float("inf")
    return x[:, None, :] * h[None, :3] + h[3].isinf()


def _int_mask(x):
    h = torch.zeros(16, dtype=torch.int64)
    h[3] = 7
    h[-1] = -5
    return x * h


def _bool_mask(x):
    h = torch.ones(16, dtype=torch.bool)
    h[3] = False
    h[10:12] = False
    return torch.where(h, x, -x)


def _expanded_number(x):
    return x + torch.tensor(1.5).expand(16)


def _float64_mask(x):
    h = torch.zeros(16, dtype=torch.float64)
    h[2] = 1 / 3
    h[4] = -0.0
    return x.double() * h + 1 / h[4]


FAILING = {"elements": _mask_elements, "2-d": _mask_2d, "int64": _int_mask, "bool": _bool_mask,
           "expand of a number": _expanded_number, "float64": _float64_mask}


def _exported(function):
    model = Forward(function)
    ep = torch.export.export(model, (torch.randn(3, 16),), dynamic_shapes=(({0: Dim("b")},),))
    return ep.run_decompositions()


@pytest.mark.parametrize("case", list(FAILING))
def test_a_tensor_built_from_constants_lowers_in_inductor_and_keeps_eagers_values(case):
    function = FAILING[case]
    ep = _exported(function)
    assert _inductor_lowering_error(ep) is not None, "Inductor lowers it without the rewrite: not a case of the bug"
    rewritten = scalar_constants_as_full(ep)
    assert _inductor_lowering_error(rewritten) is None
    assert not [s for s in rewritten.graph_signature.input_specs if s.kind.name == "CONSTANT_TENSOR"]
    for batch in (2, 5):
        x = torch.randn(batch, 16)
        want, got = function(x), rewritten.module()(x)
        assert got.dtype == want.dtype and torch.equal(got, want), case  # the same numbers, exactly
    assert _inductor_lowering_error(ep) is not None, "the program passed in was changed"


def test_numbers_used_elementwise_keep_their_values_and_other_programs_are_returned_as_they_are():
    def elementwise(x):
        return torch.where(x > 0, torch.tensor(2.5), x) * torch.tensor(3, dtype=torch.int32)

    ep = _exported(elementwise)
    rewritten = scalar_constants_as_full(ep)
    assert rewritten is not ep
    x = torch.randn(4, 16)
    assert torch.equal(rewritten.module()(x), elementwise(x))

    no_scalar = _exported(lambda x: x * torch.arange(16.0) + torch.tensor([1.0, 2.0]).repeat(8))
    assert scalar_constants_as_full(no_scalar) is no_scalar


class _HeldScalars(torch.nn.Module):
    """0-d weights read through views: a buffer expanded, a non-persistent one written into a mask, a parameter
    (requiring grad, as a module given to lower() holds it) unsqueezed and expanded."""

    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.tensor(1.5))
        self.register_buffer("peak", torch.tensor(-3.0), persistent=False)
        self.gain = torch.nn.Parameter(torch.tensor(0.75))

    def forward(self, x):
        h = torch.zeros(16)
        h[2] = self.peak
        return x * h + self.shift.expand(16) + self.gain.unsqueeze(0).expand(16)


def test_zero_dim_parameters_and_buffers_not_written_lower_and_keep_their_values():
    """Found by break-new 35 (2026-12-07): Inductor makes a number of a 0-d parameter or buffer as of a 0-d constant,
    and the rewrite left them: ``x + self.shift.expand(16)`` of a 0-d buffer ended in "ndim mismatch", a mask
    element set from one in "'Constant' object has no attribute 'data'"."""
    model = _HeldScalars()
    ep = torch.export.export(model, (torch.randn(3, 16),), dynamic_shapes=({0: Dim("b")},)).run_decompositions()
    assert _inductor_lowering_error(ep) is not None, "Inductor lowers it without the rewrite: not a case of the bug"
    rewritten = scalar_constants_as_full(ep)
    assert _inductor_lowering_error(rewritten) is None
    assert [s.kind.name for s in rewritten.graph_signature.input_specs] == ["USER_INPUT"]
    assert not rewritten.state_dict and not rewritten.constants
    for batch in (2, 5):
        x = torch.randn(batch, 16)
        with torch.no_grad():
            want = model(x)
        assert torch.equal(rewritten.module()(x), want)
    assert len(ep.state_dict) == 2 and len(ep.constants) == 1, "the program passed in was changed"


class _CountFromABuffer(torch.nn.Module):
    """A 0-d integer buffer read as a number (``.item()``), the columns it counts kept."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.tensor(3))

    def forward(self, x):
        count = self.count.item()
        torch._check(count >= 0)
        torch._check(count <= 4)
        return x[:, :count] * 2 + count


def test_a_zero_dim_buffer_read_as_a_number_lowers_and_keeps_its_value():
    """Found with the test above: Inductor's ``_local_scalar_dense`` of the number it made of a 0-d buffer ended in
    "LoweringException: AssertionError: <class 'torch._inductor.ir.Constant'>"."""
    model = _CountFromABuffer()
    program = before_compile(model, (torch.randn(2, 4),)).program
    assert _inductor_lowering_error(program) is None
    for _ in range(2):
        x = torch.randn(2, 4)
        assert torch.equal(program.module()(x), model(x))


def test_a_written_buffer_or_parameter_and_complex_constants_are_left_as_they_are():
    class Counted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.tensor(0.0))
            self.steps = torch.nn.Parameter(torch.tensor(1.0), requires_grad=False)

        def forward(self, x):
            self.count.add_(1)
            self.steps.add_(1)  # a parameter written (PARAMETER_MUTATION): made a node, the program was invalid
            return torch.view_as_real(x * self.count * self.steps + torch.tensor(1j))

    ep = torch.export.export(Counted(), (torch.randn(3, 16),)).run_decompositions()
    assert scalar_constants_as_full(ep) is ep


def _constants_in_branches(x):
    return torch.cond(x.sum() > 0, lambda x: x * torch.tensor(3.0), lambda x: x + torch.tensor(2.0).expand(16), (x,))


def _mask_in_a_scan_body(x):
    def step(h, x_t):
        k = torch.zeros(16)
        k[2] = 5
        return h * 0.5 + x_t * k, h + torch.tensor(-1.5).expand(16)

    return scan(step, torch.zeros(16), x)[1]


def _vectors_in_branches(x):
    signs = torch.tensor([1.0, -0.0, 2.5, float("inf")] * 4)  # -0.0 and inf kept as they are
    return torch.cond(x.sum() > 0, lambda x: x * signs, lambda x: x[:, torch.tensor([0, 2, 2, 15] * 4)] - 1, (x,))


def _coefficients_in_a_scan_body(x):
    def step(h, x_t):
        decay = torch.tensor([0.5, 0.25, 0.125, 1.0]).repeat(4)
        mask = torch.tensor([[True] * 8 + [False] * 8])
        return h * decay + x_t, torch.where(mask[0], h, -h)

    return scan(step, torch.zeros(16), x)[1]


@pytest.mark.parametrize("function", [_constants_in_branches, _mask_in_a_scan_body, _vectors_in_branches,
                                      _coefficients_in_a_scan_body], ids=["cond", "scan", "cond-vectors", "scan-vectors"])
def test_constants_a_subgraph_reads_lower_and_keep_their_values(function):
    """Found by break-new 35 (2026-12-07): torch.export leaves a constant inside a cond branch or a scan body a get_attr
    of the subgraph, which the rewrite of lifted constants does not see, and run_decompositions ended in "Attempting
    to use FunctionalTensor on its own" before it. Each 0-d one is a full node of its subgraph; since session 36 a
    larger one (coefficients, an index list, a mask) is built of one full per run of equal values."""
    program = before_compile(Forward(function), (torch.randn(3, 16),)).program
    assert _inductor_lowering_error(program) is None
    for x in (torch.randn(3, 16).abs(), -torch.randn(3, 16).abs()):  # both branches
        actual, expected = program.module()(x), function(x)
        assert torch.equal(actual, expected) and torch.equal(actual.signbit(), expected.signbit())


def _ramp_in_a_branch(x):  # made inside the branch: a constant of the branch's subgraph, of 300 runs
    return torch.cond(x.sum() > 0, lambda x: x * torch.tensor([float(i) for i in range(300)])[:16], lambda x: x + 1,
                      (x,))


def _table_in_a_loop_body(x):
    def body(i, h):
        return i + 1, h * torch.tensor([float(i % 7) - 3 for i in range(300)])[:16]

    return torch._higher_order_ops.while_loop(lambda i, h: i < 3, body, (torch.tensor(0), x))[1]


def _table_in_a_scan_body(x):
    def step(h, x_t):
        table = torch.tensor([float(i % 5) for i in range(300)])
        return h * 0.5 + x_t * table[:16].clone(), h.clone()

    return scan(step, torch.zeros(16), x)[1]


def _ramp_in_a_nested_branch(x):
    def outer(x):
        return torch.cond(x.mean() > 0, lambda x: x * torch.tensor([float(i) for i in range(300)])[:16],
                          lambda x: x - 1, (x,))

    return torch.cond(x.sum() > 0, outer, lambda x: x + 1, (x,))


@pytest.mark.parametrize("function", [_ramp_in_a_branch, _table_in_a_loop_body, _table_in_a_scan_body,
                                      _ramp_in_a_nested_branch], ids=["cond", "while_loop", "scan", "nested-cond"])
def test_a_constant_of_too_many_runs_in_a_subgraph_is_passed_in_as_an_operand(function):
    """break-new 35's open item (2026-12-07): a constant of more than 256 runs made inside a subgraph was left, and
    run_decompositions ended in torch's "Attempting to use FunctionalTensor on its own" (with a note asking the user
    to pass it in as an operand). It is a constant input of the program now, passed down as a last operand to the
    subgraph that reads it (through each level of a nested one), and keeps eager's values."""
    program = before_compile(Forward(function), (torch.randn(3, 16),)).program
    lifted = [spec for spec in program.graph_signature.input_specs if spec.kind.name == "CONSTANT_TENSOR"]
    assert len(lifted) == 1 and program.constants[lifted[0].target].shape == (300,)
    assert _inductor_lowering_error(program) is None
    for x in (torch.randn(3, 16).abs(), -torch.randn(3, 16).abs(), torch.randn(3, 16)):  # each branch
        assert torch.equal(program.module()(x), function(x))


def _bias_table_in_a_score_mod(q):
    def score_mod(score, b, h, q_idx, kv_idx):  # a bias by key position, its table made inside: 300 values
        return score + torch.tensor([float(k % 7) - 3 for k in range(300)])[kv_idx]

    return flex_attention(q, q, q, score_mod=score_mod)


def test_a_constant_of_too_many_runs_in_a_flex_attention_score_mod_is_passed_in_as_an_other_buffer():
    """fix38 (2026-12-07): a table made inside a flex_attention score_mod is a get_attr of that subgraph, as in a cond
    branch, but flex_attention was not among the ops whose operands the lowering knows: run_decompositions ended in
    torch's "Attempting to use FunctionalTensor on its own", with the note to make it outside. It is now a constant
    input passed in as the last of score_mod_other_buffers (score_mod's last placeholder), and keeps eager's values."""
    x = torch.randn(1, 2, 16, 16)
    program = before_compile(Forward(_bias_table_in_a_score_mod), (x,)).program
    lifted = [spec for spec in program.graph_signature.input_specs if spec.kind.name == "CONSTANT_TENSOR"]
    assert [program.constants[spec.target].shape for spec in lifted] == [(300,)]
    assert _inductor_lowering_error(program) is None
    for x in (torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16) * 10):
        torch.testing.assert_close(program.module()(x), _bias_table_in_a_score_mod(x), rtol=1e-5, atol=1e-5)


def test_a_subgraph_constant_that_cannot_be_passed_in_gets_torchs_error_with_its_cause_and_fix(monkeypatch):
    """Where the op that calls the subgraph is not one whose operands the lowering knows (here: none is), the constant
    is left, and torch's error gets the note naming it and the fix."""
    from aotcuda.lowering import subgraph_constants

    monkeypatch.setattr(subgraph_constants, "_OPERANDS", {})
    with pytest.raises(RuntimeError, match="FunctionalTensor on its own") as caught:
        before_compile(Forward(_ramp_in_a_branch), (torch.randn(3, 16),))
    note = " ".join(getattr(caught.value, "__notes__", []))
    assert "the (300,) float32 constant that the subgraph" in note and "pass it in as an operand" in note


def test_a_program_with_a_large_constant_in_a_branch_lowers_and_matches_eager(tmp_path):
    """The reproducer of break-new 35's row, through the compile, the package and a call."""
    lowered = aotcuda.lower(Forward(_ramp_in_a_branch), (torch.randn(3, 16),), device="cpu",
                            package_path=tmp_path / "ramp.pt2")
    program = lowered.load()
    for x in (torch.randn(3, 16).abs(), -torch.randn(3, 16).abs()):
        torch.testing.assert_close(program(x), _ramp_in_a_branch(x), rtol=1e-6, atol=1e-6)


class Hilbert(torch.nn.Module):
    """The analytic signal of x (scipy.signal.hilbert's mask), the mask made in forward element by element."""

    def forward(self, x):
        n = x.shape[-1]
        h = torch.zeros(n)
        h[0] = 1
        h[1:n // 2] = 2
        h[n // 2] = 1
        return torch.fft.ifft(torch.fft.fft(x) * h)


def test_lower_gives_inductor_a_hilbert_transform_it_lowers():
    program = before_compile(Hilbert(), (torch.randn(3, 32),), None, {"x": {0: Dim("batch")}}).program
    assert _inductor_lowering_error(program) is None


def test_a_hilbert_transform_lowers_and_matches_eager(tmp_path):
    lowered = aotcuda.lower(Hilbert(), (torch.randn(3, 32),), dynamic_shapes={"x": {0: Dim("batch", max=64)}},
                            device="cpu", package_path=tmp_path / "hilbert.pt2")
    program = lowered.load()
    for batch in (1, 3, 7):
        x = torch.randn(batch, 32)
        want = Hilbert()(x)
        got = program(x)
        got = torch.view_as_complex(got) if not got.is_complex() else got
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got.real, x, rtol=1e-5, atol=1e-5)  # the analytic signal's real part is x


def test_a_large_constant_in_a_subgraph_is_judged_by_its_runs_without_a_list_of_its_values():
    """Review (2026-12-07): a 10M-element table read inside a branch was made a Python list (790 MB) before its runs
    were counted. Its runs are counted by torch now; -0.0 and 0.0 are two runs, as are a value and nan."""
    import tracemalloc

    from aotcuda.lowering.scalar_constants import MAX_SUBGRAPH_CONSTANT_RUNS, _rebuilt, _too_many_runs

    table = torch.arange(2_000_000, dtype=torch.float32)
    tracemalloc.start()
    try:
        assert _rebuilt(torch.fx.Graph(), table) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak} bytes of Python objects for a constant left as it is"
    runs = MAX_SUBGRAPH_CONSTANT_RUNS
    alternating = torch.tensor([0.0, -0.0] * (runs // 2 + 1))
    assert _too_many_runs(alternating) and not _too_many_runs(torch.zeros(10 * runs))
    assert _too_many_runs(torch.tensor([1.0, float("nan")] * runs))
