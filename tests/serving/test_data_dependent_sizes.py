"""Programs whose output size comes from an input's values (``n = lengths.max().item()``: an unbacked size), served:
refused without an upper bound, bounded by the model's own torch._check, never batched. No Ray: the checks run
before Ray starts (server.check_package) and in the replica (ProgramReplica's plan)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
import torch

import aotcuda
from aotcuda.errors import InputError, ServingConfigError
from aotcuda.runtime.package import read_signature
from serving_cases import RAY_INIT_REACHED, serve_without_ray

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
    started = time.monotonic()  # before Ray starts: read from what the command did (serve_without_ray), not the clock
    result = serve_without_ray(path, "--port", "18791", timeout=120)
    assert result.returncode == 1 and RAY_INIT_REACHED not in result.stderr, result.stderr[-2000:]
    assert "output 'out' dim 1 is u0" in result.stderr and "no upper bound" in result.stderr
    assert "hint: on the command line, --allow-unbounded-outputs serves it anyway" in result.stderr
    assert time.monotonic() - started < 90
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
    for value in (513, 2**31, 0):
        # The inputs' values fail the model's own check: the caller's error (serving answers 400), and the
        # program runs the next call as before.
        with pytest.raises(InputError, match=rf"fail the model's own check .*u0.* is {value}\b") as refused:
            program(torch.tensor([value]))
        assert "torch._check" in str(refused.value)
        lengths = torch.randint(1, 513, (int(torch.randint(1, 9, ())),))
        expected = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
        assert torch.equal(program(lengths), expected)


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
    # ProgramReplica plans from the sizes the loaded program holds, not from a second read of the file
    assert program.signature == read_signature(path) and program.signature is not program.signature  # copies
    assert program.signature["data_dependent_sizes"][0]["max"] == 512


def test_a_tensor_sized_by_a_requests_value_is_refused_where_no_output_shows_it(mask_packages):
    """Review 8: arange(n) for n = lengths.max(), behind an output of shape (1,): 16 bytes of request made a replica
    allocate 1.5 GB (lengths=[2**25]) and serve let it through, as no output dim was data-dependent. lower() records
    every data-dependent size of the program ("data_dependent_sizes"), and serving refuses one without a max."""
    from aotcuda.serving.batching import serving_plan, unbounded_size

    path = mask_packages["intermediate"]
    signature = read_signature(path)
    assert [dim for spec in signature["outputs"] for dim in spec["shape"]] == [1]
    assert signature["data_dependent_sizes"] == [{"expr": "u0", "min": 1, "max": None}]
    with pytest.raises(ServingConfigError, match=r"computes a tensor size, u0, from an input's values.*no upper "
                                                 r"bound.*torch._check"):
        check_package(path, ServeOptions())
    assert check_package(path, ServeOptions(allow_unbounded_outputs=True)) == "cpu"
    program = aotcuda.load(path)
    with pytest.raises(ServingConfigError, match="computes a tensor size"):  # what ProgramReplica runs
        serving_plan(program.input_specs, program.output_specs, 1, path,
                     data_dependent_sizes=signature["data_dependent_sizes"])
    lengths = torch.tensor([3, 7])
    torch.testing.assert_close(program(lengths), torch.tensor([10]))  # the program itself computes as eager
    shown = subprocess.run([sys.executable, "-m", "aotcuda", "inspect", path], capture_output=True, text=True,
                           timeout=120).stdout
    assert "unbounded data-dependent size: the program computes a tensor size, u0" in shown, shown
    # the bounded mask records its size with the max; a record not in its form is refused, an absent one is
    # an older package's (nothing to judge)
    assert read_signature(mask_packages[512])["data_dependent_sizes"] == [{"expr": "u0", "min": 1, "max": 512}]
    assert unbounded_size([{"expr": "u0", "min": 1, "max": 512}]) == "" and unbounded_size(None) == ""
    for malformed in ("u0", [{"expr": "u0", "max": "9"}], [{"expr": 3, "max": None}], [{"expr": "u0", "max": -1}]):
        with pytest.raises(aotcuda.PackageError, match="data_dependent_sizes is not a list"):
            unbounded_size(malformed)


def test_an_output_symbol_no_input_has_counts_as_data_dependent_and_ranges_are_checked():
    """Review 8: an output dim of a symbol that no input dim binds (``x9``) escaped the unbounded check, which
    looked for torch's u-names only; and a range that holds no size ([9, 2], max -1) was read as given."""
    from aotcuda.runtime.specs import DimSpec, TensorSpec
    from aotcuda.serving.batching import unbounded_output_dim

    def spec(name, shape):
        return TensorSpec.from_json({"name": name, "dtype": "float32", "device": "cpu", "shape": shape})

    inputs = [spec("x", [{"expr": "s0", "min": 1, "max": 8}])]
    assert unbounded_output_dim([spec("out", [{"expr": "2*s0", "min": 2, "max": None}])], inputs) == ""
    assert "output 'out' dim 0 is x9" in unbounded_output_dim([spec("out", [{"expr": "x9", "min": 0, "max": None}])],
                                                               inputs)
    assert unbounded_output_dim([spec("out", [{"expr": "x9", "min": 0, "max": 4}])], inputs) == ""
    for low, high in ((9, 2), (0, -1)):
        with pytest.raises(ValueError, match="which holds no size"):
            DimSpec.from_json({"expr": "s0", "min": low, "max": high})


def test_an_unbounded_answer_served_anyway_is_still_held_to_max_response_bytes(mask_packages):
    """A new user's trial: served with --allow-unbounded-outputs --max-response-bytes 1000000, lengths=[2**22] got
    a 4 MiB answer with 200: the check before the run counts a dim with no max as nothing. The run's memory is what
    the deployer accepted; the answer is now checked against the limit after the run, before it is encoded, and the
    replica answers the next request."""
    import asyncio

    safetensors_torch = pytest.importorskip("safetensors.torch")
    from aotcuda.serving.deployment import ProgramReplica
    from serving_cases import posted

    replica = ProgramReplica(mask_packages[None], allow_unbounded_outputs=True, max_response_bytes=1000)
    for width, status in ((2000, 400), (400, 200)):
        lengths = torch.tensor([width, 3])
        answer = asyncio.run(posted(replica, safetensors_torch.save({"lengths": lengths})))
        assert answer.status_code == status, answer.body[:500]
        if status == 400:
            assert answer.headers["x-aotcuda-error"] == "RequestError", answer.headers
            assert b"is 4000 bytes (output #0 of shape (2, 2000)" in answer.body and b"--max-response-bytes" in answer.body
        else:
            (mask,) = safetensors_torch.load(answer.body).values()
            assert torch.equal(mask, torch.arange(width)[None, :] < lengths[:, None])
    assert replica.counters["rejected"] == 1


class TrimToLongest(torch.nn.Module):
    """Frames cut to the longest length (a new user's model): the model checks that length against the frame count."""

    def forward(self, frames, lengths):
        n = lengths.max().item()
        torch._check(n >= 1)
        torch._check(n <= frames.shape[1])
        return frames[:, :n] * (torch.arange(n)[None, :] < lengths[:, None])[..., None]


def test_a_failed_check_against_a_dim_says_the_dims_size_in_its_name(tmp_path):
    """A new user's trial: torch._check(n <= frames.shape[1]) failing at T = 50, max length 100, said "fails the
    model's own check u0 <= s45 (a value computed from them is 50 ...)": Inductor's check prints the value of one
    of its symbols, here T's, and s45 is torch's name of the Dim the user called T. Now the check is said in the
    Dim names, with T's size from the call, and no value is claimed for u0."""
    frames = torch.export.Dim("T", min=2, max=4096)
    path = str(tmp_path / "trim.pt2")
    aotcuda.lower(TrimToLongest(), (torch.randn(2, 40, 4), torch.tensor([30, 12])), device="cpu", package_path=path,
                  dynamic_shapes={"frames": {1: frames}, "lengths": None})
    program = aotcuda.load(path)
    for T, longest in ((50, 100), (20, 500)):
        with pytest.raises(InputError) as refused:
            program(torch.randn(2, T, 4), torch.tensor([longest, 1]))
        message = str(refused.value)
        assert "u0 <= T" in message and f"where T = {T} from the inputs' shapes" in message, message
        assert not re.search(r"\bs\d+\b", message) and "a value computed from them is" not in message, message
    x, lengths = torch.randn(2, 50, 4), torch.tensor([7, 3])
    torch.testing.assert_close(program(x, lengths), TrimToLongest()(x, lengths))  # the next call runs as before
