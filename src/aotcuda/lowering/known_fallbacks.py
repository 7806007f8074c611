"""The fallback kernels a program will have, where they are known before compiling: lower() refuses them then
(without ``allow_fallbacks``), with the kernels, source lines and advice the check after the compile gives,
instead of after a compile of a minute or more. (Ops AOTInductor would run through its proxy executor are
refused before compiling too: lowering/proxy_ops.py.)

- Complex math left as it was (ReplaceComplexWithRealPass refuses a program all or nothing): Inductor generates
  no code for complex values. ``torch._inductor.lowering.fallback_node_due_to_unsupported_type`` sends an op that
  reads or writes a complex tensor to its ATen kernel, and ``view_as_complex`` is a fallback of its own
  (``make_fallback``).
- Random ops (dropout in training mode, rand, bernoulli): Inductor generates their random numbers from seeds
  that one ATen kernel makes (``randint.low_out``: fallbacks.SEED_KERNELS); an op it has no lowering for is a
  fallback of its own.

Only what is certain counts, and anything else is left to the check after the compile: an op Inductor
decomposes first (its complex ``add`` becomes real math on a dtype view), complex values that come from constants
alone (Inductor may fold them), an op without a C shim (the proxy-executor refusal names it), and a library
kernel the device profile allows.
"""

from __future__ import annotations

import operator
import warnings

import torch
from torch.export import ExportedProgram

from aotcuda.lowering.fallbacks import (SEED_KERNEL, FallbackKernel, is_dropout, random_nodes, relative_source_line,
                                       shim_name, split_allowed, touches_complex)
from aotcuda.lowering.inductor_views import as_inductor_lowers, dropped_nodes


def known_fallback_kernels(ep: ExportedProgram, device_type: str, allowed: frozenset[str]) -> list[FallbackKernel]:
    """The fallback kernels outside ``allowed`` (C-shim op names) that ``ep`` will have on ``device_type`` for
    certain, named as the check after the compile names them ("aoti_torch_cpu_mul_Tensor"), with the user's
    source lines: those of complex math left as it was, then those of random ops."""
    tables = _inductor_tables()  # read once for both
    return (complex_fallback_kernels(ep, device_type, allowed, tables)
            + random_fallback_kernels(ep, device_type, allowed, tables))


def complex_fallback_kernels(ep: ExportedProgram, device_type: str, allowed: frozenset[str],
                             tables=None) -> list[FallbackKernel]:
    """The fallback kernels outside ``allowed`` (C-shim op names) that the complex ops of ``ep`` become
    on ``device_type``, one FallbackKernel each, named as the check after the compile names them
    ("aoti_torch_cpu_mul_Tensor"), with the user's source lines. Empty where none is certain (and on a torch
    whose Inductor lacks the functions read here). tables: ``_inductor_tables()``, read here when not given.
    An op without a C shim is the proxy-executor refusal's (lowering/proxy_ops.py)."""
    tables = tables or _inductor_tables()
    if tables is None:
        return []
    kernels: dict[str, FallbackKernel] = {}
    for node, op in complex_fallback_nodes(ep, tables):
        if str(op) not in tables[2]:
            continue
        name = f"aoti_torch_{device_type}_{shim_name(op)}"
        kernel = kernels.setdefault(name, FallbackKernel(name, shim_name(op), complex_valued=True))
        kernel.nodes.append(node.name)
        kernel.sources.append(relative_source_line(node))
    return split_allowed(list(kernels.values()), allowed)[0]


def complex_fallback_nodes(ep: ExportedProgram, tables=None) -> list[tuple[torch.fx.Node, torch._ops.OpOverload]]:
    """(node, the ATen op Inductor runs for it) for each op of ``ep`` on complex values that Inductor certainly sends
    to an ATen kernel, C shim or not: one that runs at every call (it depends on a user input), that Inductor neither
    decomposes nor drops (a no-op: lowering/inductor_views.py; a view other than those is a reshape), and that its
    lowering sends to a fallback. Empty on a torch whose Inductor lacks the functions read here."""
    tables = tables or _inductor_tables()
    if tables is None:
        return []
    lowering, decomposed, _ = tables
    from torch._library.utils import is_builtin

    from_inputs = _depends_on_user_inputs(ep)
    dropped = dropped_nodes(ep.graph)
    found = []
    for node in ep.graph.nodes:
        op = node.target
        if (node.op != "call_function" or not isinstance(op, torch._ops.OpOverload) or not is_builtin(op)
                or node not in from_inputs or not touches_complex(node) or op in decomposed
                or torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")):
            continue
        op = as_inductor_lowers(node, dropped)  # a no-op dropped; a view lowered as a reshape (inductor_views.py)
        if op is None:
            continue
        with warnings.catch_warnings():  # Inductor's "does not support code generation for complex operators"
            warnings.simplefilter("ignore")
            falls_back = op in lowering.fallbacks or lowering.fallback_node_due_to_unsupported_type(node)
        if falls_back:
            found.append((node, op))
    return found


def _inductor_tables():
    """(torch._inductor.lowering, Inductor's decomposition table, the ATen ops with a C shim), or None on a torch
    without one of them (nothing is then known before compiling: the check after it says all)."""
    try:
        from torch._inductor import lowering
        from torch._inductor.decomposition import select_decomp_table
        from torchgen.aoti.fallback_ops import inductor_fallback_ops
    except ImportError:
        return None
    return lowering, select_decomp_table(), inductor_fallback_ops


def _depends_on_user_inputs(ep: ExportedProgram) -> set[torch.fx.Node]:
    """The nodes whose values depend on a user input: their ops run at every call (Inductor cannot fold them
    into a constant at compile time)."""
    user_inputs = set(ep.graph_signature.user_inputs)
    reached: set[torch.fx.Node] = set()
    for node in ep.graph.nodes:  # in topological order
        if (node.op == "placeholder" and node.name in user_inputs) or any(a in reached for a in node.all_input_nodes):
            reached.add(node)
    return reached


def random_fallback_kernels(ep: ExportedProgram, device_type: str, allowed: frozenset[str],
                            tables=None) -> list[FallbackKernel]:
    """The kernels of ``ep``'s random ops that draw numbers at every call (``fallbacks.random_nodes``, then
    ``_draws_random_numbers``): Inductor's seed kernel for those it generates random numbers for (one kernel,
    every such op's nodes and lines, and whether one is a dropout: the message then says to call model.eval()),
    and the op's own kernel for one it has no lowering for. Empty on a torch whose Inductor lacks the functions
    read here. tables: ``_inductor_tables()``, read here when not given."""
    tables = tables or _inductor_tables()
    if tables is None:
        return []
    lowering, decomposed, shims = tables
    kernels: dict[str, FallbackKernel] = {}
    for node in random_nodes(ep):
        op = node.target
        if not _draws_random_numbers(node) or _empty(node):
            continue
        # rand, randn and their _like forms are in lowering.fallbacks (fallback_rand_default, make_fallback of
        # rand_like: for fallback_random), yet Inductor generates them from its seeds (replace_random)
        generated = op in _REPLACED_RANDOM or (op not in lowering.fallbacks
                                               and (op in lowering.lowerings or op in decomposed))
        if generated:
            name, packet = f"aoti_torch_{device_type}_{SEED_KERNEL}", SEED_KERNEL
        elif str(op) in shims:
            name, packet = f"aoti_torch_{device_type}_{shim_name(op)}", shim_name(op)
        else:
            continue  # no C shim: the proxy-executor refusal's
        kernel = kernels.setdefault(name, FallbackKernel(name, packet))
        kernel.nodes.append(node.name)
        kernel.sources.append(relative_source_line(node))
        kernel.dropout = kernel.dropout or is_dropout(node)
        kernel.other_random = kernel.other_random or not is_dropout(node)
    return split_allowed(list(kernels.values()), allowed)[0]


# What torch._inductor.fx_passes.replace_random turns into random numbers from Inductor's seeds (a generator
# argument aside, which export does not keep), and what Inductor's extra_random_decomps make rand or randn of.
_REPLACED_RANDOM = frozenset({torch.ops.aten.rand.default, torch.ops.aten.randn.default,
                              torch.ops.aten.rand_like.default, torch.ops.aten.randn_like.default})


def _empty(node: torch.fx.Node) -> bool:
    """Whether a node's random numbers are read by nothing, for every size: every tensor it makes has no
    element (``torch.rand(0)``), or every op that reads them makes none (``torch.rand(4, 4)[:0]``). Inductor
    then removes its buffer, and no kernel draws for it (the compile of such a program has no fallback kernel).
    The users of a node of several outputs are its getitems."""
    def makes_nothing(n):
        values = [v for v in torch.utils._pytree.tree_leaves(n.meta.get("val")) if isinstance(v, torch.Tensor)]
        return bool(values) and all(isinstance(v.numel(), int) and v.numel() == 0 for v in values)

    def readers(n):
        return [r for user in n.users for r in (readers(user) if user.target is operator.getitem else [user])]

    found = readers(node)
    return makes_nothing(node) or (bool(found) and all(user.op == "call_function" and makes_nothing(user)
                                                      for user in found))


# Ops that draw random numbers whatever their arguments (by name, in-place forms included). An op tagged
# nondeterministic_seeded may not: scaled_dot_product_attention draws only for a dropout_p above 0.
_ALWAYS_RANDOM = frozenset({"rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm",
                            "bernoulli", "normal", "uniform", "exponential", "geometric", "cauchy", "log_normal",
                            "multinomial", "poisson", "binomial"})


def _draws_random_numbers(node: torch.fx.Node) -> bool:
    """Whether a random op's node draws random numbers at every call: one of _ALWAYS_RANDOM, or a
    native_dropout in training with 0 < p < 1 (torch._decomp's own cases: p 0 or 1, or train not True, draw
    none)."""
    packet = node.target._schema.name.split("::")[-1].rstrip("_")
    if packet == "native_dropout":
        p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p")
        train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train")
        return isinstance(p, (int, float)) and 0 < p < 1 and train is True
    return packet in _ALWAYS_RANDOM
