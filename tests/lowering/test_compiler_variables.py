"""torch's compiler variables read as numbers: a value torch cannot read is named, never a bare ValueError (leftovers).

Found: ``TORCHINDUCTOR_COMPILE_THREADS=abc aotcuda lower ...`` (and ``demo``) ended in torch's traceback
``ValueError: invalid literal for int() with base 10: 'abc'``, raised as torch._inductor's config was imported,
naming no variable; ``aotcuda.lower`` raised the same. torch reads some thirty such variables with int()/float().
"""

import ast
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from aotcuda.errors import SwitchError

NAMED = "TORCHINDUCTOR_COMPILE_THREADS='abc' is not an integer"


def _without_torch_variables() -> dict:
    """This environment without torch's compiler variables (the table's own import is left to the tests that
    need it: the others run on an aotcuda without it)."""
    prefixes = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "AOTINDUCTOR_", "INDUCTOR_", "TORCH_COMPILE_", "PYTORCH_")
    return {name: value for name, value in os.environ.items() if not name.startswith(prefixes)}


@pytest.mark.parametrize("command", [["lower", "aotcuda.models.attention:attention_block", "--device", "cpu"],
                                     ["demo", "--device", "cpu"], ["demo"]])
def test_the_cli_names_a_compile_threads_torch_cannot_read(tmp_path, command):
    if command[0] == "lower":
        command = [*command, "-o", str(tmp_path / "block.pt2")]
    environment = {**_without_torch_variables(), "TORCHINDUCTOR_COMPILE_THREADS": "abc"}
    done = subprocess.run([sys.executable, "-m", "aotcuda", *command], capture_output=True, text=True,
                          env=environment, timeout=300, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and NAMED in lines[0], done.stderr
    assert "unset it" in lines[0] and "set it to an integer" in lines[0]
    assert not (tmp_path / "block.pt2").exists()


def test_the_python_api_names_it_and_works_once_it_is_fixed(tmp_path):
    """At the import (``aotcuda.lower``, first use) and at a later lower() (set since: Inductor's compile workers
    import torch's config again); each time nothing of torch's compiler has run, so the next call works."""
    script = f"""
import os, torch, aotcuda
from aotcuda.errors import SwitchError
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "abc"
try:
    aotcuda.lower
except SwitchError as error:
    print("import:", error)
del os.environ["TORCHINDUCTOR_COMPILE_THREADS"]
lower = aotcuda.lower
os.environ["TORCHINDUCTOR_COLLECTIVE_BENCHMARK_TIMEOUT"] = "30s"
class Tiny(torch.nn.Module):
    def forward(self, x):
        return x * 3 + 1
try:
    lower(Tiny(), (torch.randn(4),), device="cpu", package_path={str(tmp_path / "a.pt2")!r})
except SwitchError as error:
    print("lower:", error)
del os.environ["TORCHINDUCTOR_COLLECTIVE_BENCHMARK_TIMEOUT"]
lowered = lower(Tiny(), (torch.randn(4),), device="cpu", package_path={str(tmp_path / "b.pt2")!r})
x = torch.randn(4)
print("ran:", torch.equal(aotcuda.load(lowered.package_path)(x), x * 3 + 1))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=_without_torch_variables(), timeout=300)
    assert f"import: {NAMED}" in done.stdout, done.stdout + done.stderr
    assert "lower: TORCHINDUCTOR_COLLECTIVE_BENCHMARK_TIMEOUT='30s' is not a number" in done.stdout, done.stdout
    assert "ran: True" in done.stdout, done.stdout + done.stderr
    assert not (tmp_path / "a.pt2").exists()


def test_each_kind_is_refused_where_torch_fails_and_only_there():
    from aotcuda.lowering.compiler_variables import TORCH_NUMBERS, check_compiler_variables

    for number in TORCH_NUMBERS:
        for bad in ("abc", "", "1.5" if number.parse != "float" else "1,5", "9" * 5000):
            if bad == "9" * 5000 and number.parse == "float":
                continue  # float() reads it (inf), as torch does
            with pytest.raises(SwitchError, match=rf"^{number.name}=.* is not .*unset it"):
                check_compiler_variables({number.name: bad})
        if number.parse == "choice":  # one of a few values, exactly (torch reads it as an Enum's value)
            for word in number.words:
                check_compiler_variables({number.name: word})
            with pytest.raises(SwitchError, match=rf"^{number.name}=' {number.words[0]}' is not '"):
                check_compiler_variables({number.name: f" {number.words[0]}"})
            continue
        good = {"int": " +2 ", "float": "1.5e0", "ints": "2, 1,1"}[number.parse]
        check_compiler_variables({number.name: good})
        for word in number.words:
            check_compiler_variables({number.name: word.upper()})  # torch lower-cases the value first
    check_compiler_variables({"TORCH_COMPILE_DEBUG": "abc", "INDUCTOR_PROVENANCE": "1"})  # torch reads the latter


def _number_reads(tree: ast.AST) -> set[str]:
    """The environment variables a module reads through int()/float(): directly (``int(os.environ.get("X"))``),
    per comma-separated part (``int(x) for x in os.environ.get("X").split(",")``), or through a name bound in
    the same function (``value = os.getenv("X")`` ... ``int(value)``)."""

    def variable(node):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "getenv") \
                and ast.unparse(node.func.value) in ("os.environ", "os", "environ"):
            return node.args[0].value
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ") \
                and isinstance(node.slice, ast.Constant):
            return node.slice.value
        return None

    found = set()
    for scope in [tree, *(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))]:
        bound = {}
        for node in ast.walk(scope):
            if isinstance(node, (ast.Assign, ast.NamedExpr)) and variable(node.value):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        bound.setdefault(target.id, set()).add(variable(node.value))
        for node in ast.walk(scope):
            parsed = None
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("int", "float") and node.args:
                parsed = [node.args[0]]
            elif isinstance(node, (ast.GeneratorExp, ast.ListComp)) and getattr(getattr(node.elt, "func", None), "id",
                                                                                 None) in ("int", "float"):
                parsed = [generator.iter for generator in node.generators]
            for part in parsed or ():
                for sub in ast.walk(part):
                    found |= {variable(sub)} - {None}
                    if isinstance(sub, ast.Name):
                        found |= bound.get(sub.id, set())
    return found


def test_the_table_holds_every_number_torchs_compiler_reads():
    """The installed torch's source, read again: a variable its compiler reads with int()/float() that the table
    lacks fails here (CUDA_VISIBLE_DEVICES, read for autotuning on several GPUs, is not the compiler's)."""
    from aotcuda.lowering.compiler_variables import TORCH_NUMBERS

    root = pathlib.Path(torch.__file__).parent
    read = set()
    for folder in ("_inductor", "_dynamo", "_functorch", "fx/experimental", "export", "_export"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text(errors="replace")
            if "environ" in text or "getenv" in text:
                read |= _number_reads(ast.parse(text))
    assert "TORCHINDUCTOR_COMPILE_THREADS" in read  # the scan finds what it should
    missing = read - {number.name for number in TORCH_NUMBERS} - {"CUDA_VISIBLE_DEVICES"}
    assert not missing, f"torch reads these as numbers; add them to TORCH_NUMBERS: {sorted(missing)}"


def test_a_number_the_table_does_not_know_is_named_from_torchs_line():
    """A torch that reads one more variable as a number: the import's ValueError is named from the statement that
    raised it (simulated with an empty table)."""
    import aotcuda.lowering.compiler_variables

    variables_file = aotcuda.lowering.compiler_variables.__file__
    script = f"""
import importlib.util, sys, aotcuda
spec = importlib.util.spec_from_file_location("aotcuda.lowering.compiler_variables", {variables_file!r})
variables = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # before aotcuda.lowering's import
spec.loader.exec_module(variables)
variables.TORCH_NUMBERS = ()
for _ in range(2):
    try:
        aotcuda.lower
    except aotcuda.PackageError as error:
        print(error)
"""
    environment = {**_without_torch_variables(), "TORCHINDUCTOR_MIN_NUM_SPLIT": "many"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment,
                          timeout=300)
    assert done.stdout.count("torch read TORCHINDUCTOR_MIN_NUM_SPLIT='many' there, in config.py line") == 2, \
        done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
