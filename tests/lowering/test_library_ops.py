"""Custom ops of model libraries (lowering/library_ops.py) and the refusal before compiling of ops AOTInductor
would run through its proxy executor (lowering/proxy_ops.py)."""

from __future__ import annotations

import pytest
import torch

import aotcuda
from aotcuda.errors import MissingFallbackKernelsError
from aotcuda.lowering.library_ops import custom_ops_in, grouped_mm
from aotcuda.lowering.pipeline import _decomposed
from aotcuda.lowering.proxy_ops import proxy_executor_kernels


@torch.library.custom_op("aotcuda_test::scaled_softplus", mutates_args=())
def scaled_softplus(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.nn.functional.softplus(x) * scale


@scaled_softplus.register_fake
def _(x, scale):
    return torch.empty_like(x)


@torch.library.custom_op("aotcuda_test::rows_up_to_first_negative", mutates_args=())
def rows_up_to_first_negative(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for i, value in enumerate(x[:, 0].tolist()):  # Python control flow on tensor values: not traceable
        if value < 0:
            break
        out[i] = x[i]
    return out


@rows_up_to_first_negative.register_fake
def _(x):
    return torch.empty_like(x)


torch.library.define("aotcuda_test::native_double", "(Tensor x) -> Tensor")
torch.library.impl("aotcuda_test::native_double", "CompositeExplicitAutograd")(lambda x: x * 2)
torch.library.register_fake("aotcuda_test::native_double")(lambda x: torch.empty_like(x))


class Calls(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(torch.tanh(x)) + 1


def test_grouped_mm_rule_matches_transformers_loop():
    """Groups of 3, 0 (empty), 4 and 1 rows and 2 rows past the last group (zero in transformers' loop)."""
    moe = pytest.importorskip("transformers.integrations.moe")
    torch.manual_seed(0)
    x, weight = torch.randn(10, 8), torch.randn(4, 8, 5)
    offs = torch.tensor([3, 3, 7, 8])
    expected = moe._grouped_mm_fallback(x, weight, offs)
    torch.testing.assert_close(grouped_mm(x, weight, offs), expected, rtol=1e-5, atol=1e-6)
    assert (expected[8:] == 0).all()


def test_a_plain_torch_custom_op_is_traced_through():
    model = Calls(lambda t: scaled_softplus(t, 0.5))
    x = torch.randn(3, 4)
    ep, untraced = _decomposed(torch.export.export(model, (x,), strict=False))
    assert untraced == {} and custom_ops_in(ep) == [] and proxy_executor_kernels(ep) == []
    fresh = torch.randn(3, 4)
    torch.testing.assert_close(ep.module()(fresh), model(fresh))


def _refused_before_compiling(model, x) -> str:
    steps = []
    with pytest.raises(MissingFallbackKernelsError) as caught:
        aotcuda.lower(model, (x,), device="cpu", progress=lambda step, seconds: steps.append(step))
    assert "compile" not in steps, steps
    return str(caught.value)


def test_a_custom_op_whose_implementation_does_not_trace_is_refused_before_compiling():
    message = _refused_before_compiling(Calls(rows_up_to_first_negative), torch.randn(4, 3))
    assert "before compiling" in message and "aotcuda_test::rows_up_to_first_negative (proxy executor)" in message
    assert "could not trace" in message and "test_library_ops.py" in message  # the user's line
    assert message.count("allow_fallbacks=True") == 1  # not the hint: only what it would do


def test_a_custom_op_without_an_implementation_is_refused_before_compiling_with_the_c_shim_hint():
    message = _refused_before_compiling(Calls(torch.ops.aotcuda_test.native_double), torch.randn(4, 3))
    assert "aotcuda_test::native_double (proxy executor)" in message
    assert "custom_ops_to_c_shims" in message


@torch.library.custom_op("aotcuda_test::triton_scale", mutates_args=())
def triton_scale(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@triton_scale.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_triton_op_is_kept_for_cuda_and_refused_before_compiling_elsewhere(monkeypatch):
    # A Triton op (torch.library.triton_op) is known by torch's registry of them; AOTInductor compiles its
    # kernels for CUDA, so it is neither traced through nor a proxy-executor call there. This op stands in
    # for one (Triton itself need not be installed): it is entered in the registry as triton_op does.
    from torch._library import triton

    monkeypatch.setitem(triton.triton_ops_to_kernels, "aotcuda_test::triton_scale", [])
    ep, untraced = _decomposed(torch.export.export(Calls(triton_scale), (torch.randn(3, 4),), strict=False))
    assert untraced == {} and custom_ops_in(ep) == [torch.ops.aotcuda_test.triton_scale.default]
    assert proxy_executor_kernels(ep, "cuda") == []
    assert [k.op for k in proxy_executor_kernels(ep, "cpu")] == ["aotcuda_test::triton_scale"]
    message = _refused_before_compiling(Calls(triton_scale), torch.randn(3, 4))
    assert "aotcuda_test::triton_scale (proxy executor)" in message and "compile for CUDA only" in message


def test_deepseek_v2_float32_moe_as_users_build_it_decomposes_to_aten():
    """DeepseekV2Model with its library defaults in float32: the experts' grouped_mm_fallback is traced by its
    rule; nothing is left for the proxy executor, and the program matches eager at two lengths."""
    pytest.importorskip("transformers")
    from aotcuda.lowering.exporting import export_program
    from tests.models.library import TRANSFORMERS_SUITE

    case = TRANSFORMERS_SUITE["deepseek_v2_moe"]
    torch.manual_seed(0)
    model, args, kwargs, dims = case.build(torch.float32)
    exported = export_program(model, args, kwargs, dims)
    assert [op._schema.name for op in custom_ops_in(exported)] == ["transformers::grouped_mm_fallback"]
    ep, untraced = _decomposed(exported)
    assert untraced == {} and custom_ops_in(ep) == []
    # what Inductor is handed: after the passes (before them, the RoPE's complex unsqueeze is an op Inductor would
    # run through the proxy executor, were the complex pass to refuse the program)
    from aotcuda.lowering.pipeline import passes

    for graph_pass in passes():
        ep = graph_pass(ep)
    assert proxy_executor_kernels(ep) == []
    for length in case.lengths:
        fresh, options = case.make_inputs(length, torch.float32)
        with torch.no_grad():
            actual = ep.module()(*fresh, **options).last_hidden_state.double()
            expected = model(*fresh, **options).last_hidden_state.double()
        error = ((actual - expected).norm() / expected.norm()).item()
        assert error <= 1e-5, f"length {length}: relative error {error:.2e}"
