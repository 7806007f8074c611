"""RowProductsPass: which products become aotcuda::row_product, and that the rewritten program computes
what eager does (the op's CPU implementation here; its Triton kernel: tests/kernels)."""

import pytest
import torch

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.passes.row_products import RowProductsPass
from comparisons import check_decode_steps

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}


class Projections(torch.nn.Module):
    """A decode-step-like block: two linear layers (one with a bias) and a bias-free head."""

    def __init__(self, dtype):
        super().__init__()
        self.up = torch.nn.Linear(64, 256, dtype=dtype)
        self.down = torch.nn.Linear(256, 64, bias=False, dtype=dtype)
        self.head = torch.nn.Linear(64, 500, bias=False, dtype=dtype)

    def forward(self, x):
        return self.head(torch.nn.functional.silu(self.down(torch.nn.functional.silu(self.up(x)))) + x)


def _ep(model, args, dynamic_shapes=None):
    with torch.no_grad():
        return torch.export.export(model, args, dynamic_shapes=dynamic_shapes).run_decompositions(decomposition_table())


def _row_products(ep):
    return [n for n in ep.graph.nodes if n.target is torch.ops.aotcuda.row_product.default]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 3])
def test_few_row_products_become_the_op_and_match_eager(rows, dtype):
    torch.manual_seed(0)
    model = Projections(dtype)
    ep = _ep(model, (torch.randn(rows, 64, dtype=dtype),))
    graph_pass = RowProductsPass(min_weight_elements=0)
    rewritten = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 3, "kept": 0} and len(_row_products(rewritten)) == 3
    assert not _row_products(ep)  # the program passed in is unchanged
    x = torch.randn(rows, 64, dtype=dtype)
    with torch.no_grad():
        got, want = rewritten.module()(x), model(x)
    assert ((got.float() - want.float()).norm() / want.float().norm()).item() < TOLERANCE[dtype]


@pytest.mark.parametrize("case", ["many rows", "a dynamic row count", "small weights"])
def test_outside_its_limits_products_are_kept(case):
    model = Projections(torch.float32)
    if case == "a dynamic row count":
        ep = _ep(model, (torch.randn(4, 64),), dynamic_shapes=({0: torch.export.Dim("rows", min=2, max=64)},))
    else:
        ep = _ep(model, (torch.randn(32 if case == "many rows" else 2, 64),))
    graph_pass = RowProductsPass(min_weight_elements=(1 << 20) if case == "small weights" else 0)
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"rewritten": 0, "kept": 3}


def test_the_limits_come_from_the_switches_and_arguments_override_them(monkeypatch):
    ep = _ep(Projections(torch.float32), (torch.randn(8, 64),))  # weights of 16384, 16384 and 32000 elements
    assert RowProductsPass()(ep) is ep  # 4 rows, 8M elements: kept
    monkeypatch.setenv("AOTCUDA_ROW_PRODUCTS_MAX_ROWS", "8")
    monkeypatch.setenv("AOTCUDA_ROW_PRODUCTS_MIN_WEIGHT", "20000")
    graph_pass = RowProductsPass()
    graph_pass(ep)
    assert (graph_pass.max_rows, graph_pass.min_weight_elements) == (8, 20000)
    assert graph_pass.result.counts == {"rewritten": 1, "kept": 2}  # the head alone
    monkeypatch.setenv("AOTCUDA_ROW_PRODUCTS_MAX_ROWS", "0")  # no limit
    graph_pass = RowProductsPass(min_weight_elements=0)
    graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 3, "kept": 0}
    graph_pass = RowProductsPass(max_rows=4, min_weight_elements=0)
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"rewritten": 0, "kept": 3}


def test_the_decode_step_after_the_other_passes_matches_eager_step_after_step():
    from aotcuda.lowering.pipeline import passes
    from aotcuda.models.decoder import DecoderConfig, make_decoder
    from aotcuda.passes.sibling_products import ConcatSiblingProductsPass

    config = DecoderConfig.tiny()
    model = make_decoder(config, 1, dtype=torch.float32, seed=4)
    ep = _ep(model, (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)))
    for graph_pass in passes() + [ConcatSiblingProductsPass(min_rows=1)]:
        ep = graph_pass(ep)
    graph_pass = RowProductsPass(min_weight_elements=0)
    rewritten = graph_pass(ep)
    # per layer: q/k/v as one product, wo, w1/w3 as one, w2; then the LM head
    assert graph_pass.result.counts == {"rewritten": 4 * config.n_layers + 1, "kept": 0}
    eager, lowered = make_decoder(config, 1, dtype=torch.float32, seed=4), rewritten.module()
    tokens = torch.randint(0, config.vocab_size, (1, 1))
    check_decode_steps(eager, lowered, tokens, steps=6, rtol=1e-5)
