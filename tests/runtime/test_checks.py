"""Input/output checks against a signature, on synthetic specs (no compile needed)."""

import re

import pytest
import torch

from aotcuda.errors import InputError, OutputError
from aotcuda.runtime.checks import TensorSpec, check_caller_outputs, check_inputs

CPU = torch.device("cpu")
SPECS = [
    TensorSpec.from_json({"name": "q", "dtype": "float32", "device": "cpu",
                          "shape": [{"expr": "s0", "min": 1, "max": 8}, 4]}),
    TensorSpec.from_json({"name": "k", "dtype": "float32", "device": "cpu",
                          "shape": [{"expr": "s0", "min": 1, "max": 8}, {"expr": "2*s1", "min": 2, "max": None}]}),
    TensorSpec.from_json({"name": "m", "dtype": "bool", "device": "cpu",
                          "shape": [{"expr": "s1", "min": 1, "max": None}]}),
]
OUT_SPECS = [TensorSpec.from_json({"name": "o", "dtype": "float32", "device": "cpu",
                                   "shape": [{"expr": "s0", "min": 1, "max": 8}, {"expr": "2*s1", "min": 2, "max": None}]})]


def inputs(n=3, s1=5, k_rows=None):
    return [torch.randn(n, 4), torch.randn(k_rows or n, 2 * s1), torch.ones(s1, dtype=torch.bool)]


def test_consistent_inputs_bind_every_symbol():
    _, bindings = check_inputs(inputs(), SPECS, [], CPU, 3)
    assert bindings == {"s0": 3, "s1": 5}


def test_dims_sharing_a_symbol_must_agree():
    with pytest.raises(InputError, match=r"input 'k' \(#1\) dim 0 is 4, but it must equal input 'q' \(#0\) dim 0 \(3\)"):
        check_inputs(inputs(k_rows=4), SPECS, [], CPU, 3)


def test_derived_dim_must_equal_its_expression():
    bad = inputs()
    bad[1] = torch.randn(3, 9)  # 2*s1 with s1 = 5 from input m is 10
    with pytest.raises(InputError, match=r"input 'k' \(#1\) dim 1 is 9.*2\*s1 = 10"):
        check_inputs(bad, SPECS, [], CPU, 3)


def test_unbounded_range_has_no_upper_limit():
    check_inputs(inputs(s1=10_000), SPECS, [], CPU, 3)


def test_caller_output_shape_is_computed_from_the_input_symbols():
    _, bindings = check_inputs(inputs(), SPECS, [], CPU, 3)
    check_caller_outputs([torch.empty(3, 10)], OUT_SPECS, bindings, CPU, 1)
    with pytest.raises(OutputError, match=r"shape \(3, 11\), but this call's output has shape \(3, 10\)"):
        check_caller_outputs([torch.empty(3, 11)], OUT_SPECS, bindings, CPU, 1)


def test_unknown_symbol_leaves_that_dim_unchecked_before_the_run():
    check_caller_outputs([torch.empty(3, 7)], OUT_SPECS, {"s0": 3}, CPU, 1)


def test_without_specs_only_count_type_and_device_are_checked():
    check_inputs([torch.randn(2), torch.randn(3, dtype=torch.float64)], None, ["a", "b"], CPU, 2)
    with pytest.raises(InputError, match=r"takes 2 tensor input\(s\) \(a, b\), got 1"):
        check_inputs([torch.randn(2)], None, ["a", "b"], CPU, 2)
    with pytest.raises(InputError, match=r"input 'b' \(#1\) must be a torch.Tensor, got float"):
        check_inputs([torch.randn(2), 1.0], None, ["a", "b"], CPU, 2)


# An stft front end exported with audio of shape [1, 160*frames] (torch.export.Dim("frames") * 160): no
# other dim binds `frames`, so the runtime solves for it; the generated code would read only 160*frames
# samples of any other size and drop the rest without a word (seen by a new user: 23456 samples ran).
AUDIO_SPECS = [TensorSpec.from_json({"name": "audio", "dtype": "float32", "device": "cpu",
                                     "shape": [1, {"expr": "160*s76", "min": 800, "max": 480000}]}),
               TensorSpec.from_json({"name": "tail", "dtype": "float32", "device": "cpu",
                                     "shape": [{"expr": "s76 + 1", "min": 6, "max": 3001}]})]


def test_a_symbol_only_derived_dims_give_is_solved_from_the_size():
    _, bindings = check_inputs([torch.randn(1, 160 * 146), torch.randn(147)], AUDIO_SPECS, [], CPU, 2)
    assert bindings == {"s76": 146}


@pytest.mark.parametrize("samples", [23456, 801, 12345])
def test_a_size_the_derived_dim_cannot_take_is_refused_with_the_nearest_sizes(samples):
    below, above = samples // 160 * 160, (samples // 160 + 1) * 160
    with pytest.raises(InputError, match=rf"input 'audio' \(#0\) dim 1 is {samples}, but the program was exported "
                                         rf"with 160\*s76 there, which no whole value of its size symbol gives \(the nearest sizes it takes "
                                         rf"are {below} and {above}\)"):
        check_inputs([torch.randn(1, samples), torch.randn(samples // 160 + 1)], AUDIO_SPECS, [], CPU, 2)


def test_the_solved_symbol_must_agree_with_the_other_dims_that_use_it():
    with pytest.raises(InputError, match=r"input 'tail' \(#1\) dim 0 is 100, but the program was exported with "
                                         r"s76 \+ 1 = 147"):
        check_inputs([torch.randn(1, 160 * 146), torch.randn(100)], AUDIO_SPECS, [], CPU, 2)


def test_a_derived_dim_aotcuda_cannot_evaluate_is_refused_not_run_unchecked():
    specs = [TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                   "shape": [{"expr": "s0**2", "min": 1, "max": 64}]})]
    with pytest.raises(InputError, match=r"exported with s0\*\*2 there, and aotcuda cannot tell"):
        check_inputs([torch.randn(9)], specs, [], CPU, 1)


# The user's Dim names (the signature's dim_names) in specs and errors; the checks still evaluate torch's
# symbols, so a name sympy reads as something else ("N" is a function, "I" the imaginary unit) is harmless.
USER_NAMES = {"s0": "N", "s1": "I"}
NAMED_SPECS = [TensorSpec.from_json(spec, USER_NAMES) for spec in
               [{"name": "q", "dtype": "float32", "device": "cpu", "shape": [{"expr": "s0", "min": 1, "max": 8}, 4]},
                {"name": "k", "dtype": "float32", "device": "cpu",
                 "shape": [{"expr": "s0", "min": 1, "max": 8}, {"expr": "2*s1", "min": 2, "max": None}]},
                {"name": "m", "dtype": "bool", "device": "cpu", "shape": [{"expr": "s1", "min": 1, "max": None}]}]]


def test_specs_show_the_users_dim_names():
    q, k, _ = NAMED_SPECS
    assert [d.user_expr for d in k.dims] == ["N", "2*I"] and [d.expr for d in k.dims] == ["s0", "2*s1"]
    assert q.shape_text() == "(N in [1, 8], 4)" and k.shape_text() == "(N in [1, 8], 2*I in [2, inf])"
    assert SPECS[1].shape_text() == "(s0 in [1, 8], 2*s1 in [2, inf])"  # a signature without names


def test_errors_use_the_users_dim_names_and_checks_use_torchs_symbols():
    _, bindings = check_inputs(inputs(), NAMED_SPECS, [], CPU, 3)
    assert bindings == {"s0": 3, "s1": 5}
    bad = inputs()
    bad[1] = torch.randn(3, 9)
    with pytest.raises(InputError, match=r"dim 1 is 9, but the program was exported with 2\*I = 10 there"):
        check_inputs(bad, NAMED_SPECS, [], CPU, 3)
    with pytest.raises(InputError, match=r"dim 0 is 9, outside the exported range \[1, 8\] of N;"):
        check_inputs(inputs(n=9), NAMED_SPECS, [], CPU, 3)
    with pytest.raises(InputError, match=r"must equal input 'q' \(#0\) dim 0 \(3\): the program was exported with both as N$"):
        check_inputs(inputs(k_rows=4), NAMED_SPECS, [], CPU, 3)


@pytest.mark.parametrize("given, fix", [
    (torch.randn(3, 4, 2), r"pass torch.view_as_complex\(tensor\) \(tensor.to\(torch.complex64\) would keep"),
    (torch.randn(3, 4, 2, dtype=torch.float64), r"torch.view_as_complex\(tensor.to\(torch.float32\)\)"),
    (torch.randn(3, 4), r"^pass tensor.to\(torch.complex64\)$"),  # no pair dim: a cast is what it takes
])
def test_real_pairs_for_a_complex_input_are_told_to_use_view_as_complex(given, fix):
    """A complex input given as view_as_real's (re, im) pairs: the fix is view_as_complex, not a cast that
    would keep the pairs as real parts of the wrong shape."""
    spec = TensorSpec.from_json({"name": "z", "dtype": "complex64", "device": "cpu", "shape": [3, 4]})
    with pytest.raises(InputError, match=r"input 'z' \(#0\) has dtype torch.float.*complex64; ") as caught:
        check_inputs([given], [spec], [], CPU, 1)
    assert re.search(fix, str(caught.value).split("complex64; ", 1)[1])


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
@pytest.mark.parametrize("wanted, fix", [("float32", "pass tensor.dequantize()"),
                                         ("float16", "pass tensor.dequantize().to(torch.float16)")])
def test_a_quantized_input_is_told_to_dequantize_not_to_cast(wanted, fix):
    """A new user passed a qint8 tensor and was told `pass tensor.to(torch.float32)`, which raises torch's "Creation of
    quantized tensor requires quantized dtype like torch.quint8": the fix that works is dequantize()."""
    spec = TensorSpec.from_json({"name": "x", "dtype": wanted, "device": "cpu", "shape": [3, 4]})
    given = torch.quantize_per_tensor(torch.randn(3, 4), 0.1, 0, torch.qint8)
    with pytest.raises(InputError, match=r"input 'x' \(#0\) has dtype torch.qint8") as caught:
        check_inputs([given], [spec], [], CPU, 1)
    assert str(caught.value).endswith(f"it is a quantized tensor, which tensor.to() does not cast: {fix}")


@pytest.mark.parametrize("given, wanted, fix", [
    (torch.zeros(3, 4).masked_fill(torch.rand(3, 4) > 0.5, float("-inf")), "bool",
     r"makes every nonzero value True and 0 False, so an additive mask .* becomes True where it masks; .*`tensor == 0`"),
    (torch.ones(3, 4, dtype=torch.int64), "bool", r"makes every nonzero value True and 0 False, so pass .*`tensor != 0`"),
    (torch.ones(3, 4, dtype=torch.bool), "float32",
     r"makes True 1.0 and False 0.0, .* torch.zeros_like\(tensor, dtype=torch.float32\).masked_fill\(~tensor, "
     r"torch.finfo\(torch.float32\).min\)"),  # not -inf: a row masked whole is nan after softmax (review40a)
    (torch.ones(3, 4, dtype=torch.bool), "int64", r"^pass tensor.to\(torch.int64\) \(True becomes 1, False 0\)$"),
    (torch.randn(3, 4), "bfloat16", r"^pass tensor.to\(torch.bfloat16\)$"),  # a cast that keeps the meaning: as before
])
def test_a_cast_to_or_from_bool_is_not_advised_bare(given, wanted, fix):
    """A new user's float additive mask (0 attended, -inf masked) for a bool mask was told `pass tensor.to(torch.bool)`,
    which makes -inf True and 0 False: the mask inverted, the answer 1.04 off eager with no error. The advice says
    what the cast does and the comparison that keeps the meaning (the runtime test follows it:
    test_bool_bytes.py::test_an_additive_float_mask_is_told_how_to_compare_not_to_cast)."""
    spec = TensorSpec.from_json({"name": "mask", "dtype": wanted, "device": "cpu", "shape": [3, 4]})
    with pytest.raises(InputError, match=rf"input 'mask' \(#0\) has dtype {given.dtype}, but .* torch.{wanted}; ") as caught:
        check_inputs([given], [spec], [], CPU, 1)
    assert re.search(fix, str(caught.value).split(f"torch.{wanted}; ", 1)[1])


def test_an_integer_mask_for_a_float_input_is_told_the_additive_form_not_a_bare_cast():
    """A Hugging Face attention_mask (int64, 1 where attended) passed where the program takes a float additive mask
    (0 attended, -inf masked) was told `pass tensor.to(torch.float32)`: followed, the scores are shifted by the 1s and
    nothing is masked, with no error. The advice says what the cast does and gives the additive form; followed, it is
    eager's answer for the mask. An integer tensor that is no 0/1 mask is advised the cast, as before."""
    def attention(q, k, additive_mask):  # what such a program computes with its float mask
        return torch.softmax(q @ k.T / 2 + additive_mask, dim=-1)

    spec = TensorSpec.from_json({"name": "mask", "dtype": "float32", "device": "cpu", "shape": [3, 4]})
    torch.manual_seed(0)
    attend = torch.rand(3, 4) > 0.4
    attend[:, 0] = True
    attention_mask = attend.to(torch.int64)
    refusal = r"input 'mask' \(#0\) has dtype torch.int64, but .* torch.float32; "
    with pytest.raises(InputError, match=refusal) as caught:
        check_inputs([attention_mask], [spec], [], CPU, 1)
    advice = str(caught.value).split("torch.float32; ", 1)[1]
    assert not advice.startswith("pass tensor.to(torch.float32)") and "keeps them as 1.0 and 0.0" in advice
    assert "if this is a 0/1 mask" in advice and ", a mask," not in advice  # 0s and 1s may be no mask (review40a)
    follow = "torch.zeros_like(tensor, dtype=torch.float32).masked_fill(tensor == 0, torch.finfo(torch.float32).min)"
    assert follow in advice and "float('-inf')) for" not in advice
    tensor = attention_mask  # the advice, followed
    followed = eval(follow)  # noqa: S307 - the advice's own text, run as the user would
    q, k = torch.randn(3, 8), torch.randn(4, 8)
    expected = torch.softmax((q @ k.T / 2).masked_fill(~attend, float("-inf")), dim=-1)
    torch.testing.assert_close(attention(q, k, followed), expected)
    # review40a: a row masked whole (padding) followed -inf to nan, which spreads; the lowest value keeps it a number
    tensor = attention_mask.clone()
    tensor[1] = 0
    assert torch.isnan(attention(q, k, torch.zeros(3, 4).masked_fill(tensor == 0, float("-inf")))[1]).all()
    whole = attention(q, k, eval(follow))  # noqa: S307
    assert torch.isfinite(whole).all()
    torch.testing.assert_close(whole[[0, 2]], expected[[0, 2]])
    assert (attention(q, k, attention_mask.to(torch.float32))[~attend] > 0).all()  # the bare cast masks nothing
    for not_a_mask in (torch.randint(0, 256, (3, 4), dtype=torch.uint8), torch.empty(0, 4, dtype=torch.int64)):
        spec = TensorSpec.from_json({"name": "mask", "dtype": "float32", "device": "cpu",
                                     "shape": list(not_a_mask.shape)})
        with pytest.raises(InputError) as caught:
            check_inputs([not_a_mask], [spec], [], CPU, 1)
        assert str(caught.value).endswith("; pass tensor.to(torch.float32)")


def test_a_wrong_rank_says_the_shape_to_pass():
    with pytest.raises(InputError, match=r"has 3 dims \(shape \(3, 4, 1\)\), but the program takes 2 .*; pass a "
                                         r"tensor of that shape"):
        check_inputs([torch.randn(3, 4, 1), *inputs()[1:]], SPECS, [], CPU, 3)


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_a_nested_tensor_is_an_input_error_not_torchs_internal_error(layout):
    """A strided nested tensor passed the layout check and reached torch's "NestedTensorImpl doesn't support
    sizes" (a RuntimeError) when its shape was read; an inputs file of `aotcuda run` carries one too."""
    nested = torch.nested.nested_tensor([torch.randn(3, 4)], layout=layout)
    good = inputs()
    with pytest.raises(InputError, match=r"input 'q' \(#0\) is a nested tensor \(torch.nested\), but the program "
                                         r"takes dense tensors of one shape; pass a dense one, e.g. "
                                         r"torch.nested.to_padded_tensor"):
        check_inputs([nested, *good[1:]], SPECS, [], CPU, 3)
    with pytest.raises(OutputError, match=r"output buffer #0 is a nested tensor"):
        check_caller_outputs([nested], OUT_SPECS, {"s0": 3, "s1": 5}, CPU, 1)


def test_a_range_narrowed_at_lowering_is_refused_with_why_not_with_widen_the_dim():
    """A derived dim whose root torch traced assuming seq != 1 has the range [16, 256] where [8, 256] was asked:
    the refusal says lowering narrowed it and why, and does not advise the wider Dim the user already asked."""
    why = "lowering was asked for seq >= 1, but torch.export traced the model assuming seq != 1"
    spec = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                 "shape": [{"expr": "8*s1", "min": 16, "max": 256, "narrowed": why}]}, {"s1": "seq"})
    with pytest.raises(InputError) as caught:
        check_inputs([torch.randn(8)], [spec], [], CPU, 1)
    message = str(caught.value)
    assert "outside the exported range [16, 256] of 8*seq, which lowering narrowed" in message and why in message
    assert "wider" not in message and not getattr(caught.value, "advice", ())
    with pytest.raises(ValueError, match="'narrowed'"):
        TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                              "shape": [{"expr": "s1", "min": 2, "max": 8, "narrowed": ["not", "text"]}]})


def test_a_size_past_the_end_lowering_did_not_narrow_gets_the_wider_dim_advice():
    """A new user's trial (2026-12-06): --dynamic x:1:16:4096:blocks*16 gave 16*blocks in [32, 4096] (torch's min 2
    for blocks), and x of 4112 columns was refused with the min's reason ("lowering was asked for blocks >= 1 ...")
    and no advice to widen the Dim, where the max, 4096, was the asked one and a wider Dim is the fix. The
    signature's "narrowed_bounds" says which ends were narrowed; without it (older packages) both count."""
    why = "lowering was asked for blocks >= 1, but torch.export traced the model assuming blocks != 1"
    dim = {"expr": "16*s1", "min": 32, "max": 4096, "narrowed": why, "narrowed_bounds": ["min"]}
    spec = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu", "shape": [dim]}, {"s1": "blocks"})
    with pytest.raises(InputError) as above:
        check_inputs([torch.randn(4112)], [spec], [], CPU, 1)
    assert "outside the exported range [32, 4096] of 16*blocks; pass a size in that range, or re-export with a " \
           "wider torch.export.Dim" in str(above.value) and why not in str(above.value) and above.value.advice
    with pytest.raises(InputError, match=r"which lowering narrowed from the range it was asked \(lowering was asked "
                                         r"for blocks >= 1"):
        check_inputs([torch.randn(16)], [spec], [], CPU, 1)
    older = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                  "shape": [{**dim, "narrowed_bounds": None}]}, {"s1": "blocks"})
    with pytest.raises(InputError, match="which lowering narrowed"):
        check_inputs([torch.randn(4112)], [older], [], CPU, 1)
    for bad in (["low"], [], "min"):
        with pytest.raises(ValueError, match="'narrowed_bounds'"):
            TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                  "shape": [{**dim, "narrowed_bounds": bad}]})


POSITION = [TensorSpec.from_json({"name": "pos", "dtype": "int64", "device": "cpu", "shape": [1]}),
            TensorSpec.from_json({"name": "grid", "dtype": "float32", "device": "cpu", "shape": [2, 3]})]


@pytest.mark.parametrize("index, value, advice", [
    (0, 3, "torch.tensor([3], dtype=torch.int64)"),         # torch.as_tensor(3) would have shape ()
    (1, 0.5, "torch.full((2, 3), 0.5, dtype=torch.float32)"),
    (1, [[1, 2, 3], [4, 5, 6]], "torch.as_tensor(value, dtype=torch.float32)"),
])
def test_a_value_that_is_not_a_tensor_gets_the_conversion_to_the_tensor_the_program_takes(index, value, advice):
    """The advice, run as written, gives a tensor the checks accept (the trial's int 3 for a (1,) position)."""
    given = [torch.tensor([1]), torch.zeros(2, 3)]
    given[index] = value
    label = f"input '{POSITION[index].name}' \\(#{index}\\)"
    with pytest.raises(InputError, match=rf"{label} must be a torch.Tensor, got {type(value).__name__}; the program "
                                         rf"takes a tensor of shape {re.escape(POSITION[index].shape_text())} and "
                                         rf"dtype "
                                         rf"{POSITION[index].dtype} on cpu, e.g. {re.escape(advice)}$"):
        check_inputs(given, POSITION, [], CPU, 2)
    given[index] = eval(advice, {"torch": torch, "value": value})
    check_inputs(given, POSITION, [], CPU, 2)


def test_none_is_told_the_program_was_lowered_with_a_tensor_there_and_how_to_get_the_none_branch():
    """A new user's README-only trial (2026-12-07): `p(x, mask=None)` for a program lowered with mask=<tensor> said
    "input 'mask' (#1) is None: the input is missing", though the caller gave it: None there is forward's None branch,
    which export never traced. The message says so, and the two ways on."""
    with pytest.raises(InputError, match=r"^input 'pos' \(#0\) is None, but the program was lowered with a tensor "
                                         r"there, so it takes a tensor of shape \(1,\) and dtype torch.int64 on cpu: a "
                                         r"branch of forward for None \(`if pos is None:`\) is not in the package; "
                                         r"pass that tensor, or lower again with pos=None for a package of that "
                                         r"branch$") as caught:
        check_inputs([None, torch.zeros(2, 3)], POSITION, [], CPU, 2)
    assert "as_tensor" not in str(caught.value) and "missing" not in str(caught.value)


def test_a_size_of_one_under_dim_auto_names_why_and_the_dim_that_takes_it():
    """A new user's trial (2026-12-07): a program exported with Dim.AUTO, called with size 1, read "outside the
    exported range [2, inf] of s77; ... re-export with a wider torch.export.Dim". Export gives Dim.AUTO and
    Dim.DYNAMIC the range from 2 (a Dim("n") gets [0, inf], checked below), and Dim(min=1) takes 1."""
    class Sin(torch.nn.Module):
        def forward(self, x):
            return x.sin()

    for hint, low in ((torch.export.Dim.AUTO, 2), (torch.export.Dim.DYNAMIC, 2), (torch.export.Dim("n", min=1), 1)):
        ep = torch.export.export(Sin(), (torch.randn(3, 5),), dynamic_shapes={"x": {0: hint}})
        assert [r.lower for r in ep.range_constraints.values()] == [low]
    spec = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                 "shape": [{"expr": "s77", "min": 2, "max": None}, 5]}, {})
    with pytest.raises(InputError) as caught:
        check_inputs([torch.randn(1, 5)], [spec], [], CPU, 1)
    message = str(caught.value)
    assert "input 'x' (#0) dim 0 is 1" in message and "exported with Dim.AUTO or Dim.DYNAMIC starts at 2" in message
    assert "dynamic_shapes={'x': {0: torch.export.Dim('x_dim0', min=1)}}" in message, message
    assert "wider" not in message, message
    named = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                  "shape": [{"expr": "s77", "min": 2, "max": None}, 5]}, {"s77": "n"})
    with pytest.raises(InputError, match=r"outside the exported range \[2, inf\] of n; pass a size in that range"):
        check_inputs([torch.randn(1, 5)], [named], [], CPU, 1)


# A new user's broadcastable mask (nu40): attn_bias lowered as [2, 1, seq, seq] and passed as [2, 1, 1, s], which
# eager's attention broadcasts. The refusal said "outside the exported range [2, 256] of seq; ... re-export with a
# wider torch.export.Dim", which would not help: the dim must equal seq.
MASK_SPECS = [TensorSpec.from_json(spec, {"s27": "seq"}) for spec in
              [{"name": "x", "dtype": "float32", "device": "cpu", "shape": [2, {"expr": "s27", "min": 2, "max": 256}, 64]},
               {"name": "attn_bias", "dtype": "float32", "device": "cpu",
                "shape": [2, 1, {"expr": "s27", "min": 2, "max": 256}, {"expr": "s27", "min": 2, "max": 256}]}]]


@pytest.mark.parametrize("order", ["x first", "mask first"])
def test_a_size_of_1_for_a_shared_dynamic_dim_says_it_must_equal_that_dim_and_how_to_expand(order):
    specs, tensors = MASK_SPECS, [torch.randn(2, 8, 64), torch.zeros(2, 1, 1, 8)]
    if order == "mask first":
        specs, tensors = specs[::-1], tensors[::-1]
    with pytest.raises(InputError) as refused:
        check_inputs(tensors, specs, [], CPU, 2)
    message = str(refused.value)
    assert "dim 2 is 1, but the program was exported with that dim equal to seq (as input 'x'" in message, message
    assert "dim 1, its own dim 3 of this call, of size 8)" in message, message
    assert "attn_bias.expand(2, 1, 8, 8)" in message, message
    assert "wider torch.export.Dim" not in message, message
    expanded = torch.zeros(2, 1, 1, 8).expand(2, 1, 8, 8)
    check_inputs([torch.randn(2, 8, 64), expanded], MASK_SPECS, [], CPU, 2)  # the suggested call is taken


def test_a_size_of_1_where_no_place_of_the_call_is_larger_keeps_the_range_advice():
    """review40c: one token (x [2, 1, 64], the mask [2, 1, 1, 1]) broadcasts nothing: seq is 1 everywhere, outside
    [2, 256], and the range advice is the right one; the first version of the broadcast refusal said
    x.expand(2, seq, 64). A Dim.AUTO square of (1, 1) keeps its 0/1-specialization advice too."""
    with pytest.raises(InputError, match=r"dim 1 is 1, outside the exported range \[2, 256\] of seq; .*wider"):
        check_inputs([torch.randn(2, 1, 64), torch.zeros(2, 1, 1, 1)], MASK_SPECS, [], CPU, 2)
    square = TensorSpec.from_json({"name": "m", "dtype": "float32", "device": "cpu",
                                   "shape": [{"expr": "s77", "min": 2, "max": None}] * 2}, None)
    with pytest.raises(InputError, match=r"exported with Dim.AUTO or Dim.DYNAMIC starts at 2"):
        check_inputs([torch.randn(1, 1)], [square], [], CPU, 1)


def test_the_suggested_expand_fills_every_shared_dim_of_size_1_with_the_calls_size():
    """review40c: a mask [seq, kv] passed as (1, 1) beside q [seq] and k [kv] of 8 and 16 was told mask.expand(8, 1),
    then refused again; and where the input giving the size came later, the size read as the symbol's name."""
    seq, kv = {"expr": "s1", "min": 2, "max": 64}, {"expr": "s2", "min": 2, "max": 64}
    specs = [TensorSpec.from_json(spec, {"s1": "seq", "s2": "kv"}) for spec in [
        {"name": "mask", "dtype": "float32", "device": "cpu", "shape": [seq, kv]},
        {"name": "q", "dtype": "float32", "device": "cpu", "shape": [seq, 4]},
        {"name": "k", "dtype": "float32", "device": "cpu", "shape": [kv, 4]}]]
    with pytest.raises(InputError, match=r"mask\.expand\(8, 16\)"):
        check_inputs([torch.zeros(1, 1), torch.randn(8, 4), torch.randn(16, 4)], specs, [], CPU, 3)
    check_inputs([torch.zeros(1, 1).expand(8, 16), torch.randn(8, 4), torch.randn(16, 4)], specs, [], CPU, 3)


def test_a_size_of_1_for_a_dynamic_dim_shared_with_none_keeps_the_range_advice():
    spec = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                 "shape": [{"expr": "s0", "min": 2, "max": 8, "user_expr": "batch"}]}, {"s0": "batch"})
    with pytest.raises(InputError, match=r"dim 0 is 1, outside the exported range \[2, 8\] of batch; .*wider"):
        check_inputs([torch.randn(1)], [spec], [], CPU, 1)
