"""A request's shapes, not its bytes, set what a call allocates: a replica bounds both before the program runs (review
10). Without Ray: the replica's routes are called with a request the HTTP proxy has read."""

from __future__ import annotations

import asyncio

import pytest
import torch

safetensors_torch = pytest.importorskip("safetensors.torch", reason="aotcuda[serve] is not installed")
deployment = pytest.importorskip("aotcuda.serving.deployment", reason="aotcuda[serve] is not installed")

from aotcuda.serving.server import ServeOptions  # noqa: E402
from serving_cases import posted  # noqa: E402


def predict(replica, body: bytes):
    """POST /predict to a replica, its body read by the HTTP proxy: (status, error header, answer body)."""
    answer = asyncio.run(posted(replica, body))
    return answer.status_code, answer.headers.get("x-aotcuda-error"), answer.body


def test_an_answer_that_grows_faster_than_its_request_is_refused_before_the_program_runs(shape_packages):
    """Found by a breaker: x[:, :, None] * x[:, None, :] with no max on x's dim 1; a 128 KiB request of x (2, 16384)
    made the replica allocate and return 2 GiB (43 s, 6.4 GiB peak), a 256 KiB one 8 GiB. The outputs' sizes
    follow from the request's shapes: past --max-response-bytes (1 GiB) it gets 400 before the program runs."""
    replica = deployment.ProgramReplica(shape_packages["outer"])
    body = safetensors_torch.save({"x": torch.randn(2, 16384)})
    assert len(body) < 140_000
    status, error, text = predict(replica, body)
    assert (status, error) == (400, "RequestError"), text[:300]
    assert b"would be 2147483648 bytes (output" in text and b"(2, 16384, 16384)" in text
    assert b"--max-response-bytes" in text and replica.counters["batches"] == 0  # nothing ran
    x = torch.randn(2, 64)
    status, _, answer = predict(replica, safetensors_torch.save({"x": x}))  # the next one is served
    assert status == 200 and torch.equal(safetensors_torch.load(answer)["output_0"], x[:, :, None] * x[:, None, :])
    small = deployment.ProgramReplica(shape_packages["outer"], max_response_bytes=2 * 64 * 64 * 4)
    assert predict(small, safetensors_torch.save({"x": x}))[0] == 200  # exactly the limit
    assert predict(small, safetensors_torch.save({"x": torch.randn(2, 65)}))[0] == 400


def test_an_empty_tensor_with_a_huge_dim_allocates_nothing(shape_packages):
    """Found by a breaker: x (0, 2**28), 112 bytes of request, to x.sum(0) + 1 (dim 0 from 0, no max on dim 1): the
    replica allocated and answered 1 GiB in 1.3 s (2**32: 16 GiB). No dim may be larger than the body carrying it."""
    replica = deployment.ProgramReplica(shape_packages["sum"])
    for shape in ((0, 1 << 28), (0, 1 << 40)):
        body = safetensors_torch.save({"x": torch.empty(shape)})
        status, error, text = predict(replica, body)
        assert (status, error) == (400, "RequestError") and b"an empty tensor whose other dims hold" in text, text[:300]
    x = torch.randn(0, 16)  # an empty request of honest dims is served
    status, _, answer = predict(replica, safetensors_torch.save({"x": x}))
    assert status == 200 and torch.equal(safetensors_torch.load(answer)["output_0"], torch.ones(16))
    assert replica.counters["batches"] == 1


def test_an_intermediate_that_grows_faster_than_the_answer_is_refused_before_the_program_runs(shape_packages):
    """Found by a breaker: (x @ x.T).softmax(-1) @ x, n at most 2**20: a 1 MiB request of x (32768, 8) has a 1 MiB
    answer, and made a 4 GiB [n, n] tensor (the process peaked at 8.4 GiB, 36 s on 2 cores; 2 MiB: 16 GiB). lower()
    records the bytes of the tensors the program makes as expressions of the shape symbols; the replica evaluates
    them at the request's shapes and refuses one past --max-tensor-bytes (1 GiB) before the program runs."""
    from aotcuda.runtime.package import read_signature

    replica = deployment.ProgramReplica(shape_packages["gram"])
    body = safetensors_torch.save({"x": torch.randn(32768, 8)})
    assert len(body) < (1 << 20) + 200
    status, error, text = predict(replica, body)
    assert (status, error) == (400, "RequestError"), text[:300]
    assert b"would make a tensor of 4294967296 bytes" in text and b"--max-tensor-bytes" in text
    assert b"(4*n**2 bytes in the inputs' dims)" in text  # the user's Dim name, not torch's s27 (a new user's report)
    assert replica.counters["batches"] == 0  # nothing ran
    recorded = read_signature(shape_packages["gram"])["tensor_sizes"]
    assert recorded[0].startswith("4*s") and recorded[0].endswith("**2"), recorded  # the [n, n] scores, largest first
    x = torch.randn(512, 8)
    status, _, answer = predict(replica, safetensors_torch.save({"x": x}))  # the next one is served
    assert status == 200
    torch.testing.assert_close(safetensors_torch.load(answer)["output_0"], (x @ x.T).softmax(-1) @ x)
    small = deployment.ProgramReplica(shape_packages["gram"], max_tensor_bytes=4 * 512 * 512)
    assert predict(small, safetensors_torch.save({"x": x}))[0] == 200  # exactly the limit
    assert predict(small, safetensors_torch.save({"x": torch.randn(513, 8)}))[0] == 400


@pytest.mark.parametrize("recorded", ["4*s0", [1], ["s0 +"], ["__import__('os')"], ["s0"] * 65])
def test_a_tensor_sizes_record_not_in_its_form_is_a_package_error(recorded):
    from aotcuda.errors import PackageError
    from aotcuda.serving.batching import tensor_size_records

    with pytest.raises(PackageError, match="tensor_sizes"):
        tensor_size_records(recorded, "p.pt2")
    assert tensor_size_records(None, "p.pt2") == ()  # an older aotcuda recorded none


def test_the_response_limit_is_an_option_of_serve():
    """--max-response-bytes and --max-tensor-bytes reach ServeOptions (serve_package stands in: no Ray); they must
    be positive."""
    from click.testing import CliRunner

    import aotcuda.serving.server as server_module
    from aotcuda.serving.command import serve_command

    seen = []

    def starting(path, options):
        seen.append(options)
        raise KeyboardInterrupt

    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as patched:
        patched.setattr(server_module, "serve_package", starting)
        for flags, limits in (([], (1 << 30, 1 << 30)), (["--max-response-bytes", "4096"], (4096, 1 << 30)),
                              (["--max-tensor-bytes", "8192"], (1 << 30, 8192))):
            result = CliRunner().invoke(serve_command, [__file__, *flags])
            assert result.exit_code == 0, result.output
            options = seen.pop()
            assert (options.max_response_bytes, options.max_tensor_bytes) == limits
    for name in ("max_response_bytes", "max_tensor_bytes"):
        with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
            ServeOptions(**{name: 0})


def test_a_batch_whose_call_would_pass_the_tensor_limit_runs_its_requests_alone(shape_packages):
    """The tensors of a batch grow with its rows: requests that each fit --max-tensor-bytes alone (checked as they
    arrive) could make one call pass it (8 requests of 1 GiB: 8 GiB). Such a batch runs its requests one by one."""
    limit = 4 * 2 * 64 * 64  # the [b, n, n] product for two rows of n = 64
    replica = deployment.ProgramReplica(shape_packages["outer"], max_batch_size=4, max_tensor_bytes=limit)
    assert replica.plan.batches
    rows = [torch.randn(1, 64) for _ in range(4)]
    requests = [replica.checked_inputs(safetensors_torch.save({"x": x})) for x in rows]  # each fits alone
    handle_batch = type(replica).predict_batch.__wrapped__  # the batch handler as Serve calls it, without Ray
    results = asyncio.run(handle_batch(replica, requests))
    assert (replica.counters["batches"], replica.counters["largest_batch"]) == (4, 1)
    for x, (y,) in zip(rows, results):
        assert torch.equal(y, x[:, :, None] * x[:, None, :])
    pairs = deployment.ProgramReplica(shape_packages["outer"], max_batch_size=4, max_tensor_bytes=limit)
    asyncio.run(handle_batch(pairs, requests[:2]))  # two rows fit: one call
    assert (pairs.counters["batches"], pairs.counters["largest_batch"]) == (1, 2)


def test_lowering_records_only_tensor_sizes_the_runtime_can_read_back():
    """A size past the runtime's expression grammar (an exponent past 8) would make check_package and every replica
    refuse the package; lowering leaves it out."""
    from aotcuda.lowering.signature import tensor_sizes
    from aotcuda.serving.batching import tensor_size_records

    class Rank9(torch.nn.Module):
        def forward(self, x):
            y = x
            for _ in range(8):
                y = y[..., None] * x
            return y.sum() + x

    ep = torch.export.export(Rank9(), (torch.randn(3),),
                             dynamic_shapes={"x": {0: torch.export.Dim("n", max=64)}}).run_decompositions()
    recorded = tensor_sizes(ep)
    assert recorded and not any("**9" in text for text in recorded) and recorded[0].endswith("**8"), recorded
    assert len(tensor_size_records(recorded, "p.pt2")) == len(recorded)


def test_a_view_is_not_counted_as_a_tensor_the_program_makes():
    """An expanded view holds no memory (a broadcast attention mask, x[:, None].expand(n, n, d)): counted as n·n·d
    elements, it would refuse with 400 requests whose program allocates n·d (review 11 found the over-count)."""
    from aotcuda.lowering.signature import tensor_sizes

    class Broadcast(torch.nn.Module):
        def forward(self, x):
            return x[:, None, :].expand(x.shape[0], x.shape[0], x.shape[1]).amax(1) + 1

    ep = torch.export.export(Broadcast(), (torch.randn(5, 3),),
                             dynamic_shapes={"x": {0: torch.export.Dim("n", max=4096)}}).run_decompositions()
    assert any(node.target == torch.ops.aten.expand.default for node in ep.graph.nodes)
    recorded = tensor_sizes(ep)
    assert recorded and not any("**2" in text for text in recorded), recorded


def test_stats_name_the_batch_dim_as_the_user_gave_it(served_block, monkeypatch):
    """A new user's GET /stats said "batching": "s52", torch's symbol for the batch dim, which no user wrote. It
    is the name the dim was lowered with (Dim("batch") here; --dynamic x:0:1:64:batch on the command line), and
    null without batching. Ray's replica context stands in."""
    import types

    monkeypatch.setattr(deployment.serve, "get_replica_context", lambda: types.SimpleNamespace(replica_tag="r1"))
    monkeypatch.setattr(deployment.ray, "get_gpu_ids", lambda: [])
    batching = deployment.ProgramReplica(served_block[0], max_batch_size=4).stats()
    assert batching["batching"] == "batch" and batching["replica"] == "r1"
    assert set(batching) == {"replica", "pid", "device", "gpu_ids", "batching", "requests", "rejected", "timed_out",
                             "not_run", "cancelled", "batches", "batched_requests", "rows", "largest_batch"}
    from pathlib import Path

    documented = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text()
    assert [field for field in batching if f"  | `{field}` |" not in documented] == []  # each in the /stats table
    assert deployment.ProgramReplica(served_block[0]).stats()["batching"] is None


def test_a_request_holding_an_argument_fixed_at_lowering_is_told_to_leave_it_out(fixed_scale_package):
    """A new user (2026-12-06, second): a request that held the fixed argument `scale` (the lowered value, too) was
    answered `400: unknown input(s) 'scale'`. It is named as an argument fixed at lowering, with its value, and to be
    left out; a request without it is served."""
    from aotcuda.serving.codec import RequestError

    replica = deployment.ProgramReplica(fixed_scale_package)
    x = torch.randn(3, 4)
    for scale in (torch.tensor(0.5), torch.tensor(2.0)):
        with pytest.raises(RequestError, match=r"^'scale' \(the program computes with 0.5\) is an argument fixed at "
                                               r"lowering, no part of a request: leave it out \(the program takes 'x'"):
            replica.checked_inputs(safetensors_torch.save({"x": x, "scale": scale}))
    with pytest.raises(RequestError, match=r"fixed at lowering.*; unknown input\(s\) 'y'"):
        replica.checked_inputs(safetensors_torch.save({"x": x, "scale": torch.tensor(0.5), "y": x.clone()}))
    (inputs,) = [replica.checked_inputs(safetensors_torch.save({"x": x}))]
    handle_batch = type(replica).predict_batch.__wrapped__
    ((y,),) = asyncio.run(handle_batch(replica, [inputs]))
    torch.testing.assert_close(y, x * 0.5)


class RowsOfAMask(torch.nn.Module):
    """mask [b] bool -> rows of a 2-row table (an index lowering cannot bound: served with allow_unchecked_indices)."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(2, 4))

    def forward(self, mask):
        return self.table[mask.long()]


@pytest.fixture(scope="module")
def mask_rows_package(tmp_path_factory):
    import aotcuda

    path = str(tmp_path_factory.mktemp("mask_rows") / "mask_rows.pt2")
    with pytest.warns(UserWarning, match="mask"):
        aotcuda.lower(RowsOfAMask(), (torch.tensor([True, False]),), device="cpu", package_path=path,
                      dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)},))
    return path


def test_a_request_bool_holding_a_byte_but_0_or_1_is_refused(mask_rows_package):
    """A safetensors BOOL tensor is bytes as sent: a request's mask bytes of 255 and 7 were read by the program as rows
    255 and 7 of a 2-row table (where eager reads True, row 1), and the answer carried the replica's memory past the
    weights (the breaker, 2026-12-06, evening). Refused as the request arrives, for a program on any device."""
    replica = deployment.ProgramReplica(mask_rows_package, allow_unchecked_indices=True)
    body = bytearray(safetensors_torch.save({"mask": torch.tensor([True, False, True, True])}))
    data = body.rindex(bytes([1, 0, 1, 1]))
    body[data + 2:data + 4] = bytes([255, 7])
    status, error, text = predict(replica, bytes(body))
    assert (status, error) == (400, "InputError"), text[:300]  # as the program's other checks of a request answer
    assert b"input 'mask' (#0) is a torch.bool tensor holding the byte 255 at (2,)" in text
    assert replica.counters["batches"] == 0  # nothing ran
    mask = torch.tensor([True, False, True])
    status, _, answer = predict(replica, safetensors_torch.save({"mask": mask}))  # the next one is served
    assert status == 200
    torch.testing.assert_close(safetensors_torch.load(answer)["output_0"], replica.program(mask))
