"""aotcuda::decode_attention's Triton kernels against the plain-torch reference: on the H200 (cuda), and on
the CPU through Triton's interpreter where Triton is installed (float32 and float16: the interpreter's
bfloat16 products are wrong, so bfloat16 is checked on CUDA only). Fresh random q, caches and masks;
grouped heads, several query rows, strided q, broadcast masks, hidden blocks and a row hidden everywhere."""

import importlib.util
import math
import textwrap

import pytest
import torch

from aotcuda.kernels import decode_attention as attention
from comparisons import relative_error
from interpreted import run_code, run_interpreted

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
# (batch, KV heads, group, query rows, cache length, head width, mask): the decoder's step, odd sizes
CASES = [(1, 8, 4, 1, 2048, 64, "causal"), (3, 2, 2, 2, 200, 32, "full"), (2, 1, 1, 1, 130, 64, None),
         (1, 2, 8, 1, 256, 128, "causal-hidden-blocks"), (2, 4, 1, 3, 96, 80, "per-batch"),
         (6, 6, 2, 1, 1024, 32, "causal")]  # batch · heads many enough for chunks of several blocks
# the decoder's step at batch 8 (8 chunks of 4 blocks), on CUDA only: the interpreter would take minutes
CUDA_CASES = CASES + [(8, 8, 4, 1, 2048, 64, "causal")]


def _case(batch, kv_heads, group, rows, length, width, mask, dtype, device):
    q = torch.randn(batch, rows, kv_heads * group, width, dtype=dtype, device=device).transpose(1, 2)  # strided
    k = torch.randn(batch, kv_heads, length, width, dtype=dtype, device=device)
    v = torch.randn(batch, kv_heads, length, width, dtype=dtype, device=device)
    bias = None
    if mask in ("causal", "causal-hidden-blocks"):
        position = length // 2 if mask == "causal" else 5
        visible = torch.arange(length, device=device)[None, :] <= position + torch.arange(rows, device=device)[:, None]
        bias = torch.zeros(rows, length, device=device).masked_fill(~visible, -math.inf)  # [Sq, L]: broadcast
    elif mask == "full":
        bias = torch.randn(batch, kv_heads * group, rows, length, device=device)
    elif mask == "per-batch":
        bias = torch.zeros(batch, 1, rows, length, device=device)
        bias[0, ..., 40:] = torch.finfo(torch.float32).min
    return q, k, v, bias



@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("case", CUDA_CASES, ids=[str(c) for c in CUDA_CASES])
def test_the_cuda_kernels_match_the_reference(case, dtype):
    if not attention.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(0)
    q, k, v, bias = _case(*case, dtype, "cuda")
    scale = 1 / math.sqrt(q.shape[-1])
    got = torch.ops.aotcuda.decode_attention(q, k, v, bias, scale, case[2])
    assert got.shape == (*q.shape[:3], v.shape[-1]) and got.dtype == dtype
    assert relative_error(got, attention.reference(q, k, v, bias, scale, case[2])) < TOLERANCE[dtype]


@pytest.mark.cuda
def test_a_row_hidden_everywhere_is_nan_as_in_eager():
    if not attention.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    q, k, v, _ = _case(1, 2, 2, 2, 256, 64, None, torch.float32, "cuda")
    bias = torch.zeros(2, 256, device="cuda")
    bias[1] = -math.inf
    got = torch.ops.aotcuda.decode_attention(q, k, v, bias, 0.125, 2)
    want = attention.reference(q, k, v, bias, 0.125, 2)
    assert torch.isnan(got[:, :, 1]).all() and torch.isnan(want[:, :, 1]).all()
    assert relative_error(got[:, :, 0], want[:, :, 0]) < 1e-5


@pytest.mark.cuda
def test_a_program_with_the_op_lowers_without_fallbacks_and_matches_eager(tmp_path):
    # The Triton op in a user's program: AOTInductor compiles its kernels into the package, which runs in
    # aotcuda's runtime (no proxy executor), over a dynamic batch.
    if not attention.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    import aotcuda

    class Step(torch.nn.Module):
        def forward(self, q, k, v, bias):
            return torch.ops.aotcuda.decode_attention(q * 2, k, v, bias, 0.125, 4) + 1

    torch.manual_seed(1)
    args = _case(2, 2, 4, 1, 512, 64, "causal", torch.bfloat16, "cuda")
    batch = torch.export.Dim("batch", min=1, max=8)
    lowered = aotcuda.lower(Step(), args, device="cuda", package_path=tmp_path / "step.pt2",
                            dynamic_shapes=({0: batch}, {0: batch}, {0: batch}, None))
    assert lowered.fallback_kernels == [] and lowered.runs_in_aotcuda_runtime
    program = aotcuda.load(lowered.package_path)
    for size in (1, 5):
        q, k, v, bias = _case(size, 2, 4, 1, 512, 64, "causal", torch.bfloat16, "cuda")
        want = attention.reference(q * 2, k, v, bias, 0.125, 4) + 1
        assert relative_error(program(q, k, v, bias), want) < 1e-2


def check_interpreted():
    """Each case in float32 and float16 through Triton's interpreter (run by interpreted.run_interpreted)."""
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        for case in CASES:
            q, k, v, bias = _case(*case, dtype, "cpu")
            scale = 1 / math.sqrt(q.shape[-1])
            error = relative_error(attention.launch(q, k, v, bias, scale, case[2]),
                           attention.reference(q, k, v, bias, scale, case[2]))
            assert error < TOLERANCE[dtype], (case, dtype, error)
            print(case, dtype, f"{error:.1e}")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_the_kernels_match_the_reference_in_tritons_interpreter():
    assert len(run_interpreted("test_decode_attention_kernel")) == 2 * len(CASES)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_a_cache_of_batch_one_shared_by_every_query_of_the_batch_is_read_as_broadcast():
    # repeat_kv of a [1, Hkv, L, D] cache expanded to the batch: the pass gives the op the cache as it is
    # (batch 1) and the reference broadcasts it; the kernels indexed it with the query's batch, past its end.
    run_code("""
        import torch
        from aotcuda.kernels import decode_attention as attention
        torch.manual_seed(0)
        q, k, v = torch.randn(3, 4, 2, 24), torch.randn(1, 2, 100, 24), torch.randn(1, 2, 100, 24)
        bias = torch.randn(3, 1, 2, 100)
        got, want = attention.launch(q, k, v, bias, 0.3, 2), attention.reference(q, k, v, bias, 0.3, 2)
        assert ((got - want).norm() / want.norm()).item() < 1e-5, (got - want).abs().max()
    """)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_keys_at_positions_the_bias_hides_are_not_read_in_the_interpreter():
    # NaN and ±inf in the keys of hidden positions (a cache of torch.empty past the filled positions), in
    # blocks the bias hides in part (the keys are loaded) and whole (skipped): the result is finite and
    # matches eager's where(visible, s, -inf) attention, for several widths, groups and query rows.
    run_code("""
        import math, torch
        from aotcuda.kernels import decode_attention as attention
        torch.manual_seed(0)
        for width, group, rows, length, pos in [(16, 2, 1, 100, 10), (80, 3, 2, 200, 70), (24, 8, 4, 64, 0)]:
            q = torch.randn(2, 2 * group, rows, width)
            k, v = torch.randn(2, 2, length, width), torch.randn(2, 2, length, width)
            k[:, :, pos + 1:] = torch.tensor([math.nan, math.inf, -math.inf])[torch.arange(length - pos - 1) % 3][:, None]
            visible = torch.arange(length) <= pos
            bias = torch.zeros(length).masked_fill(~visible, -math.inf)
            scores = (q @ k.repeat_interleave(group, 1).transpose(-1, -2)) * 0.3
            want = torch.softmax(torch.where(visible, scores, -math.inf), -1) @ v.repeat_interleave(group, 1)
            for got in (attention.launch(q, k, v, bias, 0.3, group), attention.reference(q, k, v, bias, 0.3, group)):
                assert ((got - want).norm() / want.norm()).item() < 1e-5, (width, group, rows, got.isnan().sum())
    """)


_HOLES_AND_SHORT_CACHES = """
    import math, torch
    from aotcuda.kernels import decode_attention as attention
    torch.manual_seed(0)
    # Hidden runs between visible ones (a whole chunk hidden; blocks hidden inside a chunk's visible range,
    # which the kernel reads and masks), per batch entry; and caches of fewer blocks than chunks (chunks past
    # the cache's end). Hidden keys hold NaN: never mixed in.
    for batch, kv_heads, group, length in [(2, 2, 4, 700), (1, 1, 2, 150), (3, 1, 1, 64), (2, 8, 4, 1100)]:
        q = torch.randn(batch, kv_heads * group, 1, 32)
        k, v = torch.randn(batch, kv_heads, length, 32), torch.randn(batch, kv_heads, length, 32)
        bias = torch.randn(batch, 1, 1, length)
        bias[0, ..., 3:min(200, length - 20)] = -math.inf
        if batch > 1:
            bias[-1, ..., length // 2:] = -math.inf
            bias[-1, ..., :5] = -math.inf
        for mask in (None, bias):
            keys = k if mask is None else k.masked_fill(bias.transpose(-1, -2) == -math.inf, math.nan)
            got = attention.launch(q, keys, v, mask, 0.2, group)
            want = attention.reference(q, keys, v, mask, 0.2, group)
            assert ((got - want).norm() / want.norm()).item() < 1e-5, (batch, length, mask is None)
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_hidden_runs_inside_the_cache_and_caches_shorter_than_the_chunks_in_the_interpreter():
    run_code(_HOLES_AND_SHORT_CACHES)


@pytest.mark.cuda
def test_hidden_runs_inside_the_cache_and_caches_shorter_than_the_chunks_on_cuda():
    if not attention.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.set_default_device("cuda")
    try:
        exec(compile(textwrap.dedent(_HOLES_AND_SHORT_CACHES), "holes", "exec"), {})
    finally:
        torch.set_default_device(None)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
@pytest.mark.parametrize("layout", ["batch stride past 2**30", "sequence-major cache"])
def test_element_offsets_past_two_to_the_31_are_not_wrapped(tmp_path, layout):
    # Triton types an integer argument below 2**31 as int32, so b * stride_b (or position * stride_l) wrapped
    # to a negative offset for a cache of over 2**31 elements: a batch of 3 four-GiB caches, or a cache kept
    # sequence-major ([L, B, H, D]). The caches are views of a sparse file (no memory for the gaps).
    run_code(f"""
        import torch
        from aotcuda.kernels import decode_attention as attention
        elements = 2 ** 32
        with open({str(tmp_path / "cache.bin")!r}, "wb") as f:
            f.truncate(elements * 2)
        storage = torch.from_file({str(tmp_path / "cache.bin")!r}, shared=True, size=elements, dtype=torch.float16)
        batch, length, width = (3, 64, 16) if {layout!r} == "batch stride past 2**30" else (1, 100, 16)
        if batch == 3:
            strides = (2 ** 30 + 2 ** 10, length * width, width, 1)
        else:
            strides = (width, width, 2 ** 25 + 16, 1)
        k = storage.as_strided((batch, 1, length, width), strides)
        torch.manual_seed(0)
        k.copy_(torch.randn(batch, 1, length, width, dtype=torch.float16))
        q, v = torch.randn(batch, 2, 1, width, dtype=torch.float16), torch.randn(batch, 1, length, width, dtype=torch.float16)
        bias = torch.randn(batch, 2, 1, length)
        got, want = attention.launch(q, k, v, bias, 0.3, 2), attention.reference(q, k, v, bias, 0.3, 2)
        assert ((got.float() - want.float()).norm() / want.float().norm()).item() < 2e-3
    """)


def test_a_bias_that_does_not_broadcast_is_refused_with_its_shape():
    # The kernel reads the bias with broadcast strides and no bound: a bias one position short was read past
    # its end (and one too long, or of other heads, silently misread), where eager's broadcast raises.
    q, k, v = torch.randn(1, 2, 1, 16), torch.randn(1, 1, 300, 16), torch.randn(1, 1, 300, 16)
    for shape in [(299,), (1, 2, 1, 301), (1, 3, 1, 300), (2, 300, 1)]:
        for run in [torch.ops.aotcuda.decode_attention] + ([attention.launch] if attention.HAVE_TRITON else []):
            with pytest.raises(ValueError, match=r"broadcasts to \[B, Hq, Sq, L\] = \[1, 2, 1, 300\]"):
                run(q, k, v, torch.zeros(shape), 0.25, 2)  # the launch refuses before any kernel runs
    for shape in [(300,), (1, 300), (2, 1, 300), (1, 1, 1, 1), (1, 2, 1, 300)]:
        assert torch.ops.aotcuda.decode_attention(q, k, v, torch.zeros(shape), 0.25, 2).shape == (1, 2, 1, 16)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_nan_in_the_bias_outside_the_visible_range_and_an_empty_cache_match_eager_in_the_interpreter():
    # A NaN bias is not −inf: eager's row is NaN wherever it lies. The bounds' scan took the position for
    # hidden (max(NaN, −inf) > −inf is false, and CUDA's max drops a NaN), so a NaN past the last visible
    # position was skipped and the row came out finite. An empty cache (L = 0) gave NaN where eager gives 0.
    run_code("""
        import math, torch
        from aotcuda.kernels import decode_attention as attention
        torch.manual_seed(0)
        q, k, v = torch.randn(1, 4, 1, 32), torch.randn(1, 2, 300, 32), torch.randn(1, 2, 300, 32)
        bias = torch.full((1, 4, 1, 300), -math.inf)
        bias[..., 10] = 0.0
        bias[0, 1, 0, 250] = math.nan  # head 1: a NaN in another block, past the visible position
        bias[0, 2, 0, 0] = math.nan  # head 2: a NaN alone
        got, want = attention.launch(q, k, v, bias, 0.2, 2), attention.reference(q, k, v, bias, 0.2, 2)
        assert torch.equal(got.isnan(), want.isnan()) and want[0, 1:3].isnan().all(), got.isnan().any(-1)
        assert torch.allclose(got[0, ::3], want[0, ::3], rtol=1e-5, atol=1e-6)
        empty = torch.randn(1, 2, 0, 32)
        got, want = attention.launch(q, empty, empty, None, 0.2, 2), attention.reference(q, empty, empty, None, 0.2, 2)
        assert torch.equal(got, want) and not want.isnan().any()
    """)
