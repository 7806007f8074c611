"""Programs whose output size comes from an input's values (``n = lengths.max().item()``: an unbacked size), served:
refused without an upper bound, bounded by the model's own torch._check, never batched. No Ray: the checks run
before Ray starts (server.check_package) and in the replica (ProgramReplica's plan)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

import aotcuda
from aotcuda.errors import AotcudaError, ServingConfigError
from aotcuda.runtime.package import read_signature

serving = pytest.importorskip("aotcuda.serving")
from aotcuda.serving.server import ServeOptions, check_package  # noqa: E402 - after the skip


def test_an_unbounded_data_dependent_output_is_refused_before_ray_starts(mask_packages):
    """Found by a breaker: lengths=[2**31], 8 bytes of a 104-byte request, made a replica allocate 2 GiB (2**36 on
    a large host: swapped or OOM-killed); the signature recorded the width u0 with max null."""
    path = mask_packages[None]
    assert read_signature(path)["outputs"][0]["shape"][1] == {"expr": "u0", "min": 1, "max": None}
    with pytest.raises(ServingConfigError, match=r"output 'out' dim 1 is u0.*no upper bound.*torch._check"):
        check_package(path, ServeOptions())
    assert check_package(path, ServeOptions(allow_unbounded_outputs=True)) == "cpu"  # the deployer's choice
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "aotcuda", "serve", path, "--port", "18791"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout[-2000:]
    assert "output 'out' dim 1 is u0" in result.stderr and "no upper bound" in result.stderr
    assert "hint: on the command line, --allow-unbounded-outputs serves it anyway" in result.stderr
    assert time.monotonic() - started < 60
    shown = subprocess.run([sys.executable, "-m", "aotcuda", "inspect", path], capture_output=True, text=True,
                           timeout=120).stdout
    assert "u0∈[1, ∞]" in shown and "unbounded data-dependent size: output 'out' dim 1 (u0)" in shown


def test_the_models_bound_is_the_signatures_max_and_the_program_refuses_a_value_past_it(mask_packages):
    """torch._check(n <= 512) lands in the signature as u0's max, and the generated code checks it at every call:
    a request's value cannot make the program allocate past it."""
    path = mask_packages[512]
    assert read_signature(path)["outputs"][0]["shape"][1] == {"expr": "u0", "min": 1, "max": 512}
    assert check_package(path, ServeOptions()) == "cpu"
    program = aotcuda.load(path)
    assert program(torch.tensor([3, 512])).shape == (2, 512)
    for value in (513, 2**31):
        with pytest.raises(AotcudaError, match=rf"Expected u0 <= 512 but received {value}"):
            program(torch.tensor([value]))


def test_a_data_dependent_output_is_never_batched(mask_packages):
    """Found by a breaker: batched with mallory's lengths=[7], alice's lengths=[3] got a mask 7 wide (mallory's
    length); alone, 3 wide."""
    from aotcuda.serving.batching import serving_plan

    path = mask_packages[512]
    with pytest.raises(ServingConfigError, match=r"cannot be batched: output 'out' dim 1 \(u0\) is data-dependent") as refused:
        check_package(path, ServeOptions(max_batch_size=8))
    # no advice to lower it again with a batch dim: it has one, and its own computation is what cannot batch
    assert [(advice.keyword, advice.value) for advice in refused.value.advice] == [("max_batch_size", 1)]
    program = aotcuda.load(path)
    with pytest.raises(ServingConfigError, match="cannot be batched"):
        serving_plan(program.input_specs, program.output_specs, 8, path)  # what ProgramReplica runs
