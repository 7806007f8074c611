"""What Inductor does with an ``aten.view`` of the program before it lowers anything, read on the ExportedProgram.

Why: every op on a complex tensor is a fallback kernel (Inductor generates no code for complex values), and the
fallback-kernel checks name those from the program's nodes (``fallbacks.complex_value_nodes``, and before the
compile ``known_fallbacks.complex_fallback_kernels``). A view is not lowered as written: Inductor first drops a view
to the shape its operand already has (``remove_noop_ops`` of the joint graph, ``fx_passes/post_grad.py``), then
turns every other ``aten.view`` into ``aten.reshape`` (``compile_fx``'s ``view_to_reshape``, "unconditionally").
A complex ``F.bilinear`` (``aten._trilinear``, which has no rule) showed both (fix39, torch 2.13): its views of the
inputs, ``view(z, [-1, 4])``, run as ``aoti_torch_cpu_reshape``, which the check before the compile did not name,
and its view of the result to the shape it has is called by no code, yet was listed after the compile as
``aten.view.default on complex values``. torch 2.11 has both passes alike.
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

aten = torch.ops.aten


def as_inductor_lowers(node: torch.fx.Node):
    """The op Inductor lowers for ``node``: None for a view it drops, ``aten.reshape.default`` for any other
    ``aten.view.default``, else the node's own op."""
    if node.target is not aten.view.default:
        return node.target
    return None if dropped_view(node) else aten.reshape.default


def dropped_view(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an ``aten.view.default`` that Inductor's ``remove_noop_ops`` drops: its size is, as
    written (a dim of a dynamic size is its symbol: the node's fake value, as ``get_fake_args_kwargs`` reads it), the
    shape its operand has, with the same strides, dtype, device and lazy bits (``same_meta``). torch's exception for
    a view that would make an output its input (``node in output_node.args``) compares the node with the output node's
    one argument, the tuple of outputs, so it keeps none of a top-level graph's views: neither does this (review39a:
    an output ``y.view(2, 3)`` of a complex ``y`` was listed, and no code called it). Anything it cannot read (a size
    without a fake value) is not dropped."""
    if node.target is not aten.view.default or len(node.args) < 2 or not isinstance(node.args[0], torch.fx.Node):
        return False
    source, size = node.args[0], node.args[1]
    before, after = source.meta.get("val"), node.meta.get("val")
    if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)
            and isinstance(size, (list, tuple)) and len(size) == before.ndim):
        return False
    size = [dim.meta.get("val") if isinstance(dim, torch.fx.Node) else dim for dim in size]
    if not all(isinstance(dim, (int, torch.SymInt)) for dim in size):
        return False
    try:
        return (statically_known_true(sym_eq(tuple(before.shape), tuple(size)))
                and statically_known_true(sym_eq(tuple(after.shape), tuple(before.shape)))
                and statically_known_true(sym_eq(after.stride(), before.stride()))
                and (after.dtype, after.device, after.layout) == (before.dtype, before.device, before.layout)
                and (after.is_conj(), after.is_neg()) == (before.is_conj(), before.is_neg()))
    except Exception:  # noqa: BLE001 - a prediction: a comparison torch's symbols refuse keeps the view listed
        return False
