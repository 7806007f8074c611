"""CPU packages with max-autotune: lower() turns Inductor's C++ GEMM/BMM template off (``cpp.weight_prepack``)
for programs that write a buffer (or parameter) in place, unless the caller sets it, because the template packs
a mutated buffer's compile-time value as a constant (torch 2.13: a product that reads a KV cache after
``index_copy_`` was wrong by 0.30 relative; aotcuda.lowering.pipeline.package_inductor_configs says where in
torch). Programs that write no state keep the template. The option tests need no compile; the last two
tests compile one program each (~20-40 s): the minimal cache program, and a product with a fixed weight that
keeps the template."""

import pytest
import torch
from comparisons import torch_aoti_load

import aotcuda
import aotcuda.lowering.pipeline
from aotcuda.lowering.devices import DEVICE_PROFILES
from aotcuda.lowering.pipeline import package_inductor_configs, state_written_in_place

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


class CacheProduct(torch.nn.Module):
    """The smallest program that showed it: one row written into a buffer in place, then a batched product
    that reads the whole buffer (a decode step's attention scores over its KV cache)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.randn(1, 2, 32, 16, generator=torch.Generator().manual_seed(0)))

    def forward(self, q, k, pos):
        self.cache.index_copy_(2, pos, k)
        return torch.matmul(q, self.cache.transpose(2, 3))


def _example():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(1, 2, 2, 16, generator=generator), torch.randn(1, 2, 1, 16, generator=generator),
            torch.tensor([3]))


class WeightProduct(torch.nn.Module):
    """A product with a weight no step writes: nothing for the template to get wrong."""

    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.randn(16, 32, generator=torch.Generator().manual_seed(0)))

    def forward(self, q, k, pos):
        return torch.matmul(q, self.weight)


class ParameterStep(torch.nn.Module):
    """A parameter written in place (under no_grad): AOTInductor holds parameters as constants too."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(16, 16), requires_grad=False)

    def forward(self, q, k, pos):
        self.weight.add_(1.0)
        return torch.matmul(q, self.weight)


class InputProduct(torch.nn.Module):
    """An input written in place: a graph input, not a constant, so not at risk."""

    def forward(self, q, k, pos):
        k.mul_(2.0)
        return torch.matmul(q, k.transpose(2, 3))


def _functional(model):
    """The program as lower() hands it to the compile: exported, then decomposed (functional)."""
    return torch.export.export(model, _example(), strict=False).run_decompositions()


@pytest.fixture(scope="module")
def writes_cache():
    return _functional(CacheProduct())


@pytest.fixture(scope="module")
def writes_nothing():
    return _functional(WeightProduct())


def test_state_written_in_place_lists_buffers_and_parameters_not_inputs(writes_cache, writes_nothing):
    assert state_written_in_place(writes_cache) == ["cache"]
    assert state_written_in_place(_functional(ParameterStep())) == ["weight"]
    assert state_written_in_place(writes_nothing) == []
    assert state_written_in_place(_functional(InputProduct())) == []


@pytest.mark.parametrize("option", ["max_autotune", "max_autotune_gemm"])
def test_max_autotune_on_the_cpu_turns_weight_prepack_off_for_a_written_buffer(option, writes_cache):
    configs = package_inductor_configs(CPU, DEVICE_PROFILES["cpu"].inductor_configs, {option: True}, writes_cache)
    assert configs == {option: True, "cpp.weight_prepack": False}


@pytest.mark.parametrize("option", ["max_autotune", "max_autotune_gemm"])
def test_a_program_that_writes_no_state_keeps_the_template(option, writes_nothing):
    configs = package_inductor_configs(CPU, DEVICE_PROFILES["cpu"].inductor_configs, {option: True}, writes_nothing)
    assert configs == {option: True}


def test_a_written_input_alone_keeps_the_template():
    configs = package_inductor_configs(CPU, {}, {"max_autotune": True}, _functional(InputProduct()))
    assert configs == {"max_autotune": True}


@pytest.mark.parametrize("value", [True, False])
def test_the_callers_weight_prepack_wins(value, writes_cache, writes_nothing):
    for ep in (writes_cache, writes_nothing):
        configs = package_inductor_configs(CPU, {}, {"max_autotune": True, "cpp.weight_prepack": value}, ep)
        assert configs["cpp.weight_prepack"] is value


def test_without_max_autotune_or_on_cuda_the_options_are_left_as_given(writes_cache):
    assert package_inductor_configs(CPU, {}, None, writes_cache) == {}
    assert package_inductor_configs(CPU, {}, {"max_autotune": False}, writes_cache) == {"max_autotune": False}
    cuda_profile = DEVICE_PROFILES["cuda"].inductor_configs
    assert package_inductor_configs(CUDA, cuda_profile, {"max_autotune": True}, writes_cache) == {
        **cuda_profile, "max_autotune": True}


def test_max_autotune_in_torchs_config_counts_too(writes_cache, writes_nothing):
    # config.patch, not monkeypatch.setattr: on torch 2.15 pytest's setattr of max_autotune (a config other
    # options are implied from) left it unreadable ("config.max_autotune does not exist") for every later compile
    before = torch._inductor.config.max_autotune
    with torch._inductor.config.patch(max_autotune=True):
        assert package_inductor_configs(CPU, {}, None, writes_cache) == {"cpp.weight_prepack": False}
        assert package_inductor_configs(CPU, {}, {"max_autotune": False}, writes_cache) == {"max_autotune": False}
        assert package_inductor_configs(CPU, {}, None, writes_nothing) == {}
    assert torch._inductor.config.max_autotune == before


@pytest.mark.parametrize("model, given, expected", [
    (CacheProduct, {"max_autotune": True}, False),
    (CacheProduct, {"max_autotune": True, "cpp.weight_prepack": True}, True),
    (WeightProduct, {"max_autotune": True}, None),
    (WeightProduct, {"max_autotune": True, "cpp.weight_prepack": False}, False),
])
def test_lower_compiles_with_those_options(tmp_path, monkeypatch, model, given, expected):
    """Without a compile: lower()'s compile step is replaced by one that records its options."""
    seen = {}

    def recording_compile(ep, path, configs, *more):
        seen.update(configs)
        raise RuntimeError("stopped before the compile on purpose")

    monkeypatch.setattr(aotcuda.lowering.pipeline, "_compile", recording_compile)
    with pytest.raises(RuntimeError, match="on purpose"):
        aotcuda.lower(model(), _example(), device="cpu", package_path=tmp_path / "c.pt2", inductor_configs=given)
    assert seen.get("cpp.weight_prepack") is expected and seen["max_autotune"] is True


@pytest.mark.slow
def test_the_cache_product_lowered_with_max_autotune_matches_eager(tmp_path):
    model, example = CacheProduct(), _example()
    lowered = aotcuda.lower(model, example, device="cpu", package_path=tmp_path / "c.pt2",
                            inductor_configs={"max_autotune": True})
    with torch.no_grad():
        want = CacheProduct()(*example)  # the same cache, fresh
        got = torch_aoti_load(lowered.package_path)(*example)
    assert (got - want).norm() / want.norm() < 1e-5


@pytest.mark.slow
def test_a_fixed_weight_product_lowered_with_max_autotune_matches_eager(tmp_path):
    """The template kept: on a 2-core CPU with torch 2.13 max-autotune chose it for this product (the package's
    kernel.cpp had ``cpp_fused_mm_view_0_micro_gemm``); not asserted, since autotuning picks by measured time."""
    model, example = WeightProduct(), _example()
    lowered = aotcuda.lower(model, example, device="cpu", package_path=tmp_path / "w.pt2",
                            inductor_configs={"max_autotune": True})
    with torch.no_grad():
        want = model(*example)
        got = torch_aoti_load(lowered.package_path)(*example)
    assert (got - want).norm() / want.norm() < 1e-5


def test_runtime_constant_folding_set_for_the_process_is_turned_off(writes_nothing, monkeypatch):
    """The review of session 38: inductor_configs refuses aot_inductor.use_runtime_constant_folding (torch computes
    wrong results with it: test_options.py), but torch._inductor.config set for the whole process reached the
    compile all the same."""
    from torch._inductor import config as inductor_config

    assert "aot_inductor.use_runtime_constant_folding" not in package_inductor_configs(CPU, {}, None, writes_nothing)
    monkeypatch.setattr(inductor_config.aot_inductor, "use_runtime_constant_folding", True)
    configs = package_inductor_configs(CPU, {}, None, writes_nothing)
    assert configs["aot_inductor.use_runtime_constant_folding"] is False
