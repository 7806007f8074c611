"""A tensor constant made inside a subgraph, passed in as an operand of the program instead.

Why: torch.export keeps a tensor constant made inside a torch.cond branch or a scan, map or while_loop body as a
``get_attr`` of that subgraph's own module, and ``run_decompositions`` then ends in torch's ``RuntimeError:
Attempting to use FunctionalTensor on its own`` (torch 2.13; break-new 35). ``scalar_constants`` rebuilds one of at
most ``MAX_SUBGRAPH_CONSTANT_RUNS`` runs of equal values from ``full`` nodes; a larger table (a ramp, a lookup table
of 300 values) was left, with a note asking the user to make it outside the subgraph and pass it in as an operand.

That is what this module does for them: the constant becomes a constant input of the program (a lifted constant, as
torch.export makes one read outside any subgraph), added as the last operand of the higher-order op that calls the
subgraph, and a new last placeholder of each subgraph the op calls with its operands (both branches of a cond, a
while_loop's condition and body), where the one that read it reads that placeholder; through each level for a
subgraph nested in another (a cond in a scan body); a flex_attention score_mod's table (a bias by position) becomes
one of its ``score_mod_other_buffers``. A subgraph called from more than one place, or by an op not in
``_OPERANDS`` (a flex_attention mask_mod, which block_mask carries), is left with the note.
"""

from __future__ import annotations

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

# higher-order op: (the index of its operands argument, the indices of the subgraphs that take those operands last)
_OPERANDS = {
    torch.ops.higher_order.cond: (3, (1, 2)),
    torch.ops.higher_order.while_loop: (3, (0, 1)),
    torch.ops.higher_order.scan: (3, (0,)),
    torch.ops.higher_order.map_impl: (2, (0,)),
    # flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options, score_mod_other_buffers,
    # mask_mod_other_buffers): score_mod's placeholders are (score, b, h, q_idx, kv_idx, *score_mod_other_buffers).
    # Its mask_mod sits inside block_mask, no argument of its own: a constant there keeps the note.
    torch.ops.higher_order.flex_attention: (7, (3,)),
}


def _caller(graph: torch.fx.Graph, module_name: str) -> torch.fx.Node | None:
    """The one higher-order op node of ``graph`` that calls its module's subgraph ``module_name`` with operands it
    takes as a tuple or list, or None."""
    calls = [node for node in graph.nodes if node.op == "call_function" and node.target in _OPERANDS
             and any(isinstance(arg, torch.fx.Node) and arg.op == "get_attr" and arg.target == module_name
                     for arg in node.args)]
    if len(calls) != 1:
        return None
    operands_at = _OPERANDS[calls[0].target][0]
    if operands_at >= len(calls[0].args) or not isinstance(calls[0].args[operands_at], (tuple, list)):
        return None  # another layout than the table's (another torch): the note stays
    return calls[0]


def _callers(ep: ExportedProgram, path: str) -> list[tuple[torch.fx.GraphModule, torch.fx.Node]] | None:
    """[(module, the op node of its graph that calls the next level)] from the program's own graph down to the
    subgraph at ``path`` ("true_graph_0.body_graph_0"), or None where a level has no single such caller."""
    levels, module = [], ep.graph_module
    for name in path.split("."):
        call = _caller(module.graph, name)
        if call is None:
            return None
        levels.append((module, call))
        module = getattr(module, name)
    return levels


def _fresh_name(ep: ExportedProgram, path: str, target: str) -> str:
    taken = set(ep.constants) | set(ep.state_dict) | {node.name for node in ep.graph.nodes}
    base = f"{path}_{target}".replace(".", "_")
    name, count = base, 0
    while name in taken:
        count += 1
        name = f"{base}_{count}"
    return name


def _last_placeholder(graph: torch.fx.Graph, name: str, value) -> torch.fx.Node:
    placeholders = graph.find_nodes(op="placeholder")
    first = next(iter(graph.nodes))
    where = graph.inserting_after(placeholders[-1]) if placeholders else graph.inserting_before(first)
    with where:
        node = graph.placeholder(name)
    node.meta["val"] = value
    return node


def _constant_input(ep: ExportedProgram, name: str, value: torch.Tensor, fake) -> torch.fx.Node:
    """A new constant input of ``ep`` (a lifted constant), before its user inputs."""
    top, specs = ep.graph, ep.graph_signature.input_specs
    placeholders = top.find_nodes(op="placeholder")
    first_user = next((index for index, spec in enumerate(specs) if spec.kind == InputKind.USER_INPUT), len(specs))
    where = top.inserting_before(placeholders[first_user]) if first_user < len(placeholders) else \
        top.inserting_after(placeholders[-1])
    with where:
        lifted = top.placeholder(name)
    lifted.meta["val"] = fake
    specs.insert(first_user, InputSpec(kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=name), target=name))
    ep.constants[name] = value
    return lifted


def lift_subgraph_constant(ep: ExportedProgram, path: str, node: torch.fx.Node, value: torch.Tensor) -> bool:
    """Make the constant ``value`` that the get_attr ``node`` of the subgraph at ``path`` reads a constant input of
    ``ep``, passed down to that subgraph as a last operand at each level (module docstring), in place; False (nothing
    changed) where a level is not called once by one of ``_OPERANDS``."""
    levels = _callers(ep, path)
    fake_mode = detect_fake_mode([p.meta.get("val") for p in ep.graph.find_nodes(op="placeholder")])
    if levels is None or fake_mode is None:
        return False
    name = _fresh_name(ep, path, str(node.target))
    fake = fake_mode.from_tensor(value, static_shapes=True)
    lifted = _constant_input(ep, name, value, fake)
    first_op = next(node for node in ep.graph.nodes if node.op != "placeholder")
    with ep.graph.inserting_before(first_op):  # a copy for the op, as torch.export passes a constant read outside it:
        passed = ep.graph.call_function(torch.ops.aten.lift_fresh_copy.default, (lifted,))  # Inductor's scan takes no
    passed.meta["val"] = fake  # constant as an operand ("Cannot access data pointer of Tensor")
    for depth, (module, call) in enumerate(levels):
        operands_at, subgraph_places = _OPERANDS[call.target]
        args = list(call.args)
        args[operands_at] = type(args[operands_at])([*args[operands_at], passed])
        call.args = tuple(args)
        called = path.split(".")[depth]
        for place in subgraph_places:
            subgraph = getattr(module, call.args[place].target)
            added = _last_placeholder(subgraph.graph, name, fake)
            if call.args[place].target == called:
                passed = added  # the next level passes it on; the last one reads it
            else:
                subgraph.recompile()  # the one called is recompiled once its get_attr is gone
        module.graph.lint()
        module.recompile()
    node.replace_all_uses_with(passed)
    return True
