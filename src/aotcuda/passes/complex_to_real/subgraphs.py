"""Higher-order ops with subgraphs (torch.cond, while_loop, scan, map): their subgraphs rewritten like the program.

Export represents such an op as get_attr nodes naming GraphModule submodules plus the op's call with
its operands, e.g. `cond(pred, true_graph_0, false_graph_0, (z, y, b_w))`. A subgraph that reads or
writes complex values is rewritten by the same interpreter and rules as the program: its complex
placeholders arrive as pairs and its complex outputs leave as pairs. The rewritten subgraph is handed
to the op as a plain function of real tensors; make_fx traces it into the new submodule when it traces
the op's call (torch's own `trace_cond`, `trace_while_loop`, …), which also sets the op's meta["val"].
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from aotcuda.passes.complex_to_real.pair import Pair
from aotcuda.passes.complex_to_real.scan import holds_complex

# run_graph(gm, complex placeholder names, *real tensors) -> the graph's output(s), complex ones as Pair.
GraphRunner = Callable[..., tuple]


def complex_placeholder_names(gm: torch.fx.GraphModule) -> set[str]:
    return {p.name for p in gm.graph.find_nodes(op="placeholder") if holds_complex(p.meta.get("val"))}


def pair_function(gm: torch.fx.GraphModule, run_graph: GraphRunner) -> Callable[..., tuple]:
    """The subgraph `gm` as a function of real tensors: complex operands and results as their pairs."""
    complex_names = complex_placeholder_names(gm)

    def run(*tensors):
        outputs = run_graph(gm, complex_names, *tensors)
        if not isinstance(outputs, (tuple, list)):  # while_loop's cond_fn returns one boolean tensor
            return outputs.t if isinstance(outputs, Pair) else outputs
        return tuple(o.t if isinstance(o, Pair) else o for o in outputs)

    run.__name__ = f"{type(gm).__name__}_as_pairs"
    return run
