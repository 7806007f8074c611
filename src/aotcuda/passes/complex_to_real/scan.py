"""Scan and decide: find every node that reads or writes a complex value and check that all can be rewritten.

The pass changes a program only when every such node has a rule. The cases refused on purpose are
checked in `refusal_checks` below, one function each, so that a later change can lift them one at a
time.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re

import torch
from torch.export.graph_signature import OutputKind
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real import no_rule
from aotcuda.passes.complex_to_real.half import runs_in_float32
from aotcuda.passes.complex_to_real.registry import Rule, op_name, rule_for


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a program is left as it is: the op, its node, the user's source line, the reason."""

    op: str
    node: str
    source: str
    reason: str

    def log_line(self) -> str:
        return (f"ReplaceComplexWithRealPass left the program unchanged: cannot rewrite {self.op} "
                f"(node {self.node}, at {self.source or 'an unknown source line'}): {self.reason}")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to rewrite: the rule of every call_function node that reads or writes a complex value, and the
    nodes whose rule runs in float32 (complex32 values: half.py), applied by the rewrite."""

    rules: dict[torch.fx.Node, Rule]
    in_float32: frozenset[torch.fx.Node] = frozenset()


def holds_complex(value: object) -> bool:
    """True if a meta["val"] (a fake tensor, or a list/tuple of them) holds a complex tensor."""
    if isinstance(value, torch.Tensor):
        return value.dtype.is_complex
    if isinstance(value, (list, tuple)):
        return any(holds_complex(v) for v in value)
    return False


def _has_complex_literal(node: torch.fx.Node) -> bool:
    """A Python complex scalar or a complex dtype among the node's arguments (e.g. `x * 1j`)."""
    leaves = pytree.tree_leaves((node.args, node.kwargs))
    return any(isinstance(a, complex) or (isinstance(a, torch.dtype) and a.is_complex) for a in leaves)


def touches_complex(node: torch.fx.Node) -> bool:
    """Whether the node reads or writes a complex value."""
    if holds_complex(node.meta.get("val")) or _has_complex_literal(node):
        return True
    return any(holds_complex(arg.meta.get("val")) for arg in node.all_input_nodes)


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


def _is_user_frame(filename: str) -> bool:
    """Frames of generated code ("<eval_with_key>") and of torch itself are not the user's source."""
    return not filename.startswith("<") and f"{os.sep}torch{os.sep}" not in filename


def source_location(node: torch.fx.Node) -> str:
    """Where in the user's source the node comes from, "file:line in function: code": the innermost user
    frame of its stack trace, or "" (what a refusal names; fallbacks.relative_source_line is the kernel list's)."""
    frame = innermost_frame(node.meta.get("stack_trace"))
    if frame is None:
        return ""
    file, line, function, code = frame
    where = f"{file}:{line} in {function}"
    return f"{where}: {code}" if code else where


def innermost_frame(stack_trace: str | None, user_only: bool = False) -> tuple[str, int, str, str] | None:
    """(file, line, function, code) of the innermost user frame of a node's meta["stack_trace"] (the innermost
    frame of torch itself where the trace has no other, unless ``user_only``), or None."""
    lines = (stack_trace or "").rstrip().splitlines()
    frames = [(i, m) for i, line in enumerate(lines) if (m := _FRAME.search(line))]
    user_frames = [f for f in frames if _is_user_frame(f[1]["file"])] or ([] if user_only else frames)
    if not user_frames:
        return None
    i, match = user_frames[-1]
    code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else ""
    return match["file"], int(match["line"]), match["func"], code


def _call_nodes(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "call_function"]


def _refuse(node: torch.fx.Node, reason: str, op: str | None = None) -> Refusal:
    return Refusal(op or _describe_op(node), node.name, source_location(node), reason)


def _describe_op(node: torch.fx.Node) -> str:
    if node.op == "call_function":
        return op_name(node.target)
    return f"{node.op} {node.target}"


# ---- the refused cases, one check each --------------------------------------------------------------


def _refuse_mutated_complex_inputs(ep: torch.export.ExportedProgram) -> Refusal | None:
    """Complex program inputs mutated in place (return the new value instead; complex buffers may be mutated)."""
    output = ep.graph.output_node()
    for spec, arg in zip(ep.graph_signature.output_specs, output.args[0]):
        if spec.kind == OutputKind.USER_INPUT_MUTATION and isinstance(arg, torch.fx.Node) \
                and holds_complex(arg.meta.get("val")):
            return _refuse(arg, f"the complex program input {spec.target} is mutated in place; mutated complex "
                                "program inputs are not supported: return the new value instead")
    return None


def _subgraphs(node: torch.fx.Node) -> list[torch.fx.GraphModule]:
    module = node.graph.owning_module
    return [getattr(module, a.target) for a in node.all_input_nodes
            if a.op == "get_attr" and isinstance(getattr(module, a.target, None), torch.fx.GraphModule)]


def _graph_has_complex(gm: torch.fx.GraphModule) -> bool:
    """Whether a graph, or any subgraph nested in it, holds a complex value."""
    return any(holds_complex(n.meta.get("val")) or (n.op == "call_function" and _has_complex_literal(n))
               for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes)


def _reads_or_writes_complex(node: torch.fx.Node) -> bool:
    """touches_complex, or for a higher-order op: complex values anywhere in its subgraphs."""
    return touches_complex(node) or any(map(_graph_has_complex, _subgraphs(node)))


def _refuse_complex_in_higher_order_ops(ep: torch.export.ExportedProgram) -> Refusal | None:
    """Complex values inside the subgraphs of higher-order ops other than cond, while_loop, scan and map."""
    for node in _call_nodes_deep(ep.graph_module):
        if not isinstance(node.target, torch._ops.HigherOrderOperator) or rule_for(node.target) is not None:
            continue
        if _reads_or_writes_complex(node):
            name = node.target.name()
            return _refuse(node, f"complex values inside {name} subgraphs are not supported (no rule "
                                 "rewrites this higher-order op)", op=f"torch.ops.higher_order.{name}")
    return None


REFUSAL_CHECKS = (
    _refuse_mutated_complex_inputs,
    _refuse_complex_in_higher_order_ops,
)


# ---- the scan ------------------------------------------------------------------------------------------

# Python-level ops that pass values through unchanged: a Pair flows through them as it is.
PASS_THROUGH = (operator.getitem,)


def program_has_complex(ep: torch.export.ExportedProgram) -> bool:
    """Whether any graph of the program (higher-order-op subgraphs included) holds a complex value."""
    return _graph_has_complex(ep.graph_module)


def _call_nodes_deep(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The call_function nodes of a graph and, after each higher-order op, those of its subgraphs."""
    nodes = []
    for node in _call_nodes(gm.graph):
        nodes.append(node)
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            for sub in _subgraphs(node):
                nodes.extend(_call_nodes_deep(sub))
    return nodes


def scan(ep: torch.export.ExportedProgram) -> Plan | Refusal:
    """Decide: the rules for every complex node, or the first reason the program cannot be rewritten."""
    for check in REFUSAL_CHECKS:
        refusal = check(ep)
        if refusal is not None:
            return refusal
    rules: dict[torch.fx.Node, Rule] = {}
    in_float32 = set()
    for node in _call_nodes_deep(ep.graph_module):
        if node.target in PASS_THROUGH or not _reads_or_writes_complex(node):
            continue
        rule = rule_for(node.target)
        if rule is None:
            return _refuse(node, no_rule.reason(node.target))
        reason = rule.refuses(node) if rule.refuses else None
        if reason:
            return _refuse(node, reason)
        rules[node] = rule
        if runs_in_float32(node, rule):  # complex32: in float32, as eager
            in_float32.add(node)
    return Plan(rules, frozenset(in_float32))
