"""ReplaceComplexWithRealPass as ExecuTorch's AOTI backends run their passes: in place, with a PassResult.

ExecuTorch's AOTInductor backends (CudaBackend, MetalBackend: ``executorch/backends/aoti/aoti_backend.py``)
run ``get_custom_passes(compile_specs)`` on each delegated Edge-dialect program inside ``preprocess``,
after their own ReplaceViewCopyWithViewPass and before AOTInductor compiles it. Each pass is called for
its side effects: with the ExportedProgram when the pass has ``requires_exported_program = True``, else
with its graph module, and whatever it returns is ignored. ReplaceComplexWithRealPass returns a new
program instead, and needs the program (complex constants and buffers become real pairs in its state and
graph signature), so this adapter runs it and moves the result into the program it was given.

How to put it there: ExecuTorch refuses subclasses of a concrete backend ("ExecuTorch delegate doesn't
support nested backend"), and a backend under another name would be written into the .pte as a backend
id the CUDA runtime does not know. `complex_pass_in(CudaBackend)` therefore extends the backend's own
``get_custom_passes`` for the duration of a ``with`` block and restores it afterwards.

The rule table knows no dialect: importing this module adds ExecuTorch's Edge dialect to it (EDGE_DIALECT:
Edge ops by the ATen overload their schema names, and the dim-order ops by the ATen op they stand for), so
that ReplaceComplexWithRealPass rewrites Edge programs with the ATen rules.

A program not yet passed to ``to_edge`` is better served by ``ReplaceComplexWithRealPass()(ep)`` before
it (see docs/usage.md, "ExecuTorch"). Importing this module does not import ExecuTorch.
"""

from __future__ import annotations

import contextlib
import logging

import torch
from torch.fx.passes.infra.pass_base import PassResult

from aotcuda.errors import UnsupportedComplexOpError
from aotcuda.passes.complex_to_real import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.boundary import boundary_of
from aotcuda.passes.complex_to_real.registry import RULES, Dialect, Rule, add_dialect, op_name

logger = logging.getLogger("aotcuda")


def aten_overload(op: object) -> torch._ops.OpOverload | None:
    """The ATen (or prims) overload an op stands for: an OpOverload itself; for a dialect op such as
    ExecuTorch's EdgeOpOverload (``exir_ops.edge.aten.mul.Tensor``), the overload its schema names
    (``aten::mul.Tensor``), if that overload has the same schema."""
    if isinstance(op, torch._ops.OpOverload):
        return op
    schema = getattr(op, "_schema", None)  # a FunctionSchema, or a dialect's own schema class
    if not isinstance(getattr(schema, "name", None), str) or not isinstance(getattr(schema, "overload_name", None), str):
        return None
    namespace, _, name = schema.name.partition("::")
    packet = getattr(getattr(torch.ops, namespace, None), name, None) if name else None
    overload = getattr(packet, schema.overload_name or "default", None) if packet is not None else None
    if isinstance(overload, torch._ops.OpOverload) and str(overload._schema) == str(schema):
        return overload
    return None


# ExecuTorch's dim-order ops: ATen ops whose memory_format argument is a dim order instead (the order of
# the dims from outermost to innermost in memory). Schema name → the ATen overload they stand for.
_DIM_ORDER_OPS = {
    "dim_order_ops::_clone_dim_order": ("clone", "default"),
    "dim_order_ops::_to_dim_order_copy": ("_to_copy", "default"),
    "dim_order_ops::_empty_dim_order": ("empty", "memory_format"),
}


def _dim_order_rule(op: object) -> Rule | None:
    schema = getattr(op, "_schema", None)
    target = _DIM_ORDER_OPS.get(getattr(schema, "name", None)) if not getattr(schema, "overload_name", "") else None
    aten_op = getattr(getattr(torch.ops.aten, target[0]), target[1]) if target else None
    rule = RULES.get(aten_op)
    if rule is None:
        return None
    aten_fn, accepted = rule.fn, {argument.name for argument in aten_op._schema.arguments}

    def dim_order_rule(out, *args, dim_order=None, **kwargs):
        kwargs = {name: value for name, value in kwargs.items() if name in accepted}  # clone has no non_blocking
        memory_format = memory_format_of(dim_order)
        if memory_format is not None:
            kwargs["memory_format"] = memory_format
        return aten_fn(out, *args, **kwargs)

    dim_order_rule.__doc__ = f"As {op_name(aten_op)}, the dim order as a memory format."
    dim_order_rule.__name__ = dim_order_rule.__qualname__ = f"dim_order_of({aten_fn.__qualname__})"
    return Rule(aten_op, dim_order_rule, rule.family, rule.refuses, rule.computes)


def memory_format_of(dim_order) -> torch.memory_format | None:
    """The memory format a dim order names: None for None (keep the input's) and for an order no
    memory format names (the pass then copies the result into eager's strides, see layout.py)."""
    if dim_order is None:
        return None
    dim_order = list(dim_order)
    if dim_order == list(range(len(dim_order))):
        return torch.contiguous_format
    if dim_order == [0, 2, 3, 1]:
        return torch.channels_last
    if dim_order == [0, 2, 3, 4, 1]:
        return torch.channels_last_3d
    return None


# Edge ops get the rule of the overload they wrap; the dim-order ops (``dim_order_ops._clone_dim_order``,
# ``_to_dim_order_copy``, ``_empty_dim_order``, which Edge programs hold instead of clone, _to_copy and
# empty) the ATen op's rule, the dim order given as the memory format it names.
EDGE_DIALECT = Dialect("ExecuTorch Edge", aten_overload, _dim_order_rule)
add_dialect(EDGE_DIALECT)


class ReplaceComplexWithRealEdgePass:
    """Rewrite every complex op of an (Edge-dialect or ATen) ExportedProgram as real math, in place.

    ``pass_(ep) -> PassResult(ep.graph_module, modified)``: the same rewrite as ReplaceComplexWithRealPass
    (a complex tensor of shape S becomes a real pair of shape S + [2], complex64 → float32, complex128 →
    float64; complex constants, parameters and buffers become pairs under the same names), after which
    `ep` itself holds the rewritten graph module, graph signature, state and constants. Edge ops
    (``exir_ops.edge.aten.*``) and the ``*_copy`` view ops of Edge programs are rewritten by the ATen
    rules; the nodes the rewrite creates are ATen ops, which AOTInductor compiles as it compiles the
    Edge ops (an AOTI backend recompiles the program; other ExecuTorch backends expect Edge ops only).

    The program's inputs and outputs must stay as they are: the ExecuTorch program around a delegate
    hands it the tensors of the original signature. A program that takes or returns a complex tensor is
    therefore refused (rewrite the model before ``to_edge`` instead, where the caller sees the pairs).

    Args:
        strict: raise on a program that cannot be rewritten (default). With strict=False it is left
            unchanged, after one line on the "aotcuda" logger; AOTInductor then reports the complex ops
            as missing fallback kernels.

    Raises:
        UnsupportedComplexOpError: strict and an op has no rule, or the program takes or returns complex
            tensors.
        TypeError: called with a GraphModule (the rewrite changes the program's state and signature,
            which a graph module does not hold).
    """

    # AotiBackend.preprocess passes the ExportedProgram, not its graph module, to passes that say so.
    requires_exported_program = True

    def __init__(self, strict: bool = True):
        self.strict = strict

    def __call__(self, ep: torch.export.ExportedProgram) -> PassResult:
        if not isinstance(ep, torch.export.ExportedProgram):
            raise TypeError(
                f"ReplaceComplexWithRealEdgePass rewrites an ExportedProgram (its state and graph signature "
                f"change with the graph), got {type(ep).__name__}: run it where the ExportedProgram is passed "
                "(an AOTI backend's get_custom_passes, or call it on edge_manager.exported_program())")
        refusal = _complex_boundary_refusal(ep)
        if refusal is not None:
            if self.strict:
                raise refusal
            logger.warning("ReplaceComplexWithRealEdgePass left the program unchanged: %s", refusal)
            return PassResult(ep.graph_module, False)
        rewritten = ReplaceComplexWithRealPass(strict=self.strict)(ep)
        if rewritten is ep:
            return PassResult(ep.graph_module, False)
        _take_over(ep, rewritten)
        return PassResult(ep.graph_module, True)


def _complex_boundary_refusal(ep: torch.export.ExportedProgram) -> UnsupportedComplexOpError | None:
    """The error for a program whose user inputs or outputs are complex, else None."""
    boundary = boundary_of(ep)
    names = [*ep.graph_signature.user_inputs, *ep.graph_signature.user_outputs]
    complex_io = [f"{name} ({dtype})" for name, dtype in zip(names, [*boundary.inputs, *boundary.outputs]) if dtype]
    if not complex_io:
        return None
    return UnsupportedComplexOpError(
        "the program's inputs and outputs", ", ".join(complex_io), "",
        "a pass run inside the backend cannot change what the delegate takes and returns, and these are "
        "complex; apply aotcuda.passes.ReplaceComplexWithRealPass to the program before to_edge (its "
        "complex inputs and outputs become real view_as_real pairs) or keep complex tensors inside forward")


def _take_over(ep: torch.export.ExportedProgram, rewritten: torch.export.ExportedProgram) -> None:
    """Make `ep` the rewritten program. ExportedProgram's properties refuse assignment, so the private
    attributes are set, as ExecuTorch's own ExportedProgramPassManager does (torch 2.11–2.14 name them
    alike); the verifiers stay `ep`'s."""
    ep._graph_module = rewritten.graph_module
    ep._graph_signature = rewritten.graph_signature
    ep._state_dict = rewritten.state_dict
    ep._constants = rewritten.constants
    ep._range_constraints = rewritten.range_constraints
    ep._module_call_graph = rewritten.module_call_graph


@contextlib.contextmanager
def complex_pass_in(backend: type, strict: bool = True):
    """Within the block, ``backend.get_custom_passes(compile_specs)`` returns the backend's own passes
    followed by ``ReplaceComplexWithRealEdgePass(strict)``; on leaving it, the backend's method is restored.

    Args:
        backend: an ExecuTorch AOTI backend class (``executorch.backends.cuda.cuda_backend.CudaBackend``,
            or any class with AotiBackend's ``get_custom_passes(compile_specs)`` classmethod).
        strict: see ReplaceComplexWithRealEdgePass.

    The change is to the class, so it applies to every lowering in the process while the block runs
    (not only this thread's). Blocks may nest; each restores what it found.

    Raises:
        TypeError: `backend` has no ``get_custom_passes`` classmethod.
    """
    original = backend.__dict__.get("get_custom_passes")
    own_passes = getattr(backend, "get_custom_passes", None)
    if not callable(own_passes):
        raise TypeError(f"{getattr(backend, '__name__', backend)!r} has no get_custom_passes(compile_specs): "
                        "pass an ExecuTorch AOTI backend class such as CudaBackend")

    def get_custom_passes(cls, compile_specs):
        return [*own_passes(compile_specs), ReplaceComplexWithRealEdgePass(strict=strict)]

    backend.get_custom_passes = classmethod(get_custom_passes)
    try:
        yield backend
    finally:
        if original is None:
            del backend.get_custom_passes
        else:
            backend.get_custom_passes = original
