"""lowering/batch_row_flow.py: whether a program keeps its batch rows apart, proved from its graph (rows41, 2026-12-07).

The probe (batch_rows.py) sees the mixes its example values reach; a mix past a threshold no example reaches was
recorded row-independent and batched. The walk of the ExportedProgram's graph says "mixes" with the op and the model's
line, "kept apart" where every op follows the rows, "not proved" where one is unknown. Programs are exported (no
AOTInductor compile); what each verdict claims is checked against eager on fresh random inputs."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from aotcuda.lowering.batch_row_flow import KEPT_APART, MIXES, NOT_PROVED, row_flow, rows_record
from aotcuda.lowering.batch_rows import probe_rows
from aotcuda.lowering.pipeline import before_compile

BATCH = Dim("batch", min=1, max=64)


class Body(torch.nn.Module):
    def __init__(self, body, features: int = 8):
        super().__init__()
        self.body = body
        self.linear = torch.nn.Linear(features, features)
        self.norm = torch.nn.LayerNorm(features)

    def forward(self, x, ids):
        return self.body(self, x, ids)


def _exported(body, rows: int = 4, features: int = 8):
    torch.manual_seed(0)
    model = Body(body, features).eval()
    args = (torch.randn(rows, features), torch.arange(rows) % features)
    return before_compile(model, args, {}, ({0: BATCH}, {0: BATCH}))[0], args


def _cond_gate(m, x, ids):
    return torch.cond(x.abs().amax() > 1e6, lambda x: x - x.mean(0, keepdim=True), lambda x: x.clone(), (x,))


def _written_row(x):
    y = x.clone()
    y[0] = x.sum(0)
    return y


def _written_columns(x):
    y = torch.zeros(x.shape[0], 10)
    y[:, 2:8] = x * 2
    y[:, 0] = x[:, 1]
    return y


# each mixing kind, and the words its reason must hold
MIXING = {
    "value-gated sum": (lambda m, x, ids: torch.where(x.abs().amax() > 1e6, x.sum(0, keepdim=True).expand_as(x), x),
                        "aten.amax"),
    "gated by a branch": (_cond_gate, "aten.amax"),
    "sort along dim 0": (lambda m, x, ids: torch.where(x.sort(0).values[-1:] > 1e6, 0.0, x), "aten.sort"),
    "scatter at another row's index": (lambda m, x, ids: x.scatter(0, ids[:, None].clamp(0, 0).expand_as(x), x),
                                       "aten.scatter"),
    "index_put over the batch dim": (lambda m, x, ids: x.index_put((ids.clamp(0, 0),), x), "aten.index_put"),
    "gather along dim 0": (lambda m, x, ids: x.gather(0, torch.zeros_like(x, dtype=torch.long)), "aten.gather"),
    "pad of the batch dim": (lambda m, x, ids: torch.nn.functional.pad(x, (0, 0, 1, 0))[:-1], "aten.constant_pad_nd"),
    "roll": (lambda m, x, ids: x.roll(1, 0), "row numbers"),  # torch's decomposition: an index by arange
    "cumsum": (lambda m, x, ids: x.cumsum(0), "aten.cumsum"),
    "flip": (lambda m, x, ids: x.flip(0), "aten.flip"),
    "the count": (lambda m, x, ids: x * x.shape[0], "batch size as a value"),
    "its place": (lambda m, x, ids: x + torch.arange(x.shape[0])[:, None], "row numbers"),
    "attention across dim 0": (lambda m, x, ids: torch.softmax(x @ x.T, -1) @ m.linear(x), "different dims"),
    "one row for all": (lambda m, x, ids: x - x[0:1], "aten.slice"),
    "a row picked": (lambda m, x, ids: x * x[1], "aten.select"),
    "rows along dim 1": (lambda m, x, ids: (x[None, :, :] * x[:, None, :]).sum(1), "different dims"),
    "rows tiled, shifted": (lambda m, x, ids: x.repeat(2, 1)[1:x.shape[0] + 1] + x.repeat(1, 2)[:, :8], "aten.slice"),
    "a row's size from the count": (lambda m, x, ids: x.repeat(1, 9)[:, :x.shape[0]].sum(1, keepdim=True) + x,
                                    "batch size"),  # the slice's end: "computes with the batch size as a value"
    "row numbers through clone": (lambda m, x, ids: x + torch.arange(x.shape[0]).clone()[:, None], "row numbers"),
    "a write into one row": (lambda m, x, ids: _written_row(x), "row numbers"),  # decomposed: where(arange == 0)
    "batch norm in training": (lambda m, x, ids: torch.nn.functional.batch_norm(x, None, None, training=True),
                               "aten._native_batch_norm_legit"),
    # a number of the batch size read as an index, a slice's bounds of another dim, a k: each row's answer moves with
    # the count of rows
    "an index from the count": (lambda m, x, ids: x * x[:, x.shape[0] % 8, None], "batch size as a value"),
    "a narrow from the count": (lambda m, x, ids: x.narrow(1, x.shape[0] % 4, 4), "batch size as a value"),
    "a k from the count": (lambda m, x, ids: x + x.kthvalue(x.shape[0] % 8 + 1, 1).values[:, None],
                           "batch size as a value"),
    "scatter at a free index": (lambda m, x, ids: x + torch.zeros_like(x).scatter(1, torch.tensor([[0]]), x),
                                "index without the batch rows"),  # writes the first row alone
    # an unbatched [C, H, W] input with the batch rows as H: pooled dims count from the end
    "pool of an unbatched input": (lambda m, x, ids: x + torch.nn.functional.max_pool2d(
        torch.relu(x - 1e6).T.unsqueeze(-1), (3, 1), 1, (1, 0)).squeeze(-1).T, "aten.max_pool2d_with_indices"),
}


@pytest.mark.parametrize("name", sorted(MIXING))
def test_each_kind_of_mix_is_found_with_the_op_and_the_models_line(name):
    body, words = MIXING[name]
    ep, (x, ids) = _exported(body)
    flow = row_flow(ep)
    assert flow.verdict == MIXES, flow
    assert words in flow.reason and "test_batch_row_flow.py" in flow.reason, flow.reason
    # and eager agrees: changing one row (past any threshold) moves another row's answer, or, for the place and the
    # count, the rows after the first move when the first is left out
    module, fresh, ids = ep.module(), torch.randn(5, 8), torch.arange(5)
    base = module(fresh, ids)
    moved = [not torch.allclose(_without(base, row), _without(module(_changed(fresh, row), ids), row))
             for row in range(5)]
    assert any(moved) or not torch.allclose(base[1:], module(fresh[1:], ids[1:]))


def _changed(x, row):
    x = x.clone()
    x[row] = x[row] * 1e7 + 3
    return x


def _without(x, row):
    return torch.cat([x[:row], x[row + 1:]])


def test_a_mix_past_a_threshold_is_now_refused_where_the_probe_recorded_it_row_independent():
    """The value-gated example: the probe's changes (another row, x*2+1, x*1000) never reach 1e6, so it recorded
    rows_mixed false and serving batched it; the graph refuses it (rows_mixed true), and eager shows the leak: one
    client's row of 1e7 changes every other client's answer."""
    ep, args = _exported(MIXING["value-gated sum"][0])
    probe = probe_rows(ep, args, {})
    assert probe.mixed is False  # what was recorded before
    record = rows_record(probe, row_flow(ep))
    assert record["rows_mixed"] is True and record["rows_graph"] == MIXES and "amax" in record["rows_graph_reason"]
    alice, mallory = torch.randn(2, 8), torch.full((2, 8), 1e7)
    module = ep.module()
    alone = module(alice, torch.arange(2))
    batched = module(torch.cat([alice, mallory]), torch.arange(4))[:2]
    assert not torch.allclose(alone, batched)


class Rope(torch.nn.Module):
    """Rotary embedding as complex math (view_as_complex, polar), which ReplaceComplexWithRealPass makes real."""

    def __init__(self):
        super().__init__()
        self.register_buffer("freqs", torch.polar(torch.ones(16, 4), torch.randn(16, 4)))
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):  # [batch, 16, 8]
        pairs = torch.view_as_complex(self.proj(x).reshape(*x.shape[:-1], 4, 2))
        return torch.view_as_real(pairs * self.freqs).flatten(-2) + x


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):  # [batch, tokens, 32]
        return self.encoder(x)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3), torch.nn.GroupNorm(2, 8), torch.nn.GELU(), torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(), torch.nn.Linear(8, 4))

    def forward(self, x):
        return self.layers(x).softmax(-1)


class LastToken(torch.nn.Module):
    """A classifier's pooling as transformers writes it: each row's hidden state at its last token, picked by
    hidden[torch.arange(batch), lengths - 1] (the row numbers as an index of the batch dim)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8)

    def forward(self, ids, lengths):
        hidden = self.embed(ids).cumsum(1)
        return hidden[torch.arange(ids.shape[0]), lengths - 1]


class Masked(torch.nn.Module):
    def forward(self, x, mask):
        x = x.clone()
        x[mask] = 0.0
        tiles = x.repeat(3, 1)[x.shape[0]:2 * x.shape[0]]
        return torch.cat([x, x.chunk(2, -1)[0], x.repeat(1, 2), tiles, _written_columns(x)], -1)


ROW_LOCAL = {
    "mlp": (lambda: Body(lambda m, x, ids: m.linear(torch.relu(m.linear(m.norm(x)))), 8),
            lambda rows: (torch.randn(rows, 8), torch.arange(rows) % 8), 2),
    "encoder": (Encoder, lambda rows: (torch.randn(rows, 6, 32),), 1),
    "conv net": (ConvNet, lambda rows: (torch.randn(rows, 3, 12, 12),), 1),
    "rope": (Rope, lambda rows: (torch.randn(rows, 16, 8),), 1),
    "last token": (LastToken, lambda rows: (torch.randint(0, 10, (rows, 5)), torch.randint(1, 6, (rows,))), 2),
    "mask write": (Masked, lambda rows: (torch.randn(rows, 6), torch.rand(rows, 6) > 0.5), 2),
}


@pytest.mark.parametrize("name", sorted(ROW_LOCAL))
def test_row_local_programs_are_proved_kept_apart_and_eager_agrees(name):
    make, inputs, count = ROW_LOCAL[name]
    torch.manual_seed(0)
    model = make().eval()
    ep = before_compile(model, inputs(4), {}, ({0: BATCH},) * count)[0]
    assert row_flow(ep) == row_flow(ep).__class__(KEPT_APART)
    batch = inputs(5)  # fresh: each row's answer alone is its answer in the batch
    together = ep.module()(*batch)
    for row in range(5):
        alone = ep.module()(*(t[row:row + 1] for t in batch))
        torch.testing.assert_close(together[row:row + 1], alone, rtol=1e-4, atol=1e-5)


def test_an_op_the_walk_does_not_know_leaves_the_probe_to_say():
    """An op without a rule (here a while_loop) is "not proved", naming it: the probe's record stands alone."""
    from torch._higher_order_ops import while_loop

    def body(m, x, ids):
        return while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 0.5), (torch.zeros((), dtype=torch.long), x))[1]

    ep, _ = _exported(body)
    flow = row_flow(ep)
    assert flow.verdict == NOT_PROVED and "while_loop" in flow.reason and "does not know" in flow.reason


def test_aotcudas_fft_kernel_is_followed():
    """The complex pass makes torch.fft an aotcuda FFT kernel (kernels/fft_cpu.py): a transform along the features
    keeps the rows (it was "not proved", an op the walk did not know)."""
    def body(m, x, ids):
        return torch.fft.irfft(torch.fft.rfft(x, dim=-1) * 2, n=8, dim=-1)

    ep, (x, ids) = _exported(body)
    assert row_flow(ep) == row_flow(ep).__class__(KEPT_APART)
    fresh = torch.randn(5, 8)
    torch.testing.assert_close(ep.module()(fresh, ids[:1].expand(5))[2:3], ep.module()(fresh[2:3], ids[:1]))


def test_a_program_serving_does_not_batch_is_not_walked():
    class Pooled(torch.nn.Module):
        def forward(self, x):
            return x.sum(0)

    ep = before_compile(Pooled(), (torch.randn(3, 4),), {}, ({0: BATCH},))[0]
    assert row_flow(ep) is None


def test_embedding_bags_offsets_from_the_batch_size_are_not_a_mix():
    """nn.EmbeddingBag on 2-D ids makes its offsets torch.arange(0, B * T, T); the walk called every arange of a
    batch-size bound but arange(B) a mix, so rows_mixed was true and serving refused a row-local model (fixrows41)."""
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(20, 8, mode="mean").eval()
    ids = torch.randint(0, 20, (4, 6))
    ep = before_compile(bag, (ids,), {}, ({0: BATCH},))[0]
    flow, probe = row_flow(ep), probe_rows(ep, (ids,), {})
    assert flow.verdict != MIXES, flow
    assert rows_record(probe, flow)["rows_mixed"] is False
    fresh = torch.randint(0, 20, (5, 6))
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(fresh)[2:3], ep.module()(fresh[2:3]))


class ModulatedConv(torch.nn.Module):
    """StyleGAN2's modulated convolution: each row's weight from its style, the rows folded into the channels and
    convolved with groups=B, so that each row meets its own weight alone."""

    def __init__(self):
        super().__init__()
        self.weight, self.affine = torch.nn.Parameter(torch.randn(4, 3, 3, 3)), torch.nn.Linear(8, 3)

    def forward(self, x, style):
        rows, channels, height, width = x.shape
        weight = self.weight[None] * self.affine(style)[:, None, :, None, None]
        weight = weight * torch.rsqrt(weight.pow(2).sum([2, 3, 4], keepdim=True) + 1e-8)
        out = torch.nn.functional.conv2d(x.reshape(1, rows * channels, height, width),
                                         weight.reshape(rows * 4, 3, 3, 3), padding=1, groups=rows)
        return out.reshape(rows, 4, height, width)


def test_a_modulated_convolutions_groups_of_the_batch_size_are_not_a_mix():
    """(after the clean-clone CI of session 41) the check of batch-size numbers among an op's arguments took a
    convolution's groups=B for a value, so a StyleGAN2 modulated convolution, row-local, was recorded mixing and
    serving refused to batch it; the convolution's rule says what it knows (a weight of the rows: not proved)."""
    torch.manual_seed(0)
    model = ModulatedConv().eval()
    args = (torch.randn(4, 3, 8, 8), torch.randn(4, 8))
    ep = before_compile(model, args, {}, ({0: BATCH}, {0: BATCH}))[0]
    flow, probe = row_flow(ep), probe_rows(ep, args, {})
    assert flow.verdict == NOT_PROVED, flow
    assert rows_record(probe, flow)["rows_mixed"] is False
    x, style = torch.randn(5, 3, 8, 8), torch.randn(5, 8)
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(x, style)[2:3], ep.module()(x[2:3], style[2:3]), rtol=1e-5, atol=1e-5)


def test_the_efficient_attention_ops_bias_is_read():
    """The CUDA efficient and cudnn attention ops name their mask attn_bias, which the walk did not read: a bias of the
    rows beside a query without them was proved "kept apart" (exported with torch.export: its meta kernel runs on CPU;
    fixrows41)."""
    class Biased(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Parameter(torch.randn(1, 2, 4, 8))

        def forward(self, x, bias):  # x [batch, 2, 4, 8], bias [batch, 2, 4, 4]
            q = self.q
            return x + torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, bias, False)[0]

    ep = torch.export.export(Biased(), (torch.randn(4, 2, 4, 8), torch.randn(4, 2, 4, 4)),
                             dynamic_shapes=({0: BATCH}, {0: BATCH}))
    flow = row_flow(ep)
    assert flow.verdict != KEPT_APART and "efficient_attention" in flow.reason, flow
