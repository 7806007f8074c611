"""Which program inputs, outputs and state of a rewritten program were complex, and in which dtype.

ReplaceComplexWithRealPass turns a complex user input of shape S into a real pair input of shape
S + [2] (same name; complex32 → float16, complex64 → float32, complex128 → float64), a complex user
output into a pair output, and complex parameters, buffers and constants into pair state under the
same names. A caller that feeds the rewritten program complex tensors (``aotcuda.load`` does, with
``torch.view_as_real``) needs to know which inputs and outputs those are: `complex_boundary(ep)`.

Where the record lives: ``ep.graph_module.meta[BOUNDARY_KEY]``. It survives what keeps the graph
module's meta: ``ExportedProgram.run_decompositions`` and ``ExportedProgram.module()``. It does not
survive re-exporting the program (``torch.export.export(ep.module(), ...)``) or
``torch.export.save`` / ``load``: keep the ExportedProgram the pass returned, or read the record from
an aotcuda package's signature (its ``"complex"`` field), which ``aotcuda.lower`` writes from it.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind

BOUNDARY_KEY = "aotcuda_complex_boundary"

# The inputs that hold the program's state: complex ones become pair state under the same names.
STATE_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


@dataclasses.dataclass(frozen=True)
class ComplexBoundary:
    """The complex dtypes at a rewritten program's boundary.

    inputs: one entry per ``graph_signature.user_inputs``, in order: the complex dtype of an input that
        is now a real pair, else None.
    outputs: one entry per ``graph_signature.user_outputs``, in order: likewise.
    state: target name → complex dtype of each parameter, buffer and constant that is now a pair
        (mutated buffers included).
    """

    inputs: tuple[torch.dtype | None, ...] = ()
    outputs: tuple[torch.dtype | None, ...] = ()
    state: dict[str, torch.dtype] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.inputs) or any(self.outputs) or bool(self.state)


def complex_boundary(ep: torch.export.ExportedProgram) -> ComplexBoundary:
    """The record of which inputs/outputs/state of `ep` were complex before the pass (see the module
    docstring for what keeps it). A program the pass did not rewrite: every entry None, no state."""
    recorded = ep.graph_module.meta.get(BOUNDARY_KEY)
    if isinstance(recorded, ComplexBoundary) and len(recorded.inputs) == len(ep.graph_signature.user_inputs) \
            and len(recorded.outputs) == len(ep.graph_signature.user_outputs):
        return recorded
    return ComplexBoundary(inputs=(None,) * len(ep.graph_signature.user_inputs),
                           outputs=(None,) * len(ep.graph_signature.user_outputs))


def user_input_names(signature) -> tuple[str | None, ...]:
    """The placeholder name of each user input of a graph signature, in order; None for a constant input.

    ``ExportGraphSignature.user_inputs`` gives a constant input's *value* in its place (False for
    ``use_cache=False``, "x" for a string "x"), which must not be looked up as a placeholder name.
    """
    return tuple(None if isinstance(spec.arg, ConstantArgument) else spec.arg.name
                 for spec in signature.input_specs if spec.kind == InputKind.USER_INPUT)


def _complex_dtype(node) -> torch.dtype | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if isinstance(value, torch.Tensor) and value.dtype.is_complex:
        return value.dtype
    return None


def mutation_targets(ep: torch.export.ExportedProgram) -> list[str | None]:
    """Per output: the placeholder whose buffer or input it writes back (a mutation), else None."""
    signature = ep.graph_signature
    placeholder_of = {spec.target: spec.arg.name for spec in signature.input_specs if spec.kind is InputKind.BUFFER}
    placeholder_of.update({spec.arg.name: spec.arg.name for spec in signature.input_specs
                           if spec.kind is InputKind.USER_INPUT})
    kinds = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)
    return [placeholder_of.get(spec.target) if spec.kind in kinds else None for spec in signature.output_specs]


def written_state_returned(ep: torch.export.ExportedProgram) -> list[int | None]:
    """Per output: for a user output that is the very node a mutation output writes back, the index of
    that mutation output (the last, if several), else None.

    Such a user output is the state after the write, not the node's value: ``ep.module()`` returns the
    result of the write-back's copy_ in its place (torch.export._unlift._insert_copy_for_mutations), as
    eager returns ``self.buf`` after ``self.buf.copy_(value)``. The two differ when the write casts:
    functionalization drops the cast of ``real_buffer.copy_(complex_value)`` (and of a complex buffer
    written with a real value), so the node is complex where the state and eager's result are real.
    """
    returned = ep.graph.output_node().args[0]
    written = mutation_targets(ep)
    writer = {}
    for i, node in enumerate(returned):
        if written[i] is not None and isinstance(node, torch.fx.Node):
            writer[node] = i
    return [writer.get(node) if spec.kind == OutputKind.USER_OUTPUT and isinstance(node, torch.fx.Node) else None
            for spec, node in zip(ep.graph_signature.output_specs, returned)]


def boundary_of(ep: torch.export.ExportedProgram) -> ComplexBoundary:
    """Read the boundary of a program BEFORE the rewrite, from its placeholders' and outputs' values (a
    user output that returns written state, see written_state_returned: the state's dtype)."""
    placeholders = {n.name: n for n in ep.graph.find_nodes(op="placeholder")}
    inputs = tuple(_complex_dtype(placeholders.get(name)) for name in user_input_names(ep.graph_signature))
    state = {spec.target: dtype for spec in ep.graph_signature.input_specs
             if spec.kind in STATE_KINDS and (dtype := _complex_dtype(placeholders.get(spec.arg.name)))}
    returned = ep.graph.output_node().args[0]
    written, state_returned = mutation_targets(ep), written_state_returned(ep)
    outputs = tuple(_complex_dtype(node if state_returned[i] is None else placeholders[written[state_returned[i]]])
                    for i, (spec, node) in enumerate(zip(ep.graph_signature.output_specs, returned))
                    if spec.kind == OutputKind.USER_OUTPUT)
    return ComplexBoundary(inputs, outputs, state)


def record_boundary(ep: torch.export.ExportedProgram, boundary: ComplexBoundary) -> None:
    """Attach the record to the rewritten program (see the module docstring)."""
    ep.graph_module.meta[BOUNDARY_KEY] = boundary
