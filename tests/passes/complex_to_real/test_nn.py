"""Convolution (aten.convolution: every rank, transposed, grouped, strided, dilated, padded, with and without bias)
and average pooling on complex values, through export → pass → .module() against eager in complex64 and complex128.

A complex conv1d/2d/3d call exports as real convolutions of the parts (torch's own CompositeImplicit kernel does
the Gauss trick before the graph), so these programs call aten.convolution directly, as ComplexTensor and a traced
subclass would. Eager has no complex kernel for aten.convolution itself (only the F.conv* forms, through that
composite), so its result is compared with the same convolution through F.conv*/F.conv_transpose*; the F.* cases
check that their exported form (real convolutions of the parts) is still rewritten. Eager has no complex average
pooling at all; ComplexTensor defines it as the pool of each part (it is linear), which is the reference here: the
eager pool of z.real and of z.imag, against the rule's one pool of the pair with its dim folded into the channels.
"""

import pytest
import torch
import torch.nn.functional as F

from .helpers import assert_matches, check, fresh_like, pair, rewrite, ComplexFn

aten = torch.ops.aten


def conv(stride=1, padding=0, dilation=1, transposed=False, output_padding=0, groups=1, rank=2):
    """(aten.convolution with these arguments, the same convolution as eager computes it: F.conv*)."""
    def fn(x, w, *bias):
        n = lambda v: [v] * rank  # noqa: E731
        return aten.convolution(x, w, bias[0] if bias else None, n(stride), n(padding), n(dilation), transposed,
                                n(output_padding), groups)

    def reference(x, w, *bias):
        b = bias[0] if bias else None
        if transposed:
            return getattr(F, f"conv_transpose{rank}d")(x, w, b, stride, padding, output_padding, groups, dilation)
        return getattr(F, f"conv{rank}d")(x, w, b, stride, padding, dilation, groups)
    return fn, reference


def parts_pooled(pool, *args, **kwargs):
    """(aten's pool on a complex tensor, the reference: the eager pool of each part)."""
    return (lambda a: pool(a, *args, **kwargs),
            lambda a: torch.complex(pool(a.real, *args, **kwargs), pool(a.imag, *args, **kwargs)))


CASES = {
    "conv1d": (conv(rank=1), [(2, 3, 7), (4, 3, 3)]),
    "conv1d_bias_stride": (conv(stride=2, padding=1, rank=1), [(2, 3, 8), (4, 3, 3), (4,)]),
    "conv2d": (conv(), [(2, 3, 6, 5), (4, 3, 3, 2)]),
    "conv2d_groups_bias": (conv(groups=3, padding=1, dilation=2), [(1, 6, 7, 7), (9, 2, 3, 3), (9,)]),
    "conv3d": (conv(rank=3, stride=2), [(1, 2, 5, 4, 5), (3, 2, 2, 2, 3), (3,)]),
    "conv_transpose1d": (conv(transposed=True, stride=2, output_padding=1, rank=1), [(2, 4, 5), (4, 3, 3), (3,)]),
    "conv_transpose2d_groups": (conv(transposed=True, groups=2, stride=2, padding=1),
                                [(1, 4, 4, 5), (4, 3, 3, 3), (6,)]),
    "conv_transpose3d": (conv(transposed=True, rank=3), [(1, 2, 3, 3, 2), (2, 2, 2, 2, 2)]),
    "F.conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), [(2, 4, 5, 5), (6, 2, 3, 3), (6,)]),
    "F.conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w, stride=3), [(3, 6), (3, 2, 4)]),  # unbatched
    "avg_pool2d": (parts_pooled(F.avg_pool2d, 2), [(2, 3, 6, 5)]),
    "avg_pool2d_unbatched": (parts_pooled(F.avg_pool2d, 3, 2, 1, count_include_pad=False, ceil_mode=True),
                             [(3, 7, 6)]),
    "avg_pool2d_divisor": (parts_pooled(F.avg_pool2d, (2, 3), divisor_override=4), [(1, 2, 4, 6)]),
    "avg_pool3d": (parts_pooled(F.avg_pool3d, 2, 1), [(2, 2, 4, 3, 5)]),
    "avg_pool3d_unbatched": (parts_pooled(F.avg_pool3d, (1, 2, 2), padding=(0, 1, 1)), [(3, 2, 4, 5)]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", CASES)
def test_matches_eager(name, dtype):
    fn, shapes = CASES[name]
    args = [pair(*shape, dtype=dtype) for shape in shapes]
    if name.startswith("F."):
        check(fn, *args, n_complex=len(shapes))
    else:
        fn, reference = fn
        op = aten.convolution.default if name.startswith("conv") else getattr(aten, name[:10]).default
        _, new = rewrite(ComplexFn(fn, len(shapes)), tuple(args), expect_ops=(op,))
        fresh = tuple(fresh_like(a) for a in args)
        assert_matches(ComplexFn(reference, len(shapes))(*fresh), new.module()(*fresh), dtype)
