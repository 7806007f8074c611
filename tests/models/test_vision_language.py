"""Vision-language models (issue 27): tests.models.library.VISION_LANGUAGE_SUITE lowered for the CPU, loaded
and run in a fresh process, against eager on fresh random prompts and images.

Their image merge is data-dependent (masked_scatter after a torch._check_tensor_all that the image tokens
and features agree): lowering makes it generated code (aotcuda/lowering/data_dependent.py), so the package
has no fallback kernel and no proxy-executor op, and aotcuda.load runs it. One CPU compile per model
(the module fixture), shared by the tests below; on CUDA the same check is test_cuda_lowering_matches_eager.
"""

from __future__ import annotations


import pytest
import torch

import aotcuda
from model_checks import relative_error
from test_transformers import (COMPILED_TOLERANCE, LOAD_AND_RUN, built, eager, fresh_python,
                               lower_on_cuda_and_compare, tensors_of)
from tests.models.library import VISION_LANGUAGE_SUITE
from tests.models.library.vision_language import IMAGE_TOKEN

MERGE_OPS = ("masked_scatter", "_is_all_true", "_assert_async.default")


@pytest.fixture(scope="module", params=list(VISION_LANGUAGE_SUITE))
def lowered_on_cpu(request, tmp_path_factory):
    """(name, case, eager model, LoweredProgram): one CPU compile per model."""
    name = request.param
    case, model, args, kwargs, dims = built(name, VISION_LANGUAGE_SUITE)
    lowered = aotcuda.lower(model, args, kwargs, dynamic_shapes=dims, device="cpu",
                            package_path=tmp_path_factory.mktemp(name) / f"{name}.pt2")
    return name, case, model, lowered


def test_image_merge_is_generated_code(lowered_on_cpu):
    """No fallback kernel, no proxy-executor op, and none of the merge's ops left for Inductor to fall back on."""
    name, _, _, lowered = lowered_on_cpu
    assert lowered.fallback_kernels == [], f"{name}: {[k.describe() for k in lowered.fallback_kernels]}"
    assert lowered.proxy_executor_ops == [] and lowered.runs_in_aotcuda_runtime
    left = [str(n.target) for n in lowered.exported_program.graph.nodes
            if n.op == "call_function" and any(op in str(n.target) for op in MERGE_OPS)]
    assert left == [], f"{name}: {left}"


def test_runs_in_a_fresh_process_and_matches_eager(lowered_on_cpu, tmp_path):
    name, case, model, lowered = lowered_on_cpu
    for length in case.lengths:
        torch.manual_seed(length)
        args, kwargs = case.make_inputs(length, torch.float32)
        torch.save({"args": args, "kwargs": kwargs}, tmp_path / "inputs.pt")
        run = fresh_python("-c", LOAD_AND_RUN, lowered.package_path, str(tmp_path / "inputs.pt"),
                           str(tmp_path / "outputs.pt"))
        assert run.returncode == 0, run.stderr[-3000:]
        expected = eager(model, args, kwargs)
        error = relative_error(tuple(torch.load(tmp_path / "outputs.pt")), tensors_of(expected))
        print(f"{name} in a fresh process at length {length}: relative error {error:.1e}")
        assert error <= COMPILED_TOLERANCE, f"{name} at length {length}: relative error {error:.2e}"


def test_a_prompt_whose_image_tokens_disagree_with_the_image_is_refused(lowered_on_cpu, tmp_path):
    """One image token too few: eager raises (transformers' check); so does the package, in a fresh process
    (the check is generated code, not dropped), instead of merging the wrong features."""
    name, case, model, lowered = lowered_on_cpu
    args, kwargs = case.make_inputs(case.lengths[0], torch.float32)
    input_ids = args[0].clone()
    first = int((input_ids[0] == IMAGE_TOKEN).nonzero()[0])
    input_ids[0, first] = 0
    args = (input_ids, *args[1:])
    with pytest.raises(Exception):
        eager(model, args, kwargs)
    torch.save({"args": args, "kwargs": kwargs}, tmp_path / "inputs.pt")
    run = fresh_python("-c", LOAD_AND_RUN, lowered.package_path, str(tmp_path / "inputs.pt"),
                       str(tmp_path / "outputs.pt"))
    assert run.returncode != 0 and not (tmp_path / "outputs.pt").exists(), run.stdout[-2000:]
    print(f"{name} with a missing image token: {run.stderr.strip().splitlines()[-1][:300]}")


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(VISION_LANGUAGE_SUITE))
def test_cuda_lowering_matches_eager(name, tmp_path):
    """lower(device="cuda") + load(): no fallback kernel, outputs match eager at every length."""
    lower_on_cuda_and_compare(name, tmp_path, VISION_LANGUAGE_SUITE)
