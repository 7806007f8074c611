"""Every torch internal the pass uses resolves on this torch, from the module torch_internals.py names."""

import importlib

import pytest
import torch

from aotcuda.passes.complex_to_real import torch_internals


@pytest.mark.parametrize("name", sorted(torch_internals.SYMBOLS))
def test_each_listed_symbol_is_where_the_table_says(name):
    module, _ = torch_internals.SYMBOLS[name]
    assert getattr(importlib.import_module(module), name) is getattr(torch_internals, name)
    assert name in torch_internals.__doc__  # the docstring's table explains it


def test_the_tracer_attributes_exist_on_a_live_trace():
    seen = {}

    def fn(x):
        tracer = torch_internals.get_proxy_mode().tracer
        seen.update({name: hasattr(tracer, name) for name in torch_internals.TRACER_ATTRIBUTES})
        return x + 1

    torch_internals.make_fx(fn, tracing_mode="symbolic")(torch.randn(3))
    assert seen == dict.fromkeys(torch_internals.TRACER_ATTRIBUTES, True)


def test_the_pass_imports_torch_internals_only_through_the_door():
    """No module of the pass imports a private torch module itself (torch._ops types and
    torch._higher_order_ops' registration aside)."""
    import ast
    import pathlib

    folder = pathlib.Path(torch_internals.__file__).parent
    private = []
    for path in folder.rglob("*.py"):
        if path.name == "torch_internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            private += [f"{path.name}: {n}" for n in names
                        if n.startswith(("torch._", "torch.fx.experimental", "torch.utils._python_dispatch",
                                         "torch.utils._sympy")) and n != "torch._higher_order_ops"]
    assert private == []
