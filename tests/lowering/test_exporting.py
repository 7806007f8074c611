"""aotcuda's export step (aotcuda.lowering.exporting): a guard torch cannot prove over the caller's Dim range is
checked by aotcuda value by value; the program exports when it holds everywhere, and the caller gets
torch's error (reasons, suggested fixes) with the failing size when it does not. Same results on torch
2.11 (which cannot prove the repeat_kv guard below) and 2.13 (which does not emit it)."""

import pytest
import sympy
import torch
from torch.export import Dim
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from aotcuda.errors import DynamicShapesError
from aotcuda.lowering import torch_fixes
from aotcuda.lowering.exporting import export_program
from aotcuda.lowering.size_guards import MAX_CHECKED_POINTS, first_failure


class RepeatKV(torch.nn.Module):
    """Grouped-query attention's repeat_kv (transformers' sdpa_attention.py): expand a new dim, reshape it
    into the heads. torch 2.11 guards Eq(Min(16*seq, 32*seq), 16*seq) on its strides and cannot prove it."""

    def forward(self, x):
        b, kv, s, d = x.shape
        y = x[:, :, None, :, :].expand(b, kv, 2, s, d).reshape(b, kv * 2, s, d)
        return torch.nn.functional.scaled_dot_product_attention(y, y, y, is_causal=True)


class PositionTable(torch.nn.Module):
    """Adds a table of 16 positions: a longer sequence really does not work (the guard seq <= 16)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(16, 8))

    def forward(self, x):
        return x + self.table[: x.shape[1]] * 2


def test_a_guard_true_over_the_range_exports_and_matches_eager():
    seq = Dim("seq", min=2, max=64)
    ep = export_program(RepeatKV(), (torch.randn(2, 2, 12, 16),), None, ({2: seq},))
    for length in (5, 64):
        x = torch.randn(2, 2, length, 16)
        expected = RepeatKV()(x)
        error = ((ep.module()(x) - expected).norm() / expected.norm()).item()
        assert error <= 1e-5, f"length {length}: relative error {error:.1e}"


class EvenOnly(torch.nn.Module):
    """A branch on the parity of the length: the guard Eq(Mod(seq, 2), 0) fails at every odd length."""

    def forward(self, x):
        if x.shape[1] % 2 == 0:
            return x * 2
        return x - 1


def test_a_guard_that_fails_in_the_range_keeps_torchs_fix_and_names_the_size():
    seq = Dim("seq", min=2, max=64)
    with pytest.raises(DynamicShapesError, match=r"(?s)Constraints violated \(seq\).*seq = 2\*_seq") as caught:
        export_program(EvenOnly(), (torch.randn(2, 12),), None, ({1: seq},))
    notes = getattr(caught.value, "__notes__", [])
    assert any("does not hold at seq = 3" in note for note in notes), notes  # the user's name, not s27


def test_a_range_the_model_cannot_take_keeps_torchs_suggested_max():
    seq = Dim("seq", min=2, max=64)
    with pytest.raises(DynamicShapesError, match=r"(?s)Constraints violated \(seq\).*Dim\('seq', max=16\)"):
        export_program(PositionTable(), (torch.randn(2, 12, 8),), None, ({1: seq},))


def test_guards_are_checked_at_every_size_or_said_to_be_unchecked():
    s, t = sympy.symbols("s0 s1", integer=True, positive=True)
    tautology = s * (8 + s - sympy.Mod(s, 8)) > 1  # the CUDA attention-mask guard of torch 2.11
    assert first_failure(tautology, {s: ValueRanges(1, MAX_CHECKED_POINTS)}) is None
    assert first_failure(s <= 16, {s: ValueRanges(2, 64)}) == "the guard s0 <= 16 does not hold at s0 = 17"
    assert first_failure(s + t < 30, {s: ValueRanges(1, 20), t: ValueRanges(1, 20)}).endswith("s0 = 10, s1 = 20")
    assert "unbounded s0" in first_failure(tautology, {s: ValueRanges(1, int_oo)})  # a Dim without max=
    too_many = first_failure(tautology, {s: ValueRanges(1, MAX_CHECKED_POINTS + 1)})
    assert "could not be checked" in too_many and "narrow the Dim ranges" in too_many
    # A new user's dynamic irfft(n=x.shape[-1]): this guard holds at every size (4(h + 1) is a multiple of h + 1),
    # and was read as failing at the first, its Mod printed as an infix % without parentheses
    from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

    half = FloorDiv(s, 2)
    for mod in (Mod, PythonMod):
        assert first_failure(sympy.Eq(mod(4 * half + 4, half + 1), 0), {s: ValueRanges(1, 1024)}) is None
    assert first_failure(sympy.Eq(Mod(4 * half + 3, half + 1), 0), {s: ValueRanges(2, 64)}).endswith("s0 = 2")


class DFTMixing(torch.nn.Module):
    """FNet's token mixing as one einsum of three operands, the first a DFT matrix of the dynamic length:
    with opt_einsum installed, torch.einsum asks it for a contraction order and it reads every size as an int."""

    def forward(self, x):
        s, h = x.shape[1], x.shape[2]
        k = torch.arange(s, dtype=torch.float32)
        dft = torch.cos(2 * torch.pi * torch.outer(k, k) / s)
        return torch.einsum("st,btd,dh->bsh", dft, x, torch.eye(h))


def _exported_einsum():
    return export_program(DFTMixing(), (torch.randn(2, 3, 4),), None, ({1: Dim("seq", min=2, max=64)},))


def test_a_three_operand_einsum_over_a_dynamic_dim_stays_dynamic_in_the_export_step():
    with torch_fixes.applied("export"):
        ep = _exported_einsum()
    (x,) = [node.meta["val"] for node in ep.graph.find_nodes(op="placeholder")]
    assert isinstance(x.shape[1], torch.SymInt), x.shape
    for length in (2, 7, 64):
        x = torch.randn(2, length, 4)
        torch.testing.assert_close(ep.module()(x), DFTMixing()(x), rtol=1e-5, atol=1e-4)


def test_without_the_export_steps_fix_opt_einsum_makes_the_dim_a_constant():
    """The row's detection: when this fails, torch's einsum no longer specializes and the row can go."""
    if not torch.backends.opt_einsum.is_available():
        pytest.skip("opt_einsum is not installed: torch.einsum never asks it for an order, so nothing specializes")
    with pytest.raises(DynamicShapesError, match=r"(?s)Constraints violated \(seq\).*specialized it to be a constant"):
        _exported_einsum()


class Resynthesis(torch.nn.Module):
    """stft, a gain, and istft back to the input's length: istft's ``length=`` makes the length a constant."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(64))

    def forward(self, audio):
        spec = torch.stft(audio, 64, 16, window=self.window, return_complex=True)
        return torch.istft(spec * 2, 64, 16, window=self.window, length=audio.shape[-1])


def test_a_dim_the_model_makes_a_constant_is_refused_not_lowered_for_one_size():
    """A new user's report (session 24): ``16 * Dim("frames", min=4, max=500)`` on this model lowered without a word
    into a package that took only the example's length (frames in [50, 50]): the first export's constraint
    violation sent lower() to the export with deferred guards, which specializes without an error, and every
    guard check passed, there being none. torch's error now stands, with the model's line."""
    from aotcuda.lowering.pipeline import before_compile

    frames = Dim("frames", min=4, max=500)
    with pytest.raises(DynamicShapesError, match=r"specialized it to be a constant \(800\)") as refused:
        before_compile(Resynthesis(), (torch.randn(2, 800),), dynamic_shapes={"audio": {1: 16 * frames}})
    notes = "\n".join(refused.value.__notes__)
    assert "takes the Dim frames only in [50, 50], where [4, 500] was asked" in notes, notes
    assert "length=audio.shape[-1]" in notes and "the constant 800" in notes, notes  # the line that did it
    assert "so that the guard above holds" not in str(refused.value)  # a constant is no guard to narrow to


def test_a_shapes_collection_gets_the_same_refusal_as_the_dict_it_stands_for():
    """Breaker 2: ``dynamic_shapes`` as a torch.export.ShapesCollection (torch.export's own form, keyed by the input
    tensors) went past the check of the retry's ranges, which reads only dicts, lists and tuples: Resynthesis with
    ``16 * frames`` asked for frames in [4, 500] exported with frames in [50, 50] (ep.module() gave 800 samples for
    a 1600-sample input). It is now resolved to the structure it stands for before export, and refused the same."""
    from aotcuda.lowering.pipeline import before_compile

    audio = torch.randn(2, 800)
    shapes = torch.export.ShapesCollection()
    shapes[audio] = {1: 16 * Dim("frames", min=4, max=500)}
    with pytest.raises(DynamicShapesError, match=r"specialized it to be a constant \(800\)") as refused:
        before_compile(Resynthesis(), (audio,), dynamic_shapes=shapes)
    assert "takes the Dim frames only in [50, 50], where [4, 500] was asked" in "\n".join(refused.value.__notes__)


class Masked(torch.nn.Module):
    """x [b, 8*seq, 8] masked by mask [b, 8*seq]; with ``reshape``, also [b, seq, 64] summed over seq (the
    reshape's -1 makes torch trace assuming seq != 1)."""

    def __init__(self, reshape: bool = False):
        super().__init__()
        self.reshape = reshape

    def forward(self, x, mask):
        y = x * mask.unsqueeze(-1)
        return y.reshape(x.shape[0], -1, 64).sum(1) if self.reshape else y


def _derived_root_range(reshape: bool):
    """The signature's dim 1 of x (8*seq), with "narrowed" where the program could not keep the asked range."""
    seq, narrowed = Dim("seq", min=1, max=32), {}
    ep = export_program(Masked(reshape), (torch.randn(2, 16, 8), torch.ones(2, 16)), {},
                        {"x": {1: 8 * seq}, "mask": {1: 8 * seq}}, narrowed)
    from aotcuda.lowering.signature import signature_from_exported_program
    return signature_from_exported_program(ep, narrowed=narrowed)["inputs"][0]["shape"][1]


def test_the_root_of_a_derived_dim_keeps_torchs_min_2_and_lowering_says_so():
    """torch gives the root of 8*seq (a symbol of its own) min 2 and traces for it: the program keeps that range
    (8*seq from 16, not the asked 8), and lowering says so (the range it got, why, what to do); the signature's
    "narrowed" is what a refusal at run time says."""
    with pytest.warns(UserWarning, match=r"asked for min 1, but the program takes seq in \[2, 32\]: .*0/1 "
                                         r"specialization"):
        shape = _derived_root_range(reshape=False)
    assert (shape["min"], shape["max"]) == (16, 256) and "0/1 specialization" in shape["narrowed"]


class SqueezeFirst(torch.nn.Module):
    """reshape(-1, 8).squeeze(0): torch decides from b*seq >= 2 that dim 0 is no 1, and records no guard."""

    def forward(self, x):
        return x.reshape(-1, 8).squeeze(0) * 2


def test_a_root_is_not_widened_where_torch_decided_from_its_range_without_a_guard():
    """(review 7) Widening seq to the asked min 1 made this program return (1, 8) at (b, seq) = (1, 1), where
    eager returns (8,), silently: no guard says b*seq != 1. The program keeps seq >= 2 and refuses seq = 1."""
    ds = {"x": {0: Dim("b", min=1, max=16), 1: 8 * Dim("seq", min=1, max=32)}}
    narrowed = {}
    with pytest.warns(UserWarning, match=r"takes seq in \[2, 32\]"):
        ep = export_program(SqueezeFirst(), (torch.randn(2, 32),), {}, ds, narrowed)
    (root,) = [s for s in ep.range_constraints if str(s) in narrowed]
    assert int(ep.range_constraints[root].lower) == 2
    module = ep.module()
    for b in (1, 2):
        x = torch.randn(b, 16)
        torch.testing.assert_close(module(x), SqueezeFirst()(x))
    with pytest.raises(Exception):
        module(torch.randn(1, 8))  # eager gives (8,): the program must not answer (1, 8)


def test_a_root_min_the_trace_assumed_away_is_said_at_lowering():
    """The reshape's -1 makes torch trace assuming seq != 1: the program cannot take seq = 1, and lowering says
    so (the range it got, why, what to do) instead of narrowing it silently."""
    with pytest.warns(UserWarning, match=r"asked for min 1, but the program takes seq in \[2, 32\]: .*seq != 1"):
        shape = _derived_root_range(reshape=True)
    assert shape["min"] == 16 and "assuming seq != 1" in shape["narrowed"]  # what a refusal at run time says
    assert shape["narrowed_bounds"] == ["min"]  # the max is as asked: a size above it gets the wider-Dim advice


class Branch(torch.nn.Module):
    """Doubles x, whose length is at most 64 in the branch taken: torch guards ``x.shape[1] <= 64``."""

    def forward(self, x):
        return x - 1 if x.shape[1] > 64 else x * 2


def test_a_root_max_torch_narrowed_for_a_guard_is_said_at_lowering():
    """Breaker 2: for a derived Dim torch.export narrows the root to what a guard needs without an error (a plain Dim
    gets a constraint violation): ``2 * Dim("m", max=64)`` exported with m in [2, 32] and no word, and the package
    refused m = 33 with advice to lower again with a wider range, the one asked. Now lowering says so, and the
    signature's "narrowed" is what a refusal at run time says."""
    from aotcuda.lowering.signature import signature_from_exported_program

    narrowed = {}
    with pytest.warns(UserWarning, match=r"asked for max 64, but the program takes m up to 32: torch.export traced "
                                         r"the model assuming 2\*m <= 64"):
        ep = export_program(Branch(), (torch.randn(2, 8),), {}, {"x": {1: 2 * Dim("m", min=2, max=64)}}, narrowed)
    shape = signature_from_exported_program(ep, narrowed=narrowed)["inputs"][0]["shape"][1]
    assert shape["max"] == 64 and "asked for m with max 64" in shape["narrowed"], shape
    assert shape["narrowed_bounds"] == ["max"], shape


def test_a_dynamic_shapes_key_forward_does_not_take_is_named_with_the_arguments():
    """A new user's `dynamic_shapes={"toks": ...}` for forward(tokens) got torch's UserError, which ends with advice to
    replace export() with draft_export(): no use to an aotcuda user. Now the error names the key and the arguments."""
    import aotcuda

    class Tokens(torch.nn.Module):
        def forward(self, tokens, scale=None):
            return tokens * 2

    with pytest.raises(aotcuda.DynamicShapesError, match=r"dynamic_shapes names 'toks', which Tokens.forward does not "
                                                          r"take: its arguments are tokens, scale\. .*'tokens'") as caught:
        aotcuda.lower(Tokens(), (torch.randn(2, 3),), dynamic_shapes={"toks": {1: torch.export.Dim("s")}}, device="cpu")
    assert "draft_export" not in str(caught.value)


def test_dynamic_shapes_keys_other_than_the_passed_arguments_are_named_before_export():
    """A new user's trial (2026-12-06): `dynamic_shapes={"ids": ..., "scale": None, "use_relu": None}` for
    forward(ids, scale=1.0, use_relu=False) called with (ids,), {"scale": 2.0} got torch's UserError ending in advice
    to try draft_export(); so did a dict without a key for an argument the example call passes. torch takes exactly
    the passed arguments as keys: the error says which key is extra or missing, and why."""
    import aotcuda

    class Tokens(torch.nn.Module):
        def forward(self, tokens, scale=None, use_relu=False):
            return tokens * 2

    tokens = torch.randn(2, 3)
    with pytest.raises(aotcuda.DynamicShapesError, match=r"dynamic_shapes names 'use_relu', which the example call "
                                                          r"leaves to forward's default: leave it out of dynamic_shapes"
                                                          r".*exactly the arguments the example call passes "
                                                          r"\(tokens, scale\)") as caught:
        aotcuda.lower(Tokens(), (tokens,), {"scale": torch.ones(3)}, device="cpu",
                      dynamic_shapes={"tokens": {0: Dim("b")}, "scale": None, "use_relu": None})
    assert "draft_export" not in str(caught.value)
    with pytest.raises(aotcuda.DynamicShapesError, match=r"dynamic_shapes has no key for 'scale', which the example "
                                                          r"call passes: give it a key \(None for a static input\)"):
        aotcuda.lower(Tokens(), (tokens, torch.ones(3)), device="cpu", dynamic_shapes={"tokens": {0: Dim("b")}})


def test_dynamic_shapes_for_a_call_with_keyword_arguments_is_named_with_the_fix_also_with_var_kwargs():
    """Sixth new user (2026-12-07): a tiny GPT-2 lowered with `(input_ids,), {"use_cache": False}` and
    `dynamic_shapes=({1: Dim("s")},)` got torch's `Detected mismatch between the structure of inputs and
    dynamic_shapes: inputs has 2 elements, but dynamic_shapes has 1 elements` (no argument named, advice to try
    draft_export()); `{"input_ids": {1: Dim("s")}}` got torch's error too, since the dict check was skipped for a
    forward with **kwargs (every transformers model's). Now both name use_cache and the fix, and the fix exports."""
    import aotcuda

    class Decoder(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, use_cache=None, **kwargs):
            return input_ids * 2

    ids, s = torch.randn(2, 10), Dim("s", min=2, max=64)
    with pytest.raises(aotcuda.DynamicShapesError, match=r"dynamic_shapes is a tuple of 1 entry, but the example call "
                                                          r"passes 2 arguments \(input_ids, use_cache, in forward's "
                                                          r"order\).*Give use_cache an entry too.*key dynamic_shapes "
                                                          r"by name: \{'input_ids': \{1: Dim\('s'.*'use_cache': None\}"
                       ) as caught:
        aotcuda.lower(Decoder(), (ids,), {"use_cache": False}, dynamic_shapes=({1: s},), device="cpu")
    assert "draft_export" not in str(caught.value)
    with pytest.raises(aotcuda.DynamicShapesError, match=r"dynamic_shapes has no key for 'use_cache', which the "
                                                          r"example call passes: give it a key \(None for a static "
                                                          r"input or a non-tensor\)") as caught:
        aotcuda.lower(Decoder(), (ids,), {"use_cache": False}, dynamic_shapes={"input_ids": {1: s}}, device="cpu")
    assert "draft_export" not in str(caught.value)
    with pytest.raises(aotcuda.DynamicShapesError, match=r"names 'extra', which forward takes through \*\*kwargs: "
                                                          r"torch.export gives no dims to an argument there.*Lower a wrapper module whose "
                                                          r"forward names it"):
        aotcuda.lower(Decoder(), (ids,), {"extra": torch.ones(3)}, device="cpu",
                      dynamic_shapes={"input_ids": {1: s}, "extra": None})
    # the advised forms export, with s dynamic
    for fixed in ({1: s}, None), {"input_ids": {1: s}, "use_cache": None}:
        ep = export_program(Decoder(), (ids,), {"use_cache": False}, fixed)
        assert isinstance(ep.graph_module.graph.find_nodes(op="placeholder")[0].meta["val"].shape[1], torch.SymInt)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Decoder()

        def forward(self, input_ids, extra):
            return self.model(input_ids, extra=extra)

    ep = export_program(Wrapper(), (ids, torch.ones(3)), {}, {"input_ids": {1: s}, "extra": None})
    assert isinstance(ep.graph_module.graph.find_nodes(op="placeholder")[0].meta["val"].shape[1], torch.SymInt)


def test_a_dynamic_shapes_dim_the_input_does_not_have_is_named_with_its_rank(monkeypatch):
    """A new user's `dynamic_shapes={"audio": {5: Dim("b")}}` for a 2-dim audio got torch's raw
    `IndexError: list assignment index out of range`. Now the error names the input, the dim, its rank and the
    dims torch takes (negative ones count from the end); a list of another length than the rank is named too."""
    import aotcuda
    from aotcuda.lowering import pipeline

    class Audio(torch.nn.Module):
        def forward(self, audio, *, speaker_id):
            return audio * speaker_id

    def lower(dynamic_shapes):
        aotcuda.lower(Audio(), (torch.randn(2, 3),), {"speaker_id": torch.ones(2, 1)}, dynamic_shapes=dynamic_shapes,
                      device="cpu")

    with pytest.raises(aotcuda.DynamicShapesError, match=r"dynamic_shapes for audio names dim 5, but audio has 2 dims "
                                                          r"\(shape \(2, 3\)\): a dim must be in \[-2, 2\)"):
        lower({"audio": {5: Dim("b")}, "speaker_id": None})
    with pytest.raises(aotcuda.DynamicShapesError, match=r"names dim -3, but audio has 2 dims"):
        lower({"audio": {-3: Dim("b")}, "speaker_id": None})
    with pytest.raises(aotcuda.DynamicShapesError, match=r"for speaker_id has 3 entries, but speaker_id has 2 dims"):
        lower(({0: Dim("b")}, [Dim("b"), None, None]))

    def stop(ep, *args):
        raise RuntimeError(f"exported with {sorted((int(r.lower), int(r.upper)) for r in ep.range_constraints.values())}")

    # a dim in range gets as far as the compile, a negative one counted from the end as the caller meant (torch
    # 2.13 given -2 here refused b as not equal to itself, and given -1 lost the Dim's min)
    monkeypatch.setattr(pipeline, "_compile", stop)
    b = Dim("b", max=64)
    with pytest.raises(RuntimeError, match=r"exported with \[\(0, 64\)\]"):
        lower({"audio": {-2: b}, "speaker_id": {0: b}})
    with pytest.raises(RuntimeError, match=r"exported with \[\(0, 64\), \(3, 9\)\]"):
        lower({"audio": {0: b, -1: Dim("f", min=3, max=9)}, "speaker_id": {-2: b}})


class CausalMask(torch.nn.Module):
    def __init__(self, rows: int = 16):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(rows, rows, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        t = x.shape[1]
        return x[:, :, None].expand(-1, -1, t).masked_fill(~self.mask[:t, :t], 0.0)


def test_a_guard_refusing_the_ranges_end_alone_gives_the_range_without_it():
    """Third new user (2026-12-06): a GPT block slicing its causal-mask buffer of 128 rows (``mask[:T, :T]``) with T
    dynamic in [2, 128] was refused with ``the guard Ne(t, 128) does not hold at t = 128`` and no fix; every other
    size holds it. The note gives the range without that end, which exports (and the command line's hint, in
    tests/test_cli.py)."""
    x = torch.randn(2, 8)
    with pytest.raises(DynamicShapesError) as caught:
        export_program(CausalMask(), (x,), {}, {"x": {1: Dim("t", min=2, max=16)}})
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "the guard Ne(t, 16) does not hold at t = 16: every other size of t holds it; give its Dim max=15" in notes, notes
    export_program(CausalMask(), (x,), {}, {"x": {1: Dim("t", min=2, max=15)}})


class WindowOfEight(torch.nn.Module):
    """Rows in groups of 8 (a guard divides the size by 8) and a branch on the number of groups: together torch
    solves them to one size, 32 ("Specializations unexpectedly required", as HF SwinModel's window clamp does)."""

    def forward(self, x):
        b, c, h, w = x.shape
        y = x.reshape(b, c, h // 8, 8, w).sum(3)
        return y * 2 if h // 8 == 4 else y


def test_a_size_torch_fixes_is_said_to_be_fixed_not_a_multiple():
    """Fifth new user (2026-12-06): SwinModel with dynamic H and W; torch said "H = 32", and aotcuda added "The model
    needs this size to be a multiple of 8 ... export it as 8 * torch.export.Dim(...)", which cannot export."""
    h = Dim("H", min=16, max=64)
    with pytest.raises(DynamicShapesError, match=r"(?s)Suggested fixes:\n  H = 32") as caught:
        export_program(WindowOfEight(), (torch.randn(2, 3, 32, 5),), None, ({2: h},))
    message = str(caught.value)
    assert "needs this size to be a multiple" not in message and "8 * torch.export.Dim" not in message
    assert "The model fixes H (input 'x', dim 2) to 32" in message
    assert "drop it from dynamic_shapes (on the CLI: no --dynamic for x:2)" in message


class LogMelFrontEnd(torch.nn.Module):
    """transformers' Voxtral-Realtime / Qwen3-ASR feature extractor (``_torch_extract_fbank_features``): stft n_fft 400,
    hop 160, hann, the power of every bin but the last frame's, a random filterbank, log10 floored 8 below the max."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(400))
        self.register_buffer("filters", torch.rand(128, 201))

    def forward(self, waveform):
        stft = torch.stft(waveform, 400, 160, window=self.window, return_complex=True)
        log_spec = torch.clamp(self.filters @ stft[..., :-1].abs() ** 2, min=1e-10).log10()
        return (torch.maximum(log_spec, log_spec.max() - 8.0) + 4.0) / 4.0


def test_an_stft_front_end_over_seconds_of_audio_exports_with_a_named_dim():
    """A new user's ASR front ends (models8, 2026-12-07: transformers' Parakeet, Cohere-ASR, Nemotron, LASR, Phi-4,
    Voxtral-Realtime feature extractors with Dim("samples", max=48000)): torch guards ``2 % (2 + 2*(samples // 160))
    != 0``, true at every size, and aotcuda checked it size by size, refusing more than MAX_CHECKED_POINTS: export
    failed for any max above 2 s of 16 kHz audio, advising a multiple of 160 the model does not need. The guard
    reads the size only as samples // 160, so its quotients are checked: 30 s exports and matches eager."""
    model, samples = LogMelFrontEnd(), Dim("samples", min=1024, max=480_000)
    ep = export_program(model, (torch.randn(2, 16000),), None, ({1: samples},))
    for length in (4000, 6101, 480_000):
        audio = torch.randn(2, length)
        torch.testing.assert_close(ep.module()(audio), model(audio), rtol=1e-5, atol=1e-5)


def test_a_guard_read_through_a_quotient_is_checked_at_each_quotient_and_names_a_size():
    from torch.utils._sympy.functions import FloorDiv, Mod

    s, t = sympy.symbols("s0 s1", integer=True, positive=True)
    frames = FloorDiv(s, 160)
    assert first_failure(sympy.Ne(Mod(2, 2 * frames + 2), 0), {s: ValueRanges(1024, 480_000)}) is None
    # the smallest size in the range whose quotient fails: (16400 - 400) // 160 = 100, (16399 - 400) // 160 = 99
    assert first_failure(FloorDiv(s - 400, 160) < 100, {s: ValueRanges(1024, 48_000)}).endswith(
        "at s0 = 16400: every size of s0 up to 16399 holds it; give its Dim max=16399")
    assert first_failure(frames < 100, {s: ValueRanges(16_100, 48_000)}).endswith("at s0 = 16100")  # the range's min
    # read outside the quotient too, or through two quotients: every size, so too many to check
    assert "could not be checked" in first_failure(sympy.Ne(Mod(s, 2 * frames + 2), 0), {s: ValueRanges(1, 48_000)})
    assert "could not be checked" in first_failure(frames + FloorDiv(s, 7) > 0, {s: ValueRanges(1, 48_000)})
    assert first_failure(frames + t < 350, {s: ValueRanges(1, 48_000), t: ValueRanges(1, 100)}).endswith(
        "s0 = 40000, s1 = 100")


class SecondDifference(torch.nn.Module):
    """A product of neighbours along a dynamic dim (``z[:, 1:-1] * z[:, :-2].conj()``, a new user's phase
    difference; real tensors fail the same way)."""

    def forward(self, x):
        z = torch.view_as_complex(x)
        return torch.view_as_real(z[:, 1:-1] * z[:, :-2].conj())


def test_a_violation_torch_fails_to_write_is_a_dynamic_shapes_error_with_the_bound_it_solved():
    """models8 (2026-12-07): with Dim("s", min=2) torch.export solved s >= 9/4 and raised ``AssertionError: Expected op
    to be '==', got <= for 9/4 <= s`` while writing its suggested fixes (prettify_results), which lower() passed on
    bare: no word of a range. Now a DynamicShapesError says what happened and the min it means, which then gets
    aotcuda's note on the guard left (min 4), which exports and matches eager."""
    x = torch.randn(2, 8, 4, 2)
    with pytest.raises(DynamicShapesError, match=r"(?s)Constraints violated.*9/4 <= s.*give it min=3"):
        export_program(SecondDifference(), (x,), None, ({1: Dim("s", min=2, max=64)},))
    with pytest.raises(DynamicShapesError) as caught:
        export_program(SecondDifference(), (x,), None, ({1: Dim("s", min=3, max=64)},))
    assert any("give its Dim min=4" in note for note in getattr(caught.value, "__notes__", []))
    ep = export_program(SecondDifference(), (x,), None, ({1: Dim("s", min=4, max=64)},))
    for length in (4, 37):
        x = torch.randn(2, length, 4, 2)
        torch.testing.assert_close(ep.module()(x), SecondDifference()(x))


class UncentredStft(torch.nn.Module):
    """An stft without centring (Inkling's, Phi-4's unfolded frames): one frame needs 400 samples, and torch guards
    that there is more than one (a dim of size 1 would broadcast)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(400))

    def forward(self, audio):
        return torch.stft(audio, 400, 160, window=self.window, center=False, return_complex=True).abs()


def test_a_guard_through_a_quotient_failing_at_the_ranges_end_gives_the_range_without_it():
    """models8 (2026-12-07): Dim("samples", min=400) (torch's own suggestion) then failed with ``the guard
    Ne(((samples - 400)//160), 0) does not hold at samples = 400`` and no fix: torch suggests none for a guard
    through a quotient. The note now gives the min from which every size holds it (560), which exports."""
    from torch.utils._sympy.functions import FloorDiv

    s = sympy.Symbol("s0", integer=True, positive=True)
    assert first_failure(sympy.Ne(FloorDiv(s - 400, 160), 0), {s: ValueRanges(400, 48_000)}).endswith(
        "at s0 = 400: every size of s0 from 560 holds it; give its Dim min=560")
    assert first_failure(sympy.Ne(FloorDiv(s, 160) % 2, 0), {s: ValueRanges(400, 4_000)}).endswith("at s0 = 400")
    audio = torch.randn(2, 16000)
    with pytest.raises(DynamicShapesError) as caught:
        export_program(UncentredStft(), (audio,), None, ({1: Dim("samples", min=400, max=48_000)},))
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "does not hold at samples = 400: every size of samples from 560 holds it; give its Dim min=560" in notes, notes
    model = UncentredStft()
    ep = export_program(model, (audio,), None, ({1: Dim("samples", min=560, max=48_000)},))
    for length in (560, 7001):
        audio = torch.randn(2, length)
        torch.testing.assert_close(ep.module()(audio), model(audio), rtol=1e-5, atol=1e-5)


class CentredStft(torch.nn.Module):
    """Whisper's stft (n_fft 400, hop 160, centred: reflect padding of 200 samples on each side)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(400))

    def forward(self, audio):
        return torch.stft(audio, 400, 160, window=self.window, return_complex=True).abs()


def test_a_violation_beside_a_divided_guard_that_torch_defers_gets_no_multiple_hint():
    """models8 (2026-12-07): a centred stft over Dim("samples", min=100) violates torch's ``201 <= samples`` (the
    reflect padding); beside torch's suggested min=201 the error said ``The model needs this size to be a multiple
    of 160 (a guard divides it by 160)`` (from ``2 % (2 + 2*(samples // 160)) != 0``, true at every size), which the
    model does not need. The retry with deferred asserts fails on the range guard alone: no multiple hint."""
    audio = torch.randn(2, 16000)
    with pytest.raises(DynamicShapesError, match=r"(?s)Suggested fixes:\n  samples = Dim\('samples', min=201") as caught:
        export_program(CentredStft(), (audio,), None, ({1: Dim("samples", min=100, max=48_000)},))
    assert "multiple of 160" not in str(caught.value) and "160 * torch.export.Dim" not in str(caught.value)
    export_program(CentredStft(), (audio,), None, ({1: Dim("samples", min=201, max=48_000)},))
