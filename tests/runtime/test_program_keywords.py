"""Calling a Program by keyword, as the eager module allows (``p(x=t)`` for ``forward(self, x)``), and
the messages for arguments structured unlike the export. Uses the session's Twice and Structured packages."""

import pytest
import torch

from aotcuda.errors import InputError
from aotcuda.runtime.program import load


@pytest.fixture(scope="module")
def twice(twice_pt2):
    with load(twice_pt2) as program:
        yield program


@pytest.fixture(scope="module")
def structured(structured_pt2):
    path, module = structured_pt2
    with load(path) as program:
        yield program, module


def assert_outputs_equal(actual, expected):
    for got, want in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_positional_parameter_by_keyword_runs_like_eager(twice):
    x = torch.randn(7, 4)
    assert_outputs_equal(twice(x=x), (x * 2, x + 1, x * 2))
    assert_outputs_equal(twice(x=x), twice(x))


def test_every_argument_by_keyword_in_any_order(structured):
    program, module = structured
    x, scale = torch.randn(5, 4), torch.randn(5, 3)
    with torch.no_grad():
        expected = module(x, {"scale": scale}, use_cache=False)  # as exported
    assert_outputs_equal(program(extra={"scale": scale}, use_cache=False, x=x), expected)
    assert_outputs_equal(program(x, extra={"scale": scale}, use_cache=False), expected)
    assert_outputs_equal(program(x, {"scale": scale}, False), expected)  # positionally, as eager binds them


def test_the_signature_records_forward_argument_names(structured):
    program, _ = structured
    assert program._package.signature["forward_arg_names"] == ["x", "extra", "use_cache"]


def test_a_constant_keyword_may_be_repeated_but_not_changed_nor_left_out(structured):
    """use_cache=False was specialized into the package: passing False runs the program; passing True would
    silently answer for False (eager's True adds 1), so it is refused, naming both; and so is leaving it out,
    where eager computes with forward's default True (this test let that run before the trial found it)."""
    program, module = structured
    assert program._package.signature["constant_inputs"] == [{"leaf": 2, "value": False, "name": "'use_cache'"}]
    x, scale = torch.randn(5, 4), torch.randn(5, 3)
    with torch.no_grad():
        expected = module(x, {"scale": scale}, use_cache=False)
        assert not torch.allclose(module(x, {"scale": scale})["h"], expected["h"])
    assert_outputs_equal(program(x, extra={"scale": scale}, use_cache=False), expected)
    with pytest.raises(InputError, match=r"argument left out where the program was exported with another value than "
                                         r"the module's default: 'use_cache' \(the program computes with False; eager "
                                         r"with the module's default True\); pass use_cache=False"):
        program(x, extra={"scale": scale})
    for other in (True, None, 0):
        kind = r" \(type int, not bool\)" if other == 0 and other is not False else ""  # 0 is not False: said so
        with pytest.raises(InputError, match=rf"argument 'use_cache' is {other!r}{kind}, but the program was exported with "
                                             r"False there and computes with that value whatever is passed"):
            program(x, extra={"scale": scale}, use_cache=other)
    assert_outputs_equal(program(x, extra={"scale": scale}, use_cache=False), expected)  # still usable


@pytest.mark.parametrize("call, message", [
    (lambda p: p(torch.randn(3, 4), x=torch.randn(3, 4)), r"argument 'x' given twice, as positional #0 and by keyword"),
    (lambda p: p(y=torch.randn(3, 4)), r"keyword arguments \['y'\] do not match the exported module's: the program takes x"),
    (lambda p: p(torch.randn(3, 4), outputs=[torch.empty(3, 4)] * 3),
     r"keyword arguments \['outputs'\] do not match .*output buffers go to program.execute\(inputs, outputs=\[...\]\)"),
    (lambda p: p([torch.randn(3, 4)]), r"input 'x' \(#0\) is a list of 1, expected a tensor"),
    # a raw TypeError "Program.__call__() got multiple values for argument 'self'" (the breaker, 2026-12-06)
    (lambda p: p(torch.randn(3, 4), self=1), r"keyword arguments \['self'\] do not match the exported module's"),
    (lambda p: p(x=(torch.randn(3, 4), torch.randn(3, 4))), r"input 'x' \(#0\) is a tuple of 2, expected a tensor"),
])
def test_bad_keyword_calls_name_the_argument(twice, call, message):
    with pytest.raises(InputError, match=message) as caught:
        call(twice)
    assert "TreeSpec" not in str(caught.value)
    x = torch.randn(3, 4)
    assert_outputs_equal(twice(x=x), (x * 2, x + 1, x * 2))  # still usable


def test_nested_mismatch_names_the_path(structured):
    program, _ = structured
    x = torch.randn(5, 4)
    with pytest.raises(InputError, match=r"keyword input 'extra' is a dict with keys \['shift'\], expected a dict "
                                         r"with keys \['scale'\]"):
        program(x, extra={"shift": torch.randn(5, 3)})
    with pytest.raises(InputError, match=r"missing keyword argument\(s\) \['extra'\]: the program takes x and keyword"):
        program(x)
    with pytest.raises(InputError, match=r"takes 1 positional argument\(s\) \(x\), got 0"):
        program(extra={"scale": torch.randn(5, 3)})


def test_inspect_lists_the_constant_inputs(structured_pt2):
    from click.testing import CliRunner

    from aotcuda.cli import main

    result = CliRunner().invoke(main, ["inspect", structured_pt2[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "arguments fixed at lowering (the program computes with these values whatever a call passes): " \
           "use_cache=False (module default True)" in result.output


def test_a_keyword_only_argument_passed_positionally_is_named_with_how_to_pass_it():
    """A new user called a Program of forward(audio, *, speaker_id) as program(audio, speaker_id) and got only
    "takes 1 positional argument(s) (audio), got 2": now the message says speaker_id is keyword-only, and how."""
    import torch.utils._pytree as pytree

    from aotcuda.runtime.keywords import bind_keywords

    audio, speaker = torch.randn(2, 3), torch.ones(2, 1)
    in_spec = pytree.tree_flatten(((audio,), {"speaker_id": speaker}))[1]
    with pytest.raises(InputError, match=r"takes 1 positional argument\(s\) \(audio\), got 2; 'speaker_id' is "
                                         r"keyword-only .*: pass speaker_id=\.\.\.$"):
        bind_keywords((audio, speaker), {}, in_spec, ["audio"])
    assert bind_keywords((audio,), {"speaker_id": speaker}, in_spec, ["audio"]) == ((audio,), {"speaker_id": speaker})
    with pytest.raises(InputError, match=r"got 2; call it as the exported module was called$"):  # no keyword left
        bind_keywords((audio, speaker), {"speaker_id": speaker}, in_spec, ["audio"])


@pytest.mark.parametrize("value, kind", [("int", "int"), ("numpy", "float64"), ("subclass", "Half")])
def test_a_constant_of_another_type_that_prints_alike_is_named_by_its_type(scaled_pt2, value, kind):
    """The check of a lowered Python constant compares types too (0 is not False); a value of another type that
    prints like the lowered one was refused as "'scale' is 2.0, but the program was exported with 2.0" (the
    breaker, 2026-12-05)."""
    import numpy as np

    class Half(float):
        pass

    value = {"int": 2, "numpy": np.float64(2.0), "subclass": Half(2.0)}[value]
    x = torch.randn(3, 4)
    with load(scaled_pt2) as program:
        with pytest.raises(InputError, match=rf"argument 'scale' is \S+ \(type {kind}, not float\), but the "
                                             r"program was exported with 2.0 there"):
            program(x, scale=value, use_relu=True)
        torch.testing.assert_close(program(x, scale=2.0, use_relu=True), (x * 2).relu())



def test_a_constant_of_another_type_of_the_same_name_is_named_by_its_module(scaled_pt2):
    """NumPy 2's bool is named "bool": np.True_ for a lowered use_relu=True was refused as "is True (type bool, not
    bool)" (breakcall, 2026-12-07), a message that contradicts itself; its module says which bool it is."""
    import numpy as np

    x = torch.randn(3, 4)
    with load(scaled_pt2) as program:
        with pytest.raises(InputError, match=r"argument 'use_relu' is \S+ \(type numpy\.bool_?, not bool\), but the "
                                             r"program was exported with True there.*pass use_relu=True"):
            program(x, scale=2.0, use_relu=np.True_)
        torch.testing.assert_close(program(x, scale=2.0, use_relu=True), (x * 2).relu())


def test_an_object_claiming_to_be_a_tensor_for_a_lowered_constant_is_named_by_its_type(structured):
    """A refused constant is named as a tensor by its shape where it is one; an object whose ``__class__`` claims
    torch.Tensor (isinstance believes it) had its ``.shape`` read, a raw AttributeError (breakcall, 2026-12-07)."""
    program, module = structured

    class Claims:
        __class__ = property(lambda self: torch.Tensor)

    x, scale = torch.randn(5, 4), torch.randn(5, 3)
    with pytest.raises(InputError, match=r"argument 'use_cache' is <.*Claims object at .*> \(type Claims, not bool\), "
                                         r"but the program was exported with False there"):
        program(x, extra={"scale": scale}, use_cache=Claims())
    assert_outputs_equal(program(x, extra={"scale": scale}, use_cache=False),
                         module(x, extra={"scale": scale}, use_cache=False))

def test_a_container_pytree_does_not_know_is_named_by_its_type_on_one_line(structured):
    """A dict subclass (or anything pytree takes for a leaf) where the program takes a dict was refused as
    "keyword input 'extra' is a tensor", and a dict keyed by a tensor printed the tensor's repr over several lines
    (the breaker, 2026-12-05)."""
    import collections

    program, module = structured
    x, scale = torch.randn(5, 4), torch.randn(5, 3)

    class Extra(dict):
        pass

    with pytest.raises(InputError, match=r"keyword input 'extra' is an Extra, expected a dict with keys \['scale'\] "
                                         r"\(pass a plain dict, e.g. dict\(value\)\)"):
        program(x, Extra(scale=scale), use_cache=False)
    with pytest.raises(InputError, match=r"keyword input 'extra' is an OrderedDict of 1, expected a dict .*dict\(value\)"):
        program(x, collections.OrderedDict(scale=scale), use_cache=False)
    with pytest.raises(InputError) as refused:
        program(x, {scale: scale}, use_cache=False)
    assert "\n" not in str(refused.value) and "keys [tensor([[" in str(refused.value)
    assert_outputs_equal(program(x, dict(Extra(scale=scale)), use_cache=False),
                         module(x, {"scale": scale}, use_cache=False))


def test_dicts_are_put_in_the_exported_key_order_at_every_level():
    """A new user (2026-12-06, second): a dict whose keys came in another order than the export's was refused; the
    reorder is checked here at every nesting level, run by torch's ep.module() against eager (no compile; torch 2.13's
    ep.module() takes a top-level dict's keys in any order, not a nested one's)."""
    from aotcuda.runtime.keywords import in_spec_order

    class Deep(torch.nn.Module):
        def forward(self, feats, more):
            return feats["x"] * 2 + feats["inner"][0]["b"] - feats["inner"][0]["a"], more["p"] + more["q"]

    def make(reverse):
        def d(pairs):
            return dict(reversed(pairs) if reverse else pairs)
        x, a, b, p, q = (torch.randn(2, 3) for _ in range(5))
        return (d([("x", x), ("inner", [d([("a", a), ("b", b)])])]), d([("p", p), ("q", q)]))

    ep = torch.export.export(Deep(), make(False))
    spec = ep.call_spec.in_spec
    for _ in range(2):
        args = make(True)
        ordered = in_spec_order((args, {}), spec)
        flat, given = torch.utils._pytree.tree_flatten(ordered)
        assert given == spec
        assert_outputs_equal(ep.module()(*ordered[0]), Deep()(*args))
    straight = (make(False), {})
    assert in_spec_order(straight, spec) is straight  # nothing moved: nothing rebuilt
    other = ({"x": torch.randn(2, 3)}, {"p": torch.randn(2, 3), "q": torch.randn(2, 3)})
    assert in_spec_order((other, {}), spec)[0][0] is other[0]  # other keys: left for the error to name


def test_a_list_where_a_tensor_goes_gets_the_as_tensor_advice_a_numpy_array_gets(structured):
    """A new user (2026-12-06, second): `p([[1, 2, 3]])` was told `input 'ids' (#0) is a list of 1, expected a tensor`,
    where a NumPy array there gets the tensor the program takes and `torch.as_tensor(value, dtype=...)`. A list, at
    any level, gets that advice now, with the shape and dtype of the input at its place (fixed leaves skipped)."""
    program, module = structured
    x, scale = torch.randn(5, 4), torch.randn(5, 3)
    with pytest.raises(InputError, match=r"^input 'x' \(#0\) must be a torch.Tensor, got list; the program takes a "
                                         r"tensor of shape \(5, 4\) and dtype torch.float32 on cpu, e.g. "
                                         r"torch.as_tensor\(value, dtype=torch.float32\)$"):
        program(x.tolist(), extra={"scale": scale}, use_cache=False)
    with pytest.raises(InputError, match=r"^keyword input 'extra'\['scale'\] must be a torch.Tensor, got list; the "
                                         r"program takes a tensor of shape \(5, 3\) and dtype torch.float32"):
        program(x, extra={"scale": scale.tolist()}, use_cache=False)
    with pytest.raises(InputError, match=r"^input 'x' \(#0\) must be a torch.Tensor, got tuple; .*torch.as_tensor"):
        program(tuple(x.tolist()), extra={"scale": scale}, use_cache=False)
    with torch.no_grad():  # the advice, followed, runs as eager
        assert_outputs_equal(program(torch.as_tensor(x.tolist(), dtype=torch.float32), extra={"scale": scale},
                                     use_cache=False), module(x, {"scale": scale}, use_cache=False))


@pytest.mark.parametrize("call", [(1, 2), ("bogus",)])
def test_an_input_name_is_listed_escaped_where_a_package_has_no_forward_arg_names(call):
    """Found in review of break41: a package without forward_arg_names (an older one, or one whose lowering left out a
    name past 256 characters) names its arguments by its inputs' names, which load takes as any string; the count and
    unknown-keyword refusals listed them raw (an ESC sequence recoloured and retitled the terminal printing them).
    They are listed escaped and cut, as the CLI shows a package's text."""
    import torch.utils._pytree as pytree

    from aotcuda.runtime.keywords import bind_keywords, positional_names
    from aotcuda.runtime.specs import specs_from_signature

    signature = {"format": "aotcuda", "version": 2, "outputs": [],
                 "inputs": [{"name": "ids\x1b[31mred\x1b]0;title\x07\u202e" + "d" * 10_000, "dtype": "int64",
                             "device": "cpu", "shape": [2, 4]}]}
    inputs, _ = specs_from_signature(signature, "x.pt2")
    _, in_spec = pytree.tree_flatten(((torch.ones(1),), {}))
    names = positional_names(in_spec, signature, inputs)
    args, kwargs = (call, {}) if len(call) > 1 else ((torch.ones(1),), {call[0]: 1})
    with pytest.raises(InputError) as refused:
        bind_keywords(args, kwargs, in_spec, names)
    message = str(refused.value)
    assert "ids\\x1b[31mred\\x1b]0;title\\x07\\u202e" in message, message
    assert not any(char in message for char in "\x1b\x07\u202e"), repr(message)
    assert len(message) < 600, len(message)
