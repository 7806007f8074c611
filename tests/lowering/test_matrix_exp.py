"""torch.linalg.matrix_exp, real and complex, as generated code (lowering/matrix_exp.py).

Seventh new user (2026-12-07): a statevector step ``psi @ torch.linalg.matrix_exp(-1j * H * t).T`` was refused by
lower(): ``aten::linalg_matrix_exp (proxy executor) ... has no generated code in Inductor and no C shim in this torch
(2.13.0+cpu); rewrite that line of the model with ops that have either``, and a real ``torch.linalg.matrix_exp(A)``
the same: the complex pass's own rule writes the real op on the 2n x 2n embedding, which Inductor cannot compile
either. lower()'s decomposition table now writes the op as ATen's scaling and squaring in matrix products.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.export import Dim

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.matrix_exp import MAX_SQUARINGS, THETA_18, linalg_matrix_exp
from aotcuda.lowering.proxy_ops import proxy_executor_kernels
from aotcuda.passes import ReplaceComplexWithRealPass

aten = torch.ops.aten
WIDER = {torch.float32: torch.float64, torch.complex64: torch.complex128,
         torch.float64: torch.float64, torch.complex128: torch.complex128}
REAL = {torch.float32: torch.float32, torch.complex64: torch.float32,
        torch.float64: torch.float64, torch.complex128: torch.float64}
TOLERANCE = {torch.float32: 1e-5, torch.complex64: 1e-5, torch.float64: 1e-10, torch.complex128: 1e-10}


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual - expected).abs().max() / expected.abs().max()).item()


def random_matrices(dtype, n: int, norm: float, batch=(3,)) -> torch.Tensor:
    """Matrices of about the given 1-norm; past 10 anti-Hermitian ones, whose exponential is unitary (finite)."""
    a = torch.randn(*batch, n, n, dtype=dtype)
    if norm > 10:
        a = (a - a.mH) / 2
    return a * (norm / a.abs().sum(-2).amax(-1).clamp(min=1e-30))[..., None, None]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_the_decomposition_matches_eager_and_is_no_less_accurate(dtype):
    """Up to a 1-norm of 10 (up to 3 squarings) eager's values to the dtype's tolerance; at 1e2 and 1e4 (6 and 12
    squarings), where eager's own rounding grows with the squarings, no further from the exponential computed in
    double precision than eager is."""
    assert aten.linalg_matrix_exp.default in decomposition_table()
    torch.manual_seed(0)
    for n in (1, 2, 3, 5, 8, 16):
        for norm in (0.0, 1e-6, 1e-2, 0.5, 2.0, THETA_18[REAL[dtype]], 10.0):
            a = random_matrices(dtype, n, norm)
            expected, actual = torch.linalg.matrix_exp(a), linalg_matrix_exp(a)
            assert actual.dtype == expected.dtype and actual.shape == expected.shape
            assert relative_error(actual, expected) <= TOLERANCE[dtype], (n, norm)
        for norm in (1e2, 1e4):
            a = random_matrices(dtype, n, norm)
            truth = torch.linalg.matrix_exp(a.to(WIDER[dtype]))
            eager = relative_error(torch.linalg.matrix_exp(a).to(truth.dtype), truth)
            ours = relative_error(linalg_matrix_exp(a).to(truth.dtype), truth)
            assert ours <= max(2 * eager, TOLERANCE[dtype]), (n, norm, ours, eager)


def test_a_norm_past_the_squarings_a_graph_runs_gives_nan_and_a_scalar_matrix_is_exp():
    a = random_matrices(torch.float32, 4, THETA_18[torch.float64] * 2.0 ** (MAX_SQUARINGS[torch.float32] + 2))
    assert linalg_matrix_exp(a).isnan().all()
    x = torch.randn(5, 1, 1)
    assert torch.equal(linalg_matrix_exp(x), torch.linalg.matrix_exp(x))
    assert linalg_matrix_exp(torch.randn(2, 2, dtype=torch.float16)) is NotImplemented  # eager's op, in its words


class QuantumStep(torch.nn.Module):
    """The seventh new user's program: a Hamiltonian's evolution exp(-iHt) of a batch of statevectors, a real
    generator's exponential of a dynamic size beside it, and an orthogonal parametrization (its matrix_exp map)."""

    def __init__(self, qubits: int = 3):
        super().__init__()
        torch.manual_seed(0)
        h = torch.randn(2 ** qubits, 2 ** qubits, dtype=torch.complex64)
        self.register_buffer("hamiltonian", (h + h.mH) / 2)
        self.rotation = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(4, 4), orthogonal_map="matrix_exp")

    def forward(self, psi, t, generator):
        evolved = psi @ torch.linalg.matrix_exp(-1j * self.hamiltonian * t).T
        return evolved, evolved.abs() ** 2, torch.matrix_exp(generator), self.rotation(evolved.real[:, :4])


def quantum_inputs(batch: int, n: int, t: float):
    return (torch.randn(batch, 8, dtype=torch.complex64), torch.tensor(t), torch.randn(2, n, n))


QUANTUM_SHAPES = {"psi": {0: Dim("batch", min=1, max=64)}, "t": None,
                  "generator": {1: Dim("n", min=2, max=16), 2: Dim("n", min=2, max=16)}}


def test_a_program_of_real_and_complex_matrix_exponentials_has_no_proxy_op_and_matches_eager():
    model = QuantumStep().eval()
    ep = torch.export.export(model, quantum_inputs(4, 5, 0.3), dynamic_shapes=QUANTUM_SHAPES, strict=False)
    ep = ReplaceComplexWithRealPass(strict=True)(ep.run_decompositions(decomposition_table()))
    assert not [node for node in ep.graph.nodes if node.target == aten.linalg_matrix_exp.default]
    assert proxy_executor_kernels(ep, "cpu") == []
    for batch, n, t in ((4, 5, 0.3), (7, 9, 2.5), (1, 2, 0.0)):
        inputs = quantum_inputs(batch, n, t)
        pair = (torch.view_as_real(inputs[0]), *inputs[1:])
        for actual, expected in zip(ep.module()(*pair), model(*inputs)):
            if expected.is_complex():
                expected = torch.view_as_real(expected)
            assert relative_error(actual, expected) <= 1e-5, (batch, n, t)


def test_the_quantum_step_lowers_with_no_fallback_kernel_and_runs_as_eager():
    """End to end: before, lower() refused it (the proxy-executor op); now the package runs at several sizes."""
    import aotcuda

    model = QuantumStep().eval()
    lowered = aotcuda.lower(model, quantum_inputs(4, 5, 0.3), dynamic_shapes=QUANTUM_SHAPES, device="cpu")
    assert lowered.fallback_kernels == [] and lowered.runs_in_aotcuda_runtime
    program = lowered.load()
    for batch, n, t in ((4, 5, 0.3), (9, 16, 4.0), (1, 2, 0.0)):
        inputs = quantum_inputs(batch, n, t)
        for actual, expected in zip(program(*inputs), model(*inputs)):
            assert actual.dtype == expected.dtype and actual.shape == expected.shape
            assert relative_error(actual, expected) <= 1e-5 or math.isclose(expected.abs().max().item(), 0.0), (
                batch, n, t)
