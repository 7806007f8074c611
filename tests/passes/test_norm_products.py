"""FoldRMSNormIntoProductPass: which products it rewrites, and that the program still computes what eager
does (fresh random inputs; float32 at 1e-5, bfloat16 at 1e-2 against float32 eager)."""

import copy

import pytest
import torch

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.lowering.devices import DEVICE_PROFILES
from aotcuda.passes.norm_products import FoldRMSNormIntoProductPass
from comparisons import check_decode_steps, relative_error

aten = torch.ops.aten


def _ep(model, args, dynamic_shapes=None):
    with torch.no_grad():
        return torch.export.export(model, args, dynamic_shapes=dynamic_shapes).run_decompositions(
            decomposition_table())


class MetaNorm(torch.nn.Module):
    """Meta's reference RMSNorm: normalize in float32, cast back, then · weight."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, torch.nn.Parameter(1 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class LibraryNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm: weight · (the normalized row cast to the input's dtype)."""

    def __init__(self, dim, eps=1e-6, weight=True):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(dim)) if weight else None

    def forward(self, x):
        dtype = x.dtype
        hidden = x.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = (hidden * torch.rsqrt(variance + self.eps)).to(dtype)
        return hidden if self.weight is None else self.weight * hidden


class NormThenLinears(torch.nn.Module):
    def __init__(self, norm, dim=48, outs=(40, 24)):
        super().__init__()
        self.norm = norm
        self.linears = torch.nn.ModuleList(torch.nn.Linear(dim, out, bias=False) for out in outs)

    def forward(self, x):
        y = self.norm(x)
        return [linear(y) for linear in self.linears] + [y.abs().mean(-1)]  # a consumer that is not a product


def _products(ep):
    return sum(node.target is aten.mm.default for node in ep.graph.nodes)


@pytest.mark.parametrize("norm", [MetaNorm(48), LibraryNorm(48), LibraryNorm(48, weight=False)],
                         ids=["meta", "library", "no-weight"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_row_products_of_a_norm_are_scaled_products_and_match_eager(norm, dtype):
    torch.manual_seed(0)
    model = NormThenLinears(norm).to(dtype).eval()
    ep = _ep(model, (torch.randn(1, 1, 48, dtype=dtype),))
    graph_pass = FoldRMSNormIntoProductPass()
    folded = graph_pass(ep)
    assert graph_pass.result.counts == {"rewritten": 2}
    assert _products(folded) == 2
    reference = copy.deepcopy(model).float()  # a copy: float() would convert the program's own weights
    for _ in range(3):
        x = torch.randn(1, 1, 48, dtype=dtype) * 3
        with torch.no_grad():
            got, want = folded.module()(x), reference(x.float())
        tolerance = 1e-5 if dtype == torch.float32 else 1e-2
        for g, w in zip(got, want):
            assert relative_error(g, w) < tolerance


def test_products_of_several_rows_or_a_symbolic_count_are_kept():
    model = NormThenLinears(MetaNorm(48)).eval()
    graph_pass = FoldRMSNormIntoProductPass()
    assert graph_pass(_ep(model, (torch.randn(1, 3, 48),))) is not None and graph_pass.result.counts == {"rewritten": 0}
    rows = torch.export.Dim("rows", min=1, max=64)
    ep = _ep(model, (torch.randn(1, 2, 48),), ({1: rows},))
    assert graph_pass(ep) is ep and not graph_pass.result.changed


class NotANorm(torch.nn.Module):
    """Looks like an RMSNorm but takes the mean over the first dim, and squares with mul: not rewritten."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 8, bias=False)

    def forward(self, x):
        wrong_dim = x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-5)
        return self.linear(wrong_dim), self.linear(x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5))


def test_lookalikes_are_left_alone():
    ep = _ep(NotANorm(), (torch.randn(1, 16),))
    graph_pass = FoldRMSNormIntoProductPass()
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"rewritten": 0}


@pytest.mark.parametrize("dtype, rtol", [(torch.float32, 1e-5)])
def test_the_decode_step_folds_every_norm_and_matches_eager_over_steps(dtype, rtol):
    from aotcuda.lowering.pipeline import passes
    from aotcuda.models.decoder import DecoderConfig, make_decoder

    config = DecoderConfig.tiny()
    model = make_decoder(config, 1, dtype=dtype, seed=6)
    ep = _ep(model, (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)))
    for graph_pass in passes():
        ep = graph_pass(ep)
    graph_pass = FoldRMSNormIntoProductPass()
    folded = graph_pass(ep)
    # q, k, v after the attention norm and w1, w3 after the FFN norm in each layer; the LM head after the last.
    assert graph_pass.result.counts == {"rewritten": 5 * config.n_layers + 1}
    eager, lowered = make_decoder(config, 1, dtype=dtype, seed=6), folded.module()
    check_decode_steps(eager, lowered, torch.randint(0, config.vocab_size, (1, 1)), steps=3, rtol=rtol)


def test_the_bfloat16_decode_step_stays_within_bfloat16_rounding_of_float32_eager():
    from aotcuda.lowering.pipeline import passes
    from aotcuda.models.decoder import DecoderConfig, make_decoder

    config = DecoderConfig.tiny()
    model = make_decoder(config, 1, dtype=torch.bfloat16, seed=7)
    ep = _ep(model, (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)))
    for graph_pass in passes() + [FoldRMSNormIntoProductPass()]:
        ep = graph_pass(ep)
    reference = make_decoder(config, 1, dtype=torch.float32, seed=7)
    reference.load_state_dict({key: value.float() for key, value in model.state_dict().items()})
    check_decode_steps(reference, ep.module(), torch.randint(0, config.vocab_size, (1, 1)), steps=3, rtol=2e-2)


def test_cuda_lowering_runs_it_only_when_its_switch_is_on_and_cpu_lowering_never(monkeypatch):
    cuda = DEVICE_PROFILES["cuda"]
    monkeypatch.delenv("AOTCUDA_NORM_PRODUCTS", raising=False)
    assert FoldRMSNormIntoProductPass not in cuda.enabled_passes()
    monkeypatch.setenv("AOTCUDA_NORM_PRODUCTS", "1")
    enabled = cuda.enabled_passes()
    from aotcuda.passes.vector_operands import StoreVectorOperandsPass
    assert enabled.index(FoldRMSNormIntoProductPass) < enabled.index(StoreVectorOperandsPass)
    assert FoldRMSNormIntoProductPass not in DEVICE_PROFILES["cpu"].enabled_passes()


class LastTokenHead(torch.nn.Module):
    """transformers' causal-LM head: the norm, then ``[:, -1:, :]`` of the one token, then the LM head."""

    def __init__(self, dim=32, vocab=40):
        super().__init__()
        self.norm, self.head = LibraryNorm(dim), torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        return self.head(self.norm(x)[:, -1:, :])


def test_a_slice_that_keeps_the_one_row_is_seen_through_and_one_that_drops_rows_is_not():
    torch.manual_seed(2)
    model = LastTokenHead().eval()
    graph_pass = FoldRMSNormIntoProductPass()
    folded = graph_pass(_ep(model, (torch.randn(1, 1, 32),)))
    assert graph_pass.result.counts == {"rewritten": 1}
    x = torch.randn(1, 1, 32)
    assert relative_error(folded.module()(x), model(x)) < 1e-5
    ep = _ep(model, (torch.randn(1, 4, 32),))  # the slice keeps one row of four: the product's row is not y's
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"rewritten": 0}


class FlattenedRows(torch.nn.Module):
    """Two normalized rows of 24 flattened into one product row of 48 (a grouped RMSNorm)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(48, 8, bias=False)

    def forward(self, x):
        return self.linear((x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)).reshape(1, 48))


class ScaledEps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(48, 8, bias=False)

    def forward(self, x):
        return self.linear(x * torch.rsqrt(torch.add(x.pow(2).mean(-1, keepdim=True), 0.5, alpha=4.0)))


class WholeMean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(48, 8, bias=False)

    def forward(self, x):
        return self.linear(x * torch.rsqrt(x.pow(2).mean(dim=None, keepdim=True) + 1e-5))


class HalfProduct(torch.nn.Module):
    """A float32 residual stream normalized, then cast to float16 for a float16 product."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(64, 16, bias=False).half()

    def forward(self, x):
        return self.linear((x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)).half())


class IntegerProduct(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randint(-3, 4, (16, 8), dtype=torch.int32))

    def forward(self, x):
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.int32).view(1, 16) @ self.w


@pytest.mark.parametrize("model, x", [
    (FlattenedRows(), torch.randn(2, 24) * torch.tensor([[1.0], [5.0]])),
    (ScaledEps(), torch.randn(1, 1, 48)),
    (WholeMean(), torch.randn(1, 1, 48)),
    (HalfProduct(), torch.randn(1, 1, 64) * 1e5),  # the unnormalized row's product would overflow float16
    (IntegerProduct(), torch.randn(1, 16) * 50),
], ids=["flattened-rows", "eps-times-alpha", "mean-over-all-dims", "float16-product", "integer-product"])
def test_norms_whose_factor_cannot_move_past_the_product_are_left_alone(model, x):
    ep = _ep(model.eval(), (x,))
    graph_pass = FoldRMSNormIntoProductPass()
    assert graph_pass(ep) is ep and graph_pass.result.counts == {"rewritten": 0}


def test_a_program_that_preserves_module_call_signatures_is_left_as_it_is():
    model = NormThenLinears(MetaNorm(48)).eval()
    with torch.no_grad():
        ep = torch.export.export(model, (torch.randn(1, 1, 48),), preserve_module_call_signature=("linears.0",))
    ep = ep.run_decompositions(decomposition_table())
    graph_pass = FoldRMSNormIntoProductPass()
    assert graph_pass(ep) is ep and not graph_pass.result.changed
