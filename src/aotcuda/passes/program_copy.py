"""with_graph: a new ExportedProgram around a changed copy of a program's graph module.

The passes change a deep copy of the graph module, never the program they are given, and share its
weights: the state dict and constants are the same tensors (a deep copy of the whole program would copy
every weight, 2.5 GB for a 1.2B model in bf16).
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram


def copied_graph_module(ep: ExportedProgram) -> torch.fx.GraphModule:
    """A deep copy of ``ep.graph_module`` whose nodes keep ep's names, as the graph signature names them.

    Why not ``copy.deepcopy`` alone: the copy names each node through torch.fx's namespace, which never gives a
    builtin's name, and torch.export names a placeholder after the forward argument as it is. So ``forward(self,
    input)`` (every ``nn.Sequential``) has a placeholder ``input`` whose copy is ``input_1``, and the program made
    around the copy fails torch's check (``Input spec name input does not match node name input_1``): a
    Sequential with a BatchNorm could not be lowered. torch.export sets such a name the same way (a placeholder's
    ``name`` and ``target`` written directly)."""
    graph_module = copy.deepcopy(ep.graph_module)
    namespace = getattr(graph_module.graph, "_graph_namespace", None)  # torch.fx's own: private, so looked up
    names = getattr(namespace, "_used_names", set())  # so that no node made later is given a restored name
    renamed = False
    for original, node in zip(ep.graph_module.graph.nodes, graph_module.graph.nodes):
        if node.name != original.name:
            node.name = original.name
            if node.op == "placeholder":
                node.target = original.target
            names.add(original.name)
            renamed = True
    if renamed:
        graph_module.recompile()
    return graph_module


def with_graph(ep: ExportedProgram, graph_module: torch.fx.GraphModule, *,
               graph_signature=None, constants: dict | None = None, state_dict: dict | None = None
               ) -> ExportedProgram:
    """``ep`` with ``graph_module`` (a changed copy of ep.graph_module, made by copied_graph_module). ``graph_signature``,
    ``constants`` and ``state_dict``, when given, replace a copy of ep's (a pass that lifted new
    constants, or replaced parameters).

    The tensors are shared; the dicts that hold them are new, so that adding an entry to one program's
    state dict or constants does not add it to the other's."""
    return ExportedProgram(
        root=graph_module,
        graph=graph_module.graph,
        graph_signature=copy.deepcopy(ep.graph_signature) if graph_signature is None else graph_signature,
        state_dict=dict(ep.state_dict) if state_dict is None else state_dict,
        range_constraints=copy.copy(ep.range_constraints),
        module_call_graph=copy.deepcopy(ep.module_call_graph),
        example_inputs=ep.example_inputs,
        constants=dict(ep.constants) if constants is None else constants,
        verifiers=list(ep.verifiers),
    )


def preserves_call_signatures(ep: ExportedProgram) -> bool:
    """Whether ``ep`` was exported with ``preserve_module_call_signature``: its module call graph then names
    nodes of the graph (a submodule's inputs and outputs), which a pass that merges or removes nodes would
    leave dangling. The passes that remove nodes leave such programs as they are."""
    return any(entry.fqn and entry.signature is not None for entry in ep.module_call_graph)
