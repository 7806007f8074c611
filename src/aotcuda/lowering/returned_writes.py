"""Which of forward's outputs are its own inputs, written in place or not, read before the decompositions.

Eager's ``x.add_(1); return x`` (and ``return x.add_(1)``, ``a = z.mul_(2); z.add_(1); return a``) hands back the
caller's ``x`` itself, holding every write of the call. The program Inductor compiles is functional: the write is a
new value (``add``) that the program copies into ``x`` and also returns, so the output slot held another tensor (of
the right values), and the signature could not mark it: after the decompositions that value may also be another
output's node. The exported program still holds the in-place ops,
so an output is read back there through each op that returns the tensor it writes (its schema's ``Tensor(a!)``) to a
user input's placeholder; the signature marks those outputs ``"returns_input"`` (``aotcuda.lowering.signature``), and
a call hands the caller's own tensor back there (``aotcuda.runtime.returned_inputs``).
"""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from aotcuda.passes.complex_to_real.boundary import user_input_names


def _written_argument(node: torch.fx.Node) -> torch.fx.Node | None:
    """The argument an op writes and returns as its result (``add_``'s self, an ``out=`` tensor), else None.

    Ops that change a tensor's metadata in place (``t_``, ``unsqueeze_``: torch's ``inplace_view`` tag) are left
    out: their result is the caller's tensor with another shape, which no call can hand back as exported."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    if schema is None or len(schema.returns) != 1 or torch.Tag.inplace_view in getattr(node.target, "tags", ()):
        return None
    returned = schema.returns[0].alias_info
    if returned is None or not returned.is_write:
        return None
    given = {**dict(zip((a.name for a in schema.arguments), node.args)), **node.kwargs}
    for argument in schema.arguments:
        alias = argument.alias_info
        if alias is not None and alias.is_write and alias.before_set == returned.before_set:
            value = given.get(argument.name)
            return value if isinstance(value, torch.fx.Node) else None
    return None


# Higher-order ops that call their submodule once on the operands after it, returning its outputs as they are:
# export makes one of each ``with torch.no_grad():`` / ``torch.autocast`` block (``cache.add_(x)`` in one, the usual
# KV-cache write, returns ``getitem(block, k)``: review, 2026-12-07, such an output was left unmarked).
_BLOCKS = tuple(op for op in (getattr(torch.ops.higher_order, name, None)
                              for name in ("wrap_with_set_grad_enabled", "wrap_with_autocast")) if op is not None)


def _block_operand(owner: torch.fx.GraphModule, node: torch.fx.Node) -> torch.fx.Node | None:
    """For ``getitem(block, k)`` of a block of ``_BLOCKS``: the block's operand that output k of its submodule is, as
    it is or written in place; else None."""
    if not (node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node)
            and node.args[0].op == "call_function" and node.args[0].target in _BLOCKS):
        return None
    block, place = node.args[0], node.args[1]
    at = next((i for i, a in enumerate(block.args) if isinstance(a, torch.fx.Node) and a.op == "get_attr"), None)
    submodule = getattr(owner, block.args[at].target, None) if at is not None else None
    if not isinstance(submodule, torch.fx.GraphModule) or not isinstance(place, int):
        return None
    output = next(n for n in reversed(submodule.graph.nodes) if n.op == "output")
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    if not 0 <= place < len(results):
        return None
    inner = _traced_to_placeholder(submodule, results[place])
    if inner is None:
        return None
    placeholders = [n for n in submodule.graph.nodes if n.op == "placeholder"]
    operands = block.args[at + 1:]
    index = placeholders.index(inner)
    return operands[index] if index < len(operands) and isinstance(operands[index], torch.fx.Node) else None


def _traced_to_placeholder(owner: torch.fx.GraphModule, node) -> torch.fx.Node | None:
    """The placeholder of ``owner``'s graph that ``node`` is, through ops that write and return their argument and
    through ``_BLOCKS``; else None."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        node = _block_operand(owner, node) if node.target is operator.getitem else _written_argument(node)
    return node if isinstance(node, torch.fx.Node) and node.op == "placeholder" else None


def returned_user_inputs(ep: ExportedProgram) -> dict[int, int]:
    """{place among forward's outputs: place among its user inputs} for each output that is a user input itself,
    as eager returns it: the input's placeholder, or the result of in-place ops on it. Read on the exported program,
    before ``run_decompositions`` makes the writes functional; the places hold through the decompositions and
    passes, which keep forward's inputs and outputs in order."""
    inputs = {name: place for place, name in enumerate(user_input_names(ep.graph_signature)) if name is not None}
    output = next(node for node in reversed(ep.graph.nodes) if node.op == "output")
    held = list(output.args[0])
    user_outputs = held[len(held) - len(ep.graph_signature.user_outputs):]
    found = {}
    for place, node in enumerate(user_outputs):
        node = _traced_to_placeholder(ep.graph_module, node)
        if node is not None and node.name in inputs:
            found[place] = inputs[node.name]
    return found
