"""The complex rules under flush-to-zero, simulated on the CPU: no nan where either reading is a number.

Inductor's CUDA (Triton) kernels link libdevice with flush-to-zero (triton_meta disable_ftz=False;
pytorch/pytorch#185878, #188546): a float32 subnormal operand of hypot, atan2, sin, ... reads as ±0 while
plain products and sums keep it, and eager's CUDA kernels keep it everywhere. On the H200 that turned
exp(3.7e19 + 1e-45i) into (inf, nan), log(0 + 1e-45i) into (−103.3, 0) and sqrt(1.5e-39 + 1.2e-38i) into
a value of neither reading. Here the rules run in a TorchDispatchMode that flushes float32 subnormal
arguments and results of a chosen set of aten ops: each libdevice function alone and all of them (as
Triton's nvvm-reflect-ftz does), where each value must match eager on the input itself; and every
arithmetic op as well (the strictest machine, where scaling by a power of two flushes too), where each
value must match eager on the input or on the input flushed (special_values.flush_subnormals), per value:
the reference rule of the CUDA test (test_special_values_aoti.py), here checkable without a GPU.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.registry import rule_for

from .special_values import (complex_table, describe, finite_rows, flush_subnormals, mismatches, on_scalar_kernel,
                             prefer_true_value, true_value)

aten = torch.ops.aten
# The aten ops Inductor's Triton code computes with libdevice (flushed under nvvm-reflect-ftz).
LIBDEVICE = [aten.sin, aten.cos, aten.atan2, aten.hypot, aten.log, aten.log1p, aten.exp, aten.sqrt]
ARITHMETIC = [aten.add, aten.sub, aten.mul, aten.div, aten.neg, aten.abs, aten.maximum, aten.minimum, aten.eq,
              aten.ne, aten.lt, aten.le, aten.gt, aten.ge, aten.copysign, aten.reciprocal]
MACHINES = {**{f"{op.__name__}_flushes": [op] for op in LIBDEVICE}, "libdevice_flushes": LIBDEVICE,
            "all_arithmetic_flushes": LIBDEVICE + ARITHMETIC}
# op → (the function in eager, its true value where eager is wrong on finite operands, or None)
FUNCTIONS = {
    aten.exp.default: (torch.exp, torch.exp),
    aten.sqrt.default: (torch.sqrt, torch.sqrt),
    aten.log.default: (torch.log, torch.log),
    aten.angle.default: (torch.angle, torch.angle),
    aten.abs.default: (torch.abs, torch.abs),
    # torch's definition part by part, and the true value (as test_special_values checks the sgn rule)
    aten.sgn.default: (lambda z: torch.where(z == 0, 0, torch.complex(z.real / z.abs(), z.imag / z.abs())),
                       lambda z: torch.where(z == 0, 0 * z, z / z.abs())),
}  # division and reciprocal compute float32 in float64, where no flush applies


class FlushToZero(TorchDispatchMode):
    """Runs aten ops with float32 subnormal tensor arguments and results flushed, for the ops given."""

    def __init__(self, ops):
        super().__init__()
        self.ops = set(ops)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket not in self.ops:
            return func(*args, **kwargs)
        flush = lambda t: flush_subnormals(t) if isinstance(t, torch.Tensor) else t  # noqa: E731
        args, kwargs = pytree.tree_map(flush, (args, kwargs))
        return pytree.tree_map(flush, func(*args, **kwargs))


def reference(op, pairs: torch.Tensor) -> torch.Tensor:
    """eager (scalar kernel) on the pairs, with the true value where eager is wrong on finite operands."""
    fn, true_fn = FUNCTIONS[op]
    z = torch.view_as_complex(pairs)
    expected = fn(on_scalar_kernel(z))
    expected = torch.view_as_real(expected) if expected.is_complex() else expected
    return prefer_true_value(expected, true_value(true_fn, [z]), finite_rows([z]), complex_result=expected.ndim == 2)


@pytest.fixture(scope="module")
def table():
    pairs = complex_table(torch.float32)
    return pairs, {op: (reference(op, pairs), reference(op, flush_subnormals(pairs))) for op in FUNCTIONS}


@pytest.mark.parametrize("machine", MACHINES)
def test_rules_under_flush_to_zero_match_eager_on_the_input_or_the_flushed_input(table, machine):
    """Where only libdevice flushes (Triton's case: plain products and sums keep subnormals), the rules
    scale tiny operands so that they match eager on the input itself; where every op flushes, they
    match eager on one of the two readings, value by value."""
    pairs, references = table
    problems = []
    for op, (on_input, on_flushed) in references.items():
        with FlushToZero(MACHINES[machine]):
            got = rule_for(op).fn(on_input, Pair(pairs))
        got = got.t if isinstance(got, Pair) else got
        complex_result = got.ndim == 2
        bad = mismatches(got, on_input, complex_result=complex_result)
        if machine == "all_arithmetic_flushes":  # the scaling itself flushes there: either reading
            bad &= mismatches(got, on_flushed, complex_result=complex_result)
        if bad.any():
            problems.append(f"{op}: " + describe([pairs], got, on_input, bad))
    assert not problems, "\n".join(problems)


def test_the_h200_cases_read_one_input_per_value():
    """The four H200 failures, on the libdevice machine: each now one reading's value, none nan."""
    cases = {aten.exp.default: [3.7e19 + 1e-45j], aten.sqrt.default: [complex(1.469368e-39, 1.1754944e-38)],
             aten.log.default: [1e-45j], aten.angle.default: [1e-45j]}
    for op, values in cases.items():
        pairs = torch.view_as_real(torch.tensor(values, dtype=torch.complex64))
        with FlushToZero(LIBDEVICE):
            got = rule_for(op).fn(reference(op, pairs), Pair(pairs))
        got = got.t if isinstance(got, Pair) else got
        assert not torch.isnan(got).any(), (op, got)
        complex_result = got.ndim == 2
        assert not mismatches(got, reference(op, pairs), complex_result=complex_result).any(), (op, got)
