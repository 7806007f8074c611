"""Integer division rounded toward zero, written with the divisions Inductor guards.

Inductor's C++ code computes ``torch.div(a, b, rounding_mode="trunc")`` of integer tensors with a plain C++ ``/``
(torch 2.13, ``ops.truncdiv``; vectorized too): a zero in ``b`` ends the process with SIGFPE, where eager raises
``RuntimeError: ZeroDivisionError``. Its floor division and remainder (``floor_divide_integral``,
``remainder_integral`` in cpp_prefix.h) note a zero divisor and raise ZeroDivisionError after the kernel instead.
So lower()'s decompose step writes truncation from those two (where the program has such a division): the floor quotient, plus one where the remainder is not zero and
the operands' signs differ. Exact for every pair eager computes; a zero divisor is then the generated code's
ZeroDivisionError (a RuntimeCallError; the Program answers the next call). Floats and the other rounding modes are
left to torch (``NotImplemented``). A row of torch_fixes.FIXES.
"""

from __future__ import annotations

import torch

from aotcuda.lowering.index_ranges import is_integer_node, is_integer_tensor

aten = torch.ops.aten


def trunc_division_guarded(a, b, *, rounding_mode=None):
    """``aten.div.Tensor_mode`` for integer tensors with rounding_mode="trunc"; NotImplemented otherwise."""
    if rounding_mode != "trunc" or not (is_integer_tensor(a) and is_integer_tensor(b)):
        return NotImplemented
    floor = aten.floor_divide.default(a, b)
    remainder = aten.remainder.Tensor(a, b)
    inexact_across_zero = aten.logical_and.default(aten.ne.Scalar(remainder, 0),
                                                   aten.ne.Tensor(aten.lt.Scalar(a, 0), aten.lt.Scalar(b, 0)))
    return aten.add.Tensor(floor, aten._to_copy.default(inexact_across_zero, dtype=floor.dtype))


def integer_division_decompositions(ep) -> dict:
    """{aten.div.Tensor_mode: trunc_division_guarded} where ``ep`` divides integer tensors rounding toward zero, else {}:
    lower()'s decompose step adds it to its table then only, so that the table (and what docs/ops.md counts as
    decomposed) is unchanged for every other program."""
    for node in ep.graph.nodes:
        if (node.op == "call_function" and node.target is aten.div.Tensor_mode
                and node.kwargs.get("rounding_mode") == "trunc"
                and all(is_integer_node(arg) for arg in node.args[:2])):
            return {aten.div.Tensor_mode: trunc_division_guarded}
    return {}
