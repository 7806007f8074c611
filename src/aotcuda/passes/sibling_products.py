"""ConcatSiblingProductsPass: matrix products that read the same activation become one product.

A transformer layer reads its normalized activation three times for q, k and v, and twice for a SwiGLU's
w1 and w3: ``mm(x, Wq.T)``, ``mm(x, Wk.T)``, ``mm(x, Wv.T)``. In a decode step each is a small kernel that
reads x again and launches on its own (the H200 profile of benchmarks/decode.py: 81 small projection
kernels at 28% of copy speed). One product over the weights stacked on their output dim,
``mm(x, cat([Wq, Wk, Wv]).T)``, reads x once, launches once, and gives each consumer its columns as a view
(``slice``), as gpt-fast and TensorRT-LLM store wqkv and w13.

What it matches, after lower()'s decompositions (``aten.linear`` and a 3-d ``matmul`` become
``view → mm/addmm(x, permute(W, [1, 0])) → view``): ``aten.mm`` and ``aten.addmm`` (beta = alpha = 1)
whose right operand is a transposed 2-d parameter used by nothing else, whose bias (addmm) is a 1-d
parameter used by nothing else, and whose left operand is the same node (or the same view, with the same
shape, of the same node). Siblings agree on op, dtype, input width and whether they have a bias. Dynamic
row counts (batch, sequence) are kept symbolic: the key compares the activation's shape as SymInt
expressions.

The stacked weight is made once, here, as a new parameter named after the ones it replaces
(``layers.0.attention.cat_wq_wk_wv.weight``); the originals leave the program's state, so the package
holds the same bytes. The program passed in is not changed (its weights are shared, not copied, with the
new program; the new parameter is the only new tensor).

Only products of at least ``min_rows`` rows (8 by default) are fused: on the H200 (torch 2.11, the 1.2B decoder
of benchmarks/decode.py, bound graph) the batch-8 step took 1186.3 µs with the pass against 1406.4 without,
where the projections are cuBLAS GEMMs and one GEMM launches once and reads x once; the batch-1 step took
987.8 against 978.4, where Inductor writes each one-row product as a reduction with the RMSNorm fused in,
which the stacked product's slices cost more than they save. Rows from 2 to 7 were not measured. A symbolic
row count (a dynamic batch or sequence) counts by its lower bound, the fewest rows the program may get.

Not covered: products through ``bmm`` or ``linear`` left undecomposed, a weight that is shared with another
op (tied embeddings), siblings reading different views of one tensor.
"""

from __future__ import annotations

import copy

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from aotcuda import switches
from aotcuda.passes.emit import emit, fake_of, replace_uses
from aotcuda.passes.program_copy import copied_graph_module, with_graph
from aotcuda.passes.result import PassResult

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_TRANSPOSES = (aten.permute.default, aten.t.default)


class ConcatSiblingProductsPass:
    """``pass(ep) → ep``: one product per group of products that read the same activation (module
    docstring). A GraphPass (passes/result.py): ``result.counts`` has ``groups`` (products made),
    ``products`` (products they replaced) and ``kept`` (groups of siblings left alone for having fewer than
    ``min_rows`` rows, or a symbolic row count that may be fewer).

    min_rows: the fewest rows (the left operand's first dim) a product must have for its group to be fused;
    1 fuses every group; None reads the switch AOTCUDA_SIBLING_PRODUCTS_MIN_ROWS (8 unless set)."""

    def __init__(self, min_rows: int | None = None) -> None:
        if min_rows is None:
            min_rows = max(1, int(switches.number("AOTCUDA_SIBLING_PRODUCTS_MIN_ROWS")))  # 0 lifts the limit
        if type(min_rows) is not int or min_rows < 1:
            raise ValueError(f"ConcatSiblingProductsPass: min_rows must be an int of at least 1; got {min_rows!r}")
        self.min_rows = min_rows
        self.result = PassResult(type(self).__name__)

    def __call__(self, ep: ExportedProgram) -> ExportedProgram:
        siblings = _sibling_groups(ep, ep.graph_module.graph)
        groups = [g for g in siblings if _fewest_rows(ep.graph_module.graph, g[0]) >= self.min_rows]
        kept = len(siblings) - len(groups)
        if not groups:
            self.result = PassResult(type(self).__name__, False, {"groups": 0, "products": 0, "kept": kept})
            return ep
        graph_module = copied_graph_module(ep)
        copied = {node.name: node for node in graph_module.graph.nodes}
        signature = copy.deepcopy(ep.graph_signature)
        state = dict(ep.state_dict)
        for group in groups:
            _fuse(graph_module.graph, [copied[name] for name in group], signature, state)
        graph_module.graph.eliminate_dead_code()
        graph_module.graph.lint()
        graph_module.recompile()
        self.result = PassResult(type(self).__name__, True,
                                 {"groups": len(groups), "products": sum(len(g) for g in groups), "kept": kept})
        return with_graph(ep, graph_module, graph_signature=signature, state_dict=state)


def _parameter_targets(ep: ExportedProgram) -> dict[str, str]:
    """placeholder name → state-dict key, for the program's parameters."""
    return {spec.arg.name: spec.target for spec in ep.graph_signature.input_specs
            if spec.kind == InputKind.PARAMETER and spec.target in ep.state_dict}


def _only_use(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    return list(node.users) == [user]


def _weight(transposed, product, parameters) -> torch.fx.Node | None:
    """W when ``transposed`` is ``permute(W, [1, 0])`` (or ``t(W)``) of a 2-d parameter used only here."""
    if not isinstance(transposed, torch.fx.Node) or transposed.target not in _TRANSPOSES:
        return None
    if transposed.target is aten.permute.default and list(transposed.args[1]) != [1, 0]:
        return None
    weight = transposed.args[0]
    if weight.op != "placeholder" or weight.name not in parameters or weight.meta["val"].dim() != 2:
        return None
    return weight if _only_use(weight, transposed) and _only_use(transposed, product) else None


def _member(node, parameters):
    """(key, activation) of a product this pass may fuse, else None."""
    if node.op != "call_function" or node.target not in (aten.mm.default, aten.addmm.default):
        return None
    if node.target is aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            return None
        bias, activation, transposed = node.args[:3]
        if not (isinstance(bias, torch.fx.Node) and bias.op == "placeholder" and bias.name in parameters
                and bias.meta["val"].dim() == 1 and _only_use(bias, node)):
            return None
    else:
        activation, transposed = node.args[:2]
    weight = _weight(transposed, node, parameters)
    if weight is None or not isinstance(activation, torch.fx.Node):
        return None
    root, value = activation, activation.meta["val"]
    while root.op == "call_function" and root.target in _VIEWS:
        root = root.args[0]
    key = (node.target, root.name, tuple(str(s) for s in value.shape), value.dtype, weight.meta["val"].dtype)
    return key, activation


def _sibling_groups(ep: ExportedProgram, graph) -> list[list[str]]:
    """Names of the products of each group of two or more siblings, in graph order."""
    parameters = _parameter_targets(ep)
    groups: dict[tuple, list[str]] = {}
    for node in graph.nodes:
        member = _member(node, parameters)
        if member is not None:
            groups.setdefault(member[0], []).append(node.name)
    return [names for names in groups.values() if len(names) > 1]


def _fewest_rows(graph, product_name: str) -> int:
    """The fewest rows the product's left operand can have: its size, or a symbolic size's lower bound."""
    product = next(node for node in graph.nodes if node.name == product_name)
    activation = product.args[1 if product.target is aten.addmm.default else 0]
    rows = activation.meta["val"].shape[0]
    if type(rows) is int:
        return rows
    lower = rows.node.shape_env.bound_sympy(rows.node.expr).lower
    return int(lower) if lower.is_finite else 1


def _stacked_name(targets: list[str]) -> str:
    """``layers.0.attention.wq.weight``, ``...wk.weight`` → ``layers.0.attention.cat_wq_wk.weight``."""
    parts = [t.split(".") for t in targets]
    head = 0
    while all(len(p) > head + 1 and p[head] == parts[0][head] for p in parts):
        head += 1
    tail = 0
    while all(len(p) > head + tail + 1 and p[-1 - tail] == parts[0][-1 - tail] for p in parts):
        tail += 1
    middle = "_".join("_".join(p[head:len(p) - tail]) for p in parts)
    return ".".join(parts[0][:head] + [f"cat_{middle}"] + (parts[0][len(parts[0]) - tail:] if tail else []))


def _new_parameter(graph, signature, state, olds: list[torch.fx.Node], tensor: torch.Tensor) -> torch.fx.Node:
    """A parameter placeholder holding ``tensor`` where the first of ``olds`` was; the olds' entries
    leave the signature and the state dict (their placeholders are erased once unused)."""
    specs = signature.input_specs
    old_names = {old.name for old in olds}
    index = next(i for i, spec in enumerate(specs) if spec.arg.name in old_names)
    targets = [next(s.target for s in specs if s.arg.name == old.name) for old in olds]
    target = _stacked_name(targets)
    first = min(olds, key=lambda node: list(graph.nodes).index(node))
    with graph.inserting_before(first):
        node = graph.placeholder("p_" + target.replace(".", "_"))
    node.meta["val"] = olds[0].meta["val"].fake_mode.from_tensor(tensor, static_shapes=True)
    specs.insert(index, InputSpec(kind=InputKind.PARAMETER, arg=TensorArgument(name=node.name), target=target,
                                  persistent=None))
    signature.input_specs[:] = [s for s in specs if s.arg.name not in old_names]
    for old_target in targets:
        del state[old_target]
    state[target] = torch.nn.Parameter(tensor, requires_grad=False)
    return node


def _fuse(graph, products: list[torch.fx.Node], signature, state) -> None:
    has_bias = products[0].target is aten.addmm.default
    transposes = [p.args[2 if has_bias else 1] for p in products]
    weights = [t.args[0] for t in transposes]
    biases = [p.args[0] for p in products] if has_bias else []
    targets = {s.arg.name: s.target for s in signature.input_specs}
    stacked = _new_parameter(graph, signature, state, weights,
                             torch.cat([state[targets[w.name]].detach() for w in weights]))
    bias = None
    if has_bias:
        bias = _new_parameter(graph, signature, state, biases,
                              torch.cat([state[targets[b.name]].detach() for b in biases]))
    first = products[0]  # in graph order: its activation is defined before every sibling
    with graph.inserting_before(first):
        transposed = emit(graph, aten.permute.default, (stacked, [1, 0]), like=first)
        activation = first.args[1 if has_bias else 0]
        args = (bias, activation, transposed) if has_bias else (activation, transposed)
        product = emit(graph, first.target, args, like=first)
    start = 0
    for old, weight in zip(products, weights):
        width = weight.meta["val"].shape[0]
        with graph.inserting_before(old):
            columns = emit(graph, aten.slice.Tensor, (product, 1, start, start + width), like=old)
        start += width
        replace_uses(old, columns, signature)
        _keep_views_valid(graph, columns)
        graph.erase_node(old)
    for node in [*transposes, *weights, *biases]:
        graph.erase_node(node)


def _keep_views_valid(graph, columns: torch.fx.Node) -> None:
    """A ``view`` of the columns (no longer contiguous) gets its value anew; where that view is not
    possible on the strided columns (a view that merges rows with columns), it reads a contiguous copy."""
    value = columns.meta["val"]
    for user in list(columns.users):
        if user.target is not aten.view.default or user.args[0] is not columns:
            continue
        try:
            user.meta["val"] = value.view(torch.fx.node.map_arg(user.args[1], fake_of))
        except (RuntimeError, ValueError):  # fake tensors raise the latter
            with graph.inserting_before(user):
                dense = emit(graph, aten.clone.default, (columns,), {"memory_format": torch.contiguous_format},
                             like=user)
            user.replace_input_with(columns, dense)
