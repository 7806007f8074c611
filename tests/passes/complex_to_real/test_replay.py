"""Speed mechanisms of the rewrite: op replay (replay.py) and rule-call reuse (reuse.py).

Both must leave the program exactly as correct as a plain trace: replayed nodes carry the metadata a
fresh fake-tensor dispatch would give them (SymInts symbolic) and the stack trace of the node they
replace; reused results only merge identical pure calls. Checked on a small repeated RoPE chain with
a dynamic length, against eager on fresh inputs.
"""

import pytest
import torch
from torch.utils import _pytree as pytree

from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real import replay
from .helpers import assert_meta_carried, assert_no_complex, pass_scaling_module


@pytest.fixture(scope="module")
def chain():
    """The all-complex chain of pass_scaling.py, 4 steps, dynamic length; its rewrite; replays counted."""
    module = pass_scaling_module().ComplexChain(4)
    length = torch.export.Dim("length", max=512)
    ep = torch.export.export(module, (torch.randn(2, 16, 16),), dynamic_shapes=({1: length},)).run_decompositions()
    counts = []
    original = replay.ReplayMode.__exit__

    def exit_and_count(self, *exc):
        counts.append(self.replayed)
        return original(self, *exc)

    replay.ReplayMode.__exit__ = exit_and_count
    try:
        new = ReplaceComplexWithRealPass(strict=True)(ep)
    finally:
        replay.ReplayMode.__exit__ = original
    return module, ep, new, sum(counts)


def _size_exprs(sizes):
    return [s.node.expr if isinstance(s, torch.SymInt) else s for s in sizes]


def test_repeated_steps_are_replayed_and_match_eager(chain):
    module, ep, new, replayed = chain
    assert replayed >= 3 * 8, f"only {replayed} ops were replayed; the later steps repeat the first"
    assert_no_complex(new)
    assert_meta_carried(ep, new)
    for length in (5, 16, 37):
        x = torch.randn(2, length, 16)
        torch.testing.assert_close(new.module()(x), module(x), rtol=1e-5, atol=1e-5)


def test_replayed_metadata_equals_a_fresh_dispatch(chain):
    """Every tensor node's meta["val"] equals what its op gives on its inputs' values, run afresh."""
    _, _, new, _ = chain
    checked = 0
    for node in new.graph.nodes:
        value = node.meta.get("val")
        if node.op != "call_function" or not isinstance(value, torch.Tensor) \
                or not isinstance(node.target, torch._ops.OpOverload):
            continue
        args, kwargs = pytree.tree_map_only(torch.fx.Node, lambda a: a.meta["val"], (node.args, node.kwargs))
        with value.fake_mode:
            fresh = node.target(*args, **kwargs)
        assert (fresh.dtype, fresh.device) == (value.dtype, value.device), node.name
        assert _size_exprs(fresh.shape) == _size_exprs(value.shape), node.name
        assert _size_exprs(fresh.stride()) == _size_exprs(value.stride()), node.name
        assert "tensor_meta" in node.meta and node.meta.get("stack_trace"), node.name
        checked += 1
    assert checked > 40
    assert any(isinstance(s, torch.SymInt) for n in new.graph.nodes
               if isinstance(n.meta.get("val"), torch.Tensor) for s in n.meta["val"].shape)


def test_no_replay_across_different_metadata():
    """Same op, inputs of other shapes: each gets its own metadata (no key collision)."""
    def fn(a, b):
        za, zb = torch.view_as_complex(a), torch.view_as_complex(b)
        return torch.view_as_real(za * za), torch.view_as_real(zb * zb)

    class M(torch.nn.Module):
        def forward(self, a, b):
            return fn(a, b)

    a, b = torch.randn(3, 4, 2), torch.randn(5, 1, 2)
    new = ReplaceComplexWithRealPass(strict=True)(torch.export.export(M(), (a, b)).run_decompositions())
    a2, b2 = torch.randn(3, 4, 2), torch.randn(5, 1, 2)
    for got, want in zip(new.module()(a2, b2), fn(a2, b2)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert got.shape == want.shape


def test_rope_table_sliced_once_for_q_and_k():
    """A Llama-style block slices its rotation table for q and for k: the rewrite keeps one slice."""
    block = pass_scaling_module().Block()
    length = torch.export.Dim("length", max=512)
    ep = torch.export.export(block, (torch.randn(2, 16, 64),), dynamic_shapes=({1: length},)).run_decompositions()
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    table = next(n for n in new.graph.find_nodes(op="placeholder") if "freqs" in n.name)
    assert len(table.users) == 1, f"the table is read by {list(table.users)}"
    x = torch.randn(2, 9, 64)
    torch.testing.assert_close(new.module()(x), block(x), rtol=1e-5, atol=1e-5)
