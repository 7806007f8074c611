"""The range torch.export gives a value the model reads from an input with ``.item()``: checked before the call.

``sp = start_pos.item(); torch._check(sp + s <= 128)`` makes an unbacked symbol (u0) whose range torch.export derives
from the model's torch._check calls and the dims' ranges (``ep.range_constraints``), and the generated code checks
that range itself at every call (``if (!(u3 <= 126L)) throw``, in the wrapper's C++). So the range is real in the
compiled program, not only in export's record: a value outside it cannot run. Refused there, the call printed the
generated code's bare ``Error: Expected u3 <= 126 but received 127`` on stderr, in symbols the user never wrote and
naming no input. Recorded as an ``index_ranges`` entry of the input (``"item": true``), the runtime checks it before
the call (``runtime/index_ranges.py``), names the input and the range, and `aotcuda inspect` lists it.

Why the range may be narrower than the model's own check: torch.export traces every dynamic dim as at least 2 (its
0/1 specialization), also where the Dim's min is 1, so ``sp + s <= 128`` gives ``sp <= 126``, though at ``s = 1`` the
model allows 127. The reason says so where a check ties the value to such a dim.
"""

from __future__ import annotations

import torch

from aotcuda.lowering.fallbacks import relative_source_line

_READS = ("aten._local_scalar_dense.default", "aten.item.default")
_ASSERTS = ("aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default")


def item_value_ranges(ep) -> dict[str, list[dict]]:
    """{user input name: [{"min", "max", "reason", "item": True}]}: the range torch.export gave each integer
    value read from a user input with ``.item()`` (the input itself, not a value computed from it), where one side
    of it is finite."""
    from aotcuda.passes.complex_to_real.boundary import user_input_names

    names = {name for name in user_input_names(ep.graph_signature) if name is not None}
    assumed = _dims_assumed_at_least_2(ep)
    found: dict[str, list[dict]] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function" or str(node.target) not in _READS:
            continue
        source = node.args[0] if node.args else None
        if not isinstance(source, torch.fx.Node) or source.op != "placeholder" or source.name not in names:
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.SymInt) or not isinstance(value.node.expr, _symbol_type()):
            continue
        symbol = value.node.expr
        bounds = ep.range_constraints.get(symbol)
        if bounds is None:
            continue
        low, high = _finite(bounds.lower), _finite(bounds.upper)
        if low is None and high is None:
            continue
        where = relative_source_line(node)
        reason = (f"the range torch.export derived from the model's torch._check calls for {source.name}.item()"
                  + (f" ({where})" if where else "") + ", which the compiled program checks itself")
        tied = sorted(str(dim) for dim in _tied_dims(ep, symbol) if dim in assumed)
        if tied:
            dims = ", ".join(tied)
            reason += (f". torch.export took {dims} as at least 2 there (its 0/1 specialization), though the Dim "
                       f"allows 1, so at {dims} = 1 this range is narrower than the model's own check: lower the "
                       f"model again with that dim static at 1 for such calls (a decode step of one token)")
        found.setdefault(source.name, []).append({"min": low, "max": high, "reason": reason, "item": True})
        for entry in _checks_with_sizes(ep, symbol, source.name, where):
            if not any(entry["min"] == known["min"] and entry["max"] == known["max"] for known in found[source.name]):
                found[source.name].append(entry)
    return found


def _checks_with_sizes(ep, symbol, name: str, where: str | None) -> list[dict]:
    """The model's own checks of the value against the input sizes (``sp + s <= 128``), each solved for the value
    (``max: 128 - s27``), where it is one plus or minus the value and a sum of size symbols: the generated code checks
    them too, and refused a call with its bare ``Error: Expected s27 + u3 <= 128 but received 8`` on stderr."""
    import sympy

    from aotcuda.runtime.shape_expressions import shape_expression

    sizes = {key for key in ep.range_constraints if str(key).startswith("s")}
    entries = []
    for node in ep.graph.nodes:
        if node.op != "call_function" or str(node.target) != _ASSERTS[0] or not node.args:
            continue
        condition = node.args[0]
        value = condition.meta.get("val") if isinstance(condition, torch.fx.Node) else None
        expr = getattr(getattr(value, "node", None), "expr", None)
        if not isinstance(expr, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)) or symbol not in expr.free_symbols:
            continue
        if not (expr.free_symbols - {symbol}) or not (expr.free_symbols - {symbol}) <= sizes:
            continue  # a check of the value alone is its range, above
        difference = sympy.expand(expr.lhs - expr.rhs)  # the check: difference <= 0 (or <, >=, >)
        slope = difference.coeff(symbol)
        rest = sympy.expand(difference - slope * symbol)
        if slope not in (1, -1) or symbol in rest.free_symbols:
            continue
        at_most = isinstance(expr, (sympy.Le, sympy.Lt)) == (slope == 1)  # the check bounds the value from above
        strict = isinstance(expr, (sympy.Lt, sympy.Gt))
        bound = sympy.expand(-rest * slope) + ((-1 if at_most else 1) if strict else 0)
        try:
            shape_expression(str(bound))
        except ValueError:
            continue  # outside the grammar the runtime reads: left to the generated code
        shown = str(expr.subs(symbol, sympy.Symbol(f"{name}.item()")))
        entries.append({"min": None if at_most else {"expr": str(bound)}, "max": {"expr": str(bound)} if at_most else None,
                        "reason": f"the model's own check {shown}" + (f" ({where})" if where else "")
                        + ", at this call's sizes", "item": True})
    return entries


def _symbol_type():
    import sympy

    return sympy.Symbol


def _finite(bound) -> int | None:
    try:
        return int(bound) if bound.is_finite else None
    except (TypeError, AttributeError, ValueError):
        return None


def _dims_assumed_at_least_2(ep) -> set:
    """The input size symbols whose exported range starts below 2: torch.export traced them as at least 2."""
    assumed = set()
    for symbol, bounds in ep.range_constraints.items():
        low = _finite(bounds.lower)
        if str(symbol).startswith("s") and low is not None and low < 2:
            assumed.add(symbol)
    return assumed


def _tied_dims(ep, symbol) -> set:
    """The other symbols of every runtime assert of the graph that involves ``symbol`` (``u0 + s27 <= 128``)."""
    tied = set()
    for node in ep.graph.nodes:
        if node.op != "call_function" or str(node.target) not in _ASSERTS or not node.args:
            continue
        condition = node.args[0]
        value = condition.meta.get("val") if isinstance(condition, torch.fx.Node) else None
        expr = getattr(getattr(value, "node", None), "expr", None)
        free = getattr(expr, "free_symbols", set())
        if symbol in free:
            tied |= free - {symbol}
    return tied
