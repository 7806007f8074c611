"""Rebuild an ExportedProgram around a rewritten graph: placeholder names, graph signature, state, constants.

The new program keeps the original's placeholders in the same order under the same names, its range
constraints and module call graph; complex parameters, buffers and constants become their
view_as_real pairs under the same names in state_dict / constants. Complex user inputs and outputs
are real pairs too (shape S + [2], dynamic dims kept); a mutated complex buffer's BUFFER_MUTATION
output names the pair value that replaces the pair buffer. Which inputs, outputs and state were
complex is recorded on the new program (boundary.complex_boundary).
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch.export.graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    OutputSpec,
    TensorArgument,
)

from aotcuda.passes.complex_to_real.boundary import STATE_KINDS, boundary_of, record_boundary
from aotcuda.passes.complex_to_real.symbols import binary_arithmetic
from aotcuda.passes.complex_to_real.torch_internals import ConstantAttrMap, lift_constants_pass


def as_pair_state(value: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
    """A complex parameter/buffer/constant as a real tensor in view_as_real layout, in its own storage,
    on `device` (default: the value's; see placement.py)."""
    pair = torch.view_as_real(value.detach().resolve_conj()).clone().to(device or value.device)
    if isinstance(value, torch.nn.Parameter):
        return torch.nn.Parameter(pair, requires_grad=value.requires_grad)
    return pair


def _convert_state(ep: torch.export.ExportedProgram, complex_placeholders: set[str],
                   devices: dict[str, torch.device]):
    state_dict, constants = dict(ep.state_dict), dict(ep.constants)
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in STATE_KINDS or spec.arg.name not in complex_placeholders:
            continue
        store = state_dict if spec.target in state_dict else constants
        store[spec.target] = as_pair_state(store[spec.target], devices.get(spec.arg.name))
    return state_dict, constants


def _carry_placeholders(gm: torch.fx.GraphModule, originals: list[torch.fx.Node]) -> None:
    """Give the traced graph's placeholders the original names (moving aside any node holding one), and
    the original meta to those that are not tensors or symbols.

    make_fx leaves a placeholder fed a Python constant (``use_cache=False``, ``img_shapes_0_0``, None, a
    string) without meta["val"], and one fed a custom object with its fake object; the verifier wants the
    constant itself and the CustomObjArgument, as torch.export wrote them.
    """
    wanted = {p.name for p in originals}
    for node in gm.graph.nodes:
        if node.op != "placeholder" and node.name in wanted:
            node._rename(f"{node.name}_0")
    for node, original in zip(gm.graph.find_nodes(op="placeholder"), originals, strict=True):
        node.name = node.target = original.name
        if not isinstance(original.meta.get("val"), (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
            node.meta.update(original.meta)


def _output_argument(node: object, old):
    """The output's argument for the traced graph's output `node`: the old one's kind (tensor, token,
    SymInt/SymFloat/SymBool, custom object) under the new node's name, or a constant."""
    if isinstance(node, torch.fx.Node):
        if isinstance(old, ConstantArgument):  # a constant that the trace computes: it has a node now
            return TensorArgument(name=node.name)
        return dataclasses.replace(old, name=node.name)
    return ConstantArgument(name=getattr(old, "name", ""), value=node)


def _updated_signature(ep: torch.export.ExportedProgram, gm: torch.fx.GraphModule) -> ExportGraphSignature:
    outputs = gm.graph.output_node().args[0]
    output_specs = [
        OutputSpec(kind=spec.kind, arg=_output_argument(node, spec.arg), target=spec.target)
        for spec, node in zip(ep.graph_signature.output_specs, outputs, strict=True)
    ]
    return ExportGraphSignature(input_specs=list(ep.graph_signature.input_specs),
                                output_specs=output_specs)


def _updated_module_call_graph(ep: torch.export.ExportedProgram, signature: ExportGraphSignature):
    """The root entry names the user outputs by node name; point it at the new output nodes."""
    renamed = {old.arg.name: new.arg for old, new in zip(ep.graph_signature.output_specs,
                                                          signature.output_specs)
               if hasattr(old.arg, "name")}
    entries = []
    for entry in ep.module_call_graph:
        if entry.fqn == "" and entry.signature is not None:
            outputs = [renamed.get(getattr(o, "name", None), o) for o in entry.signature.outputs]
            entry = dataclasses.replace(entry, signature=dataclasses.replace(entry.signature, outputs=outputs))
        entries.append(entry)
    return entries


def rebuild_program(ep: torch.export.ExportedProgram, gm: torch.fx.GraphModule,
                    complex_placeholders: set[str], devices: dict[str, torch.device] | None = None
                    ) -> torch.export.ExportedProgram:
    """The ExportedProgram of the traced graph `gm`, with `ep`'s signature, state and metadata carried over;
    complex state named in `devices` moves to that device (see placement.py)."""
    _carry_placeholders(gm, list(ep.graph.find_nodes(op="placeholder")))
    binary_arithmetic(gm)  # make_fx's n-ary operator.mul, which Inductor's re-trace refuses
    gm.graph.eliminate_dead_code()
    signature = _updated_signature(ep, gm)
    state_dict, constants = _convert_state(ep, complex_placeholders, devices or {})
    # Tensors the rules made outside the trace (the FFT tables) are get_attr constants of gm: lift them
    # into CONSTANT_TENSOR inputs, as export does, after the original placeholders got their names.
    constants.update(lift_constants_pass(gm, signature, ConstantAttrMap()))
    gm.recompile()  # the code of the graph as it is now: dead nodes gone, constants lifted
    gm.meta.update(ep.graph_module.meta)
    new = torch.export.ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature,
        state_dict=state_dict,
        range_constraints=copy.copy(ep.range_constraints),
        module_call_graph=_updated_module_call_graph(ep, signature),
        example_inputs=ep.example_inputs,
        constants=constants,
        verifiers=list(ep.verifiers),
    )
    record_boundary(new, boundary_of(ep))
    return new
