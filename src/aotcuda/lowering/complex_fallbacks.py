"""The fallback kernels that complex math left as it was will become, known before compiling.

Where ReplaceComplexWithRealPass refuses a program (all or nothing), its complex ops reach Inductor, which
generates no code for complex values: ``torch._inductor.lowering.fallback_node_due_to_unsupported_type``
sends an op that reads or writes a complex tensor to its ATen kernel, and ``view_as_complex`` is a fallback
of its own (``make_fallback``). Without ``allow_fallbacks`` lower() would refuse the package after a compile
of a minute or more; these are read off the program with Inductor's own rule instead, so that lower()
refuses before compiling, with the same kernels and source lines.

Only what is certain counts, and anything else is left to the check after the compile as before: an op
Inductor decomposes first (its complex ``add`` becomes real math on a dtype view), an op on values that
come from constants alone (Inductor may fold them), an op without a C shim (the proxy-executor refusal,
lowering/proxy_ops.py, names it), and a library kernel the device profile allows.
"""

from __future__ import annotations

import warnings

import torch
from torch.export import ExportedProgram

from aotcuda.lowering.fallbacks import FallbackKernel, relative_source_line, shim_name, split_allowed, touches_complex


def complex_fallback_kernels(ep: ExportedProgram, device_type: str, allowed: frozenset[str]) -> list[FallbackKernel]:
    """The fallback kernels outside ``allowed`` (C-shim op names) that the complex ops of ``ep`` become
    on ``device_type``, one FallbackKernel each, named as the check after the compile names them
    ("aoti_torch_cpu_mul_Tensor"), with the user's source lines. Empty where none is certain (and on a torch
    whose Inductor lacks the functions read here)."""
    try:
        from torch._inductor import lowering
        from torch._inductor.decomposition import select_decomp_table
        from torch._library.utils import is_builtin
        from torchgen.aoti.fallback_ops import inductor_fallback_ops
    except ImportError:
        return []
    decomposed = select_decomp_table()
    from_inputs = _depends_on_user_inputs(ep)
    kernels: dict[str, FallbackKernel] = {}
    for node in ep.graph.nodes:
        op = node.target
        if (node.op != "call_function" or not isinstance(op, torch._ops.OpOverload) or not is_builtin(op)
                or node not in from_inputs or not touches_complex(node) or op in decomposed
                or torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
                or str(op) not in inductor_fallback_ops):
            continue
        with warnings.catch_warnings():  # Inductor's "does not support code generation for complex operators"
            warnings.simplefilter("ignore")
            falls_back = op in lowering.fallbacks or lowering.fallback_node_due_to_unsupported_type(node)
        if not falls_back:
            continue
        name = f"aoti_torch_{device_type}_{shim_name(op)}"
        kernel = kernels.setdefault(name, FallbackKernel(name, shim_name(op), complex_valued=True))
        kernel.nodes.append(node.name)
        kernel.sources.append(relative_source_line(node))
    return split_allowed(list(kernels.values()), allowed)[0]


def _depends_on_user_inputs(ep: ExportedProgram) -> set[torch.fx.Node]:
    """The nodes whose values depend on a user input: their ops run at every call (Inductor cannot fold them
    into a constant at compile time)."""
    user_inputs = set(ep.graph_signature.user_inputs)
    reached: set[torch.fx.Node] = set()
    for node in ep.graph.nodes:  # in topological order
        if (node.op == "placeholder" and node.name in user_inputs) or any(a in reached for a in node.all_input_nodes):
            reached.add(node)
    return reached
