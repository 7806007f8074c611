"""Symbolic sizes of the original program, made traceable in the rewritten one.

Rules and layout.py read the original node's value (``node.meta["val"]``: its sizes, strides, storage
offset) to shape their results. Its SymInts are the original graph's objects, unknown to the make_fx
trace of the rewrite. make_fx then rebuilds each from its sympy expression with a table that is
incomplete (no ``PowByNatural``: ``s27**2 is not tracked with proxy``, the stride of a DFT matrix) and
that emits targets torch.export's verifier rejects (``_nary_sym_min`` for ``Min``).

`track_symbols` registers such SymInts first: each is computed from SymInts the trace already knows
(the program inputs' sizes) by interpreting its expression with torch's PythonReferenceAnalysis, whose
Python arithmetic on traced SymInts records only ops the verifier allows (``operator.*``,
``torch.sym_min``/``sym_max``/``sym_not``/``sym_float``, ``math.floor``/``ceil``...). A symbol the trace
does not know (an unbacked size of the original graph) is left to make_fx, as before.

Torch internals used, on 2.11 to 2.13 (imported from torch_internals.py): the tracer's ``symnode_tracker`` and ``sympy_expr_tracker``
(what make_fx knows), ``set_proxy_slot`` and ``torch.utils._sympy.interp.sympy_interp``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import operator

import torch
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.torch_internals import (
    PythonReferenceAnalysis,
    ValueRanges,
    bound_sympy,
    get_proxy_slot,
    set_proxy_slot,
    sympy_interp,
)

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _symbols_in(value) -> list:
    """The SymInt/SymFloat/SymBool of a meta value: scalars, and a tensor's sizes, strides and offset."""
    found = []
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            found += [*leaf.shape, *leaf.stride(), leaf.storage_offset()]
        else:
            found.append(leaf)
    return [s for s in found if isinstance(s, _SYM_TYPES) and s.node.is_symbolic()]


def _known(tracer, symbol) -> bool:
    return symbol in tracer.symnode_tracker or symbol.node.expr in tracer.sympy_expr_tracker


class _TracedArithmetic(PythonReferenceAnalysis):
    """PythonReferenceAnalysis, with Python arithmetic also for the handlers it inherits from
    ReferenceAnalysis that build sympy expressions (torch 2.11–2.13: int_truediv, reciprocal, square,
    trunc_to_int), so that every result is a traced SymInt/SymFloat/SymBool."""

    @staticmethod
    def int_truediv(a, b):
        return a / b

    @staticmethod
    def reciprocal(x):
        return 1.0 / x

    @staticmethod
    def square(x):
        return x * x

    @staticmethod
    def trunc_to_int(x, dtype):
        return math.trunc(x)

    @staticmethod
    def expr_cond_pair(expr, cond):  # torch 2.11 writes sym_ite as a sympy Piecewise
        return expr, cond

    @staticmethod
    def piecewise(*pairs):
        result = pairs[-1][0]
        for expr, cond in reversed(pairs[:-1]):
            result = torch.sym_ite(cond, expr, result)
        return result


def track_symbols(value, tracer) -> None:
    """Make every symbolic size in `value` (a meta value) traceable in `tracer`: see the module docstring."""

    for symbol in _symbols_in(value):
        if _known(tracer, symbol):
            continue
        expr = symbol.node.expr
        known = {s: tracer.sympy_expr_tracker.get(s) for s in expr.free_symbols}
        if any(v is None for v in known.values()):
            continue  # a symbol this trace never saw: nothing to compute it from
        env = {s: v.value for s, v in known.items()}
        try:
            computed = sympy_interp(_TracedArithmetic, env, expr)
        except (AttributeError, NotImplementedError, TypeError):  # a function with no handler: leave it to make_fx
            continue
        if isinstance(computed, _SYM_TYPES):
            set_proxy_slot(symbol, tracer, get_proxy_slot(computed, tracer))


# operator.* functions that take two operands, which make_fx writes with as many as sympy's n-ary node has
_BINARY = (operator.mul, operator.add, operator.and_, operator.or_)


def binary_arithmetic(gm: torch.fx.GraphModule) -> None:
    """Rewrite each n-ary ``operator.mul`` (``add``, ``and_``, ``or_``) node of ``gm`` and its subgraphs as a chain of
    binary ones. Why: a size that ``track_symbols`` leaves to make_fx is rebuilt from its sympy expression with
    ``operator.mul`` for ``sympy.Mul`` (torch 2.13, ``proxy_tensor._sympy_handlers``), whatever its number of
    factors: a Fourier neural operator's ``torch.zeros(B, C, H, W // 2 + 1)`` over dynamic H and W traced
    ``operator.mul(32, sym_max_6, sym_sum)``, and Inductor's re-trace failed with ``TypeError: mul expected 2
    arguments, got 3``."""
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in list(module.graph.nodes):
            if node.op != "call_function" or node.target not in _BINARY or len(node.args) <= 2 or node.kwargs:
                continue
            with module.graph.inserting_before(node):
                acc, value = node.args[0], _value_of(node.args[0])
                for operand in node.args[1:-1]:
                    known = value is not None and _value_of(operand) is not None
                    value = node.target(value, _value_of(operand)) if known else None
                    acc = module.graph.call_function(node.target, (acc, operand))
                    acc.meta.update({**node.meta, "val": value})
            node.args = (acc, node.args[-1])
        module.recompile()


def _value_of(arg):
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


# The program's ranges of its input sizes (ep.range_constraints) while it is rewritten.
_RANGES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("complex_to_real_ranges", default=None)


@contextlib.contextmanager
def user_ranges(range_constraints: dict):
    """While active, `lowest_value` reads the sizes' ranges from `range_constraints` (the program's Dims)."""
    token = _RANGES.set(dict(range_constraints))
    try:
        yield
    finally:
        _RANGES.reset(token)


def lowest_value(size: torch.SymInt):
    """The least value a symbolic size takes over the program's Dim ranges; a symbol without one counts from 0.
    Why not the shape env's own bound: it assumes every backed size is at least 2 (the trace's 0/1
    specialization), where `Dim("bins", min=1)` lets the call pass 1."""
    ranges = _RANGES.get() or {}
    expr = size.node.expr
    known = {s: ranges.get(s, ValueRanges(0, size.node.shape_env.bound_sympy(s).upper)) for s in expr.free_symbols}
    return bound_sympy(expr, known).lower
