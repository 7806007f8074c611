"""Unbacked sizes (the values of ``.item()``, ``nonzero``, ``torch._check_tensor_all``) carried through every
step that re-traces the program: run_decompositions, the passes, whole-tensor writes.

torch 2.11's export writes the int of a data-dependent bool (``torch._check_tensor_all(t)``: ``_is_all_true``,
``item``, then the bool as 0 or 1, asserted equal to 1) as a call of
``torch.fx.experimental.symbolic_shapes.cast_symbool_to_symint_guardless``. That function builds its SymInt
(``Piecewise((1, Eq(u2, 1)), (0, True))``) straight from the ShapeEnv, outside the tracer, so re-tracing the
graph (make_fx in run_decompositions) cannot follow it: the next sym op on it fails with ``RuntimeError:
Piecewise(...) is not tracked with proxy for <..._ModuleStackTracer...>`` while executing
``operator.eq(cast_symbool_to_symint_guardless, 1)``. Every transformers vision-language model hits it
(the image-token check before masked_scatter). torch 2.13 writes the same cast as ``torch.sym_ite(b, 1, 0)``,
a sym op the tracer records; ``sym_ite_for_symbool_casts`` rewrites 2.11's graph to that form once, after
export, so that every later re-trace sees only traced sym ops.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import cast_symbool_to_symint_guardless


def sym_ite_for_symbool_casts(ep: ExportedProgram) -> int:
    """Rewrite, in place, every ``cast_symbool_to_symint_guardless(b)`` of ep's graph (its submodules too)
    as ``torch.sym_ite(b, 1, 0)``, the same value. Returns how many it rewrote."""
    changed = 0
    for module in ep.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        casts = module.graph.find_nodes(op="call_function", target=cast_symbool_to_symint_guardless)
        for node in casts:
            node.target, node.args = torch.sym_ite, (node.args[0], 1, 0)
        if casts:
            module.recompile()
            changed += len(casts)
    return changed
