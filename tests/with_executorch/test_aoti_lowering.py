"""Complex RoPE programs lowered by ExecuTorch's AOTI backend (a CPU stand-in of CudaBackend, aoti_cpu.py).

Without the pass, AOTInductor reports the complex ops as missing fallback kernels, as CudaBackend does
upstream; with it, in the backend's custom passes or before to_edge, the delegate compiles and the
lowered program (its top-level graph, the delegate run through aotcuda's model-container binding)
matches eager at every length. One compile per program and route, shared by the tests of this module.
"""

import re

import pytest

pytest.importorskip("executorch.exir", reason="needs ExecuTorch: pip install -e '.[executorch]'")

import aoti_cpu  # noqa: E402
import et_programs  # noqa: E402
import torch  # noqa: E402

from aotcuda.executorch import complex_pass_in  # noqa: E402
from aotcuda.lowering.decompositions import decomposition_table  # noqa: E402
from aotcuda.passes import ReplaceComplexWithRealPass  # noqa: E402

NAMES = list(et_programs.PROGRAMS)
# What CudaBackend reports for the Llama-2 RoPE upstream: the complex ops, and the views of complex values.
LLAMA2_MISSING = ["at::_ops::mul_Tensor::call", "at::_ops::reshape::call", "at::_ops::slice_Tensor::call",
                  "aten::view_as_complex_copy", "aten::view_as_real_copy"]


@pytest.fixture(scope="module")
def compiled():
    """name/route → (model, EdgeProgramManager, delegates), lowered on first use."""
    cache = {}

    def get(name: str, route: str):
        if (name, route) not in cache:
            model, ep = et_programs.export(et_programs.PROGRAMS[name])
            if route == "in the backend":
                with complex_pass_in(aoti_cpu.CpuAotiBackend):
                    manager, delegates = aoti_cpu.lower(ep, aoti_cpu.CpuAotiBackend)
            else:  # before to_edge, on the program aotcuda.lower would compile
                ep = ReplaceComplexWithRealPass(strict=True)(ep.run_decompositions(decomposition_table()))
                manager, delegates = aoti_cpu.lower(ep, aoti_cpu.CpuAotiBackend)
            cache[name, route] = model, manager, delegates
        return cache[name, route]

    yield get
    for _, _, delegates in cache.values():
        aoti_cpu.remove(delegates)


@pytest.mark.parametrize("name", NAMES)
def test_without_the_pass_aoti_reports_missing_fallback_kernels(name):
    _, ep = et_programs.export(et_programs.PROGRAMS[name])
    with pytest.raises(RuntimeError, match=r"Method forward missing fallback kernels \(\d+ total\)") as error:
        aoti_cpu.lower(ep, aoti_cpu.CpuAotiBackend, codegen_only=True)
    kernels = re.findall(r"^  - (\S+)$", str(error.value), re.M)
    assert {"aten::view_as_complex_copy", "aten::view_as_real_copy", "at::_ops::mul_Tensor::call"} <= set(kernels)
    if name == "llama2":
        assert kernels == LLAMA2_MISSING and "(5 total)" in str(error.value)


def assert_matches_eager(model, manager, delegates, case):
    for length in case.lengths:
        inputs, _ = case.make_inputs(length, torch.float32)  # positional: no keyword arguments
        expected = model(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = aoti_cpu.run_lowered(manager, delegates, *inputs)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_pass_in_the_backends_custom_passes_compiles_and_matches_eager(compiled, name):
    model, manager, delegates = compiled(name, "in the backend")
    assert len(delegates) == 1 and delegates[0].so_path  # one delegate, compiled (no missing kernel)
    assert len(manager.to_executorch().buffer) > 0  # and a .pte is written
    assert_matches_eager(model, manager, delegates, et_programs.PROGRAMS[name])


def test_twice_returns_one_tensor_in_both_slots(compiled):
    model, manager, delegates = compiled("twice", "in the backend")
    (x,), _ = et_programs.TWICE.make_inputs(7, torch.float32)
    first, plus_one, second = aoti_cpu.run_lowered(manager, delegates, x)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    torch.testing.assert_close(plus_one, x + 1)


def test_pass_before_to_edge_compiles_and_matches_eager(compiled):
    model, manager, delegates = compiled("llama2", "before to_edge")
    assert len(delegates) == 1 and delegates[0].so_path
    assert len(manager.to_executorch().buffer) > 0
    assert_matches_eager(model, manager, delegates, et_programs.PROGRAMS["llama2"])
