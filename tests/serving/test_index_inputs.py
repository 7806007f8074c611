"""Programs whose integer inputs reach an index, served: an index over the batch dim is never batched, and an input
whose index values go unchecked is refused unless the deployer allows it. No Ray: the checks run before Ray starts
(server.check_package) and in the replica (ProgramReplica's plan, built here without a cluster)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

import aotcuda
from aotcuda.errors import ServingConfigError
from aotcuda.runtime.package import read_signature
from serving_cases import RAY_INIT_REACHED, serve_without_ray

serving = pytest.importorskip("aotcuda.serving")
from aotcuda.serving.batching import index_records, serving_plan  # noqa: E402 - after the skip
from aotcuda.serving.deployment import ProgramReplica  # noqa: E402
from aotcuda.serving.server import ServeOptions, check_package  # noqa: E402


def test_an_index_over_the_batch_dim_is_never_batched(index_packages):
    """Found by a breaker: x[ids] (x and ids [batch, ...]) served with --max-batch-size 8; batched, alice's ids=[0]
    read mallory's row, and mallory's ids=[-2], refused alone (400, out of range for one row), was accepted. ids'
    recorded range is [-batch, batch - 1]: over a batch, the batch's rows, whatever the values."""
    path = index_packages["rows"]
    (recorded,) = read_signature(path)["inputs"][1]["index_ranges"]
    assert recorded["max"]["expr"].endswith(" - 1") and recorded["min"]["expr"].startswith("-")
    said = (r"cannot be batched: input 'ids' is an index over the batch dim: the values it may hold, \[-batch, "
            r"batch - 1\], depend on the batch size \(aten::index.Tensor over dim 0 \(size batch\) of x, at "
            r"\S*serving_cases.py:\d+: return x\[ids\] \* 1.0\).*another request's rows.*max batch size 1")
    with pytest.raises(ServingConfigError, match=said) as refused:
        check_package(path, ServeOptions(max_batch_size=8))
    # no advice to lower it again with a batch dim: it has one; its own computation is what cannot batch
    assert [(advice.keyword, advice.value) for advice in refused.value.advice] == [("max_batch_size", 1)]
    assert check_package(path, ServeOptions()) == "cpu"
    program = aotcuda.load(path)
    ranges, unchecked = index_records(read_signature(path), path)
    assert list(ranges) == ["ids"] and unchecked == {}
    with pytest.raises(ServingConfigError, match="cannot be batched: input 'ids' is an index over the batch dim"):
        serving_plan(program.input_specs, program.output_specs, 8, path, index_ranges=ranges)
    assert not serving_plan(program.input_specs, program.output_specs, 1, path, index_ranges=ranges).batches
    with pytest.raises(ServingConfigError, match="cannot be batched: input 'ids'"):  # what a replica runs
        ProgramReplica(path, max_batch_size=8)
    assert not ProgramReplica(path).plan.batches
    result = subprocess.run([sys.executable, "-m", "aotcuda", "serve", path, "--max-batch-size", "8", "--port",
                             "18793"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "is an index over the batch dim" in result.stderr, result.stderr[-2000:]
    assert "hint: on the command line, leave out --max-batch-size" in result.stderr
    assert "lower it again" not in result.stderr


def test_indices_within_a_request_still_batch(index_packages):
    """An embedding over a fixed table ([0, 15]) and a gather along t ([0, t - 1]): the requests of a batch agree
    on t, so each range is the one each request has alone."""
    path = index_packages["embed"]
    ranges, _ = index_records(read_signature(path), path)
    assert set(ranges) == {"ids", "pos"}
    assert any(bound is not None and not isinstance(bound, int) for entry in ranges["pos"]
               for bound in (entry.low, entry.high))  # a bound over t
    assert check_package(path, ServeOptions(max_batch_size=8)) == "cpu"
    replica = ProgramReplica(path, max_batch_size=8)
    assert replica.plan.batches and replica.plan.max_rows == 64


def test_an_input_whose_index_values_go_unchecked_is_refused_unless_allowed(index_packages):
    """Found by a breaker: positions from mask.cumsum(-1) - 1 into an embedding, served with no flag; a 5 KB request
    (mask=1000) ended the replica's process (terminate called, SIGABRT; on CUDA a device-side assert breaks the
    context). lower() records mask as index_unchecked; serving refuses it as it refuses an unbounded size."""
    path = index_packages["unchecked"]
    assert "through aten.cumsum" in read_signature(path)["inputs"][1]["index_unchecked"][0]
    said = (r"input 'mask' reaches an index that lowering could not bound.*aten.embedding at \S*serving_cases.py:\d+ "
            r"\(32 rows of pos.weight\) through aten.cumsum.*ends the replica's process.*CUDA context.*position_ids.*"
            r"allow_unchecked_indices=True")
    with pytest.raises(ServingConfigError, match=said) as refused:
        check_package(path, ServeOptions())
    assert [(advice.keyword, advice.value) for advice in refused.value.advice] == [("allow_unchecked_indices", True)]
    assert check_package(path, ServeOptions(allow_unchecked_indices=True)) == "cpu"  # the deployer's choice
    program = aotcuda.load(path)
    assert list(program.index_unchecked) == ["mask"]
    with pytest.raises(ServingConfigError, match="input 'mask' reaches an index"):
        serving_plan(program.input_specs, program.output_specs, 1, path, index_unchecked=program.index_unchecked)
    with pytest.raises(ServingConfigError, match="input 'mask' reaches an index"):  # what a replica runs
        ProgramReplica(path)
    ProgramReplica(path, allow_unchecked_indices=True)  # the deployer's choice
    # allowed to run unchecked, still never batched: nothing shows the index stays within a request's rows
    with pytest.raises(ServingConfigError, match=r"cannot be batched: input 'mask' reaches an index.*own rows") as no:
        check_package(path, ServeOptions(allow_unchecked_indices=True, max_batch_size=8))
    assert [(advice.keyword, advice.value) for advice in no.value.advice] == [("max_batch_size", 1)]
    started = time.monotonic()  # before Ray starts: read from what the command did (serve_without_ray), not the clock
    result = serve_without_ray(path, "--port", "18794", timeout=120)
    assert result.returncode == 1 and RAY_INIT_REACHED not in result.stderr, result.stderr[-2000:]
    assert "input 'mask' reaches an index that lowering could not bound" in result.stderr
    assert "hint: on the command line, --allow-unchecked-indices serves it anyway" in result.stderr
    assert time.monotonic() - started < 90
    shown = subprocess.run([sys.executable, "-m", "aotcuda", "inspect", path], capture_output=True, text=True,
                           timeout=120).stdout
    assert "index values not checked: input 'mask' reaches aten.embedding" in shown
    assert "aotcuda serve refuses it without --allow-unchecked-indices" in shown
    # aotcuda run with a mask past the table: the generated code's own check refuses it (one thread here: no abort),
    # and the error names the unchecked input, without the ~50 lines of C++ stack the generated code prints
    inputs = os.path.join(os.path.dirname(path), "past_the_table.pt")
    torch.save((torch.zeros(1, 4, dtype=torch.long), torch.full((1, 4), 100)), inputs)
    ran = subprocess.run([sys.executable, "-m", "aotcuda", "run", path, "--inputs", inputs], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert ran.returncode == 1 and "index out of bounds" in ran.stderr, ran.stderr[-2000:]
    assert "Likely cause: the values of 'mask' reach an index that lowering could not bound" in ran.stderr
    assert "frame #" not in ran.stderr and "Exception raised from" not in ran.stderr, ran.stderr[:2000]


def test_in_python_the_generated_codes_bounds_check_names_the_unchecked_input_and_the_next_call_runs(index_packages):
    """Sixth new user (2026-12-07): a Wav2Vec2Model lowered with an attention_mask (its values reach index_put_
    through cumsum, unchecked) and called from Python with a mask of 2s got the generated code's own check, in its
    variables: `RuntimeCallError: ... index out of bounds: 0 <= tmp22 < (-1L) + (c10::div_floor_integer(...))`, with no
    word of the mask (only `aotcuda run` named it; eager: `IndexError: index 78 is out of bounds ...`). The Program's
    error now names the input and the op; the next call with good values runs."""
    program = aotcuda.load(index_packages["unchecked"])
    ids = torch.randint(0, 256, (2, 5))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the check throws inside an OpenMP region: with several threads it may abort (see above)
    try:
        with pytest.raises(aotcuda.RuntimeCallError, match="index out of bounds") as caught:
            program(ids, torch.full((2, 5), 100))
    finally:
        torch.set_num_threads(threads)
    notes = getattr(caught.value, "__notes__", [])
    assert any(note.startswith("Likely cause: the values of 'mask' reach an index that lowering could not bound")
               and "aten.embedding" in note and "Eager refuses such values too" in note for note in notes), notes
    mask = torch.ones(2, 5, dtype=torch.long)
    out = program(ids, mask)
    assert out.shape == (2, 5, 8) and torch.isfinite(out).all() and torch.equal(out, program(ids, mask))


def test_positions_clamped_into_the_table_need_no_flag_and_any_mask_runs(index_packages):
    """The fix serving's refusal names: the same positions clamped to the table's rows are in range whatever the
    mask holds, so nothing is unchecked, the program serves (and batches) without a flag, and masks of any values,
    1000s and negatives included, give eager's answer instead of ending the process."""
    from serving_cases import ClampedPositionsFromAMask

    path = index_packages["clamped"]
    assert all("index_unchecked" not in spec and "index_ranges" not in spec for spec in read_signature(path)["inputs"][1:])
    assert check_package(path, ServeOptions(max_batch_size=8)) == "cpu"
    program = aotcuda.load(path)
    assert not program.index_unchecked
    model = ClampedPositionsFromAMask()  # the lowered one's weights (a fixed seed)
    for mask in (torch.full((2, 5), 1000), torch.randint(-10**6, 10**6, (3, 7)), torch.ones(1, 4, dtype=torch.long)):
        ids = torch.randint(0, 256, mask.shape)
        torch.testing.assert_close(program(ids, mask), model(ids, mask), rtol=1e-5, atol=1e-6)


def test_the_command_passes_allow_unchecked_indices_to_serve_package(monkeypatch):
    """The flag reaches ServeOptions (serve_package stands in: no Ray)."""
    from click.testing import CliRunner

    import aotcuda.serving.server as server_module
    from aotcuda.serving.command import serve_command

    seen = []

    def starting(path, options):
        seen.append(options)
        raise KeyboardInterrupt

    monkeypatch.setattr(server_module, "serve_package", starting)
    for flags, allowed in (([], False), (["--allow-unchecked-indices"], True)):
        result = CliRunner().invoke(serve_command, [__file__, *flags])
        assert result.exit_code == 0 and "stopped (SIGINT) while starting" in result.output, result.output
        assert seen.pop().allow_unchecked_indices is allowed


def test_records_load_refuses_are_refused_before_ray_starts(index_packages, tmp_path):
    """Found by a breaker (review 9): index ranges on a float input, or a "complex" field that describes no pair,
    passed check_package and failed only in each replica, once serving had started."""
    import shutil

    from aotcuda.errors import PackageError
    from aotcuda.package_format import write_signature

    for name, edit, said in (
            ("float_ranges", lambda s: s["inputs"][1].update(dtype="float32"), "only integer inputs have index ranges"),
            ("bad_complex", lambda s: s["inputs"][0].update(complex="complex64"), "complex")):
        path = tmp_path / f"{name}.pt2"
        shutil.copy(index_packages["embed"], path)
        signature = read_signature(path)
        edit(signature)
        write_signature(path, signature)
        with pytest.raises(PackageError, match=said):
            check_package(str(path), ServeOptions())
        with pytest.raises(PackageError, match=said):
            aotcuda.load(str(path))  # the same refusal load gives


def test_an_index_refusal_tells_a_client_the_op_not_the_lowering_hosts_source(index_packages):
    """A 400 for a token id out of range carried the signature's reason whole: "... as the index of aten::embedding
    over 16 rows of table.weight, at /home/me/model.py:6: return self.table(ids) ..." (the breaker, 2026-12-06, late):
    the deployer's source path and code, to any client. The client reads the input, the value, the range and the op;
    the replica's log gets the whole message. In-process callers keep the file and line."""
    from safetensors import torch as safetensors_torch

    from test_request_shapes import predict

    path = index_packages["embed"]
    replica = ProgramReplica(path)
    ids, pos, x = torch.tensor([[1, 99, 2]]), torch.zeros(1, 3, dtype=torch.long), torch.randn(1, 3)
    with pytest.raises(aotcuda.InputError, match=r"serving_cases\.py:\d+: return self\.table\(ids\)"):
        replica.program(ids, pos, x)  # in-process: where it was lowered, as before
    status, error, text = predict(replica, safetensors_torch.save({"ids": ids, "pos": pos, "x": x}))
    assert (status, error) == (400, "InputError"), text[:300]
    assert b"'ids' (#0) holds 99 at (0, 1), outside [0, 15], the values it may hold as the index of aten::embedding" in text
    assert b"serving_cases" not in text and b"self.table" not in text and b", at " not in text, text


def test_no_answer_of_a_replica_shows_a_path_of_the_server():
    """The kind of the row above: any error a replica answers with (a C++ error naming the extracted library, a package
    path) shows no absolute path to the client; the replica's log has the message whole."""
    from aotcuda.errors import RuntimeCallError
    from aotcuda.serving.deployment import _error_response

    error = RuntimeCallError("run failed in /tmp/aotcuda-1234/data/aotinductor/model/m.so (at /home/me/model.py:6)")
    answer = _error_response(error, 500, "RuntimeCallError: ")
    assert answer.status_code == 500 and b"/tmp/" not in answer.body and b"/home/" not in answer.body, answer.body
    assert answer.body == (b"RuntimeCallError: run failed in <a path on the server> (at <a path on the server>:6)")
    kept = _error_response(aotcuda.InputError("x / 2 of application/octet-stream at /predict"), 400)
    assert kept.body == b"x / 2 of application/octet-stream at /predict"  # a ratio, a media type, a route: kept


def test_a_request_writes_no_control_character_into_the_replica_log():
    """Found by break41: safetensors' refusal quotes a request's dtype raw (``unknown variant `...` ``), and an error
    holding something like a path is logged whole by the replica ("said in full"): a body whose dtype was
    ``"\\x1b]0;...\\x07\\n(ServeReplica) INFO fake line /etc/x"`` wrote a terminal's escape sequence and a line of its
    own choosing into the replica's log, from any client. The log gets the text with control characters escaped."""
    import json
    import logging
    import struct

    from aotcuda.serving.codec import RequestError, decode_inputs
    from aotcuda.serving.deployment import _error_response

    forged = "\x1b]0;owned\x07\x1b[2J\n(ServeReplica:app) INFO forged line /etc/x \u202e"
    header = json.dumps({"x": {"dtype": forged, "shape": [0, 8], "data_offsets": [0, 0]},
                         "ids": {"dtype": "I64", "shape": [0], "data_offsets": [0, 0]}}).encode()
    with pytest.raises(RequestError) as caught:
        decode_inputs(struct.pack("<Q", len(header)) + header, ["x", "ids"], 1 << 20)
    logged = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: logged.append(record.getMessage())
    logger = logging.getLogger("ray.serve")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        answer = _error_response(caught.value, 400)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert answer.status_code == 400 and len(logged) == 1, logged
    assert not any(char in logged[0] for char in "\x1b\x07\n\u202e"), repr(logged[0])
    assert "\\x1b]0;owned\\x07" in logged[0] and "/etc/x" in logged[0], logged[0]  # escaped, and whole


def test_a_refusal_of_missing_inputs_lists_the_names_cut():
    """Found by review41c: the refusal of a request that lacks inputs listed every input name whole: with 10,000 names
    of 1,024 characters (the most a signature holds) a replica built a 20,560,033-character RequestError for every
    such request before cutting its answer. It lists 20 names, each cut, and says how many more."""
    import struct

    from aotcuda.serving.codec import RequestError, decode_inputs

    names = [f"{index:05d}" + "x" * 1019 for index in range(10_000)]
    with pytest.raises(RequestError) as caught:
        decode_inputs(struct.pack("<Q", 2) + b"{}", names, 1 << 30)
    said = str(caught.value)
    assert len(said) < 5_000, len(said)
    assert "00000xx" in said and "and 9980 more" in said and "missing input(s)" in said
