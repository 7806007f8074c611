"""Every kind of symbolic node torch.export emits survives the pass, by enumeration.

The table below makes torch.export emit each SymInt/SymFloat/SymBool target that its verifier allows
(torch/_export/verifier.py: allowed_builtin_ops and the torch.sym_* functions) in a complex program
with a dynamic length; `test_the_table_covers_what_the_verifier_allows` checks that the table covers
that list and every operator of torch.fx.experimental.sym_node's magic methods that it allows. Each
program goes through the pass strictly, is verified (the ExportedProgram constructor runs torch's
verifier) and matches eager at two lengths. Assertion ops (_assert_scalar,
sym_constrain_range_for_size, _assert_tensor_metadata, sym_size/sym_stride/sym_numel) and the
higher-order ops that carry no complex value (auto_functionalized) have their own cases.
"""

from __future__ import annotations

import math
import operator

import pytest
import torch
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import cast_symbool_to_symint_guardless

from aotcuda.passes import ReplaceComplexWithRealPass

N = Dim("n", min=6, max=64)


def length(k):
    return ("length", k)


def scale(f):
    return ("scale", f)


# target the case makes export emit → f(n) on the dynamic length n: a length (a SymInt, the size of a
# complex tensor) or a scale (a SymFloat multiplying a complex tensor). Every expression differs from
# the others: export reuses a SymInt already computed for an equal expression (n << 1 would be n * 2).
SYMBOLIC_CASES = {
    operator.add: lambda n: length(n + 1),
    operator.sub: lambda n: length(n - 1),
    operator.mul: lambda n: length(n * 2),
    operator.floordiv: lambda n: length(n // 2),
    operator.mod: lambda n: length(n % 3 + 2),
    operator.pow: lambda n: length(n ** 2),
    operator.neg: lambda n: length(-(2 - n)),
    operator.abs: lambda n: length(abs(3 - n)),
    operator.truediv: lambda n: scale(n / 2),
    operator.lshift: lambda n: length(n << 2),
    operator.rshift: lambda n: length(n >> 2),
    operator.gt: lambda n: length(torch.sym_ite(n > 5, n, 2 * n)),
    operator.ge: lambda n: length(torch.sym_ite(n >= 9, n, 2 * n)),
    operator.lt: lambda n: length(torch.sym_ite(n < 9, n, 2 * n)),
    operator.le: lambda n: length(torch.sym_ite(n <= 9, n, 2 * n)),
    operator.eq: lambda n: length(torch.sym_ite(n == 7, n, 2 * n)),
    operator.ne: lambda n: length(torch.sym_ite(n != 7, n, 2 * n)),
    operator.and_: lambda n: length(torch.sym_ite((n > 3) & (n < 9), n, 2 * n)),
    operator.or_: lambda n: length(torch.sym_ite((n < 3) | (n > 9), n, 2 * n)),
    torch.sym_not: lambda n: length(torch.sym_ite(torch.sym_not(n > 11), n, 2 * n)),
    torch.sym_ite: lambda n: length(torch.sym_ite(n > 9, n, n + 3)),
    math.ceil: lambda n: length(math.ceil(n / 3)),
    math.floor: lambda n: length(math.floor(n / 3)),
    math.trunc: lambda n: length(math.trunc(n / 3)),
    round: lambda n: length(round(n / 3)),
    torch.sym_float: lambda n: scale(torch.sym_float(n)),
    torch.sym_max: lambda n: length(torch.sym_max(n, 9)),
    torch.sym_min: lambda n: length(torch.sym_min(n, 9)),
    torch.sym_sqrt: lambda n: scale(torch.sym_sqrt(n)),
    torch.sym_sum: lambda n: length(torch.sym_sum([n, n, 1])),
}

# Allowed by the verifier but not emitted by export from user code on torch 2.11–2.13, with why.
NOT_EMITTED = {
    operator.getitem: "emitted for multi-output ops and higher-order ops, not for SymInts (test_input_kinds, "
                      "test_control_flow)",
    torch.sym_int: "torch.sym_int(n / 2) is traced as math.trunc (covered)",
    operator.not_: "Python's `not` on a SymBool guards (specializes); torch.sym_not is what export traces",
    cast_symbool_to_symint_guardless:
        "export from user code fails in torch itself (a SymNode int with a bool hint)",
}
SYM_FUNCTIONS = (torch.sym_int, torch.sym_float, torch.sym_ite, torch.sym_max, torch.sym_min, torch.sym_not,
                 torch.sym_sqrt, torch.sym_sum,
                 cast_symbool_to_symint_guardless)  # verifier.py's list


class SymbolicLengths(torch.nn.Module):
    """One output per case: a complex tensor whose length (or scale) is f(n), n the input's dynamic length.
    One program for the whole table: one export and one rewrite (CI time)."""

    def __init__(self, cases):
        super().__init__()
        self.cases = list(cases)

    def forward(self, x):
        z = torch.view_as_complex(x)
        outputs = []
        for f in self.cases:
            kind, value = f(x.shape[0])
            if kind == "length":  # a complex full of that length (its rule reads the symbolic size)
                outputs.append(torch.view_as_real(torch.ones(value, dtype=z.dtype) * z.sum()))
            else:
                outputs.append(torch.view_as_real(z * value))
        return tuple(outputs)


def _targets(ep: torch.export.ExportedProgram) -> set:
    return {n.target for n in ep.graph.nodes if n.op == "call_function"}


def _rewrite_and_compare(module, example, lengths, dynamic_shapes, expect):
    ep = torch.export.export(module, (example,), dynamic_shapes=dynamic_shapes).run_decompositions()
    not_emitted = set(expect) - _targets(ep)
    assert not not_emitted, f"export did not emit {not_emitted}: the table would not exercise them"
    new = ReplaceComplexWithRealPass(strict=True)(ep)  # the constructor runs torch's verifier
    assert new is not ep and set(expect) <= _targets(new)
    for size in lengths:
        x = torch.randn(size, *example.shape[1:], dtype=example.dtype)
        torch.testing.assert_close(new.module()(x), module(x), rtol=1e-5, atol=1e-5)
    return new


def test_every_symbolic_op_survives_the_pass():
    n = Dim("n", min=8, max=64)  # n >> 2 stays above 1 (a length of 1 would specialize)
    _rewrite_and_compare(SymbolicLengths(SYMBOLIC_CASES.values()), torch.randn(10, 2), (9, 14), {"x": {0: n}},
                         expect=SYMBOLIC_CASES)


def test_the_table_covers_what_the_verifier_allows():
    from torch._export.verifier import Verifier
    from torch.fx.experimental import sym_node

    allowed = set(Verifier().allowed_builtin_ops()) | set(SYM_FUNCTIONS)
    magic = {sym_node.method_to_operator(m) for m in sym_node.magic_methods}
    missing = {t for t in allowed | (magic & allowed) if t not in SYMBOLIC_CASES and t not in NOT_EMITTED}
    assert not missing, f"no case makes export emit {missing}"


class UntracedSizes(torch.nn.Module):
    """Rules read sizes and strides the rewrite's trace never computed: Min(8, n) (torch's own rebuild of
    it emits _nary_sym_min, which the verifier rejects) and n**2, the stride of an FNet-style DFT matrix
    (PowByNatural, which torch's rebuild cannot build: "s27**2 is not tracked with proxy")."""

    def forward(self, x):
        z = torch.view_as_complex(x)
        n = x.shape[0]
        head = torch.ones(torch.sym_min(n, 8), n, dtype=z.dtype) * z[:, 0]
        dft = torch.exp(-2j * torch.pi * torch.outer(torch.arange(n), torch.arange(n)) / n)
        return torch.view_as_real(head.flatten()), torch.view_as_real(torch.einsum("lm,mk->lk", dft, z))


def test_sizes_the_trace_never_computed_are_rebuilt_with_allowed_ops():
    new = _rewrite_and_compare(UntracedSizes(), torch.randn(6, 3, 2), (7, 13), {"x": {0: N}}, expect={torch.sym_min})
    assert not any("nary" in getattr(t, "__name__", "") for t in _targets(new))


class Assertions(torch.nn.Module):
    """Data-dependent sizes and tensor checks: _assert_scalar, sym_constrain_range_for_size,
    _assert_tensor_metadata, sym_numel, sym_stride."""

    def forward(self, x, k):
        z = torch.view_as_complex(x.to(torch.float32))
        count = k.item()
        torch._check_is_size(count)
        torch._check(count <= x.shape[0])
        head = z[:count] * (x.numel() + x.stride(0))
        return torch.view_as_real(head)


def test_assertion_ops_survive_the_pass():
    module, k = Assertions(), torch.tensor(4)
    ep = torch.export.export(module, (torch.randn(6, 2), k), dynamic_shapes={"x": {0: N}, "k": None})
    ep = ep.run_decompositions()
    aten = torch.ops.aten
    assertions = {aten._assert_scalar.default, aten.sym_constrain_range_for_size.default,
                  aten._assert_tensor_metadata.default, aten._local_scalar_dense.default}
    emitted = assertions & _targets(ep)  # sym_constrain_range_for_size: torch 2.11, not 2.13
    assert {aten._assert_scalar.default, aten._assert_tensor_metadata.default} <= emitted, _targets(ep)
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert emitted <= _targets(new)
    for size in (7, 13):
        x = torch.randn(size, 2)
        torch.testing.assert_close(new.module()(x, k), module(x, k))


@torch.library.custom_op("aotcuda_test::scale_", mutates_args=("t",))
def _scale_(t: torch.Tensor, factor: float) -> None:
    t.mul_(factor)


@_scale_.register_fake
def _(t, factor):
    return None


class MutatingCustomOp(torch.nn.Module):
    """A custom op that mutates its input: export wraps it in the auto_functionalized higher-order op."""

    def forward(self, x):
        y = x.clone()
        _scale_(y, 3.0)
        return torch.view_as_real(torch.view_as_complex(y) * 1j)


def test_auto_functionalized_survives_the_pass():
    ep = torch.export.export(MutatingCustomOp(), (torch.randn(6, 2),), dynamic_shapes={"x": {0: N}})
    ep = ep.run_decompositions()
    hops = {t for t in _targets(ep) if isinstance(t, torch._ops.HigherOrderOperator)}
    assert hops and all("auto_functionalized" in t.name() for t in hops), hops
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert hops <= _targets(new)
    x = torch.randn(9, 2)
    torch.testing.assert_close(new.module()(x), MutatingCustomOp()(x))
