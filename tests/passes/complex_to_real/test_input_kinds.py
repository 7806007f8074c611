"""Every kind of input and output torch.export's graph signature has survives the pass unchanged.

One table over the kinds: constant inputs of each Python type (bool, None, int, float, str, nested
lists/tuples, flattened by export into one placeholder per leaf: ``img_shapes_0_0``), SymInt inputs,
SymInt/SymFloat/SymBool outputs, effect tokens, and custom (torchbind) objects as attributes and as
inputs. Each runs in a complex and a non-complex program: the pass must return a verified program with
the same signature kinds and names that matches eager, and the package signature writer must take it.
"""

from __future__ import annotations

import os

import pytest
import torch
from torch.export import Dim

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.lowering.signature import signature_from_exported_program

X = torch.randn(3, 2)


def _complex_or_not(x, is_complex: bool):
    """x * 2 as complex math (the pass rewrites it) or as real math (the pass leaves it)."""
    if is_complex:
        return torch.view_as_real(torch.view_as_complex(x) * (2 + 1j))
    return x * 2


class Constants(torch.nn.Module):
    """Keyword arguments of every constant type, as libraries pass them for export."""

    def __init__(self, is_complex: bool):
        super().__init__()
        self.is_complex = is_complex

    def forward(self, x, use_cache=True, output_attentions=0, scale=1.0, mode="a", img_shapes=(), pair=()):
        y = _complex_or_not(x, self.is_complex)
        if not use_cache and output_attentions is None and mode == "a":
            y = y * scale + img_shapes[0][0][1] + pair[1][0]
        return y


CONSTANTS = dict(use_cache=False, output_attentions=None, scale=0.5, mode="a", img_shapes=[[(1, 4, 4)]],
                 pair=(3, [2.5]))


class SymbolInputsAndOutputs(torch.nn.Module):
    """An int input made dynamic (a SymInt input); SymInt, SymFloat and SymBool outputs."""

    def __init__(self, is_complex: bool):
        super().__init__()
        self.is_complex = is_complex

    def forward(self, x, n):
        y = _complex_or_not(x, self.is_complex) * n
        return y, x.shape[0] + n, x.shape[0] / 2, x.shape[0] > 1


class Token(torch.nn.Module):
    """An effectful op: export threads an effect token through the program (TOKEN input and output)."""

    def __init__(self, is_complex: bool):
        super().__init__()
        self.is_complex = is_complex

    def forward(self, x):
        torch.ops.aten._print("aotcuda token test")
        return _complex_or_not(x, self.is_complex)


_FAKE_FOO: list = []  # the fake class, once registered


def _torchbind_foo():
    """torch's test torchbind class _Foo(x, y) with a fake class, or a skip naming what is missing."""
    library = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorchbind_test.so")
    if not os.path.exists(library):
        pytest.skip(f"this torch build has no {library} (torch's test torchbind classes)")
    if not _FAKE_FOO:
        torch.ops.load_library(library)

        @torch._library.register_fake_class("_TorchScriptTesting::_Foo")
        class FakeFoo:
            def __init__(self, x, y):
                self.x, self.y = x, y

            @classmethod
            def __obj_unflatten__(cls, flattened):
                return cls(**dict(flattened))

            def add_tensor(self, z):
                return (self.x + self.y) * z

        _FAKE_FOO.append(FakeFoo)
    return torch.classes._TorchScriptTesting._Foo(10, 20)


class CustomObjectAttribute(torch.nn.Module):
    """A torchbind object held by the module: a CUSTOM_OBJ input (and, through its method, a token)."""

    def __init__(self, is_complex: bool):
        super().__init__()
        self.is_complex, self.foo = is_complex, _torchbind_foo()

    def forward(self, x):
        return _complex_or_not(x, self.is_complex) + self.foo.add_tensor(x)


class CustomObjectInput(torch.nn.Module):
    """A torchbind object passed by the caller: a USER_INPUT with a CustomObjArgument."""

    def __init__(self, is_complex: bool):
        super().__init__()
        self.is_complex = is_complex

    def forward(self, x, foo):
        return _complex_or_not(x, self.is_complex) + foo.add_tensor(x)


# name: (module class, args(is_complex) -> (args, kwargs), dynamic_shapes)
KINDS = {
    "constants": (Constants, lambda: ((X,), CONSTANTS), None),
    "symint input, sym outputs": (SymbolInputsAndOutputs, lambda: ((X, 3), {}), {"x": None, "n": Dim.DYNAMIC}),
    "token": (Token, lambda: ((X,), {}), None),
    "custom object attribute": (CustomObjectAttribute, lambda: ((X,), {}), None),
    "custom object input": (CustomObjectInput, lambda: ((X, _torchbind_foo()), {}), None),
}


def _signature_kinds(ep: torch.export.ExportedProgram) -> list:
    specs = [*ep.graph_signature.input_specs, *ep.graph_signature.output_specs]
    return [(spec.kind, type(spec.arg).__name__, getattr(spec.arg, "value", None), spec.target) for spec in specs]


@pytest.mark.parametrize("is_complex", [True, False], ids=["complex", "real"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_signature_kind_survives_the_pass(kind, is_complex):
    module_class, make_args, dynamic_shapes = KINDS[kind]
    module = module_class(is_complex)
    args, kwargs = make_args()
    ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False).run_decompositions()
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert (new is not ep) == is_complex  # a real program is returned as it is
    new.validate()
    assert _signature_kinds(new) == _signature_kinds(ep)
    assert [n.name for n in new.graph.find_nodes(op="placeholder")] == \
           [s.arg.name for s in new.graph_signature.input_specs]
    fresh = (torch.randn_like(args[0]), *args[1:])
    torch.testing.assert_close(new.module()(*fresh, **kwargs), module(*fresh, **kwargs), rtol=1e-5, atol=1e-5)
    signature = signature_from_exported_program(new)
    assert [spec["name"] for spec in signature["inputs"]] == ["x"]  # the one tensor the container takes
    assert signature["inputs"][0]["complex"] is None and signature["inputs"][0]["shape"] == [3, 2]


def test_a_string_constant_equal_to_a_placeholder_name_is_not_looked_up_as_one():
    """ExportGraphSignature.user_inputs holds a constant's value: "x" must not be read as the input x."""
    ep = torch.export.export(Constants(True), (X,), {**CONSTANTS, "mode": "x"}, strict=False).run_decompositions()
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert [spec["name"] for spec in signature_from_exported_program(new)["inputs"]] == ["x"]
