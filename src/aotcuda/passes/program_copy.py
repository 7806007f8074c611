"""with_graph: a new ExportedProgram around a changed copy of a program's graph module.

The passes change a deep copy of the graph module, never the program they are given, and share its
weights: the state dict and constants are the same tensors (a deep copy of the whole program would copy
every weight, 2.5 GB for a 1.2B model in bf16).
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram


def with_graph(ep: ExportedProgram, graph_module: torch.fx.GraphModule, *,
               graph_signature=None, constants: dict | None = None, state_dict: dict | None = None
               ) -> ExportedProgram:
    """``ep`` with ``graph_module`` (a changed copy of ep.graph_module). ``graph_signature``,
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
