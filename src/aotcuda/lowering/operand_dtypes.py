"""Matrix products whose two operands have different dtypes, refused before compiling.

Eager refuses ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``addmv``, ``mv`` and ``dot`` of two operands of
different dtypes (``mat1 and mat2 must have the same dtype, but got Long and Float``: an nn.Linear called with
token ids, or with a float64 array from NumPy), but torch.export traces them (their meta functions do not check
it), and Inductor compiles them: the package then failed at every call with the product's ATen kernel's
``API call failed at ....wrapper.cpp``. So the decomposed program is checked here, and such a product is refused
with eager's words, the model's line and the fix, before a compile of a minute or more.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from aotcuda.lowering.fallbacks import relative_source_line

# {op packet: the positions of the two operands multiplied} (a bias, addmm's self, may differ on some devices)
_PRODUCTS = {"mm": (0, 1), "bmm": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2), "addmv": (1, 2), "mv": (0, 1),
             "dot": (0, 1)}


def _dtype(value) -> torch.dtype | None:
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
    return value.dtype if isinstance(value, torch.Tensor) else None


def check_product_dtypes(ep: ExportedProgram) -> None:
    """Raise RuntimeError naming the first matrix product of ``ep`` (decomposed: nn.Linear is an addmm) whose two
    operands have different dtypes, which eager refuses, with the model's line and the fix."""
    for node in ep.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        op = node.target._schema.name.split("::")[-1]
        positions = _PRODUCTS.get(op) if node.target.namespace == "aten" else None
        if positions is None or len(node.args) <= max(positions):
            continue
        first, second = (_dtype(node.args[i]) for i in positions)
        if first is None or second is None or first == second:
            continue
        line = relative_source_line(node)
        where = f" at {line}" if line else ""
        weights = [(name, dtype) for name, dtype in (_state_name(ep, node.args[i]) for i in positions) if name]
        computes = weights[0][1] if len(weights) == 1 and weights[0][1].is_floating_point else torch.float32
        example = (f"here {computes}: {weights[0][0]} is {computes}, so e.g. x.to({computes})" if computes is not
                   torch.float32 else f"e.g. x.to({computes}) for a {str(computes).removeprefix('torch.')} model")
        raise RuntimeError(
            f"the example call multiplies {first} by {second} in aten.{op}"
            f"{where}, which eager refuses (mat1 and mat2 must have the same dtype), and the package would fail at "
            f"every call; torch.export does not check it. Pass example inputs of the dtype the model computes in "
            f"({example}; token ids go through an nn.Embedding first), or cast them in forward, then lower again.")


_SAME_VALUES = {"permute", "t", "transpose", "view", "reshape", "expand", "unsqueeze", "alias", "clone", "contiguous"}


def _state_name(ep: ExportedProgram, operand) -> tuple[str | None, torch.dtype | None]:
    """(the parameter or buffer ``operand`` reads, through views such as nn.Linear's weight.t(); its dtype), or
    (None, None) where it reads none: what tells the dtype the model computes in from the example's."""
    while isinstance(operand, torch.fx.Node) and operand.op == "call_function" and operand.args and \
            getattr(operand.target, "_schema", None) is not None and \
            operand.target._schema.name.split("::")[-1] in _SAME_VALUES:
        operand = operand.args[0]
    if not isinstance(operand, torch.fx.Node) or operand.op != "placeholder":
        return None, None
    signature = ep.graph_signature
    name = signature.inputs_to_parameters.get(operand.name) or signature.inputs_to_buffers.get(operand.name)
    return (name, _dtype(operand)) if name else (None, None)
