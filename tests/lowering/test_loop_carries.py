"""A program with a loop is compiled with in-place buffer reuse off (aotcuda.lowering.loop_carries).

AOTInductor's C++ wrapper declared a scan's carried buffer a second time where a kernel after the loop reused it in
place: an S4D layer (a complex scan, then ``ys.transpose(0, 1) + u * D``) failed to compile with "redeclaration of
'AtenTensorOpaque* buf19_handle'". The option tests read the options lower() compiles with (no compile); one test
lowers the S4D layer and runs the package against eager.
"""

from __future__ import annotations

import math

import torch
from torch._higher_order_ops.map import map as loop_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

import aotcuda
from aotcuda.lowering.devices import DEVICE_PROFILES
from aotcuda.lowering.pipeline import package_inductor_configs
from comparisons import Forward

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


class S4D(torch.nn.Module):
    """A diagonal state-space layer (S4D) run as a recurrence: complex state, complex parameters."""

    def __init__(self, d: int = 4, n: int = 8):
        super().__init__()
        self.log_dt = torch.nn.Parameter(torch.rand(d) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        self.C = torch.nn.Parameter(torch.randn(d, n, dtype=torch.cfloat))
        self.log_A_real = torch.nn.Parameter(torch.log(0.5 * torch.ones(d, n)))
        self.A_imag = torch.nn.Parameter(math.pi * torch.arange(n).float().repeat(d, 1))
        self.D = torch.nn.Parameter(torch.randn(d))

    def forward(self, u):  # (batch, length, d)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag
        dA = torch.exp(A * torch.exp(self.log_dt)[:, None])
        dB = (dA - 1) / A
        C = self.C

        def step(h, x_t):
            h = dA * h + dB * x_t[..., None]
            return h, (h * C).sum(-1).real * 2

        h0 = torch.zeros(u.shape[0], *dA.shape, dtype=torch.cfloat)
        _, ys = scan(step, h0, u.transpose(0, 1))
        return ys.transpose(0, 1) + u * self.D


def _scanned(x):
    _, ys = scan(lambda h, x_t: (h * 0.5 + x_t, h * 2), torch.zeros(x.shape[1]), x)
    return ys + 1


def _mapped(x):
    return loop_map(lambda row: row * 2, x) + 1


def _looped(x):
    return while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 0.5), (torch.zeros((), dtype=torch.int64), x))[1] + 1


def _in_a_branch(x):
    return torch.cond(x.sum() > 0, _scanned, lambda x: x + 1, (x,))


def _program(function):
    return torch.export.export(Forward(function), (torch.randn(5, 4),)).run_decompositions()


def test_a_program_with_a_loop_is_compiled_without_in_place_reuse_on_every_device():
    for function in (_scanned, _mapped, _looped, _in_a_branch):
        ep = _program(function)
        for device in (CPU, CUDA):
            configs = package_inductor_configs(device, DEVICE_PROFILES[device.type].inductor_configs, None, ep)
            assert configs["inplace_buffers"] is False, (function.__name__, device)
            assert {k: v for k, v in configs.items() if k != "inplace_buffers"} == \
                DEVICE_PROFILES[device.type].inductor_configs


def test_a_program_without_a_loop_keeps_torchs_default_and_the_callers_option_wins():
    no_loop = _program(lambda x: x * 2 + 1)
    assert "inplace_buffers" not in package_inductor_configs(CPU, {}, None, no_loop)
    assert "inplace_buffers" not in package_inductor_configs(CUDA, {}, None, no_loop)
    assert package_inductor_configs(CPU, {}, {"inplace_buffers": True}, _program(_scanned)) == {"inplace_buffers": True}


def test_an_s4d_layers_complex_scan_lowers_and_matches_eager(tmp_path):
    torch.manual_seed(0)
    model = S4D().requires_grad_(False)
    lowered = aotcuda.lower(model, (torch.randn(2, 10, 4),), device="cpu", package_path=tmp_path / "s4d.pt2")
    program = lowered.load()
    for _ in range(2):
        u = torch.randn(2, 10, 4)
        torch.testing.assert_close(program(u), model(u), rtol=1e-5, atol=1e-5)
