"""Rotary embeddings as models write them, rewritten and compared with eager."""

import pytest
import torch

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import assert_matches, assert_meta_carried, assert_no_complex, export
from .rope_models import LlamaRope, WanRope

aten = torch.ops.aten


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def llama_programs(request):
    """LlamaRope exported once per dtype with a dynamic sequence length, and its rewrite."""
    model = LlamaRope()
    q, k = torch.randn(2, 8, 3, 16).to(request.param), torch.randn(2, 8, 3, 16).to(request.param)
    seq = torch.export.Dim("seq", min=2, max=64)
    ep = export(model, (q, k), dynamic_shapes=({1: seq}, {1: seq}))
    return model, ep, ReplaceComplexWithRealPass(strict=True)(ep), request.param


def test_llama_rope_program_has_the_model_ops(llama_programs):
    _, ep, new, _ = llama_programs
    ops = {n.target for n in ep.graph.nodes if n.op == "call_function"}
    assert {aten.polar.default, aten.split_with_sizes.default, aten.cat.default, aten.view_as_real.default,
            aten.view_as_complex.default, aten.mul.Tensor} <= ops
    assert ep.graph_signature.lifted_tensor_constants  # the complex constant table
    assert_no_complex(new)
    assert_meta_carried(ep, new)


@pytest.mark.parametrize("seq", [5, 37])
def test_llama_rope_matches_eager_at_two_lengths(llama_programs, seq):
    model, _, new, dtype = llama_programs
    q, k = torch.randn(2, seq, 3, 16).to(dtype), torch.randn(2, seq, 3, 16).to(dtype)
    assert_matches(model(q, k), new.module()(q, k), dtype)


def test_llama_rope_keeps_the_length_symbolic(llama_programs):
    _, _, new, _ = llama_programs
    q = next(n for n in new.graph.nodes if n.op == "placeholder" and n.name == "q")
    assert isinstance(q.meta["val"].shape[1], torch.SymInt)
    assert new.range_constraints


def test_wan_rope_complex128():
    model = WanRope()
    x = torch.randn(2, 30, 2, 128)
    ep = export(model, (x,))
    assert ep.graph_signature.inputs_to_buffers  # the complex128 table is a buffer
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert new.state_dict["freqs"].dtype == torch.float64
    fresh = torch.randn(2, 30, 2, 128)
    assert_matches(model(fresh), new.module()(fresh), torch.float32)
    # the math itself runs in float64: compare before the final cast too
    torch.testing.assert_close(new.module()(fresh).double(), model(fresh).double(), rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_llama_rope_rewritten_on_cuda(dtype):
    """Tensors the rules create (sign tables, scalars) must land on the program's device."""
    model = LlamaRope().cuda()
    model.freqs_cis = model.freqs_cis.cuda()  # a plain attribute: .cuda() leaves it where it was
    q, k = (torch.randn(2, 8, 3, 16, device="cuda", dtype=dtype) for _ in range(2))
    seq = torch.export.Dim("seq", min=2, max=64)
    ep = export(model, (q, k), dynamic_shapes=({1: seq}, {1: seq}))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    for length in (5, 37):
        q, k = (torch.randn(2, length, 3, 16, device="cuda", dtype=dtype) for _ in range(2))
        assert_matches(model(q, k), new.module()(q, k), dtype)


@pytest.mark.cuda
def test_wan_rope_rewritten_on_cuda():
    model = WanRope().cuda()
    ep = export(model, (torch.randn(2, 30, 2, 128, device="cuda"),))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    x = torch.randn(2, 30, 2, 128, device="cuda")
    assert_matches(model(x), new.module()(x), torch.float32)
