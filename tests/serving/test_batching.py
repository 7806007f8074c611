"""aotcuda.serving's pure parts, without Ray: the batch plan, combining and splitting, the wire format."""

from __future__ import annotations

import pytest
import torch

from aotcuda.errors import ServingConfigError
from aotcuda.runtime.checks import DimSpec, TensorSpec
from aotcuda.serving.batching import BatchPlan, combine, serving_plan, split_rows
from aotcuda.serving.codec import RequestError, decode_inputs, encode_outputs, unsupported_dtypes
from least_time import least_cpu_seconds

safetensors_torch = pytest.importorskip("safetensors.torch", reason="aotcuda[serve] is not installed")


def spec(name: str, *dims, dtype=torch.float32) -> TensorSpec:
    return TensorSpec(name, dtype, "cpu", tuple(DimSpec(size=d) if isinstance(d, int) else
                                                DimSpec(expr=d, min=1, max=16) for d in dims))


@pytest.mark.parametrize("inputs, outputs, symbol", [
    ((spec("x", "b", 16),), (spec("y", "b", 4),), "b"),
    ((spec("x", "b", 16), spec("m", "b", "s")), (spec("y", "b", 4), spec("z", "b")), "b"),
    ((spec("x", 2, 16),), (spec("y", 2, 4),), None),                   # static batch
    ((spec("x", "b", 16),), (spec("y", 4),), None),                    # an output without the batch dim
    ((spec("x", "b", 16), spec("w", "c", 16)), (spec("y", "b"),), None),  # two symbols at dim 0
    ((spec("x", "b", 16),), (spec("y", "2*b"),), None),               # dim 0 an expression
    ((spec("x", "b", "b"),), (spec("y", "b"),), None),                 # the batch symbol elsewhere
    ((spec("x", "b", 16),), (spec("y"),), None),                       # a 0-d output
    ((), (), None),
])
def test_batch_plan_finds_a_shared_dim_zero_symbol_or_says_why_not(inputs, outputs, symbol):
    plan = BatchPlan.from_specs(inputs, outputs)
    assert plan.symbol == symbol
    assert plan.batches == (symbol is not None)
    assert (plan.reason == "") == (symbol is not None)
    if symbol:
        assert plan.max_rows == 16


def test_batch_plan_names_the_batch_dim_as_the_user_did():
    batch = DimSpec(expr="s52", min=1, max=16, user_expr="batch")  # torch's symbol, and the user's Dim name
    named = TensorSpec("x", torch.float32, "cpu", (batch, DimSpec(size=4)))
    assert BatchPlan.from_specs((named,), (named,)).dim_name == "batch"
    assert BatchPlan.from_specs((spec("x", "b", 16),), (spec("y", "b", 4),)).dim_name is None  # no name recorded


def test_batching_a_program_without_a_batch_dim_is_refused_up_front():
    with pytest.raises(ServingConfigError, match="cannot be batched.*max batch size 1"):
        serving_plan((spec("x", 2, 16),), (spec("y", 2),), 8, "m.pt2")
    assert not serving_plan((spec("x", 2, 16),), (spec("y", 2),), 1, "m.pt2").batches


def test_an_output_without_the_batch_dim_is_named_and_no_relowering_is_advised():
    """A new user served a model returning (relu(l(x)) + y.sum(-1), x.mean()), its inputs x and y lowered with one
    Dim at dim 0, with --max-batch-size 4: the refusal said "not every input and output has the same dynamic dim 0"
    and hinted to lower it again with --dynamic NAME:0:1:MAX:batch for every input, which every input already had.
    The 0-d output is why: it is named, and lowering again with a batch dim is not advised (it cannot help)."""
    batch = DimSpec(expr="s0", min=1, max=64, user_expr="batch")
    inputs = (TensorSpec("x", torch.float32, "cpu", (batch, DimSpec(size=16))),
              TensorSpec("y", torch.float32, "cpu", (batch, DimSpec(size=3))))
    outputs = (TensorSpec("out[0]", torch.float32, "cpu", (batch, DimSpec(size=32))),
               TensorSpec("out[1]", torch.float32, "cpu", ()))
    with pytest.raises(ServingConfigError, match=r"cannot be batched: output 'out\[1\]' \(shape \(\)\) does not have "
                                                 r"the inputs' batch dim \(batch\) at dim 0") as refused:
        serving_plan(inputs, outputs, 4, "m1.pt2")
    assert "every input" not in str(refused.value)
    assert [(a.keyword, a.value, a.relower) for a in refused.value.advice] == [("max_batch_size", 1, False)]
    plan = BatchPlan.from_specs((spec("x", "b", 16), spec("w", 2, 16)), (spec("y", "b"),))  # an input is why
    assert plan.dim_zero and "for every input" in plan.reason


def test_a_program_that_writes_its_state_is_refused_batching_for_its_state_first():
    """A new user served docs/usage.md's Rotate (its input angle [64] has no batch dim) with --max-batch-size 2 and
    was told its dim 0 was the reason, with a hint to lower it again with a batch dim: futile, since a program
    that writes its state is never batched. The state is the reason, and the only fix is max batch size 1."""
    rotate = ((spec("z", "b", 64, 2), spec("angle", 64)), (spec("out0", "b", 64, 2), spec("out1", "b", 64)))
    for inputs, outputs in (rotate, ((spec("x", "b", 16),), (spec("y", "b", 4),))):  # batchable dims or not
        with pytest.raises(ServingConfigError, match=r"writes its state at every call \('state'\).*never batched"
                                                     r".*max batch size 1") as refused:
            serving_plan(inputs, outputs, 2, "rotate.pt2", state_written=["state"])
        assert "dim 0" not in str(refused.value)
        assert [(a.keyword, a.value, a.relower) for a in refused.value.advice] == [("max_batch_size", 1, False)]
    assert not serving_plan(*rotate, 1, "rotate.pt2", state_written=["state"]).batches  # one request a call: served


def test_a_program_lowering_found_mixing_its_batch_rows_is_refused_batching():
    """break40 (2026-12-07): ``x - x.mean(0)`` has every shape batching wants, and was batched: alice's row [1, 2, 3]
    answered [0, 0, 0] alone and [-49.5, -99, -148.5] beside mallory's [100, 200, 300], from which mallory's row
    follows. The signature's rows_mixed (lowering's probe, lowering/batch_rows.py) refuses batching; one request a
    call still serves, and a package without the record (older aotcuda, or not probed) batches as before."""
    inputs, outputs = (spec("x", "b", 3),), (spec("y", "b", 3),)
    with pytest.raises(ServingConfigError, match=r"cannot be batched: an output's row depends on other rows.*"
                                                 r"other clients' rows.*max batch size 1") as refused:
        serving_plan(inputs, outputs, 8, "centered.pt2", rows_mixed=True)
    assert [(a.keyword, a.value, a.relower) for a in refused.value.advice] == [("max_batch_size", 1, False)]
    serving_plan(inputs, outputs, 1, "centered.pt2", rows_mixed=True)  # one request a call: served
    for record in (False, None, "yes", 1):  # only a JSON true refuses: a hostile record allows nothing new
        assert serving_plan(inputs, outputs, 8, "centered.pt2", rows_mixed=record).batches


def test_a_dtype_safetensors_cannot_carry_is_refused_up_front():
    assert unsupported_dtypes([torch.float32, torch.complex128, torch.bfloat16]) == [torch.complex128]
    with pytest.raises(ServingConfigError, match="complex128"):
        serving_plan((spec("x", "b", dtype=torch.complex128),), (spec("y", "b"),), 1, "m.pt2")


def test_chunks_group_equal_trailing_shapes_and_respect_the_row_limit():
    plan = BatchPlan("b", max_rows=5)
    rows = [2, 2, 2, 1, 3, 1]
    trailing = [4, 4, 4, 4, 7, 4]
    requests = [[torch.zeros(n, t)] for n, t in zip(rows, trailing)]
    batches = plan.chunks(requests)
    assert sorted(i for batch in batches for i in batch) == list(range(len(requests)))
    for batch in batches:
        assert len({trailing[i] for i in batch}) == 1
        assert sum(rows[i] for i in batch) <= 5
        assert batch == sorted(batch)
    assert batches == [[0, 1], [2, 3, 5], [4]]


def test_combine_then_split_gives_each_request_its_rows_back():
    requests = [[torch.randn(n, 3), torch.randn(n, 2, 2)] for n in (1, 3, 2)]
    flat, counts = combine(requests)
    assert counts == [1, 3, 2] and [t.shape[0] for t in flat] == [6, 6]
    # a row-wise program: outputs are functions of each row alone
    outputs = [flat[0] * 2, flat[1].sum(-1)]
    for request, (doubled, summed) in zip(requests, split_rows(outputs, counts)):
        torch.testing.assert_close(doubled, request[0] * 2, rtol=0, atol=0)
        torch.testing.assert_close(summed, request[1].sum(-1), rtol=0, atol=0)


def test_decode_takes_the_inputs_by_name_in_the_containers_order():
    x, mask = torch.randn(2, 3), torch.ones(2, dtype=torch.bool)
    body = safetensors_torch.save({"mask": mask, "x": x})
    decoded = decode_inputs(body, ["x", "mask"], max_bytes=1 << 20)
    assert torch.equal(decoded[0], x) and torch.equal(decoded[1], mask)


@pytest.mark.parametrize("body, message", [
    (b"not a safetensors file", "not a safetensors file"),
    (b"", "not a safetensors file"),
    ("missing", "missing input.*'mask'.*the program takes 'x', 'mask'"),
    ("unknown", "unknown input.*'y'"),
    ("large", "more than this server's limit"),
])
def test_decode_refuses_bad_bodies_with_the_reason(body, message):
    if body == "missing":
        body = safetensors_torch.save({"x": torch.zeros(1)})
    elif body == "unknown":
        body = safetensors_torch.save({"x": torch.zeros(1), "mask": torch.zeros(1), "y": torch.zeros(1)})
    elif body == "large":
        body = safetensors_torch.save({"x": torch.zeros(4096), "mask": torch.zeros(1)})
    with pytest.raises(RequestError, match=message):
        decode_inputs(body, ["x", "mask"], max_bytes=4096)


def test_encode_writes_outputs_in_slots_that_share_storage():
    base = torch.randn(4, 3)
    outputs = [base, base, base[1:3], torch.arange(3)]  # one tensor twice, and a view of it
    decoded = safetensors_torch.load(encode_outputs(outputs))
    assert sorted(decoded) == ["output_0", "output_1", "output_2", "output_3"]
    for index, expected in enumerate(outputs):
        assert torch.equal(decoded[f"output_{index}"], expected)


def _header_only(header: dict) -> bytes:
    import json
    import struct

    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text


def test_a_body_of_many_names_is_refused_from_its_header_alone_and_briefly():
    """Found by a breaker: a 56 MiB body of 1,000,000 zero-size tensors held a replica's event loop 25 s
    (every tensor built before the names were checked) and the 400 echoed every name (10 MiB)."""

    def body_of(count: int) -> bytes:
        names = {f"n{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(count)}
        return _header_only({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, **names}) + b"\0" * 4

    for count, says in ((10_000, r"unknown input\(s\) 'n0', 'n1', 'n2', 'n3', 'n4' and 9995 more"),
                        (1_000_000, r"its header claims \d+ bytes; a header of this program's inputs is at most")):
        body = body_of(count)

        def refused():
            with pytest.raises(RequestError, match=says) as caught:
                decode_inputs(body, ["x"], max_bytes=1 << 30)
            return caught

        # CPU time, least of three, the collector off (least_time.py): ~0.05 s here, one wall-clock reading 0.4 s
        took, caught = least_cpu_seconds(refused)
        assert took < 2.0 and len(str(caught.value)) < 500, took


@pytest.mark.parametrize("body, says", [
    (b"\x01\x02", "shorter than its 8-byte header length"),
    ((1 << 40).to_bytes(8, "little") + b"{}", "its header claims"),
    ((2).to_bytes(8, "little") + b"[]", "not a JSON object"),
    ((4000).to_bytes(8, "little") + b"[" * 2000 + b"]" * 2000, "nests deeper"),
    # (review 7) the depth scan read UTF-8 where json.loads(bytes) decodes UTF-16: both read one UTF-8 str now
    ((8004).to_bytes(8, "little") + ('["\u2200",' + "[" * 2000 + "]" * 2000 + "]").encode("utf-16-le")[:8004],
     "not a safetensors file"),
])
def test_a_body_that_is_not_a_safetensors_file_is_refused_before_it_is_parsed(body, says):
    with pytest.raises(RequestError, match=says):
        decode_inputs(body, ["x"], max_bytes=1 << 20)


@pytest.mark.parametrize("shape", [(0, 1 << 28), (1 << 40, 0), (0,) * 3 + (1 << 20,), (0, 129), (0, 16, 16)])
def test_an_empty_tensor_of_more_elements_than_its_request_body_is_refused(shape):
    """Found by a breaker (review 10): an empty tensor's dims cost no bytes, so a 112-byte body carried x of shape
    (0, 2**28), which a program summing over dim 0 (no max on dim 1) answered with 1 GiB in 1.3 s (2**32: 16 GiB).
    A tensor with elements has at most as many as its bytes: an empty one whose other dims hold more elements than
    the body has bytes is refused, and a real tensor as large as the body is not."""
    body = safetensors_torch.save({"x": torch.empty(shape)})
    held = 1
    for size in shape:
        held *= size or 1
    assert len(body) < 200
    with pytest.raises(RequestError, match=rf"input 'x' has shape .*: an empty tensor whose other dims hold {held} "
                                           rf"elements, in a request body of {len(body)} bytes.*send the tensor's "
                                           "real shape"):
        decode_inputs(body, ["x"], max_bytes=1 << 30)
    for kept in (torch.empty(0, 8), torch.zeros(len(body), dtype=torch.uint8), torch.zeros(1 << 16, dtype=torch.bool)):
        carried = safetensors_torch.save({"x": kept})
        assert decode_inputs(carried, ["x"], max_bytes=1 << 30)[0].shape == kept.shape


def test_a_shape_of_many_dims_is_refused_with_a_bounded_message():
    """Found by a breaker: a request of one tensor with 480,000 dims got a 1.44 MB 400 that echoed its whole
    shape. The runtime's message shows a few dims, and every error answer of a replica is bounded
    (deployment._error_response), whatever the message."""
    from aotcuda.errors import InputError
    from aotcuda.runtime.checks import check_inputs

    import json
    import struct

    header = json.dumps({"x": {"dtype": "F32", "shape": [1] * 480_000, "data_offsets": [0, 4]}}, separators=(",", ":"))
    body = struct.pack("<Q", len(header)) + header.encode() + b"\0" * 4  # under the 1 MiB header bound
    inputs = decode_inputs(body, ["x"], max_bytes=1 << 30)
    with pytest.raises(InputError, match=r"has 480000 dims \(shape \(1, 1, 1, 1, 1, 1, 1, 1, \.\.\.\)\)") as caught:
        check_inputs(inputs, [spec("x", 2, 4)], ["x"], torch.device("cpu"), 1)
    assert len(str(caught.value)) < 500
    deployment = pytest.importorskip("aotcuda.serving.deployment")
    answer = deployment._error_response(InputError("x" * 1_000_000), 400)
    assert answer.status_code == 400 and len(answer.body) < deployment.MAX_ERROR_CHARS + 100
    assert answer.body.endswith(b"(1000000 characters)") and answer.headers["x-aotcuda-error"] == "InputError"


def dims(name: str, *dims) -> TensorSpec:
    """A spec of explicit DimSpecs (sizes as ints)."""
    return TensorSpec(name, torch.float32, "cpu", tuple(DimSpec(size=d) if isinstance(d, int) else d for d in dims))


BATCH = DimSpec(expr="s0", min=1, max=16)


@pytest.mark.parametrize("output_dim, said", [
    (DimSpec(expr="u0", min=1, max=512), "dim 1 (u0) is data-dependent"),        # lengths.max().item(), bounded
    (DimSpec(expr="Max(1, u0)", min=1, max=512), "is data-dependent"),
    (DimSpec(expr="s5", min=1, max=16), "dim 1 (s5) is not set by the inputs' dims past dim 0"),
])
def test_an_output_dim_the_inputs_other_dims_do_not_set_refuses_batching(output_dim, said):
    """Found by a breaker: from_specs looked at the outputs' dim 0 only, so a program whose mask is as wide as the
    largest length in the batch (an unbacked u0) batched, and alice's answer took mallory's width (her length)."""
    plan = BatchPlan.from_specs((dims("lengths", BATCH),), (dims("out", BATCH, output_dim),))
    assert not plan.batches and said in plan.reason
    with pytest.raises(ServingConfigError, match="cannot be batched.*" + said.split(" (")[0]):
        serving_plan((dims("lengths", BATCH),), (dims("out", BATCH, output_dim),), 8, "mask.pt2")
    # an output dim the inputs' other dims set still batches
    seq = DimSpec(expr="s1", min=1, max=16)
    ok = BatchPlan.from_specs((dims("x", BATCH, seq),), (dims("y", BATCH, DimSpec(expr="2*s1", min=2, max=32)),))
    assert ok.batches, ok.reason


def test_an_output_dim_from_an_inputs_values_without_a_bound_is_refused_unless_allowed():
    """Found by a breaker: lengths=[2**31] (8 bytes of a request) made a replica allocate 2 GiB; the signature
    records the size (u0) with max null."""
    unbounded = (dims("lengths", BATCH),), (dims("out", BATCH, DimSpec(expr="u0", min=1, max=None)),)
    with pytest.raises(ServingConfigError, match=r"output 'out' dim 1 is u0.*data-dependent.*no upper bound.*"
                                                 r"torch._check\(n <= N\).*allow_unbounded_outputs=True") as refused:
        serving_plan(*unbounded, 1, "mask.pt2")
    assert [advice.keyword for advice in refused.value.advice] == ["allow_unbounded_outputs"]
    assert not serving_plan(*unbounded, 1, "mask.pt2", allow_unbounded_outputs=True).batches
    bounded = unbounded[0], (dims("out", BATCH, DimSpec(expr="u0", min=1, max=512)),)
    assert not serving_plan(*bounded, 1, "mask.pt2").batches  # served, one request a call


@pytest.mark.parametrize("low, high, batches", [
    ({"expr": "-s0"}, {"expr": "s0 - 1"}, False),   # x[ids] over x's batch dim
    (0, {"expr": "4*s0 - 1"}, False),               # over a flattened batch
    (0, {"expr": "s1 - 1"}, True),                  # a gather along another dim
    (0, 15, True),                                  # an embedding's table
    (None, {"expr": "s1 - 1"}, True),
])
def test_an_index_range_over_the_batch_symbol_refuses_batching(low, high, batches):
    """Found by a breaker: ids with the range [-s0, s0 - 1] (x[ids], x [b, 4]) batched: over a batch that range is
    the batch's rows, so one request's ids read another request's row."""
    from aotcuda.runtime.index_ranges import IndexRange

    seq = DimSpec(expr="s1", min=1, max=16)
    inputs, outputs = (dims("ids", BATCH, seq),), (dims("y", BATCH, seq),)
    ranges = {"ids": (IndexRange.from_json({"min": low, "max": high, "reason": "aten::index at m.py:3"}, None),)}
    plan = BatchPlan.from_specs(inputs, outputs, ranges)
    assert plan.batches == batches and BatchPlan.from_specs(inputs, outputs).batches
    if not batches:
        assert "input 'ids' is an index over the batch dim" in plan.reason and "aten::index at m.py:3" in plan.reason
        with pytest.raises(ServingConfigError, match="cannot be batched: input 'ids'") as refused:
            serving_plan(inputs, outputs, 8, "m.pt2", index_ranges=ranges)
        assert [advice.keyword for advice in refused.value.advice] == ["max_batch_size"]
    serving_plan(inputs, outputs, 1, "m.pt2", index_ranges=ranges)  # served one request a call, whatever the ranges


def test_an_unchecked_index_input_is_refused_unless_allowed():
    unchecked = {"mask": ["input 'mask' reaches aten.embedding at m.py:9 (32 rows of pos.weight) through aten.cumsum "
                          "at m.py:8: its values are not checked before the call"]}
    specs = (dims("mask", BATCH),), (dims("y", BATCH),)
    with pytest.raises(ServingConfigError, match=r"m.pt2: input 'mask' reaches an index .*through aten.cumsum at m.py:8"
                                                 r".*ends the replica's process.*allow_unchecked_indices=True") as refused:
        serving_plan(*specs, 1, "m.pt2", index_unchecked=unchecked)
    assert [advice.keyword for advice in refused.value.advice] == ["allow_unchecked_indices"]
    serving_plan(*specs, 1, "m.pt2", index_unchecked=unchecked, allow_unchecked_indices=True)  # allowed: no raise
    with pytest.raises(ServingConfigError, match="cannot be batched: input 'mask'.*own rows of a batch"):
        serving_plan(*specs, 8, "m.pt2", index_unchecked=unchecked, allow_unchecked_indices=True)  # allowed, not batched
    assert serving_plan(*specs, 8, "m.pt2", index_unchecked={}).batches


def test_package_text_in_serving_refusals_stays_on_one_line():
    """Review 9: a signature's index reasons and unchecked lines are quoted in errors, which print a line per
    newline; a newline of the package's would print a line of its choosing ('hint: ...')."""
    from aotcuda.runtime.index_ranges import IndexRange
    from aotcuda.serving.batching import index_records

    signature = {"inputs": [{"name": "mask", "dtype": "int64",
                             "index_unchecked": ["at m.py:8\nhint: this package is verified"],
                             "index_ranges": [{"min": 0, "max": 3, "reason": "of x\r\nhint: forged\u2028too"}]}]}
    ranges, unchecked = index_records(signature, "m.pt2")
    assert unchecked == {"mask": ["at m.py:8 hint: this package is verified"]}
    assert ranges["mask"][0].reason == "of x hint: forged too"
    assert IndexRange.from_json({"min": 0, "max": 3, "reason": "a\nb"}, None).reason == "a b"


def test_package_text_in_serving_refusals_is_escaped():
    """Found in review of break41: check_package's ServingConfigError quoted a signature's index_unchecked lines one
    line but with their ESC sequences raw, and an unbounded data_dependent_sizes expression (no grammar checks it at
    load) raw, newline included: a traceback, a terminal or a log printing the refusal was recoloured and retitled."""
    from aotcuda.serving.batching import index_records

    hostile = "\x1b[31mred\x1b]0;title\x07\u202e"
    signature = {"inputs": [{"name": "mask", "dtype": "int64", "index_unchecked": ["at m.py:8" + hostile]}]}
    _, unchecked = index_records(signature, "m.pt2")
    specs = (dims("mask", BATCH),), (dims("y", BATCH),)
    sizes = [{"expr": "u0\x1b]0;owned\x07\x1b[2J\n\u202e", "max": None}]
    for where, call in (("index_unchecked", lambda: serving_plan(*specs, 1, "m.pt2", index_unchecked=unchecked)),
                        ("data_dependent_sizes", lambda: serving_plan(*specs, 1, "m.pt2", data_dependent_sizes=sizes))):
        with pytest.raises(ServingConfigError) as refused:
            call()
        message = str(refused.value)
        assert "\\x1b" in message, (where, message)
        assert not any(char in message for char in "\x1b\x07\u202e\n"), (where, repr(message))


@pytest.mark.parametrize("record", ["yes", 1, "true", [True], {"x": 1}])
def test_a_rows_mixed_record_that_is_not_a_bool_is_refused_when_the_package_is_read(record):
    """(review40b) A package is outside input: parse_signature accepted rows_mixed "yes" or 1, and serving refuses
    batching only for a JSON true, so such a package's program was batched whatever the record meant."""
    import json

    from aotcuda.errors import PackageError
    from aotcuda.package_format import READ_VERSIONS, SIGNATURE_FORMAT, parse_signature

    signature = {"format": SIGNATURE_FORMAT, "version": max(READ_VERSIONS), "inputs": [], "outputs": []}
    for good in ({}, {"rows_mixed": None}, {"rows_mixed": True}, {"rows_mixed": False, "rows_not_probed": "why"}):
        parse_signature(json.dumps({**signature, **good}).encode(), "sig.json", "p.pt2")
    with pytest.raises(PackageError, match=r"rows_mixed is .*, not true, false or null"):
        parse_signature(json.dumps({**signature, "rows_mixed": record}).encode(), "sig.json", "p.pt2")
    with pytest.raises(PackageError, match="rows_not_probed is a"):
        parse_signature(json.dumps({**signature, "rows_not_probed": [record]}).encode(), "sig.json", "p.pt2")
    with pytest.raises(PackageError, match="rows_not_probed is 50000 characters"):  # review40d: 50 KB was read
        parse_signature(json.dumps({**signature, "rows_not_probed": "A" * 50_000}).encode(), "sig.json", "p.pt2")


def test_a_refusal_of_batching_says_where_the_graph_found_the_rows_mixed_with_the_packages_text_escaped():
    """(rows41) lowering's graph walk records where rows mix (rows_graph_reason); serve's refusal says so, not that the
    probe ran (it did not), and the package's text reaches the terminal escaped (a reason of ESC sequences)."""
    from aotcuda.serving.batching import graph_rows_reason

    inputs, outputs = (spec("x", "b", 4),), (spec("y", "b", 4),)
    signature = {"rows_mixed": True, "rows_graph": "mixes",
                 "rows_graph_reason": "aten.amax.default computes along the batch dim (m.py:3)\x1b[2J"}
    with pytest.raises(ServingConfigError) as caught:
        serving_plan(inputs, outputs, 8, "gated.pt2", rows_mixed=True, rows_found=graph_rows_reason(signature))
    assert "found it in the program's graph: aten.amax.default computes along the batch dim (m.py:3)\\x1b[2J" \
        in str(caught.value)
    assert "\x1b" not in str(caught.value)
    assert graph_rows_reason({**signature, "rows_graph": "kept apart"}) is None
    with pytest.raises(ServingConfigError, match="lowering ran it on the example inputs"):
        serving_plan(inputs, outputs, 8, "centered.pt2", rows_mixed=True)


@pytest.mark.parametrize("record", [{"rows_graph": "proved"}, {"rows_graph": True},
                                    {"rows_graph": "mixes", "rows_mixed": False}, {"rows_graph": "mixes"},
                                    {"rows_graph_reason": 3}, {"rows_graph_reason": "A" * 50_000}])
def test_a_rows_graph_record_that_aotcuda_does_not_write_is_refused_when_the_package_is_read(record):
    """(rows41) The graph walk's verdict (lowering/batch_row_flow.py) is read from a package, outside input: a verdict
    that is not one of the three, a "mixes" beside a rows_mixed that is not true (serving reads rows_mixed alone), or a
    reason that is no bounded string is refused; the records lowering writes, and packages without them, load."""
    import json

    from aotcuda.errors import PackageError
    from aotcuda.package_format import READ_VERSIONS, SIGNATURE_FORMAT, parse_signature

    signature = {"format": SIGNATURE_FORMAT, "version": max(READ_VERSIONS), "inputs": [], "outputs": []}
    for good in ({}, {"rows_mixed": False, "rows_graph": "kept apart"},
                 {"rows_mixed": True, "rows_graph": "mixes", "rows_graph_reason": "aten.mean.dim ... (m.py:3: ...)"},
                 {"rows_mixed": None, "rows_not_probed": "why", "rows_graph": "not proved", "rows_graph_reason": "op"}):
        parse_signature(json.dumps({**signature, **good}).encode(), "sig.json", "p.pt2")
    with pytest.raises(PackageError, match="rows_graph"):
        parse_signature(json.dumps({**signature, **record}).encode(), "sig.json", "p.pt2")
