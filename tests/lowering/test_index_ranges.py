"""The index ranges the signature records, at the ExportedProgram level (no compile): for each kind of
indexing op in ``aotcuda.lowering.index_ranges.INDEXING`` and each value flow (a view, a cast, an offset, a
negation, ``pos + arange``), a value is accepted by the recorded range iff eager accepts it (hypothesis draws
the values); and where no exact range exists, none is recorded."""

import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aotcuda.errors import InputError
from aotcuda.lowering import torch_fixes
from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.index_ranges import INDEXING, index_ranges
from aotcuda.lowering.signature import signature_from_exported_program
from aotcuda.runtime.checks import TensorSpec, check_inputs
from aotcuda.runtime.index_ranges import IndexRangeChecks

X = torch.arange(20.0).reshape(4, 5)  # dim 0 of size 4, dim 1 of size 5, 20 elements
W = torch.arange(15.0).reshape(5, 3)  # an embedding table of 5 rows
ONE = torch.ones(1, 1)


class Call(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function
        self.register_buffer("x", X.clone())

    def forward(self, i):
        return self.function(self.x, i)


# kind: (forward(x, i) with x of shape (4, 5), the index input's example)
CASES = {
    "embedding": (lambda x, i: F.embedding(i, W), torch.tensor([1, 2])),
    "embedding_bag": (lambda x, i: F.embedding_bag(i, W, torch.tensor([0])), torch.tensor([1, 2])),
    "index_select dim 0": (lambda x, i: x.index_select(0, i), torch.tensor([1])),
    "index_select dim -1": (lambda x, i: x.index_select(-1, i), torch.tensor([1])),
    "x[i]": (lambda x, i: x[i], torch.tensor([1])),
    "x[:, i]": (lambda x, i: x[:, i], torch.tensor([1])),
    "gather dim 1": (lambda x, i: x.gather(1, i.view(1, 1)), torch.tensor([1])),
    "scatter": (lambda x, i: x.scatter(1, i.view(1, 1), 1.0), torch.tensor([1])),
    "scatter_add": (lambda x, i: x.scatter_add(1, i.view(1, 1), ONE), torch.tensor([1])),
    "scatter_reduce": (lambda x, i: x.scatter_reduce(1, i.view(1, 1), ONE, "amax"), torch.tensor([1])),
    "index_put": (lambda x, i: x.index_put((i,), torch.tensor(1.0)), torch.tensor([1])),
    "index_put accumulate": (lambda x, i: torch.ops.aten.index_put(x, [None, i], torch.tensor(1.0), True),
                             torch.tensor([1])),
    "index_add": (lambda x, i: x.index_add(0, i, X[:1]), torch.tensor([1])),
    "index_copy": (lambda x, i: x.index_copy(0, i, X[:1]), torch.tensor([1])),
    "index_fill": (lambda x, i: x.index_fill(1, i, 1.0), torch.tensor([1])),
    "index_reduce": (lambda x, i: x.index_reduce(0, i, X[:1], "amax"), torch.tensor([1])),
    "take": (lambda x, i: x.take(i), torch.tensor([1])),
    "one_hot": (lambda x, i: F.one_hot(i, 6), torch.tensor([1])),
    # the value flow
    "a view, a cast, an unsqueeze": (lambda x, i: x[i.view(1, 1).to(torch.int32).squeeze(0)], torch.tensor([1])),
    "i + 2": (lambda x, i: x.index_select(0, i + 2), torch.tensor([1])),
    "i - 1 (a Python scalar)": (lambda x, i: x.index_select(1, i - 1), torch.tensor([1])),
    "3 - i": (lambda x, i: x[3 - i], torch.tensor([1])),
    "-i": (lambda x, i: x.gather(1, -i.view(1, 1)), torch.tensor([-1])),
    "2 * i": (lambda x, i: x.index_select(1, i * 2), torch.tensor([1])),
    "-3 * i": (lambda x, i: x[:, i * -3], torch.tensor([1])),
    "pos + arange(3)": (lambda x, i: x.index_select(1, i + torch.arange(3)), torch.tensor(1)),
    "pos + arange(0, 6, 2) - 4": (lambda x, i: x[:, i + torch.arange(0, 6, 2) - 4], torch.tensor(4)),
    "i + a constant, broadcast": (lambda x, i: x[:, i.view(2, 1) + torch.tensor([0, 2])], torch.tensor([1, 2])),
    "i through a slice": (lambda x, i: x[i[:1]], torch.tensor([1, 1])),
    "used twice": (lambda x, i: (x[i], F.embedding(i, W[:3])), torch.tensor([1])),
    "cat([i, i - 1])": (lambda x, i: F.embedding(torch.cat([i, i - 1]), W), torch.tensor([1])),
    "stack([i, -i])": (lambda x, i: x[torch.stack([i, -i])], torch.tensor([1])),
    "flip": (lambda x, i: x[i.flip(0)], torch.tensor([1, 2])),
    "roll": (lambda x, i: x[:, i.roll(1)], torch.tensor([1, 2])),
    "sort values": (lambda x, i: F.embedding(i.sort().values, W), torch.tensor([2, 1])),
    "topk values": (lambda x, i: x[i.topk(1).values], torch.tensor([2, 1])),
    "clamp(min=0)": (lambda x, i: F.embedding(i.clamp(min=0), W), torch.tensor([1])),
    "clamp(max=2)": (lambda x, i: x[:, i.clamp(max=2)], torch.tensor([1])),
    "clamp(-2, 9)": (lambda x, i: F.embedding(i.clamp(-2, 9), W), torch.tensor([1])),
    "abs": (lambda x, i: F.embedding(i.abs(), W), torch.tensor([-2])),
    "abs, negative allowed": (lambda x, i: x[i.abs()], torch.tensor([-2])),
    "i + i": (lambda x, i: x[:, i + i], torch.tensor([1])),
    "repeat": (lambda x, i: x[i.repeat(2)], torch.tensor([1])),
    # a part of the input taken by constant selects and slices: only that part is checked (position 0 is outside it)
    "a row of i, the other a multiplier": (lambda x, i: x[i[1]] * i[0, :, None], torch.tensor([[7], [1]])),
    "a column of i": (lambda x, i: x[:, i[:, -1]], torch.tensor([[7, 1]])),
    "i narrowed": (lambda x, i: x[i.narrow(0, 1, 1)], torch.tensor([9, 1])),
    "i[1:] then [0]": (lambda x, i: F.embedding(i[1:][0], W), torch.tensor([9, 1])),
    # a select after a transpose: the part is not told, the whole input is checked
    "a row after a transpose": (lambda x, i: x[i.t()[0]], torch.tensor([[1, 1]])),
    # the whole input beside a part of it: every value reaches the index (the whole input is checked, as eager's)
    "cat([i, i[:1]])": (lambda x, i: x[torch.cat([i, i[:1]])], torch.tensor([1, 1])),
}

# An index read through a subset lowering cannot tell is checked over the whole input (documented): iff holds only for
# the part read. Through constant selects and slices of the input as it is laid out (new user, 2026-12-07: x[i[:1]] was
# here, and `table[idx[0]] * idx[1, :, None]` refused idx[1] = 100, which eager runs), only that part is checked.
CHECKED_WHOLE = {"topk values", "a row after a transpose"}

# Ops of the table that no case reaches, and why: export functionalizes in-place ops (index_put_ becomes
# index_put); _unsafe_index(_put) and _index_put_impl_ come from decompositions with computed indices;
# _embedding_bag is what embedding_bag becomes on other paths than export's.
NOT_REACHED = {"_unsafe_index", "_unsafe_index_put", "_index_put_impl_", "_embedding_bag", "scatter_", "scatter_add_",
               "scatter_reduce_", "index_put_", "index_add_", "index_copy_", "index_fill_", "index_reduce_"}


def _eager_accepts(function, value: torch.Tensor) -> bool:
    try:
        function(X.clone(), value)
    except (IndexError, RuntimeError):
        return False
    return True


def _exported(function, example):
    return torch.export.export(Call(function), (example,))


@pytest.fixture(scope="module")
def checks():
    """{kind: (IndexRangeChecks or None, input spec)}, from the signature of the exported program and of
    the program after lower()'s decompositions (as lower() records both)."""
    found = {}
    for kind, (function, example) in CASES.items():
        ep = _exported(function, example)
        decomposed = ep.run_decompositions(decomposition_table())
        signature = signature_from_exported_program(decomposed, more_index_ranges=index_ranges(ep, ["i"]))
        found[kind] = (IndexRangeChecks.from_signature(signature, 1, torch.device("cpu")),
                       TensorSpec.from_json(signature["inputs"][0]))
        REACHED.update(node.target.overloadpacket.__name__ for program in (ep, decomposed)
                       for node in program.graph.nodes if getattr(node.target, "overloadpacket", None) in INDEXING)
    return found


REACHED: set[str] = set()  # the ops of the table that the cases' programs hold (filled by the fixture)


def _accepted(checks, spec, value: torch.Tensor) -> bool:
    if checks is None:
        return True
    _, bindings = check_inputs([value], [spec], ["i"], torch.device("cpu"), 1)
    try:
        checks.check([value], bindings)
    except InputError:
        return False
    return True


def test_every_op_of_the_table_has_a_case(checks):
    assert {packet.__name__ for packet in INDEXING} - REACHED == NOT_REACHED


@pytest.mark.parametrize("kind", list(CASES))
def test_the_example_is_accepted_and_a_range_is_recorded(checks, kind):
    found, spec = checks[kind]
    assert found is not None, f"{kind}: no index range recorded"
    assert _accepted(found, spec, CASES[kind][1])


@pytest.mark.parametrize("kind", list(CASES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.integers(-45, 45), position=st.integers(0, 1))
def test_a_value_is_accepted_iff_eager_accepts_it(checks, kind, value, position):
    function, example = CASES[kind]
    found, spec = checks[kind]
    index = example.clone()
    index.view(-1)[min(position, index.numel() - 1)] = value
    if kind in CHECKED_WHOLE:  # a value outside the part read may be refused; a value accepted is eager's
        assert not _accepted(found, spec, index) or _eager_accepts(function, index), (kind, index)
    else:
        assert _accepted(found, spec, index) == _eager_accepts(function, index), (kind, index)


def test_a_bound_over_a_dynamic_size_is_an_expression_evaluated_per_call():
    """gather along a dynamic dim: the bound is "seq - 1", checked against each call's seq."""
    seq = torch.export.Dim("seq", min=2, max=64)

    class Gather(torch.nn.Module):
        def forward(self, h, i):
            return h.gather(1, i)

    ep = torch.export.export(Gather(), (torch.randn(2, 8), torch.zeros(2, 3, dtype=torch.long)),
                             dynamic_shapes=({1: seq}, None))
    signature = signature_from_exported_program(ep)
    (entry,) = signature["inputs"][1]["index_ranges"]
    assert entry["min"] == 0 and entry["max"] == {"expr": f"{next(iter(signature['dim_names']))} - 1"}
    checks = IndexRangeChecks.from_signature(signature, 2, torch.device("cpu"))
    specs = [TensorSpec.from_json(spec, signature["dim_names"]) for spec in signature["inputs"]]
    for width, value, accepted in ((8, 7, True), (8, 8, False), (20, 19, True), (20, 20, False)):
        inputs = [torch.randn(2, width), torch.full((2, 3), value)]
        _, bindings = check_inputs(inputs, specs, ["h", "i"], torch.device("cpu"), 2)
        if accepted:
            checks.check(inputs, bindings)
        else:
            with pytest.raises(InputError, match=rf"holds {value} at \(0, 0\), outside \[0, {width - 1}\].*seq"):
                checks.check(inputs, bindings)


def test_input_pos_plus_arange_seq_into_a_cache():
    """A KV-cache write position: ``cache.index_copy(1, pos + arange(seq), new)``, cache of 32 slots; pos may
    go up to 32 - seq, which depends on each call's seq."""

    class Write(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(2, 32))

        def forward(self, new, pos):
            return self.cache.index_copy(1, pos + torch.arange(new.shape[1]), new)

    seq = torch.export.Dim("seq", min=2, max=16)
    ep = torch.export.export(Write(), (torch.randn(2, 4), torch.tensor(3)), dynamic_shapes=({1: seq}, None))
    signature = signature_from_exported_program(ep.run_decompositions(decomposition_table()),
                                                more_index_ranges=index_ranges(ep, ["new", "pos"]))
    checks = IndexRangeChecks.from_signature(signature, 2, torch.device("cpu"))
    specs = [TensorSpec.from_json(spec, signature["dim_names"]) for spec in signature["inputs"]]
    module = Write()
    for width in (2, 5, 16):
        for pos in (-1, 0, 32 - width, 33 - width):
            inputs = [torch.randn(2, width), torch.tensor(pos)]
            _, bindings = check_inputs(inputs, specs, ["new", "pos"], torch.device("cpu"), 2)
            try:
                checks.check(inputs, bindings)
                accepted = True
            except InputError as error:
                assert f"outside [0, {32 - width}]" in str(error) and "seq" not in str(error).split("outside")[0]
                accepted = False
            assert accepted == _eager_accepts(lambda x, i: module(inputs[0], i), inputs[1]), (width, pos)


@pytest.mark.parametrize("function, example", [
    (lambda x, i: torch.take_along_dim(x, i.view(1, 1), 1), torch.tensor([1])),  # eager wraps every value
    (lambda x, i: x[i.clamp(0, 3)], torch.tensor([1])),  # the index is clamped: any value is fine
    (lambda x, i: x[i % 4], torch.tensor([1])),
    (lambda x, i: x[i + torch.tensor([0, 1])], torch.tensor([1, 1])),  # an offset met element by element
    (lambda x, i: x[i + torch.arange(2)], torch.tensor([1, 1])),
], ids=["take_along_dim", "clamp", "remainder", "elementwise constant", "elementwise arange"])
def test_no_range_where_no_exact_one_exists(function, example):
    ep = _exported(function, example)
    assert index_ranges(ep.run_decompositions(decomposition_table()), ["i"]) == {}
    assert index_ranges(ep, ["i"]) == {}


def test_the_reason_names_the_op_and_the_line():
    ep = _exported(CASES["embedding"][0], torch.tensor([1]))
    (entry,) = index_ranges(ep, ["i"])["i"]
    assert (entry["min"], entry["max"]) == (0, 4)
    assert entry["reason"].startswith("aten::embedding over 5 rows of ")
    assert "test_index_ranges.py:" in entry["reason"]


def test_a_tiny_llama_records_the_vocabulary_of_its_token_ids():
    """LlamaForCausalLM (transformers, vocabulary 128): input_ids reach the embedding, nothing else indexes."""
    pytest.importorskip("transformers")
    from aotcuda.lowering.index_ranges import exported_index_ranges
    from tests.models.library.transformers_models import LLAMA_VOCAB, build_llama_causal_lm

    torch.manual_seed(0)
    model, args, dims = build_llama_causal_lm()
    with torch_fixes.applied("export"):  # as lower() exports (torch 2.11: repeat_kv's stride guard)
        ep = torch.export.export(model, args, {"use_cache": False}, dynamic_shapes=dims, strict=False)
    ranges = exported_index_ranges(ep)
    assert list(ranges) == ["input_ids"]
    ((entry),) = ranges["input_ids"]
    assert (entry["min"], entry["max"]) == (0, LLAMA_VOCAB - 1)
    assert entry["reason"].startswith(f"aten::embedding over {LLAMA_VOCAB} rows of model.embed_tokens.weight")  # the module's name
    assert "modeling_llama.py" in entry["reason"]


@pytest.mark.parametrize("function", [lambda x, i: F.embedding(i * i, W), lambda x, i: F.embedding((i + 0.5).long(), W),
                                      lambda x, i: x[i.abs() + 1]])
def test_an_index_the_flow_cannot_bound_warns_and_is_recorded(function):
    ep = _exported(function, torch.tensor([1]))
    with pytest.warns(UserWarning, match="input 'i' reaches aten.* through .*not checked before the call"):
        signature = signature_from_exported_program(ep)
    (line,) = signature["inputs"][0]["index_unchecked"]
    assert line.startswith("input 'i' reaches aten.") and "test_index_ranges.py:" in line
    assert TensorSpec.from_json(signature["inputs"][0]).name == "i"  # old readers ignore the field


# --- values bounded whatever the input holds: the input is absorbed, not checked and not left unchecked -----

BOUNDED = {  # forward(x, i), x of shape (4, 5); W has 5 rows
    "cumsum then clamp into the table": lambda x, i: F.embedding((i.cumsum(0) - 1).clamp(0, 4), W),
    "clamp of an offset met element by element": lambda x, i: x[(i + torch.arange(2)).clamp(0, 3)],
    "clamp then a constant": lambda x, i: x[(i * i).clamp(0, 2) + 1],
    "remainder by the size": lambda x, i: x[:, (i * i) % 5],
    "remainder by a negative divisor": lambda x, i: x[(i * i) % -4],  # [-3, 0]: x[i] takes negative indices
    "argmax of a float input's rows": lambda x, i: F.embedding((x[:, :2] * i.float()).argmax(-1), W),
    # a MoE router's experts (third new user, 2026-12-06): the indices of topk, sort, max(dim), kthvalue
    "topk indices of a float input's rows": lambda x, i: F.embedding((x * i[:1].float()).topk(2, -1).indices, W),
    "sort indices": lambda x, i: F.embedding((x * i[:1].float()).sort(-1, descending=True).indices, W),
    "stable sort indices along dim 0": lambda x, i: x[:, 0][(x * i[:1].float()).sort(dim=0, stable=True).indices],
    "max(dim) indices": lambda x, i: F.embedding((x * i[:1].float()).max(-1).indices, W),
    "kthvalue indices": lambda x, i: F.embedding((x * i[:1].float()).kthvalue(2, -1).indices, W),
    "topk of the integer input itself": lambda x, i: x[i.topk(2).indices],
    "argsort of the integer input (lengths sorted longest first)": lambda x, i: x[i.argsort(descending=True)],
    "stable argsort of a float input's rows": lambda x, i: F.embedding((x * i[:1].float()).argsort(dim=-1, stable=True), W),
    # a MoE's dispatch sorted by expert: each slot's token, slot // top_k (DeepSeek's idxs // topk_ids.shape[1])
    "argsort floor-divided by a constant": lambda x, i: x[(x[:2] * i[:1].float()).topk(2, -1).indices.flatten()
                                                          .argsort() // 2],
    "a floor division by div's rounding mode, then an offset": lambda x, i: x[torch.div(
        (x * i[:1].float()).argmax(-1), 2, rounding_mode="floor") + 1],
    # a detection head's kept boxes (fourth new user, 2026-12-06): positions of a mask, whatever made the mask
    "nonzero of a mask": lambda x, i: x[torch.nonzero(x[:, 0] > i[:1].float()).squeeze(1)],
    "a column of nonzero of a 2-d mask": lambda x, i: x[torch.nonzero(x[:, :4] > i[0])[:, 1]],
}


@pytest.mark.parametrize("kind", BOUNDED)
def test_an_index_bounded_whatever_the_input_holds_needs_no_check(kind):
    """``(mask.cumsum(-1) - 1).clamp(0, N - 1)`` into an N-row table, ``ids % N``, ``logits.argmax(-1)``: the op
    before the index keeps it in eager's range whatever the input holds (lowering/index_ranges.py ``_bounded``),
    so the input gets neither a range nor an ``index_unchecked`` line (a served program needs no flag), and eager
    indeed accepts every value, extreme ones included."""
    function = BOUNDED[kind]
    ep = _exported(function, torch.tensor([1, 2]))
    for program in (ep, ep.run_decompositions(decomposition_table())):
        unchecked: dict = {}
        assert index_ranges(program, ["i"], unchecked) == {} and unchecked == {}, unchecked
    for value in ([2**40, -(2**40)], [-1, 7], [0, 0], torch.randint(-10**6, 10**6, (2,)).tolist()):
        function(X.clone(), torch.tensor(value))  # no IndexError: any value is in range


UNBOUNDED = {  # (forward, why the line says so)
    "a clamp wider than the table": (lambda x, i: F.embedding((i.cumsum(0) - 1).clamp(0, 5), W),
                                     r"bounded on the way to \[0, 5\]"),
    "a product after the clamp": (lambda x, i: x[(i * i).clamp(0, 1) * i], r"through aten.mul"),
    "a clamp of one side": (lambda x, i: F.embedding((i * i - 10).clamp(max=4), W), r"through aten.(mul|sub|clamp)"),
    "a remainder by more than the size": (lambda x, i: x[(i * i) % 5], r"bounded on the way to \[0, 4\]"),
    "a floor division that leaves the table": (lambda x, i: x[(i * i).clamp(0, 9) // 2], r"bounded on the way to \[0, 4\]"),
    "a floor division of an unbounded value": (lambda x, i: F.embedding(i // 2, W), r"through aten.(floor_divide|div)"),
}


@pytest.mark.parametrize("kind", UNBOUNDED)
def test_a_bound_that_does_not_hold_the_index_leaves_the_input_unchecked(kind):
    """Where the bound is wider than eager's range, or the value goes on through an op the flow does not follow
    after it, the input is recorded as unchecked, as before (eager refuses some value: checked here too)."""
    function, why = UNBOUNDED[kind]
    ep = _exported(function, torch.tensor([1, 2]))
    unchecked: dict = {}
    index_ranges(ep, ["i"], unchecked)
    (line,) = unchecked["i"]
    assert re.search(why, line), line
    assert not all(_eager_accepts(function, torch.tensor([v, v])) for v in (-6, -5, 2, 3, 5, 6))


def test_a_bound_over_a_dynamic_size_is_not_taken_for_one():
    """An index over a dim of dynamic size (the batch: once batched, other requests' rows) bounded by a
    constant, or a bound of a dynamic size (argmax over a dynamic dim) into a fixed table: which sizes the
    program will take is not known at lowering, so the input stays unchecked. The line says why (third new user,
    2026-12-06: a MoE's `x[argsort(...) // 2]` over n dynamic tokens was told `bounded on the way to [0, n - 1],
    which is not within eager's range there`, where eager's range is [0, n - 1])."""
    class Rows(torch.nn.Module):
        def forward(self, x, ids):
            return x[ids.cumsum(0).clamp(0, 3)]

    class Argmax(torch.nn.Module):
        def forward(self, logits):
            return F.embedding(logits.argmax(1), W)

    batch = torch.export.Dim("batch", min=2, max=64)
    rows = torch.export.export(Rows(), (torch.randn(4, 3), torch.tensor([0, 1, 2, 3])),
                               dynamic_shapes=({0: batch}, {0: batch}))
    argmax = torch.export.export(Argmax(), (torch.randn(2, 5),),
                                 dynamic_shapes=({1: torch.export.Dim("v", min=2, max=64)},))
    for ep, name in ((rows, "ids"), (argmax, "logits")):
        unchecked: dict = {}
        index_ranges(ep, [name], unchecked)
        (line,) = unchecked[name]
        assert "bounded on the way to" in line, line
        assert ("which lowering does not take as within eager's range there: a bound or size of a dynamic dim, which "
                "batching would widen to other requests' rows)") in line and "is not within" not in line, line


@pytest.mark.parametrize("bounded", [lambda x: x.argmax(-1), lambda x: (x[:, 0] * 7).long().clamp(0, 5),
                                     lambda x: (x[:, 0] * 7).long() % 4], ids=["argmax", "clamp", "remainder"])
def test_an_input_met_by_a_bounded_value_gets_no_range_eager_would_not_take(bounded):
    """(review 11) A bounded value gives an index an interval, not every value of it: ``argmax(x)[:, None] + j``
    into a 10-row table takes j = 9 in eager wherever the argmax is 0, so j must not get the range [0, 7] that
    refuses it (an InputError, a 400 when served); it is left unchecked, as any input met by an offset that
    depends on another input."""
    table = torch.randn(10, 3)

    class Two(torch.nn.Module):
        def forward(self, x, j):
            return F.embedding(bounded(x)[:, None] + j[None, :], table)

    ep = torch.export.export(Two(), (torch.randn(2, 3), torch.tensor([1, 2])))
    unchecked: dict = {}
    ranges = index_ranges(ep, ["x", "j"], unchecked)
    Two()(torch.zeros(2, 3), torch.tensor([0, 9]))  # the bounded value is 0: eager takes j up to 9
    assert all(entry["max"] is None or entry["max"] >= 9 for entry in ranges.get("j", [])), ranges
    assert "j" in unchecked and "x" not in unchecked and "x" not in ranges, (ranges, unchecked)


X10, W200, W40000 = torch.randn(10, 3), torch.randn(200, 3), torch.randn(40000, 1)
WRAPPING = {  # (forward(i), an example, a value eager refuses: its index wraps around in the narrow dtype)
    "uint8 % -4 (eager: % 252)": (lambda i: X10[(i % -4).long()], torch.uint8, 200),
    "int8 % 200 (eager: % -56)": (lambda i: F.embedding((i % 200).long(), W200), torch.int8, 100),
    "uint8 clamp(2, -1) (eager: clamp(2, 255))": (lambda i: X10[(i * 1).clamp(2, -1).long()], torch.uint8, 200),
    "int8 + 100": (lambda i: F.embedding((i + 100).long(), W200), torch.int8, 99),
    "int16 * 2": (lambda i: F.embedding((i * 2).long(), W40000), torch.int16, 19999),
    "int64 cast to int8": (lambda i: F.embedding(i.to(torch.int8).long(), W200), torch.int64, 150),
}


@pytest.mark.parametrize("kind", WRAPPING)
def test_an_index_computed_in_a_narrow_integer_dtype_is_never_taken_as_bounded(kind):
    """(review 11) Eager converts a constant to the tensor's dtype and computes in it, wrapping around: ``uint8 %
    -4`` took values up to 251 though it was read as [-3, 0] (an index into 10 rows needing no check at all), and
    ``int8 + 100`` is -57 for 99, which the recorded range [-100, 99] let through. Each value below makes eager
    raise IndexError and the compiled code end the process: the input must get a range that refuses it, or an
    ``index_unchecked`` line."""
    function, dtype, refused = WRAPPING[kind]
    try:
        function(torch.tensor([refused, 0], dtype=dtype))
    except RuntimeError as error:
        # torch 2.15 refuses a constant its dtype cannot hold (clamp(2, -1) on uint8) in eager and in export: no
        # package can hold the wrapped index there
        assert "representable range" in str(error) and "clamp" in kind, error
        with pytest.raises(Exception, match="representable range"):
            torch.export.export(Call(lambda x, i: function(i)), (torch.tensor([1, 2], dtype=dtype),))
        return
    except IndexError:
        pass
    else:
        pytest.fail(f"eager took {refused} ({kind})")
    ep = torch.export.export(Call(lambda x, i: function(i)), (torch.tensor([1, 2], dtype=dtype),))
    unchecked: dict = {}
    ranges = index_ranges(ep, ["i"], unchecked)
    refuses = any(not (entry["min"] is None or entry["min"] <= refused) or
                  not (entry["max"] is None or refused <= entry["max"]) for entry in ranges.get("i", []))
    assert refuses or "i" in unchecked, (ranges, unchecked)


def test_a_tied_table_is_named_as_the_line_that_indexes_it_reads():
    """Third new user (2026-12-06): a GPT block whose LM head shares the embedding's weight (``self.head.weight =
    self.tok.weight``) had its token ids refused "as the index of aten::embedding over 100 rows of head.weight, at
    ...: x = self.tok(ids)": torch.export reads tied parameters through one placeholder, the last name's. The first
    name is given, with the others."""
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, ids):
            return self.head(self.tok(ids))

    ep = torch.export.export(Tied(), (torch.tensor([[1, 2]]),), strict=False)
    (entry,) = index_ranges(ep, ["ids"])["ids"]
    assert "over 10 rows of tok.weight (tied to head.weight), at " in entry["reason"], entry


class GraphLayer(torch.nn.Module):
    """A graph network's aggregation (fourth new user, 2026-12-06): messages made of every input, scattered to
    their edges' destinations by an index expanded to the messages' shape."""

    def forward(self, x, edges, weights):
        messages = torch.relu(x[edges[0]] * weights[:, None])
        index = edges[1][:, None].expand_as(messages)
        most = torch.full_like(x, -1.0).scatter_reduce(0, index, messages, "amax")
        count = torch.zeros_like(weights).new_zeros(x.shape[0]).index_add(0, edges[1], torch.ones_like(weights))
        return most, count


def test_an_operand_read_for_its_shape_alone_carries_no_values_to_an_index():
    """``edges[1][:, None].expand_as(messages)``: the messages' values (of x, weights and edges) do not reach the
    scatter's index, only their shape; and ``full_like(x)`` holds none of x. Before, every input was said to reach
    aten.scatter_reduce unchecked (a UserWarning each, and ``aotcuda serve`` refused the program), where only
    ``edges`` does, and it is checked: it gets its range, and no line."""
    model = GraphLayer()
    x, edges, weights = torch.randn(5, 3), torch.tensor([[0, 4, 2], [1, 1, 3]]), torch.rand(3)
    ep = torch.export.export(model, (x, edges, weights))
    for program in (ep, ep.run_decompositions(decomposition_table())):
        unchecked: dict = {}
        ranges = index_ranges(program, ["x", "edges", "weights"], unchecked)
        assert unchecked == {}, unchecked
        assert set(ranges) == {"edges"} and all(entry["max"] == 4 for entry in ranges["edges"]), ranges
    assert torch.equal(model(x, edges, weights)[1], torch.tensor([0.0, 2.0, 0.0, 1.0, 0.0]))


def test_an_index_modulo_the_size_of_its_dim_needs_no_check():
    """`bx[0][idx % bx.shape[1]]` (a detection head's box of each kept score, the fourth new user, 2026-12-06): the
    remainder by a dynamic size was not followed, so `idx` was said unchecked, and `aotcuda serve` refused the package
    without --allow-unchecked-indices. Its values are [0, n - 1] into a dim of size n for every n: no check is needed
    (the file-system breaker, 2026-12-06). Modulo an input's dim 0 (the batch, which batching widens to other
    requests' rows), or into a dim of another size, it stays unchecked."""
    class Head(torch.nn.Module):
        def forward(self, bx, idx):
            return bx[0][idx % bx.shape[1]]

    class Batch(torch.nn.Module):
        def forward(self, bx, idx):
            return bx[idx % bx.shape[0]]

    class Other(torch.nn.Module):
        def forward(self, bx, idx):
            return bx[0][idx % bx.shape[2]]

    n, b = torch.export.Dim("n", min=2, max=64), torch.export.Dim("b", min=1, max=8)
    shapes = ({0: b, 1: n, 2: torch.export.Dim("m", min=2, max=64)}, {0: torch.export.Dim("k", min=1, max=16)})
    for module, checked in ((Head(), True), (Batch(), False), (Other(), False)):
        ep = torch.export.export(module, (torch.randn(2, 5, 4), torch.tensor([0, 7, 3])), dynamic_shapes=shapes)
        unchecked: dict = {}
        assert index_ranges(ep, ["idx"], unchecked) == {}
        assert ("idx" not in unchecked) == checked, (type(module).__name__, unchecked)
        if not checked:
            assert "bounded on the way to [0, s" in unchecked["idx"][0], unchecked


def test_an_index_modulo_a_data_dependent_size_stays_unchecked():
    """`t[idx % n]` with `n = k.item()` and `t` of n rows (break-new, 2026-12-06): the remainder rule took any SymInt
    as a positive size, so idx was said checked; but u0 may be 0 at a call (eager: ZeroDivisionError), and the
    divisor check leaves data-dependent sizes out (signature.size_divisors): the index stays unchecked."""
    class Narrowed(torch.nn.Module):
        def forward(self, w, idx, k):
            n = k.item()
            torch._check(n >= 0)
            torch._check(n <= w.shape[0])
            return w.narrow(0, 0, n)[idx % n]

    ep = torch.export.export(Narrowed(), (torch.randn(8, 3), torch.tensor([0, 7, 3]), torch.tensor(5)))
    unchecked: dict = {}
    index_ranges(ep, ["idx", "k"], unchecked)
    assert "idx" in unchecked, unchecked


def test_a_part_told_at_lowering_is_checked_alone_and_a_refusal_elsewhere_says_the_whole_input_is_checked(checks):
    """New user (2026-12-07): `table[idx[0]] * idx[1, :, None]` with idx[1, 2] = 100 was refused with "(read through a
    slice: the whole input is checked) ... Eager refuses it too", a call eager runs. A constant select or slice of the
    input as laid out is now recorded as the entry's part and only it is checked; where the part cannot be told (a
    select after a transpose) the whole input still is, and the refusal says that instead of claiming eager's."""
    found, spec = checks["a row of i, the other a multiplier"]
    index = torch.tensor([[100], [1]])
    assert _eager_accepts(CASES["a row of i, the other a multiplier"][0], index)
    assert _accepted(found, spec, index)
    index = torch.tensor([[100], [4]])  # the row read as an index: eager's IndexError, refused where it is in i
    assert not _eager_accepts(CASES["a row of i, the other a multiplier"][0], index)
    _, bindings = check_inputs([index], [spec], ["i"], torch.device("cpu"), 1)
    with pytest.raises(InputError, match=r"holds 4 at \(1, 0\), outside \[-4, 3\].*Eager refuses it too"):
        found.check([index], bindings)

    found, spec = checks["a row after a transpose"]
    index = torch.tensor([[1, 100]])
    assert _eager_accepts(CASES["a row after a transpose"][0], index)  # the whole check refuses a call eager runs
    _, bindings = check_inputs([index], [spec], ["i"], torch.device("cpu"), 1)
    with pytest.raises(InputError) as refused:
        found.check([index], bindings)
    said = str(refused.value)
    assert "holds 100 at (0, 1)" in said and "the whole input is checked" in said and "Eager refuses" not in said
    assert "could not tell which" in said and "as an input of its own" in said


def test_an_index_every_value_of_the_input_reaches_is_not_said_to_be_a_part_not_told(checks):
    """Review (2026-12-07): where a concatenation holds the whole input beside a part of it (cat([i, i[:1]])), lowering
    took the flow for "a part it could not tell": the refusal said eager may well run the call, and advised turning the
    check off, where eager refuses it (every value of i reaches the index)."""
    kind = "cat([i, i[:1]])"
    found, spec = checks[kind]
    index = CASES[kind][1].clone()
    index.view(-1)[1] = 100
    assert not _eager_accepts(CASES[kind][0], index)
    _, bindings = check_inputs([index], [spec], ["i"], torch.device("cpu"), 1)
    with pytest.raises(InputError) as refused:
        found.check([index], bindings)
    said = str(refused.value)
    assert "Eager refuses it too" in said and "the whole input is checked" not in said, said
