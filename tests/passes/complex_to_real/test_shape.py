"""Shape and view rules against eager: every op runs on the pair with its dims mapped."""

import pytest
import torch
import torch.nn.functional as F

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import rule_for

from .helpers import check, pair, run_rule

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float64]

# (name, fn, complex shape, ops the export must contain)
CASES = [
    ("view", lambda a: a.view(4, 6) * 1j, (2, 3, 4), [aten.view.default]),
    ("reshape_copy", lambda a: a.transpose(0, 1).reshape(-1) * 1j, (3, 4), [aten.clone.default]),
    ("flatten", lambda a: a.flatten(1) * 1j, (2, 3, 4), [aten.view.default]),
    ("unsqueeze", lambda a: (a.unsqueeze(0) * 1j, a.unsqueeze(-1) * 1j), (3, 4), [aten.unsqueeze.default]),
    ("squeeze_all", lambda a: a.squeeze() * 1j, (3, 1, 4, 1), [aten.squeeze.dims]),
    ("squeeze_dim", lambda a: (a.squeeze(1) * 1j, a.squeeze(-1) * 1j), (3, 1, 4, 1), [aten.squeeze.dims]),
    ("squeeze_dims", lambda a: a.squeeze((1, -1)) * 1j, (3, 1, 4, 1), [aten.squeeze.dims]),
    ("permute", lambda a: a.permute(2, 0, 1) * 1j, (2, 3, 4), [aten.permute.default]),
    ("permute_negative", lambda a: a.permute(-1, 0, -2) * 1j, (2, 3, 4), [aten.permute.default]),
    ("transpose", lambda a: a.transpose(0, -1) * 1j, (2, 3, 4), [aten.permute.default]),
    ("t", lambda a: a.t() * 1j, (3, 4), [aten.permute.default]),
    ("expand", lambda a: a.expand(5, -1, 4) * 1j, (1, 3, 4), [aten.expand.default]),
    ("slice", lambda a: (a[1:, ::2] * 1j, a[..., -2:] * 1j), (4, 6), [aten.slice.Tensor]),
    ("select", lambda a: (a[1] * 1j, a[:, -1] * 1j), (4, 6), [aten.select.int]),
    ("narrow", lambda a: a.narrow(-1, 1, 3) * 1j, (4, 6), [aten.slice.Tensor]),
    ("split", lambda a: [p * 1j for p in a.split(2, -1)], (3, 6), [aten.split_with_sizes.default]),
    ("split_with_sizes", lambda a: [p * 1j for p in a.split([1, 2, 3], 1)], (3, 6),
     [aten.split_with_sizes.default]),
    ("unbind", lambda a: [p * 1j for p in a.unbind(-1)], (3, 4), [aten.slice.Tensor, aten.squeeze.dims]),
    ("chunk", lambda a: [p * 1j for p in a.chunk(3, 0)], (6, 2), [aten.split_with_sizes.default]),
    ("cat", lambda a: torch.cat([a, a * 2], -1) * 1j, (3, 4), [aten.cat.default]),
    ("cat_dim0", lambda a: torch.cat([a, a[:1]], 0) * 1j, (3, 4), [aten.cat.default]),
    ("stack", lambda a: (torch.stack([a, a * 1j], -1), torch.stack([a, -a], 0)), (3, 4), [aten.cat.default, aten.unsqueeze.default]),
    ("repeat", lambda a: a.repeat(2, 1, 3) * 1j, (3, 4), [aten.repeat.default]),
    ("flip", lambda a: a.flip(0, -1) * 1j, (3, 4), [aten.flip.default]),
    ("roll_dims", lambda a: a.roll(1, -1) * 1j, (3, 4), []),
    ("roll_flat", lambda a: a.roll(2) * 1j, (3, 4), []),
    ("pad", lambda a: F.pad(a, (1, 2, 0, 1)) * 1j, (3, 4), [aten.constant_pad_nd.default]),
    ("contiguous", lambda a: a.transpose(0, 1).contiguous() * 1j, (3, 4), [aten.clone.default]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fn,shape,ops", CASES, ids=[c[0] for c in CASES])
def test_shape_rule(name, fn, shape, ops, dtype):
    check(fn, pair(*shape, dtype=dtype), expect_ops=ops)


def test_cat_of_complex_and_real_promotes_the_real_operand():
    check(lambda a, r: torch.cat([a, r], 0) * 1j, pair(2, 4), torch.randn(3, 4))


@pytest.mark.parametrize("rule_op,args", [
    (aten.roll.default, ((3, 4), [1], [])),
    (aten.roll.default, ((3, 4), [1, -1], [0, 1])),
    (aten.constant_pad_nd.default, ((3, 4), [1, 2, 1, 0], 1.5 - 2j)),
    (aten.t.default, ((3, 4),)),
    (aten.t.default, ((4,),)),
    (aten.narrow.default, ((5, 4), 0, 1, 3)),
    (aten.chunk.default, ((6, 4), 3, 0)),
    (aten.split.Tensor, ((6, 4), 2, -1)),
    (aten.reshape.default, ((6, 4), [3, 8])),
    (aten.flatten.using_ints, ((2, 3, 4), 0, -1)),
    (aten.squeeze.dim, ((3, 1), -1)),
    (aten.transpose.int, ((2, 3, 4), -1, 0)),
    (aten.squeeze.default, ((3, 1, 4, 1),)),
    (aten.unbind.int, ((3, 4), -1)),
    (aten.stack.default, None),
])
def test_rule_on_its_own_matches_eager(rule_op, args):
    """Rules for op forms export does not emit by default (they appear in programs not decomposed)."""
    if rule_op is aten.stack.default:  # takes a list: check it through the tensors-first helper below
        a, b = torch.randn(3, 4, dtype=torch.complex64), torch.randn(3, 4, dtype=torch.complex64)
        for dim in (0, -1):
            expected = torch.stack([a, b], dim)
            got = rule_for(rule_op).fn(expected, [Pair(torch.view_as_real(a)), Pair(torch.view_as_real(b))], dim)
            torch.testing.assert_close(got.t, torch.view_as_real(expected))
        return
    run_rule(rule_op, *args)


def test_stride_queries_answer_as_eager_or_refuse():
    """A rule's result may be laid out unlike eager's (an FFT's is); a stride or storage offset that the
    program computes with must then not silently differ: the rule fails, so the program is refused."""
    from aotcuda.passes.complex_to_real.rules.shape import sym_storage_offset, sym_stride

    z = torch.randn(3, 4, dtype=torch.complex64)
    as_eager = Pair(torch.view_as_real(z))
    assert [sym_stride(z.stride(d), as_eager, d) for d in (0, 1, -1)] == [4, 1, 1]
    assert sym_storage_offset(z[1:].storage_offset(), Pair(torch.view_as_real(z[1:]))) == 4
    column_major = Pair(torch.view_as_real(z.t().contiguous()).transpose(0, 1))  # [3, 4, 2], strides (2, 6, 1)
    with pytest.raises(ValueError, match="laid out unlike eager"):
        sym_stride(z.stride(0), column_major, 0)
    with pytest.raises(ValueError, match="laid out unlike eager"):
        sym_storage_offset(0, Pair(torch.view_as_real(z[1:])))  # eager's value says offset 0
