"""StoreVectorOperandsPass: which vectors of one-row matrix products it stores, and that values do not change."""

import pytest
import torch
from torch.nn import functional as F

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.devices import DEVICE_PROFILES
from aotcuda.models.attention import RMSNorm
from aotcuda.passes.vector_operands import STORE, StoreVectorOperandsPass
from comparisons import check_decode_steps


class SwiGLU(torch.nn.Module):
    """A Llama MLP: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim=32, hidden=96):
        super().__init__()
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class NormThenLinear(torch.nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.proj = torch.nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        return self.proj(self.norm(x))


class ColumnVector(torch.nn.Module):
    """mm(W, v) with v [K, 1] made by gelu: the vector on the right."""

    def __init__(self, k=48, n=24):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, k))

    def forward(self, v):
        return self.weight @ F.gelu(v)


class VectorReturnedToo(torch.nn.Module):
    """The stored vector is also an output: the output keeps its node (the signature names it)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 8, bias=False)

    def forward(self, x):
        hidden = torch.tanh(x) * 2
        return self.proj(hidden), hidden


def _lowered_ep(model, args, dynamic_shapes=None):
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    return ep.run_decompositions(decomposition_table())


def _stored(ep):
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target is STORE]


def _relative_error(actual, expected):
    return ((actual - expected).norm() / expected.norm()).item()


def _check_values(model, ep, args):
    fresh = tuple(torch.randn_like(a) for a in args)
    with torch.no_grad():
        expected, actual = model(*fresh), ep.module()(*fresh)
    for e, a in zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(actual)):
        assert _relative_error(a, e) < 1e-5


@pytest.mark.parametrize("shape", [(1, 32), (1, 1, 32)], ids=["2d", "decode step [B=1, S=1, dim]"])
def test_the_swiglu_product_is_stored_before_the_down_projection(shape):
    model = SwiGLU().eval()
    args = (torch.randn(shape),)
    graph_pass = StoreVectorOperandsPass()
    ep = graph_pass(_lowered_ep(model, args))
    assert graph_pass.result.changed and graph_pass.result.counts == {"stored": 1}
    (store,) = _stored(ep)
    assert store.args[0].target is torch.ops.aten.mul.Tensor  # silu(w1 x) * w3 x, the vector itself
    mm_inputs = [n for n in ep.graph.nodes if n.target is torch.ops.aten.mm.default]
    assert len(mm_inputs) == 3
    _check_values(model, ep, args)


def test_a_normalized_vector_stays_inlined():
    model = NormThenLinear().eval()
    graph_pass = StoreVectorOperandsPass()
    ep = _lowered_ep(model, (torch.randn(1, 32),))
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"stored": 0} and not graph_pass.result.changed


class NormsAfterATanh(torch.nn.Module):
    """Residual layers of RMSNorm → linear over a stream that starts with a tanh: the norms' vectors are
    not costly, whatever sits upstream in the residual stream."""

    def __init__(self, layers=3, dim=16):
        super().__init__()
        self.norms = torch.nn.ModuleList(RMSNorm(dim) for _ in range(layers))
        self.projs = torch.nn.ModuleList(torch.nn.Linear(dim, dim, bias=False) for _ in range(layers))

    def forward(self, x):
        h = torch.tanh(x)
        for norm, proj in zip(self.norms, self.projs):
            h = h + proj(norm(h))
        return h


def test_a_normalized_vector_stays_inlined_with_a_transcendental_upstream_in_the_residual_stream():
    graph_pass = StoreVectorOperandsPass()
    ep = _lowered_ep(NormsAfterATanh().eval(), (torch.randn(1, 16),))
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"stored": 0}


def test_more_than_one_row_is_left_alone():
    graph_pass = StoreVectorOperandsPass()
    ep = _lowered_ep(SwiGLU().eval(), (torch.randn(4, 32),))
    assert graph_pass(ep) is ep and not _stored(ep)


def test_a_dynamic_row_count_is_left_alone():
    rows = torch.export.Dim("rows", min=1, max=64)
    ep = _lowered_ep(SwiGLU().eval(), (torch.randn(2, 32),), dynamic_shapes=({0: rows},))
    graph_pass = StoreVectorOperandsPass()
    assert graph_pass(ep) is ep and not _stored(ep)


def test_a_column_vector_on_the_right_is_stored():
    model = ColumnVector().eval()
    args = (torch.randn(48, 1),)
    ep = StoreVectorOperandsPass()(_lowered_ep(model, args))
    assert len(_stored(ep)) == 1
    _check_values(model, ep, args)


def test_a_stored_vector_that_is_also_returned_keeps_its_output_name():
    model = VectorReturnedToo().eval()
    args = (torch.randn(1, 16),)
    before = _lowered_ep(model, args)
    ep = StoreVectorOperandsPass()(before)
    assert len(_stored(ep)) == 1
    assert [s.arg.name for s in ep.graph_signature.output_specs] == \
        [s.arg.name for s in before.graph_signature.output_specs]
    _check_values(model, ep, args)


def test_running_it_twice_stores_once_and_leaves_the_input_program_unchanged_and_its_weights_shared():
    ep = _lowered_ep(SwiGLU().eval(), (torch.randn(1, 32),))
    nodes_before = len(ep.graph.nodes)
    once = StoreVectorOperandsPass()(ep)
    assert len(ep.graph.nodes) == nodes_before and not _stored(ep)
    assert all(once.state_dict[name] is weight for name, weight in ep.state_dict.items())  # shared, not copied
    once.state_dict["extra"] = torch.zeros(1)
    assert "extra" not in ep.state_dict  # the dict itself is the new program's
    second = StoreVectorOperandsPass()
    assert second(once) is once and second.result.counts == {"stored": 0}


def test_cuda_lowering_runs_it_and_cpu_lowering_does_not():
    # Inductor decomposes one-row products into reductions only off the CPU (with coordinate descent).
    assert StoreVectorOperandsPass in DEVICE_PROFILES["cuda"].passes
    assert StoreVectorOperandsPass not in DEVICE_PROFILES["cpu"].passes


def test_the_decode_step_stores_one_vector_per_layer_and_still_matches_eager():
    # The program the H200 measurement was made on (benchmarks/decode.py), at the tiny config, after the
    # passes lower() runs before this one: each layer's SwiGLU product, and nothing else, is stored.
    from aotcuda.lowering.pipeline import passes
    from aotcuda.models.decoder import DecoderConfig, make_decoder

    config = DecoderConfig.tiny()
    model = make_decoder(config, 1, dtype=torch.float32, seed=3)
    example = (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
    with torch.no_grad():
        ep = _lowered_ep(model, example)
        for graph_pass in passes():
            ep = graph_pass(ep)
        graph_pass = StoreVectorOperandsPass()
        ep = graph_pass(ep)
        assert graph_pass.result.counts == {"stored": config.n_layers}
        tokens = torch.randint(0, config.vocab_size, (1, 1))
        eager, lowered = make_decoder(config, 1, dtype=torch.float32, seed=3), ep.module()
        check_decode_steps(eager, lowered, tokens, steps=3, rtol=1e-5)
