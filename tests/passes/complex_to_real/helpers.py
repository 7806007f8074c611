"""Shared checks for the ReplaceComplexWithRealPass tests: export, rewrite, compare with eager.

Programs take and return real tensors (complex program inputs and outputs are refused by design), so
test modules wrap a complex function: real inputs of shape S + [2] become complex with view_as_complex,
complex results come back through view_as_real.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable

import torch
from torch.utils import _pytree as pytree

from aotcuda.passes import ReplaceComplexWithRealPass

# Relative-error tolerances that fit the dtype of the math (see tests/README or common standards).
TOLERANCES = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.bfloat16: dict(rtol=1e-2, atol=1e-2),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
}
COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


class ComplexFn(torch.nn.Module):
    """forward(*real pairs, *others) = view_as_real(fn(*view_as_complex(pairs), *others)).

    The first `n_complex` arguments are pairs (real, last dim 2) made complex; complex results are
    returned as view_as_real pairs, real results as they are.
    """

    def __init__(self, fn: Callable, n_complex: int = 1):
        super().__init__()
        self.fn, self.n_complex = fn, n_complex

    def forward(self, *args):
        complex_args = [torch.view_as_complex(a) for a in args[: self.n_complex]]
        out = self.fn(*complex_args, *args[self.n_complex:])
        return pytree.tree_map(lambda t: torch.view_as_real(t) if t.is_complex() else t, out)


def pair(*shape, dtype=torch.float32) -> torch.Tensor:
    """A random complex tensor of `shape` as its view_as_real pair (float32 → complex64 …)."""
    return torch.randn(*shape, 2, dtype=dtype)


def export(module: torch.nn.Module, args: tuple, dynamic_shapes=None) -> torch.export.ExportedProgram:
    return torch.export.export(module, args, dynamic_shapes=dynamic_shapes).run_decompositions()


def ops_in(ep: torch.export.ExportedProgram) -> set:
    return {n.target for n in ep.graph.nodes if n.op == "call_function"}


def assert_no_complex(ep: torch.export.ExportedProgram) -> None:
    for node in ep.graph.nodes:
        for v in pytree.tree_leaves(node.meta.get("val")):
            assert not (isinstance(v, torch.Tensor) and v.dtype.is_complex), f"{node.name} is still complex"
    for name, value in {**ep.state_dict, **ep.constants}.items():
        if isinstance(value, torch.Tensor):
            assert not value.dtype.is_complex, f"state {name} is still complex"


# Ops whose rule adds no node (the pair is the value already), so their source line may vanish; and
# sym_size, which the trace re-creates where a size is first used, under that user's source line.
VANISHING_OPS = {torch.ops.aten.sym_size.int, torch.ops.aten.view_as_complex.default, torch.ops.aten.view_as_real.default,
                 torch.ops.aten._assert_tensor_metadata.default, torch.ops.aten.alias.default,
                 torch.ops.aten.detach.default, operator.getitem}


def assert_meta_carried(ep: torch.export.ExportedProgram, new: torch.export.ExportedProgram) -> None:
    """Every value-producing node has meta['val'] and every source line of the original survives."""
    for node in new.graph.nodes:
        if node.op in ("placeholder", "call_function") and node.users:
            assert "val" in node.meta, f"{node.name} has no meta['val']"
    traces = lambda g, skip: {n.meta["stack_trace"] for n in g.nodes
                              if n.op == "call_function" and n.meta.get("stack_trace") and n.target not in skip}
    lost = traces(ep.graph, VANISHING_OPS) - traces(new.graph, ())
    assert not lost, f"the rewrite lost the stack traces {lost}"
    assert_devices_carried(ep, new)


def _device_of(value) -> torch.device | None:
    return next((v.device for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)), None)


def replaced_node(node: torch.fx.Node) -> str | None:
    """The name of the original node a node of the rewritten graph was made for (meta["from_node"])."""
    for source in node.meta.get("from_node") or []:
        if "PairInterpreter" in getattr(source, "pass_name", ""):
            return source.name
    return None


def assert_devices_carried(ep: torch.export.ExportedProgram, new: torch.export.ExportedProgram) -> None:
    """No node the pass creates has a device other than the node it replaces (one of its devices, where it
    has several results), and every placeholder's value lives where the program's state says it does."""
    originals = {n.name: n for n in ep.graph.nodes}
    for node in new.graph.nodes:
        device, name = _device_of(node.meta.get("val")), replaced_node(node)
        if node.op != "call_function" or device is None or name not in originals:
            continue
        # A node with several results may hold them on several devices (a while_loop's CPU counter).
        original = pytree.tree_leaves(originals[name].meta.get("val"))
        expected = {v.device for v in original if isinstance(v, torch.Tensor)}
        assert not expected or device in expected, (
            f"{node.name} ({node.target}) is on {device}, the node it replaces ({name}) on {expected}")
    state = {**new.state_dict, **new.constants}
    for spec in new.graph_signature.input_specs:
        if spec.target in state:
            placeholder = next(iter(new.graph.find_nodes(op="placeholder", target=spec.arg.name)))
            assert placeholder.meta["val"].device == state[spec.target].device, spec.target


def tolerance(dtype: torch.dtype) -> dict:
    return TOLERANCES[dtype]


def assert_matches(expected, actual, dtype: torch.dtype) -> None:
    expected, actual = pytree.tree_leaves(expected), pytree.tree_leaves(actual)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, **tolerance(dtype))


def subgraph_operands(ep: torch.export.ExportedProgram) -> list[tuple[str, str, object]]:
    """(higher-order op, get_attr target, the attribute it names) for every get_attr operand of every
    higher-order op node (cond, while_loop, scan, map_impl, flex_attention, wrap_with_*), nested ones too."""
    found = []
    for module in ep.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
                found += [(node.target.name(), arg.target, getattr(module, arg.target, None))
                          for arg in pytree.tree_leaves((node.args, node.kwargs))
                          if isinstance(arg, torch.fx.Node) and arg.op == "get_attr"]
    return found


def assert_subgraph_operands_are_graph_modules(ep: torch.export.ExportedProgram) -> None:
    """Inductor reads each subgraph operand's .graph: each must stay a GraphModule child of its module."""
    for op, target, value in subgraph_operands(ep):
        assert isinstance(value, torch.fx.GraphModule), f"{op}'s operand {target} is {type(value).__name__}"


def rewrite(module: torch.nn.Module, args: tuple, *, expect_ops: Iterable = (), dynamic_shapes=None):
    """Export, check the ops the test means to exercise are there, rewrite strictly, check the result."""
    ep = export(module, args, dynamic_shapes)
    missing = set(expect_ops) - ops_in(ep)
    assert not missing, f"the exported program lacks {missing}; the test would not exercise its rule"
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert new is not ep
    assert_no_complex(new)
    assert_meta_carried(ep, new)
    assert len(subgraph_operands(new)) == len(subgraph_operands(ep))
    assert_subgraph_operands_are_graph_modules(new)
    return ep, new


def check(fn: Callable, *args, n_complex: int = 1, expect_ops: Iterable = (), dtype=None, dynamic_shapes=None):
    """Rewrite ComplexFn(fn) exported at `args` and compare it with eager on fresh inputs of the same shapes."""
    module = ComplexFn(fn, n_complex)
    _, new = rewrite(module, args, expect_ops=expect_ops, dynamic_shapes=dynamic_shapes)
    fresh = tuple(fresh_like(a) for a in args)
    dtype = dtype or next(a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
    assert_matches(module(*fresh), new.module()(*fresh), dtype)
    return new


def fresh_like(a):
    """A new random tensor like `a` (integers and booleans keep their values: they are indices/masks)."""
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return torch.randn_like(a)
    return a


def run_rule(op, shape, *args, dtype=torch.float32):
    """Call op's rule directly on a random complex tensor of `shape` and compare with eager `op`."""
    from aotcuda.passes.complex_to_real.pair import Pair
    from aotcuda.passes.complex_to_real.registry import rule_for

    z = torch.view_as_complex(torch.randn(*shape, 2, dtype=dtype))
    expected = op(z, *args)
    got = rule_for(op).fn(expected, Pair(torch.view_as_real(z)), *args)
    to_real = lambda v: v.t if isinstance(v, Pair) else torch.view_as_real(v) if v.is_complex() else v
    for e, g in zip(pytree.tree_leaves(expected), pytree.tree_leaves(got, is_leaf=lambda v: isinstance(v, Pair))):
        torch.testing.assert_close(to_real(g), to_real(e), **tolerance(dtype))


def run_rule_two(op, shape, src_of, *args, dtype=torch.float32):
    """Like run_rule for a scatter: op(z, src, *args) with src shaped like src_of(z)."""
    from aotcuda.passes.complex_to_real.pair import Pair
    from aotcuda.passes.complex_to_real.registry import rule_for

    z = torch.view_as_complex(torch.randn(*shape, 2, dtype=dtype))
    src = torch.randn_like(src_of(z))
    expected = op(z, src, *args)
    got = rule_for(op).fn(expected, Pair(torch.view_as_real(z)), Pair(torch.view_as_real(src)), *args)
    torch.testing.assert_close(got.t, torch.view_as_real(expected), **tolerance(dtype))


def pass_scaling_module():
    """benchmarks/pass_scaling.py as a module (its Llama-style block and all-complex chain)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "pass_scaling.py"
    spec = importlib.util.spec_from_file_location("pass_scaling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

