"""The aotcuda command, through click's CliRunner; inspect and run reuse the session's demo package."""

import errno
import logging
import os
import pathlib
import re
import signal
import struct
import subprocess
import sys
import time
import warnings
import zipfile

import click
import pytest
import torch
from click.testing import CliRunner

import aotcuda
import aotcuda.cli
import aotcuda.lowering
from aotcuda.cli import cli_hints, main
from aotcuda.cli_inputs import dynamic_shapes_from, load_factory
from aotcuda.errors import AotcudaError, MissingFallbackKernelsError
from least_time import least_cpu_seconds
from lowered_demo import lowered_demo
from runtime.runtime_programs import with_edited_signature  # tests/runtime, a namespace package


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


class Scale(torch.nn.Module):
    """Small enough to compile in seconds: a linear layer and a complex rotation."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x, angle):
        z = torch.view_as_complex(self.linear(x).reshape(*x.shape[:-1], 4, 2))
        rotated = z * torch.polar(torch.ones_like(angle), angle)
        return torch.view_as_real(rotated).flatten(-2), angle * 2


def scale_factory():
    torch.manual_seed(0)
    return Scale(), (torch.randn(3, 8), torch.randn(3, 4))


@pytest.fixture(scope="module")
def demo():
    return lowered_demo()


@pytest.fixture
def runner():
    return CliRunner()


def test_inspect_lists_signature_and_kernels(demo, runner):
    lowered, _, _ = demo
    result = runner.invoke(main, ["inspect", lowered.package_path])
    assert result.exit_code == 0, result.output
    assert "device cpu" in result.output
    assert "fallback kernels: 0" in result.output
    assert "_scaled_dot_product_flash_attention_for_cpu" in result.output
    assert "float32" in result.output and "[2, 128]" in result.output  # the dynamic seq range
    assert "seq∈[2, 128]" in result.output  # under the Dim name the user gave it, not s27 (issue #11 item 6)


def test_inspect_shows_the_index_checks_and_the_outputs_that_are_inputs(demo, runner, tmp_path):
    """A new user's trial (session 38): inspect said nothing of the index ranges a Program checks before every call
    (an embedding's ids against [0, 99]), nor that an output is an input handed back as it is. Shown from the
    signature (here written into the demo's package; its text escaped as every package string is)."""
    import json

    lowered, _, _ = demo

    def edit(signature):
        x = signature["inputs"][0]
        seq = x["shape"][1]["expr"]  # the symbol torch named the demo's seq dim (s27 in torch 2.13)
        x["index_ranges"] = [{"min": 0, "max": {"expr": f"{seq} - 1"}, "reason": "aten.embedding at model.py:3\x1b[2J"},
                             {"min": -4, "max": None, "reason": "aten.index", "part": [["select", 0, 1]]}]
        signature["outputs"][0]["returns_input"] = 0

    edited = with_edited_signature(lowered.package_path, tmp_path / "edited.pt2", edit)
    result = runner.invoke(main, ["inspect", str(edited)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "index values checked before every call: x in [0, seq - 1] (aten.embedding at model.py:3\\x1b[2J)" in lines
    assert "index values checked before every call: x.select(0, 1) in [-4, unchecked] (aten.index)" in lines
    assert any(line.startswith("output out is input x: a call returns the caller's own tensor") for line in lines), \
        result.output


def test_every_list_inspect_cuts_ends_with_what_it_left_out(demo, runner, tmp_path):
    """Each list inspect cuts to SHOWN_ROWS ends with how many it left out, written by one helper (fix39; the tail was
    written in six places of cli.py): the inputs and outputs tables, the inputs not checked, the index ranges checked
    and the outputs that are inputs, with the text they had."""
    from aotcuda.cli import SHOWN_ROWS

    lowered, _, _ = demo

    def edit(signature):
        x = signature["inputs"][0]
        x["index_ranges"] = [{"min": 0, "max": index} for index in range(SHOWN_ROWS + 2)]
        signature["inputs"] += [{**x, "name": f"u{index}", "index_ranges": [], "index_unchecked": ["aten.index"]}
                                for index in range(SHOWN_ROWS + 1)]
        signature["outputs"] += [{**signature["outputs"][0], "name": f"o{index}"} for index in range(SHOWN_ROWS + 2)]
        for output in signature["outputs"]:
            output["returns_input"] = 0

    edited = with_edited_signature(lowered.package_path, tmp_path / "long.pt2", edit)
    result = runner.invoke(main, ["inspect", str(edited)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    assert "index values checked before every call: ... and 2 more" in lines
    assert "outputs that are inputs: ... and 3 more" in lines
    assert "index values not checked: ... and 1 more inputs" in lines
    rows = [line for line in lines if re.fullmatch(r"│ \.\.\. and \d+ more +│ +│ +│ +│", line)]
    assert [row.split()[3] for row in rows] == ["2", "3"], result.output  # inputs: 1 + 51, outputs: 1 + 52


def test_inspect_json_is_one_object_with_the_package_strings_escaped(demo, runner, tmp_path):
    """A new user's trial (session 38): no machine-readable inspect; scripts parsed the table, whose cells wrap."""
    import json

    lowered, _, _ = demo
    result = runner.invoke(main, ["inspect", "--json", lowered.package_path])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["device"] == "cpu" and report["refused_by_load"] is None and report["runs_in_aotcuda_load"]
    assert [spec["name"] for spec in report["signature"]["inputs"]] == ["x"]
    assert report["signature"]["inputs"][0]["shape"][1]["min"] == 2 and report["signature"]["dim_names"]
    assert report["kernels"]["fallback"] == [] and report["kernels"]["generated"] > 0
    assert any("_scaled_dot_product_flash_attention_for_cpu" in name for name in report["kernels"]["library"])
    # a dim's reason for its range (free text; a name holding them is refused at read) with a terminal escape and a
    # bidi override: written as JSON's \u001b, \u202e
    hostile = with_edited_signature(lowered.package_path, tmp_path / "hostile.pt2", lambda signature:
                                    signature["inputs"][0]["shape"][1].update(narrowed="n\x1b[2J\u202e"))
    result = runner.invoke(main, ["inspect", "--json", str(hostile)])
    assert result.exit_code == 0 and "\x1b" not in result.output and "\u202e" not in result.output, result.output
    assert json.loads(result.output)["signature"]["inputs"][0]["shape"][1]["narrowed"] == "n\x1b[2J\u202e"


def test_inspect_json_keeps_one_schema_whatever_the_package_holds(demo, runner, tmp_path):
    """A new user's trial (nu39, 2026-12-07): `"signed"` held the table's sentence ("signed with a key: no (load with
    a signing key refuses it)"), `constant_inputs` (listed in docs/usage.md) was left out where the package had
    none, and `kernels.record_differs_for` was in no doc: a script had to test for keys and parse a sentence. Every
    key docs/usage.md lists is there, of the type it says, signed or not, with a key that takes it or refuses it."""
    import json

    from aotcuda.package_tags import sign_package

    lowered, _, _ = demo
    usage = (pathlib.Path(__file__).parents[1] / "docs" / "usage.md").read_text()
    table = usage[usage.index("| key | type | what it holds |"):].split("\n\n")[0]  # usage.md's table of the keys
    documented = [name for row in table.splitlines()[2:] for name in re.findall(r"`([\w.]+)`", row.split(" | ")[0])]
    schema = {"package": str, "device": str, "signed": bool, "key_id": (str, type(None)),
              "load_with_key": (bool, type(None)), "signing": str, "signature": dict,
              "refused_by_load": (str, type(None)), "kernels": dict, "runs_in_aotcuda_load": bool}
    signature_schema = {"inputs": list, "outputs": list, "dim_names": dict, "constant_inputs": list,
                        "state_written": list, "data_dependent_sizes": list}
    kernels_schema = {"generated": int, "library": list, "fallback": list, "record_differs_for": list}

    assert sorted(documented) == sorted([*schema, *(f"signature.{key}" for key in signature_schema),
                                         *(f"kernels.{key}" for key in kernels_schema)]), documented

    def report_of(*args):
        result = runner.invoke(main, ["inspect", "--json", *args])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        for keys, got in ((schema, report), (signature_schema, report["signature"]), (kernels_schema, report["kernels"])):
            assert list(got) == list(keys), got.keys()
            for key, kind in keys.items():
                assert isinstance(got[key], kind), (key, got[key])
        return report

    plain = report_of(lowered.package_path)
    assert plain["signed"] is False and plain["key_id"] is None and plain["load_with_key"] is None
    assert plain["signing"] == "signed with a key: no (load with a signing key refuses it)"
    assert plain["signature"]["constant_inputs"] == [] and plain["kernels"]["record_differs_for"] == []
    key = tmp_path / "aotcuda.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(32))
    other.chmod(0o600)
    assert report_of(lowered.package_path, "--signing-key-file", str(key))["load_with_key"] is False
    signed = tmp_path / "signed.pt2"
    signed.write_bytes(pathlib.Path(lowered.package_path).read_bytes())
    key_id = sign_package(signed, str(key))
    report = report_of(str(signed))
    assert (report["signed"], report["key_id"], report["load_with_key"]) == (True, key_id, None)
    report = report_of(str(signed), "--signing-key-file", str(key))
    assert (report["signed"], report["key_id"], report["load_with_key"]) == (True, key_id, True)
    report = report_of(str(signed), "--signing-key-file", str(other))
    assert (report["signed"], report["key_id"], report["load_with_key"]) == (True, key_id, False)
    assert "refuses it" in report["signing"]


def test_run_saves_outputs_that_match_eager(demo, runner, tmp_path):
    lowered, model, x = demo
    fresh = torch.randn(2, 9, x.shape[-1])
    torch.save({"args": (fresh,), "kwargs": {}}, tmp_path / "inputs.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt"),
                                  "--save-outputs", str(tmp_path / "outputs.pt")])
    assert result.exit_code == 0, result.output
    assert "(2, 9, 256)" in result.output and "float32" in result.output
    assert f"wrote {tmp_path / 'outputs.pt'}" in result.output.splitlines()  # a new user looked for it
    with torch.no_grad():
        expected = model(fresh)
    assert relative_error(torch.load(tmp_path / "outputs.pt"), expected) < 1e-5


def test_run_with_bad_inputs_is_one_clean_line(demo, runner, tmp_path):
    lowered, _, _ = demo
    torch.save(torch.randn(2, 9, 7), tmp_path / "bad.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "bad.pt")])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    # An argument the program does not take: the error says how to change the file (a new user read
    # "call it as the exported module was called" as advice for Python callers only).
    torch.save({"args": (torch.randn(2, 5, 64),), "kwargs": {"extra": torch.ones(1)}}, tmp_path / "extra.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "extra.pt")])
    assert result.exit_code == 1 and "['extra']" in result.output
    assert f"The inputs come from {tmp_path / 'extra.pt'}" in result.output and "aotcuda inspect" in result.output


def test_a_bad_switch_is_shown_without_a_class_name(demo, runner, tmp_path, monkeypatch):
    """A new user's `AOTCUDA_CHECK_INDEX_RANGES=maybe aotcuda run ...` printed `error: ValueError: ...`: a Python
    class name where every other error of the CLI speaks plainly (switches raise SwitchError, an AotcudaError)."""
    lowered, _, x = demo
    torch.save((torch.randn(1, 9, x.shape[-1]),), tmp_path / "inputs.pt")
    monkeypatch.setenv("AOTCUDA_CHECK_INDEX_RANGES", "maybe")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt")])
    assert result.exit_code == 1
    assert result.output.startswith("error: AOTCUDA_CHECK_INDEX_RANGES='maybe' is not a flag"), result.output
    assert "ValueError" not in result.output


def test_run_takes_inputs_by_name_and_refuses_a_non_torch_file_cleanly(demo, runner, tmp_path):
    lowered, model, x = demo
    fresh = torch.randn(2, 5, x.shape[-1])
    name = next(iter(__import__("inspect").signature(model.forward).parameters))
    torch.save({name: fresh}, tmp_path / "named.pt")  # {name: tensor}, as a user writes it
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "named.pt"),
                                  "--save-outputs", str(tmp_path / "out.pt")])
    assert result.exit_code == 0, result.output
    with torch.no_grad():
        assert relative_error(torch.load(tmp_path / "out.pt"), model(fresh)) < 1e-5
    (tmp_path / "not_torch.py").write_text("print('hello')\n")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "not_torch.py")])
    assert result.exit_code == 2 and "is not a zip archive, which torch.save writes" in result.output, result.output
    assert "Traceback" not in result.output and "weights_only=False" not in result.output
    assert "set to `False`" not in result.output  # torch's advice to run pickled code: not the CLI's fix
    import pickle
    import warnings

    with open(tmp_path / "raw.pkl", "wb") as handle:  # a pickle, not torch.save's zip: torch warns, then refuses
        pickle.dump({"x": 1}, handle, protocol=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "raw.pkl")])
    assert result.exit_code == 2 and "is not a zip archive, which torch.save writes" in result.output
    assert not [w for w in caught if "pickle protocol" in str(w.message)]  # torch's warning is not shown


def test_saved_library_outputs_load_with_torch_defaults():
    from collections import OrderedDict, namedtuple

    from aotcuda.cli import _plain

    class ModelOutputLike(OrderedDict):
        pass

    Pair = namedtuple("Pair", "a b")
    plain = _plain(ModelOutputLike(logits=torch.ones(2), extra=Pair(torch.zeros(1), [torch.ones(1)])))
    assert type(plain) is dict and type(plain["extra"]) is tuple and type(plain["extra"][1]) is list


def test_run_refuses_cuda_graphs_on_cpu(demo, runner, tmp_path):
    lowered, _, x = demo
    torch.save((x,), tmp_path / "inputs.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt"), "--cuda-graphs"])
    assert result.exit_code == 1 and "cuda_graphs" in result.output and "Traceback" not in result.output
    assert "hint: on the command line, leave out --cuda-graphs" in result.output.splitlines()


def test_lower_then_run_a_factory_with_a_dynamic_dim(runner, tmp_path):
    package, inputs = tmp_path / "scale.pt2", tmp_path / "inputs.pt"
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(package), "--device", "cpu",
                                  "--dynamic", "x:0:1:64:batch", "--dynamic", "angle:0:1:64:batch",
                                  "--save-inputs", str(inputs)])
    assert result.exit_code == 0, result.output
    assert "0 fallback kernels" in result.output and f"wrote the example inputs to {inputs}" in result.output
    model, _ = scale_factory()
    fresh = (torch.randn(11, 8), torch.randn(11, 4))
    torch.save({"args": fresh, "kwargs": {}}, inputs)
    result = runner.invoke(main, ["run", str(package), "--inputs", str(inputs), "--save-outputs", str(tmp_path / "o.pt")])
    assert result.exit_code == 0, result.output
    for actual, expected in zip(torch.load(tmp_path / "o.pt"), model(*fresh)):
        assert relative_error(actual, expected) < 1e-5


@pytest.mark.parametrize("spec, expected", [
    ("no_colon", "MODULE:FACTORY, e.g. aotcuda.models.attention:attention_block"),
    # a new user's `aotcuda lower frontend.py` (session 24): the module's functions, as FACTORY
    ("aotcuda.models.attention", "MODULE:FACTORY, e.g. aotcuda.models.attention:attention_block"),
    ("aotcuda.models.attention:nope", "has no 'nope'; its factories (functions that take no arguments): "
                                      "aotcuda.models.attention:attention_block"),
    ("aotcuda.models.attention:torch", "'torch' is a module, not a callable that returns a model; its factories"),
    ("missing_file.py:f", "no such file"),
])
def test_lower_bad_factory_spec(runner, tmp_path, spec, expected):
    result = runner.invoke(main, ["lower", spec, "-o", str(tmp_path / "m.pt2"), "--device", "cpu"])
    assert result.exit_code != 0 and expected in result.output and "Traceback" not in result.output


def test_a_file_without_factory_is_answered_with_its_functions(runner, tmp_path):
    """A new user's ``aotcuda lower frontend.py`` (session 24) got the generic example; the file's functions are
    the FACTORY it can take (its classes are models, not factories)."""
    model_file = tmp_path / "frontend.py"
    model_file.write_text("import torch\nclass Net(torch.nn.Module):\n    pass\ndef make():\n    pass\n"
                          "def make_small():\n    pass\n")
    result = runner.invoke(main, ["lower", str(model_file), "-o", str(tmp_path / "m.pt2"), "--device", "cpu"])
    assert result.exit_code == 2, result.output
    assert f"e.g. {model_file}:make or {model_file}:make_small" in result.output.replace("\n", ""), result.output


FACTORIES_AND_HELPERS = """import functools
import torch
@functools.cache
def cached():
    pass
def helper(x, y):
    pass
def with_defaults(n=2, *rest, **options):
    pass
class Net(torch.nn.Module):
    pass
""" + "".join(f"def make{i}():\n    pass\n" for i in range(5))


@pytest.mark.parametrize("spec, expected", [
    # every message offers the same factories, counted the same way: not helper (it needs arguments), not Net
    ("helpers_mod", "expected MODULE:FACTORY, e.g. helpers_mod:make0 or helpers_mod:make1 or helpers_mod:make2 or "
                    "helpers_mod:make3 or helpers_mod:make4 (6 factories in all)"),
    ("helpers_mod:nosuch", "has no 'nosuch'; its factories (functions that take no arguments): helpers_mod:make0 or "
                           "helpers_mod:make1 or helpers_mod:make2 or helpers_mod:make3 or helpers_mod:make4 "
                           "(6 factories in all)"),
    # a dot typed for the colon
    ("helpers_mod.with_defaults", "expected MODULE:FACTORY, did you mean helpers_mod:with_defaults?"),
    ("helpers_mod.Net", "expected MODULE:FACTORY with a colon, not a dot, e.g. helpers_mod:make0 or"),
    ("helpers_mod.cached", "expected MODULE:FACTORY, did you mean helpers_mod:cached?"),  # review40c: decorated
])
def test_factory_suggestions_are_functions_callable_with_no_arguments(runner, tmp_path, monkeypatch, spec, expected):
    """A new user (nu40) was offered apply_rotary(xq, xk, freqs_cis) as FACTORY, told "6 callables in all" by one
    message and shown 10 names, classes included, by another, and `mymodels.rope_attention` got the generic
    example."""
    (tmp_path / "helpers_mod.py").write_text(FACTORIES_AND_HELPERS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the import puts tmp_path on it
    monkeypatch.setattr(sys, "modules", dict(sys.modules))  # and helpers_mod in it
    result = runner.invoke(main, ["lower", spec, "-o", str(tmp_path / "m.pt2"), "--device", "cpu"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and expected in said, result.output
    assert "helper " not in said and "helpers_mod:helper" not in said and "Net or" not in said, result.output


def test_a_factory_that_raises_is_named_with_where_it_raised(runner, tmp_path):
    (tmp_path / "raising.py").write_text("def make():\n    raise ValueError('boom in factory')\n")
    result = runner.invoke(main, ["lower", f"{tmp_path / 'raising.py'}:make", "-o", str(tmp_path / "m.pt2"),
                                  "--device", "cpu"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert re.search(r"the factory .*raising.py:make raised ValueError: boom in factory \(at .*raising.py:2, in make\)",
                     result.output), result.output


def training_dropout_factory():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)), (torch.randn(2, 8),)


def test_lower_shows_aotcuda_warnings_as_lines_and_refuses_dropout_before_compiling(runner, tmp_path, monkeypatch):
    """A new user: `aotcuda lower` printed aotcuda's warnings as Python shows them (the path and source line of
    aotcuda's own code), and a model left in training mode compiled ~10 s before its dropout's seed kernel was
    refused. Now the warning is a `warning:` line and the refusal comes before the compile."""
    import aotcuda.lowering.pipeline

    def no_compile(*args):
        raise AssertionError("compiled a program that was known to be refused")

    monkeypatch.setattr(aotcuda.lowering.pipeline, "_compile", no_compile)
    result = runner.invoke(main, ["lower", f"{__name__}:training_dropout_factory", "-o", str(tmp_path / "d.pt2"),
                                  "--device", "cpu"])
    assert result.exit_code == 1, result.output
    assert "warning: the model is in training mode (model.training is True) and holds Dropout" in result.output
    assert "UserWarning" not in result.output and "pipeline.py" not in result.output
    assert "aoti_torch_cpu_randint_low_out" in result.output and "model.eval()" in result.output
    assert "<- the model's module 1 (torch.nn.Dropout)" in result.output  # not torch's dropout.py line


def test_ctrl_c_during_lower_prints_what_was_left_and_exits_130(runner, tmp_path, monkeypatch):
    """(new user) A Ctrl-C during `aotcuda lower` printed only click's "Aborted!": the note lower() puts on the
    KeyboardInterrupt (that no package was written, and that the earlier one is left as it was) was lost."""
    import aotcuda.lowering.pipeline

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(aotcuda.lowering.pipeline, "_compile", interrupted)
    package = tmp_path / "s.pt2"
    earlier = open(_small_package(package), "rb").read()
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(package), "--device", "cpu"])
    assert result.exit_code == 130, result.output
    assert f"No package was written: {package} is an earlier build, left as it was.\nAborted!" in result.output
    assert package.read_bytes() == earlier and os.listdir(tmp_path) == ["s.pt2"]


def interrupted_factory():
    raise KeyboardInterrupt  # a Ctrl-C while the model is built


def test_ctrl_c_with_stderr_closed_still_exits_130(tmp_path, monkeypatch):
    """A Ctrl-C of `aotcuda lower ... 2>&-` (Python's sys.stderr is None where fd 2 was closed at start) exited 1, not
    the 130 a script reads as an interrupt: click's "Aborted!" was written with sys.stderr.write, whose
    AttributeError ended the command instead (measured: a SIGINT 3 s into `aotcuda lower` started with fd 2 closed)."""
    monkeypatch.setattr(sys, "stderr", None)
    with pytest.raises(SystemExit) as ended:
        main.main(["lower", f"{__name__}:interrupted_factory", "-o", str(tmp_path / "s.pt2"), "--device", "cpu"])
    assert ended.value.code == 130
    assert os.listdir(tmp_path) == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped interrupt, on purpose
def test_a_ctrl_c_python_drops_in_a_weakref_callback_still_stops_lower(runner, tmp_path, monkeypatch):
    """A new user's trial (2026-12-06): one Ctrl-C in four during `aotcuda lower` was raised inside one of torch's
    weakref callbacks, where Python drops it ("Exception ignored in: ... KeyboardInterrupt"), and the command wrote
    the package and exited 0. The command now sees the SIGINT itself and stops at the step's end: 130, no package."""
    import signal
    import weakref

    import aotcuda.lowering.pipeline

    def compile_interrupted_in_a_callback(*args):
        class Owner:
            pass

        owner = Owner()
        ref = weakref.ref(owner, lambda _: signal.raise_signal(signal.SIGINT))  # noqa: F841 - kept until del
        del owner  # the callback runs here, and the KeyboardInterrupt raised in it is dropped

    monkeypatch.setattr(aotcuda.lowering.pipeline, "_compile", compile_interrupted_in_a_callback)
    package = tmp_path / "s.pt2"
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(package), "--device", "cpu"])
    assert result.exit_code == 130, result.output
    assert f"No package was written to {package}.\nAborted!" in result.output
    assert not package.exists() and os.listdir(tmp_path) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler is back
    result = runner.invoke(main, ["demo", "--device", "cpu", "--seq", "4", "--calls", "1", "-o", str(package)])
    assert result.exit_code == 130 and "No package was written" in result.output, result.output  # the demo too
    assert not package.exists() and os.listdir(tmp_path) == []


class TokenPositions(torch.nn.Module):
    """Token positions index a table of 128 rows: a --dynamic range past 128 is a constraint violation."""

    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.randn(128, 4))

    def forward(self, tokens):
        return tokens.unsqueeze(-1) * self.pos[: tokens.shape[1]]


def token_positions_factory():
    return TokenPositions(), (torch.randn(1, 16),)


class RotatesQueryAndKey(torch.nn.Module):
    """RoPE of q and k by one table sliced to q's length: k's length must equal q's."""

    def __init__(self):
        super().__init__()
        self.register_buffer("angles", torch.randn(128, 4))

    def forward(self, q, k):
        table = self.angles[: q.shape[1]]
        return q * table.cos(), k * table.sin()


def rotates_query_and_key_factory():
    return RotatesQueryAndKey(), (torch.randn(2, 16, 4), torch.randn(2, 16, 4))


def test_a_dim_met_by_another_inputs_static_dim_gets_the_shared_symbol_fix(runner, tmp_path):
    """A new user made q's length dynamic and not k's (`--dynamic q:1:1:128`): the note said the model's line
    `k * table.sin()` "needs a Python value of the size (int(), a comparison ...)", which it does not, and the only
    hint was to leave out --dynamic q:1:1:128 ("the model takes one size there"); the fix was to give k the same
    SYMBOL. The note now says a tensor op met the dim with a size that is not dynamic, and the hint gives both."""
    for option, named in (("q:1:1:128", "q:1:1:128:q_1"), ("q:1:1:128:seq", "q:1:1:128:seq")):
        result = runner.invoke(main, ["lower", f"{__name__}:rotates_query_and_key_factory", "-o",
                                      str(tmp_path / "p.pt2"), "--device", "cpu", "--dynamic", option])
        assert result.exit_code == 1, result.output
        assert "There a tensor op needs" in result.output and "Python value" not in result.output, result.output
        symbol = named.split(":")[-1]
        assert (f"hint: on the command line, where another input meets it there (k beside q), give that input's dim "
                f"the same SYMBOL: --dynamic {named} --dynamic OTHER:DIM:1:128:{symbol}; if the model takes one size "
                f"there, leave out --dynamic {option}") in result.output, result.output
    result = runner.invoke(main, ["lower", f"{__name__}:rotates_query_and_key_factory", "-o", str(tmp_path / "p.pt2"),
                                  "--device", "cpu", "--dynamic", "q:1:2:128:seq", "--dynamic", "k:1:2:128:seq"])
    assert result.exit_code == 0, result.output  # the fix the hint gives lowers


class NestedArguments(torch.nn.Module):
    def forward(self, xs, opts):
        a, b = xs
        return {"sum": a + b * opts["scale"], "mask": (a > 0) & opts["keep"]}


def nested_arguments_factory():
    return NestedArguments(), ([torch.randn(4, 3), torch.randn(4, 3)],
                               {"scale": torch.tensor(2.0), "keep": torch.ones(4, 3, dtype=torch.bool)})


def test_run_takes_the_tensors_by_the_names_inspect_lists(runner, tmp_path):
    """A new user's inputs file held the tensors by the names `aotcuda inspect` lists (xs_0, xs_1, opts_scale,
    opts_keep; what `aotcuda serve` takes) and got `keyword arguments [...] do not match the exported module's: the
    program takes xs, opts`, with a note pointing back at inspect for the names. Such a dict now runs as those
    inputs; forward's arguments run as before, and a wrong tensor is refused under its inspect name."""
    package = tmp_path / "nested.pt2"
    result = runner.invoke(main, ["lower", f"{__name__}:nested_arguments_factory", "-o", str(package),
                                  "--device", "cpu"])
    assert result.exit_code == 0, result.output
    a, b, keep = torch.randn(4, 3), torch.randn(4, 3), torch.rand(4, 3) > 0.5
    eager = NestedArguments()([a, b], {"scale": torch.tensor(3.0), "keep": keep})
    flat = {"xs_0": a, "xs_1": b, "opts_scale": torch.tensor(3.0), "opts_keep": keep}
    torch.save(flat, tmp_path / "flat.pt")
    torch.save({"xs": [a, b], "opts": {"scale": torch.tensor(3.0), "keep": keep}}, tmp_path / "nested.pt")
    for inputs in ("flat.pt", "nested.pt"):
        result = runner.invoke(main, ["run", str(package), "--inputs", str(tmp_path / inputs), "--save-outputs",
                                      str(tmp_path / f"out_{inputs}")], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        saved = torch.load(tmp_path / f"out_{inputs}")
        torch.testing.assert_close(saved["sum"], eager["sum"])
        assert torch.equal(saved["mask"], eager["mask"])
    torch.save({**flat, "opts_keep": keep.int()}, tmp_path / "wrong.pt")
    result = runner.invoke(main, ["run", str(package), "--inputs", str(tmp_path / "wrong.pt")], env={"COLUMNS": "300"})
    assert result.exit_code == 1 and "input 'opts_keep' (#3) has dtype torch.int32" in result.output, result.output


class FixedScale(torch.nn.Module):
    def forward(self, x, scale: float = 1.0):
        return x * scale


class FixedNested(torch.nn.Module):
    def forward(self, x, opts, scale: float = 1.0):
        return x * opts["w"] * scale * opts["k"]


@pytest.fixture(scope="module")
def fixed_packages(tmp_path_factory):
    """FixedScale and FixedNested lowered with scale=2.0 (forward's default: 1.0), FixedNested with opts["k"]=2.0:
    their inputs by `aotcuda inspect`'s names are x, and x and opts_w."""
    folder = tmp_path_factory.mktemp("fixed")
    flat = aotcuda.lowering.lower(FixedScale(), (torch.randn(3, 4),), {"scale": 2.0}, device="cpu",
                                  package_path=folder / "flat.pt2")
    nested = aotcuda.lowering.lower(FixedNested(), (torch.randn(3, 4), {"w": torch.randn(3, 4), "k": 2.0}),
                                    {"scale": 2.0}, device="cpu", package_path=folder / "nested.pt2")
    return flat.package_path, nested.package_path


def test_run_refuses_a_file_by_forwards_names_that_leaves_out_a_fixed_argument(runner, tmp_path, fixed_packages):
    """The lower() API breaker (2026-12-06): an inputs file {"x": t} for forward(x, scale=1.0) lowered with scale=2.0
    was refused as a call (eager computes x * 1.0, the package x * 2.0), then run as the tensors by inspect's names,
    which were the same ("x"): the check of the fixed argument was skipped, and the package's 2x came out as the
    answer. A dict of forward's own names is a call by them now: its refusal stands."""
    package, x = fixed_packages[0], torch.randn(3, 4)
    torch.save({"x": x}, tmp_path / "left_out.pt")
    result = runner.invoke(main, ["run", package, "--inputs", str(tmp_path / "left_out.pt"), "--save-outputs",
                                  str(tmp_path / "out.pt")])
    assert result.exit_code == 1 and not (tmp_path / "out.pt").exists(), result.output
    assert "argument left out where the program was exported with another value than the module's default: 'scale' " \
           "(the program computes with 2.0; eager with the module's default 1.0); pass scale=2.0" in \
           " ".join(result.output.split()), result.output
    torch.save({"x": x, "scale": 2.0}, tmp_path / "given.pt")
    result = runner.invoke(main, ["run", package, "--inputs", str(tmp_path / "given.pt"), "--save-outputs",
                                  str(tmp_path / "out.pt")])
    assert result.exit_code == 0, result.output
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), x * 2.0)


def test_run_checks_fixed_arguments_given_beside_inspects_names(runner, tmp_path, fixed_packages):
    """The lower() API breaker (2026-12-06): a file of the tensors by inspect's names (x, opts_w) that gave a fixed
    argument too was refused, whatever its value, as "keyword arguments ['opts_w'] do not match the exported
    module's": the fixed argument went unchecked, and the error blamed the tensors' names. Now the arguments fixed at
    lowering may stand there by the names inspect shows ("scale", "#1['k']"), each checked as a call's is."""
    package, x, w = fixed_packages[1], torch.randn(3, 4), torch.randn(3, 4)
    for fixed, said in (({"scale": 3.0}, "argument 'scale' is 3.0, but the program was exported with 2.0 there and "
                                         "computes with that value whatever is passed; pass scale=2.0 or leave it out"),
                        ({"scale": 2}, "argument 'scale' is 2 (type int, not float), but the program was exported "
                                       "with 2.0"),
                        ({"scale": 2.0, "#1['k']": 5.0}, "argument \"#1['k']\" is 5.0, but the program was exported "
                                                         "with 2.0")):
        torch.save({"x": x, "opts_w": w, **fixed}, tmp_path / "wrong.pt")
        result = runner.invoke(main, ["run", package, "--inputs", str(tmp_path / "wrong.pt")])
        assert result.exit_code == 1 and said in " ".join(result.output.split()), result.output
        assert f"The inputs come from {tmp_path / 'wrong.pt'}" in " ".join(result.output.split()), result.output
    for fixed in ({}, {"scale": 2.0}, {"scale": 2.0, "#1['k']": 2.0}):  # the values lowered with, or left out
        torch.save({"x": x, "opts_w": w, **fixed}, tmp_path / "right.pt")
        result = runner.invoke(main, ["run", package, "--inputs", str(tmp_path / "right.pt"), "--save-outputs",
                                      str(tmp_path / "out.pt")])
        assert result.exit_code == 0, result.output
        torch.testing.assert_close(torch.load(tmp_path / "out.pt"), FixedNested()(x, {"w": w, "k": 2.0}, 2.0))


def test_run_names_what_a_file_by_inspects_names_lacks(runner, tmp_path, fixed_packages):
    """A new user's file by the names `aotcuda inspect` lists left one out ({"opts_w": w}, no "x"), or mixed in one of
    forward's ("opts"), and was told `keyword arguments ['opts_w'] do not match the exported module's: the program takes
    x, opts`: the names they had used were blamed, and the one missing went unnamed."""
    package, x, w = fixed_packages[1], torch.randn(3, 4), torch.randn(3, 4)
    for given, said in (({"opts_w": w}, "but the dict lacks 'x'; give each of those names a tensor"),
                        ({"x": x, "opts_w": w, "opts": {"w": w}}, "but the dict has 'opts', which is not one of them")):
        torch.save(given, tmp_path / "partial.pt")
        result = runner.invoke(main, ["run", package, "--inputs", str(tmp_path / "partial.pt")])
        assert result.exit_code == 1, result.output
        assert "the inputs are given by the names `aotcuda inspect` lists ('x', 'opts_w'), " + said in \
               " ".join(result.output.split()), result.output


def test_a_dict_input_is_matched_by_its_keys_in_any_order(runner, tmp_path, fixed_packages):
    """A new user (2026-12-06, second): `p({"y": y, "x": x})` for a program lowered with `{"x": ..., "y": ...}` got
    `InputError: input 'feats' (#0) is a dict with keys ['y', 'x'], expected a dict with keys ['x', 'y']`, though
    eager and torch's ep.module() take it. Program calls and `aotcuda run` inputs files now match a dict by its keys;
    a key missing or not taken is named."""
    from aotcuda.errors import InputError

    package = fixed_packages[1]
    with aotcuda.load(package) as program:
        for _ in range(2):  # fresh random inputs, against eager
            x, w = torch.randn(3, 4), torch.randn(3, 4)
            expected = FixedNested()(x, {"w": w, "k": 2.0}, 2.0)
            torch.testing.assert_close(program(x, {"k": 2.0, "w": w}, scale=2.0), expected)
            torch.testing.assert_close(program(x, opts={"k": 2.0, "w": w}, scale=2.0), expected)
        with pytest.raises(InputError, match=r"input 'opts' \(#1\) is a dict with keys \['k'\], expected a dict with "
                                             r"keys \['w', 'k'\] \(missing key\(s\) \['w'\]\)"):
            program(x, {"k": 2.0}, scale=2.0)
        with pytest.raises(InputError, match=r"\(key\(s\) \['z'\] not taken by the program\)"):
            program(x, {"k": 2.0, "w": w, "z": w}, scale=2.0)
    torch.save({"args": (x, {"k": 2.0, "w": w}), "kwargs": {"scale": 2.0}}, tmp_path / "swapped.pt")
    result = runner.invoke(main, ["run", package, "--inputs", str(tmp_path / "swapped.pt"), "--save-outputs",
                                  str(tmp_path / "out.pt")])
    assert result.exit_code == 0, result.output
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), FixedNested()(x, {"w": w, "k": 2.0}, 2.0))


def test_a_dim_range_the_model_does_not_take_gets_the_command_line_fix(runner, tmp_path):
    """A new user: the error gave torch's Python fix (Dim('tokens_1', max=128)) and no --dynamic form of it."""
    for option, fixed in (("tokens:1:2:512", "tokens:1:2:128"), ("tokens:1:2:512:seq", "tokens:1:2:128:seq")):
        result = runner.invoke(main, ["lower", f"{__name__}:token_positions_factory", "-o", str(tmp_path / "p.pt2"),
                                      "--device", "cpu", "--dynamic", option])
        assert result.exit_code == 1, result.output
        assert f"hint: on the command line, --dynamic {fixed} (torch's suggested range)" in result.output, result.output
    from aotcuda.cli import _dynamic_fix_hints

    message = "Suggested fixes:\n    frames = Dim('frames', min=3, max=100)\n    x_0 = 4\n"
    assert _dynamic_fix_hints(message, ("audio:1:800:480000:frames*160", "x:0:1:8", "y:-1:1:8")) == [
        "on the command line, --dynamic audio:1:480:16000:frames*160 (torch's suggested range)",
        "on the command line, leave out --dynamic x:0:1:8: the model takes one size there"]
    # (review 11) the message is torch's, quoting the model's source: blank lines are read in linear time
    # (a \s that took newlines scanned the rest from each: 16,000 newlines took 4 s, 160,000 minutes)
    # CPU time, least of three, the collector off (least_time.py): ~0.09 s here
    text = "\n" * 160_000 + "\r\n \t" * 40_000 + message
    took, hints = least_cpu_seconds(lambda: _dynamic_fix_hints(text, ("x:0:1:8",)))
    assert hints == ["on the command line, leave out --dynamic x:0:1:8: the model takes one size there"]
    assert took < 2, took


def test_a_range_hint_names_every_option_that_shares_the_dim(runner, tmp_path):
    """A new user (2026-12-07): `--dynamic xq:1:2:1024:seq --dynamic xk:1:2:1024:seq` over a 512-row RoPE table got
    `hint: on the command line, --dynamic xk:1:2:512:seq`, and changing only that option was refused (`a Dim name has
    one range: give the same MIN:MAX in both options`). The hint names both options, and they export."""
    options = ("q:1:2:512:seq", "k:1:2:512:seq")
    result = runner.invoke(main, ["lower", f"{__name__}:rotates_query_and_key_factory", "-o", str(tmp_path / "p.pt2"),
                                  "--device", "cpu", "--dynamic", options[0], "--dynamic", options[1]],
                           env={"COLUMNS": "300"})
    assert result.exit_code == 1, result.output
    fixed = "--dynamic q:1:2:128:seq --dynamic k:1:2:128:seq"
    assert f"hint: on the command line, {fixed} (torch's suggested range)" in result.output, result.output
    model, args = rotates_query_and_key_factory()
    dynamic = dynamic_shapes_from(tuple(fixed.replace("--dynamic ", "").split()), model, args, {})
    aotcuda.lowering.pipeline.before_compile(model, args, {}, dynamic)  # exports: no constraint violated
    from aotcuda.cli import _dynamic_fix_hints

    # a multiple keeps its own factor; a static size, and torch's multiple, name every option of the symbol too
    assert _dynamic_fix_hints("Suggested fixes:\n    seq = Dim('seq', max=64)\n", ("x:1:2:512:seq", "y:2:4:1024:seq*2")) \
        == ["on the command line, --dynamic x:1:2:64:seq --dynamic y:2:4:128:seq*2 (torch's suggested range)"]
    assert _dynamic_fix_hints("Suggested fixes:\n    seq = 16\n", ("x:1:2:512:seq", "y:1:2:512:seq")) == [
        "on the command line, leave out --dynamic x:1:2:512:seq --dynamic y:1:2:512:seq: the model takes one size there"]
    assert _dynamic_fix_hints("Suggested fixes:\n    _h = Dim('_h', min=4, max=32)\n    h = 2*_h\n",
                              ("x:2:8:64:h", "y:2:8:64:h")) == [
        "on the command line, --dynamic x:2:8:64:h*2 --dynamic y:2:8:64:h*2 (a multiple of 2: torch's suggested fix)"]


def test_dynamic_option_parsing():
    model, args = scale_factory()
    shapes = dynamic_shapes_from(("x:0:1:64:batch", "angle:0:1:64:batch", "x:1:2:8"), model, args, {})
    assert shapes["x"][0] is shapes["angle"][0]
    assert shapes["x"][0].min == 1 and shapes["x"][0].max == 64
    assert shapes["x"][1].__name__ == "x_1"
    assert dynamic_shapes_from((), model, args, {}) is None
    with pytest.raises(Exception, match="no argument 'y'"):
        dynamic_shapes_from(("y:0:1:4",), model, args, {})
    with pytest.raises(Exception, match="NAME:DIM:MIN:MAX"):
        dynamic_shapes_from(("x:0:1",), model, args, {})


class NestedFeatures(torch.nn.Module):
    def forward(self, feats, xs):
        return torch.tanh(feats["x"][:, :4] + feats["y"]) + xs[0] * xs[1]


def test_dynamic_names_a_tensor_inside_a_nested_input():
    """A new user (2026-12-06, second): `--dynamic feats:0:1:64:batch` on a dict input said `input feats is a dict,
    not a tensor`, and inspect's name for the tensor (`feats_x`) `forward has no argument 'feats_x'`. Both forms name
    it now, inspect's and a path, and the shapes export (ExportedProgram, no compile) with the dims shared."""
    model = NestedFeatures()
    args = ({"x": torch.randn(3, 8), "y": torch.randn(3, 4)}, [torch.randn(3, 4), torch.randn(3, 4)])
    for options in (("feats_x:0:1:64:batch", "feats_y:0:1:64:batch", "xs_0:0:1:64:batch", "xs_1:0:1:64:batch"),
                    ("feats.x:0:1:64:batch", "feats['y']:0:1:64:batch", "xs[0]:0:1:64:batch", "xs.1:0:1:64:batch")):
        shapes = dynamic_shapes_from(options, model, args, {})
        assert shapes["feats"]["x"][0] is shapes["feats"]["y"][0] is shapes["xs"][1][0]
        ep = torch.export.export(model, args, dynamic_shapes=shapes)
        feats = {"x": torch.randn(9, 8), "y": torch.randn(9, 4)}
        xs = [torch.randn(9, 4), torch.randn(9, 4)]
        torch.testing.assert_close(ep.module()(feats, xs), model(feats, xs))
    assert dynamic_shapes_from(("feats_x:1:2:16",), model, args, {})["feats"]["x"][1].__name__ == "feats_x_1"
    with pytest.raises(click.BadParameter, match=r"input feats is a dict, not a tensor; --dynamic makes a dim of a "
                                                 r"tensor input dynamic; name a tensor inside it, as `aotcuda inspect` "
                                                 r"lists it \(feats_x, feats_y\) .*e.g. --dynamic feats_x:0:1:64:batch"):
        dynamic_shapes_from(("feats:0:1:64:batch",), model, args, {})
    with pytest.raises(click.BadParameter, match=r"no argument 'feats_z'.*\(feats_x, feats_y, xs_0, xs_1\)"):
        dynamic_shapes_from(("feats_z:0:1:64",), model, args, {})
    with pytest.raises(click.BadParameter, match=r"input feats_x has 2 dims"):
        dynamic_shapes_from(("feats.x:5:1:64",), model, args, {})


def test_dynamic_dim_is_checked_against_the_input():
    model, args = scale_factory()
    assert dynamic_shapes_from(("x:-2:1:64",), model, args, {})["x"][0].__name__ == "x_0"  # counts from the end
    with pytest.raises(click.BadParameter, match=r"input x has 2 dims \(shape \(3, 8\)\); DIM must be in \[-2, 2\)"):
        dynamic_shapes_from(("x:9:2:512",), model, args, {})
    with pytest.raises(click.BadParameter, match=r"DIM must be in \[-2, 2\)"):
        dynamic_shapes_from(("x:-3:2:512",), model, args, {})
    with pytest.raises(click.BadParameter, match=r"MIN 9 is above MAX 4"):
        dynamic_shapes_from(("x:0:9:4",), model, args, {})


def test_dynamic_numbers_past_int64_or_in_other_digits_are_usage_errors():
    """Session 29: --dynamic x:0:1:99999999999999999999999 wrote a package whose dim range ends past int64 (it loaded
    as a dim without a max: the breaker's list); a MAX of 5,000 digits raised int()'s raw ValueError (its 4,300-digit
    limit), "x:0:1:²" too (str.isdigit() takes "²", int() does not), and "x:0:1:٣" read as 3."""
    model, args = scale_factory()
    for option in ("x:0:1:99999999999999999999999", "x:0:1:9223372036854775808", "x:0:1:" + "9" * 5000,
                   "x:99999999999999999999:1:8"):
        with pytest.raises(click.BadParameter, match=r"a number past 9223372036854775807 \(int64's largest\)"):
            dynamic_shapes_from((option,), model, args, {})
    for option in ("x:0:1:²", "x:0:1:٣", "x:٠:1:8"):
        with pytest.raises(click.BadParameter, match="expected NAME:DIM:MIN:MAX"):
            dynamic_shapes_from((option,), model, args, {})
    assert dynamic_shapes_from(("x:0:1:9223372036854775807",), model, args, {})["x"][0].max == 2**63 - 1


def one_input_for_two_factory():
    model, (x, _) = scale_factory()
    return model, (x,)


def test_dynamic_dim_out_of_range_is_a_usage_error_not_an_index_error(runner, tmp_path):
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(tmp_path / "s.pt2"), "--device", "cpu",
                                  "--dynamic", "x:9:2:512"])
    assert result.exit_code == 2 and "IndexError" not in result.output
    assert "input x has 2 dims" in result.output and not (tmp_path / "s.pt2").exists()


def test_one_dim_name_given_two_ranges_is_a_usage_error(runner, tmp_path):
    """(new user) --dynamic speaker_id:0:1:16:batch --dynamic audio:0:1:8:batch lowered with batch in [1, 16]:
    the second range was dropped without a word."""
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(tmp_path / "s.pt2"), "--device", "cpu",
                                  "--dynamic", "x:0:1:16:batch", "--dynamic", "angle:0:1:8:batch"])
    assert result.exit_code == 2 and not (tmp_path / "s.pt2").exists()
    message = " ".join(result.output.split())
    assert "'angle:0:1:8:batch' gives Dim batch the range [1, 8], but 'x:0:1:16:batch' gave it [1, 16]" in message
    assert "the same MIN:MAX" in message and "two names" in message
    model, args = scale_factory()  # the same range twice, or a multiple that gives the name the same range, is fine
    shapes = dynamic_shapes_from(("x:0:1:16:batch", "angle:0:1:16:batch"), model, args, {})
    assert shapes["x"][0] is shapes["angle"][0]
    shapes = dynamic_shapes_from(("x:1:801:4000:frames*160", "angle:1:6:25:frames"), model, args, {})
    assert shapes["angle"][1] is shapes["x"][1].root


def test_module_in_the_current_directory_is_found(tmp_path, monkeypatch):
    (tmp_path / "aotcuda_cwd_model.py").write_text("def make():\n    return 'made here'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "aotcuda_cwd_model", raising=False)
    assert load_factory("aotcuda_cwd_model:make")() == "made here"
    assert sys.path[0] == str(tmp_path)


def test_module_not_found_suggests_the_file_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(click.BadParameter, match=r"no module named 'nowhere_model'.*path/to/nowhere_model.py:FACTORY"):
        load_factory("nowhere_model:make")
    # a module that is found but imports a missing one: that error is the user's, said as such, with its line
    (tmp_path / "imports_missing.py").write_text("import not_installed_anywhere\n")
    monkeypatch.delitem(sys.modules, "imports_missing", raising=False)
    with pytest.raises(click.ClickException, match=r"importing module imports_missing raised ModuleNotFoundError: "
                       r"No module named 'not_installed_anywhere' \(at .*imports_missing.py:1, in <module>\)"):
        load_factory("imports_missing:make")


def test_python_dash_m_aotcuda():
    result = subprocess.run([sys.executable, "-m", "aotcuda", "lower", "--help"], capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "Usage: aotcuda lower" in result.stdout and "--dynamic NAME:DIM:MIN:MAX[:SYMBOL[*N]]" in result.stdout


def test_errors_print_lowercase_error_with_stderr_piped(tmp_path):
    """With stderr a pipe (``2>&1 | head -1``), run's and serve's errors and click's usage errors all start
    "error: " as documented, never click's "Error: "; the exit codes stay 1 and 2."""
    (tmp_path / "bad.pt2").write_text("not a package\n")
    torch.save((torch.ones(2),), tmp_path / "one.pt")
    env = {**os.environ, "COLUMNS": "200"}
    for command, code in ((["run", "bad.pt2", "--inputs", "one.pt"], 1), (["serve", "bad.pt2"], 1),
                          (["run", "bad.pt2", "--inputs", "missing.pt"], 2), (["lower", "--no-such-option"], 2)):
        result = subprocess.run([sys.executable, "-m", "aotcuda", *command], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        assert result.returncode == code, (command, result.stdout)
        assert "Error:" not in result.stdout, (command, result.stdout)
        errors = [line for line in result.stdout.splitlines() if "error:" in line]
        assert len(errors) == 1 and errors[0].startswith("error: "), (command, result.stdout)
        if code == 1:
            assert result.stdout.startswith("error: 'bad.pt2' is not an AOTInductor package") or \
                result.stdout.startswith(f"error: '{tmp_path / 'bad.pt2'}' is not an AOTInductor package"), result.stdout
        else:
            assert result.stdout.startswith("Usage: aotcuda"), result.stdout


def test_a_usage_error_exits_2_whether_or_not_its_message_can_be_written(tmp_path):
    """`aotcuda lower --bogus 2>&-` (stderr closed), `2>/dev/full` and a stderr whose reader left exited 1: the
    failed write of click's message raised, and 1 was Python's status for a traceback nobody could read. The exit
    code is the command line's answer, whatever stderr takes: 2 for a usage error, as with a working stderr."""
    command = [sys.executable, "-m", "aotcuda", "lower", "--bogus"]
    closed = subprocess.run(["bash", "-c", 'exec "$0" "$@" 2>&-', *command], cwd=tmp_path, timeout=120)
    with open("/dev/full", "w") as full:
        to_full = subprocess.run(command, cwd=tmp_path, stderr=full, timeout=120)
    reader, writer = os.pipe()
    os.close(reader)
    try:
        to_no_reader = subprocess.run(command, cwd=tmp_path, stderr=writer, timeout=120)
    finally:
        os.close(writer)
    assert (closed.returncode, to_full.returncode, to_no_reader.returncode) == (2, 2, 2)


def test_usage_errors_through_the_runner_print_lowercase_error(runner):
    result = runner.invoke(main, ["inspect", "--no-such-option"])
    assert result.exit_code == 2 and "error: No such option '--no-such-option'." in result.output, result.output
    assert "Error:" not in result.output and "inspect --help' for help." in result.output


def test_lower_checks_the_output_path_before_any_work(runner, tmp_path, monkeypatch):
    """-o under a file, or -o a directory, is refused with exit code 1 before the factory is even loaded."""
    (tmp_path / "mymodel.py").write_text("raise SystemExit('the factory module was imported')\n")
    monkeypatch.setattr(aotcuda.lowering, "lower", lambda *a, **k: pytest.fail("lower() was called"))
    folder = tmp_path / "adir.pt2"
    folder.mkdir()
    for output, says in ((tmp_path / "mymodel.py" / "x.pt2", "mymodel.py' is a file, not a folder; choose another path"),
                         (tmp_path / "mymodel.py" / "a" / "b" / "x.pt2", "mymodel.py' is a file, not a folder")):
        result = runner.invoke(main, ["lower", f"{tmp_path / 'mymodel.py'}:make", "-o", str(output)])
        assert result.exit_code == 1 and f"error: cannot write the package to '{output}': " in result.output, result.output
        assert says in result.output and "imported" not in result.output and "Traceback" not in result.output
    result = runner.invoke(main, ["lower", f"{tmp_path / 'mymodel.py'}:make", "-o", str(folder)])
    assert result.exit_code == 2 and "is a directory" in result.output  # click's own check of a FILE option
    assert not (tmp_path / "mymodel.py").is_dir()


def test_lower_help_says_folders_are_created_and_the_path_form(runner):
    result = runner.invoke(main, ["lower", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "folders of the path that do not exist are created" in text
    assert "path/to/model.py:FACTORY" in text and "MODULE:FACTORY" in text


def test_run_with_a_wrong_static_size_leads_with_passing_that_size(demo, runner, tmp_path):
    """The demo's batch (2) is static: the hint says first to pass that size, then to re-lower with it dynamic."""
    lowered, _, x = demo
    torch.save((torch.randn(3, *x.shape[1:]),), tmp_path / "batch3.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "batch3.pt")])
    assert result.exit_code == 1, result.output
    assert "dim 0 is 3, but the program was exported with size 2 there" in result.output, result.output
    hints = [line for line in result.output.splitlines() if line.startswith("hint: ")]
    assert hints == ["hint: pass the size the program was exported with (change the --inputs file), or lower it "
                     "again with that dim dynamic: `aotcuda lower ... --dynamic NAME:DIM:MIN:MAX`"], result.output


LONG_KERNEL = "aoti_torch_cpu_" + "very_long_kernel_name_" * 8


def failing_factory():
    """Raises what lower() raises for a missing kernel, with a note, to check how the CLI prints it."""
    error = MissingFallbackKernelsError(f"Method forward missing fallback kernels (1 total):\n  - {LONG_KERNEL}  <- m.py:3: "
                                        "y = op(x)\nRewrite those ops, or pass allow_fallbacks=True to ship the ATen kernels.")
    error.add_note("No package was written to /tmp/m.pt2.")
    raise error


def test_error_lines_are_not_wrapped_and_get_command_line_hints(runner, tmp_path):
    result = runner.invoke(main, ["lower", f"{__name__}:failing_factory", "-o", str(tmp_path / "m.pt2")])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "error: Method forward missing fallback kernels (1 total):"
    assert f"    - {LONG_KERNEL}  <- m.py:3: y = op(x)" in lines  # one line, longer than 80 columns, indented
    assert "  No package was written to /tmp/m.pt2." in lines
    assert lines[-1] == "hint: on the command line, --allow-fallbacks keeps going with these kernels"


def dropout_training_factory():
    """A model with a Dropout, left in training mode (eval() forgotten), and a random op of forward's own beside."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1)), (torch.randn(2, 8),)


class DropoutAndNoise(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(x) + torch.rand_like(x)


def dropout_and_noise_factory():
    return DropoutAndNoise(), (torch.randn(2, 8),)


def test_a_dropout_left_in_training_mode_gets_the_eval_hint_not_allow_fallbacks(runner, tmp_path):
    """A new user (2026-12-06, second): for a Dropout left in training mode the CLI's last line was `hint: on the
    command line, --allow-fallbacks keeps going with these kernels`, which ships random dropout. That refusal's hint
    is to call .eval() in the factory now; a random op of forward's own beside it keeps --allow-fallbacks, second."""
    result = runner.invoke(main, ["lower", f"{__name__}:dropout_training_factory", "-o", str(tmp_path / "m.pt2"),
                                  "--device", "cpu"])
    assert result.exit_code == 1, result.output
    hints = [line for line in result.output.splitlines() if line.startswith("hint: ")]
    assert hints == ["hint: call .eval() on the model in the factory (`return model.eval(), inputs`) and lower it "
                     "again; --allow-fallbacks would ship the dropout as in training (random masks at every call)"], \
        result.output
    assert "allow_fallbacks=True is no fix here" in " ".join(result.output.split()), result.output
    result = runner.invoke(main, ["lower", f"{__name__}:dropout_and_noise_factory", "-o", str(tmp_path / "m.pt2"),
                                  "--device", "cpu"])
    hints = [line for line in result.output.splitlines() if line.startswith("hint: ")]
    assert result.exit_code == 1 and len(hints) == 2 and "eval()" in hints[0] and "--allow-fallbacks keeps going" in \
        hints[1], result.output


def test_a_newline_in_quoted_text_cannot_print_a_line_of_aotcudas_own(capsys):
    """Review 9: messages quote outside text (a package's names, another library's error); a newline in it printed
    a line of its choosing at the first column ('hint: this package is verified ...'). Later lines are indented."""
    from aotcuda.cli import print_error

    print_error("the model's metadata x\nhint: this package is verified\n\x1b[2Jerror: none", hints=["real one"])
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["error: the model's metadata x", "  hint: this package is verified", "  \\x1b[2Jerror: none",
                     "hint: real one"]


def test_lower_says_when_only_torchs_loader_can_run_the_package(runner, tmp_path, monkeypatch):
    # Inductor logs this note for each such op while compiling (torch/_inductor/ir.py); the command says it itself.
    inductor_log = logging.getLogger("torch._inductor.ir")
    shim_note = inductor_log.makeRecord(inductor_log.name, logging.WARNING, "ir.py", 1, "%s is missing a c-shim "
                                        "implementation, using proxy executor as fallback", ("aotcuda_test.op",), None)
    shown_while_lowering = []

    def lower_needing_the_proxy_executor(model, args, kwargs, *, package_path, **options):
        warnings.warn("runs aotcuda_test::op through AOTInductor's proxy executor", UserWarning)
        shown_while_lowering.append(inductor_log.filter(shim_note))
        return aotcuda.lowering.LoweredProgram(str(package_path), "cpu", [], [], {}, None, ["aotcuda_test::op"])

    monkeypatch.setattr(aotcuda.lowering, "lower", lower_needing_the_proxy_executor)
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(tmp_path / "p.pt2"), "--device",
                                  "cpu", "--allow-fallbacks"])
    assert result.exit_code == 0, result.output
    assert ("warning: aotcuda_test::op run through AOTInductor's proxy executor: `aotcuda run` and aotcuda.load cannot "
            "run this package, torch._inductor.aoti_load_package can") in result.output.splitlines()
    assert "UserWarning" not in result.output
    assert shown_while_lowering == [False], "Inductor's own note about the op is dropped while lowering"
    assert inductor_log.filter(shim_note), "and shown again afterwards"


def test_lower_does_not_suggest_aotcuda_run_for_a_package_it_cannot_run(runner, tmp_path, monkeypatch):
    """A new user (2026-12-07): a custom op lowered with --allow-fallbacks --save-inputs printed `wrote the example
    inputs to in.pt (aotcuda run cop.pt2 --inputs in.pt)`, and the next line warned that `aotcuda run` cannot run
    the package. The run command is suggested only where it runs; a package aotcuda runs keeps it."""
    for proxy_ops, suggested in ((["aotcuda_test::op"], False), ([], True)):
        def lowered_with(model, args, kwargs, *, package_path, **options):
            return aotcuda.lowering.LoweredProgram(str(package_path), "cpu", [], [], {}, None, proxy_ops)

        monkeypatch.setattr(aotcuda.lowering, "lower", lowered_with)
        package, inputs = tmp_path / "p.pt2", tmp_path / "in.pt"
        result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(package), "--device", "cpu",
                                      "--allow-fallbacks", "--save-inputs", str(inputs)], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        assert f"wrote the example inputs to {inputs}" in result.output, result.output
        assert (f"aotcuda run {package} --inputs {inputs}" in result.output) == suggested, result.output
        assert ("`aotcuda run` and aotcuda.load cannot run this package" in result.output) != suggested, result.output


def _demo_folders() -> set[str]:
    import tempfile

    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("aotcuda-demo-")}


def test_demo_on_cpu_end_to_end(runner, tmp_path, monkeypatch):
    # a temp folder of the test's own: another process's demo (a second test run on the machine) made and removed its
    # aotcuda-demo-* folder in the shared /tmp while this one ran, and the comparison below failed on it
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folders = _demo_folders()
    result = runner.invoke(main, ["demo", "--device", "cpu", "--calls", "5", "--seq", "16"])
    assert result.exit_code == 0, result.output
    assert _demo_folders() <= folders, "the demo's temporary package is removed (7 MB a run otherwise)"
    assert "package kept" not in result.output
    output = result.output
    assert "relative error vs eager" in output
    assert "fallback kernels" in output and "│ fallback kernels" in output
    fallback_row = next(line for line in output.splitlines() if "fallback kernels" in line)
    assert fallback_row.split("│")[2].strip() == "0"
    for step in ("export", "decompose", "passes", "compile"):
        assert f"lowering: {step}" in output
        assert sum(step in line for line in output.splitlines()) == 1  # the table's row, no progress line too
    assert "latency per call, aotcuda" in output and "latency per call, eager" in output
    assert "other work at timing" in output and "cores" in output


def test_demo_in_float64_is_held_to_its_float32_math(runner, tmp_path):
    """The block computes its norms and RoPE in float32 whatever its dtype: a float64 demo differs from
    eager by float32 roundings (~1e-7), which a float64 bound of 1e-10 refused (a new user's report)."""
    result = runner.invoke(main, ["demo", "--device", "cpu", "--dtype", "float64", "--calls", "3", "--seq", "64",
                                  "-o", str(tmp_path / "kept" / "demo.pt2"), "--save-inputs",
                                  str(tmp_path / "kept" / "inputs.pt")])
    assert result.exit_code == 0, result.output
    # -o keeps the package, and says where
    assert (tmp_path / "kept" / "demo.pt2").is_file()
    assert f"package kept: {tmp_path / 'kept' / 'demo.pt2'}" in result.output.splitlines()
    error_row = next(line for line in result.output.splitlines() if "relative error vs eager" in line)
    assert "(≤ 1e-05)" in error_row
    # --save-inputs: the input the demo ran, which `aotcuda run` takes with the kept package (a new user had to
    # build one by hand from `inspect`'s table)
    package, inputs = tmp_path / "kept" / "demo.pt2", tmp_path / "kept" / "inputs.pt"
    assert f"wrote the demo's input to {inputs} (aotcuda run {package} --inputs {inputs})" in result.output.splitlines()
    saved = torch.load(inputs)
    assert saved["args"][0].shape == (2, 64, 256) and saved["args"][0].dtype == torch.float64
    ran = runner.invoke(main, ["run", str(package), "--inputs", str(inputs), "--save-outputs", str(tmp_path / "o.pt")])
    assert ran.exit_code == 0, ran.output
    from aotcuda.models.attention import attention_block

    model, _ = attention_block(device="cpu", dtype=torch.float64, batch=2, seq=64)
    with torch.no_grad():
        expected = model(saved["args"][0])
    assert relative_error(torch.load(tmp_path / "o.pt"), expected) <= 1e-5


def _error_of(call) -> Exception:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


def _outside_range():
    from aotcuda.runtime.checks import TensorSpec, check_inputs

    spec = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu",
                                 "shape": [2, {"expr": "s0", "min": 2, "max": 512}]})
    return lambda: check_inputs([torch.randn(2, 600)], [spec], ["x"], torch.device("cpu"), 1)


def _not_that_size():
    from aotcuda.runtime.checks import TensorSpec, check_inputs

    spec = TensorSpec.from_json({"name": "x", "dtype": "float32", "device": "cpu", "shape": [2, 4]})
    return lambda: check_inputs([torch.randn(3, 4)], [spec], ["x"], torch.device("cpu"), 1)


def _cuda_where_there_is_none(monkeypatch):
    from aotcuda.lowering.devices import target_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return lambda: target_device("cuda")


@pytest.mark.parametrize("make_call, hints", [
    (lambda _: _outside_range(),  # found by a new user: the Python advice had no CLI twin
     ["on the command line, lower it again with a wider range: `aotcuda lower ... --dynamic NAME:DIM:MIN:MAX`"]),
    (lambda _: _not_that_size(),
     ["pass the size the program was exported with (change the --inputs file), or lower it again with that dim "
      "dynamic: `aotcuda lower ... --dynamic NAME:DIM:MIN:MAX`"]),
    (_cuda_where_there_is_none, ["on the command line, --device cpu"]),
])
def test_hints_follow_the_errors_advice(monkeypatch, make_call, hints):
    """The hints come from the error's advice (AotcudaError.advice), raised where the library raises it."""
    assert cli_hints(_error_of(make_call(monkeypatch))) == hints


def test_hints_follow_the_advice_not_every_device_named():
    """Found by a new user: a device the message only names (the one asked for) also got a hint. The advice
    of a package built for the CPU and loaded for CUDA is: load it for the CPU, or lower it again for CUDA."""
    from aotcuda.errors import Advice, PackageError

    error = PackageError("the package was built for cpu and cannot run on cuda; ...",
                         advice=(Advice("device", "cpu"), Advice("device", "cuda", relower=True)))
    assert cli_hints(error) == ["on the command line, --device cpu",
                                "on the command line, lower it again with `aotcuda lower ... --device cuda`"]
    assert cli_hints(ValueError("use device='cpu'")) == []  # a foreign error's words are never read


@pytest.mark.parametrize("made, says", [
    (torch.nn.Linear(2, 2), "it returned a Linear instance (FACTORY names an nn.Module class?"),
    ((torch.nn.Linear(2, 2),), "it returned a tuple of 1: (Linear)"),
    ([torch.nn.Linear(2, 2), torch.randn(1, 2)], "it returned a list"),
])
def test_a_factory_returning_the_wrong_thing_is_told_what_it_returned(made, says):
    from aotcuda.cli_inputs import model_and_inputs

    with pytest.raises(click.UsageError, match=re.escape(says)):
        model_and_inputs(made)


@pytest.mark.parametrize("kwargs", ["m.pt2", 5, [torch.randn(2)]])
def test_a_factory_returning_kwargs_that_are_no_dict_is_told_so(kwargs):
    """The lower() API breaker (2026-12-06): a factory returning (model, (x,), "m.pt2") got "error: ValueError:
    dictionary update sequence element #0 has length 1; 2 is required", one returning 5 "error: TypeError: 'int'
    object is not iterable" (dict() of them)."""
    from aotcuda.cli_inputs import model_and_inputs

    with pytest.raises(click.UsageError, match=r"the factory returned \(model, args, kwargs\) with kwargs an? "
                                               r"(str|int|list); kwargs must be a dict of forward's keyword inputs"):
        model_and_inputs((torch.nn.Linear(2, 2), (torch.randn(1, 2),), kwargs))
    assert model_and_inputs((torch.nn.Linear(2, 2), (torch.randn(1, 2),), None))[2] == {}


def test_a_factory_returning_a_class_or_inputs_as_a_dict_is_told_the_fix():
    """The lower() API breaker (2026-12-06): (Linear, (x,)) was told "it returned a tuple of 2: (type, tuple)";
    (model, {"x": x}) passed the dict as forward's one positional input, and the model failed on it ("linear():
    argument 'input' (position 1) must be Tensor, not dict"), where forward's inputs by name were meant."""
    from aotcuda.cli_inputs import model_and_inputs

    x = torch.randn(1, 2)
    with pytest.raises(click.UsageError, match=r"its first item is the class Linear, not a model: return an instance, "
                                               r"Linear\(...\)"):
        model_and_inputs((torch.nn.Linear, (x,)))
    with pytest.raises(click.UsageError, match=r"the factory returned \(model, inputs\) with inputs a dict; return "
                                               r"\(model, \(the_dict,\)\) if forward takes the dict as one argument, "
                                               r"or \(model, \(\), the_dict\) to pass its items by name"):
        model_and_inputs((torch.nn.Linear(2, 2), {"input": x}))
    assert model_and_inputs((torch.nn.Linear(2, 2), (), {"input": x}))[2] == {"input": x}


@pytest.mark.parametrize("factory, said", [
    ("one_input_for_two_factory", "missing a required argument: 'angle' (1 positional given)"),
    ("too_many_inputs_factory", "too many positional arguments (3 positional given)")])
def test_example_inputs_that_do_not_fit_forward_are_named_with_dynamic_too(runner, tmp_path, factory, said):
    """A new user's trial and the lower() API breaker (2026-12-06): a factory returning inputs forward(x, angle) does
    not take printed only Python's "error: TypeError: missing a required argument: 'angle'" or "too many positional
    arguments" (torch.export's bind, or --dynamic's own), which names neither the model nor what was given."""
    for options in ([], ["--dynamic", "x:0:1:8"]):
        result = runner.invoke(main, ["lower", f"{__name__}:{factory}", "-o", str(tmp_path / "t.pt2"),
                                      "--device", "cpu", *options])
        assert result.exit_code == 1 and not (tmp_path / "t.pt2").exists(), result.output
        assert f"the example inputs do not fit Scale.forward(x, angle): {said}" in " ".join(result.output.split()), \
            result.output


def too_many_inputs_factory():
    model, (x, angle) = scale_factory()
    return model, (x, angle, angle)


@pytest.mark.parametrize("device, error", [("gpu", "'gpu': expected auto, cpu, cuda or cuda:N"),
                                           ("cuda:x", "'cuda:x': expected auto, cpu, cuda or cuda:N")])
def test_lower_and_demo_name_a_bad_device_as_a_usage_error(runner, tmp_path, device, error):
    for command in (["lower", f"{__name__}:scale_factory", "-o", str(tmp_path / "d.pt2")], ["demo"]):
        result = runner.invoke(main, [*command, "--device", device])
        assert result.exit_code == 2 and error in result.output, result.output
        assert not (tmp_path / "d.pt2").exists()


def test_a_cuda_index_torch_does_not_see_is_a_usage_error_that_says_so(runner, tmp_path, monkeypatch):
    """The lower() API breaker (2026-12-06): --device cuda:7 on a machine of one GPU reached the lowering (torch's
    raw "invalid device ordinal" as the model was moved); refused by target_device now, it must not be told as
    "torch sees no CUDA device here"."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", str(tmp_path / "d.pt2"), "--device",
                                  "cuda:7"])
    assert result.exit_code == 2 and not (tmp_path / "d.pt2").exists(), result.output
    assert "cuda:7: torch sees 2 CUDA devices here (cuda:0 to cuda:1); use --device cuda or one of those" in \
        " ".join(result.output.split()), result.output


def test_a_cpu_index_is_a_usage_error_that_names_the_fix(runner, tmp_path, monkeypatch):
    """The lower() API breaker (2026-12-06): lower(device="cpu:1") was taken, the index meaning nothing on the CPU;
    --device cpu:1 says so with the fix, as lower() does, before any work (cpu:0 is the CPU, as torch names it)."""
    def reached(*args, **kwargs):
        raise AssertionError("the lowering was reached")

    monkeypatch.setattr(aotcuda.lowering, "lower", reached)
    for command in (["lower", f"{__name__}:scale_factory", "-o", str(tmp_path / "d.pt2")], ["demo"], ["run", "m.pt2"]):
        result = runner.invoke(main, [*command, "--device", "cpu:1"])
        assert result.exit_code == 2 and list(tmp_path.iterdir()) == [], result.output
        assert "cpu:1: the CPU takes no device index (torch has one CPU device); use --device cpu" in \
            " ".join(result.output.split()), result.output
    assert aotcuda.cli.TargetDevice().convert("cpu:0", None, None) == "cpu"


def test_save_inputs_to_the_package_path_is_refused_before_any_work(runner, tmp_path, monkeypatch):
    """The lower() API breaker (2026-12-06): `aotcuda lower f.py:make -o m.pt2 --save-inputs m.pt2` lowered, wrote
    the package, then replaced it with the inputs (torch.save over it) and said "wrote the example inputs to m.pt2
    (aotcuda run m.pt2 --inputs m.pt2)"; `aotcuda demo` the same."""
    import aotcuda.demo
    import aotcuda.lowering

    def reached(*args, **kwargs):
        raise AssertionError("the lowering was reached")

    monkeypatch.setattr(aotcuda.lowering, "lower", reached)
    monkeypatch.setattr(aotcuda.demo, "run_demo", reached)
    package = tmp_path / "m.pt2"
    for command in (["lower", f"{__name__}:scale_factory"], ["demo"]):
        for saved in (str(package), f"{tmp_path}/./m.pt2"):
            result = runner.invoke(main, [*command, "-o", str(package), "--device", "cpu", "--save-inputs", saved])
            assert result.exit_code == 2, result.output
            assert "is also the package's path (-o):" in result.output and "e.g. m.inputs.pt" in result.output
    monkeypatch.setenv("HOME", str(tmp_path))  # a "~" quoted past the shell: lower() and the save path expand it
    result = runner.invoke(main, ["lower", f"{__name__}:scale_factory", "-o", "~/m.pt2", "--device", "cpu",
                                  "--save-inputs", str(package)])
    assert result.exit_code == 2 and "is also the package's path (-o):" in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_save_outputs_to_the_inputs_file_is_refused_before_the_run(runner, tmp_path, monkeypatch):
    """The lower() API breaker (2026-12-06): `aotcuda run m.pt2 --inputs in.pt --save-outputs in.pt` ran and
    replaced the inputs it had read with the outputs (both torch.save files, so the save path's check took it)."""
    import aotcuda.runtime.program

    def reached(*args, **kwargs):
        raise AssertionError("the package was loaded")

    monkeypatch.setattr(aotcuda.runtime.program, "load", reached)
    torch.save((torch.randn(3, 8), torch.randn(3, 4)), tmp_path / "in.pt")
    (tmp_path / "m.pt2").write_bytes(b"")
    before = (tmp_path / "in.pt").read_bytes()
    for saved in (str(tmp_path / "in.pt"), f"{tmp_path}/./in.pt"):
        result = runner.invoke(main, ["run", str(tmp_path / "m.pt2"), "--inputs", str(tmp_path / "in.pt"),
                                      "--save-outputs", saved])
        assert result.exit_code == 2, result.output
        message = " ".join(result.output.split())
        assert "is also the inputs file (--inputs): the outputs would replace the inputs read from it" in message
        assert "e.g. in.outputs.pt" in message
    assert (tmp_path / "in.pt").read_bytes() == before


def test_cuda_where_there_is_none_is_a_usage_error_for_lower_and_demo(runner, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without a GPU, on any machine
    for command in (["lower", f"{__name__}:scale_factory", "-o", str(tmp_path / "d.pt2")], ["demo"]):
        for device in ("cuda", "cuda:1"):
            result = runner.invoke(main, [*command, "--device", device])
            assert result.exit_code == 2 and "torch sees no CUDA device here; use --device cpu or auto" in result.output


def position_table_factory():
    from lowering.test_pipeline import PositionTable

    return PositionTable(), (torch.randn(2, 8, 4),)


def test_a_violated_dynamic_range_prints_why_and_the_suggested_fix(runner, tmp_path):
    result = runner.invoke(main, ["lower", f"{__name__}:position_table_factory", "-o", str(tmp_path / "t.pt2"),
                                  "--device", "cpu", "--dynamic", "x:1:2:512"])
    assert result.exit_code == 1, result.output
    assert "error: Constraints violated (x_1)!" in result.output
    assert "Suggested fixes:" in result.output and "x_1 = Dim('x_1', max=256)" in result.output, result.output
    assert "Not all values of x_1" in result.output


def test_dynamic_option_takes_a_multiple_of_n():
    """SYMBOL*N: the size is N·SYMBOL (an stft input of 160·frames samples), MIN/MAX bound the size."""
    model, args = scale_factory()
    shapes = dynamic_shapes_from(("x:1:801:4000:frames*160",), model, args, {})
    root = shapes["x"][1].root
    assert root.__name__ == "frames" and (root.min, root.max) == (6, 25)  # ceil(801/160), floor(4000/160)
    with pytest.raises(click.BadParameter, match=r"no multiple of 160 lies in \[1, 100\]"):
        dynamic_shapes_from(("x:1:1:100:frames*160",), model, args, {})
    with pytest.raises(click.BadParameter, match=r"SYMBOL must be a name, or NAME\*N"):
        dynamic_shapes_from(("x:1:1:100:frames*x",), model, args, {})


def test_a_dynamic_range_of_one_size_is_a_usage_error_not_torchs_assertion():
    """The breaker (2026-12-05): `--dynamic x:1:8:8` (or `x:1:4:7:s*4`, whose one multiple is 4) reached
    torch.export.Dim, which asserts min < max: `error: AssertionError: Cannot create Dim with inconsistent min=8,
    max=8`."""
    model, args = scale_factory()
    with pytest.raises(click.BadParameter, match=r"one size only \(8\) lies in \[8, 8\]; a dynamic dim takes a range"):
        dynamic_shapes_from(("x:1:8:8",), model, args, {})
    with pytest.raises(click.BadParameter, match=r"one size only \(4\) lies in \[4, 7\] as a multiple of 4"):
        dynamic_shapes_from(("x:1:4:7:s*4",), model, args, {})
    assert dynamic_shapes_from(("x:1:4:8:s*4",), model, args, {})["x"][1].root.max == 2  # two sizes: a range


@pytest.mark.parametrize("terminal", [False, True])
def test_lowering_progress_prints_each_step_once_with_one_time(terminal):
    """`aotcuda lower`'s progress: one line per step with the measured time (it printed the time twice,
    "export (3.2 s) 0:00:03"); the demo's (transient) shows nothing where stderr is no terminal, and
    clears its lines on one, since its table lists the step times. Where stderr is no terminal, each step
    is one plain line as it ends (a live display there printed once, at the end, with its spinner)."""
    import io

    from rich.console import Console

    from aotcuda.cli import _StepProgress

    steps = {"export": 3.25, "decompose": 1.5, "compile": 20.0}
    for transient in (False, True):
        written = io.StringIO()
        with _StepProgress(transient, Console(file=written, force_terminal=terminal, width=80)) as progress:
            for step, seconds in steps.items():
                progress(step, None)
                progress(step, seconds)
        final = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", written.getvalue().split("\r")[-1] if terminal else written.getvalue())
        lines = [" ".join(line.split()) for line in final.splitlines() if line.strip()]
        if transient:  # nothing left: no terminal, nothing printed; a terminal, the lines cleared
            assert lines == [] and (terminal or written.getvalue() == "")
        elif terminal:
            assert lines == [f"{step} {seconds:.1f} s" for step, seconds in steps.items()]
        else:  # a log: plain lines, each as its step ends, no spinner and no escape
            assert written.getvalue() == "".join(f"{step}: {seconds:.1f} s\n" for step, seconds in steps.items())


@pytest.mark.parametrize("load, cores, busy", [(0.4, 2, False), (1.49, 2, False), (1.5, 2, True), (7.5, 4, True),
                                               (None, 2, False)])
def test_demo_reports_the_other_work_and_flags_its_timing_on_a_busy_machine(runner, monkeypatch, load, cores, busy):
    """The demo's speed-up beside the cores other work kept busy; where that reaches 3/4 of the cores, the row
    and a warning say the timing is unreliable (run_demo stubbed: the table, not the lowering, is tested)."""
    import types

    import aotcuda.demo

    lowered = types.SimpleNamespace(fallback_kernels=[], library_kernels=[], step_times={"compile": 1.0})
    result = aotcuda.demo.DemoResult(lowered, "cpu", torch.float32, (2, 64, 256), 2e-7, 1e-5, 0.010, 0.020,
                                     busy_cores=load, cores=cores)
    monkeypatch.setattr(aotcuda.demo, "run_demo", lambda *args, **kwargs: result)
    output = runner.invoke(main, ["demo", "--device", "cpu"], env={"COLUMNS": "200"}).output
    assert result.machine_busy is busy
    row = next(line for line in output.splitlines() if "other work at timing" in line)
    speed_up = next(line for line in output.splitlines() if "speed-up vs eager" in line)
    assert ("unknown (2 cores)" if load is None else f"{load:.2f} of {cores} cores busy") in row
    assert ("unreliable timing" in row) is busy and ("2.00× (unreliable: machine busy)" in speed_up) is busy
    assert ("warning: the machine is busy" in output) is busy


def test_other_work_is_the_cpus_busy_time_less_this_processs_own(monkeypatch):
    """Found by a new user (session 21): the 1-minute load average counted the demo's own compile that had just
    ended (1.89 on an idle 2-core machine: every timing marked unreliable). Now the CPUs' busy time over the
    sample less this process's own CPU time, per second of the sample."""
    import os

    import aotcuda.demo as demo

    hz = os.sysconf("SC_CLK_TCK")
    ticks = iter([10 * hz, 10 * hz + int(1.5 * hz)])  # all CPUs together busy 1.5 s over the 1 s sample
    clock = iter([3.0, 3.25])  # this process used 0.25 s of CPU meanwhile
    monkeypatch.setattr(demo, "_busy_ticks", lambda: next(ticks))
    monkeypatch.setattr(demo.time, "process_time", lambda: next(clock))
    monkeypatch.setattr(demo.time, "sleep", lambda seconds: None)
    assert demo.other_work_cores(1.0) == pytest.approx(1.25)
    monkeypatch.undo()
    real = demo.other_work_cores(0.2)  # this machine, as the demo reads it
    assert real is None or 0.0 <= real <= (os.cpu_count() or 1) + 0.5


def test_an_inputs_file_that_inflates_a_thousandfold_is_refused_before_it_is_read(tmp_path):
    """torch.load inflates a deflated record whole: a 256 KiB inputs file made a 256 MiB tensor (peak 477 MB),
    and one of 64 MiB would make 64 GiB. `aotcuda run` now checks the zip's declared sizes first, with the
    limits (and the variables to raise them) that packages are read with."""

    import click

    from aotcuda.cli_inputs import load_inputs

    torch.save({"args": (torch.zeros(1 << 25),)}, tmp_path / "plain.pt")  # 128 MiB of zeros
    with zipfile.ZipFile(tmp_path / "plain.pt") as plain, \
            zipfile.ZipFile(tmp_path / "bomb.pt", "w", zipfile.ZIP_DEFLATED) as bomb:
        for info in plain.infolist():
            bomb.writestr(info.filename, plain.read(info))
    (tmp_path / "plain.pt").unlink()
    assert (tmp_path / "bomb.pt").stat().st_size < 1 << 20
    with pytest.raises(click.BadParameter, match=r"would inflate from 0.1 MiB to 128.0 MiB .* a decompression bomb"):
        load_inputs(str(tmp_path / "bomb.pt"))
    torch.save({"args": (torch.ones(3),)}, tmp_path / "small.pt")  # a file torch.save wrote is read as before
    assert torch.equal(load_inputs(str(tmp_path / "small.pt"))[0][0], torch.ones(3))


def test_an_inputs_file_written_into_after_its_checks_is_not_what_torch_load_reads(tmp_path, monkeypatch):
    """The checks above read the inputs file, then torch.load read it again through the same descriptor: a file
    written into in place between the two (another process that can write it) was loaded without any check, a
    bomb as easily as the other tensor here. Now the checks and torch.load read one private copy of the file."""
    import aotcuda.cli_inputs as cli_inputs

    path = tmp_path / "inputs.pt"
    torch.save({"args": (torch.ones(3),)}, path)
    torch.save({"args": (torch.zeros(3),)}, tmp_path / "other.pt")
    other = (tmp_path / "other.pt").read_bytes()
    checked = cli_inputs._check_pickles

    def check_then_rewrite(*args, **kwargs):
        checked(*args, **kwargs)
        with open(path, "r+b") as file:  # in place: the same file, as a writer that truncates and writes
            file.truncate(0)
            file.write(other)

    monkeypatch.setattr(cli_inputs, "_check_pickles", check_then_rewrite)
    (loaded,), _ = cli_inputs.load_inputs(str(path))
    assert torch.equal(loaded, torch.ones(3)), "torch.load read bytes the checks never saw"
    assert path.read_bytes() == other


def test_save_paths_are_checked_before_any_work_and_their_folders_made(demo, runner, tmp_path):
    """--save-inputs/--save-outputs into a folder that did not exist failed after the whole compile (or run),
    and either would replace any file there (`--save-inputs model.py`). Now each is checked before the work,
    as -o is, and its folders are made when it is written."""
    (tmp_path / "model.py").write_text("source")
    result = runner.invoke(main, ["lower", "no_such_module:make", "-o", str(tmp_path / "m.pt2"),
                                  "--save-inputs", str(tmp_path / "model.py")])
    assert result.exit_code == 2 and "--save-inputs" in result.output, result.output
    assert "a file that is not a torch.save file is there" in result.output
    assert (tmp_path / "model.py").read_text() == "source" and not (tmp_path / "m.pt2").exists()
    lowered, _, x = demo
    torch.save({"args": (torch.randn(2, 16, x.shape[-1]),)}, tmp_path / "inputs.pt")
    saved = tmp_path / "new" / "folder" / "outputs.pt"
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt"),
                                  "--save-outputs", str(saved)])
    assert result.exit_code == 0, result.output
    assert isinstance(torch.load(saved), torch.Tensor)
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt"),
                                  "--save-outputs", str(saved)])  # an earlier save is replaced
    assert result.exit_code == 0, result.output
    os.mkfifo(tmp_path / "fifo")  # neither replaced nor opened (an open would wait for a writer)
    from aotcuda.lowering.pipeline import is_torch_save_file

    assert not is_torch_save_file(str(tmp_path / "fifo"))


def _refused(path, match):
    from aotcuda.cli_inputs import load_inputs

    with pytest.raises(click.BadParameter, match=match) as caught:
        load_inputs(str(path))
    assert caught.value.param_hint == "--inputs"


def test_an_inputs_file_of_shared_lists_is_refused_before_anything_walks_it(tmp_path):
    """A 1.9 KB file: 40 levels of [x, x], shared through the pickle memo. torch.load reads it; pytree then walked
    2**40 leaves (a hang, memory growing). The walk that refuses it visits each container once."""
    from aotcuda.cli_inputs import load_inputs

    shared = [torch.zeros(2, 4)]
    for _ in range(40):
        shared = [shared, shared]
    torch.save({"args": (shared,), "kwargs": {}}, tmp_path / "laughs.pt")
    assert (tmp_path / "laughs.pt").stat().st_size < 4096
    took, _ = least_cpu_seconds(lambda: _refused(tmp_path / "laughs.pt", r"more than 100,000 values, counting a "
                                                 r"container as often as it is reached"))  # CPU time (least_time.py)
    assert took < 5, took
    cycle = [torch.ones(1)]
    cycle.append(cycle)
    torch.save({"args": (cycle,)}, tmp_path / "cycle.pt")
    # refused by the pickle count now, before torch.load builds it (the breaker, 2026-12-05): a cycle fills a container
    # after it was put into another value
    _refused(tmp_path / "cycle.pt", r"filled after it was put into another value .*\(a container that holds itself")
    # Sharing that stays small is how torch.save writes one list passed twice: read as before.
    pair, x = [torch.ones(2), torch.zeros(2)], torch.ones(3)
    torch.save({"args": (pair, pair, x, x), "kwargs": {"x2": x}}, tmp_path / "shared.pt")
    args, kwargs = load_inputs(str(tmp_path / "shared.pt"))
    assert len(args) == 4 and torch.equal(args[1][0], torch.ones(2)) and torch.equal(kwargs["x2"], x)


def test_an_inputs_file_nested_deeper_than_any_call_is_refused_cleanly(tmp_path):
    """200,000 nested lists in a 2 KB pickle (its opcodes are iterative: torch.load reads it); pytree recursed
    into a RecursionError. 65 container levels are refused by the same bounded walk, 64 are read."""
    import pickle

    from aotcuda.cli_inputs import MAX_INPUTS_DEPTH, MAX_INPUTS_PICKLE_DEPTH, load_inputs

    torch.save({"args": (torch.zeros(2),)}, tmp_path / "base.pt")
    levels = 200_000
    body = b"\x80\x02}" + pickle.dumps("args", 2)[2:-1] + b"]" * levels + b"a" * (levels - 1) + b"\x85s."
    with zipfile.ZipFile(tmp_path / "base.pt") as base, zipfile.ZipFile(tmp_path / "deep.pt", "w") as deep:
        for info in base.infolist():
            deep.writestr(info.filename, body if info.filename.endswith("data.pkl") else base.read(info))
    # (since review 10 its opcodes' nesting refuses it before torch.load runs)
    _refused(tmp_path / "deep.pt", rf"its pickle 'base/data.pkl' nests containers more than {MAX_INPUTS_PICKLE_DEPTH} "
                                   r"levels deep .*nothing of it was run; save the inputs")
    for depth, refused in ((MAX_INPUTS_DEPTH - 2, False), (MAX_INPUTS_DEPTH - 1, True)):
        nested = torch.ones(1)
        for _ in range(depth):
            nested = [nested]
        torch.save({"args": (nested,)}, tmp_path / "nested.pt")  # the dict and the args tuple: two levels more
        if refused:
            _refused(tmp_path / "nested.pt", "nest more than")
        else:
            assert len(load_inputs(str(tmp_path / "nested.pt"))[0]) == 1


def test_an_inputs_file_torch_reads_as_a_zip_but_zipfile_cannot_is_refused(tmp_path):
    """64 junk bytes before the end record, counted in the directory's size: Python's zipfile refuses the
    archive, torch.load's own reader does not, and the inflate check used to be skipped (262 KB → 256 MiB)."""
    import struct

    from aotcuda.cli_inputs import load_inputs

    torch.save({"args": (torch.ones(3),)}, tmp_path / "small.pt")
    data = (tmp_path / "small.pt").read_bytes()
    end = data.rfind(b"PK\x05\x06")
    record = bytearray(data[end:])
    record[12:16] = struct.pack("<L", struct.unpack("<L", record[12:16])[0] + 64)
    (tmp_path / "junk.pt").write_bytes(data[:end] + b"\0" * 64 + bytes(record))
    _refused(tmp_path / "junk.pt", r"starts as a zip archive \(torch.save's format\) but is not one Python's zipfile "
                                   r"can read \(.*\): it is damaged or was altered")
    # Two directories, one for each reader: zipfile takes a directory away from where the end record says as
    # shifted by a prefix, and reads entries until the directory's size is used up; torch's reader does neither.
    offset = struct.unpack("<L", data[end + 16:end + 20])[0]
    (tmp_path / "shifted.pt").write_bytes(data[:offset] + b"\0" * 64 + data[offset:])
    _refused(tmp_path / "shifted.pt", r"its central directory is at byte \d+, not at \d+ as its end record says")
    record = bytearray(data[end:])
    record[8:12] = struct.pack("<HH", 1, 1)  # one entry, of the several torch.save wrote, in the classic record
    (tmp_path / "fewer.pt").write_bytes(data[:end] + bytes(record))
    _refused(tmp_path / "fewer.pt", r"its two end records state different entry counts \(1 and \d+\)")
    zip64 = data.rfind(b"PK\x06\x06")  # and in the zip64 record too
    (tmp_path / "fewer.pt").write_bytes(data[:zip64 + 24] + struct.pack("<QQ", 1, 1) + data[zip64 + 40:end]
                                        + bytes(record))
    _refused(tmp_path / "fewer.pt", r"its central directory holds \d+ entries, its end record says 1")
    # torch.save's pre-1.6 format is no zip: torch.load would try it as a tar archive first, whose pax headers
    # Python 3.11.7's tarfile scans in quadratic time (a 300 KB file: a minute of CPU); it is refused, with the fix
    torch.save({"args": (torch.ones(3),)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    _refused(tmp_path / "legacy.pt", r"is not a zip archive, which torch.save writes \(since torch 1.6")
    tar = tmp_path / "pax.tar"  # the stall: one pax header of digits
    header = b"0" * 300_000
    with open(tar, "wb") as handle:
        import tarfile

        info = tarfile.TarInfo("x")
        info.type = tarfile.XHDTYPE
        info.size = len(header)
        handle.write(info.tobuf(format=tarfile.USTAR_FORMAT) + header)
    took, _ = least_cpu_seconds(lambda: _refused(tar, r"is not a zip archive"))  # CPU time (least_time.py)
    assert took < 5, took


def _directory_record(data: bytes, name: str) -> int:
    """Where the central directory record of the entry ``name`` starts in a zip's bytes."""
    directory = struct.unpack("<L", data[data.rfind(b"PK\x05\x06") + 16:][:4])[0]
    if directory == 0xFFFFFFFF:  # torch.save writes a zip64 end record: the offset is there
        directory = struct.unpack("<Q", data[data.rfind(b"PK\x06\x06") + 48:][:8])[0]
    return data.index(name.encode(), directory) - 46


def test_an_inputs_file_of_entries_sharing_one_stream_is_refused_before_it_is_read(tmp_path):
    """Breaker round 2: 40 directory records naming one deflate stream passed every ratio check (they add up the
    DECLARED packed sizes, the file holds the stream once) and torch.load inflated 2.5 GiB from 724 KB: torch's
    reader does not compare local names. Here two records of three point at the first one's bytes."""
    torch.save({"args": (torch.ones(4), torch.zeros(4), torch.full((4,), 2.0))}, tmp_path / "three.pt")
    data = bytearray((tmp_path / "three.pt").read_bytes())
    first = _directory_record(data, "three/data/0")
    for name in ("three/data/1", "three/data/2"):
        record = _directory_record(data, name)
        data[record + 16:record + 28] = data[first + 16:first + 28]  # CRC and sizes
        data[record + 42:record + 46] = data[first + 42:first + 46]  # where its local header is
    (tmp_path / "shared.pt").write_bytes(bytes(data))
    _refused(tmp_path / "shared.pt", r"its entry 'three/data/[01]' \(bytes \d+ to \d+\) runs into the entry "
                                     r"'three/data/[01]' at byte \d+: overlapping entries: a zip bomb .*nothing was "
                                     r"read. Save the inputs again with torch.save")


def test_an_inputs_file_with_two_zip64_blocks_in_one_entry_is_refused_before_it_is_read(tmp_path):
    """Breaker round 2: Python's zipfile applies a second zip64 block (the first left the 0xFFFFFFFF marker),
    torch's miniz stops at the first: every check saw 64 bytes, torch.load inflated 4 GiB from a 4 MB file."""
    from aotcuda.cli_inputs import load_inputs

    torch.save({"args": (torch.ones(4), torch.zeros(16))}, tmp_path / "plain.pt")
    with zipfile.ZipFile(tmp_path / "plain.pt") as plain, zipfile.ZipFile(tmp_path / "z64.pt", "w") as split:
        for info in plain.infolist():
            copied = zipfile.ZipInfo(info.filename)
            if info.filename.endswith("data/1"):
                copied.extra = struct.pack("<HHQ", 1, 8, 0xFFFFFFFF) + struct.pack("<HHQ", 1, 8, info.file_size)
            split.writestr(copied, plain.read(info))
    data = bytearray((tmp_path / "z64.pt").read_bytes())
    record = _directory_record(data, "plain/data/1")
    data[record + 24:record + 28] = struct.pack("<L", 0xFFFFFFFF)  # the size: "see zip64"
    (tmp_path / "z64.pt").write_bytes(bytes(data))
    with zipfile.ZipFile(tmp_path / "z64.pt") as split:  # zipfile reads the second block, as the checks did
        assert split.getinfo("plain/data/1").file_size == 64
    _refused(tmp_path / "z64.pt", r"the extra field of its entry 'plain/data/1' \(directory record\) holds the block "
                                  r"0x0001 more than once \(two zip64 blocks.*nothing was read")
    # torch.save's own files carry extra fields (alignment padding) and data descriptors: they are read as before
    tensors = {"args": (torch.randn(1000, 1000), torch.arange(7)), "kwargs": {"mask": torch.ones(3, dtype=bool)}}
    torch.save(tensors, tmp_path / "several.pt")
    args, kwargs = load_inputs(str(tmp_path / "several.pt"))
    assert torch.equal(args[0], tensors["args"][0]) and torch.equal(kwargs["mask"], tensors["kwargs"]["mask"])


def test_an_expanded_tensor_is_bounded_by_what_the_file_holds(tmp_path, monkeypatch):
    """zeros(1, 4).expand(2**26, 4) saves in 1.5 KB (stride 0) and the runtime's dense copy took 1 GiB: the
    dense size of the inputs is held to the archive's inflate ratio against the file's size."""
    from aotcuda.cli_inputs import load_inputs

    torch.save({"args": (torch.ones(2), torch.zeros(1, 4).expand(1 << 26, 4))}, tmp_path / "expanded.pt")
    _refused(tmp_path / "expanded.pt", r"its tensors would take 1024.0 MiB dense, more than the limit of 200x the "
                                       r"file's [\d,]+ bytes; the tensor at \['args'\]\[1\] \(shape \(67108864, 4\), "
                                       r"strides \(0, 1\) \(an expanded view.*set AOTCUDA_MAX_COMPRESSION_RATIO")
    torch.save({"args": (torch.zeros(1, 4).expand(1 << 20, 4),)}, tmp_path / "small.pt")  # 16 MiB: under the floor
    assert load_inputs(str(tmp_path / "small.pt"))[0][0].shape == (1 << 20, 4)
    monkeypatch.setenv("AOTCUDA_MAX_COMPRESSION_RATIO", "0")  # a trusted file: the variable lifts the ratio
    assert load_inputs(str(tmp_path / "expanded.pt"))[0][1].shape == (1 << 26, 4)
    monkeypatch.setenv("AOTCUDA_MAX_EXTRACT_BYTES", str(1 << 29))  # and the bound on one load still holds
    _refused(tmp_path / "expanded.pt", r"more than the limit of 0.50 GiB.*set AOTCUDA_MAX_EXTRACT_BYTES")


def test_inputs_must_be_a_regular_file(runner, tmp_path):
    """A FIFO waited for a writer for ever, /dev/zero was read until memory ran out: both are refused before
    they are read, by the CLI as a usage error (exit 2), before the package is opened."""
    os.mkfifo(tmp_path / "fifo")
    _refused(tmp_path / "fifo", r"fifo is a FIFO \(named pipe\); --inputs reads a regular file")
    if os.path.exists("/dev/zero"):
        _refused("/dev/zero", r"/dev/zero is a character device; --inputs reads a regular file")
    (tmp_path / "any.pt2").write_bytes(b"not read")
    result = runner.invoke(main, ["run", str(tmp_path / "any.pt2"), "--inputs", str(tmp_path / "fifo")])
    assert result.exit_code == 2 and "is a FIFO (named pipe)" in result.output and "Traceback" not in result.output


def test_an_inputs_file_that_holds_more_than_its_size_is_refused_after_that_size(tmp_path, monkeypatch):
    """The inputs file was copied to its end, whatever its size said: /proc/self/pagemap (size 0, gigabytes to
    read) held `aotcuda run --inputs` past 60 s while the copy filled the temporary folder, as would a file another
    process keeps appending to. The copy stops one byte past the size the file had when it was opened."""
    import tempfile

    if os.path.exists("/proc/self/maps"):  # a kernel file that says 0 bytes and holds a few KB (main: "not a zip")
        _refused("/proc/self/maps", r"/proc/self/maps holds more bytes than its size says \(0\): it is growing as it "
                                    r"is read .*or it is no file on disk")
    torch.save({"args": (torch.randn(3, 4),)}, tmp_path / "growing.pt")
    made = tempfile.TemporaryFile

    def appended_as_copied(*args, **kwargs):  # another process appends once the file was opened and measured
        with open(tmp_path / "growing.pt", "ab") as writer:
            writer.write(b"\0" * 100_000)
        return made(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", appended_as_copied)
    _refused(tmp_path / "growing.pt", r"growing.pt holds more bytes than its size says \([\d,]+\): it is growing")
    monkeypatch.setattr(tempfile, "TemporaryFile", made)
    (tmp_path / "whole.pt").write_bytes((tmp_path / "growing.pt").read_bytes()[:-100_000])
    from aotcuda.cli_inputs import load_inputs

    assert load_inputs(str(tmp_path / "whole.pt"))[0][0].shape == (3, 4)


def test_a_sparse_inputs_file_is_copied_as_its_data_not_its_holes(tmp_path, monkeypatch):
    """The inputs file is copied before it is read (_private_copy), and a hole was copied as zeros: a torch.save file
    behind a 20 GB hole (`truncate -s 20G f; cat in.pt >> f`: 2 KB on disk) wrote 20 GB to the temporary folder and
    took 52 s before it was refused (up to AOTCUDA_MAX_EXTRACT_BYTES, 64 GiB, of a disk). Only the data is copied now,
    the holes left holes; the file is refused as before, and a plain one is read as before."""
    import tempfile

    from aotcuda.cli_inputs import load_inputs

    x = torch.randn(3, 4)
    torch.save({"args": (x,)}, tmp_path / "in.pt")
    with open(tmp_path / "holed.pt", "wb") as out:
        out.truncate(32 << 20)  # a hole of 32 MiB: below the ratio floor, where a file's holes are not refused (64 MiB)
        out.seek(0, os.SEEK_END)
        out.write((tmp_path / "in.pt").read_bytes())
    written = []
    made = tempfile.TemporaryFile

    def counted(*args, **kwargs):
        copy = made(*args, **kwargs)
        write = copy.write
        copy.write = lambda data: written.append(len(data)) or write(data)
        return copy

    monkeypatch.setattr(tempfile, "TemporaryFile", counted)
    _refused(tmp_path / "holed.pt", r"holed.pt is not a zip archive")
    assert sum(written) < 1 << 20, f"{sum(written):,} bytes written for a file of 2 KB of data"
    written.clear()
    assert torch.equal(load_inputs(str(tmp_path / "in.pt"))[0][0], x)
    assert sum(written) == os.path.getsize(tmp_path / "in.pt")


def _kmsg_would_wait() -> bool:
    """Whether /proc/kmsg can be opened here and has no message to read now (it then answers EAGAIN); asked with
    poll, which reads no message."""
    import select

    try:
        descriptor = os.open("/proc/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return not select.select([descriptor], [], [], 0)[0]
    finally:
        os.close(descriptor)


def test_a_file_that_answers_it_would_wait_is_refused_in_words():
    """/proc/kmsg says it is a regular file and, opened without blocking, answers a read with EAGAIN while it has no
    message, which Python reads as None: `aotcuda inspect` and `aotcuda.load` raised a raw TypeError ('NoneType'
    object is not subscriptable) from the zip's end-record scan, and --inputs read it as empty."""
    import aotcuda
    from aotcuda.errors import PackageError

    if not _kmsg_would_wait():
        pytest.skip("no /proc/kmsg without messages here (root on Linux)")
    with pytest.raises(PackageError, match=r"'/proc/kmsg' cannot be read \(it has no data to read yet "
                                           r"and would wait for some \(a file of the kernel"):
        aotcuda.load("/proc/kmsg")
    result = CliRunner().invoke(main, ["inspect", "/proc/kmsg"])
    assert result.exit_code == 1 and "would wait for some" in result.output and "TypeError" not in result.output, \
        result.output
    _refused("/proc/kmsg", r"/proc/kmsg: cannot be read \(it has no data to read yet and would wait")


@pytest.mark.parametrize("saved, says", [
    ({"args": 5}, r"its 'args' has type int; it must be a tuple or list of the positional arguments"),
    ({"args": [torch.ones(1)], "kwargs": 5}, r"its 'kwargs' has type int; it must be a dict of arguments by name"),
    ({"args": [torch.ones(1)], "kwargs": [1, 2]}, r"its 'kwargs' has type list; it must be a dict"),
    ({"args": [torch.ones(1)], "kwargs": {1: torch.ones(1)}}, r"its 'kwargs' has the key 1 \(int\); its keys must be "
                                                              r"forward's argument names \(str\)"),
    ({"args": [torch.ones(1)], "kwarg": {}}, r"holds 'kwarg' beside 'args'; the form .* has only those two keys"),
    ({1: torch.ones(1)}, r"it is a dict, so it must be .*; as arguments by name, it has the key 1 \(int\)"),
    (5, r"holds a value of type int; expected \{'args'"),
])
def test_an_inputs_file_of_the_wrong_inner_types_says_what_it_must_hold(tmp_path, saved, says):
    """These reached raw TypeErrors (tuple(5), dict(5), keywords must be strings)."""
    torch.save(saved, tmp_path / "inputs.pt")
    _refused(tmp_path / "inputs.pt", says)


def test_inputs_args_of_one_tensor_are_one_argument(tmp_path):
    """{'args': tensor} was split into its rows by tuple(tensor); it is one positional argument, as a bare tensor."""
    from aotcuda.cli_inputs import load_inputs

    torch.save({"args": torch.ones(3, 2)}, tmp_path / "inputs.pt")
    args, kwargs = load_inputs(str(tmp_path / "inputs.pt"))
    assert len(args) == 1 and args[0].shape == (3, 2) and kwargs == {}


def test_factory_import_and_call_errors_say_where_and_what_to_change(runner, tmp_path):
    """A new user's reports: the path form did not find a helper module beside the model file (python does),
    an error raised while importing the user's module came without saying so, and a factory that takes
    arguments was reported at aotcuda's own line with exit 1."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "helper.py").write_text("import torch\ndef build():\n    return torch.nn.Identity()\n")
    (tmp_path / "sub" / "model.py").write_text("import helper\ndef make():\n    return helper.build()\n"
                                               "def needs(a, b):\n    return None\n")
    (tmp_path / "broken.py").write_text("import torch\nx = 1 / 0\ndef make():\n    pass\n")
    result = runner.invoke(main, ["lower", f"{tmp_path}/sub/model.py:make", "-o", str(tmp_path / "m.pt2")])
    assert result.exit_code == 2 and "it returned an Identity instance" in result.output, result.output  # imported
    result = runner.invoke(main, ["lower", f"{tmp_path}/sub/model.py:needs", "-o", str(tmp_path / "m.pt2")])
    assert result.exit_code == 2 and "cannot be called with no arguments" in result.output, result.output
    assert "missing 2 required positional arguments" in result.output and "cli_inputs.py" not in result.output
    result = runner.invoke(main, ["lower", f"{tmp_path}/sub/model:make", "-o", str(tmp_path / "m.pt2")])
    assert result.exit_code == 2 and "is a path but not a .py file" in result.output, result.output
    result = runner.invoke(main, ["lower", f"{tmp_path}/broken.py:make", "-o", str(tmp_path / "m.pt2")])
    assert result.exit_code == 1, result.output
    assert (f"importing {tmp_path}/broken.py raised ZeroDivisionError: division by zero (at {tmp_path}/broken.py:2, "
            "in <module>)") in result.output, result.output


def test_a_model_file_or_factory_that_exits_is_an_error_not_a_silent_exit(runner, tmp_path):
    """The lower() API breaker (2026-12-06): a factory calling sys.exit(0) ended `aotcuda lower` with exit 0, no
    package and no word (a script's `aotcuda lower ... && aotcuda run ...` went on); a model file whose top level
    exits (argparse's parse_args() outside `if __name__ == "__main__":` reads aotcuda's own arguments and exits 2,
    or sys.exit("usage: ...")) ended it with that code and, at best, the file's usage line."""
    (tmp_path / "script.py").write_text("import sys\nsys.exit('usage: python script.py ARG')\ndef make():\n    pass\n")
    (tmp_path / "quits.py").write_text("import sys\ndef make():\n    sys.exit(0)\n")
    for spec, says in ((f"{tmp_path}/script.py:make", f"importing {tmp_path}/script.py exited (SystemExit: 'usage: "
                                                      f"python script.py ARG') (at {tmp_path}/script.py:2, in <module>);"
                                                      " a file aotcuda imports must not exit: put the script part of it "
                                                      "under `if __name__ == \"__main__\":`"),
                       (f"{tmp_path}/quits.py:make", f"the factory {tmp_path}/quits.py:make exited (SystemExit: 0) (at "
                                                     f"{tmp_path}/quits.py:3, in make); FACTORY must return the model "
                                                     "and its inputs, not exit")):
        result = runner.invoke(main, ["lower", spec, "-o", str(tmp_path / "m.pt2"), "--device", "cpu"])
        assert result.exit_code == 1, result.output
        assert says in " ".join(result.output.split()), result.output
    assert not (tmp_path / "m.pt2").exists()


def test_a_numpy_file_or_a_package_given_as_inputs_is_named_for_what_it_is(tmp_path):
    import numpy

    numpy.save(tmp_path / "a.npy", numpy.zeros(3))
    _refused(tmp_path / "a.npy", r"is a NumPy \.npy file; --inputs reads a torch\.save file")
    import safetensors.torch  # what `aotcuda serve` takes: a new user passed it to `aotcuda run` (2026-12-05)

    safetensors.torch.save_file({"x": torch.ones(2, 16)}, tmp_path / "a.safetensors")
    _refused(tmp_path / "a.safetensors", r"is a safetensors file \(what `aotcuda serve` takes\); --inputs reads a "
                                         r"torch\.save file: .*torch\.save\(safetensors\.torch\.load_file\(PATH\), "
                                         r"'inputs\.pt'\)")
    torch.save(safetensors.torch.load_file(tmp_path / "a.safetensors"), tmp_path / "a.pt")  # the fix it gives
    from aotcuda.cli_inputs import load_inputs

    assert load_inputs(str(tmp_path / "a.pt"))[1]["x"].shape == (2, 16)
    with zipfile.ZipFile(tmp_path / "p.pt2", "w") as package:  # the shape of an AOTInductor package's archive
        package.writestr("p/archive_format", "pt2")
        package.writestr("p/data/aotinductor/model/m.wrapper.so", b"\0")
    _refused(tmp_path / "p.pt2", r"is an AOTInductor package, not inputs: `aotcuda run PACKAGE --inputs FILE`")


def test_numpy_values_in_a_torch_save_inputs_file_are_named_with_the_fix(tmp_path):
    """A new user's trial (2026-12-05): torch.save((np_array,), 'in.pt') given to `aotcuda run --inputs` was refused as
    holding "bytes (_codecs.encode), which inputs never do", which named neither the array nor torch.from_numpy."""
    import numpy

    for name, value in (("array", numpy.ones((4, 32), dtype=numpy.float32)), ("scalar", numpy.float32(3.0))):
        torch.save((value,), tmp_path / f"{name}.pt")
        _refused(tmp_path / f"{name}.pt", r"holds a NumPy value \(numpy\..*\), which --inputs does not read .*"
                                          r"torch\.from_numpy\(array\)")
    torch.save((torch.from_numpy(numpy.ones((4, 32), dtype=numpy.float32)),), tmp_path / "fixed.pt")  # the fix
    from aotcuda.cli_inputs import load_inputs

    assert load_inputs(str(tmp_path / "fixed.pt"))[0][0].shape == (4, 32)


def test_inspect_lists_what_the_code_calls_whatever_the_kernels_record_says():
    """A second review edited `"kernels": []` into a signature and inspect showed no kernels: the record is
    read from the package, so it may add lines and refuse more, never hide a call or allow a kernel."""
    from aotcuda.cli import _as_lowered
    from aotcuda.lowering.fallbacks import FallbackKernel

    scanned_missing, scanned_library = [FallbackKernel("polar", "polar")], [FallbackKernel("cumsum", "cumsum")]
    assert _as_lowered(scanned_missing, scanned_library, [], []) == (scanned_missing, scanned_library,
                                                                      ["polar", "cumsum"])
    lined = FallbackKernel("cumsum", "cumsum", ["n"], ["m.py:3: y = z.cumsum(0)"])  # complex: lower refused it
    allowed_polar = FallbackKernel("polar", "polar")
    complex_op = FallbackKernel("aten.mul.Tensor on complex values", "aten.mul.Tensor", ["mul"], ["m.py:4: z * z"])
    missing, library, unlike = _as_lowered(scanned_missing, scanned_library, [lined, complex_op], [allowed_polar])
    assert [k.name for k in missing] == ["polar", "cumsum", "aten.mul.Tensor on complex values"]
    assert library == [] and unlike == [] and missing[1].sources == ["m.py:3: y = z.cumsum(0)"]


# --- the pickle of an inputs file, bounded before torch.load runs it (review 6) --------------------------------

def _views_file(path, views: int, method=zipfile.ZIP_STORED, tail: bytes = b"e.") -> str:
    """A torch.save file of [t[0:1], t[1:2]] whose data.pkl then makes ``views`` more views of t, 5 bytes each:
    BINGET the rebuild function, BINGET its memoized arguments, REDUCE (review 6: an 88 KB file of 12M views
    took 6.7 GiB and 3 minutes before the 100,000-values bound was checked)."""
    import io

    buffer = io.BytesIO()
    t = torch.zeros(4)
    torch.save([t[0:1], t[1:2]], buffer)
    with zipfile.ZipFile(buffer) as base, zipfile.ZipFile(path, "w") as out:
        name = next(n for n in base.namelist() if n.endswith("data.pkl"))
        pickle = base.read(name)
        assert pickle[148:151] == b"q\x0bR"  # the arguments memoized as 11, then the second REDUCE
        for info in base.infolist():
            data = pickle[:150] + b"h\x01h\x0bR" * views + tail if info.filename == name else base.read(info)
            out.writestr(info.filename, data, method if info.filename == name else zipfile.ZIP_STORED)
    return str(path)


def _no_torch_load(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("torch.load ran")

    monkeypatch.setattr(torch, "load", refuse)


def test_an_inputs_pickle_of_many_views_is_refused_before_torch_load_runs_it(tmp_path, monkeypatch):
    """Stored (no ratio to check): its opcodes are counted (REDUCEs, and the items APPENDS puts in the list) up to
    the bound, and nothing is built. Deflated: a data.pkl read whole is ratio-checked from 1 MiB, as a package's
    JSON is."""
    from aotcuda.cli_inputs import MAX_INPUTS_PICKLE_CALLS

    stored = _views_file(tmp_path / "views.pt", MAX_INPUTS_PICKLE_CALLS + 1)
    deflated = _views_file(tmp_path / "deflated.pt", 250_000, zipfile.ZIP_DEFLATED)
    assert os.path.getsize(deflated) < 16_000
    _no_torch_load(monkeypatch)

    def both_refused():
        _refused(stored, r"views.pt: its pickle 'archive/data.pkl' would make more than 500,000 calls .* before "
                         r"torch.load ran any \(at least [\d,]+ objects, 500,00\d calls in [\d,]+ opcodes\)")
        _refused(deflated, r"deflated.pt'?: its pickle 'archive/data.pkl' would inflate from 0.0 MiB to 1.2 MiB "
                           r".*more than the 200x limit.*if you trust this file, raise the limit: set "
                           r"AOTCUDA_MAX_COMPRESSION_RATIO \(0: no limit\)$")  # not aotcuda.load's argument

    # the scan stops at the bound: ~1 s of CPU on an idle machine, 2.8 s beside others' work, where the wall clock
    # read 29 s (load average 8 on 2 cores) against this bound; CPU time, one run (least_time.py)
    took, _ = least_cpu_seconds(both_refused, runs=1)
    assert took < 20, took
    # Each entry named data.pkl is counted (torch reads the one under the first entry's folder), in one reading of
    # the directory.
    with zipfile.ZipFile(stored) as source, zipfile.ZipFile(tmp_path / "second.pt", "w") as second:
        second.writestr("archive/data.pkl", _pickle_of(tmp_path, torch.ones(2)))
        for info in source.infolist():
            if info.filename != "archive/data.pkl":
                second.writestr(info.filename, source.read(info))
        second.writestr("other/data.pkl", source.read("archive/data.pkl"))
    _refused(tmp_path / "second.pt", r"its pickle 'other/data.pkl' would make more than 500,000 calls")
    # torch's reader finds the record whatever the case of its name (review 7: DATA.PKL skipped every bound)
    with zipfile.ZipFile(stored) as source, zipfile.ZipFile(tmp_path / "upper.pt", "w") as upper:
        for info in source.infolist():
            upper.writestr(info.filename.replace("data.pkl", "DATA.PKL"), source.read(info))
    _refused(tmp_path / "upper.pt", r"its pickle 'archive/DATA.PKL' would make more than 500,000 calls")


def test_an_inputs_pickle_of_colliding_keys_or_sets_is_refused_before_torch_load(tmp_path, monkeypatch):
    """Review 7: int keys that all hash to 0 (``k * (2**61 - 1)``) made each dict insertion walk the ones before
    (100,000 of them, 1.3 MB: 53 s to load) within the count; a set's items are hashed too, and inputs hold none."""
    from aotcuda.cli_inputs import MAX_INPUTS_PICKLE_HASHED

    torch.save({"args": ({k * (2**61 - 1): 0 for k in range(MAX_INPUTS_PICKLE_HASHED + 1)},)}, tmp_path / "keys.pt")
    torch.save({"args": ({1, 2},)}, tmp_path / "set.pt")
    torch.save({"args": ({k: torch.ones(1) for k in range(100)},)}, tmp_path / "few.pt")  # a few int keys: read
    _no_torch_load(monkeypatch)
    _refused(tmp_path / "keys.pt", rf"puts more than {MAX_INPUTS_PICKLE_HASHED:,} keys that are not strings into "
                                   r"dicts .*nothing of it was run")
    _refused(tmp_path / "set.pt", r"its pickle 'set/data.pkl' holds a set, which inputs never do")
    monkeypatch.undo()
    from aotcuda.cli_inputs import load_inputs

    assert torch.equal(load_inputs(str(tmp_path / "few.pt"))[0][0][99], torch.ones(1))



def test_an_inputs_pickle_naming_a_counter_by_its_python_2_module_is_refused_before_torch_load(tmp_path, monkeypatch):
    """The breaker (2026-12-05): torch's weights-only unpickler reads ``UserDict Counter`` as ``collections.Counter``
    (pickle's Python 2 module table), which the count refused only under its own name: a 240 KB file of 20,000 int
    keys that hash alike, called into it (one REDUCE), held torch.load 4.5 s (100,000: minutes; quadratic)."""
    items = b"".join(b"\x8a\x09" + (k * (2**61 - 1)).to_bytes(9, "little", signed=True) for k in range(1, 1001))
    for module, name in ((b"UserDict", b"Counter"), (b"UserList", b"Counter")):
        called = (b"\x80\x02}X\x04\x00\x00\x00args)s" + b"X\x01\x00\x00\x00zc" + module + b"\n" + name + b"\n(]("
                  + items + b"etRs.")  # {'args': (), 'z': Counter([k * (2**61 - 1) for k in ...])}
        torch.save({"args": ()}, tmp_path / "base.pt")
        with zipfile.ZipFile(tmp_path / "base.pt") as base, zipfile.ZipFile(tmp_path / "counter.pt", "w") as out:
            for info in base.infolist():
                out.writestr(info, called if info.filename.endswith("data.pkl") else base.read(info))
        _no_torch_load(monkeypatch)
        _refused(tmp_path / "counter.pt", r"its pickle 'base/data.pkl' holds a Counter, which inputs never do")
        monkeypatch.undo()


class _Called:
    """Pickled as a call of ``function`` with ``args`` (what a hostile inputs file writes)."""

    def __init__(self, function, args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def test_an_inputs_pickle_whose_calls_build_gigabytes_is_refused_before_torch_load(tmp_path, monkeypatch):
    """The breaker (2026-12-05): torch.load calls what torch's weights-only unpickler allows, and some of that builds
    what its arguments size: 1.7 KB of ``_rebuild_device_tensor_from_cpu_tensor`` on an expanded uint8 view made a
    2 GiB float64 tensor (``.to()``), 837 bytes of ``bytearray(2**30)`` 1 GiB, before the dense-size check that
    follows torch.load could refuse them."""
    import torch._utils

    view = torch.zeros(1, dtype=torch.uint8).expand(2**28)
    torch.save({"args": (_Called(torch._utils._rebuild_device_tensor_from_cpu_tensor,
                                 (view, torch.float64, "cpu", False)),)}, tmp_path / "dense.pt")
    torch.save({"args": (_Called(bytearray, (2**30,)),)}, tmp_path / "zeros.pt")
    torch.save({"args": ([_Called(torch.FloatTensor, ([0.5] * 1000,))] * 2,)}, tmp_path / "legacy.pt")
    _no_torch_load(monkeypatch)
    _refused(tmp_path / "dense.pt", r"holds a tensor rebuilt for a device other than the CPU or CUDA .*nothing of it "
                                    r"was run")
    _refused(tmp_path / "zeros.pt", r"holds a bytearray, which inputs never do")
    _refused(tmp_path / "legacy.pt", r"holds a legacy tensor constructor \(torch.FloatTensor\)")


def test_an_inputs_pickle_handing_one_list_to_many_calls_is_refused_before_torch_load(tmp_path, monkeypatch):
    """The breaker (2026-12-05): torch.Size (which inputs may hold) copies the list it is given, and a pickle hands
    one memoized list to any number of calls: 4.9 MB (a list of 1M ints, 400 calls) took `aotcuda run` to 3.4 GB in
    torch.load, before the structure check could count what it returned."""
    from aotcuda.cli_inputs import MAX_INPUTS_PICKLE_COPIED

    shared = list(range(MAX_INPUTS_PICKLE_COPIED // 50))
    torch.save({"args": ([_Called(torch.Size, (shared,)) for _ in range(60)],)}, tmp_path / "sizes.pt")
    _no_torch_load(monkeypatch)
    _refused(tmp_path / "sizes.pt", rf"hands more than {MAX_INPUTS_PICKLE_COPIED:,} values to its calls")

def test_an_inputs_pickle_of_a_deeply_nested_tuple_is_refused_before_torch_load(tmp_path, monkeypatch):
    """Review 10: Python hashes a tuple by recursing in C, without the recursion limit. A 400 KB data.pkl of a
    tuple nested 400,000 deep (EMPTY_TUPLE then TUPLE1 opcodes, 1 byte a level: within every count) used as a dict
    key made torch.load fill the dict and `aotcuda run` die of SIGSEGV. The pickle's nesting is now counted from
    its opcodes; a call nested as deep as the structure check allows (64 levels) is read."""
    from aotcuda.cli_inputs import MAX_INPUTS_PICKLE_DEPTH, load_inputs

    levels = 400_000
    pickle = (b"\x80\x02}" + b"X\x04\x00\x00\x00args)s" + b")" + b"\x85" * levels + b"K\x01s.")  # {'args': (), t: 1}
    torch.save({"args": ()}, tmp_path / "base.pt")
    with zipfile.ZipFile(tmp_path / "base.pt") as base, zipfile.ZipFile(tmp_path / "deep.pt", "w") as out:
        for info in base.infolist():
            out.writestr(info, pickle if info.filename.endswith("data.pkl") else base.read(info))
    value = torch.ones(2)
    for _ in range(62):
        value = [value]
    torch.save({"args": (value,)}, tmp_path / "nested.pt")  # 64 levels with the dict and the args tuple
    _no_torch_load(monkeypatch)
    _refused(tmp_path / "deep.pt", rf"its pickle 'base/data.pkl' nests containers more than {MAX_INPUTS_PICKLE_DEPTH} "
                                   r"levels deep .*nothing of it was run")
    monkeypatch.undo()
    assert torch.equal(torch.utils._pytree.tree_leaves(load_inputs(str(tmp_path / "nested.pt")))[0], torch.ones(2))


def _pickle_of(tmp_path, value) -> bytes:
    torch.save(value, tmp_path / "value.pt")
    with zipfile.ZipFile(tmp_path / "value.pt") as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))


def test_an_inputs_pickle_over_its_size_or_opcode_bound_is_refused_before_torch_load(tmp_path, monkeypatch):
    """The bounds, lowered here to keep the files small: a data.pkl's size (before it is read), and the opcodes of
    one that builds nothing counted (BINGET pushes a reference: a stack of them costs the unpickler's memory)."""
    from aotcuda import cli_inputs

    monkeypatch.setattr(cli_inputs, "MAX_INPUTS_PICKLE_BYTES", 1 << 16, raising=False)
    monkeypatch.setattr(cli_inputs, "MAX_INPUTS_PICKLE_OPCODES", 10_000, raising=False)
    large = _views_file(tmp_path / "large.pt", 20_000)
    references = _views_file(tmp_path / "references.pt", 0, tail=b"h\x01" * 20_000 + b".")
    _no_torch_load(monkeypatch)
    _refused(large, r"large.pt: its pickle \('archive/data.pkl'\) takes \d+ bytes, more than the 65536 bytes .*nothing of "
                    r"it was run")  # bytes under a limit of 1 MiB (was: "takes 0.1 MiB, more than the 0 MiB")
    _refused(references, r"its pickle 'archive/data.pkl' runs more than 10,000 pickle opcodes")


def test_inputs_files_torch_save_writes_are_read_and_far_inside_the_pickle_bounds(tmp_path):
    """Tuples and dicts of tensors nested a few levels, views of one storage, one tensor held twice, numbers: read
    as saved. 2,000 tensors take a fiftieth of each bound or less, so 100,000 (MAX_INPUTS_VALUES) fit."""
    from aotcuda.cli_inputs import (MAX_INPUTS_PICKLE_BYTES, MAX_INPUTS_PICKLE_CALLS, MAX_INPUTS_PICKLE_COPIED,
                                    MAX_INPUTS_PICKLE_HASHED, MAX_INPUTS_PICKLE_OBJECTS, MAX_INPUTS_PICKLE_OPCODES,
                                    load_inputs)
    from aotcuda.pickle_count import count_pickle

    base = torch.arange(12.0)
    cache = [(base[i:i + 2], base.view(3, 4)[:, i % 4]) for i in range(4)]
    saved = {"args": (base.view(3, 4), {"cache": cache, "pair": (base, base)}), "kwargs": {"scale": 0.5, "n": 3}}
    torch.save(saved, tmp_path / "real.pt")
    args, kwargs = load_inputs(str(tmp_path / "real.pt"))
    assert torch.equal(args[0], base.view(3, 4)) and torch.equal(args[1]["cache"][3][1], base.view(3, 4)[:, 3])
    assert args[1]["pair"][0] is args[1]["pair"][1] and kwargs == {"scale": 0.5, "n": 3}
    many = {"args": ([torch.zeros(1, 2, 3, 4) for _ in range(1000)],
                     {f"x{i}": base[i % 10:] for i in range(1000)})}
    torch.save(many, tmp_path / "many.pt")
    with zipfile.ZipFile(tmp_path / "many.pt") as archive:
        pickle = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    count = count_pickle(pickle, MAX_INPUTS_PICKLE_OBJECTS, MAX_INPUTS_PICKLE_OPCODES, MAX_INPUTS_PICKLE_CALLS,
                         MAX_INPUTS_PICKLE_HASHED)
    assert not count.stopped and not count.refused and 50 * len(pickle) < MAX_INPUTS_PICKLE_BYTES
    assert 50 * count.objects <= MAX_INPUTS_PICKLE_OBJECTS and 50 * count.opcodes < MAX_INPUTS_PICKLE_OPCODES
    assert 50 * count.calls <= MAX_INPUTS_PICKLE_CALLS and count.hashed == 0
    assert 50 * count.copied <= MAX_INPUTS_PICKLE_COPIED
    assert len(load_inputs(str(tmp_path / "many.pt"))[0][0]) == 1000


def test_saving_replaces_what_another_process_put_at_the_path_and_never_follows_or_waits_on_it(tmp_path):
    """Found by a breaker (review 9): --save-outputs (and --save-inputs) was checked, then written by name after the
    run: a symlink planted meanwhile made torch.save overwrite its target, a FIFO left `aotcuda run` waiting."""
    from aotcuda.cli import _saved

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "out.pt"
    link.symlink_to(victim)
    value = {"y": torch.randn(3)}
    _saved(value, str(link))
    assert victim.read_text() == "keep me" and not link.is_symlink()
    assert torch.equal(torch.load(link)["y"], value["y"])
    assert oct(link.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # as a plain open makes it
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    _saved(value, str(fifo))  # replaced at once: nothing waits for a reader
    assert fifo.is_file() and torch.equal(torch.load(fifo)["y"], value["y"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".aotcuda-")] == []  # no partial file left
    (tmp_path / "adir").mkdir()
    with pytest.raises(AotcudaError, match="Is a directory; a folder is at that path: name a file"):
        _saved(value, str(tmp_path / "adir"))  # a directory is not replaced
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".aotcuda-")] == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_meta_inputs_and_a_long_stray_key_get_their_named_errors(demo, runner, tmp_path):
    """Found by a breaker (review 9): a meta tensor in --inputs gave torch's raw 'Cannot copy out of meta tensor'
    (run moved it to the program's device before the checks), and a 20 MB key beside 'args' was echoed whole."""
    lowered, _, x = demo
    torch.save({"args": (torch.empty(2, 9, x.shape[-1], device="meta"),), "kwargs": {}}, tmp_path / "meta.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "meta.pt")])
    assert result.exit_code == 1 and "is on meta" in result.output, result.output
    assert "Cannot copy out of meta tensor" not in result.output
    torch.save({"args": (torch.randn(2, 9, x.shape[-1]),), "k" * 1_000_000: 1}, tmp_path / "key.pt")
    result = runner.invoke(main, ["run", lowered.package_path, "--inputs", str(tmp_path / "key.pt")])
    assert result.exit_code == 2 and "beside 'args'" in result.output and len(result.output) < 5000


def test_cxx_traces_are_left_out_of_stderr_and_what_comes_before_an_abort_still_shows():
    """aotcuda run's call writes stderr through a filter in a child process: the generated code's C++ exception
    trace (the 'Error:' line, 'Exception raised from', ~50 frames) is left out, everything else passes, and what
    the process writes just before it dies (an abort) still reaches the terminal."""
    code = ("import os\nfrom aotcuda.cli import _stderr_without_cxx_traces\nwith _stderr_without_cxx_traces():\n"
            "    os.write(2, b'kept before\\nError: boom\\nException raised from k.cpp:3 (most recent call first):\\n'\n"
            "                b'frame #0: a + 0x1\\n<omitting python frames>\\nframe #1: b\\n\\nError: not a trace\\n'\n"
            "                b'terminate called after throwing\\n')\n    os.abort()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr.decode() == "kept before\nError: not a trace\nterminate called after throwing\n"


# A stand-in for g++ whose preprocessing of Inductor's header (``_precompile_header``: g++ -E header.hpp -o header.i
# in a temporary folder) is done by a child that goes on writing into that folder, as cc1plus does under the g++
# driver; every other call runs the real g++. MARK names the file it writes the folder's path to once the child runs.
_WRITING_COMPILER = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
if "-E" in args and any(arg.endswith("header.hpp") for arg in args):
    folder = os.path.dirname(args[args.index("-o") + 1])
    sys.exit(subprocess.Popen([sys.executable, "-c", WRITER, folder]).wait())
os.execv("{gxx}", ["{gxx}", *args])
"""
_WRITER = """
import os, sys, time
folder, end = sys.argv[1], time.monotonic() + 20
with open(os.environ["MARK"], "w") as mark:
    mark.write(folder)
for index in range(10**9):
    if time.monotonic() > end:
        break
    try:
        os.close(os.open(os.path.join(folder, f"part{index}"), os.O_CREAT | os.O_WRONLY, 0o600))
    except FileNotFoundError:  # the folder is gone
        break
"""


def test_sigint_to_lowers_pid_alone_during_the_compile_ends_as_ctrl_c_does(tmp_path):
    """A new user's trial (nu39, 2026-12-07): `kill -INT PID` of `aotcuda lower` in its compile (a supervisor's way;
    the terminal's Ctrl-C, which the whole process group gets, already ended in 130) said `error: InductorError:
    OSError: [Errno 39] Directory not empty: '/tmp/tmp...'`, exited 1, and left that folder: subprocess.run killed the
    g++ driver, but the child compiler it ran got no signal and went on writing into the temporary folder torch was
    removing. The command passes the SIGINT on to the processes it started in its group now, as the terminal does:
    130, the Ctrl-C lines, no folder left. One lowering of a small model in a child, stopped in its compile."""
    import shutil

    (tmp_path / "tiny.py").write_text("import torch\n\ndef make():\n    torch.manual_seed(0)\n"
                                      "    return torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),)\n")
    compiler = tmp_path / "bin" / "g++"
    compiler.parent.mkdir()
    compiler.write_text(_WRITING_COMPILER.format(python=sys.executable, gxx=shutil.which("g++"))
                        .replace("WRITER", repr(_WRITER)))
    compiler.chmod(0o755)
    temporary, mark = tmp_path / "tmp", tmp_path / "mark"
    temporary.mkdir()
    env = {**os.environ, "CXX": str(compiler), "MARK": str(mark), "TMPDIR": str(temporary), "COLUMNS": "200"}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)  # the cache under TMPDIR: the stand-in compiler's own
    child = subprocess.Popen([sys.executable, "-m", "aotcuda", "lower", "tiny.py:make", "-o", "tiny.pt2",
                              "--device", "cpu"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, process_group=0)  # no signal of ours reaches pytest
    try:
        deadline = time.monotonic() + 240
        while not (mark.exists() and mark.read_text()) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists(), f"the compile never preprocessed its header: {child.poll()}"
        time.sleep(0.2)  # the writer is well into its folder
        os.kill(child.pid, signal.SIGINT)  # this process alone, as `kill -INT PID`
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    folder = pathlib.Path(mark.read_text())
    time.sleep(0.5)  # a writer nobody stopped would still be writing
    assert child.returncode == 130 and "error:" not in err, err
    assert err.endswith(f"No package was written to {tmp_path / 'tiny.pt2'}.\nAborted!\n"), err
    assert not folder.exists(), f"torch's temporary folder was left, {len(os.listdir(folder))} files in it"
    assert not (tmp_path / "tiny.pt2").exists()


def test_the_stderr_filter_runs_without_a_stderr_and_lives_through_ctrl_c():
    """(review 11) With file descriptor 2 closed (a daemon, ``2>&-``: Python's sys.stderr is None) aotcuda run's
    filter raised AttributeError before the call and the command exited 1 with nothing shown; and a Ctrl-C
    (SIGINT to the terminal's process group, the filter included) printed the filter's own
    ``KeyboardInterrupt`` traceback and stopped passing on what the call still wrote."""
    code = ("import os, sys, time\nfrom aotcuda.cli import _stderr_without_cxx_traces\n"
            "with _stderr_without_cxx_traces():\n    os.write(1, b'ran\\n')\n")
    closed = subprocess.run(["bash", "-c", 'exec 2>&-; exec "$0" -c "$1"', sys.executable, code],
                            capture_output=True, timeout=60)
    assert (closed.returncode, closed.stdout) == (0, b"ran\n"), closed
    # the call goes on after the Ctrl-C (C++ code answers it when it returns): its handler here only notes it
    code = ("import os, signal, time\nfrom aotcuda.cli import _stderr_without_cxx_traces\n"
            "signal.signal(signal.SIGINT, lambda *_: None)\nwith _stderr_without_cxx_traces():\n"
            "    os.write(2, b'before\\n')\n    time.sleep(2)\n    os.write(2, b'after the interrupt\\n')\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    assert child.stderr.readline() == b"before\n"  # through the filter: it runs
    os.killpg(child.pid, signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert (child.returncode, err.decode()) == (0, "after the interrupt\n")  # no traceback of the filter's


# --- output that cannot be written --------------------------------------------------------------------------

def _small_package(path, signature=None):
    """A package inspect reads whole (metadata, signature, one generated source) in no time: nothing is lowered;
    ``signature``: its aotcuda signature, as JSON text (else one of no inputs and no outputs)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/archive_format", "pt2")
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper_metadata.json", '{"AOTI_DEVICE_KEY": "cpu"}')
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper.so", b"\x7fELF")
        archive.writestr("pkg/data/aotinductor/model/abc.wrapper.cpp", "void run() { aoti_torch_cpu_foo(x); }\n")
        archive.writestr("pkg/aotcuda/signature.json", signature or '{"format": "aotcuda.signature", "version": 2, '
                                                                      '"inputs": [], "outputs": []}')
    return str(path)


def test_inspect_says_each_unbounded_data_dependent_size_once(tmp_path):
    """(new user) A package with one unbounded data-dependent size, an output's width u0, printed two "unbounded
    data-dependent size" lines for it: one for the output dim, one for the same u0 in data_dependent_sizes."""
    import json

    u0, u1 = ({"expr": name, "min": 1, "max": None} for name in ("u0", "u1"))
    signature = {"format": "aotcuda.signature", "version": 2,
                 "inputs": [{"name": "lengths", "dtype": "int64", "device": "cpu", "shape": [2]}],
                 "outputs": [{"name": "out", "dtype": "bool", "device": "cpu", "shape": [2, u0]}],
                 "data_dependent_sizes": [u0]}

    def inspected(signature):
        path = _small_package(tmp_path / "p.pt2", json.dumps(signature))
        result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        return [line for line in result.output.splitlines() if line.startswith("unbounded data-dependent size")]

    assert inspected(signature) == [
        "unbounded data-dependent size: output 'out' dim 1 (u0) is computed from an input's values with no upper "
        "bound (torch._check(n <= N) in the model bounds it); aotcuda serve refuses it without "
        "--allow-unbounded-outputs"]
    # two outputs of one symbol: one line for both; an intermediate size of another symbol: a line of its own
    signature["outputs"].append({"name": "idx", "dtype": "int64", "device": "cpu", "shape": [{**u0, "expr": "2*u0"}]})
    signature["data_dependent_sizes"] = [u0, u1, {**u0, "expr": "2*u0"}]
    lines = inspected(signature)
    assert len(lines) == 2, lines
    assert lines[0].startswith("unbounded data-dependent size: output 'out' dim 1 (u0), output 'idx' dim 0 (2*u0) are ")
    assert lines[1].startswith("unbounded data-dependent size: the program computes a tensor size, u1, from")


def _aotcuda(args, cwd, stdout, shell_redirect=""):
    """``python -m aotcuda ARGS`` with its stdout ``stdout`` (a descriptor), or as bash redirects it
    (``shell_redirect``: ``>&-`` closes it: subprocess's DEVNULL is an open file)."""
    command = [sys.executable, "-m", "aotcuda", *args]
    if shell_redirect:
        command = ["bash", "-c", f'exec "$0" "$@" {shell_redirect}', *command]
    return subprocess.run(command, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def _one_error_line(result, says: str):
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: cannot write the output to "
                                                                             f"stdout ({says}); "), result.stderr


def test_every_command_refuses_a_closed_stdout_before_any_work(tmp_path):
    """`aotcuda inspect P >&-` exited 0 having written nothing (rich writes nowhere where Python has no stdout);
    now every command (and --help, --version) exits 1 with one line that says so, before any work: lower and
    demo write no package, serve starts nothing."""
    package = _small_package(tmp_path / "p.pt2")
    torch.save((torch.ones(2),), tmp_path / "one.pt")
    (tmp_path / "model.py").write_text("def make():\n    raise SystemExit('the factory ran')\n")
    for args in (["inspect", package], ["run", package, "--inputs", "one.pt"], ["lower", "model:make", "-o", "m.pt2"],
                 ["demo", "--output", "demo.pt2"], ["serve", package], ["--help"], ["--version"]):
        result = _aotcuda(args, tmp_path, None, ">&-")
        _one_error_line(result, "it is closed")
        assert "> /dev/null to discard it" in result.stderr, result.stderr
    result = _aotcuda(["inspect", package], tmp_path, None, "1</dev/null")  # open, but not for writing
    _one_error_line(result, "it is open for reading only")
    assert sorted(os.listdir(tmp_path)) == ["model.py", "one.pt", "p.pt2"]


def test_output_to_a_full_disk_exits_1_with_one_line(demo, tmp_path):
    """`> /dev/full`: inspect said `error: OSError: [Errno 28] No space left on device` (as if the command had
    failed, not its output), --help ended in a traceback, and run's table (after the whole run) the same."""
    lowered, _, x = demo
    package = _small_package(tmp_path / "p.pt2")
    torch.save({"args": (x,), "kwargs": {}}, tmp_path / "inputs.pt")
    with open("/dev/full", "w") as full:
        for args in (["inspect", package], ["--help"], ["--version"],
                     ["run", lowered.package_path, "--inputs", "inputs.pt"]):
            result = _aotcuda(args, tmp_path, full)
            _one_error_line(result, "No space left on device")
            assert "free space where it is written, or send it elsewhere (> FILE)" in result.stderr


def test_a_failed_write_of_help_is_the_same_line_under_aotcuda_debug(runner, tmp_path, monkeypatch):
    """`AOTCUDA_DEBUG=1 aotcuda --help > /dev/full` ended in a traceback: the switch hands on a command's own error as
    it came, and click's --help output was taken for one. A stdout that cannot take --help or --version is the
    user's, whatever the switch: the same one line and exit 1 as without it. A command's own OSError still comes
    whole under the switch."""
    monkeypatch.setenv("AOTCUDA_DEBUG", "1")
    with open("/dev/full", "w") as full:
        for args in (["--help"], ["lower", "--help"], ["--version"]):
            result = _aotcuda(args, tmp_path, full)
            _one_error_line(result, "No space left on device")

    def disk_full(path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(aotcuda.cli, "load_inputs", disk_full)
    torch.save((torch.ones(2),), tmp_path / "one.pt")
    result = runner.invoke(main, ["run", _small_package(tmp_path / "p.pt2"), "--inputs", str(tmp_path / "one.pt")])
    assert isinstance(result.exception, OSError) and result.exception.errno == errno.ENOSPC, result.output
    assert "cannot write the output" not in result.output


def test_a_reader_that_left_ends_the_command_quietly(demo, tmp_path):
    """A broken pipe (`| head -c1` once head has gone; here a pipe whose reader is closed before the command starts,
    so that every write fails): exit 1 and nothing on stderr, no traceback, as Unix tools end quietly (their status,
    141, is death by SIGPIPE; dying so would skip the exit handlers). It was so before, through rich's and click's
    own handlers; now through the one the other output failures take."""
    lowered, _, x = demo
    package = _small_package(tmp_path / "p.pt2")
    torch.save({"args": (x,), "kwargs": {}}, tmp_path / "inputs.pt")
    for args in (["inspect", package], ["--help"], ["--version"], ["run", lowered.package_path, "--inputs", "inputs.pt"]):
        reader, writer = os.pipe()
        os.close(reader)
        try:
            result = _aotcuda(args, tmp_path, writer)
        finally:
            os.close(writer)
        assert (result.returncode, result.stderr) == (1, ""), (args, result.stderr)


def test_inspect_piped_into_head_ends_as_usage_md_says(tmp_path):
    """A new user's README-only trial (2026-12-07): `aotcuda inspect pkg.pt2 | head -1` exits 1, read as a failure
    against "a reader that left (`| head`) ends it quietly". docs/usage.md says the status too now: quietly (no line,
    no traceback) and 1, as every output not all written. Here with bash's own pipe into head, the user's line."""
    package = _small_package(tmp_path / "p.pt2")
    command = f'"$0" -m aotcuda inspect {package} | head -1; exit "${{PIPESTATUS[0]}}"'
    result = subprocess.run(["bash", "-c", command, sys.executable], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert result.stdout.startswith(f"{package}: device cpu") and result.stdout.count("\n") == 1, result.stdout
    assert result.stderr == "" and "Traceback" not in result.stdout, result.stderr
    assert result.returncode in (0, 1), result.returncode  # 0 where the whole output fit before head left
    usage = (pathlib.Path(__file__).parents[1] / "docs" / "usage.md").read_text()
    table = usage[usage.index("| key | type | what it holds |"):].split("\n\n")[0]  # usage.md's table of the keys
    documented = [name for row in table.splitlines()[2:] for name in re.findall(r"`([\w.]+)`", row.split(" | ")[0])]
    assert "inspect model.pt2 | head -1`) ends it\nquietly, with no line and no traceback, and with exit code 1" in usage


def test_serve_serves_on_when_its_status_lines_cannot_be_written():
    """serve's output is status lines, its product the HTTP service: a full disk or a gone reader must not stop
    it (review 12), but it said nothing of the lost lines; now one warning on stderr, once."""
    code = ("import sys\nfrom aotcuda.serving.command import _say\n"
            "_say('serving ...')\n_say('stopped')\nprint('still serving', file=sys.stderr)\n")
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-c", code], stdout=full, stderr=subprocess.PIPE, text=True,
                                timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == ["warning: the status lines cannot be written to stdout (No space left on "
                                          "device); serving goes on without them", "still serving"], result.stderr


@pytest.mark.parametrize("sizes", [["--batch", "100000", "--seq", "100000"], ["--batch", "99999999999999999999"]])
def test_demo_sizes_the_memory_cannot_hold_are_a_usage_error_before_anything_is_made(runner, sizes):
    """`aotcuda demo --batch 100000 --seq 100000` ended in the allocator's raw `RuntimeError: ... DefaultCPUAllocator:
    can't allocate memory: you tried to allocate 10240000000000 bytes`, a batch past int64 in `TypeError: randn():
    ... Overflow when unpacking long long`, and sizes a few GB short of the memory swapped (the breaker, 2026-12-06):
    the demo's tensors are now compared with the memory available first."""
    result = runner.invoke(main, ["demo", "--device", "cpu", *sizes])
    assert result.exit_code == 2, result.output
    assert "the demo's tensors would take about" in result.output and "choose a smaller batch or seq" in result.output
    assert "Lowering" not in result.output and "RuntimeError" not in result.output


DATACLASS_MODEL = '''
from dataclasses import dataclass
import torch

@dataclass
class Batch:
    tokens: torch.Tensor
    weights: torch.Tensor

torch.export.register_dataclass(Batch, serialized_type_name="{name}.Batch")

class Model(torch.nn.Module):
    def forward(self, feats, batch):
        return feats["a"] * batch.tokens + batch.weights

def make():
    torch.manual_seed(0)
    return Model(), ({{"a": torch.randn(2, 3)}}, Batch(torch.randn(2, 3), torch.randn(2, 3)))
'''


def test_save_inputs_of_a_dataclass_input_from_a_model_file_runs(runner, tmp_path):
    """Third new user (2026-12-06): `aotcuda lower models.py:make --save-inputs in.pt` of a model taking a dataclass
    wrote the package, then ended with `error: PicklingError: Can't pickle <class 'models.Batch'>: it's not the same
    object as models.Batch` (the file was run as a module sys.modules did not hold, so pickle imported a second
    copy); and a file holding the dataclass is one `aotcuda run` (torch.load(weights_only=True)) refuses. Now the
    file's module is the one an import finds, and the inputs are saved by inspect's names, which run takes."""
    name = f"dcmodel_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(DATACLASS_MODEL.format(name=name))
    package, inputs = tmp_path / "dc.pt2", tmp_path / "in.pt"
    try:
        result = runner.invoke(main, ["lower", f"{tmp_path / name}.py:make", "-o", str(package), "--device", "cpu",
                                      "--save-inputs", str(inputs)], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        assert f"its tensors by the names aotcuda inspect lists: {name}.Batch is a type" in result.output
        assert set(torch.load(inputs, weights_only=True)) == {"feats_a", "batch_tokens", "batch_weights"}
        result = runner.invoke(main, ["run", str(package), "--inputs", str(inputs), "--save-outputs",
                                      str(tmp_path / "out.pt")])
        assert result.exit_code == 0, result.output
        module = sys.modules[name]
        model, (feats, batch) = module.make()
        torch.testing.assert_close(torch.load(tmp_path / "out.pt"), model(feats, batch), rtol=1e-6, atol=1e-6)
    finally:
        sys.modules.pop(name, None)


def test_a_dim_the_model_needs_a_multiple_of_gets_the_command_line_multiple(runner, tmp_path):
    """Third new user (2026-12-06): a U-Net block (a stride-2 convolution, then a transposed one, concatenated with
    the skip) lowered with `--dynamic x:2:8:64:h --dynamic x:3:8:64` got torch's Python fix (`_h = Dim('_h', min=4,
    max=32)`, `h = 2*_h`) and no hint: the command line's form, SYMBOL*N, was left to be found in the README. The
    hint gives it, with torch's range as sizes, and that option lowers (checked without a compile below)."""
    from aotcuda.cli import _dynamic_fix_hints

    message = ("Suggested fixes:\n    _h = Dim('_h', min=4, max=32)\n    _x_3 = Dim('_x_3', min=4, max=32)\n"
               "    h = 2*_h\n    x_3 = 2*_x_3\n")
    assert _dynamic_fix_hints(message, ("x:2:8:64:h", "x:3:8:64", "y:0:1:8:b*4")) == [
        "on the command line, --dynamic x:2:8:64:h*2 (a multiple of 2: torch's suggested fix)",
        "on the command line, --dynamic x:3:8:64:x_3*2 (a multiple of 2: torch's suggested fix)"]
    result = runner.invoke(main, ["lower", f"{__name__}:down_up_factory", "-o", str(tmp_path / "p.pt2"),
                                  "--device", "cpu", "--dynamic", "x:2:8:64:h"], env={"COLUMNS": "300"})
    assert result.exit_code == 1, result.output
    assert "hint: on the command line, --dynamic x:2:8:64:h*2 (a multiple of 2: torch's suggested fix)" in result.output
    model, (x,) = down_up_factory()
    dynamic = dynamic_shapes_from(("x:2:8:64:h*2",), model, (x,), {})
    aotcuda.lowering.pipeline.before_compile(model, (x,), {}, dynamic)  # exports: no constraint violated


class DownUp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv2d(2, 2, 3, stride=2, padding=1)
        self.up = torch.nn.ConvTranspose2d(2, 2, 2, stride=2)

    def forward(self, x):
        return torch.cat([x, self.up(self.down(x))], 1)


def down_up_factory():
    return DownUp().eval(), (torch.randn(1, 2, 16, 16),)


def test_a_guard_refusing_the_ranges_end_alone_gets_the_narrowed_options():
    """Third new user (2026-12-06): a GPT block's `mask[:T, :T]` over a 128-row buffer, lowered with `--dynamic
    ids:1:2:128:t --dynamic attention_mask:1:2:128:t`, was refused (`the guard Ne(t, 128) does not hold at t = 128`)
    with no hint; the note now gives the range without that end, and the hint the options that carry it, each input
    sharing the symbol (a multiple's bound is no size: no hint for it)."""
    from aotcuda.cli import _dynamic_fix_hints

    notes = "aotcuda: the guard Ne(t, 128) does not hold at t = 128: every other size of t holds it; give its Dim max=127"
    options = ("ids:0:1:8:b", "ids:1:2:128:t", "attention_mask:0:1:8:b", "attention_mask:1:2:128:t")
    assert _dynamic_fix_hints("Constraints violated (t)!", options, notes) == [
        "on the command line, --dynamic ids:1:2:127:t --dynamic attention_mask:1:2:127:t (every other size of t)"]
    low = notes.replace("t = 128", "x_1 = 2").replace("Ne(t, 128)", "Ne(x_1, 2)").replace("of t", "of x_1")
    assert _dynamic_fix_hints("", ("x:1:2:64",), low.replace("max=127", "min=3")) == [
        "on the command line, --dynamic x:1:3:64 (every other size of x_1)"]
    assert _dynamic_fix_hints("", ("x:1:16:128:t*16",), notes) == []


def test_a_guard_through_a_quotient_failing_at_the_ranges_end_gets_the_narrowed_option():
    """models8 (2026-12-07): an stft without centring over `--dynamic audio:1:400:48000:samples` is refused where it
    makes one frame; the note gives the min from which every size holds the guard, and the hint the option."""
    from aotcuda.cli import _dynamic_fix_hints

    notes = ("aotcuda: the guard Ne(((samples - 400)//160), 0) does not hold at samples = 400: every size of samples "
             "from 560 holds it; give its Dim min=560")
    assert _dynamic_fix_hints("Constraints violated (samples)!", ("audio:1:400:48000:samples",), notes) == [
        "on the command line, --dynamic audio:1:560:48000:samples (every size of samples from 560)"]


class _Unwritable:
    """A stream every write and flush of which fails, as a full disk's (``2>/dev/full``) or a closed pipe's."""

    def write(self, text=""):
        raise OSError(errno.ENOSPC, "No space left on device")

    flush = write

    def isatty(self):
        return False


def test_status_lines_that_cannot_be_written_do_not_stop_the_command(monkeypatch):
    """The process breaker (2026-12-06): `aotcuda lower ... 2>/dev/full` (or `2>&-`, a pipe whose reader left) exited
    1 with no package and no word: the first step line raised inside lower(). Status lines are dropped now, as
    serve's are; the command goes on."""
    from aotcuda.cli import _StepProgress, print_warning, status_console

    monkeypatch.setattr(sys, "stderr", _Unwritable())
    monkeypatch.setattr(aotcuda.cli, "_discard", lambda stream, descriptor: None)  # not pytest's own descriptor 2
    with _StepProgress() as progress:
        progress("export", None)
        progress("export", 1.5)
    print_warning("a warning nobody reads")
    status_console.print("a line")


def test_output_lost_after_the_package_was_written_says_so(monkeypatch, capsys):
    """`aotcuda lower ... > /dev/full` wrote the package, then said only "cannot write the output to stdout" (the
    process breaker, 2026-12-06): it names what was written now."""
    import io

    monkeypatch.setattr(sys, "stdout", io.StringIO())  # no descriptor of pytest's to point at the null device
    aotcuda.cli._written.clear()
    aotcuda.cli._wrote("m.pt2")
    with pytest.raises(SystemExit):
        aotcuda.cli._output_lost(OSError(errno.ENOSPC, "No space left on device"))
    said = capsys.readouterr().err
    assert "cannot write the output to stdout (No space left on device)" in said and \
        "m.pt2 was written before that" in said, said
    aotcuda.cli._written.clear()


# Under a file-size limit (ulimit -f) every write past it fails with EFBIG, as a full disk's fail with ENOSPC: the
# copy of an inputs file (run --inputs) and a saved file (--save-outputs, --save-inputs) without a mount.
_LIMITED_WRITES = """
import os, resource, signal, sys, types
import torch
from aotcuda import cli, cli_inputs

folder = sys.argv[1]
source = os.path.join(folder, "in.pt")
torch.save({"args": (torch.zeros(100_000),)}, source)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
try:
    with open(source, "rb") as opened:
        cli_inputs._private_copy(source, opened, types.SimpleNamespace(max_extract_bytes=0))
except Exception as exc:
    print("copy:", type(exc).__name__, exc)
try:
    cli._saved(torch.zeros(100_000), os.path.join(folder, "out.pt"))
except Exception as exc:
    print("save:", type(exc).__name__, exc)
print("files:", sorted(os.listdir(folder)))
"""


def test_a_full_disk_or_file_size_limit_is_named_with_its_fix_for_inputs_and_saved_files(tmp_path):
    """The process breaker (2026-12-06): `aotcuda run --inputs` with a small TMPDIR ended in os's raw OSError (the
    buffered copy's failed writes surfaced at its seek or truncate, and again at its close), and `--save-outputs` /
    `--save-inputs` to a full disk likewise (torch's "unexpected pos", naming no file). Each names the file, the
    error and the fix its errno calls for now, and leaves no partial file."""
    done = subprocess.run([sys.executable, "-c", _LIMITED_WRITES, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    said = done.stdout
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"copy: BadParameter .*in\.pt: cannot copy it for reading \(File too large\): the file-size "
                     r"limit of this process \(ulimit -f\)", said), said
    assert re.search(r"save: AotcudaError could not write '.*out\.pt': File too large; the file-size limit of this "
                     r"process \(ulimit -f\).*nothing was written there", said), said
    assert "files: ['in.pt']" in said, said


def test_a_long_path_is_quoted_clipped_and_named_for_what_it_is(runner, tmp_path):
    """A 4 KB path made a 4 KB refusal: click's check of PACKAGE and --inputs quoted it whole, and called a name the
    kernel refuses as too long "does not exist"; --inputs' own refusals quoted it whole too (the file-system
    breaker, 2026-12-06). Each is cut to 200 characters now, and a name too long is said to be one."""
    (tmp_path / "any.pt2").write_bytes(b"not read")
    deep = tmp_path.joinpath(*["d" * 200] * 18)  # ~3.7 KB: under PATH_MAX, so it exists
    deep.mkdir(parents=True)
    (deep / "in.pt").write_bytes(b"not a zip")
    too_long = "a/" * 2100 + "x.pt"  # 4.2 KB: ENAMETOOLONG
    cases = [(["run", str(tmp_path / "any.pt2"), "--inputs", too_long], "File name too long"),
             (["run", too_long, "--inputs", str(deep / "in.pt")], "File name too long"),
             (["inspect", str(tmp_path / "nothing" / ("n" * 300))], "no such file"),
             (["run", str(tmp_path / "any.pt2"), "--inputs", str(deep / "in.pt")], "is not a zip archive")]
    for args, said in cases:
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and said in result.output, result.output[:400]
        assert len(result.output) < 1200 and "Traceback" not in result.output, len(result.output)
        assert "does not exist" not in result.output


def test_torch_refusing_its_environment_is_one_error_line():
    """torch reads its environment as it imports: `TORCH_LOGS=garbage aotcuda --help` printed a 20-line traceback
    from cli.py's `import torch`, before the command's error handling existed (the file-system breaker, 2026-12-06)."""
    env = {**os.environ, "TORCH_LOGS": "garbage!!", "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("AOTCUDA_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "aotcuda", "--help"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith("error: torch cannot be imported: ValueError: Invalid log settings: garbage!!")
    assert len(done.stderr.splitlines()) == 2 and "hint: torch reads its environment" in done.stderr


def test_torch_refusing_its_environment_beside_a_malformed_debug_switch_is_two_error_lines():
    """`TORCH_LOGS=garbage AOTCUDA_DEBUG=garbage aotcuda --help` (break-new, 2026-12-06): reading AOTCUDA_DEBUG inside
    the handler of torch's import raised SwitchError there, and two tracebacks came out. Now each is one line."""
    env = {**os.environ, "TORCH_LOGS": "garbage!!", "AOTCUDA_DEBUG": "garbage", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "aotcuda", "--help"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: AOTCUDA_DEBUG='garbage' is not a flag"), lines
    assert lines[1].startswith("error: torch cannot be imported: ValueError: Invalid log settings: garbage!!"), lines


def test_saved_outputs_hold_their_own_elements_not_the_buffer_they_view(runner, tmp_path, monkeypatch):
    """The amplification breaker (2026-12-07): AOTInductor returns a view of the buffer it computed where a program
    returns part of one, and torch.save writes a tensor's whole storage: `aotcuda run --save-outputs` of
    ``(x @ w)[:, :1]`` (w of (4, 4096)) on a (100,000, 4) input, a 1.6 MB file, wrote 1.6 GB for 400 KB of outputs (a
    package measured so). A stand-in for load returns such views (one in two slots), an expanded tensor and an empty
    view; the saved file holds the outputs' elements."""
    import aotcuda.runtime.program

    buffer = torch.randn(1000, 4096)  # 16 MiB
    column, expanded = buffer[:, :1], torch.randn(1, 4).expand(1000, 4)

    class Viewing:
        device, input_names, index_unchecked = torch.device("cpu"), ("x",), {}

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            return None

        def __call__(self, x):
            return column, column, expanded, buffer[:0]

    monkeypatch.setattr(aotcuda.runtime.program, "load", lambda *args, **kwargs: Viewing())
    (tmp_path / "p.pt2").write_bytes(b"")
    torch.save({"args": (torch.randn(3, 4),)}, tmp_path / "in.pt")
    result = runner.invoke(main, ["run", str(tmp_path / "p.pt2"), "--inputs", str(tmp_path / "in.pt"),
                                  "--save-outputs", str(tmp_path / "out.pt")])
    assert result.exit_code == 0, result.output
    assert os.path.getsize(tmp_path / "out.pt") < 64 * 1024  # main: 16.8 MB, the buffer whole
    saved = torch.load(tmp_path / "out.pt")
    assert torch.equal(saved[0], column) and torch.equal(saved[2], expanded) and saved[3].shape == (0, 4096)
    assert saved[0].untyped_storage().data_ptr() == saved[1].untyped_storage().data_ptr()  # one tensor, as returned
    assert saved[2].stride() == (0, 1)  # an expanded output keeps its 16 bytes


_UNDER_A_LIMIT = r"""
import resource, sys
from aotcuda.cli import main
mapped = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (mapped + (1 << 30), resource.getrlimit(resource.RLIMIT_AS)[1]))
main(sys.argv[1:])
"""


@pytest.mark.parametrize("command", ["run", "lower"])
def test_a_file_at_an_output_path_is_judged_before_zipfile_reads_its_directory(tmp_path, command):
    """The amplification breaker (2026-12-07): before writing, `run --save-outputs` and `lower -o` look at the file at
    the path (an earlier torch.save file or package may be replaced), and read it with zipfile, which reads the
    directory its end record declares whole into memory: 22 bytes after a hole (4 KiB on disk, what anyone can leave
    in a shared folder) declaring 1 GiB made them peak at 1.43 GB, 64 GiB would meet the OOM killer. Here the process
    has 1 GiB of address space left and the file declares 2 GiB: main ended in a raw MemoryError."""
    bomb = tmp_path / ("out.pt" if command == "run" else "out.pt2")
    with open(bomb, "wb") as file:
        file.seek(2 << 30)
        file.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, 2 << 30, 0, 0))
    (tmp_path / "mymodel.py").write_text("raise SystemExit('the factory module was imported')\n")
    (tmp_path / "p.pt2").write_bytes(b"")
    (tmp_path / "in.pt").write_bytes(b"")
    arguments = (["run", str(tmp_path / "p.pt2"), "--inputs", str(tmp_path / "in.pt"), "--save-outputs", str(bomb)]
                 if command == "run" else ["lower", f"{tmp_path / 'mymodel.py'}:make", "-o", str(bomb)])
    done = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT, *arguments], capture_output=True, text=True,
                          timeout=300)
    said = " ".join(done.stdout.split() + done.stderr.split())
    assert "MemoryError" not in said and "Traceback" not in said, said[-2000:]
    assert f"to '{bomb}': a file that is not" in said and "is there, and writing would replace it" in said, said[-2000:]
    assert os.path.getsize(bomb) == (2 << 30) + 22  # left as it was


def _run_with_1_gib_left(tmp_path, inputs):
    """`aotcuda run` of an empty package file on ``inputs`` (refused before the package is read), in a child process
    with 1 GiB of address space left; (the process, its stdout and stderr as one line)."""
    (tmp_path / "p.pt2").write_bytes(b"")
    done = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT, "run", str(tmp_path / "p.pt2"), "--inputs",
                           str(inputs)], capture_output=True, text=True, timeout=300)
    return done, " ".join(done.stdout.split() + done.stderr.split())


def _inputs_over_a_hole(path, size: int) -> None:
    """A torch.save file of one float32 tensor of ``size`` bytes whose storage record is stored over a hole: the
    file is ``size`` bytes long and takes a few KiB of disk."""
    import io
    import zlib

    saved = io.BytesIO()
    torch.save({"args": (torch.zeros(16),)}, saved)
    elements = b"J" + struct.pack("<i", size // 4)
    with zipfile.ZipFile(io.BytesIO(saved.getvalue())) as archive:
        entries = [(info.filename.encode(), archive.read(info)) for info in archive.infolist()]
    entries = [(name, data.replace(b"cpuq\x06K\x10t", b"cpuq\x06" + elements + b"t").replace(
        b"K\x00K\x10\x85", b"K\x00" + elements + b"\x85") if name.endswith(b"data.pkl") else data)
        for name, data in entries]
    crc, zeros = 0, bytes(1 << 24)
    for _ in range(size // len(zeros)):
        crc = zlib.crc32(zeros, crc)
    with open(path, "wb") as file:
        directory = []
        for name, data in entries:
            hole = name.endswith(b"/data/0")
            length, check, offset = (size, crc, file.tell()) if hole else (len(data), zlib.crc32(data), file.tell())
            file.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, check, length, length, len(name), 0)
                       + name)
            file.seek(size, os.SEEK_CUR) if hole else file.write(data)
            directory.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, check, length, length,
                                         len(name), 0, 0, 0, 0, 0, offset) + name)
        start, records = file.tell(), b"".join(directory)
        file.write(records + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(directory), len(directory),
                                         len(records), start, 0))


def test_an_inputs_file_whose_record_lies_over_a_hole_is_refused_before_torch_load(tmp_path):
    """The amplification breaker (2026-12-07): a stored record has a ratio of 1, so no ratio check refuses one over a
    hole, and torch.load reads it whole: a 1 GiB inputs file of 8 KiB on disk made `aotcuda run` peak at 1.3 GB, one
    of 60 GiB (under AOTCUDA_MAX_EXTRACT_BYTES) would meet the OOM killer. Here 2 GiB, in a process with 1 GiB of
    address space left: main read the record until the allocation failed (`torch.load: ... can't allocate memory`)."""
    inputs = tmp_path / "in.pt"
    _inputs_over_a_hole(inputs, 2 << 30)
    done, said = _run_with_1_gib_left(tmp_path, inputs)
    assert done.returncode == 2 and "Traceback" not in said, said[-2000:]
    assert re.search(r"Invalid value for --inputs: '.*in\.pt' is a sparse file: 2048\.0 MiB, of which its disk holds "
                     r"[0-9.]+ MiB .*Copy a file you trust without holes", said), said[-2000:]


def _inputs_deflated(path, size: int) -> None:
    """A torch.save file of one float32 tensor of ``size`` bytes, its storage record deflated about 130x (within the
    200x bound on a record's ratio): 6,000 random bytes in each MiB."""
    import io

    saved = io.BytesIO()
    torch.save({"args": (torch.zeros(16),)}, saved)
    elements = b"J" + struct.pack("<i", size // 4)
    piece = bytearray(1 << 20)
    piece[:6000] = os.urandom(6000)
    with zipfile.ZipFile(io.BytesIO(saved.getvalue())) as source, zipfile.ZipFile(path, "w") as archive:
        for info in source.infolist():
            entry = zipfile.ZipInfo(info.filename, info.date_time)
            if info.filename.endswith("/data/0"):
                entry.compress_type = zipfile.ZIP_DEFLATED
                with archive.open(entry, "w", force_zip64=True) as record:
                    for _ in range(size >> 20):
                        record.write(piece)
                continue
            data = source.read(info)
            if info.filename.endswith("data.pkl"):
                data = data.replace(b"cpuq\x06K\x10t", b"cpuq\x06" + elements + b"t").replace(
                    b"K\x00K\x10\x85", b"K\x00" + elements + b"\x85")
            archive.writestr(entry, data)


def test_an_inputs_file_that_inflates_past_the_memory_is_refused_before_torch_load(tmp_path):
    """The amplification breaker (2026-12-07): torch.load reads every record into memory, and the ratio bound (200x)
    is a package's, whose entries go to disk: a 15.9 MB file whose 2 GiB storage deflates 135x was read whole, and in
    a 1.5 GiB memory cgroup the kernel killed `aotcuda run` (SIGKILL). Here a 1.5 GiB storage (11 MB) in a process with
    1 GiB of address space left: main read until torch's allocation failed."""
    inputs = tmp_path / "in.pt"
    _inputs_deflated(inputs, 3 << 29)
    done, said = _run_with_1_gib_left(tmp_path, inputs)
    assert done.returncode == 2 and "Traceback" not in said and "allocate" not in said, said[-2000:]
    assert re.search(r"Invalid value for --inputs: .*in\.pt: its records inflate to 1,536\.0 MiB, which torch\.load "
                     r"reads into memory, more than the [0-9,.]+ MiB this process has available", said), said[-2000:]


class OnlyIdx(torch.nn.Module):
    def forward(self, s, thr):
        return (s > thr).nonzero()


def only_idx_factory():
    return OnlyIdx(), (torch.rand(3, 50), torch.tensor(0.5))


def test_a_2d_nonzero_lowered_with_allow_fallbacks_loads_and_matches_eager_with_0_rows_too(runner, tmp_path):
    """A new user's `(s > thr).nonzero()` (output (u0, 2)) with allow_fallbacks=True compiled, then failed building the
    signature (GuardOnDataDependentSymNode from Tensor.is_contiguous() on the output). From the command line, as from
    aotcuda.lower: the package lists nonzero as a fallback kernel, loads, and gives eager's indices, shape and strides,
    for every row kept, some, and none."""
    package = tmp_path / "idx.pt2"
    result = runner.invoke(main, ["lower", f"{__name__}:only_idx_factory", "-o", str(package), "--device", "cpu",
                                  "--allow-fallbacks"])
    assert result.exit_code == 0, result.output
    assert "nonzero" in result.output, result.output
    program = aotcuda.load(package)
    torch.manual_seed(0)
    for thr in (0.5, 0.9, 2.0, -1.0):
        s, t = torch.rand(3, 50), torch.tensor(thr)
        actual, expected = program(s, t), OnlyIdx()(s, t)
        assert actual.shape == expected.shape and actual.stride() == expected.stride()
        assert torch.equal(actual, expected)


class TagNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 8)

    def forward(self, ids, mask):
        return self.emb(ids) * mask[..., None]


def tagnet_factory():
    return TagNet(), (torch.randint(0, 100, (4, 6)), torch.ones(4, 6))


def test_two_dims_the_model_needs_equal_get_the_shared_symbol_options(runner, tmp_path):
    """A new user's README-only trial (2026-12-07): `--dynamic ids:0:1:64 --dynamic mask:0:1:64` for a model that
    multiplies ids' embedding by mask printed torch's `Suggested fixes: mask_0 = ids_0` (a Python fix) and no hint. The
    hint gives the command line's form, one SYMBOL for both (the range both options hold), and those options export."""
    from aotcuda.cli import _dynamic_fix_hints

    result = runner.invoke(main, ["lower", f"{__name__}:tagnet_factory", "-o", str(tmp_path / "p.pt2"), "--device",
                                  "cpu", "--dynamic", "ids:0:1:64", "--dynamic", "mask:0:1:64"],
                           env={"COLUMNS": "300"})
    assert result.exit_code == 1 and "mask_0 = ids_0" in result.output, result.output
    hint = "--dynamic ids:0:1:64:batch --dynamic mask:0:1:64:batch"
    assert f"hint: on the command line, the model needs these dims equal: give them one SYMBOL, {hint}" \
        in result.output, result.output
    model, args = tagnet_factory()
    dynamic = dynamic_shapes_from(tuple(hint.replace("--dynamic ", "").split()), model, args, {})
    aotcuda.lowering.pipeline.before_compile(model, args, {}, dynamic)  # exports: no constraint violated
    # a SYMBOL one option gives is kept; ranges meet; other dims keep the root's name; a multiple is left alone
    message = "Suggested fixes:\n    mask_1 = seq\n    y_0 = x_0\n    z_0 = b\n"
    assert _dynamic_fix_hints(message, ("ids:1:2:128:seq", "mask:1:4:64", "x:0:1:8", "y:0:2:16", "z:0:1:8",
                                        "w:0:2:32:b*2")) == [
        "on the command line, the model needs these dims equal: give them one SYMBOL, --dynamic ids:1:4:64:seq "
        "--dynamic mask:1:4:64:seq",
        "on the command line, the model needs these dims equal: give them one SYMBOL, --dynamic x:0:2:8:batch "
        "--dynamic y:0:2:8:batch"]


def test_one_dim_given_twice_is_told_to_keep_one(runner, tmp_path):
    """A new user's README-only trial (2026-12-07): `--dynamic x:1:2:128 --dynamic x:1:4:64` (one dim of one input
    twice) was refused with advice about shared sizes (give the same MIN:MAX, or two names) that does not apply: the
    second option would only replace the first. It says the dim is given twice, and to keep one; a dim counted from
    the end is the same dim, and two options with the same text are one."""
    for second in ("ids:1:4:64", "ids:-1:4:64:t", "ids:1:2:128:seq"):
        result = runner.invoke(main, ["lower", f"{__name__}:tagnet_factory", "-o", str(tmp_path / "p.pt2"),
                                      "--device", "cpu", "--dynamic", "ids:1:2:128", "--dynamic", second],
                               env={"COLUMNS": "300"})
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.split())
        assert (f"'{second}' and 'ids:1:2:128' both make dim 1 of input ids dynamic; a dim takes one --dynamic "
                "option: keep one of them") in text, text
        assert "a Dim name has one range" not in text
    model, args = tagnet_factory()
    assert repr(dynamic_shapes_from(("ids:1:2:128", "ids:1:2:128"), model, args, {})) == \
        repr(dynamic_shapes_from(("ids:1:2:128",), model, args, {})) == "{'ids': {1: Dim('ids_1', max=128)}, 'mask': None}"


class DynamicRfft(torch.nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs()


def dynamic_rfft_factory():
    return DynamicRfft(), (torch.randn(2, 16),)


def test_the_dynamic_fft_warning_line_names_the_models_line(runner, tmp_path):
    """A new user (nu40): `warning: an FFT of dynamic length (seq, at most 64) builds ...` named no line of their
    model; it names it as the fallback list does (a path relative to the working folder)."""
    import inspect

    line = inspect.getsourcelines(DynamicRfft.forward)[1] + 1
    result = runner.invoke(main, ["lower", f"{__name__}:dynamic_rfft_factory", "-o", str(tmp_path / "f.pt2"),
                                  "--device", "cpu", "--dynamic", "x:1:2:64:seq"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (f"warning: an FFT of dynamic length (seq, at most 64) at {os.path.relpath(__file__)}:{line} (in forward) "
            "builds its [2n, 2·(n//2 + 1)] DFT table") in said, result.output
    x = torch.randn(2, 37)  # a fresh length, as eager computes it
    assert relative_error(aotcuda.load(str(tmp_path / "f.pt2"))(x), DynamicRfft()(x)) < 1e-5


def test_inspect_says_where_lowering_did_not_probe_the_batch_rows(tmp_path):
    """(review40b) A package whose rows lowering could not probe (rows_mixed null) said nothing of it, and serving
    batches it unchecked: inspect says so, with lowering's reason."""
    import json

    signature = {"format": "aotcuda.signature", "version": 2, "inputs": [], "outputs": [], "rows_mixed": None,
                 "rows_not_probed": "the program did not run in eager on the example inputs: IndexError: out of range"}
    path = _small_package(tmp_path / "p.pt2", json.dumps(signature))
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert ("rows: not probed (the program did not run in eager on the example inputs: IndexError: out of range); "
            "aotcuda serve batches it unchecked") in result.output.splitlines(), result.output


@pytest.mark.parametrize("record, line", [
    ({"rows_mixed": False, "rows_graph": "kept apart"}, "rows kept apart along dim 0: proved by the graph, and probed"),
    ({"rows_mixed": False, "rows_graph": "not proved", "rows_graph_reason": "while_loop is not known"},
     "rows kept apart along dim 0: probed, not proved by the graph (while_loop is not known)"),
    ({"rows_mixed": True, "rows_graph": "mixes", "rows_graph_reason": "aten.amax.default computes along the batch dim"},
     "rows mixed along dim 0: an output's row depends on other rows of the batch dim; aotcuda serve refuses "
     "--max-batch-size above 1: found in the graph (aten.amax.default computes along the batch dim)"),
    ({"rows_mixed": True}, "rows mixed along dim 0: an output's row depends on other rows of the batch dim; aotcuda "
     "serve refuses --max-batch-size above 1"),
])
def test_inspect_says_whether_the_graph_proved_the_batch_rows_kept_apart(tmp_path, record, line):
    """(rows41) lowering walks the program's graph (lowering/batch_row_flow.py) beside its probe: inspect says whether
    the rows were proved kept apart by the graph or probed only, and where the graph found a mix."""
    import json

    signature = {"format": "aotcuda.signature", "version": 2, "inputs": [], "outputs": [], **record}
    path = _small_package(tmp_path / "p.pt2", json.dumps(signature))
    result = CliRunner().invoke(main, ["inspect", path], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert line in result.output.splitlines(), result.output


def test_serve_says_once_that_it_batches_a_package_whose_rows_were_not_probed(tmp_path, caplog):
    """(review40b) serve batched a package whose rows lowering had not probed (rows_mixed null, or a package of an
    older aotcuda without the record) without a word: one line says so, before Ray starts; none for a probed one."""
    import json
    import logging

    from aotcuda.serving.server import ServeOptions, check_package

    batch = {"expr": "s0", "min": 1, "max": 64}
    base = {"format": "aotcuda.signature", "version": 2,
            "inputs": [{"name": "x", "dtype": "float32", "device": "cpu", "shape": [batch, 3]}],
            "outputs": [{"name": "out", "dtype": "float32", "device": "cpu", "shape": [batch, 3]}]}

    def said(record, max_batch_size=8):
        path = _small_package(tmp_path / "p.pt2", json.dumps({**base, **record}))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="aotcuda"):
            assert check_package(path, ServeOptions(max_batch_size=max_batch_size)) == "cpu"
        return [r.getMessage() for r in caplog.records if "unchecked" in r.getMessage()]

    [line] = said({"rows_mixed": None, "rows_not_probed": "the program failed on every changed example (4 runs)"})
    assert "batching" in line and "(the program failed on every changed example (4 runs))" in line \
        and "--max-batch-size 1" in line
    [line] = said({})
    assert "lowered by an aotcuda without the probe" in line
    assert said({"rows_mixed": False}) == [] and said({"rows_mixed": None}, max_batch_size=1) == []
    [line] = said({"rows_mixed": None, "rows_not_probed": "\x1b[2J\x1b[H\x1b[32mrows independent\x1b[0m\r" + "A" * 900})
    assert "\x1b" not in line and "\r" not in line and "\\x1b[2J" in line, line  # review40d: escaped, as inspect does
    assert "... (933 characters)" in line, line
