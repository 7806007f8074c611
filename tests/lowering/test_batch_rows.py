"""lowering/batch_rows.py: the probe of whether a program mixes the rows of its batch dim (break40, 2026-12-07).

A program that passes every shape check of serving's batching (inputs and outputs share one dynamic dim 0) may still
compute an output's row from other rows (``x - x.mean(0)``): batched, one client's answer was made from, and told it,
another client's rows. The probe runs the lowered program (before the compile: no AOTInductor build here)."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from aotcuda.lowering.batch_rows import rows_mixed
from aotcuda.lowering.pipeline import before_compile


class Rows(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, ids):
        return self.body(self, x, ids)


MIXED = {
    "centered": lambda m, x, ids: x - x.mean(0, keepdim=True),
    "cumsum": lambda m, x, ids: x.cumsum(0),
    "flip": lambda m, x, ids: x.flip(0) * 2,
    "batch attention": lambda m, x, ids: torch.softmax(x @ x.T, -1) @ m.linear(x),
    "through an index": lambda m, x, ids: x[ids.clamp(0, 0)] + x,  # row 0 of the batch read by every row
    "its place": lambda m, x, ids: x + torch.arange(x.shape[0])[:, None],  # found by moving the rows, not by values
    "the count": lambda m, x, ids: x * x.shape[0],
    "integer rows": lambda m, x, ids: x * ids.flip(0)[:, None],  # through an integer input alone
}
INDEPENDENT = {
    "linear": lambda m, x, ids: m.linear(x).relu(),
    "softmax over features": lambda m, x, ids: x.softmax(-1),
    "embedding": lambda m, x, ids: m.linear.weight[ids.clamp(0, 3)] * x,
}


def _exported(body, rows: int, dtype=torch.float32):
    torch.manual_seed(0)
    model = Rows(body).eval().to(dtype)
    args = (torch.randn(rows, 4, dtype=dtype), torch.arange(rows) % 4)  # rows of other values: a changed row differs
    batch = Dim("batch", min=1, max=64)
    ep = before_compile(model, args, {}, ({0: batch}, {0: batch}))[0]
    return ep, args


@pytest.mark.parametrize("rows", [3, 2])
@pytest.mark.parametrize("name", sorted(MIXED))
def test_a_program_that_mixes_its_batch_rows_is_found(name, rows):
    ep, args = _exported(MIXED[name], rows)
    assert rows_mixed(ep, args, {}) is True


@pytest.mark.parametrize("name", sorted(INDEPENDENT))
def test_a_program_whose_rows_are_independent_is_not_flagged(name):
    ep, args = _exported(INDEPENDENT[name], 3)
    assert rows_mixed(ep, args, {}) is False
    # and its eager answer batched is each row's alone, which is what serving relies on
    module = ep.module()
    torch.testing.assert_close(module(*args)[:2], module(args[0][:2], args[1][:2]))


@pytest.mark.parametrize("rows", [3, 16])
@pytest.mark.parametrize("name", sorted(MIXED))
def test_a_bfloat16_program_that_mixes_its_batch_rows_is_found_within_its_tolerance(name, rows):
    """review40a: the tolerance of a bfloat16 output is a few of its ulps, not float32's 1e-4; the probe's changes
    still show through it."""
    ep, args = _exported(MIXED[name], rows, torch.bfloat16)
    assert rows_mixed(ep, args, {}) is True


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", sorted(INDEPENDENT))
def test_a_half_precision_program_whose_rows_are_independent_is_not_flagged(name, dtype):
    ep, args = _exported(INDEPENDENT[name], 16, dtype)
    assert rows_mixed(ep, args, {}) is False


def _an_ulp_at_odd_batch_sizes(m, x, ids):
    """Each row's own values, one ulp up at an odd batch size: what a kernel chosen by batch size (a split-K, another
    order of a reduction) does to an honest model's low-precision rows."""
    ulp = torch.nextafter(x, torch.full_like(x, float("inf"))) - x
    return m.linear(x) + ulp * (x.shape[0] % 2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_rows_one_ulp_apart_between_batch_sizes_are_not_taken_for_mixed_rows(dtype):
    """review40a: the probe's run of one row fewer compares rows computed at another batch size; a bfloat16 output one
    ulp off there (about 4e-3 of it) exceeded the tolerance of 1e-4 for every dtype, so an honest model was recorded
    rows_mixed=True and refused batching."""
    ep, args = _exported(_an_ulp_at_odd_batch_sizes, 4, dtype)
    module = ep.module()
    even, odd = module(*args)[1:], module(args[0][1:], args[1][1:])
    assert not torch.equal(even, odd)  # the rows of 4 and of 3 differ ...
    assert ((even - odd).abs() <= 2 * torch.finfo(dtype).eps * even.abs().clamp(min=1)).all()  # ... by rounding
    assert rows_mixed(ep, args, {}) is False
    ep, args = _exported(lambda m, x, ids: _an_ulp_at_odd_batch_sizes(m, x, ids) - x.mean(0), 4, dtype)
    assert rows_mixed(ep, args, {}) is True  # and with a mean across the rows beside it, still found


@pytest.mark.parametrize("weight", [1e-3, 0.1])
def test_a_small_mix_in_bfloat16_is_still_found_where_the_runs_repeat_exactly(weight):
    """The dtype's rounding is allowed only between runs that may round otherwise (another batch size, a run that does
    not repeat itself): a weighted mean across the rows in bfloat16, a change of a few ulps or less, is found by the
    value probe as in float32 (with twice bfloat16's eps there, neither weight was)."""
    ep, args = _exported(lambda m, x, ids: x + weight * x.mean(0), 8, torch.bfloat16)
    assert rows_mixed(ep, args, {}) is True


def test_a_program_without_a_shared_dynamic_dim_zero_is_not_probed():
    class Static(torch.nn.Module):
        def forward(self, x):
            return x - x.mean(0)

    x = torch.randn(3, 4)
    ep = before_compile(Static(), (x,), {}, None)[0]
    assert rows_mixed(ep, (x,), {}) is None


def test_a_lowered_program_that_mixes_its_batch_rows_records_it_and_is_not_batched(tmp_path):
    """The whole way: lower() records rows_mixed in the package's signature, and the serving plan a replica makes from
    the loaded program refuses batching. Batched, the program's answer to one request would have been computed from
    the other request's rows (compared with eager on fresh random inputs)."""
    import aotcuda
    from aotcuda.errors import ServingConfigError
    from aotcuda.serving.batching import combine, serving_plan

    class Centered(torch.nn.Module):
        def forward(self, x):
            return x - x.mean(0, keepdim=True)

    batch = Dim("batch", min=1, max=64)
    path = tmp_path / "centered.pt2"
    aotcuda.lower(Centered(), (torch.randn(4, 3),), dynamic_shapes=({0: batch},), device="cpu", package_path=path)
    with aotcuda.load(path) as program:
        assert program.signature["rows_mixed"] is True
        with pytest.raises(ServingConfigError, match="cannot be batched: an output's row depends on other rows"):
            serving_plan(program.input_specs, program.output_specs, 8, str(path),
                         rows_mixed=program.signature.get("rows_mixed"))
        alice, mallory = [torch.randn(2, 3)], [torch.randn(2, 3) * 100]
        flat, _ = combine([alice, mallory])
        torch.testing.assert_close(program(*alice), Centered()(*alice))  # alone: eager's answer
        assert not torch.allclose(program(*flat)[:2], Centered()(*alice))  # what batching would have answered her


def test_random_draws_in_forward_are_not_taken_for_mixed_rows():
    """A dropout left in training mode, or a torch.randn in forward, draws new numbers at each run: without one seed for
    every run of the probe, each program with one would have been refused batching."""
    ep, args = _exported(lambda m, x, ids: torch.nn.functional.dropout(m.linear(x), 0.5, True) + torch.randn_like(x), 3)
    state = torch.random.get_rng_state()
    assert rows_mixed(ep, args, {}) is False
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's generator as it was


@pytest.mark.parametrize("across, mixed", [(False, False), (True, True)])
def test_a_complex_program_is_probed_on_the_real_pairs_it_takes(across, mixed):
    """ReplaceComplexWithRealPass makes a complex input a real pair (a trailing dim of 2): the probe ran the lowered
    program on the complex example and failed (not probed), so a complex program that mixes its rows was batched."""
    class Spectrum(torch.nn.Module):
        def forward(self, z):
            spectrum = torch.fft.fft(z, dim=-1)
            return spectrum - spectrum.sum(0, keepdim=True) if across else spectrum * 2

    z = torch.randn(4, 8, dtype=torch.complex64)
    ep = before_compile(Spectrum(), (z,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
    assert rows_mixed(ep, (z,), {}) is mixed


class Coordinates(torch.nn.Module):
    """A row of coordinates in [0, 1) that index a table (a row's floats as an index), and a mix across rows."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Linear(2, 3)

    def forward(self, c):
        return self.table.weight[(c[:, 0] * 3).long()] - c.mean(0).sum()


def test_a_change_the_program_cannot_take_skips_that_change_not_the_probe():
    """(review40b) The probe's one change of a float row, x*2+1, sent a coordinate that indexes out of range: the
    IndexError made the whole probe "not probed" (None, said at debug level only), and serving batched a program that
    mixes its rows. A row changed to another row's values stays in the data's domain; a change that fails is skipped."""
    c = torch.rand(4, 2)
    ep = before_compile(Coordinates(), (c,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
    assert rows_mixed(ep, (c,), {}) is True
    module, fresh = ep.module(), torch.rand(3, 2)  # what it found: an output row moves with another row (eager)
    assert not torch.allclose(module(fresh)[:2], module(fresh[:2]))


def test_a_program_the_probe_cannot_run_is_not_probed_and_says_why(monkeypatch):
    """Where no changed run goes through, the record stays None, with the reason lower() warns with (and `aotcuda
    inspect` shows: tests/test_cli.py)."""
    import aotcuda.lowering.batch_rows as batch_rows

    x = torch.randn(3, 4)
    ep = _exported(MIXED["centered"], 3)[0]

    def failing(tree, row, how):  # inputs the program refuses (a static dim of another size): every changed run fails
        return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t[..., :1].clone() if t.dim() > 1 else t, tree)

    monkeypatch.setattr(batch_rows, "_changed", failing)
    probe = batch_rows.probe_rows(ep, (x, torch.arange(3)), {})
    assert probe.mixed is None and "failed on every changed example" in probe.not_probed
    warning = batch_rows.not_probed_warning(probe.not_probed)
    assert warning.startswith("aotcuda: ") and "unchecked" in warning and "--max-batch-size 1" in warning


def _capacity_routing(m, x, ids):
    """Top-1 routing of each row to one of two experts, each taking at most 2 rows, counted along dim 0 (cumsum): a
    row over its expert's capacity is dropped, so whether a row is kept depends on the rows before it."""
    gate = m.linear(x)[:, :2].argmax(-1)
    onehot = torch.nn.functional.one_hot(gate, 2)
    place = onehot.cumsum(0) * onehot
    return x * ((place > 0) & (place <= 2)).any(-1, keepdim=True)


THRESHOLDS = {
    "capacity routing": _capacity_routing,
    "a mix past a threshold": lambda m, x, ids: torch.where(x.abs().amax() > 10, x - x.mean(0), x),
}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_a_mix_that_only_some_values_or_rows_reach_is_found(name, seed):
    """(review40b) The probe changed two rows, each by x*2+1 alone: a mix past a threshold (an amax over the batch
    above 10) or a capacity counted along dim 0 (top-1 routing of 3 rows, 5 of 6 seeds) was recorded false and
    batched. Up to four rows, each changed three ways (another row's values, x*2+1, x*1000), find them; what was
    found is what eager does on fresh inputs: an output row moved by another row."""
    torch.manual_seed(0)
    model = Rows(THRESHOLDS[name]).eval()
    torch.manual_seed(seed)
    x = torch.randn(3, 4)
    ep = before_compile(model, (x, torch.arange(3)), {}, ({0: Dim("batch", min=1, max=64)},) * 2)[0]
    assert rows_mixed(ep, (x, torch.arange(3)), {}) is True


def test_a_row_that_x_times_2_plus_1_leaves_as_it_is_is_still_changed():
    """(review40b) A row of -1 is a fixed point of x*2+1: ``x - x[0:1]`` on rows of -1 was recorded false."""
    x = torch.full((4, 4), -1.0)
    ep = before_compile(Rows(lambda m, x, ids: x - x[0:1]), (x, torch.arange(4)), {},
                        ({0: Dim("batch", min=1, max=64)},) * 2)[0]
    assert rows_mixed(ep, (x, torch.arange(4)), {}) is True
    fresh = torch.randn(3, 4)
    assert not torch.allclose(ep.module()(fresh, torch.arange(3))[1:], ep.module()(fresh[1:], torch.arange(2)))


class Tokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 4)

    def forward(self, ids):
        vectors = self.embedding(ids)
        return vectors - vectors.mean(0, keepdim=True)


@pytest.mark.parametrize("shape", [(4, 3), (4,)])
def test_integer_inputs_whose_example_rows_are_alike(shape):
    """(review40b) Token ids of one sentence repeated (``tokenizer(["hello"] * 4)``): the probe's change of an integer
    row copied the next row, which changed nothing, and a program that mixes its rows was recorded false. A row of
    several tokens is now also changed by rolling its own tokens (found); where no change changes any input (one token a
    row), it is not probed (None), with why, never false."""
    from aotcuda.lowering.batch_rows import probe_rows

    ids = torch.full(shape, 3) if len(shape) == 1 else torch.tensor([[1, 2, 3]] * 4)
    ep = before_compile(Tokens(), (ids,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
    probe = probe_rows(ep, (ids,), {})
    if len(shape) == 1:
        assert probe.mixed is None and "every row of the example inputs is alike" in probe.not_probed
    else:
        assert probe.mixed is True
    fresh = torch.randint(0, 10, (3, *shape[1:]))  # what eager does: a row's answer moves with the other rows
    assert not torch.allclose(ep.module()(fresh)[:1], ep.module()(fresh[:1]))


def test_the_probe_queues_no_seed_for_cudas_first_use():
    """(review40b) torch.manual_seed, on a host where CUDA is not initialized, queues a seed of every CUDA generator
    for CUDA's first use, which fork_rng does not undo: after lower(device="cpu"), the caller's first CUDA draw came
    from the probe's seed 0, not from the caller's own (torch.cuda.manual_seed_all(123) before it was replaced)."""
    tracker, queue = getattr(torch.cuda, "_lazy_seed_tracker", None), getattr(torch.cuda, "_queued_calls", None)
    if tracker is None or queue is None or torch.cuda.is_initialized():
        pytest.skip("no lazy CUDA seed queue to read in this torch, or CUDA is initialized")
    ep, args = _exported(MIXED["centered"], 3)
    before = (tracker.manual_seed_all_cb, tracker.manual_seed_cb, len(queue))
    assert rows_mixed(ep, args, {}) is True
    assert (tracker.manual_seed_all_cb, tracker.manual_seed_cb, len(queue)) == before


def test_the_probe_can_be_switched_off_and_then_says_so(monkeypatch):
    """The probe costs up to 16 eager forwards at lowering; AOTCUDA_BATCH_ROWS_PROBE=0 skips it: not probed (None),
    with the reason lower() warns with, never a false record."""
    from aotcuda.lowering.batch_rows import not_probed_warning, probe_rows

    ep, args = _exported(MIXED["centered"], 3)
    monkeypatch.setenv("AOTCUDA_BATCH_ROWS_PROBE", "0")
    probe = probe_rows(ep, args, {})
    assert probe.mixed is None and probe.not_probed == "AOTCUDA_BATCH_ROWS_PROBE=0"
    assert "(AOTCUDA_BATCH_ROWS_PROBE=0); serving batches this program unchecked" in not_probed_warning(probe.not_probed)
    monkeypatch.setenv("AOTCUDA_BATCH_ROWS_PROBE", "1")
    assert probe_rows(ep, args, {}).mixed is True


def _empty_package(ep, path, configs):
    """lower()'s compile replaced by an empty package: the steps after it read the signature, not the code."""
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/archive_format", "pt2")
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper_metadata.json", '{"AOTI_DEVICE_KEY": "cpu"}')
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper.so", b"\x7fELF")
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper.cpp", "void run() { }\n")


def test_a_mix_past_a_threshold_no_probe_reaches_is_recorded_and_refused_batching(tmp_path, monkeypatch):
    """(rows41) torch.where(x.abs().amax() > 1e6, x.sum(0, keepdim=True).expand_as(x), x): the probe's changes of a
    row (another row, x*2+1, x*1000) never reach 1e6, so lower() recorded rows_mixed false and serving batched it; the
    graph walk (lowering/batch_row_flow.py) finds the amax across the batch dim: rows_mixed true, with the op and the
    line, and the serving plan refuses batching. Eager shows the leak: a client's row of 1e7 moves another's answer."""
    import aotcuda
    import aotcuda.lowering.pipeline as pipeline
    from aotcuda.errors import ServingConfigError
    from aotcuda.runtime.package import read_signature
    from aotcuda.runtime.specs import specs_from_signature
    from aotcuda.serving.batching import graph_rows_reason, serving_plan

    class Gated(torch.nn.Module):
        def forward(self, x):
            return torch.where(x.abs().amax() > 1e6, x.sum(0, keepdim=True).expand_as(x), x)

    monkeypatch.setattr(pipeline, "_compile", _empty_package)
    path = tmp_path / "gated.pt2"
    aotcuda.lower(Gated(), (torch.randn(4, 3),), dynamic_shapes=({0: Dim("batch", max=64)},), device="cpu",
                  package_path=path)
    signature = read_signature(str(path))
    assert signature["rows_mixed"] is True
    assert signature["rows_graph"] == "mixes" and "aten.amax" in signature["rows_graph_reason"]
    assert "test_batch_rows.py" in signature["rows_graph_reason"]
    inputs, outputs = specs_from_signature(signature, str(path))
    with pytest.raises(ServingConfigError, match="cannot be batched: an output's row depends on other rows .*"
                                                 "found it in the program's graph: aten.amax.default computes along"):
        serving_plan(inputs, outputs, 8, str(path), rows_mixed=signature["rows_mixed"],
                     rows_found=graph_rows_reason(signature))
    alice, mallory = torch.randn(2, 3), torch.full((2, 3), 1e7)
    assert not torch.allclose(Gated()(torch.cat([alice, mallory]))[:2], Gated()(alice))


def test_lower_warns_once_and_records_why_where_the_rows_were_not_probed(tmp_path, monkeypatch):
    """lower()'s side of a record that is None although serving would batch the shapes: one `aotcuda:` UserWarning
    (batching it unchecked; serve it with --max-batch-size 1) and the reason in the signature; nothing said where the
    probe ran. The compile is replaced by an empty package (the steps after it read the signature, not the code)."""
    import warnings

    import aotcuda
    import aotcuda.lowering.pipeline as pipeline
    from aotcuda.runtime.package import read_signature

    class Centered(torch.nn.Module):
        def forward(self, x):
            return x - x.mean(0, keepdim=True)

    class HalvedCentered(torch.nn.Module):  # a mix behind an op the graph walk does not know (batch_row_flow.py)
        def forward(self, x):
            from torch._higher_order_ops import while_loop

            zero = torch.zeros((), dtype=torch.long)
            y = while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, y * 0.5), (zero, x))[1]
            return y - y.mean(0, keepdim=True)

    monkeypatch.setattr(pipeline, "_compile", _empty_package)

    def lowered(probe: str, model):
        monkeypatch.setenv("AOTCUDA_BATCH_ROWS_PROBE", probe)
        path = tmp_path / f"{type(model).__name__}{probe}.pt2"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            aotcuda.lower(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch", max=64)},), device="cpu",
                          package_path=path)
        said = [str(w.message) for w in caught if "was not probed" in str(w.message)]
        return read_signature(str(path)), said

    signature, said = lowered("0", HalvedCentered())
    assert (signature["rows_mixed"], signature["rows_not_probed"]) == (None, "AOTCUDA_BATCH_ROWS_PROBE=0")
    assert signature["rows_graph"] == "not proved"
    assert len(said) == 1 and said[0].startswith("aotcuda: ") and "--max-batch-size 1" in said[0]
    signature, said = lowered("1", HalvedCentered())
    assert signature["rows_mixed"] is True and "rows_not_probed" not in signature and said == []
    # (rows41) a mix the graph shows is recorded without the probe: nothing to warn of
    signature, said = lowered("0", Centered())
    assert (signature["rows_mixed"], signature["rows_graph"]) == (True, "mixes") and said == []
    assert "rows_not_probed" not in signature and "aten.mean.dim" in signature["rows_graph_reason"]


def test_a_switch_value_that_is_no_flag_is_refused_before_the_compile(tmp_path, monkeypatch):
    """(review40d) AOTCUDA_BATCH_ROWS_PROBE was first read after the compile, and a typo ('disabled') threw the
    compile's minutes away with the package; it is read at lower()'s start now."""
    import aotcuda
    import aotcuda.lowering.pipeline as pipeline
    from aotcuda.switches import SwitchError

    compiles = []
    monkeypatch.setattr(pipeline, "_compile", lambda *args: compiles.append(args))
    monkeypatch.setenv("AOTCUDA_BATCH_ROWS_PROBE", "disabled")
    with pytest.raises(SwitchError, match="AOTCUDA_BATCH_ROWS_PROBE"):
        aotcuda.lower(Rows(MIXED["centered"]), (torch.randn(3, 4), torch.arange(3)), device="cpu",
                      package_path=tmp_path / "m.pt2")
    assert compiles == []


class _NotRepeating(torch.nn.Module):
    """A run that does not repeat itself bit for bit, as CUDA's atomics in bfloat16: one ulp up at a third of the
    elements of ``x`` before ``body``, which third changing with each run (a Python counter, not torch's generator)."""

    def __init__(self, body):
        super().__init__()
        self.body, self.runs = body, 0

    def forward(self, x):
        self.runs += 1
        bits = x.view(torch.int16).clone()
        bits += (torch.arange(x.numel()).reshape(x.shape) % 3 == self.runs % 3).to(torch.int16)
        return self.body(bits.view(torch.bfloat16))


def _not_repeating(ep, body):
    real = ep.module
    ep.module = lambda: _NotRepeating(lambda x: real()(x))
    return ep


def test_where_runs_do_not_repeat_a_count_dependence_is_still_found_and_an_integer_output_is_not_compared():
    """(review40d) Where the same seed's runs differ by an ulp (CUDA's atomics), the probe's random-draw check compared
    them at 1e-4 and took the ulp for random draws: x * len(x) was recorded false; and an argmax over a near tie, an
    integer output that flips between such runs, had an honest classifier recorded as mixing rows."""
    from aotcuda.lowering.batch_rows import probe_rows

    class Count(torch.nn.Module):
        def forward(self, x):
            return x * x.shape[0]

    class Head(torch.nn.Module):
        def forward(self, logits):
            return logits, logits.argmax(-1)

    torch.manual_seed(0)
    x = torch.randn(8, 16).bfloat16()
    ep = before_compile(Count(), (x,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
    assert probe_rows(_not_repeating(ep, None), (x,), {}).mixed is True
    logits = torch.randn(8, 32).bfloat16()
    top = int(logits[5].argmax())
    logits[5, top - 1 if top else 1] = logits[5, top]  # row 5: two classes tie
    ep = before_compile(Head(), (logits,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
    assert probe_rows(_not_repeating(ep, None), (logits,), {}).mixed is False


def test_a_program_whose_outputs_serving_would_not_batch_is_not_probed_and_not_warned_of():
    """(review40d) ``x.sum(0)`` has no batch dim in its output, so serving refuses to batch it by its shapes; the probe
    ran anyway (its record then hung on whether a static dim equalled the example's rows) and lower() warned, with the
    probe off, that serving batches it unchecked."""
    from aotcuda.lowering.batch_rows import probe_rows

    class Pooled(torch.nn.Module):
        def forward(self, x):
            return x.sum(0)

    for rows in (3, 4):
        x = torch.randn(rows, 4)
        ep = before_compile(Pooled(), (x,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
        assert probe_rows(ep, (x,), {}) == probe_rows.__globals__["RowsProbe"](None)


def test_a_whole_row_copy_keeps_every_input_of_one_example_row():
    """(review40d) On CUDA an out-of-range index is a device-side assert that ends the process's CUDA context, not an
    IndexError the probe skips: there the only change is a whole example row, the same row for every input, so that
    every value stays in its domain and consistent with the others (a user id stays in the users' column)."""
    from aotcuda.lowering.batch_rows import _IN_DOMAIN_CHANGES, _changed

    assert _IN_DOMAIN_CHANGES == ("whole row",)
    ids = torch.stack([torch.randint(0, 10_000, (6,)), torch.randint(0, 500, (6,))], -1)
    lengths = torch.randint(1, 9, (6,))
    lengths[2] = lengths[3]
    for row in range(6):
        changed_ids, changed_lengths = _changed((ids, lengths), row, "whole row")
        rows = {(tuple(i.tolist()), int(n)) for i, n in zip(ids, lengths)}
        assert {(tuple(i.tolist()), int(n)) for i, n in zip(changed_ids, changed_lengths)} <= rows
        assert not torch.equal(changed_ids, ids) or not torch.equal(changed_lengths, lengths)


@pytest.mark.cuda
def test_on_cuda_the_probe_keeps_indices_in_range_and_cuda_usable():
    """A recommender's ids (users in column 0, items in column 1): rolling a row put a user id into the items' table,
    on CUDA a device-side assert; the probe must leave CUDA usable and still find a mix."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device; torch.cuda.is_available() is False here")
    from aotcuda.lowering.batch_rows import probe_rows

    class Recommender(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.users, self.items = torch.nn.Embedding(10_000, 8), torch.nn.Embedding(500, 8)

        def forward(self, ids):
            score = (self.users(ids[:, 0]) * self.items(ids[:, 1])).sum(-1)
            return score - score.mean()

    ids = torch.stack([torch.randint(0, 10_000, (6,)), torch.randint(0, 500, (6,))], -1).cuda()
    ep = before_compile(Recommender().cuda(), (ids,), {}, ({0: Dim("batch", min=1, max=64)},))[0]
    assert probe_rows(ep, (ids,), {}).mixed is True
    torch.cuda.synchronize()
    assert float(torch.ones(2, device="cuda").sum()) == 2.0


def test_arguments_named_input_and_input_1_are_probed_as_the_model_computes():
    """Found by review41c: ep.module()'s generated code (torch 2.13) renames a placeholder named after a builtin by an
    assignment (``input_1 = input``) that overwrote the argument named ``input_1``, so the probe ran ``input + (input
    .sum(0) - input.sum(0))`` and said the rows stay apart, where the model mixes them."""
    namespace = {"torch": torch}
    exec("class Named(torch.nn.Module):\n"
         "    def forward(self, input, input_1):\n"
         "        return input + (input_1.sum(0, keepdim=True) - input.sum(0, keepdim=True))\n", namespace)
    model, args, batch = namespace["Named"](), (torch.randn(4, 3), torch.randn(4, 3)), Dim("batch")
    ep = torch.export.export(model, args, dynamic_shapes=({0: batch}, {0: batch}))
    assert [node.name for node in ep.graph.nodes if node.op == "placeholder"] == ["input", "input_1"]
    assert rows_mixed(ep, args, {}) is True
