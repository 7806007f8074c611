"""How the complex product of two pairs is written, and its factor tables folded into constants.

The product (ar + i·ai)(br + i·bi) on pairs a[..., 2], b[..., 2] can be written several ways; Inductor
compiles them to kernels that differ by up to 1.4× on a memory-bound RoPE (benchmarks/NOTES.md). The
form is chosen by the environment variable ``AOTCUDA_PAIR_MUL``, read each time a program is lowered
(so one process can lower one program in every form, as ``benchmarks/rope.py --pair-mul`` does):

- ``fold``: a·(br, br) + flip(a, −1)·(−bi, bi). When b depends only on constants (parameters,
  buffers the program does not write, lifted constants: the rotation table of every RoPE) through ops
  with static shapes, the two tables are computed once at lowering time and stored as program constants,
  so the kernel reads two ready tables instead of building them from b; otherwise the same as ``flip``.
- ``flip`` (default): a·br + flip(a, −1)·(−bi, bi), br broadcast as [..., 1], (−bi, bi) built in the
  kernel. The default because ``fold`` measured no faster on the H200 (RoPE B=4, S=4096, H=32, D=128,
  bf16, torch 2.11: fold 144.6 µs, flip 144.4, flip-cat 144.4, unbind 198.8, against a 134.1 µs copy;
  benchmarks/results/rope-h200-torch2.11-pair-mul.json) while it stores the tables twice over.
- ``flip-cat``: the same with (br, br) made by ``cat`` (the form measured first, NOTES.md).
- ``unbind``: the textbook form, four real products of the unbound parts, then stack.

Folding, step by step: ``product_tables`` (the rule side) tags the nodes of b's two tables
(``meta[TABLE_KEY]``); ``FoldConstantProductTablesPass`` (the pass after ReplaceComplexWithRealPass in
``aotcuda.lowering.pipeline.passes()``, so that the complex pass keeps the program's state names as they are)
evaluates each tagged node whose every ancestor is a constant placeholder, replaces it by a lifted
constant (``(br, br)`` materialized at the full pair shape), and lets dead-code elimination drop the
ops that made it. A table larger than the constants it came from
(an expand to a batch) is not folded: the program would grow by that much.
"""

from __future__ import annotations

import copy
import os
import warnings

import torch
from aotcuda.passes.complex_to_real.boundary import boundary_of, record_boundary
from aotcuda.passes.complex_to_real.torch_internals import (
    ConstantAttrMap,
    get_proxy_mode,
    get_proxy_slot,
    lift_constants_pass,
)
from aotcuda.passes.program_copy import with_graph
from aotcuda.passes.result import PassResult

PAIR_MUL_VARIABLE = "AOTCUDA_PAIR_MUL"
FORMS = ("fold", "flip", "flip-cat", "unbind")
DEFAULT_FORM = "flip"
TABLE_KEY = "aotcuda_product_table"  # node meta: "re" for (br, br) / br, "im" for (−bi, bi)
_FOLDED_PREFIX = "_aotcuda_product_table"


def pair_mul_form() -> str:
    """The form named by AOTCUDA_PAIR_MUL (default ``flip``). Raises ValueError naming the choices."""
    form = os.environ.get(PAIR_MUL_VARIABLE, "").strip() or DEFAULT_FORM
    if form not in FORMS:
        raise ValueError(f"{PAIR_MUL_VARIABLE}={form!r} is not a form of the complex product; "
                         f"use one of {', '.join(FORMS)} (default {DEFAULT_FORM})")
    return form


def tag_table(t: torch.Tensor, kind: str) -> torch.Tensor:
    """Mark the node that makes `t` in the graph being traced as b's ``kind`` table ("re" or "im")."""
    mode = get_proxy_mode()
    if mode is not None:
        try:
            get_proxy_slot(t, mode.tracer).proxy.node.meta[TABLE_KEY] = kind
        except (KeyError, AttributeError):  # not traced (a constant-tracked tensor): nothing to fold
            pass
    return t


class FoldConstantProductTablesPass:
    """Store the product tables of constant factors as program constants (see the module docstring).

    Returns a new ExportedProgram with one CONSTANT_TENSOR input per folded table (named like
    export's lifted constants), or the argument itself when nothing is folded; the argument is left
    unchanged. Programs lowered with AOTCUDA_PAIR_MUL other than ``fold`` have no tagged table.
    """

    def __init__(self):
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
        self.result = PassResult(type(self).__name__, counts={"folded": 0})
        values, known = constant_placeholder_values(ep), {}
        if not any(TABLE_KEY in node.meta and _evaluate(node, values, known) is not None for node in ep.graph.nodes):
            return ep  # nothing to fold (e.g. a decode step's table indexed by the position): no graph copy
        gm = copy.deepcopy(ep.graph_module)
        folded = fold_product_tables(gm, values)
        if not folded:
            return ep
        self.result = PassResult(type(self).__name__, changed=True, counts={"folded": folded})
        signature = copy.deepcopy(ep.graph_signature)
        constants = dict(ep.constants)
        constants.update(lift_constants_pass(gm, signature, ConstantAttrMap()))
        new = with_graph(ep, gm, graph_signature=signature, constants=constants)
        record_boundary(new, boundary_of(ep))
        return new


_STATE_KINDS = (torch.export.graph_signature.InputKind.PARAMETER, torch.export.graph_signature.InputKind.BUFFER,
                torch.export.graph_signature.InputKind.CONSTANT_TENSOR)


def constant_placeholder_values(ep: torch.export.ExportedProgram) -> dict[str, torch.Tensor]:
    """Real values of the placeholders whose value is the same for every call: parameters, lifted
    constants and the buffers the program does not write."""
    mutated = set(ep.graph_signature.buffers_to_mutate.values())
    values = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in _STATE_KINDS or spec.target in mutated:
            continue
        value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
        if isinstance(value, torch.Tensor):
            values[spec.arg.name] = value
    return values


def fold_product_tables(gm: torch.fx.GraphModule, constant_values: dict[str, torch.Tensor]) -> int:
    """Replace each tagged table node computed only from constants by a constant attribute of `gm`.

    Args:
        gm: the traced graph, its placeholders named as the ExportedProgram's.
        constant_values: real values of the placeholders that hold constants (parameters, buffers that
            the program does not write, lifted constants), by placeholder name, in their pair form.

    Returns how many tables were folded. The folded tensors are get_attr nodes, lifted into
    CONSTANT_TENSOR inputs afterwards (program.rebuild_program).
    """
    folded = 0
    values: dict[torch.fx.Node, torch.Tensor] = {}
    for node in list(gm.graph.nodes):
        kind = node.meta.get(TABLE_KEY)
        if kind is None:
            continue
        value = _evaluate(node, constant_values, values)
        if value is None:
            continue
        if kind == "re":  # (br, br): the full pair shape, so the kernel reads it like a
            value = value.expand(*value.shape[:-1], 2)
        value = value.contiguous().clone()
        if value.numel() > _source_numel(node, constant_values):
            continue
        name = f"{_FOLDED_PREFIX}{folded}"
        while hasattr(gm, name):
            name += "_"
        setattr(gm, name, value)  # like make_fx's _tensor_constant attributes: lifted afterwards
        with gm.graph.inserting_before(node), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "get_attr of a plain tensor attribute": intended
            attr = gm.graph.get_attr(name)
        attr.meta.update({k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta", TABLE_KEY)})
        attr.meta["val"] = _fake_like(node.meta.get("val"), value)
        node.replace_all_uses_with(attr)
        folded += 1
    if folded:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return folded


def _evaluate(node: torch.fx.Node, constants: dict[str, torch.Tensor], values: dict) -> torch.Tensor | None:
    """The real value of `node` when all its ancestors are constant placeholders and aten ops; else None."""
    if node in values:
        return values[node]
    if node.op == "placeholder":
        value = constants.get(node.name)
    elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
            not node.target._schema.is_mutable and torch.Tag.nondeterministic_seeded not in node.target.tags:
        args = []
        for arg in node.all_input_nodes:
            if _evaluate(arg, constants, values) is None:
                values[node] = None
                return None
            args.append(arg)
        def real(x):
            return values[x] if isinstance(x, torch.fx.Node) else x
        call_args = torch.fx.node.map_aggregate(node.args, real)
        call_kwargs = torch.fx.node.map_aggregate(node.kwargs, real)
        try:
            value = node.target(*call_args, **call_kwargs)
        except Exception:  # noqa: BLE001 - an op that will not run eagerly here is simply not folded
            value = None
        if not isinstance(value, torch.Tensor):
            value = None
    else:
        value = None
    values[node] = value
    return value


def _source_numel(node: torch.fx.Node, constants: dict[str, torch.Tensor]) -> int:
    """Elements of the constant placeholders `node` is computed from."""
    seen, stack, total = set(), [node], 0
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            total += constants[current.name].numel()
        stack.extend(current.all_input_nodes)
    return total


def _fake_like(fake, value: torch.Tensor):
    """A fake tensor of `value`'s metadata in `fake`'s mode (what the node's users saw), or None."""
    mode = getattr(fake, "fake_mode", None)
    if mode is None:
        return None
    return mode.from_tensor(value, static_shapes=True)
