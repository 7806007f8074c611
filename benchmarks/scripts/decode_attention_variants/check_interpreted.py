"""The decode-attention variants against the plain-torch reference in Triton's interpreter (CPU, no GPU).

    python3 benchmarks/scripts/decode_attention_variants/check_interpreted.py [--variants NAME ...]

Each variant of decode_attention_sweep.VARIANTS whose kernel differs in the interpreter (num_stages and
warps are compiler matters: variants that differ only in them are checked once) runs
tests/kernels/test_decode_attention_kernel.py's cases in float32 and float16, then what the test module
checks in separate snippets, on fresh random inputs: keys of NaN and ±inf at hidden positions (blocks hidden
in part and whole), a cache of batch 1 shared by the batch, a row hidden everywhere (NaN, as eager), element
offsets past 2**31 (a sparse file); and, for the new ways of skipping, a mask with hidden runs in the middle
of the cache and a cache shorter than chunks × blocks. Sets TRITON_INTERPRET=1 for its own process only.
--cuda runs the same compiled on the GPU, every variant (pipelining included), in float32 and bfloat16 with
the CUDA tests' batch-8 case, without the sparse-file check.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile

if "--cuda" not in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before Triton and the kernels are imported

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [os.path.join(ROOT, "tests", "kernels"), os.path.join(ROOT, "tests"), os.path.dirname(HERE)]
import decode_attention_sweep as sweep  # noqa: E402
from comparisons import relative_error  # noqa: E402
from test_decode_attention_kernel import CASES, CUDA_CASES, TOLERANCE, _case  # noqa: E402


def _check(module, q, k, v, bias, scale, group, tolerance, what):
    got, want = module.launch(q, k, v, bias, scale, group), module.reference(q, k, v, bias, scale, group)
    error = relative_error(got, want)
    assert error < tolerance, (what, error)
    return error


def _test_cases(module):
    cuda = torch.get_default_device().type == "cuda"
    for dtype in (torch.float32, torch.bfloat16 if cuda else torch.float16):  # the interpreter's bf16 is wrong
        for case in CUDA_CASES if cuda else CASES:
            q, k, v, bias = _case(*case, dtype, torch.get_default_device())
            _check(module, q, k, v, bias, 1 / math.sqrt(q.shape[-1]), case[2], TOLERANCE[dtype], (case, dtype))


def _hidden_keys_not_read(module):
    for width, group, rows, length, pos in [(16, 2, 1, 100, 10), (80, 3, 2, 200, 70), (24, 8, 4, 64, 0)]:
        q = torch.randn(2, 2 * group, rows, width)
        k, v = torch.randn(2, 2, length, width), torch.randn(2, 2, length, width)
        k[:, :, pos + 1:] = torch.tensor([math.nan, math.inf, -math.inf])[torch.arange(length - pos - 1) % 3][:, None]
        visible = torch.arange(length) <= pos
        bias = torch.zeros(length).masked_fill(~visible, -math.inf)
        scores = (q @ k.repeat_interleave(group, 1).transpose(-1, -2)) * 0.3
        want = torch.softmax(torch.where(visible, scores, -math.inf), -1) @ v.repeat_interleave(group, 1)
        got = module.launch(q, k, v, bias, 0.3, group)
        assert relative_error(got, want) < 1e-5, ("hidden keys", width, group, rows, got.isnan().sum())


def _shared_cache(module):
    q, k, v = torch.randn(3, 4, 2, 24), torch.randn(1, 2, 100, 24), torch.randn(1, 2, 100, 24)
    _check(module, q, k, v, torch.randn(3, 1, 2, 100), 0.3, 2, 1e-5, "batch-1 cache")
    q = torch.randn(5, 8, 1, 64)  # the decoder's step shape, a causal row shared by every row
    k, v = torch.randn(1, 2, 300, 64), torch.randn(1, 2, 300, 64)
    bias = torch.zeros(1, 1, 1, 300)
    bias[..., 201:] = -math.inf
    _check(module, q, k, v, bias, 0.125, 4, 1e-5, "batch-1 cache, shared bias row")


def _row_hidden_everywhere(module):
    q, k, v, _ = _case(1, 2, 2, 2, 256, 64, None, torch.float32, torch.get_default_device())
    bias = torch.zeros(2, 256)
    bias[1] = -math.inf
    got, want = module.launch(q, k, v, bias, 0.125, 2), module.reference(q, k, v, bias, 0.125, 2)
    assert torch.isnan(got[:, :, 1]).all() and torch.isnan(want[:, :, 1]).all()
    assert relative_error(got[:, :, 0], want[:, :, 0]) < 1e-5


def _holes_and_short_caches(module):
    # hidden runs between visible ones (a whole chunk hidden; blocks hidden inside a chunk's visible range),
    # per batch entry; and caches of a few blocks over more chunks than blocks (chunks past the cache's end)
    for batch, kv_heads, group, length in [(2, 2, 4, 700), (1, 1, 2, 150), (3, 1, 1, 64)]:
        q = torch.randn(batch, kv_heads * group, 1, 32)
        k, v = torch.randn(batch, kv_heads, length, 32), torch.randn(batch, kv_heads, length, 32)
        bias = torch.randn(batch, 1, 1, length)
        bias[0, ..., 3:min(200, length - 20)] = -math.inf
        if batch > 1:
            bias[-1, ..., length // 2:] = -math.inf
            bias[-1, ..., :5] = -math.inf
        _check(module, q, k, v, None, 0.2, group, 1e-5, ("no bias", batch, length))
        k = k.masked_fill(bias.transpose(-1, -2) == -math.inf, math.nan)  # hidden keys: NaN, never read
        _check(module, q, k, v, bias, 0.2, group, 1e-5, ("holes", batch, length))


def _offsets_past_two_to_the_31(module):
    if torch.get_default_device().type == "cuda":
        return  # a sparse file's view: CPU only
    elements = 2 ** 32
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "cache.bin")
        with open(path, "wb") as file:
            file.truncate(elements * 2)
        storage = torch.from_file(path, shared=True, size=elements, dtype=torch.float16)
        for batch, length, strides in [(3, 64, (2 ** 30 + 2 ** 10, 64 * 16, 16, 1)), (1, 100, (16, 16, 2 ** 25 + 16, 1))]:
            k = storage.as_strided((batch, 1, length, 16), strides)
            k.copy_(torch.randn(batch, 1, length, 16, dtype=torch.float16))
            q, v = torch.randn(batch, 2, 1, 16, dtype=torch.float16), torch.randn(batch, 1, length, 16, dtype=torch.float16)
            _check(module, q, k, v, torch.randn(batch, 2, 1, length), 0.3, 2, 2e-3, ("offsets", batch))
        del storage


CHECKS = [_test_cases, _hidden_keys_not_read, _shared_cache, _row_hidden_everywhere, _holes_and_short_caches,
          _offsets_past_two_to_the_31]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="*", help="names in decode_attention_sweep.VARIANTS (default: all)")
    parser.add_argument("--cuda", action="store_true", help="compiled, on the GPU (bfloat16 and the batch-8 case too)")
    options = parser.parse_args()
    if options.cuda:
        torch.set_default_device("cuda")
    checked = {}
    for variant in sweep.VARIANTS:
        if options.variants and variant.name not in options.variants:
            continue
        module = sweep.configured(variant)
        key = (variant.path, variant.splits, tuple(sorted((k, v) for k, v in variant.settings.items() if k != "STAGES")))
        if options.cuda:
            key = variant.name  # compiled: the pipelining and the warps are checked too
        if key in checked:
            print(f"{variant.name}: as {checked[key]} in the interpreter (differs in pipelining or warps only)")
            continue
        for check in CHECKS:
            torch.manual_seed(0)
            check(module)
        checked[key] = variant.name
        print(f"{variant.name}: passed")


if __name__ == "__main__":
    main()
