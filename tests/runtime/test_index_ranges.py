"""An out-of-range index is an InputError before the call, not the end of the process (issue 26, item 1).

An embedding followed by an RMSNorm, lowered once for the CPU (a module fixture): a token id of 500 (vocabulary
128) used to abort the process inside the generated code's OpenMP region ('terminate called after throwing an
instance of c10::Error ... index out of bounds', exit 134). The main tests call it in a child process, so that
a regression fails them instead of killing pytest; the in-process ones (the message, serving) rely on the
check (run on the code before it, they ended pytest itself).
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import aotcuda
from aotcuda.errors import InputError
from runtime_programs import with_edited_signature

VOCAB, WIDTH = 128, 64
HERE = os.path.dirname(os.path.abspath(__file__))


class EmbedNorm(torch.nn.Module):
    """An embedding followed by an RMSNorm: the smallest program whose generated code indexes by an input."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.norm = torch.nn.RMSNorm(WIDTH)

    def forward(self, ids):
        return self.norm(self.embed(ids))


def embed_norm(device="cpu"):
    torch.manual_seed(0)
    return EmbedNorm().eval().to(device)


def lower_embed_norm(path, device="cpu"):
    seq = torch.export.Dim("seq", min=2, max=512)
    ids = torch.randint(0, VOCAB, (2, 16), device=device)
    return aotcuda.lower(embed_norm(device), (ids,), dynamic_shapes=({1: seq},), device=device,
                         package_path=str(path)).package_path


@pytest.fixture(scope="module")
def embed_norm_pt2(tmp_path_factory):
    return lower_embed_norm(tmp_path_factory.mktemp("index_ranges") / "embed_norm.pt2")


# The child: load, call with a bad id at [1, 5] (each value in argv), then a valid call compared with eager.
CHILD = textwrap.dedent("""
    import sys, torch, aotcuda
    sys.path.insert(0, {here!r})
    from test_index_ranges import embed_norm
    device, path, values = sys.argv[1], sys.argv[2], [int(v) for v in sys.argv[3:]]
    program = aotcuda.load(path)
    for value in values:
        ids = torch.randint(0, 128, (2, 64), device=device)
        ids[1, 5] = value
        try:
            program(ids)
            print("NO ERROR", flush=True)
        except aotcuda.InputError as error:
            print("InputError:", error, flush=True)
    ids = torch.randint(0, 128, (2, 64), device=device)
    got, want = program(ids), embed_norm(device)(ids)
    error = ((got - want).norm() / want.norm()).item()
    print("relative error", error, flush=True)
    assert error <= 1e-5, error
""")


def run_child(path, values, device="cpu", env=None):
    script = CHILD.format(here=HERE)
    return subprocess.run([sys.executable, "-c", script, device, str(path), *map(str, values)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def _assert_refused_quietly(child, values):
    assert child.returncode == 0, f"exit {child.returncode}\n{child.stdout}\n{child.stderr[-3000:]}"
    lines = [line for line in child.stdout.splitlines() if line.startswith("InputError:")]
    assert len(lines) == len(values), child.stdout
    for line, value in zip(lines, values):
        assert f"input 'ids' (#0) holds {value} at (1, 5), outside [0, {VOCAB - 1}]" in line, line
        assert "aten::embedding over 128 rows" in line and "test_index_ranges.py" in line, line
    for text in ("c10::Error", "terminate called", "frame #", "index out of bounds", "device-side assert"):
        assert text not in child.stderr, child.stderr[-3000:]
    assert "relative error" in child.stdout


def test_an_out_of_range_id_is_an_input_error_and_the_program_answers_next(embed_norm_pt2):
    _assert_refused_quietly(run_child(embed_norm_pt2, [500, 128]), [500, 128])


def test_negative_ids_are_refused_as_eager_refuses_them(embed_norm_pt2):
    with pytest.raises(IndexError):
        embed_norm()(torch.tensor([[1, -1]]))
    _assert_refused_quietly(run_child(embed_norm_pt2, [-1, -500]), [-1, -500])


def test_in_process_the_error_names_input_range_and_value(embed_norm_pt2):
    program = aotcuda.load(embed_norm_pt2)
    ids = torch.full((2, 8), 3)
    ids[0, 2] = 1000
    with pytest.raises(InputError, match=r"input 'ids' \(#0\) holds 1000 at \(0, 2\), outside \[0, 127\]"):
        program(ids)
    ids[0, 2] = 127  # the edge, and a repeated signature (the accepted-signature fast path checks values too)
    torch.testing.assert_close(program(ids), embed_norm()(ids), rtol=1e-5, atol=1e-6)
    ids[1, 7] = 128
    with pytest.raises(InputError, match="holds 128 at"):
        program(ids)
    assert program.input_specs[0].name == "ids"


def test_the_call_runs_on_the_values_it_checked(embed_norm_pt2, monkeypatch):
    """The caller's ids may change between the check and the generated code's read (another thread, or
    another process writing shared memory): an id checked in range then read out of range aborted the
    process. The call runs on the copy it checked: here the caller's ids change right after the check, to
    other valid ids, and the result is that of the ids checked."""
    from aotcuda.runtime.index_ranges import IndexRangeChecks

    ids = torch.full((2, 8), 3)
    check = IndexRangeChecks.check

    def check_then_rewritten(self, tensors, bindings):
        check(self, tensors, bindings)
        ids.fill_(7)  # a writer elsewhere

    monkeypatch.setattr(IndexRangeChecks, "check", check_then_rewritten)
    with aotcuda.load(embed_norm_pt2) as program:
        torch.testing.assert_close(program(ids), embed_norm()(torch.full((2, 8), 3)), rtol=1e-5, atol=1e-6)
    assert bool((ids == 7).all())


def test_a_refusal_whose_value_is_gone_from_memory_still_reads_clearly():
    from aotcuda.runtime.index_ranges import IndexRangeChecks

    checks = IndexRangeChecks({}, {0: "input 'ids' (#0)"}, torch.device("cpu"))
    with pytest.raises(InputError, match=r"input 'ids' \(#0\) holds 500, outside \[0, 127\]"):
        checks._refuse(torch.zeros(4, dtype=torch.long), 0, 500, 0, 127, "aten::embedding")


def test_the_switch_turns_the_check_off(embed_norm_pt2):
    """AOTCUDA_CHECK_INDEX_RANGES=0 (or load(check_index_ranges=False)): no check, the generated code's own
    assert is met (in a child: it ends the process there, which is what the check prevents)."""
    child = run_child(embed_norm_pt2, [500], env={"AOTCUDA_CHECK_INDEX_RANGES": "0"})
    assert "InputError:" not in child.stdout
    with aotcuda.load(embed_norm_pt2, check_index_ranges=False) as program:
        assert program._index_checks is None
    with aotcuda.load(embed_norm_pt2) as program:
        assert program._index_checks is not None


def test_a_version_1_signature_still_loads_and_runs(embed_norm_pt2, tmp_path):
    """Packages written before the index ranges (signature version 1, no "index_ranges") load as before."""
    def version_1(signature):
        signature["version"] = 1
        for spec in signature["inputs"]:
            spec.pop("index_ranges", None)

    old = with_edited_signature(embed_norm_pt2, tmp_path / "old.pt2", version_1)
    with aotcuda.load(old) as program:
        assert program._index_checks is None
        ids = torch.randint(0, VOCAB, (2, 8))
        torch.testing.assert_close(program(ids), embed_norm()(ids), rtol=1e-5, atol=1e-6)


def test_a_malformed_index_range_is_a_package_error():
    from aotcuda.errors import PackageError
    from aotcuda.runtime.index_ranges import IndexRangeChecks

    signature = {"inputs": [{"name": "ids", "index_ranges": [{"min": "0; import os", "max": 3}]}]}
    with pytest.raises(PackageError, match="index_ranges of input #0 are malformed"):
        IndexRangeChecks.from_signature(signature, 1, torch.device("cpu"), "x.pt2")


@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_on_cuda_no_device_side_assert_and_the_next_call_works(tmp_path, cuda_graphs):
    """On CUDA the generated code's check is a device-side assert, after which the context is unusable:
    the runtime's check comes first (before a CUDA graph's replay too), and the same Program, and CUDA,
    keep working. In a child, so that a regression cannot poison this process's CUDA context."""
    path = lower_embed_norm(tmp_path / "embed_norm_cuda.pt2", device="cuda")
    script = textwrap.dedent(f"""
        import sys, torch, aotcuda
        sys.path.insert(0, {HERE!r})
        from test_index_ranges import embed_norm
        program = aotcuda.load({path!r}, cuda_graphs={cuda_graphs})
        model = embed_norm("cuda")
        for call in range(6):  # warm-ups, the capture, replays: a bad call between each
            ids = torch.randint(0, 128, (2, 64), device="cuda")
            bad = ids.clone()
            bad[1, 5] = 500 if call % 2 else -1
            try:
                program(bad)
                print("NO ERROR", flush=True)
            except aotcuda.InputError as error:
                print("InputError:", error, flush=True)
            got, want = program(ids), model(ids)
            assert ((got - want).norm() / want.norm()).item() <= 1e-5
        torch.cuda.synchronize()
        print(torch.ones(3, device="cuda").sum().item(), "relative error ok", flush=True)
    """)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, f"exit {child.returncode}\n{child.stdout}\n{child.stderr[-3000:]}"
    lines = [line for line in child.stdout.splitlines() if line.startswith("InputError:")]
    assert len(lines) == 6 and "NO ERROR" not in child.stdout, child.stdout
    assert "device-side assert" not in child.stderr and "3.0 relative error ok" in child.stdout


LLAMA_CHILD = textwrap.dedent("""
    import sys, torch, aotcuda
    from tests.models.library.transformers_models import build_llama_causal_lm
    program = aotcuda.load(sys.argv[1])
    ids = torch.randint(0, 128, (2, 12))
    bad = ids.clone()
    bad[0, 3] = 500
    try:
        program(bad, use_cache=False)
        print("NO ERROR", flush=True)
    except aotcuda.InputError as error:
        print("InputError:", error, flush=True)
    torch.manual_seed(0)
    model = build_llama_causal_lm()[0]
    got = program(ids, use_cache=False)["logits"]
    with torch.no_grad():
        want = model(ids, use_cache=False).logits
    error = ((got - want).norm() / want.norm()).item()
    print("relative error", error, flush=True)
    assert error <= 1e-5, error
""")


@pytest.mark.slow
def test_a_tiny_llama_refuses_a_token_id_of_500(tmp_path):
    """The issue's own case: a tiny LlamaForCausalLM package called with a token id of 500 (vocabulary 128)."""
    pytest.importorskip("transformers")
    from tests.models.library.transformers_models import build_llama_causal_lm

    torch.manual_seed(0)
    model, args, dims = build_llama_causal_lm()
    path = aotcuda.lower(model, args, {"use_cache": False}, dynamic_shapes=dims, device="cpu",
                         package_path=str(tmp_path / "llama.pt2")).package_path
    child = subprocess.run([sys.executable, "-c", LLAMA_CHILD, path], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, f"exit {child.returncode}\n{child.stdout}\n{child.stderr[-3000:]}"
    assert "InputError: input 'input_ids' (#0) holds 500 at (0, 3), outside [0, 127]" in child.stdout, child.stdout
    assert "relative error" in child.stdout
    for text in ("c10::Error", "terminate called", "frame #"):
        assert text not in child.stderr, child.stderr[-3000:]


def _serve_twice(path):
    """A serving replica (no Ray cluster: the class itself) answering a request with an id of 500, then a
    valid one: (first response, second response)."""
    import asyncio

    pytest.importorskip("ray")
    from safetensors.torch import save

    from aotcuda.serving.deployment import ProgramReplica

    replica = ProgramReplica(path)
    ids = torch.randint(0, VOCAB, (2, 8))
    bad = ids.clone()
    bad[0, 1] = 500
    return (asyncio.run(replica._predict(_post(save({"ids": bad})))),
            asyncio.run(replica._predict(_post(save({"ids": ids})))))


def _post(body: bytes):
    """A POST /predict request as the replica receives it from Ray Serve's proxy (an ASGI request)."""
    from starlette.requests import Request

    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "path": "/predict", "query_string": b"",
             "headers": [(b"content-length", str(len(body)).encode())]}
    return Request(scope, receive)


def test_serving_answers_400_with_the_input_error_and_the_replica_lives(embed_norm_pt2):
    refused, answered = _serve_twice(embed_norm_pt2)
    assert refused.status_code == 400 and refused.headers["x-aotcuda-error"] == "InputError"
    assert b"holds 500 at (0, 1), outside [0, 127]" in refused.body
    assert answered.status_code == 200


# --- hostile or damaged bounds, at the signature level (no package is compiled) ----------------------------

def _signature(bound=None, dim_names=None, shape_min=2):
    from aotcuda.package_format import SIGNATURE_FORMAT

    signature = {"format": SIGNATURE_FORMAT, "version": 2, "inputs": [
        {"name": "ids", "dtype": "int64", "device": "cpu",
         "shape": [2, {"expr": "s27", "min": shape_min, "max": 512}],
         "index_ranges": [{"min": 0, "max": bound if bound is not None else {"expr": "s27 - 1"},
                           "reason": "a gather along s27 at model.py:3"}]}], "outputs": []}
    if dim_names is not None:
        signature["dim_names"] = dim_names
    return signature


UNREADABLE_BOUNDS = {  # bound → what the PackageError says about it
    "a truncated expression": ({"expr": "s27 +"}, "ends too soon"),
    "a constant divisor of 0": ({"expr": "FloorDiv(s27, 0)"}, "cannot be built"),
    "a modulus of 0": ({"expr": "PythonMod(s27, 0)"}, "cannot be built"),
    "python": ({"expr": "__import__('os').system('true')"}, "unexpected character"),
    "not a string": ({"expr": 12}, "not a string"),
}


@pytest.mark.parametrize("case", list(UNREADABLE_BOUNDS))
def test_an_unreadable_bound_is_refused_when_the_signature_is_read(case):
    from aotcuda.errors import PackageError
    from aotcuda.package_format import parse_signature
    from aotcuda.runtime.shape_expressions import shape_expression

    bound, why = UNREADABLE_BOUNDS[case]
    data = json.dumps(_signature(bound)).encode()
    for reader in (None, shape_expression):  # the grammar alone (lower/inspect) and the runtime's reader
        if reader is None and why == "cannot be built":
            continue  # the grammar reads FloorDiv(s27, 0); the runtime's reader refuses it
        with pytest.raises(PackageError, match=r"x\.pt2'?: aotcuda/signature\.json: inputs\[0\] \('ids'\) "
                                               r"index_ranges\[0\] max expr .*" + why):
            parse_signature(data, "aotcuda/signature.json", "x.pt2", reader)
    if not isinstance(bound["expr"], int):
        with pytest.raises(aotcuda.errors.PackageError, match="index_ranges of input #0 are malformed"):
            IndexRangeChecks_from(_signature(bound))


def IndexRangeChecks_from(signature):
    from aotcuda.runtime.index_ranges import IndexRangeChecks

    return IndexRangeChecks.from_signature(signature, 1, torch.device("cpu"), "x.pt2")


NO_VALUE_BOUNDS = {  # a bound that reads but has no value at s27 = 64: the call is refused, never unchecked
    "a modulus of 0 at these sizes": {"expr": "PythonMod(1000, s27 - 64)"},
    "a divisor of 0 at these sizes": {"expr": "FloorDiv(1000, s27 - 64)"},
    "torch's Mod of a negative value": {"expr": "Mod(s27 - 100, 7)"},
    "a symbol no input gives": {"expr": "s99 - 1"},
}


@pytest.mark.parametrize("case", list(NO_VALUE_BOUNDS))
@pytest.mark.parametrize("value", [3, 500])
def test_a_bound_without_a_value_refuses_the_call(case, value):
    checks = IndexRangeChecks_from(_signature(NO_VALUE_BOUNDS[case]))
    ids = torch.full((2, 64), 3)
    ids[1, 5] = value
    with pytest.raises(InputError, match=r"input 'ids' \(#0\): the upper bound .* could not be evaluated for these "
                                         r"sizes \(s27=64\), so the call is refused"):
        checks.check([ids], {"s27": 64})


def test_a_bound_with_a_value_checks_as_before():
    checks = IndexRangeChecks_from(_signature({"expr": "PythonMod(1000, s27 - 64)"}))
    checks.check([torch.full((2, 70), 4)], {"s27": 70})  # 1000 % 6 = 4
    with pytest.raises(InputError, match=r"holds 5 at \(0, 0\), outside \[0, 4\]"):
        checks.check([torch.full((2, 70), 5)], {"s27": 70})


BAD_DIM_NAMES = {"a number": {"s27": 5}, "a list": {"s27": ["seq"]}, "not an object": ["seq"],
                 "a null": {"s27": None}}


@pytest.mark.parametrize("case", list(BAD_DIM_NAMES))
def test_dim_names_that_are_not_strings_are_a_package_error(case):
    from aotcuda.errors import PackageError
    from aotcuda.package_format import parse_signature

    data = json.dumps(_signature(dim_names=BAD_DIM_NAMES[case])).encode()
    with pytest.raises(PackageError, match=r"aotcuda/signature\.json: dim_names .* is not an object of size symbols"):
        parse_signature(data, "aotcuda/signature.json", "x.pt2")
    if isinstance(BAD_DIM_NAMES[case], dict):  # the checks refuse it too, given the signature directly
        with pytest.raises(PackageError, match="dim_names .* is not an object of strings"):
            IndexRangeChecks_from(_signature(dim_names=BAD_DIM_NAMES[case]))


def test_a_dim_name_too_long_to_show_in_every_expression_is_a_package_error():
    """Found by break41: every expression naming a symbol is shown with its Dim name in its place (the specs' user_expr,
    made at load, inspect and serve's check), so the name's length multiplied with the symbol's uses: a 3.6 MB package
    whose dim name was 2 MiB, used 499 times in one output dim's expression (2,000 characters), took 1 GB more memory
    at load; a signature's expressions may name a symbol 32,000 times. A name longer than any Dim's is refused as the
    signature is read, before a spec is built."""
    from aotcuda.errors import PackageError
    from aotcuda.package_format import parse_signature

    signature = _signature(dim_names={"s27": "seq" * (1 << 18)})
    signature["outputs"] = [{"name": "out", "dtype": "float32", "device": "cpu",
                             "shape": [{"expr": "s27" + "+s27-s27" * 249, "min": 2, "max": 512}]}]
    with pytest.raises(PackageError, match=r"dim_names\['s27'\] is 786,432 characters long \('seqseq.*, more than "
                                           r"the 256 a Dim name may have"):
        parse_signature(json.dumps(signature).encode(), "aotcuda/signature.json", "x.pt2")
    from aotcuda.package_format import MAX_DIM_NAME_CHARS

    kept = _signature(dim_names={"s27": "q" * MAX_DIM_NAME_CHARS})  # a name of the longest length still reads
    assert parse_signature(json.dumps(kept).encode(), "aotcuda/signature.json", "x.pt2")["dim_names"] == kept["dim_names"]


def test_a_tensor_name_too_long_to_quote_in_every_refusal_is_a_package_error():
    """Found by break41: every refusal of a call quotes the input's name (`input 'x' (#0) ...`), so a package whose
    input was named with 7 MB made each refused call's InputError 7 MB (`aotcuda run` printed it; a replica built it
    for every bad request). A name past MAX_TENSOR_NAME_CHARS (1,024; torch.export's are pytree paths of a few dozen
    characters) is refused as the signature is read; a name of that length, CJK included, still reads; lowering
    shortens a longer one (a user's dict key) to one that loads, keeping names apart."""
    from aotcuda.errors import PackageError
    from aotcuda.lowering.signature import bounded_name
    from aotcuda.package_format import MAX_TENSOR_NAME_CHARS, parse_signature

    for kind in ("inputs", "outputs"):
        signature = _signature()
        signature["outputs"] = [{"name": "out", "dtype": "float32", "device": "cpu", "shape": [2]}]
        signature[kind][0]["name"] = "x" * 7_000_000
        with pytest.raises(PackageError, match=rf"{kind}\[0\] name is 7,000,000 characters long \('xxx.*, more than "
                                               "the 1,024 a tensor's name may have"):
            parse_signature(json.dumps(signature).encode(), "aotcuda/signature.json", "x.pt2")
    kept = _signature()
    kept["inputs"][0]["name"] = "名" * MAX_TENSOR_NAME_CHARS
    assert parse_signature(json.dumps(kept).encode(), "aotcuda/signature.json", "x.pt2")["inputs"][0]["name"] == \
        "名" * MAX_TENSOR_NAME_CHARS
    kept["inputs"][0]["name"] = "ids" + HOSTILE_TEXT
    with pytest.raises(PackageError, match=r"inputs\[0\] name holds .*, a name with a control or format character"):
        parse_signature(json.dumps(kept).encode(), "aotcuda/signature.json", "x.pt2")

    long_names = ["kwargs_" + "k" * 5000 + "_0", "kwargs_" + "k" * 5000 + "_1"]
    shortened = [bounded_name(name) for name in long_names]
    assert all(len(name) <= MAX_TENSOR_NAME_CHARS for name in shortened) and len(set(shortened)) == 2, shortened
    assert bounded_name("kwargs_past_key_values_key_cache_0") == "kwargs_past_key_values_key_cache_0"
    written = _signature()
    written["inputs"][0]["name"] = shortened[0]
    parse_signature(json.dumps(written).encode(), "aotcuda/signature.json", "x.pt2")  # what lowering writes loads

    from aotcuda.lowering.signature import signature_from_exported_program

    class DictOfLongKeys(torch.nn.Module):  # torch.export names the inputs by the keys: 3,004 characters
        def forward(self, d):
            return {"k" * 3000: d["a" * 3000] * 2}

    ep = torch.export.export(DictOfLongKeys(), ({"a" * 3000: torch.randn(2, 3), "a" * 2999 + "b": torch.randn(2, 3)},))
    lowered = signature_from_exported_program(ep)
    assert [len(spec["name"]) for spec in lowered["inputs"] + lowered["outputs"]] == [1004] * 3
    parse_signature(json.dumps(lowered).encode(), "aotcuda/signature.json", "x.pt2")


def test_the_input_count_refusal_quotes_the_names_cut_and_escaped():
    """The refusal of a call with too few tensors lists the inputs' names: 10,000 names of 1,024 characters (what a
    signature may hold) made it 10 MB; names without a signature are the pytree's keys, any string."""
    from aotcuda.runtime.checks import check_input_count

    with pytest.raises(InputError) as refused:
        check_input_count([], 10_000, ["n" * 1024] * 9_999 + ["ids" + HOSTILE_TEXT])
    assert len(str(refused.value)) < 1300, len(str(refused.value))
    with pytest.raises(InputError) as refused:
        check_input_count([], 1, ["ids" + HOSTILE_TEXT])
    assert "ids\\x1b[31mred" in str(refused.value) and "\x1b" not in str(refused.value), repr(str(refused.value))


def test_a_long_reason_is_cut_before_each_refusal_quotes_it():
    """Found by break41: every refusal quotes its range's reason, which the package writes and its symbols are named
    in (dim_names): a reason of 5.7 MB naming s23 1.9 million times, under a Dim name of 256 characters, made each
    refusal's message 488 MB (a load and one refused call: 1.7 GB peak). The reason is cut to MAX_REASON_CHARS,
    before and after its symbols are named."""
    signature = _signature(bound=15, dim_names={"s27": "q" * 256})
    signature["inputs"][0]["index_ranges"][0]["reason"] = "a gather at model.py:3: " + "s27 " * 100_000
    checks = IndexRangeChecks_from(signature)
    with pytest.raises(InputError, match=r"holds 99 at \(1, 5\), outside \[0, 15\], the values it may hold as the "
                                         r"index of a gather at model\.py:3: q{256} q{256}") as refused:
        ids = torch.full((2, 64), 3)
        ids[1, 5] = 99
        checks.check([ids], {"s27": 64})
    assert len(str(refused.value)) < 1500, len(str(refused.value))  # MAX_REASON_CHARS (1,000) and the words around


HOSTILE_TEXT = "\x1b[31mred\x1b]0;title\x07\u202e"  # a colour, a terminal title, a bidi override


@pytest.mark.parametrize("field", ["dim_names", "forward_arg_names", "forward_parameters"])
def test_a_name_with_control_characters_is_a_package_error(field):
    """Found by break41: messages quote a package's Dim names and forward's argument names as they are (`exported range
    [0, 64] of <name>`, `takes 2 positional argument(s) (<names>)`), and a Python traceback or a served client's
    terminal prints them so: a name of ESC sequences recoloured, retitled and reordered every refusal naming it.
    Lowering writes identifiers there, so such a name (or one past MAX_DIM_NAME_CHARS) is refused as the signature is
    read."""
    from aotcuda.errors import PackageError
    from aotcuda.package_format import parse_signature

    def parameters(name):  # forward's parameters (a call's refusal lists them), lowering writes identifiers
        return [{"name": "ids", "positional": True, "has_default": False},
                {"name": name, "positional": True, "has_default": True, "default": 1.0}]

    signature = _signature()
    signature[field] = ({"s27": "seq" + HOSTILE_TEXT} if field == "dim_names" else
                        parameters("scale" + HOSTILE_TEXT) if field == "forward_parameters" else ["ids" + HOSTILE_TEXT])
    place = {"dim_names": r"dim_names\['s27'\]", "forward_arg_names": r"forward_arg_names\[0\]",
             "forward_parameters": r"forward_parameters\[1\] name"}[field]
    with pytest.raises(PackageError, match=rf"signature\.json: {place} holds .*, a name with a control or format "
                                           "character"):
        parse_signature(json.dumps(signature).encode(), "aotcuda/signature.json", "x.pt2")
    if field == "forward_arg_names":
        signature[field] = ["x" * 100_000]
        with pytest.raises(PackageError, match=r"forward_arg_names\[0\] is 100,000 characters long .*, more than "
                                               "the 256"):
            parse_signature(json.dumps(signature).encode(), "aotcuda/signature.json", "x.pt2")
    if field == "forward_parameters":
        signature[field] = parameters("s" * 100_000)
        with pytest.raises(PackageError, match=r"forward_parameters\[1\] name is 100,000 characters long .*, more "
                                               "than the 256"):
            parse_signature(json.dumps(signature).encode(), "aotcuda/signature.json", "x.pt2")


# Every other name of the signature (names42): where it goes in a signature that reads, and how a refusal names it.
RECORDED_NAMES = {
    "outputs[0] name": lambda name: {"outputs": [{"name": name, "dtype": "float32", "device": "cpu", "shape": [2]}]},
    "constant_inputs[0] name": lambda name: {"constant_inputs": [{"leaf": 1, "value": 2.0, "name": name}]},
    "state_written[0]": lambda name: {"state_written": [name]},
    "pytree_types[0] type": lambda name: {"pytree_types": [{"type": name, "module": "m"}]},
    "pytree_types[0] module": lambda name: {"pytree_types": [{"type": "m.T", "module": name}]},
    "kernels[0] name": lambda name: {"kernels": [{"name": name, "allowed": False, "nodes": [], "sources": []}]},
    "kernels[0] nodes[0]": lambda name: {"kernels": [{"name": "k", "allowed": False, "nodes": [name], "sources": []}]},
}


@pytest.mark.parametrize("place", list(RECORDED_NAMES))
def test_every_other_name_of_the_signature_is_bounded_and_printable(place):
    """Found by names42: an output's name, a constant argument's, the state written's, the pytree types', the kernels'
    and a Dim name's symbol were read as any string, where inputs, Dim names and forward's names were bounded and
    printable: a package whose output was named with ESC sequences (or 7,000,000 characters, for the others) loaded,
    and lowering wrote such an output name itself for a dict keyed by an Enum whose name holds one. Each is refused as
    the signature is read, naming its place, the name escaped and the fix; the longest name allowed still reads."""
    from aotcuda.errors import PackageError
    from aotcuda.package_format import MAX_TENSOR_NAME_CHARS, parse_signature

    def read(name):
        return parse_signature(json.dumps({**_signature(), **RECORDED_NAMES[place](name)}).encode(),
                               "aotcuda/signature.json", "x.pt2")

    where = re.escape(place)
    with pytest.raises(PackageError, match=rf"signature\.json: {where} holds 'x\\x1b\[31mred.*, a name with a "
                                           r"control or format character.*damaged, hostile, or lowered by an older aotcuda.*: lower the model again"):
        read("x" + HOSTILE_TEXT)
    with pytest.raises(PackageError, match=rf"signature\.json: {where} is 7,000,000 characters long \('xxx.*, more "
                                           r"than the .* may have .*lower the model again") as refused:
        read("x" * 7_000_000)
    assert len(str(refused.value)) < 500, len(str(refused.value))
    read("名" * MAX_TENSOR_NAME_CHARS)


@pytest.mark.parametrize("key", ["x" + HOSTILE_TEXT, "s" * 7_000_000, "名" * 256, "s" + "0" * 64, "S0", "0s", "s-1", ""])
def test_a_dim_names_key_is_a_size_symbol_of_the_grammar(key):
    """A dim_names key names a size symbol, which the shape expressions name as [a-z][a-z0-9_]* of at most 64
    characters; it was checked as any printable name of at most 256 (256 CJK characters read), though no expression
    could name such a symbol (review42a). Anything else is refused, quoted short and escaped; a 64-character symbol
    reads."""
    from aotcuda.errors import PackageError
    from aotcuda.package_format import parse_signature

    def read(symbol):
        return parse_signature(json.dumps({**_signature(), "dim_names": {symbol: "seq"}}).encode(),
                               "aotcuda/signature.json", "x.pt2")

    with pytest.raises(PackageError, match=r"signature\.json: a dim_names key .* is not a size symbol") as refused:
        read(key)
    assert len(str(refused.value)) < 500 and "\x1b" not in str(refused.value) and "\u202e" not in str(refused.value)
    read("s" + "0" * 63)
    read("u12_a")


def test_the_printable_check_of_many_names_is_fast_and_agrees_with_the_escape():
    """Review of break41: the check of names (Dim names, forward_arg_names, forward_parameters) escaped each name with
    terminal_safe to compare it (~58 us a 256-character name: 0.83 s CPU to read a signature of 30,000 such names,
    at each load; 0.05 s with isprintable); str.isprintable says the same for every code point (checked here over all of them) in C."""
    import sys
    import unicodedata

    from aotcuda.package_format import parse_signature
    from least_time import least_cpu_seconds

    escaped = {code for code in range(sys.maxunicode + 1)
               if code != 0x20 and unicodedata.category(chr(code))[0] in "CZ"}
    assert escaped == {code for code in range(sys.maxunicode + 1) if not chr(code).isprintable()}
    signature = _signature()
    signature["forward_arg_names"] = [f"{index:05d}" + "n" * 251 for index in range(30_000)]
    text = json.dumps(signature).encode()
    took, _ = least_cpu_seconds(lambda: parse_signature(text, "aotcuda/signature.json", "x.pt2"))
    assert took < 0.3, took  # 0.83 s with terminal_safe's comparison, 0.05 s with isprintable


def test_a_reason_with_control_characters_is_quoted_escaped():
    """The row above's kind, for a range's reason (free text: the op and the user's source line): every refusal
    quotes it, escaped (errors.terminal_safe), as the CLI shows a package's text."""
    signature = _signature(bound=15)
    signature["inputs"][0]["index_ranges"][0]["reason"] = "a gather at model.py:3" + HOSTILE_TEXT
    ids = torch.full((2, 64), 3)
    ids[1, 5] = 99
    with pytest.raises(InputError) as refused:
        IndexRangeChecks_from(signature).check([ids], {"s27": 64})
    message = str(refused.value)
    assert "a gather at model.py:3\\x1b[31mred\\x1b]0;title\\x07\\u202e" in message, message
    assert not any(char in message for char in "\x1b\x07\u202e"), repr(message)


def test_why_a_range_was_narrowed_is_quoted_escaped():
    """The rows above' kind, for a dim's "narrowed" (free text: why lowering narrowed the range), which a refusal of a
    size quotes: one line, escaped."""
    from aotcuda.runtime.checks import check_inputs
    from aotcuda.runtime.specs import specs_from_signature

    signature = _signature()
    signature["inputs"][0]["shape"][1]["narrowed"] = "torch.export's 0/1 rule" + HOSTILE_TEXT + "\nerror: forged"
    inputs, _ = specs_from_signature(signature, "x.pt2")
    with pytest.raises(InputError, match="which lowering narrowed from the range it was asked") as refused:
        check_inputs([torch.zeros(2, 600, dtype=torch.long)], inputs, ["ids"], torch.device("cpu"), 1)
    message = str(refused.value)
    assert "rule\\x1b[31mred\\x1b]0;title\\x07\\u202e error: forged" in message, message
    assert not any(char in message for char in "\x1b\x07\u202e\n"), repr(message)


def test_the_note_on_an_unchecked_index_quotes_its_lines_escaped():
    """The rows above' kind, for the signature's "index_unchecked" lines, which the note on the generated code's own
    bounds check quotes (a Python traceback prints notes as they are)."""
    from types import SimpleNamespace

    from aotcuda.errors import RuntimeCallError
    from aotcuda.runtime.program import Program

    error = RuntimeCallError("index out of bounds: 0 <= tmp2 < 16L")
    held = SimpleNamespace(index_unchecked={"mask": ["input 'mask' reaches aten.cumsum" + HOSTILE_TEXT + "\nforged"]})
    Program._said_unchecked_index(held, error)
    (note,) = error.__notes__
    assert "aten.cumsum\\x1b[31mred\\x1b]0;title\\x07\\u202e\\nforged" in note, note
    assert not any(char in note for char in "\x1b\x07\u202e\n"), repr(note)


def test_an_output_name_is_quoted_escaped_in_a_buffer_refusal():
    """The rows above' kind, found by the same sweep: a caller's output buffer of the wrong shape or dtype was refused
    naming the package's output name raw (``output buffer #0 (<name>) has shape ...``)."""
    from aotcuda.errors import OutputError
    from aotcuda.runtime.checks import check_caller_outputs
    from aotcuda.runtime.specs import specs_from_signature

    signature = _signature()
    signature["outputs"] = [{"name": "out" + HOSTILE_TEXT, "dtype": "float32", "device": "cpu", "shape": [2, 4]}]
    _, outputs = specs_from_signature(signature, "x.pt2")
    for buffer in (torch.empty(2, 2), torch.empty(2, 4, dtype=torch.float64)):
        with pytest.raises(OutputError, match=r"output buffer #0 \(out\\x1b\[31mred") as refused:
            check_caller_outputs([buffer], outputs, {}, torch.device("cpu"), 1)
        assert not any(char in str(refused.value) for char in "\x1b\x07\u202e"), repr(str(refused.value))


@pytest.mark.parametrize("shape_min", [1e999, -1e999])
def test_an_overflowing_shape_bound_is_a_package_error(shape_min):
    from types import SimpleNamespace

    from aotcuda.errors import PackageError
    from aotcuda.runtime.program import Program

    signature = json.loads(json.dumps(_signature(shape_min=shape_min)))  # JSON writes Infinity, reads float inf
    stub = SimpleNamespace(package_path="x.pt2", num_inputs=1, num_outputs=0)
    with pytest.raises(PackageError, match=r"signature entry is malformed \(inputs\[0\] OverflowError"):
        Program._load_specs(stub, signature)


# A replica whose environment turns the check off (AOTCUDA_CHECK_INDEX_RANGES=0, exported for a benchmark, inherited
# by Ray's workers), in a child process: the bad request is answered, and the replica lives.
SERVED_WITH_THE_SWITCH_OFF = textwrap.dedent("""
    import asyncio, sys, torch
    sys.path.insert(0, {here!r})
    from safetensors.torch import save
    from aotcuda.serving.deployment import ProgramReplica
    from test_index_ranges import _post

    replica = ProgramReplica(sys.argv[1])
    ids = torch.randint(0, 128, (2, 256))
    bad = ids.clone()
    bad[0, 1] = 10**9
    for body in (save({{"ids": bad}}), save({{"ids": ids}})):
        answer = asyncio.run(replica._predict(_post(body)))
        print("status", answer.status_code, answer.headers.get("x-aotcuda-error"), flush=True)
""")


def test_a_replica_checks_indices_whatever_the_switch_in_its_environment(embed_norm_pt2):
    pytest.importorskip("ray")
    script = SERVED_WITH_THE_SWITCH_OFF.format(here=os.path.dirname(os.path.abspath(__file__)))
    child = subprocess.run([sys.executable, "-c", script, embed_norm_pt2], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
                                "AOTCUDA_CHECK_INDEX_RANGES": "0"})
    assert child.returncode == 0, f"the replica's process died ({child.returncode}): {child.stderr[-1500:]}"
    assert child.stdout.split("\n")[:2] == ["status 400 InputError", "status 200 None"], child.stdout + child.stderr[-1500:]


class WideUnsignedIds(torch.nn.Module):
    """Token ids in the unsigned dtypes torch has no min/max kernel for (uint16, uint32, uint64)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 4)

    def forward(self, a, b, c):
        return self.emb(a.long()) + self.emb(b.long()) + self.emb(c.long())


@pytest.fixture(scope="module")
def wide_unsigned(tmp_path_factory):
    torch.manual_seed(0)
    module = WideUnsignedIds().eval()
    args = tuple(torch.tensor([1, 2, 3], dtype=dtype) for dtype in (torch.uint16, torch.uint32, torch.uint64))
    path = tmp_path_factory.mktemp("wide_unsigned") / "ids.pt2"
    aotcuda.lower(module, args, device="cpu", package_path=str(path))
    return str(path), module, args


@pytest.mark.parametrize("place, value", [(0, 99), (1, 2**32 - 1), (2, 2**63 + 5), (2, 2**64 - 1)])
def test_index_inputs_of_wide_unsigned_dtypes_are_checked(wide_unsigned, place, value):
    """main: every call, a right one too, raised torch's raw 'NotImplementedError: "aminmax_cpu" not implemented for
    'UInt32'' from the check: the program could not be called at all."""
    path, module, args = wide_unsigned
    program = aotcuda.load(path)
    assert torch.equal(program(*args), module(*args))
    bad = list(args)
    bad[place] = torch.tensor([1, value, 3], dtype=args[place].dtype)
    name = "abc"[place]
    with pytest.raises(InputError, match=rf"input '{name}' \(#{place}\) holds {value} at \(1,\), outside \[0, 15\]"):
        program(*bad)
    assert torch.equal(program(*args), module(*args))


def test_a_refusal_finds_the_value_in_one_byte_an_element():
    """A refused input is named with the first place of the offending value; that place was found with
    `(tensor == value).nonzero()`, which lists every place: 8 bytes a dim an element. A call with 64 MiB of uint8 ids
    of rank 3 all out of range grew the process by 1.67 GiB (a served request of 256 MiB: 6.5 GiB) before its
    InputError (the breaker, 2026-12-06). In a child, so that its peak memory is its own: 32 MiB of ids may cost the
    refusal a mask of one byte an element, not 24 bytes."""
    code = textwrap.dedent("""
        import resource, torch
        from aotcuda.errors import InputError
        from aotcuda.runtime.index_ranges import IndexRange, IndexRangeChecks
        checks = IndexRangeChecks({0: (IndexRange(0, 15, "an embedding"),)}, {0: "input 'ids' (#0)"}, torch.device("cpu"))
        ids = torch.full((2**8, 2**9, 2**8), 200, dtype=torch.uint8)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            checks.check([ids], {})
        except InputError as error:
            said = str(error)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        small = torch.zeros(3, 4, 5, dtype=torch.int64)
        small[2, 0, 0] = small[1, 2, 3] = 99
        try:
            checks.check([small.permute(2, 1, 0)], {})  # not contiguous: places are the view's own
        except InputError as error:
            print(str(error).split(", outside")[0])
        print(said.split(", outside")[0])
        print(grown // 1024)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert child.returncode == 0, child.stderr[-2000:]
    permuted, said, grown_mib = child.stdout.splitlines()
    assert permuted == "input 'ids' (#0) holds 99 at (0, 0, 2)"  # the first in the view's order, as nonzero() gave
    assert said == "input 'ids' (#0) holds 200 at (0, 0, 0)"
    assert int(grown_mib) < 100, f"the refusal grew the process by {grown_mib} MiB"


def test_a_copy_the_call_made_into_the_exported_layout_is_checked_without_a_second_copy():
    """Index inputs are checked and run on a copy, so that no other writer can change them in between; an input the
    call had already copied into the exported layout (an expand, a transpose) was copied again: twice the memory
    the layout copy was allowed, 2 GiB for a (1024, 1024, 1024) expand of one uint8 id into a program of unbounded
    dims (the breaker, 2026-12-06). The caller's own tensor is still copied."""
    from aotcuda.runtime.index_ranges import IndexRange, IndexRangeChecks

    checks = IndexRangeChecks({0: (IndexRange(0, 15, "an embedding"),)}, {0: "input 'ids' (#0)"}, torch.device("cpu"))
    ids = torch.tensor([[1, 2]]).expand(4, 2)
    laid_out = ids.contiguous()  # what check_inputs hands on: this call's own copy
    assert checks.checked_copies([laid_out], {}, callers=[ids])[0] is laid_out
    caller = torch.tensor([1, 2])
    copied = checks.checked_copies([caller], {}, callers=[caller])[0]
    assert copied is not caller and copied.data_ptr() != caller.data_ptr() and torch.equal(copied, caller)
    with pytest.raises(InputError, match=r"holds 99 at \(3, 1\), outside \[0, 15\]"):
        bad = torch.tensor([[1, 2]]).expand(4, 2).contiguous()
        bad[3, 1] = 99
        checks.checked_copies([bad], {}, callers=[torch.tensor([[1, 2]]).expand(4, 2)])


def test_a_wide_unsigned_index_input_is_read_a_chunk_at_a_time():
    """uint16 and uint32 index inputs are read as int64 (torch has no min/max kernel for them); the whole input was
    copied to int64 for it, 4 times a uint16 input's memory: 1 GiB more for a served request of 256 MiB (the
    breaker, 2026-12-06). In a child, so that its peak memory is its own: 128 MiB of uint16 ids, in range, then one
    out of range at the end."""
    code = textwrap.dedent("""
        import resource, torch
        from aotcuda.errors import InputError
        from aotcuda.runtime.index_ranges import IndexRange, IndexRangeChecks
        checks = IndexRangeChecks({0: (IndexRange(0, 40000, "an embedding"),)}, {0: "input 'ids' (#0)"}, torch.device("cpu"))
        ids = torch.full((2**13, 2**13), 39999, dtype=torch.uint16)
        ids[0, 0] = 0
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        checks.check([ids], {})
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        ids[-1, -1] = 65535
        try:
            checks.check([ids.t()], {})
        except InputError as error:
            print(str(error).split(", outside")[0])
        print(grown // 1024)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert child.returncode == 0, child.stderr[-2000:]
    said, grown_mib = child.stdout.splitlines()
    assert said == "input 'ids' (#0) holds 65535 at (8191, 8191)"
    assert int(grown_mib) < 100, f"the check grew the process by {grown_mib} MiB"


# --- an index read through a part of its input (new user, 2026-12-07) -------------------------------------------------

class RowIndexes(torch.nn.Module):
    """Only idx[0] indexes the table (idx[1] is a multiplier); pos[:, 0], read after a transpose, indexes it too."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.linspace(-1, 1, 32).reshape(8, 4))  # the same in every instance

    def forward(self, idx, pos):
        return self.table[idx[0]] * idx[1, :, None], self.table[pos.t()[0]]


@pytest.fixture(scope="module")
def row_indexes_pt2(tmp_path_factory):
    from torch.export import Dim

    path = tmp_path_factory.mktemp("row_indexes") / "row_indexes.pt2"
    seq = Dim("S", min=2, max=64)
    aotcuda.lower(RowIndexes(), (torch.randint(0, 8, (2, 5)), torch.randint(0, 8, (5, 2))), device="cpu",
                  dynamic_shapes={"idx": {1: seq}, "pos": {0: seq}}, package_path=path)
    return path


def test_only_the_part_of_an_input_read_as_an_index_is_checked(row_indexes_pt2):
    """`table[idx[0]] * idx[1, :, None]` with idx[1, 2] = 100: eager runs it, and the whole-input check refused it,
    saying "Eager refuses it too". Now idx[0] alone is checked (the signature's part), so the call gives eager's
    results; a bad value in idx[0] is still refused, where eager raises, at its place in idx."""
    program = aotcuda.load(row_indexes_pt2)
    for seq in (2, 5, 64):
        idx, pos = torch.randint(0, 8, (2, seq)), torch.randint(0, 8, (seq, 2))
        idx[1, seq // 2] = 100
        out, expected = program(idx, pos), RowIndexes()(idx, pos)
        for got, want in zip(out, expected):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    idx_ranges = program.signature["inputs"][0]["index_ranges"]
    assert [entry.get("part") for entry in idx_ranges] == [[["select", 0, 0]]]
    idx, pos = torch.randint(0, 8, (2, 5)), torch.randint(0, 8, (5, 2))
    idx[0, 3] = 8
    with pytest.raises(IndexError):
        RowIndexes()(idx, pos)
    with pytest.raises(InputError, match=r"input 'idx' \(#0\) holds 8 at \(0, 3\), outside \[-8, 7\].*Eager refuses it "
                                         r"too"):
        program(idx, pos)


def test_where_the_part_is_not_told_the_refusal_says_the_whole_input_is_checked_not_that_eager_refuses(
        row_indexes_pt2):
    program = aotcuda.load(row_indexes_pt2)
    idx, pos = torch.randint(0, 8, (2, 5)), torch.randint(0, 8, (5, 2))
    pos[2, 1] = 100  # pos[:, 1] is read by nothing: eager runs the call
    RowIndexes()(idx, pos)
    with pytest.raises(InputError) as refused:
        program(idx, pos)
    said = str(refused.value)
    assert "input 'pos' (#1) holds 100 at (2, 1)" in said and "the whole input is checked" in said
    assert "Eager refuses" not in said and "as an input of its own" in said


@pytest.mark.parametrize("part", [[["select", 0]], [["slice", 0, 0, 5, 0]], [["gather", 0, 0]], "select 0 0",
                                  [["select", -1, 0]], [["select", 0, True]], [["narrow", 0, 0, -1]],
                                  [["select", 0, 0]] * 65, [["select", 0, 2**70]]])
def test_a_malformed_part_is_a_package_error(part):
    signature = _signature()
    signature["inputs"][0]["index_ranges"][0]["part"] = part
    with pytest.raises(aotcuda.errors.PackageError, match="index_ranges of input #0 are malformed"):
        IndexRangeChecks_from(signature)


def test_a_part_that_does_not_fit_the_call_checks_the_whole_input():
    """A part past the input's sizes (a hostile signature; the program would fail on such a call too) checks all of
    it rather than nothing."""
    signature = _signature(5)
    signature["inputs"][0]["index_ranges"][0]["part"] = [["select", 0, 7]]
    ids = torch.zeros(2, 4, dtype=torch.int64)
    ids[1, 2] = 9
    with pytest.raises(InputError, match=r"holds 9 at \(1, 2\)"):
        IndexRangeChecks_from(signature).check([ids], {"s27": 4})


def test_an_input_read_through_many_parts_is_reduced_once_where_every_value_is_within_them(monkeypatch):
    """Review (2026-12-07): an input read as indices through one part per table (``emb[k](idx[:, k])``, 26 columns)
    took one reduction per part on every call (26; 329 us a call here against 14 for the whole input). The whole input
    is now reduced once, and its parts only where a value falls outside their ranges' intersection, which still names
    the part's range and the value's place in the input."""
    from aotcuda.runtime import index_ranges

    signature = {"inputs": [{"name": "i", "dtype": "int64", "shape": [64, 26], "index_ranges": [
        {"min": 0, "max": 1000 + k, "reason": f"embedding of table {k}", "part": [["select", 1, k]]} for k in range(26)]}]}
    checks = index_ranges.IndexRangeChecks.from_signature(signature, 1, torch.device("cpu"))
    reductions = []
    counted = index_ranges._aminmax
    monkeypatch.setattr(index_ranges, "_aminmax", lambda tensor: reductions.append(tensor.shape) or counted(tensor))
    ids = torch.randint(0, 1001, (64, 26))
    checks.check([ids], {})
    assert reductions == [torch.Size([64, 26])]
    ids[5, 7] = 1007  # table 7 holds 1008 rows: within its own range, past the intersection's (table 0's, 1000)
    reductions.clear()
    checks.check([ids], {})
    assert len(reductions) == 1 + 26
    ids[5, 7] = 1008
    with pytest.raises(InputError, match=r"holds 1008 at \(5, 7\), outside \[0, 1007\].*table 7"):
        checks.check([ids], {})
