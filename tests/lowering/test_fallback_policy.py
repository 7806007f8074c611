"""The allow-list policy for real-valued library kernels beyond matmul (issue 11 item 4, docs/usage.md):
scans and histograms are allowed on both devices on real values, never on complex ones; a custom op
without a C shim that has a known fix names it."""

from __future__ import annotations

import pytest
import torch

from aotcuda.lowering.fallbacks import KNOWN_FIXES, SCAN_KERNELS, FallbackKernel, missing_kernels_message, split_allowed
from aotcuda.lowering.devices import DEVICE_PROFILES


@pytest.mark.parametrize("device", sorted(DEVICE_PROFILES))
@pytest.mark.parametrize("op", sorted(SCAN_KERNELS | {"_grouped_mm"}))
def test_real_scans_histograms_and_grouped_mm_are_allowed_on_every_device(device, op):
    kernel = FallbackKernel(f"aoti_torch_{device}_{op}", op)
    assert split_allowed([kernel], DEVICE_PROFILES[device].allowed_kernels) == ([], [kernel])


@pytest.mark.parametrize("device", sorted(DEVICE_PROFILES))
@pytest.mark.parametrize("op", sorted(SCAN_KERNELS))
def test_a_scan_on_complex_values_stays_a_missing_kernel(device, op):
    kernel = FallbackKernel(f"aoti_torch_{device}_{op}", op, complex_valued=True)
    assert split_allowed([kernel], DEVICE_PROFILES[device].allowed_kernels) == ([kernel], [])


def test_a_known_custom_op_gets_its_fix_in_the_message():
    kernel = FallbackKernel("transformers.grouped_mm_fallback.default (proxy executor)",
                            "transformers.grouped_mm_fallback.default")
    message = missing_kernels_message("forward", [kernel])
    assert KNOWN_FIXES["transformers::grouped_mm_fallback"] in message
    assert 'experts_implementation="batched_mm"' in message


def test_boolean_mask_indexing_gets_the_fixed_shape_fix():
    """A new user's trial (2026-12-06): x[x > 0] (the index_Tensor kernel) got only the advice on complex math."""
    kernel = FallbackKernel("aoti_torch_cpu_index_Tensor", "index_Tensor", ["index"], ["m.py:3 in forward: x[x > 0]"])
    message = missing_kernels_message("forward", [kernel])
    assert "  index_Tensor: indexing by a boolean mask (x[mask])" in message
    assert "torch.where(mask, x, 0)" in message


def test_a_refusal_that_is_not_a_missing_rule_gets_advice_that_fits_it():
    # A complex program input written in place: the pass refuses at the op that writes it (mul, which has a
    # rule), and Inductor's copy back into the input has no node. The advice follows the reason (a new
    # user's trial read "Rewrite aten.mul.Tensor ... with ops the pass supports" and "<- node ?").
    from aotcuda.passes.complex_to_real.scan import Refusal

    refusal = Refusal("aten.mul.Tensor", "mul", "model.py:4 in forward: z.mul_(w)",
                      "the complex program input z is mutated in place; mutated complex program inputs are not "
                      "supported: return the new value instead")
    copy = FallbackKernel("aten::copy_ (proxy executor)", "aten::copy_")
    message = missing_kernels_message("forward", [copy], refusal)
    assert "no node of the program" in message and "node ?" not in message
    assert "return the new value instead" in message and "ops the pass supports" not in message
    assert "runs in torch's loader only" in message


@pytest.mark.parametrize("record", [
    "not a list", [1], [{"name": "k", "allowed": "yes", "nodes": [], "sources": []}],
    [{"name": "k", "allowed": False, "nodes": [1], "sources": []}], [{"name": "k", "allowed": False}],
])
def test_a_kernels_record_not_in_its_form_is_not_read(record):
    """The signature's "kernels" field is read by `aotcuda inspect` from any package: anything but the form
    lower() writes means "no record" (inspect then classifies the sources itself), never a raw error."""
    from aotcuda.lowering.fallbacks import kernels_from_signature

    assert kernels_from_signature({"kernels": record}) is None
    assert kernels_from_signature(None) is None and kernels_from_signature({}) is None
    missing, library = kernels_from_signature({"kernels": [
        {"name": "a", "allowed": False, "nodes": ["n"], "sources": ["m.py:1: x"]},
        {"name": "b", "allowed": True, "nodes": [], "sources": []}]})
    assert [k.describe() for k in missing] == ["a  <- m.py:1: x"] and [k.name for k in library] == ["b"]


class TrainingNet(torch.nn.Module):
    """Linear → BatchNorm1d → Dropout, left in training mode (.eval() not called), as people do."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.bn = torch.nn.BatchNorm1d(16)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(self.lin(x)))


# Inductor's seeds for the program's random ops (torch/_inductor/ir.py RandomSeeds: aten.randint.low_out, the
# same on the CPU and CUDA) come from no node: the comment before them, if any, names another kernel's nodes.
SEEDS_WRAPPER = """
    // Topologically Sorted Source Nodes: [linear], Original ATen: [aten.addmm]
    aoti_torch_{device}_addmm_out(buf0, arg2_1, arg0_1, arg1_1, 1LL, 1LL);
    aoti_torch_{device}_randint_low_out(buf1, -9223372036854775808LL, 9223372036854775807LL, int_array_0, 1);
"""


def test_the_seed_kernel_known_before_compiling_is_the_one_the_compile_makes(tmp_path):
    """lower() refuses a program's random ops before compiling (lowering/known_fallbacks.py): the same kernel,
    nodes and lines as the check of the compiled package (allow_fallbacks=True compiles it)."""
    import aotcuda
    from aotcuda.lowering.known_fallbacks import known_fallback_kernels

    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="training mode"):
        lowered = aotcuda.lower(TrainingNet(), (torch.randn(8, 16),), device="cpu", package_path=tmp_path / "t.pt2",
                                allow_fallbacks=True)
    known = known_fallback_kernels(lowered.exported_program, "cpu", DEVICE_PROFILES["cpu"].allowed_kernels)
    assert [(k.name, k.nodes, k.sources, k.dropout) for k in known] == \
        [(k.name, k.nodes, k.sources, k.dropout) for k in lowered.fallback_kernels] != []
    with pytest.warns(UserWarning, match="training mode"), pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        aotcuda.lower(TrainingNet(), (torch.randn(8, 16),), device="cpu", package_path=tmp_path / "r.pt2")
    assert caught.value.kernels == known and "model.eval()" in str(caught.value)


class RandomOf(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


# Random numbers nothing reads: each program compiles with no fallback kernel at all (checked by the slow test;
# allow_fallbacks=True, torch 2.13, CPU).
DRAWING_NOTHING = {
    "rand of size 0": lambda x: x + torch.rand(0).sum(),
    "randn of size 0 concatenated": lambda x: torch.cat([x.flatten(), torch.randn(0)]),
    "rand_like of an empty slice": lambda x: x[:0] + torch.rand_like(x[:0]),
    "dropout of an empty slice": lambda x: x + torch.nn.functional.dropout(x[:0], 0.5, True).sum(),
    "rand read through empty slices": lambda x: (lambda r: x + r[:0].sum() + r[:, :0].sum())(torch.rand(4, 4)),
}


@pytest.mark.parametrize("kind", DRAWING_NOTHING)
def test_random_numbers_nothing_reads_are_not_refused_before_compiling(kind):
    """(review 11) lower() refuses random ops before compiling (lowering/known_fallbacks.py): one whose values
    no op reads (a size-0 rand, a rand read only through empty slices) makes no kernel in the compile (Inductor
    removes the buffer), so predicting one refused a program that lowers with no fallback."""
    from aotcuda.lowering.known_fallbacks import known_fallback_kernels
    from aotcuda.lowering.pipeline import before_compile

    ep = before_compile(RandomOf(DRAWING_NOTHING[kind]), (torch.randn(4, 4),)).program
    assert known_fallback_kernels(ep, "cpu", DEVICE_PROFILES["cpu"].allowed_kernels) == []


@pytest.mark.slow
def test_random_numbers_nothing_reads_compile_without_a_fallback(tmp_path):
    """The compile behind test_random_numbers_nothing_reads_are_not_refused_before_compiling, for two of them;
    and rand (which Inductor's replace_random generates from its seeds, though it is in lowering.fallbacks) is
    predicted as the seed kernel the compile makes, not as a kernel of its own (rand_like too: Inductor's
    extra_random_decomps make it a rand)."""
    import aotcuda
    from aotcuda.lowering.known_fallbacks import known_fallback_kernels

    for kind in ("rand of size 0", "rand read through empty slices"):
        lowered = aotcuda.lower(RandomOf(DRAWING_NOTHING[kind]), (torch.randn(4, 4),), device="cpu",
                                package_path=tmp_path / "e.pt2")
        assert lowered.fallback_kernels == [], kind
    lowered = aotcuda.lower(RandomOf(lambda x: x + torch.randn(x.shape) + torch.rand_like(x)), (torch.randn(4, 4),),
                            device="cpu", package_path=tmp_path / "r.pt2", allow_fallbacks=True)
    known = known_fallback_kernels(lowered.exported_program, "cpu", DEVICE_PROFILES["cpu"].allowed_kernels)
    assert [(k.name, k.nodes) for k in known] == [(k.name, k.nodes) for k in lowered.fallback_kernels] == \
        [("aoti_torch_cpu_randint_low_out", ["randn", "rand_like"])]


@pytest.mark.parametrize("device", ["cpu", "cuda"], ids=lambda device: f"{device}_wrapper")  # text only: no GPU
def test_inductors_random_seeds_kernel_names_the_dropout_and_says_to_call_eval(device):
    from aotcuda.lowering.fallbacks import kernels_in
    from aotcuda.lowering.pipeline import before_compile

    torch.manual_seed(0)
    ep = before_compile(TrainingNet(), (torch.randn(8, 16),)).program
    kernels, _ = kernels_in([(SEEDS_WRAPPER.format(device=device), [])], ep)
    missing, _ = split_allowed(kernels, DEVICE_PROFILES[device].allowed_kernels)
    assert [k.name for k in missing] == [f"aoti_torch_{device}_randint_low_out"]
    message = missing_kernels_message("forward", missing)
    assert "no node of the program" not in message
    assert "test_fallback_policy.py" in message and "self.drop(" in message  # the dropout's line
    assert "model.eval()" in message and "training mode" in message


def _calls_by_every_line(text, targets):
    """_calls_in's reading before it looked at marked lines only: every line of str.splitlines, each searched."""
    from aotcuda.lowering.fallbacks import _DISPATCHER_CALL, _HELPERS, _PROXY_CALL, _SHIM_CALL, _SOURCE_NODES

    nodes = []
    for line in text.splitlines():
        if (match := _SOURCE_NODES.search(line)) is not None:
            nodes = [name.strip() for name in match.group(1).split(",") if name.strip()]
            continue
        for device, op in _SHIM_CALL.findall(line):
            if not _HELPERS.search(op):
                yield f"aoti_torch_{device}_{op}", op, nodes
        for index in _PROXY_CALL.findall(line):
            yield f"{targets[int(index)]} (proxy executor)", targets[int(index)], nodes
        for op, overload in _DISPATCHER_CALL.findall(line):
            yield f"{op}.{overload} (dispatcher)", f"{op}.{overload}", nodes


def test_the_fallback_scan_reads_only_the_lines_that_can_hold_a_call():
    """A wrapper.cpp is the package's text, which `aotcuda inspect` scans for fallback calls: every line was split
    out into one list and searched four times, so 32 MiB of empty lines (a stored source within max_source_bytes)
    took 710 MB and 17 s (256 MiB: about 5 GB). Only the lines holding a node list or a C-shim call are looked at
    now, found by one scan; the calls found are the same, in the same order."""
    import tracemalloc

    from aotcuda.lowering.fallbacks import _calls_in

    text = ("// Source Nodes: [add, mul], Original ATen: [aten.add]\n  x = 1;\r\n"
            "  aoti_torch_cpu_polar(a, b);  aoti_torch_cpu_logcumsumexp(c);\n// Source Nodes: [cat]\rint y;\n"
            "  aoti_torch_proxy_executor_call_function(proxy_executor, 1, 0);\r  aoti_torch_cuda_sort_stable(d);\n"
            '  aoti_torch_call_dispatcher("aten::foo", "bar", x); aoti_torch_cpu_guard(g); Source Nodes: [z]\n')
    targets = ["aten::a", "aten::b"]
    assert list(_calls_in(text, targets)) == list(_calls_by_every_line(text, targets))
    empty_lines = "\n" * (8 << 20)
    tracemalloc.start()
    try:
        assert list(_calls_in(empty_lines, targets)) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak / (1 << 20):.1f} MiB for a text of 8 MiB of empty lines (a list of its lines: 64 MiB)"


def test_a_node_list_of_millions_of_names_is_read_within_a_bound():
    """`aotcuda inspect` names each fallback call by the last node of the list before it: a list of 3,000,000 names
    (25 MB of a wrapper.cpp, the package's text) was split whole, a string made for each name and every name kept,
    630 MB for a 28 MB package. A list is read up to MOST_NODE_NAMES names and its last."""
    import tracemalloc

    from aotcuda.lowering.fallbacks import MOST_NODE_NAMES, _calls_in, node_names

    names = ",".join(f"n{i}" for i in range(1_000_000))  # 7.9 MB
    assert node_names(" a, b ,c ") == ["a", "b", "c"] and node_names("a,,b, ") == ["a", "b"]
    text = f"// Source Nodes: [{names}], Original ATen: [aten.foo]\n  aoti_torch_cpu_foo(x);\n"
    tracemalloc.start()
    try:
        ((name, op, nodes),) = list(_calls_in(text, []))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (name, op, nodes[:2], nodes[-1], len(nodes)) == ("aoti_torch_cpu_foo", "foo", ["n0", "n1"], "n999999",
                                                           MOST_NODE_NAMES + 1)
    assert peak < 40 << 20, f"{peak / (1 << 20):.0f} MiB for a node list of 7.9 MB"


def _layers_with_dropout():
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))


def _encoder_layer():
    return torch.nn.Sequential(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True))


@pytest.mark.parametrize("make, shape, where", [
    (_layers_with_dropout, (2, 8), "the model's module 1 (torch.nn.Dropout)"),
    (lambda: torch.nn.Dropout(0.5), (2, 8), "the model itself (torch.nn.Dropout)"),
    (_encoder_layer, (2, 4, 8), "the model's module 0.dropout1 (torch.nn.Dropout)"),
], ids=["Sequential", "Dropout", "TransformerEncoderLayer"])
def test_a_dropout_of_a_model_made_of_torchs_modules_is_named_by_its_place_in_the_model(make, shape, where):
    """A model made of torch's own modules (nn.Sequential(nn.Linear, nn.Dropout), the CLI's first trial) has no
    line of its own: every frame of its dropout's stack is torch's, and the refusal named the innermost one,
    `.../site-packages/torch/nn/modules/dropout.py:73: return F.dropout(input, self.p, self.training, ...)`, which
    the user never wrote. Now it names the module in the model (its name in model.named_modules()) and its type."""
    import aotcuda

    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="training mode"), pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        aotcuda.lower(make(), (torch.randn(*shape),), device="cpu")
    message = str(caught.value)
    assert "aoti_torch_cpu_randint_low_out  <- " + where in message, message
    assert "site-packages" not in message and "dropout.py" not in message and "model.eval()" in message, message


class GraphAggregation(torch.nn.Module):
    """A graph network's layer (fourth new user, 2026-12-06): products, then two scatters into the nodes."""

    def __init__(self):
        super().__init__()
        self.msg = torch.nn.Linear(4, 4)

    def forward(self, x, dst):
        m = torch.relu(self.msg(x[dst]))
        deg = torch.zeros(x.shape[0]).scatter_add_(0, dst, torch.ones(dst.shape[0]))
        most = torch.full_like(x, -1e9).scatter_reduce(0, dst[:, None].expand_as(m), m, "amax")
        return most, deg


# What Inductor wrote for it on the CPU (torch 2.13): a fused kernel's call has no node list in the wrapper, so
# each scatter's fallback call follows the list of the product before it
SCATTER_WRAPPER = """
    // Topologically Sorted Source Nodes: [permute, addmm], Original ATen: [aten.permute, aten.addmm]
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_addmm_out(buf4, msg_bias, buf3, msg_weight, 1L, 1L));
    cpp_fused_full_full_like_relu_scatter_add_1((const int64_t*)(arg5_1.data_ptr()), s77, s2);
    aoti_torch_cpu_scatter_reduce_two_out(buf7, buf7,0,arg5_1,buf8, "sum",1);
    cpp_fused_expand_full_like_relu_scatter_reduce_3((float*)(buf14.data_ptr()), s77);
    aoti_torch_cpu_scatter_reduce_two_out(buf14, buf14,0,arg5_1,buf15, "amax",1);
"""


def test_a_fallback_call_after_a_fused_kernel_is_named_by_the_scatters_lines_not_the_product_before_it():
    """Before, the scatter_reduce kernel was said to come from the nn.Linear's line (the addmm listed before it),
    so the user was sent to rewrite the one line that was fine; now from the scatter_add_ and scatter_reduce lines
    (Inductor's CPU scatter_add is a scatter_reduce "sum" call)."""
    from aotcuda.lowering.fallbacks import kernels_in
    from aotcuda.lowering.pipeline import before_compile

    ep = before_compile(GraphAggregation(), (torch.randn(5, 4), torch.tensor([0, 4, 4]))).program
    (kernel,) = kernels_in([(SCATTER_WRAPPER, [])], ep)[0][1:]
    message = kernel.describe()
    assert "self.msg(" not in message, message
    assert "scatter_add_(" in message and "scatter_reduce(" in message, message
    (product,) = kernels_in([(SCATTER_WRAPPER, [])], ep)[0][:1]
    assert "self.msg(" in product.describe()


@pytest.mark.parametrize("op, says", [("nonzero", "size the values decide"), ("masked_select", "size the values decide"),
                                      ("scatter_reduce_two_out", "index_add_(0, index, source)"),
                                      ("bucketize_Tensor", "(x[..., None] > boundaries).sum(-1)"),
                                      ("searchsorted_Tensor", "(x[..., None] > boundaries).sum(-1)")])
def test_data_dependent_sizes_and_cpu_scatters_get_a_fix_not_only_rewrite_those_ops(op, says):
    """The fourth new user's detection head (nonzero, masked_select) and graph network (scatter_add_, scatter_reduce
    amax) got only "Rewrite those ops in the model": neither why Inductor falls back nor into what to rewrite them."""
    kernel = FallbackKernel(f"aoti_torch_cpu_{op}", op, [op], [f"m.py:3: y = {op}(x)"])
    message = missing_kernels_message("forward", [kernel])
    assert f"  {op.removesuffix('_Tensor')}: " in message and says in message and "allow_fallbacks=True" in message


def test_embedding_max_norm_is_named_with_its_cause_and_the_fix():
    """Fifth new user (2026-12-06): nn.Embedding(50, 8, max_norm=1.0) was refused with "aten::embedding_renorm has no
    generated code ...; rewrite that line of the model", which names neither max_norm nor what to do. The fix the
    message gives, applied, gives eager's rows."""
    from aotcuda.lowering.proxy_ops import proxy_executor_message

    kernel = FallbackKernel("aten::embedding_renorm (proxy executor)", "aten::embedding_renorm", ["e"],
                            ["m.py:5: return self.e(i)"])
    message = proxy_executor_message([kernel], {})
    assert "max_norm" in message and "in place, on every call, in eval mode too" in message, message
    assert "emb.max_norm = None" in message
    emb = torch.nn.Embedding(50, 8, max_norm=1.0).eval()
    emb.weight.data *= 3
    fixed = torch.nn.Embedding(50, 8)
    fixed.load_state_dict(emb.state_dict())
    with torch.no_grad():  # the message's recipe
        w = fixed.weight
        w.mul_((emb.max_norm / w.norm(p=emb.norm_type, dim=1, keepdim=True).clamp_min(1e-7)).clamp(max=1))
    ids = torch.randint(0, 50, (3, 5))
    torch.testing.assert_close(fixed(ids), emb(ids))


# "matrix_exp" lowers since the seventh new user (2026-12-07): tests/lowering/test_matrix_exp.py
@pytest.mark.parametrize("orthogonal_map", ["householder", "cayley"])
def test_an_op_computing_a_parametrized_weight_is_told_to_bake_it_and_the_baked_model_has_no_proxy_op(orthogonal_map):
    """Sixth new user (2026-12-07): `orthogonal(nn.Linear(6, 6))` was refused with `aten::linalg_matrix_exp has no
    generated code in Inductor and no C shim ...; rewrite that line of the model with ops that have either`, the line
    being `s.l(x)`, the Linear's call (householder: linalg_householder_product; cayley: _linalg_solve_ex). The op
    computes the weight from its parametrization, the same at every call: the hint now names it and the recipe, and
    the model with the weight baked as that recipe says has no proxy-executor op and gives eager's values."""
    import aotcuda
    from torch.nn.utils import parametrize
    from torch.nn.utils.parametrizations import orthogonal

    from aotcuda.lowering.decompositions import decomposition_table
    from aotcuda.lowering.proxy_ops import proxy_executor_kernels

    class Rotation(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = orthogonal(torch.nn.Linear(6, 6), orthogonal_map=orthogonal_map)

        def forward(self, x):
            return self.l(x)

    torch.manual_seed(0)
    model = Rotation().eval()
    with pytest.raises(aotcuda.MissingFallbackKernelsError) as caught:
        aotcuda.lower(model, (torch.randn(3, 6),), device="cpu")
    message = str(caught.value)
    assert "it computes l.weight from its parametrization (_Orthogonal)" in message, message
    assert ("torch.nn.utils.parametrize.remove_parametrizations(model.l, 'weight', leave_parametrized=True)"
            in message), message
    assert "rewrite that line" not in message, message
    assert "bake a second one built alike" in message, message
    baked = Rotation().eval()  # a second model built alike (a copy.deepcopy baked breaks the original, torch 2.13)
    baked.load_state_dict(model.state_dict())
    parametrize.remove_parametrizations(baked.l, "weight", leave_parametrized=True)
    ep = torch.export.export(baked, (torch.randn(3, 6),), strict=False).run_decompositions(decomposition_table())
    assert proxy_executor_kernels(ep, "cpu") == []
    x = torch.randn(3, 6)
    torch.testing.assert_close(ep.module()(x), model(x), rtol=1e-5, atol=1e-6)
