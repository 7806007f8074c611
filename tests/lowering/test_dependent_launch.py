"""Programmatic dependent launch in AOTInductor packages (aotcuda.lowering.dependent_launch): the wrapper's
launches of kernels Inductor marked launch_pdl, and only those, go through the PDL launch helper; a CUDA
decode step built so matches eager, with and without CUDA graphs."""

import zipfile

import pytest
import torch

import aotcuda
from aotcuda.lowering.dependent_launch import rewrite_launches, with_pdl_codegen
from aotcuda.models.decoder import DecoderConfig, make_decoder


def _kernel_driver() -> str:
    from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides

    return CUDADeviceOpOverrides().kernel_driver()


def _wrapper(driver: str) -> str:
    # The shape of an AOT wrapper: the kernel driver in the header, then one call function per kernel.
    return driver + """
void call_triton_red_fused_0(const CUdeviceptr& in_ptr0, cudaStream_t stream_) {
    void* kernel_args_[] = {&var_0};
    launchKernel(kernels_.triton_red_fused_0, grid_0, grid_1, grid_2, 4, 0, kernel_args_, stream_);
}
void call_user_kernel(const CUdeviceptr& in_ptr0, cudaStream_t stream_) {
    void* kernel_args_[] = {&var_1};
    launchKernel(kernels_.user_kernel, grid_0, grid_1, grid_2, 4, 0, kernel_args_, stream_);
}
void call_triton_poi_fused_1(const CUdeviceptr& in_ptr0, cudaStream_t stream_) {
    void* kernel_args_[] = {&var_2};
    launchKernel(kernels_.triton_poi_fused_1, grid_0, grid_1, grid_2, 4, 0, kernel_args_, stream_, true);
}
"""


def test_only_launches_of_marked_kernels_become_dependent_launches():
    if "cuLaunchKernelEx" in _kernel_driver():
        pytest.skip("this torch's AOTInductor launches PDL kernels itself (pytorch/pytorch#194079); nothing to rewrite")
    code, count = rewrite_launches(_wrapper(_kernel_driver()), lambda name: name.startswith("triton_"))
    assert count == 1
    assert "launchKernelPdl(kernels_.triton_red_fused_0, grid_0" in code
    assert "launchKernel(kernels_.user_kernel, grid_0" in code
    # a launch with other arguments than the helper's eight (a later torch's own flag) is not touched
    assert "launchKernel(kernels_.triton_poi_fused_1, grid_0" in code
    assert code.count("static inline void launchKernelPdl(") == 1
    assert code.index("static inline void launchKernelPdl(") < code.index("call_triton_red_fused_0")
    assert "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION" in code


def test_a_wrapper_without_the_expected_launch_helper_is_left_as_it_is():
    unmarked = _wrapper(_kernel_driver())
    assert rewrite_launches(unmarked, lambda name: False) == (unmarked, 0)
    other_signature = _wrapper("static inline void launchKernel(CUfunction func, dim3 grid, void* args[]) {}\n")
    assert rewrite_launches(other_signature, lambda name: True) == (other_signature, 0)


def test_a_kernel_is_a_dependent_launch_only_if_marked_and_waiting(monkeypatch):
    from types import SimpleNamespace

    from torch._inductor.codecache import CudaKernelParamCache

    from aotcuda.lowering.dependent_launch import _kernel_sources, _launches_dependent

    meta = {"waits": True, "fills": True, "user": False}
    monkeypatch.setattr(CudaKernelParamCache, "get",
                        classmethod(lambda cls, name: {"triton_meta": {"launch_pdl": meta[name]}} if name in meta else None))
    wrapper = SimpleNamespace(src_to_kernel={"def k():\n    tl.extra.cuda.gdc_wait()\n    x = tl.load(p)": "waits",
                                             "def k():\n    tl.store(p, 0.0)": "fills",
                                             "def k():\n    tl.extra.cuda.gdc_wait()": "user"})
    dependent = _launches_dependent(_kernel_sources(SimpleNamespace(wrapper_code=wrapper)))
    assert [dependent(name) for name in ("waits", "fills", "user", "unknown")] == [True, False, False, False]


def test_the_switch_turns_inductors_pdl_codegen_on_for_cuda_only(monkeypatch):
    from torch._inductor import config

    monkeypatch.setenv("AOTCUDA_DEPENDENT_LAUNCH", "0")
    assert with_pdl_codegen(torch.device("cuda"), {"a": 1}) == {"a": 1}
    expected = {"a": 1, "triton.enable_pdl": True} if hasattr(config.triton, "enable_pdl") else {"a": 1}
    for setting in ("1", None):  # on by default since session 23
        if setting is None:
            monkeypatch.delenv("AOTCUDA_DEPENDENT_LAUNCH", raising=False)
        else:
            monkeypatch.setenv("AOTCUDA_DEPENDENT_LAUNCH", setting)
        assert with_pdl_codegen(torch.device("cpu"), {"a": 1}) == {"a": 1}
        assert with_pdl_codegen(torch.device("cuda"), {"triton.enable_pdl": False}) == {"triton.enable_pdl": False}
        assert with_pdl_codegen(torch.device("cuda"), {"a": 1}) == expected


def _package_sources(path) -> str:
    with zipfile.ZipFile(path) as archive:
        return "\n".join(archive.read(name).decode(errors="replace") for name in archive.namelist()
                         if name.endswith(".cpp"))


@pytest.mark.cuda
def test_a_decode_step_with_dependent_launches_matches_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTCUDA_DEPENDENT_LAUNCH", "1")
    config = DecoderConfig.tiny()
    model = make_decoder(config, 1, device="cuda", dtype=torch.float32, seed=3)
    example = (torch.zeros(1, 1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"))
    lowered = aotcuda.lower(model, example, device="cuda", package_path=tmp_path / "decode.pt2")
    from torch._inductor import config as inductor_config

    if torch.cuda.get_device_capability()[0] >= 9 and hasattr(inductor_config.triton, "enable_pdl"):
        assert "launchKernelPdl(" in _package_sources(lowered.package_path) or "cuLaunchKernelEx" in _kernel_driver()
    eager = make_decoder(config, 1, device="cuda", dtype=torch.float32, seed=3)
    eager_again = make_decoder(config, 1, device="cuda", dtype=torch.float32, seed=3)
    tokens = torch.randint(0, config.vocab_size, (1, 1), device="cuda")
    with aotcuda.load(lowered.package_path, cuda_graphs=True) as graphs, torch.no_grad():
        for position in range(5):
            input_pos = torch.tensor([position], device="cuda")
            want = eager(tokens, input_pos)
            torch.testing.assert_close(graphs(tokens, input_pos), want, rtol=1e-5, atol=1e-5)
            tokens = want.argmax(-1, keepdim=True)
    tokens = torch.randint(0, config.vocab_size, (1, 1), device="cuda")
    with aotcuda.load(lowered.package_path) as plain, torch.no_grad():
        for position in range(5):
            input_pos = torch.tensor([position], device="cuda")
            want = eager_again(tokens, input_pos)
            torch.testing.assert_close(plain(tokens, input_pos), want, rtol=1e-5, atol=1e-5)
            tokens = want.argmax(-1, keepdim=True)
