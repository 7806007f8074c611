"""The README and docs say what the code does: CLI synopses, the docs index, the dependencies."""

import re
import tomllib
from pathlib import Path

import click
import pytest

from aotcuda.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def synopsis(command: str) -> str:
    """The README's CLI line for `aotcuda <command>` (with its continuation lines)."""
    block = re.search(r"## CLI\n+```bash\n(.*?)```", README, re.S).group(1)
    return re.search(rf"^aotcuda {command} .*?(?=^aotcuda |\Z)", block, re.S | re.M).group(0)


def test_readme_demo_synopsis_matches_demo_help():
    line = synopsis("demo")
    for param in main.commands["demo"].params:
        if not isinstance(param, click.Option) or param.name == "help":
            continue
        assert param.opts[-1] in line, f"README's `aotcuda demo` line lacks {param.opts[-1]}"
        if isinstance(param.type, click.Choice):
            assert "|".join(param.type.choices) in line, f"README lists other choices for {param.opts[-1]}"
        elif param.default is not None:
            assert f"{param.opts[-1]} {param.default}" in line, f"README shows another default for {param.opts[-1]}"


def test_readme_synopses_name_every_option():
    """Each command's README line names each of its options (by a long or short name): a new user's trial found
    `lower --allow-fallbacks` and `inspect --json` only in --help. --signing-key-file is named once, by sign's line,
    for the commands it lists."""
    shared = synopsis("sign")
    for name, command in main.commands.items():
        line = synopsis(name)
        for param in command.params:
            if not isinstance(param, click.Option) or param.name == "help":
                continue
            if param.name == "signing_key_file" and name != "sign":
                assert f" {name}," in shared or f" {name} " in shared, f"sign's line does not say that {name} takes it"
                continue
            assert any(re.search(rf"{re.escape(opt)}\b", line) for opt in param.opts), \
                f"README's `aotcuda {name}` line lacks {param.opts[-1]}"


def test_lower_help_shows_the_dynamic_format_of_the_docs():
    dynamic = next(p for p in main.commands["lower"].params if p.name == "dynamic")
    assert dynamic.metavar == "NAME:DIM:MIN:MAX[:SYMBOL[*N]]"
    assert "--dynamic NAME:DIM:MIN:MAX[:SYMBOL[*N]]" in (ROOT / "docs" / "usage.md").read_text()


def test_readme_links_every_doc_and_the_benchmarks_readme():
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{doc.name})" in README, f"README does not link docs/{doc.name}"
        assert re.search(rf"^  {doc.name}\s+\S", README, re.M), f"README's layout has no line for {doc.name}"
    assert "](benchmarks/README.md)" in README
    benchmarks = (ROOT / "benchmarks" / "README.md").read_text()
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        assert script.name.startswith("_") or script.name == "rope_modules.py" or f"`{script.name}`" in benchmarks
    for place in ("docs/performance.md", "NOTES.md", "results/"):
        assert place in benchmarks


def test_readme_does_not_promise_one_line_errors():
    prose = " ".join(README.split())
    assert "Errors print as one line" not in prose
    assert "exit code 2" in prose and "exit with code 1" in prose


def test_numpy_is_a_dependency():
    """torch warns "Failed to initialize NumPy" on every run without it, and uses it for tensor <-> ndarray."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(re.match(r"numpy\b", d) for d in dependencies)


def test_ci_runs_the_readmes_test_command():
    """.ci/run is the README's test command; the ExecuTorch it installs is pinned, and is the extra's."""
    command = re.search(r"^(python3 .*) +# set up, run the tests$", README, re.M).group(1).strip()
    assert (ROOT / ".ci" / "run").read_text().splitlines()[-1] == command
    requirement_file = re.search(r"--no-deps -r (\S+)", command).group(1)
    pins = [line for line in (ROOT / requirement_file).read_text().splitlines() if line and not line.startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9.]*", pin) for pin in pins), pins
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [p for p in pins if p.startswith("executorch==")] == extras["executorch"]


def _resolves(dotted: str) -> bool:
    """Whether ``aotcuda.a.b.c`` names a module, or an attribute of the longest module prefix of it."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(value, name):
                return False
            value = getattr(value, name)
        return True
    return False


def test_every_dotted_aotcuda_name_in_the_docs_resolves():
    """A name the docs give in code (`aotcuda.lowering.devices.DEVICE_PROFILES`) is one a user can import:
    a new user's trial found three that were not."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    names = {(page.name, name) for page in pages
             for name in re.findall(r"`(aotcuda(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", page.read_text())}
    assert [f"{page}: {name}" for page, name in sorted(names) if not _resolves(name)] == []


def undefined_names(code: str) -> set[str]:
    """Names a snippet reads but never imports, assigns or gets from builtins (ast, nothing run)."""
    import ast
    import builtins

    tree = ast.parse(code)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)} - bound


def test_models_doc_example_imports_what_it_uses():
    """docs/models.md's example is a whole program a reader copies (it lowers, so it is not run here: an
    AOTInductor compile): every name it uses is imported or assigned in it (it once used torch unimported)."""
    text = (ROOT / "docs" / "models.md").read_text()
    first = re.search(r"^```python\n(.*?)^```", text, re.S | re.M).group(1)
    assert "PATTERNS" in first and undefined_names(first) == set()
    assert undefined_names("x = torch.ones(2)\n") == {"torch"}


def test_models_doc_transformers_example_defines_what_it_uses():
    """docs/models.md's "Lowering a transformers / diffusers model" example used a `config` it never made: a reader
    who copied it got a NameError before anything lowered (a new user's trial; run with device="cpu", it lowers and
    matches eager)."""
    text = (ROOT / "docs" / "models.md").read_text()
    example = next(block for block in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
                   if "LlamaForCausalLM(config)" in block)
    assert undefined_names(example) == set()


def test_the_readme_names_every_serve_option():
    """The README's CLI block names each option of `aotcuda serve` (a new user found the --allow-* flags only in
    docs/serving.md)."""
    pytest.importorskip("ray")
    from aotcuda.serving.command import serve_command

    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("aotcuda serve block.pt2"):readme.index("```", readme.index("aotcuda serve block.pt2"))]
    options = [opt for param in serve_command.params if isinstance(param, click.Option) for opt in param.opts
               if opt.startswith("--")]
    assert options and [opt for opt in options if opt not in block] == []


def test_serving_docs_first_example_serves_what_its_client_sends():
    """docs/serving.md's first example is followed literally: it once lowered an undefined `mymodel:make`, and
    its client sent x of shape (1, 16, 256) where `attention_block` makes seq 64 (the request got 400). The
    factory it names is called (no lowering), and every tensor the client snippet sends has the factory's
    example shape, but at the dims --dynamic makes dynamic, where it lies in the range given."""
    from aotcuda.cli_inputs import call_factory, model_and_inputs

    text = (ROOT / "docs" / "serving.md").read_text()
    commands = re.search(r"^```bash\n(.*?)^```", text, re.S | re.M).group(1)
    lower = re.search(r"^aotcuda lower (\S+) -o (\S+) --dynamic (\w+):(\d+):(\d+):(\d+)", commands, re.M)
    factory, package, name, dim, low, high = lower.groups()
    assert re.search(rf"^aotcuda serve {re.escape(package)} ", commands, re.M), "it serves another file"
    model, args, _ = model_and_inputs(call_factory(factory))
    import inspect

    example = dict(zip(inspect.signature(model.forward).parameters, args))
    client = text[text.index("## The HTTP contract"):]
    client = re.search(r"^```python\n(.*?)^```", client, re.S | re.M).group(1)
    sent = re.findall(r'"(\w+)": torch\.randn\(([\d, ]+)\)', client)
    assert sent, "the client snippet sends no tensor this test can read"
    for input_name, shape in sent:
        shape = [int(size) for size in shape.split(",")]
        expected = list(example[input_name].shape)
        assert len(shape) == len(expected), f"{input_name}: rank {len(shape)}, the factory's is {len(expected)}"
        for index, (size, example_size) in enumerate(zip(shape, expected)):
            if input_name == name and index == int(dim):
                assert int(low) <= size <= int(high), f"{input_name} dim {index}: {size} outside [{low}, {high}]"
            else:
                assert size == example_size, f"{input_name} {shape}: the package takes {expected} at dim {index}"


TEST_CITATION = re.compile(r"((?:tests/)?[\w/]*test_\w*\.py)?::(test_\w+)|(?<![\w/])((?:tests/)?[\w/]*test_\w*\.py)")


# A code span as Markdown pairs its backticks: a run of n opens, the next run of exactly n closes (``a `b` c`` is one
# span). Pairing every single backtick (`([^`]+)`) read a line with a ``...`` span out of step: the spans after it
# were the text between them, and a cited test there went unchecked (reliability.md's fixnu38 row, review of break41).
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def cited_tests_that_do_not_exist(pages) -> list[str]:
    """Each test file (`tests/runtime/test_x.py`, `test_x.py`) and test (`test_x.py::test_y`) a page cites in code, where
    it is not in tests/. A bare `::test_y` is a test of the file cited last before it on that line (the line's first
    one where none comes before)."""
    tests = ROOT / "tests"
    files = [path.relative_to(tests).as_posix() for path in tests.rglob("*.py")]
    sources: dict[str, str] = {}

    def defined(name: str, ref: str) -> bool:
        ref = ref.removeprefix("tests/")
        matches = [f for f in files if f == ref or f.endswith("/" + ref)]
        for file in matches:
            sources.setdefault(file, (tests / file).read_text())
        return any(re.search(rf"^\s*(?:async\s+)?def {name}\(", sources[file], re.M) for file in matches)

    missing = []
    for page in pages:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            citations = list(TEST_CITATION.finditer(" ".join(match.group(2) for match in CODE_SPAN.finditer(line))))
            files_cited = [m.group(1) or m.group(3) for m in citations if m.group(1) or m.group(3)]
            current = files_cited[0] if files_cited else None
            for citation in citations:
                current = citation.group(1) or citation.group(3) or current
                if current is None:
                    missing.append(f"{page.name}:{number}: ::{citation.group(2)} names no file")
                elif citation.group(2) is None:
                    ref = current.removeprefix("tests/")
                    if not any(f == ref or f.endswith("/" + ref) for f in files):
                        missing.append(f"{page.name}:{number}: no test file {current}")
                elif not defined(citation.group(2), current):
                    missing.append(f"{page.name}:{number}: {current}::{citation.group(2)} is not defined there")
    return missing


def test_every_test_the_docs_cite_exists():
    """docs/reliability.md's tests column is where a reader goes to see a claim checked: a new user's trial found three
    citations of tests renamed or living in another file than the one the row named."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert cited_tests_that_do_not_exist(pages) == []


def test_the_citation_check_sees_a_renamed_test(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("| row | `tests/test_docs.py::test_no_such_test`, `::test_every_test_the_docs_cite_exists` |\n"
                    "| row | `::test_the_citation_check_sees_a_renamed_test` before `test_docs.py` |\n"
                    "| row | `tests/no_such_dir/test_nothing.py` |\n"
                    "| row | said ``input 'mask' is None``, now `x` | `tests/test_docs.py::test_after_a_double_span` |\n")
    assert cited_tests_that_do_not_exist([page]) == [
        "page.md:1: tests/test_docs.py::test_no_such_test is not defined there",
        "page.md:3: no test file tests/no_such_dir/test_nothing.py",
        "page.md:4: tests/test_docs.py::test_after_a_double_span is not defined there",
    ]


def test_usage_md_shows_lowers_signature():
    """docs/usage.md opens with lower()'s signature: it lacked signing_key= (added to lower() later)."""
    import ast
    import inspect

    import aotcuda

    text = (ROOT / "docs" / "usage.md").read_text()
    shown = re.search(r"^```python\n(lower\(.*?\)) -> LoweredProgram\n```", text, re.S | re.M).group(1)
    call = ast.parse(shown.replace("*, ", "").replace("\n", " ")).body[0].value
    documented = [(arg.id, None) for arg in call.args] + [(k.arg, ast.literal_eval(k.value)) for k in call.keywords]
    actual = [(name, None if p.default is inspect.Parameter.empty else p.default)
              for name, p in inspect.signature(aotcuda.lower).parameters.items()]
    assert documented == actual


def test_usage_md_names_every_field_of_lowered_program():
    """docs/usage.md's list of LoweredProgram's fields lacked pass_results and signing_key."""
    import dataclasses

    from aotcuda import LoweredProgram

    text = " ".join((ROOT / "docs" / "usage.md").read_text().split())
    listed = text[text.index("`LoweredProgram` fields:"):].split(". ")[0]
    names = [f.name for f in dataclasses.fields(LoweredProgram)] + ["runs_in_aotcuda_runtime", "load"]
    assert [name for name in names if f"`{name}" not in listed and f"`.{name}" not in listed] == []
