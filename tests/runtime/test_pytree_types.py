"""Output structures of library types in a process that has not imported them (issue 11 item 3).

The fresh-process check of a real lowered package is in tests/models/test_transformers.py; here, the
spec reading itself, without a compile: a registered library type is found by importing the module the
signature recorded (in a new process, where nothing imported it), and a type whose module cannot be
imported comes back as a plain dict (named fields) or tuple, with one warning.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.utils._pytree as pytree

from aotcuda.runtime.pytree_types import load_spec, recorded_types


def unknown_spec(type_name: str, context: str, leaves: int) -> str:
    leaf = {"type": None, "context": None, "children_spec": []}
    return json.dumps([1, {"type": type_name, "context": context, "children_spec": [leaf] * leaves}])


def test_recorded_types_name_library_types_with_their_module_and_skip_torch_own():
    transformers_outputs = pytest.importorskip("transformers.modeling_outputs")
    output = transformers_outputs.CausalLMOutputWithPast(logits=torch.zeros(1))
    spec = pytree.tree_flatten(((output, [torch.zeros(1)]), {"x": (torch.zeros(1),)}))[1]
    assert recorded_types(spec) == [{"type": "transformers.modeling_outputs.CausalLMOutputWithPast",
                                     "module": "transformers.modeling_outputs"}]
    assert recorded_types(pytree.tree_flatten((torch.zeros(1), {"a": [torch.zeros(1)]}))[1]) == []
    assert recorded_types(None) == []


def test_a_fresh_process_imports_the_recorded_module():
    pytest.importorskip("transformers")
    script = textwrap.dedent("""
        import sys, json
        from aotcuda.runtime.pytree_types import load_spec
        text = json.dumps([1, {"type": "transformers.modeling_outputs.CausalLMOutputWithPast",
                               "context": json.dumps(["logits"]),
                               "children_spec": [{"type": None, "context": None, "children_spec": []}]}])
        assert "transformers.modeling_outputs" not in sys.modules
        spec = load_spec(text, [{"type": "transformers.modeling_outputs.CausalLMOutputWithPast",
                                 "module": "transformers.modeling_outputs"}], "p.pt2", "outputs")
        print(spec.type.__module__ + "." + spec.type.__name__)
    """)
    env = {**os.environ, "PYTHONPATH": os.path.abspath("src")}
    run = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", script], capture_output=True,
                         text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "transformers.modeling_outputs.CausalLMOutputWithPast"


@pytest.mark.parametrize("context, leaves, structure", [
    (json.dumps(["logits", "hidden"]), 2, {"logits": 0, "hidden": 1}),   # named fields: a dict
    ("null", 2, (0, 1)),                                                  # anything else: a tuple
    (json.dumps({"odd": 1}), 1, (0,)),
    ("not json", 1, (0,)),
    # register_dataclass's context (third new user, 2026-12-06): [fields with values, fields left None]
    (json.dumps([["tokens", "weights"], ["bias"]]), 2, {"tokens": 0, "weights": 1}),
    (json.dumps([["tokens"], []]), 2, (0, 1)),  # fields that do not match the children: a tuple
])
def test_an_unimportable_type_comes_back_plain_with_one_warning(context, leaves, structure):
    text = unknown_spec("aotcuda_no_such_package.outputs.Output", context, leaves)
    with pytest.warns(UserWarning, match=r"aotcuda_no_such_package\.outputs\.Output.*cannot import") as caught:
        spec = load_spec(text, [{"type": "aotcuda_no_such_package.outputs.Output",
                                 "module": "aotcuda_no_such_package.outputs"}], "p.pt2", "outputs")
    assert len(caught) == 1
    assert pytree.tree_unflatten(list(range(leaves)), spec) == structure


def test_nested_unknown_types_inside_known_containers_are_converted():
    leaf = {"type": None, "context": None, "children_spec": []}
    inner = {"type": "aotcuda_no_such_package.Output", "context": json.dumps(["a"]), "children_spec": [leaf]}
    text = json.dumps([1, {"type": "builtins.tuple", "context": "null", "children_spec": [inner, leaf]}])
    with pytest.warns(UserWarning):
        spec = load_spec(text, None, "p.pt2", "outputs")  # no record: the module is guessed from the name
    assert pytree.tree_unflatten([7, 8], spec) == ({"a": 7}, 8)


def test_plain_specs_load_unchanged_and_empty_text_is_none():
    spec = pytree.tree_flatten((torch.zeros(1), {"a": [torch.zeros(1)]}))[1]
    assert load_spec(pytree.treespec_dumps(spec), None, "p.pt2", "outputs") == spec
    assert load_spec("", None, "p.pt2", "outputs") is None


def test_a_signature_cannot_name_a_module_to_import_outside_the_librarys_type_names(tmp_path, monkeypatch):
    """The call spec's type names come from the model library; the module that registers each, from the signature
    (``pytree_types``), which is JSON that anyone may edit without the library. Load imported whatever module the
    record named, and an import runs the module: a package that named a module of its choosing ran it (here one that
    leaves a file). Only a module the library's own type name lies in is imported now."""
    marker = "import pathlib; pathlib.Path(__file__).with_suffix('.ran').touch()\n"
    (tmp_path / "planted_elsewhere.py").write_text(marker)
    (tmp_path / "planted_home.py").write_text(marker)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = unknown_spec("planted_home.outputs.Out", "null", 1)
    with pytest.warns(UserWarning, match=r"planted_home.outputs.Out: cannot import planted_home.outputs"):
        spec = load_spec(text, [{"type": "planted_home.outputs.Out", "module": "planted_elsewhere"}], "p.pt2",
                         "outputs")
    assert spec.type is tuple
    assert not (tmp_path / "planted_elsewhere.ran").exists()
    with pytest.warns(UserWarning):  # a module the name lies in is imported, as the record says
        load_spec(text, [{"type": "planted_home.outputs.Out", "module": "planted_home"}], "p.pt2", "outputs")
    assert (tmp_path / "planted_home.ran").exists()


def test_a_signature_naming_a_script_module_does_not_end_the_process():
    """``unittest.__main__`` runs unittest's main at its import, which exits: a signature that named it as the
    module of the library's type ended the process that loaded the package ("Ran 0 tests", exit 0)."""
    script = textwrap.dedent("""
        import warnings
        from aotcuda.runtime.pytree_types import load_spec
        text = %r
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load_spec(text, [{"type": "mylib.outputs.Out", "module": "unittest.__main__"}], "p.pt2", "outputs")
        print("still running")
    """ % unknown_spec("mylib.outputs.Out", "null", 1))
    env = {**os.environ, "PYTHONPATH": os.path.abspath("src")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0 and run.stdout.strip().splitlines()[-1:] == ["still running"], run.stdout + run.stderr


def test_a_module_that_imports_but_registers_no_such_type_is_said_so(tmp_path, monkeypatch):
    """Third new user (2026-12-06): a package of a dataclass input, loaded where its module imports but registers the
    dataclass without ``serialized_type_name=`` (``torch.export.register_dataclass(Batch)``), warned
    `models.Batch: cannot import models`, though the import worked. Now the warning says what went wrong."""
    (tmp_path / "imports_fine.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = unknown_spec("imports_fine.Batch", json.dumps(["tokens"]), 1)
    with pytest.warns(UserWarning) as caught:
        spec = load_spec(text, [{"type": "imports_fine.Batch", "module": "imports_fine"}], "p.pt2", "inputs")
    (message,) = [str(w.message) for w in caught]
    assert ("imports_fine.Batch: imports_fine was imported but registers no type of that name with torch's pytree "
            "(a registration without serialized_type_name='imports_fine.Batch', or with another)") in message, message
    assert "cannot import" not in message
    assert pytree.tree_unflatten([7], spec) == {"tokens": 7}


Hidden = collections.namedtuple("Hidden", ["hidden", "scores"])


class ReturnsNamedTuples(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        return {"out": Hidden(y, y * 2), "plain": x - 1}


def _stored_and_loaded(module, x):
    """The output spec as lower() stores it in the package and load() reads it back."""
    from aotcuda.lowering.pipeline import _make_outputs_serializable

    ep = torch.export.export(module, (x,))
    _make_outputs_serializable(ep)
    text = pytree.treespec_dumps(ep.module_call_graph[0].signature.out_spec)
    return text, load_spec(text, recorded_types(pytree.treespec_loads(text)), "p.pt2", "outputs")


def test_a_namedtuple_inside_a_dict_comes_back_as_that_namedtuple_in_that_dict():
    """Fifth new user (2026-12-06): ``{"out": Out(y, z)}`` came back as a flat ``(y, z, x)`` (the whole spec was
    replaced by a tuple because torch cannot serialize an unregistered namedtuple): the keys and ``out.hidden`` lost."""
    x = torch.randn(3, 4)
    text, spec = _stored_and_loaded(ReturnsNamedTuples(), x)
    eager = ReturnsNamedTuples()(x)
    rebuilt = pytree.tree_unflatten(pytree.tree_leaves(eager), spec)
    assert type(rebuilt) is dict and list(rebuilt) == ["out", "plain"]
    assert type(rebuilt["out"]) is Hidden and rebuilt["out"].hidden is eager["out"].hidden


def test_a_namedtuple_whose_class_is_not_found_is_made_from_its_stored_fields(recwarn):
    """A class of the lowering's ``__main__`` or a function's cannot be found at load: a namedtuple of the same name
    and fields is made from the stored ones (one class per process), with nothing imported."""
    Local = collections.namedtuple("Local", ["logits", "extra"])
    x = torch.randn(2)
    text, _ = _stored_and_loaded(type("M", (torch.nn.Module,), {"forward": lambda self, x: Local(x * 2, x)})(), x)
    assert "<locals>" in text or "test_pytree_types" in text
    moved = text.replace(json.dumps(json.dumps(__name__))[1:-1], json.dumps(json.dumps("no_such_module_xyz"))[1:-1])
    for stored in (text, moved):
        out = pytree.tree_unflatten([x * 2, x], load_spec(stored, None, "p.pt2", "outputs"))
        assert type(out).__name__ == "Local" and out._fields == ("logits", "extra") and torch.equal(out.logits, x * 2)
    again = pytree.tree_unflatten([x, x], load_spec(moved, None, "p.pt2", "outputs"))
    assert type(again) is type(pytree.tree_unflatten([x, x], load_spec(moved, None, "p.pt2", "outputs")))
    assert "no_such_module_xyz" not in sys.modules and not recwarn.list


def test_a_namedtuple_of_an_importable_module_is_its_own_class_in_a_fresh_process(tmp_path):
    (tmp_path / "nt_home.py").write_text("import collections\nOut = collections.namedtuple('Out', 'a b')\n")
    script = textwrap.dedent("""
        import sys, torch, torch.utils._pytree as pytree
        sys.path.insert(0, %r)
        import nt_home
        from aotcuda.lowering.pipeline import _make_outputs_serializable
        class M(torch.nn.Module):
            def forward(self, x):
                return [nt_home.Out(x, x + 1)]
        ep = torch.export.export(M(), (torch.zeros(2),))
        _make_outputs_serializable(ep)
        print(pytree.treespec_dumps(ep.module_call_graph[0].signature.out_spec))
    """ % str(tmp_path))
    env = {**os.environ, "PYTHONPATH": os.path.abspath("src")}
    made = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert made.returncode == 0, made.stderr[-2000:]
    text = made.stdout.strip().splitlines()[-1]
    load = textwrap.dedent("""
        import sys, torch.utils._pytree as pytree
        sys.path.insert(0, %r)
        from aotcuda.runtime.pytree_types import load_spec
        out = pytree.tree_unflatten([1, 2], load_spec(%r, None, "p.pt2", "outputs"))
        import nt_home
        print(type(out[0]) is nt_home.Out, out[0].b)
    """ % (str(tmp_path), text))
    loaded = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", load], capture_output=True, text=True,
                            timeout=600, env=env)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip().splitlines()[-1] == "True 2"


def test_a_namedtuple_of_a_module_under_a_script_module_does_not_end_the_process():
    """A stored namedtuple's module ``unittest.__main__.x`` (break-new, 2026-12-06): only a last part ``__main__`` was
    kept from import, but importing ``a.__main__.b`` imports ``a.__main__`` first, and unittest's main ran and exited
    the loading process ("Ran 0 tests"). No module with a ``__main__`` part is imported: the namedtuple is made from
    its stored fields."""
    script = textwrap.dedent("""
        import json
        from aotcuda.runtime import named_tuples
        cls = named_tuples._from_context(json.dumps({"module": "unittest.__main__.x", "name": "X", "fields": ["a"]}))
        print("still running", cls._fields)
    """)
    env = {**os.environ, "PYTHONPATH": os.path.abspath("src")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0 and run.stdout.strip().splitlines()[-1:] == ["still running ('a',)"], \
        run.stdout + run.stderr


@pytest.mark.parametrize("where", ["type", "module"])
def test_the_warning_escapes_and_cuts_the_type_names_of_a_forged_call_spec(where):
    """The library's call spec is text AOTInductor wrote into the package, outside text like any of it: a forged one
    whose container type is named `evil\\x1b[2J\\x1b[1;1H...` (clear the screen, home the cursor) and 100,000
    characters long reached the UserWarning as it was, its name quoted raw (and, where the import worked, its
    module too). Now quoted through errors.terminal_safe and cut to 1,000 characters, as the other quoted package
    text."""
    hostile = "\x1b[2J\x1b[1;1H\u202e" + "x" * 100_000
    if where == "type":
        name, recorded = f"evil{hostile}.outputs.Out", None
    else:  # an importable module (json) named with a hostile type inside it, registering no such type
        name, recorded = f"json.Out{hostile}", [{"type": f"json.Out{hostile}", "module": "json"}]
    with pytest.warns(UserWarning) as caught:
        spec = load_spec(unknown_spec(name, "null", 2), recorded, "p.pt2", "outputs")
    message = str(caught[0].message)
    assert "\x1b" not in message and "\u202e" not in message, message[:200]
    assert "\\x1b[2J" in message
    assert len(message) < 2_000, len(message)
    assert pytree.tree_unflatten([0, 1], spec) == (0, 1)


def enum_keyed_spec(fqn: str, names: list[str], plain_keys: list[str] = ()) -> str:
    """A dict spec keyed by Enum members as torch's treespec_dumps writes them (module:Class, member name)."""
    leaf = {"type": None, "context": None, "children_spec": []}
    keys = [{"__enum__": True, "fqn": fqn, "name": name} for name in names] + list(plain_keys)
    return json.dumps([1, {"type": "builtins.dict", "context": json.dumps(keys), "children_spec": [leaf] * len(keys)}])


@pytest.mark.parametrize("fqn", ["__main__:Key", "aotcuda_no_such_package.keys:Key", "collections:OrderedDict",
                                 "enum:Enum"])
def test_enum_keys_whose_class_this_process_cannot_find_come_back_as_strings_with_one_warning(fqn):
    # an Enum made in the lowering script's __main__ (or with enum.Enum("Key", ...)), a module not installed here,
    # a name that is no Enum, an Enum without that member: torch's enum_object_hook raised AttributeError,
    # ImportError, TypeError, KeyError out of aotcuda.load (review42a, 2026-12-07)
    text = enum_keyed_spec(fqn, ["a\x1bb", "second"], ["plain"])
    with pytest.warns(UserWarning, match=r"Enum members as keys.*make each class importable") as caught:
        spec = load_spec(text, None, "p.pt2", "outputs")
    assert len(caught) == 1 and "\x1b" not in str(caught[0].message)
    cls = fqn.partition(":")[2]
    assert pytree.tree_unflatten([0, 1, 2], spec) == {f"{cls}.a\x1bb": 0, f"{cls}.second": 1, "plain": 2}


def test_enum_keys_that_would_merge_as_strings_come_back_as_a_tuple():
    text = enum_keyed_spec("__main__:Key", ["a"], ["Key.a"])
    with pytest.warns(UserWarning, match="Enum members"):
        spec = load_spec(text, None, "p.pt2", "outputs")
    assert pytree.tree_unflatten([0, 1], spec) == (0, 1)


def test_enum_keys_of_an_importable_enum_load_as_the_members_without_warning(recwarn):
    import signal
    spec = load_spec(enum_keyed_spec("signal:Signals", ["SIGINT"]), None, "p.pt2", "outputs")
    assert pytree.tree_unflatten([0], spec) == {signal.Signals.SIGINT: 0}
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def test_a_package_keyed_by_an_enum_of_main_loads_and_runs(twice_pt2, monkeypatch):
    from aotcuda.runtime.container import ModelContainer
    import aotcuda

    real = ModelContainer.call_spec
    monkeypatch.setattr(ModelContainer, "call_spec",
                        lambda self: (real(self)[0], enum_keyed_spec("__main__:Key", ["a\x1bb", "b"], ["c"])))
    with pytest.warns(UserWarning, match=r"Key of module __main__"):
        program = aotcuda.load(twice_pt2)
    x = torch.randn(5, 4)
    out = program(x)
    assert list(out) == ["Key.a\x1bb", "Key.b", "c"]
    torch.testing.assert_close(out["Key.a\x1bb"], x * 2)
    torch.testing.assert_close(out["Key.b"], x + 1)
    torch.testing.assert_close(out["c"], x * 2)
