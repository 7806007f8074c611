"""0-d tensor constants become ``full([], value)`` nodes before the compile.

Why: a 0-d tensor constant of the program (``h[0] = 1`` and ``h[1:8] = 2`` lift the numbers as 0-d constant
tensors; so does ``torch.tensor(1.0)`` in forward) is given to Inductor as a get_attr, and Inductor holds a 0-d
one as an ``ir.Constant``: a number, not a tensor (torch/_inductor/graph.py ``get_attr``, torch 2.11-2.13).
Its pointwise lowerings broadcast such a number, but its view lowerings take tensors only, and Inductor removes
the ``clone`` and ``copy`` between the constant and a view as no-ops (fx_passes/post_grad.py
``remove_noop_ops``). A mask built element by element in forward (a Hilbert transform's
``h = torch.zeros(n); h[0] = 1; h[1:n // 2] = 2; h[n // 2] = 1``) is decomposed by torch.export into
``where(arange == 0, expand(unsqueeze(copy(select(full), clone(<0-d constant>)))), full)``, and its compile
ended in ``LoweringException: AttributeError: 'Constant' object has no attribute 'data'`` (target
``aten.unsqueeze.default``); ``torch.tensor(1.0).expand(16)`` in ``ndim mismatch``. The ExportedProgram alone,
compiled by torch's own ``aoti_compile_and_package``, fails alike.

So each real or bool 0-d CONSTANT_TENSOR input of the program is replaced by an ``aten.full.default([], value,
dtype=, device=)`` node of its value, dtype and device, which Inductor lowers to a tensor that every op takes
(for a pointwise use, the same kernel as before but for its name: ``x * torch.tensor(2.5)`` and a ``where`` of one,
compared on the CPU). The value is the constant's exactly
(``Tensor.item()`` is a Python float or int that holds every value of these dtypes, -0.0, inf and nan kept).
A 0-d parameter or buffer the program does not write is one too: Inductor's get_attr makes a number of it
alike (it is no weight of the package either), and ``x + self.scale.expand(16)`` of a 0-d buffer ended in
``ndim mismatch``, ``h[2] = self.scale`` in the error above (break-new 35): each becomes a ``full`` node as well.
A buffer or parameter the program writes (an output spec names it) is left, as Inductor keeps it a tensor; so are complex constants
(none is left after ReplaceComplexWithRealPass; one it refused keeps its fallback). A program without a 0-d
tensor constant is returned as it is.

Inside a subgraph (a torch.cond branch, a scan's or while_loop's body) torch.export does not lift a constant: the
subgraph reads it as a ``get_attr`` of its own module, and ``run_decompositions`` ended in ``RuntimeError:
Attempting to use FunctionalTensor on its own`` (torch 2.13, torch's alone: ``torch.cond(p, lambda x: x *
torch.tensor(3.0), ...)``, a scan body's ``k = torch.zeros(4); k[2] = 5``; break-new 35). So right after the export,
``subgraph_scalar_constants_as_full`` makes each one of a number dtype ``full`` nodes there too (in place, as the
export step's other fixes): a 0-d one a ``full([], value)``, a larger one (a vector of coefficients in a branch, an
index list, a mask) a ``cat`` of one ``full`` per run of equal values, viewed in its shape (session 36). One of more
than MAX_SUBGRAPH_CONSTANT_RUNS runs (a ramp, a table) is passed in as an operand instead: a constant input of the
program handed down to the subgraph (``aotcuda.lowering.subgraph_constants``). One that cannot be (a subgraph called
by an op whose operands the lowering does not know) is left, and torch's error then gets a note naming it and the
fix (make it outside the subgraph and pass it in).
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature, InputKind

from aotcuda.errors import clipped
from aotcuda.lowering.fallbacks import relative_source_line
from aotcuda.lowering.subgraph_constants import lift_subgraph_constant
from aotcuda.passes.emit import SHARED_META, replace_uses
from aotcuda.passes.program_copy import copied_graph_module, with_graph
from aotcuda.runtime.checks import as_bits

# The dtypes Inductor's full lowers for a value Tensor.item() gives exactly (not float8, not complex).
_NUMBER_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                            torch.float16, torch.bfloat16, torch.float32, torch.float64})


# The inputs Inductor is given as get_attr (a 0-d one becomes a number there).
_HELD = frozenset({InputKind.CONSTANT_TENSOR, InputKind.PARAMETER, InputKind.BUFFER})


def _scalar_constants(ep: ExportedProgram) -> dict[str, torch.Tensor]:
    """{placeholder name: value} of ep's 0-d constant tensors, parameters and buffers not written, of a number
    dtype."""
    # written: a buffer's or parameter's target an output spec names (BUFFER_MUTATION, PARAMETER_MUTATION)
    found, written = {}, {spec.target for spec in ep.graph_signature.output_specs if spec.target is not None}
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in _HELD or spec.target in written:
            continue
        value = ep.constants.get(spec.target, ep.state_dict.get(spec.target))  # a non-persistent buffer: constants
        if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype in _NUMBER_DTYPES:
            found[spec.arg.name] = value
    return found


def scalar_constants_as_full(ep: ExportedProgram) -> ExportedProgram:
    """``ep`` with each 0-d constant tensor (parameter, buffer not written) of a number dtype computed by a
    ``full([], value)`` node instead, and gone from its inputs, constants and state dict (module docstring); ``ep``
    itself when it has none. ``ep`` is not changed."""
    scalars = _scalar_constants(ep)
    if not scalars:
        return ep
    graph_module = copied_graph_module(ep)
    graph = graph_module.graph
    first = next(node for node in graph.nodes if node.op != "placeholder")
    removed, signature = set(), copy.deepcopy(ep.graph_signature)
    for node in list(graph.find_nodes(op="placeholder")):
        value = scalars.get(node.name)
        if value is None:
            continue
        with graph.inserting_before(first):
            full = graph.call_function(torch.ops.aten.full.default, ([], value.item()),
                                       {"dtype": value.dtype, "layout": torch.strided, "device": value.device,
                                        "pin_memory": False})
        full.meta["val"] = node.meta["val"]
        user = next(iter(node.users), None)
        if user is not None:  # the line of the model that made the constant, for Inductor's messages
            full.meta.update({key: user.meta[key] for key in SHARED_META if key in user.meta})
        replace_uses(node, full, signature)  # an output that is the constant itself names the node
        graph.erase_node(node)
        removed.add(node.name)
    graph.lint()
    graph_module.recompile()
    kept = [spec for spec in signature.input_specs if spec.arg.name not in removed]
    targets = {spec.target for spec in signature.input_specs if spec.arg.name in removed}
    targets -= {spec.target for spec in kept}  # a target another input still reads stays
    constants = {name: value for name, value in ep.constants.items() if name not in targets}
    state_dict = {name: value for name, value in ep.state_dict.items() if name not in targets}
    return with_graph(ep, graph_module, constants=constants, state_dict=state_dict,
                      graph_signature=ExportGraphSignature(input_specs=kept, output_specs=signature.output_specs))


# A constant inside a subgraph is rebuilt from runs of equal values (a ``full`` each, then one ``cat``) when it has at
# most this many runs: a vector of coefficients, a mask. Past it, it is passed in as an operand (subgraph_constants).
MAX_SUBGRAPH_CONSTANT_RUNS = 256


def _runs(values: list) -> list[tuple[object, int]] | None:
    """[(value, count)] of the runs of equal values in ``values`` (equal as written: -0.0 is not 0.0, nan is nan), or
    None past MAX_SUBGRAPH_CONSTANT_RUNS."""
    runs: list[list] = []
    for value in values:
        if runs and repr(runs[-1][0]) == repr(value):
            runs[-1][1] += 1
            continue
        if len(runs) == MAX_SUBGRAPH_CONSTANT_RUNS:
            return None
        runs.append([value, 1])
    return [(value, count) for value, count in runs]


def _too_many_runs(flat: torch.Tensor) -> bool:
    """Whether ``flat`` (1-d) has more than MAX_SUBGRAPH_CONSTANT_RUNS runs of equal bits, counted by torch: no Python
    list of a large constant's values is made to find that it is one (a 10M-element table took 790 MB that way)."""
    if flat.numel() <= MAX_SUBGRAPH_CONSTANT_RUNS:
        return False
    bits = as_bits(flat.contiguous())  # -0.0 is not 0.0; a nan equals its own bits
    return int((bits[1:] != bits[:-1]).sum()) + 1 > MAX_SUBGRAPH_CONSTANT_RUNS


def _rebuilt(graph: torch.fx.Graph, value: torch.Tensor, fake_mode=None):
    """Nodes of ``graph`` (at its insertion point) that compute ``value``: ``full`` for a 0-d or uniform one, else a
    ``cat`` of one ``full`` per run of equal values, viewed in its shape; None when it has too many runs. Each node's
    meta["val"] is made in ``fake_mode`` (the constant's own), where there is one."""
    options = {"dtype": value.dtype, "layout": torch.strided, "device": value.device, "pin_memory": False}
    flat = value.reshape(-1)
    if _too_many_runs(flat):
        return None
    shape, values = list(value.shape), flat.tolist()
    runs = _runs(values) if values else [(False if value.dtype == torch.bool else 0, 0)]
    if runs is None:
        return None
    if len(runs) == 1:
        return graph.call_function(torch.ops.aten.full.default, (shape, runs[0][0]), options)
    parts = [graph.call_function(torch.ops.aten.full.default, ([count], run_value), options)
             for run_value, count in runs]
    joined = graph.call_function(torch.ops.aten.cat.default, (parts, 0))
    if fake_mode is not None:  # each node's value, as export gives every node one
        with fake_mode:
            for node in (*parts, joined):
                node.meta["val"] = torch.empty(node.args[0] if node is not joined else [len(values)],
                                               dtype=value.dtype, device=value.device)
    return graph.call_function(torch.ops.aten.view.default, (joined, shape)) if value.dim() != 1 else joined


def _erase_get_attr(module: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """Erase the get_attr ``node`` of ``module`` (its uses replaced), and the attribute where nothing else reads it."""
    module.graph.erase_node(node)
    if not module.graph.find_nodes(op="get_attr", target=node.target):
        delattr(module, node.target)


def subgraph_scalar_constants_as_full(ep: ExportedProgram) -> list[str]:
    """Each tensor constant of a number dtype that a subgraph of ``ep`` reads (a ``get_attr`` of the subgraph's own
    module) becomes ``full`` nodes of that subgraph that compute it, in place (module docstring): a 0-d one one
    ``full([], value)``, a larger one a ``cat`` of a ``full`` per run of equal values (at most
    MAX_SUBGRAPH_CONSTANT_RUNS runs), or past that a constant input of ``ep`` passed down to the subgraph as an operand
    (``lift_subgraph_constant``). Returns the constants left (neither could be done), each said with the model's line
    that reads it, for ``note_subgraph_constants_left``."""
    left = []
    for name, module in ep.graph_module.named_modules():
        if not name or not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False
        for node in list(module.graph.find_nodes(op="get_attr")):
            value = getattr(module, node.target, None)
            if not (isinstance(value, torch.Tensor) and value.dtype in _NUMBER_DTYPES
                    and not isinstance(value, torch.nn.Parameter) and value.layout == torch.strided):
                continue
            with module.graph.inserting_before(node):
                full = _rebuilt(module.graph, value, getattr(node.meta.get("val"), "fake_mode", None))
            if full is None and lift_subgraph_constant(ep, name, node, value):  # too many runs: an operand instead
                _erase_get_attr(module, node)
                changed = True
                continue
            if full is None:
                user = next(iter(node.users), None)
                line = relative_source_line(user)
                left.append(f"the {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} constant that the "
                            f"subgraph {name} reads" + (f" at {clipped(line, 160)}" if line else ""))
                continue
            full.meta.update({key: node.meta[key] for key in ("val", *SHARED_META) if key in node.meta})
            user = next(iter(node.users), None)
            if user is not None and "stack_trace" not in full.meta:
                full.meta.update({key: user.meta[key] for key in SHARED_META if key in user.meta})
            node.replace_all_uses_with(full)
            _erase_get_attr(module, node)
            changed = True
        if changed:
            module.graph.lint()
            module.recompile()
    return left


def note_subgraph_constants_left(error: BaseException, left: list[str]) -> None:
    """Say on torch's error (``Attempting to use FunctionalTensor on its own``, from ``run_decompositions``) which
    constant inside a subgraph caused it and the fix, where ``subgraph_scalar_constants_as_full`` left one."""
    if left and "FunctionalTensor on its own" in str(error):
        error.add_note(f"Likely cause: {left[0]}: torch.export keeps a tensor constant made inside a torch.cond "
                       "branch, a scan, map or while_loop body or a flex_attention mod in that subgraph, where "
                       "torch's decompositions cannot read it (aotcuda rebuilds one of at most "
                       f"{MAX_SUBGRAPH_CONSTANT_RUNS} runs of equal values, and passes a larger one in as an operand "
                       "of a cond, while_loop, scan or map, or a buffer of a flex_attention score_mod, it knows the "
                       "caller of, which this one is not). Make the tensor outside the cond, loop or mod (in __init__ "
                       "as a buffer, or in forward before it) and pass it in as an operand (a flex_attention mod "
                       "reads one made outside it as a buffer), then lower again.")
