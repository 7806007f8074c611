"""The import graph: the runtime runs packages without the lowering, and the layers import one way.

    lowering (aotcuda/lowering/) → passes → package contract ← runtime

The package contract (package_format.py) imports neither side; the runtime never imports the lowering
or the passes, not even lazily inside a function; the passes never import the runtime or the lowering.
"""

import ast
import pathlib
import subprocess
import sys

import aotcuda

SOURCE = pathlib.Path(aotcuda.__file__).parent
LOWERING = ("aotcuda.lowering",)


def _imports(path: pathlib.Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _files(folder: str) -> list[pathlib.Path]:
    return sorted((SOURCE / folder).rglob("*.py"))


def _importing(files, prefixes) -> list[str]:
    return [f"{path.relative_to(SOURCE)} imports {name}" for path in files for name in sorted(_imports(path))
            if name.startswith(prefixes)]


def test_the_runtime_imports_neither_the_lowering_nor_the_passes():
    assert _importing(_files("runtime"), (*LOWERING, "aotcuda.passes")) == []


def test_the_passes_import_neither_the_runtime_nor_the_lowering():
    assert _importing(_files("passes"), (*LOWERING, "aotcuda.runtime")) == []


def test_the_package_contract_imports_neither_side_nor_torch():
    names = _imports(SOURCE / "package_format.py")
    # the two leaf modules it shares, which import nothing of aotcuda's or torch's themselves
    shared = ("aotcuda.errors", "aotcuda.regular_files", "aotcuda.os_errors")
    assert [n for n in names if n.startswith(("aotcuda", "torch")) and not n.startswith(shared)] == []
    for leaf in ("errors.py", "regular_files.py"):
        assert [n for n in _imports(SOURCE / leaf) if n.startswith(("aotcuda", "torch"))] == []
    # the advice by errno: errors.py alone
    assert [n for n in _imports(SOURCE / "os_errors.py") if n.startswith(("aotcuda", "torch"))
            and not n.startswith("aotcuda.errors")] == []


def test_loading_packages_imports_the_runtime_alone():
    """A fresh process that imports aotcuda and its runtime (what ``aotcuda.load`` needs) imports no
    module of the lowering or the passes, and no torch module beyond what ``import torch`` imports
    (no Inductor, no Dynamo)."""
    code = """if True:
        import sys, torch
        before = set(sys.modules)
        import aotcuda, aotcuda.runtime.program, aotcuda.package_format
        from aotcuda import load, Program
        new = sorted(set(sys.modules) - before)
        print(",".join(new))
    """
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(SOURCE.parent)})
    loaded = result.stdout.strip().split(",")
    assert [m for m in loaded if not m.startswith("aotcuda")] == []
    assert [m for m in loaded if m.startswith((*LOWERING, "aotcuda.passes"))] == []
    assert "aotcuda.runtime.program" in loaded and "aotcuda.package_format" in loaded


def test_the_public_lowering_names_are_imported_when_first_used():
    from aotcuda import LoweredProgram, lower
    from aotcuda.lowering import LoweredProgram as lowered_program, lower as lowering_lower

    assert (lower, LoweredProgram) == (lowering_lower, lowered_program)
    assert {"lower", "LoweredProgram", "load"} <= set(dir(aotcuda))


def test_the_passes_know_no_executorch():
    """ExecuTorch's Edge dialect reaches the rule table only through aotcuda.executorch (registry.add_dialect)."""
    assert _importing(_files("passes"), ("executorch", "aotcuda.executorch")) == []
    assert [str(path.relative_to(SOURCE)) for path in _files("passes") if "dim_order_ops" in path.read_text()] == []


def test_ray_serves_http_proxy_imports_no_torch():
    """Ray Serve's HTTP proxy imports aotcuda.serving.proxy (its body reader): that brings in no torch, no
    runtime and no Ray of ours (a proxy with torch started 2.5 s slower and held 180 MB more)."""
    code = """if True:
        import sys
        import aotcuda.serving.proxy
        print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "aotcuda", "ray"))))
    """
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(SOURCE.parent)})
    assert result.stdout.strip().split(",") == ["aotcuda", "aotcuda.errors", "aotcuda.serving", "aotcuda.serving.body",
                                                "aotcuda.serving.proxy", "aotcuda.serving.web_pages",
                                                "aotcuda.switches"]
    from aotcuda.serving import RequestError, ServeOptions, decode_inputs  # the package's names, when used

    assert RequestError.http_status == 400 and callable(decode_inputs) and ServeOptions is not None


def test_the_package_has_its_installed_version():
    """A new user's trial (2026-12-07): aotcuda.__version__ was missing. The review: it is the installed version only
    where that install is the aotcuda imported (its source tree, for an editable install), and importing aotcuda
    does not read it (importlib.metadata cost every import 14 ms)."""
    import json
    import os
    from importlib import metadata

    url = json.loads(metadata.distribution("aotcuda").read_text("direct_url.json") or "{}").get("url", "")
    imported_is_installed = url.startswith("file://") and os.path.realpath(aotcuda.__file__).startswith(
        os.path.realpath(url[len("file://"):]) + os.sep)
    assert aotcuda.__version__ == (metadata.version("aotcuda") if imported_is_installed else "0+unknown")
    fresh = subprocess.run([sys.executable, "-c", "import sys, aotcuda; print('importlib.metadata' in sys.modules)"],
                           capture_output=True, text=True, check=True)
    assert fresh.stdout.strip() == "False", fresh


def test_a_missing_serve_extra_is_a_missing_module():
    """The H100 run of session 38: on a machine without Ray (pytest 9.1), four serving test files errored at
    collection instead of skipping. aotcuda.serving raised a bare ImportError for the missing extra, and
    pytest.importorskip skips on ModuleNotFoundError alone from pytest 9.1 on (9.0 warns). Each of the serving extra's
    imports now raises ModuleNotFoundError (an ImportError still) that names the missing module and the install."""
    code = """if True:
        import importlib, sys
        sys.modules["ray"] = sys.modules["safetensors"] = None  # as if neither were installed
        from aotcuda.serving import codec, server
        for attempt in (lambda: importlib.import_module("aotcuda.serving.deployment"), codec._safetensors,
                        lambda: server.serve_package("p.pt2")):
            try:
                attempt()
            except ModuleNotFoundError as missing:
                print(missing.name, "pip install 'aotcuda[serve]'" in str(missing))
            except ImportError as error:
                print("a bare ImportError:", error)
        import types
        sys.modules["ray"] = types.ModuleType("ray")  # installed but broken: no ray.serve, an ImportError of its own
        try:
            importlib.import_module("aotcuda.serving.deployment")
        except ModuleNotFoundError as missing:
            print("said missing:", missing)
        except ImportError as broken:
            print("broken install:", "pip install" not in str(broken))
    """
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(SOURCE.parent)})
    assert result.stdout.split("\n")[:4] == ["ray True", "safetensors.torch True", "ray True",
                                             "broken install: True"], result.stdout + result.stderr
