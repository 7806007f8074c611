"""The package signature's names, at the ExportedProgram level (no compile): each output is named by its
place in forward's result (``out``, ``out[0]``, ``out['logits']``, ``out.hidden``), never by FX node."""

import collections

import pytest
import sympy
import torch

from aotcuda.lowering.signature import signature_from_exported_program
from aotcuda.passes.complex_to_real import ReplaceComplexWithRealPass

Pair = collections.namedtuple("Pair", "hidden scores")


def _rotate(x):
    return torch.view_as_real(torch.view_as_complex(x.reshape(2, 2, 2)) * 1j)


# forward's result for an input x of shape (2, 4), and the names its tensor leaves must get.
RESULTS = {
    "one tensor": (lambda x: x * 2, ["out"]),
    "tuple": (lambda x: (x * 2, x + 1), ["out[0]", "out[1]"]),
    "dict": (lambda x: {"logits": x * 2, "h": x.sum(0)}, ["out['logits']", "out['h']"]),
    "named tuple": (lambda x: Pair(x * 2, x - 1), ["out.hidden", "out.scores"]),
    "nested": (lambda x: [x * 2, {"k": (x + 3, x.mean())}], ["out[0]", "out[1]['k'][0]", "out[1]['k'][1]"]),
    "one tensor twice": (lambda x: (x * 2,) * 2, ["out[0]", "out[1]"]),
    "an input returned": (lambda x: (x, x + 1), ["out[0]", "out[1]"]),
    "complex, rewritten to a pair": (_rotate, ["out"]),
}


class Returning(torch.nn.Module):
    def __init__(self, result):
        super().__init__()
        self.result = result

    def forward(self, x):
        return self.result(x)


@pytest.mark.parametrize("kind", list(RESULTS))
def test_outputs_are_named_by_their_place_in_the_result(kind):
    result, names = RESULTS[kind]
    ep = torch.export.export(Returning(result), (torch.randn(2, 4),))
    rewritten = ReplaceComplexWithRealPass()(ep)
    signature = signature_from_exported_program(rewritten)
    assert [spec["name"] for spec in signature["outputs"]] == names
    assert [spec["name"] for spec in signature["inputs"]] == ["x"]
    # The names are the caller's paths: each reaches the matching leaf of the eager result.
    x = torch.randn(2, 4)
    out = result(x)
    for name, leaf in zip(names, torch.utils._pytree.tree_leaves(out)):
        assert torch.equal(eval(name, {"out": out}), leaf)


def test_a_transformers_model_output_is_named_by_its_keys():
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    ep = torch.export.export(Returning(lambda x: BaseModelOutputWithPooling(last_hidden_state=x * 2,
                                                                            pooler_output=x.sum(0))),
                             (torch.randn(2, 4),))
    signature = signature_from_exported_program(ep)
    assert [spec["name"] for spec in signature["outputs"]] == ["out['last_hidden_state']", "out['pooler_output']"]


class ShapeOps(torch.nn.Module):
    """Shape arithmetic torch.export writes into sizes and strides: slices with steps, pooling, cat,
    flattening, padding, transposes, expands, pairs of a complex view, unfold, outer products, repeats."""

    def forward(self, x, y):
        flat = x.reshape(-1)
        return (x[::2], x[:, 1::3], torch.cat([x, y], 0), torch.nn.functional.avg_pool1d(x.unsqueeze(0), 3, 2),
                flat, torch.nn.functional.pad(x, (0, 1)), x.t(), x.unsqueeze(-1).expand(-1, -1, 4).transpose(0, 1),
                torch.view_as_real(torch.complex(x, x)), x.unfold(0, 2, 2), torch.outer(flat, flat), x.repeat(2, 3),
                torch.nn.functional.max_pool2d(x[None, None], 3, 2, 1, ceil_mode=True))


def test_every_expression_the_lowering_writes_reads_back_with_the_runtime_grammar():
    """The runtime reads shape expressions with a small grammar (never sympify: issue 26): every size and
    stride expression a signature holds must read back to an expression equal to torch's own."""
    import random

    from aotcuda.runtime.shape_expressions import shape_expression

    dims = torch.export.Dim.AUTO
    ep = torch.export.export(ShapeOps(), (torch.randn(10, 13), torch.randn(5, 13)),
                             dynamic_shapes=({0: dims, 1: dims}, {0: dims, 1: dims}))
    signature = signature_from_exported_program(ep)
    written = [dim["expr"] for kind in ("inputs", "outputs") for spec in signature[kind]
               for dim in (*spec["shape"], *spec["strides"]) if isinstance(dim, dict)]
    assert len(set(written)) >= 10 and any("//" in e for e in written) and any("Max(" in e for e in written)
    exprs = {str(s.node.expr): s.node.expr for node in ep.graph.nodes if isinstance(node.meta.get("val"), torch.Tensor)
             for s in (*node.meta["val"].shape, *node.meta["val"].stride()) if isinstance(s, torch.SymInt)}
    assert set(written) <= set(exprs)
    rng = random.Random(0)
    for text, expr in exprs.items():
        parsed = shape_expression(text)
        for _ in range(5):
            values = {name: rng.randint(4, 500) for name in sorted(str(s) for s in expr.free_symbols)}
            assert parsed.subs({s: values[str(s)] for s in parsed.free_symbols}) == \
                expr.subs({s: values[str(s)] for s in expr.free_symbols}), text


class Pairs(torch.nn.Module):
    def forward(self, x, y):
        return x.reshape(x.shape[0], -1, 2).sum(-1), y * 2


def test_dim_names_name_plain_and_derived_dims_by_the_users_dims():
    """A plain Dim's symbol and the root of a derived one (2 * Dim("n"): the size is 2*s…) both map to the
    caller's names, so that the signature, inspect and errors read 2*n, not 2*s69."""
    from torch.export import Dim

    from aotcuda.lowering.signature import dim_names
    from aotcuda.runtime.specs import under_dim_names

    n, batch = Dim("n", min=8, max=512), Dim("batch", min=2, max=64)
    ep = torch.export.export(Pairs(), (torch.randn(3, 256), torch.randn(5)),
                             dynamic_shapes={"x": {0: batch, 1: 2 * n}, "y": None})
    names = dim_names(ep)
    x = next(iter(ep.graph.find_nodes(op="placeholder"))).meta["val"]
    assert [under_dim_names(str(size), names) for size in x.shape] == ["batch", "2*n"]
    assert sorted(names.values()) == ["batch", "n"]


def test_forward_parameters_record_positions_and_json_defaults():
    """What the runtime binds a call by (runtime/constant_arguments.py): positional parameters until *args,
    defaults that JSON holds, and has_default for one it does not (a tensor)."""
    from aotcuda.lowering.signature import forward_parameters

    class Model(torch.nn.Module):
        def forward(self, x, scale=1.0, *rest, mode: str = "a", table=torch.ones(1), flag=None, **extra):
            return x

    assert forward_parameters(Model()) == [
        {"name": "x", "positional": True, "has_default": False},
        {"name": "scale", "positional": True, "has_default": True, "default": 1.0},
        {"name": "mode", "positional": False, "has_default": True, "default": "a"},
        {"name": "table", "positional": False, "has_default": True},
        {"name": "flag", "positional": False, "has_default": True, "default": None}]


def test_a_parameter_name_load_would_refuse_is_not_recorded():
    """Load refuses a forward_parameters name past 256 characters (messages list them); a Python identifier may be that
    long, so lowering leaves the field out (the runtime then binds as for an older package) rather than writing a
    package load refuses."""
    import json

    from aotcuda.package_format import parse_signature

    long = "s" * 300
    namespace = {}
    exec(f"def forward(self, x, {long}=1.0):\n    return x * 2", namespace)
    model = type("Long", (torch.nn.Module,), {"forward": namespace["forward"]})()
    signature = signature_from_exported_program(torch.export.export(model, (torch.ones(2),)), device="cpu",
                                                module=model)
    assert "forward_parameters" not in signature
    parse_signature(json.dumps(signature).encode(), "aotcuda/signature.json", "x.pt2")


def test_names_lowering_writes_are_names_load_reads():
    """Found by names42: lowering wrote a constant argument's name whole (a nested dict key of 3,000 characters gave
    3,006) and an output's name with the raw ESC of a dict key's repr (an Enum member named ``a<ESC>b``), names load now
    refuses (package_format.check_names). It writes them through bounded_name: escaped, and cut with a digest."""
    import enum
    import json

    from aotcuda.package_format import MAX_TENSOR_NAME_CHARS, parse_signature

    class Nested(torch.nn.Module):
        def forward(self, x, extra):
            return x * extra["k" * 3000]

    key = enum.Enum("Key", {"a\x1bb": 1})["a\x1bb"]

    class EnumKeyed(torch.nn.Module):
        def forward(self, x):
            return {key: x * 2}

    nested = signature_from_exported_program(torch.export.export(Nested(), (torch.ones(2), {"k" * 3000: 2.0})))
    (constant,) = nested["constant_inputs"]
    assert constant["name"].startswith("#1['kkk") and len(constant["name"]) == MAX_TENSOR_NAME_CHARS - 20
    keyed = signature_from_exported_program(torch.export.export(EnumKeyed(), (torch.ones(2),)))
    assert [spec["name"] for spec in keyed["outputs"]] == ["out[<Key.a\\x1bb: 1>]"]
    for signature in (nested, keyed):
        parse_signature(json.dumps(signature).encode(), "aotcuda/signature.json", "x.pt2")


class Resize(torch.nn.Module):
    """A resize by a scale factor (fourth new user, 2026-12-06): torch computes the output size in floating point."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.interpolate(x, scale_factor=self.scale, mode="bilinear")


def _resize_program(scale):
    dim = torch.export.Dim("h", min=8, max=64)
    return torch.export.export(Resize(scale), (torch.randn(1, 2, 8, 8),), dynamic_shapes={"x": {2: dim}})


@pytest.mark.parametrize("scale", [0.5, 0.375, 1.5, 2.0])
def test_a_size_computed_in_floating_point_is_written_as_integers_eager_agrees_with(scale):
    """``F.interpolate(scale_factor=0.5)`` over a dynamic dim has the size ``TruncToInt(0.5*ToFloat(s))``: the
    signature held it as it was, and aotcuda.load refused the package it had just lowered ("is not a shape
    expression: unexpected character '.' ... the package is damaged or hostile"). A binary fraction's size is now
    an integer expression, equal to eager's size for every size the Dim allows."""
    from aotcuda.runtime.shape_expressions import shape_expression

    signature = signature_from_exported_program(_resize_program(scale))
    (dim,) = [d for d in signature["outputs"][0]["shape"] if isinstance(d, dict)]
    parsed = shape_expression(dim["expr"])
    (symbol,) = parsed.free_symbols
    for h in range(8, 65):
        assert parsed.subs(symbol, h) == Resize(scale)(torch.empty(1, 1, h, 8)).shape[2], (dim["expr"], h)


def test_a_size_of_a_factor_no_integer_expression_matches_is_refused_with_the_fix():
    """A scale of 0.7 rounds in floating point: no integer expression is eager's size for every h, so lowering
    says so and what to do, where the package was written and its load refused it as damaged."""
    from aotcuda.errors import DynamicShapesError

    with pytest.raises(DynamicShapesError, match=r"the size TruncToInt\(0.7\*ToFloat\(h\)\) of .out. is computed in "
                                                 r"floating point .* scale factor that is a binary "
                                                 r"fraction .* keep the dims it reads static"):
        signature_from_exported_program(_resize_program(0.7))


# forward(s, thr) whose output has a data-dependent size (u0) in some dim, eager's rows with s of shape (3, 50).
DATA_DEPENDENT_OUTPUTS = {
    "nonzero's (u0, 2) of strides (1, u0)": lambda s, thr: (s > thr).nonzero(),
    "nonzero made contiguous": lambda s, thr: (s > thr).nonzero().contiguous(),
    "rows kept, (u0, 50)": lambda s, thr: s[s[:, 0] > thr],
    "columns kept, (3, u0)": lambda s, thr: s[:, s[0] > thr],
    "(2, u0, 3)": lambda s, thr: s[:, s[0] > thr, None].expand(3, -1, 2).permute(2, 1, 0)[:, :, :3] * 1,
}


@pytest.mark.parametrize("kind", list(DATA_DEPENDENT_OUTPUTS))
def test_an_output_with_a_data_dependent_size_in_any_dim_gets_its_spec_without_a_guard(kind):
    """A new user's `(s > thr).nonzero()` with allow_fallbacks=True compiled, then failed in the signature:
    `GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 1) | Eq(2*u0, 0)`, from
    Tensor.is_contiguous() on the (u0, 2) output (a 1-D one, s[keep], passed). Each dim and stride of the spec is
    eager's at the example (u0 read as eager's size there), and so is "contiguous"."""
    forward = DATA_DEPENDENT_OUTPUTS[kind]
    torch.manual_seed(0)
    s, thr = torch.rand(3, 50), torch.tensor(0.5)
    ep = torch.export.export(Returning2(forward), (s, thr)).run_decompositions()
    (spec,) = signature_from_exported_program(ep, "cpu")["outputs"]
    eager = forward(s, thr)
    unbacked = [d for d in spec["shape"] if isinstance(d, dict)]
    assert unbacked and all(d["expr"].startswith("u") for d in unbacked), spec
    (symbol,) = {d["expr"] for d in unbacked}
    size = next(n for d, n in zip(spec["shape"], eager.shape) if isinstance(d, dict))

    def at_example(dim):
        return dim if isinstance(dim, int) else int(sympy.sympify(dim["expr"]).subs(symbol, size))

    assert [at_example(d) for d in spec["shape"]] == list(eager.shape)
    assert [at_example(d) for d in spec["strides"]] == list(eager.stride())
    assert spec["contiguous"] == eager.is_contiguous()


class Returning2(torch.nn.Module):
    def __init__(self, result):
        super().__init__()
        self.result = result

    def forward(self, s, thr):
        return self.result(s, thr)
