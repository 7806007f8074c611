"""Python-scalar arguments fixed at lowering, against eager (the new-user trial's t8/t9): a call runs only where
eager computes what the package computes; left-out, positional and extra arguments bind as eager binds them.

scaled_pt2: ``forward(x, scale=1.0, use_relu=False)`` lowered with scale=2.0, use_relu=True (keywords);
scaled_default_pt2: the same exported with scale=1.0 passed positionally, use_relu left at its default."""

import json
import re
import zipfile

import pytest
import torch
from click.testing import CliRunner
from runtime_programs import Scaled

from aotcuda.errors import InputError, PackageError
from aotcuda.package_format import write_signature
from aotcuda.runtime.package import read_signature
from aotcuda.runtime.program import load

EAGER = Scaled()


@pytest.fixture(scope="module")
def scaled(scaled_pt2):
    with load(scaled_pt2) as program:
        yield program


@pytest.fixture(scope="module")
def scaled_default(scaled_default_pt2):
    with load(scaled_default_pt2) as program:
        yield program


def x():
    return torch.randn(3, 4)


@pytest.mark.parametrize("call", [
    lambda p, t: p(t, scale=2.0, use_relu=True),
    lambda p, t: p(t, 2.0, True),           # positional, as eager binds them
    lambda p, t: p(t, 2.0, use_relu=True),
    lambda p, t: p(x=t, use_relu=True, scale=2.0),
])
def test_the_exported_values_run_like_eager_by_keyword_or_position(scaled, call):
    t = x()
    torch.testing.assert_close(call(scaled, t), EAGER(t, 2.0, True))


@pytest.mark.parametrize("kwargs, left_out", [
    ({}, ["scale", "use_relu"]),
    ({"scale": 2.0}, ["use_relu"]),
    ({"use_relu": True}, ["scale"]),
])
def test_leaving_out_an_argument_exported_with_another_value_than_its_default_is_refused(scaled, kwargs, left_out):
    """Eager's m(x) computes x; the package would compute relu(2x): refused, naming each argument, the value the
    program computes with, forward's default and the fix."""
    t = x()
    assert not torch.allclose(EAGER(t, **kwargs), EAGER(t, 2.0, True))  # the silent case the trial found
    with pytest.raises(InputError) as caught:
        scaled(t, **kwargs)
    message = str(caught.value)
    exported, default = {"scale": (2.0, 1.0), "use_relu": (True, False)}, []
    for name in left_out:
        assert f"'{name}' (the program computes with {exported[name][0]!r}; eager with the module's default " \
               f"{exported[name][1]!r})" in message
    assert f"pass {', '.join(f'{name}={exported[name][0]!r}' for name in left_out)}, or lower the model again" \
        in message
    torch.testing.assert_close(scaled(t, scale=2.0, use_relu=True), EAGER(t, 2.0, True))  # still usable


@pytest.mark.parametrize("call, message", [
    (lambda p, t: p(t, scale=3.0, use_relu=True), r"argument 'scale' is 3.0, but the program was exported with 2.0 "
                                                   r"there .*; pass scale=2.0, or lower the model again"),
    (lambda p, t: p(t, 3.0, True), r"argument 'scale' is 3.0, but the program was exported with 2.0"),
    (lambda p, t: p(t, 2.0, False), r"argument 'use_relu' is False, but the program was exported with True"),
    (lambda p, t: p(t, 2.0, scale=2.0), r"argument 'scale' given twice, as positional #1 and by keyword"),
])
def test_another_value_positional_or_keyword_is_refused_with_one_message(scaled, call, message):
    with pytest.raises(InputError, match=message) as caught:
        call(scaled, x())
    assert "leave" not in str(caught.value)  # leaving it out is refused too: not offered as a fix


def _nested(levels: int):
    value = 3.0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("value", ["a 1 MB string", "a list of a million numbers", "a list nested 100,000 deep",
                                   "an object whose repr raises"])
def test_a_refused_value_is_quoted_briefly_whatever_it_holds(scaled, scaled_default, value):
    """Review 10: the message quoted the call's value whole (repr): 1 MB of text for a 1 MB string, and a raw
    RecursionError for a list nested 100,000 deep. It is quoted with reprlib's bounds now, in both messages."""
    class Unprintable:
        def __repr__(self):
            raise ValueError("no repr")

    given = {"a 1 MB string": "s" * 1_000_000, "a list of a million numbers": list(range(1_000_000)),
             "a list nested 100,000 deep": _nested(100_000), "an object whose repr raises": Unprintable()}[value]
    calls = [(lambda: scaled_default(x(), use_relu=given), r"argument 'use_relu' is .{1,120}, but the program was "
                                                            r"exported with use_relu's default")]
    if not isinstance(given, list):  # (a list at a constant's leaf is a structure the program does not take)
        calls.append((lambda: scaled(x(), scale=given, use_relu=True), r"argument 'scale' is .{1,120}, but the "
                                                                       r"program was exported with 2.0 there"))
    for call, message in calls:
        with pytest.raises(InputError, match=message) as caught:
            call()
        assert len(str(caught.value)) < 600, str(caught.value)[:300]
    t = x()
    torch.testing.assert_close(scaled(t, scale=2.0, use_relu=True), EAGER(t, 2.0, True))  # still usable


def test_a_refused_tensor_is_named_by_its_shape_and_dtype_not_its_values(scaled, scaled_default):
    """A new user lowered LlamaForCausalLM with (input_ids,) and called the package with attention_mask=ones: the
    refusal printed the mask's repr twice, lines of numbers, and advised `lower the model again with
    attention_mask=tensor([[1, 1, ...]]) in kwargs`. A tensor is named by its shape and dtype now, and the advice is
    to lower again with an example of it in kwargs."""
    mask = torch.ones(2, 40, dtype=torch.int64)
    with pytest.raises(InputError) as caught:
        scaled_default(x(), use_relu=mask)
    said = str(caught.value)
    assert said == ("argument 'use_relu' is a tensor of shape (2, 40) and dtype torch.int64, but the program was "
                    "exported with use_relu's default False (the example call left it out) and computes with that "
                    "value whatever is passed; leave it out (or pass False), or lower the model again with an example "
                    "use_relu in kwargs (a tensor like this one), to take it as an input"), said
    with pytest.raises(InputError, match=r"^argument 'scale' is a tensor of shape \(\) and dtype torch.float32, but "
                                         r"the program was exported with 2.0 there") as caught:
        scaled(x(), scale=torch.tensor(2.0), use_relu=True)
    assert "\n" not in str(caught.value)


def test_a_non_tensor_for_a_tensor_input_beside_a_constant_is_named(scaled):
    """A new user called a diffusers UNet lowered with (sample, timestep) and return_dict=False as
    p(x, 10, return_dict=False): the non-tensor leaves were dropped as constants, so the refusal counted tensors,
    "the program takes 2 tensor input(s) (sample, timestep), got 1", for a call of two arguments. The leaves the
    signature records as constants are dropped, and the input that is no tensor is named."""
    for call in (lambda: scaled(3.0, scale=2.0, use_relu=True), lambda: scaled(3.0, 2.0, True)):
        with pytest.raises(InputError, match=r"^input 'x' \(#0\) must be a torch.Tensor, got float; the program takes a "
                                             r"tensor of shape \(3, 4\)"):
            call()
    t = x()
    torch.testing.assert_close(scaled(t, scale=2.0, use_relu=True), EAGER(t, 2.0, True))


def test_program_and_inspect_show_the_arguments_fixed_at_lowering(scaled, scaled_pt2):
    from aotcuda.cli import main

    assert scaled.constant_inputs == {"scale": 2.0, "use_relu": True}
    result = CliRunner().invoke(main, ["inspect", scaled_pt2], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "arguments fixed at lowering (the program computes with these values whatever a call passes): " \
           "scale=2.0 (module default 1.0), use_relu=True (module default False)" in result.output


def test_the_lowering_records_forwards_parameters(scaled):
    assert scaled._package.signature["forward_parameters"] == [
        {"name": "x", "positional": True, "has_default": False},
        {"name": "scale", "positional": True, "has_default": True, "default": 1.0},
        {"name": "use_relu", "positional": True, "has_default": True, "default": False}]


@pytest.mark.parametrize("call", [
    lambda p, t: p(t),                               # the positional constant equals forward's default: filled
    lambda p, t: p(t, 1.0),
    lambda p, t: p(t, scale=1.0),
    lambda p, t: p(t, use_relu=False),               # left at its default at lowering: that value runs
    lambda p, t: p(t, 1.0, False),
    lambda p, t: p(t, scale=1.0, use_relu=False),
])
def test_values_equal_to_forwards_defaults_run_like_eager(scaled_default, call):
    t = x()
    torch.testing.assert_close(call(scaled_default, t), EAGER(t))


def test_another_value_for_an_argument_left_at_its_default_is_refused(scaled_default):
    """The example call left use_relu out: the program computes with forward's default, False."""
    for call in (lambda t: scaled_default(t, use_relu=True), lambda t: scaled_default(t, 1.0, True)):
        with pytest.raises(InputError, match=r"argument 'use_relu' is True, but the program was exported with "
                                             r"use_relu's default False \(the example call left it out\) .*; leave "
                                             r"it out \(or pass False\), or lower the model again with "
                                             r"use_relu=True in kwargs"):
            call(x())
    with pytest.raises(InputError, match=r"argument 'scale' is 3.0, but the program was exported with 1.0 there "
                                         r".*; pass scale=1.0 or leave it out, or lower"):
        scaled_default(x(), scale=3.0)
    with pytest.raises(InputError, match=r"keyword arguments \['shift'\] do not match"):
        scaled_default(x(), shift=1.0)  # not forward's: unknown, as before


def test_a_package_without_forwards_parameters_behaves_as_before(scaled_pt2, tmp_path):
    """Packages lowered before the parameters were recorded: a left-out keyword is filled with the exported
    value (what they did), other values are still refused, positional constants give the count error."""
    path = tmp_path / "older.pt2"
    path.write_bytes(open(scaled_pt2, "rb").read())
    signature = read_signature(str(path))
    del signature["forward_parameters"]
    write_signature(path, signature)
    with zipfile.ZipFile(path) as archive:
        assert "forward_parameters" not in json.loads(archive.read(next(n for n in archive.namelist()
                                                                       if n.endswith("aotcuda/signature.json"))))
    t = x()
    with load(path) as program:
        torch.testing.assert_close(program(t), EAGER(t, 2.0, True))
        with pytest.raises(InputError, match=r"argument 'scale' is 3.0, .*; pass scale=2.0 or leave it out"):
            program(t, scale=3.0)
        with pytest.raises(InputError, match=r"takes 1 positional argument\(s\) \(x\), got 3"):
            program(t, 2.0, True)
        with pytest.raises(InputError, match=r"keyword arguments \['shift'\] .*does not record forward's parameters"):
            program(t, shift=1.0)


def _arguments(kwargs, parameters, constants):
    """ConstantArguments of forward(x, **kwargs) exported with a tensor x and ``kwargs`` (no compile)."""
    from torch.utils._pytree import tree_flatten

    from aotcuda.runtime.constant_arguments import ConstantArguments

    in_spec = tree_flatten(((torch.zeros(1),), kwargs))[1]
    return ConstantArguments({"forward_parameters": parameters, "constant_inputs": constants}, in_spec, ["x"])


def test_a_constant_without_a_default_must_be_passed():
    arguments = _arguments({"scale": 2.0}, [{"name": "x", "positional": True, "has_default": False},
                                            {"name": "scale", "positional": True, "has_default": False}],
                           [{"leaf": 1, "value": 2.0}])
    args, kwargs = arguments.bind((torch.zeros(1),), {})
    with pytest.raises(InputError, match=r"'scale' \(the program computes with 2.0; the module's forward has no "
                                         r"default for it, so eager needs it passed\); pass scale=2.0"):
        arguments.check([args[0], kwargs["scale"]])
    assert arguments.bind((torch.zeros(1), 2.0), {})[1] == {"scale": 2.0}


def test_forwards_parameter_names_are_listed_escaped_in_the_too_many_refusal():
    """Review of break41: the refusal of too many positional arguments listed forward's parameter names (package text)
    raw. Load refuses such a name (package_format.check_forward_parameter_names); the message escapes them too, for a
    signature that reaches ConstantArguments another way."""
    hostile = "scale\x1b[31mred\x1b]0;title\x07\u202e\nerror: forged"
    arguments = _arguments({}, [{"name": "x", "positional": True, "has_default": False},
                                {"name": hostile, "positional": True, "has_default": True, "default": 1.0}], [])
    with pytest.raises(InputError) as refused:
        arguments.bind((torch.zeros(1), 1.0, 2.0), {})
    message = str(refused.value)
    assert "scale\\x1b[31mred\\x1b]0;title\\x07\\u202e\\nerror: forged is fixed at forward's default 1.0" in message
    assert message.isprintable(), repr(message)


def test_a_nested_constant_is_named_by_its_path():
    arguments = _arguments({"extra": {"scale": 2.0}}, None, [{"leaf": 1, "value": 2.0}])
    assert arguments.shown() == {"extra['scale']": 2.0}
    with pytest.raises(InputError, match=r"argument \"extra\['scale'\]\" is 3.0, but the program was exported with "
                                         r"2.0 there .*; pass 2.0, or lower"):
        arguments.check([torch.zeros(1), 3.0])


# --- hostile constant_inputs / forward_parameters (review 7) --------------------------------------------------

@pytest.mark.parametrize("change, says", [
    ({"constant_inputs": [{"leaf": float("inf"), "value": 2.0}]}, r"constant_inputs\[0\] leaf is inf, not a leaf"),
    ({"constant_inputs": [{"leaf": True, "value": 2.0}]}, r"constant_inputs\[0\] leaf is True, not a leaf"),
    ({"constant_inputs": [{"leaf": 7, "value": 2.0}]}, r"constant_inputs\[0\] leaf is 7, not a leaf .* from 0 to 2"),
    ({"constant_inputs": [{"leaf": 0, "value": 5}]}, r"constant_inputs gives a value at leaf 0, the tensor input 'x'"),
    ({"constant_inputs": [{"leaf": 1, "value": [1, 2]}]}, r"constant_inputs\[0\] value is \[1, 2\], not a plain JSON"),
    ({"constant_inputs": [{"leaf": 1, "value": 2.0}, {"leaf": 1, "value": 2.0}]}, r"constant_inputs\[1\] leaf 1 is "
                                                                                 "given a second time"),
    ({"constant_inputs": {"leaf": 1}}, r"constant_inputs is a dict, not a list"),
    ({"forward_parameters": [{"name": "x", "positional": True}, {"name": "scale", "has_default": True,
                                                                 "default": [1.0, 2.0]}]},
     r"forward_parameters\[1\] default is \[1.0, 2.0\], not a plain JSON scalar"),
    ({"forward_parameters": [{"name": "x", "positional": True}, {"name": "x", "positional": True}]},
     r"forward_parameters\[1\] names 'x' a second time"),
    ({"forward_parameters": [{"name": 3}]}, r"forward_parameters\[0\] has no name"),
])
def test_a_malformed_constant_or_parameter_is_refused_at_load_naming_the_field(scaled_pt2, tmp_path, change, says):
    """(review 7) A leaf of Infinity raised a raw OverflowError from int(); a list default compared with a call's
    list of tensors raised torch's raw RuntimeError from ==; a constant at a tensor input's leaf gave a misleading
    "pass x=5". Both fields are read at load: a malformed one is a PackageError naming it, nothing read in part."""
    path = tmp_path / "hostile.pt2"
    path.write_bytes(open(scaled_pt2, "rb").read())
    write_signature(path, {**read_signature(str(path)), **change})
    with pytest.raises(PackageError, match=rf"hostile.pt2'.*signature's {says}.*damaged or hostile"):
        load(str(path))


@pytest.mark.parametrize("place, change", [
    ("outputs[0] name holds 'out\\x1b[31mred",
     lambda signature: signature["outputs"][0].update(name="out\x1b[31mred\u202e")),
    ("constant_inputs[0] name is 7,000,000 characters long",
     lambda signature: signature["constant_inputs"][0].update(name="s" * 7_000_000)),
])
def test_a_package_with_a_name_load_refuses_is_refused_at_load_naming_the_place(scaled_pt2, tmp_path, place, change):
    """(names42) The signature's output and constant names were read as any string: this package with its output renamed
    with ESC sequences, or its constant's name of 7,000,000 characters, loaded. Both are refused as load reads the
    signature (package_format.check_names), naming the place and the fix."""
    path = tmp_path / "hostile.pt2"
    path.write_bytes(open(scaled_pt2, "rb").read())
    signature = read_signature(str(path))
    change(signature)
    write_signature(path, signature)
    with pytest.raises(PackageError, match=rf"hostile\.pt2'.*signature\.json: {re.escape(place)}.*damaged, hostile, "
                                           "or lowered by an older aotcuda.*: lower the model again"):
        load(str(path))


def test_only_plain_values_are_compared_and_lowering_records_only_those():
    """same_value compares the plain JSON scalars a signature holds; anything else (a list holding tensors, whose
    == is elementwise) is not the same. The lowering records defaults and constants by the same test."""
    from aotcuda.lowering.signature import forward_parameters
    from aotcuda.runtime.constant_arguments import same_value

    assert same_value(2.0, 2.0) and same_value(float("nan"), float("nan")) and same_value(None, None)
    assert not same_value(1, True) and not same_value([1.0], [1.0])
    assert not same_value([torch.ones(2), torch.ones(2)], [torch.ones(2), torch.ones(2)])  # raised RuntimeError

    class Defaults(torch.nn.Module):
        def forward(self, x, extra=(1.0, 2.0), flag=True, mode=torch.float32):
            return x

    recorded = {p["name"]: p for p in forward_parameters(Defaults())}
    assert recorded["flag"]["default"] is True
    assert "default" not in recorded["extra"] and "default" not in recorded["mode"] and recorded["extra"]["has_default"]


def test_too_many_positional_arguments_say_which_are_fixed_at_lowering(scaled):
    """A new user (2026-12-06, second): `p(x, pos, 0.5, 7)` for forward(x, pos, scale: float) with scale fixed at
    lowering said `the program takes 2 positional argument(s) (x, pos), got 4`, though 3 work. The count now spans
    forward's positional parameters, each fixed one named with its value."""
    t = x()
    with pytest.raises(InputError, match=r"^the program takes 1 to 3 positional argument\(s\) \(x, scale, use_relu; "
                                         r"scale is fixed at 2.0; use_relu is fixed at True\), got 4; "):
        scaled(t, 2.0, True, 7)
    torch.testing.assert_close(scaled(t, 2.0, True), EAGER(t, 2.0, True))  # the counted ones run
    arguments = _arguments({"scale": 2.0}, [{"name": "x", "positional": True, "has_default": False},
                                            {"name": "scale", "positional": True, "default": 1.0},
                                            {"name": "shift", "positional": True, "default": 0.0}],
                           [{"leaf": 1, "value": 2.0}])
    with pytest.raises(InputError, match=r"takes 1 to 3 .*\(x, scale, shift; scale is fixed at 2.0; shift is fixed at "
                                         r"forward's default 0.0\), got 5"):
        arguments.bind((t, 2.0, 0.0, 1, 2), {})


def test_the_sign_of_a_zero_constant_is_part_of_its_value(tmp_path):
    """-0.0 == 0.0, so a program lowered with scale=0.0 ran a call with scale=-0.0 and computed with 0.0: x * scale
    was +0 where eager gives -0, and 1 / (x * scale) inf where eager gives -inf (main: ran, a silent wrong answer).
    The constant's sign is compared too; the lowered value itself runs as eager."""
    import aotcuda

    path = tmp_path / "zero.pt2"
    aotcuda.lower(Scaled(), (torch.randn(3, 4),), {"scale": 0.0}, device="cpu", package_path=path)
    with load(str(path)) as program:
        t = torch.rand(3, 4) + 0.5
        ran, eager = program(t, scale=0.0), EAGER(t, 0.0)
        assert torch.equal(torch.signbit(ran), torch.signbit(eager)) and torch.equal(1 / ran, 1 / eager)
        with pytest.raises(InputError, match=r"argument 'scale' is -0.0, but the program was exported with 0.0 there"):
            program(t, scale=-0.0)
        t = -torch.rand(3, 4)  # and the next call, on fresh values, is still eager's
        torch.testing.assert_close(program(t, scale=0.0), EAGER(t, 0.0))
        assert torch.equal(torch.signbit(program(t, scale=0.0)), torch.signbit(EAGER(t, 0.0)))
    from aotcuda.runtime.constant_arguments import same_value

    assert same_value(float("nan"), float("nan")) and same_value(-0.0, -0.0) and same_value(2.0, 2.0)
    assert not same_value(-0.0, 0.0) and not same_value(0, 0.0) and not same_value(False, 0)
    assert same_value(0, 0) and same_value(0, -0)  # ints have no signed zero


def test_another_int_says_how_to_pass_a_value_that_changes_per_call():
    """A new user's Llama-2 ``forward(x, start_pos: int)`` lowered with 0 and called with 5: "lower the model again with
    the value you need" meant one package per decode position; an int's refusal says to pass a 0-d tensor instead."""
    arguments = _arguments({"start_pos": 0}, None, [{"leaf": 1, "value": 0}])
    with pytest.raises(InputError, match=r"argument 'start_pos' is 5, .*lower the model again with the value you need\. "
                                         r"A value that changes from call to call \(a decode position\) must reach "
                                         r"forward as a 0-d tensor, read there with \.item\(\) and bounded with "
                                         r"torch\._check \(sp = start_pos\.item\(\);"):
        arguments.check([torch.zeros(1), 5])
    floats = _arguments({"scale": 2.0}, None, [{"leaf": 1, "value": 2.0}])
    with pytest.raises(InputError) as refused:  # only where the argument is an int (a bool is no position either)
        floats.check([torch.zeros(1), 3.0])
    assert ".item()" not in str(refused.value)
    flags = _arguments({"use_cache": False}, None, [{"leaf": 1, "value": False}])
    with pytest.raises(InputError) as refused:
        flags.check([torch.zeros(1), True])
    assert ".item()" not in str(refused.value)
