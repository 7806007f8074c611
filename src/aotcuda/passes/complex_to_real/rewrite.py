"""ReplaceComplexWithRealPass: scan → decide → rewrite every complex op of an ExportedProgram as real math.

How the rewrite works: the program's graph runs in a torch.fx.Interpreter on fake values, with every
complex value carried as a `Pair` (its view_as_real form). Nodes that read or write a complex value call
their rule; the others run their own op. make_fx traces that run, so the new graph holds exactly the
ops the rules and the untouched nodes called, each with meta["val"] (SymInts stay symbolic: the
program's own fake tensors and shape env are reused) and, through preserve_node_meta, the stack trace
of the node it replaces. One pass over the graph: linear time.
"""

from __future__ import annotations

import logging

import torch
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes.complex_to_real.pair import Pair, real_dtype
from aotcuda.passes.complex_to_real.program import complex_state_names, rebuild_program
from aotcuda.passes.complex_to_real.scan import Plan, Refusal, holds_complex, program_has_complex, scan

logger = logging.getLogger("aotcuda")


class ReplaceComplexWithRealPass:
    """Rewrite every op on complex tensors of an ExportedProgram as real math on view_as_real pairs.

    A complex tensor of shape S becomes a real tensor of shape S + [2] (complex64 → float32,
    complex128 → float64); view_as_complex / view_as_real become no-ops. Complex parameters, buffers and
    constants become real pair tensors under the same names.

    Args:
        strict: raise instead of logging when the program cannot be rewritten.

    Calling the pass returns a new ExportedProgram and leaves its argument unchanged. A program with no
    complex value is returned as it is. A program with an op the pass cannot rewrite (no rule, or one of
    the cases refused in scan.REFUSAL_CHECKS) is returned as it is, after one line on the "aotcuda"
    logger naming the op and the user's source line.

    Raises:
        UnsupportedComplexOpError: with strict=True, for a program that cannot be rewritten.
    """

    def __init__(self, strict: bool = False):
        self.strict = strict

    def __call__(self, ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
        if not program_has_complex(ep):
            return ep
        decision = scan(ep)
        if isinstance(decision, Refusal):
            if self.strict:
                raise UnsupportedComplexOpError(decision.op, decision.node, decision.source, decision.reason)
            logger.warning(decision.log_line())
            return ep
        return rewrite(ep, decision)


class _PairInterpreter(torch.fx.Interpreter):
    """Runs the original graph with complex values as Pairs, calling the plan's rule for complex nodes."""

    def __init__(self, gm: torch.fx.GraphModule, plan: Plan, complex_placeholders: set[str]):
        super().__init__(gm, garbage_collect_values=True)
        self.plan = plan
        self.complex_placeholders = complex_placeholders

    def run_node(self, n: torch.fx.Node):
        if n.op == "placeholder" and n.name in self.complex_placeholders:
            return Pair(super().run_node(n))
        rule = self.plan.rules.get(n)
        if rule is None:
            return super().run_node(n)
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            return rule.fn(n.meta.get("val"), *args, **kwargs)


def _pair_fake(value: torch.Tensor) -> torch.Tensor:
    """A fresh fake real tensor of shape S + [2] for a fake complex tensor of shape S, in its fake mode."""
    with value.fake_mode:
        return torch.empty([*value.shape, 2], dtype=real_dtype(value.dtype), device=value.device)


def rewrite(ep: torch.export.ExportedProgram, plan: Plan) -> torch.export.ExportedProgram:
    """Trace the program through the rules into a new graph and rebuild the ExportedProgram around it."""
    placeholders = list(ep.graph.find_nodes(op="placeholder"))
    complex_placeholders = {p.name for p in placeholders if holds_complex(p.meta.get("val"))}
    if complex_placeholders - complex_state_names(ep):
        raise AssertionError("scan let a complex user input through")  # scan refuses these
    fake_args = [_pair_fake(p.meta["val"]) if p.name in complex_placeholders else p.meta["val"]
                 for p in placeholders]

    def run(*args):
        return _PairInterpreter(ep.graph_module, plan, complex_placeholders).run(*args)

    with fx_traceback.preserve_node_meta():
        gm = make_fx(run, tracing_mode="symbolic", _allow_non_fake_inputs=True)(*fake_args)
    return rebuild_program(ep, gm, complex_placeholders)
