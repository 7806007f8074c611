"""In-place buffer reuse off for a program with a loop (scan, map, while_loop), so its C++ wrapper compiles.

Why: Inductor lowers ``scan`` and ``map`` to a while loop that writes their stacked outputs into buffers it
carries, and AOTInductor's C++ wrapper declares each carried buffer under its own name before the loop
(``CppWrapperCpu.codegen_while_loop``: ``RAIIAtenTensorHandle buf6(...)``) without recording it as allocated
(``wrapper.allocated``). When a kernel after the loop reuses such a buffer in place (``inplace_buffers``: the
output of ``ys + 1`` written over ys), ``codegen_inplace_reuse`` allocates the buffer first, and the wrapper
declares the name a second time: ``error: redeclaration of 'AtenTensorOpaque* buf6_handle'``, a C++ compile
error after the minutes of the compile. torch's alone (torch 2.13): ``aoti_compile_and_package`` of the real
``scan(step, zeros(b, d), u.transpose(0, 1))`` that returns ``ys + 1`` fails alike; a scan whose stacked output is
returned as it is, and a while_loop whose result is then added to, compile. A new user's S4D layer (a complex scan,
``ys.transpose(0, 1) + u * D`` after it) met it through aotcuda; ``allow_buffer_reuse=False`` does not help (that
switch is the reuse of freed buffers, which names no carried buffer again).

So a program with a loop is compiled with ``inplace_buffers=False`` (``loop_inductor_configs``; the option is one
switch for the whole compile): no kernel of it writes its output over a buffer it reads, each gets a buffer of its
own (freed buffers are still reused), a little more memory and the same kernels otherwise. The caller's own
``inplace_buffers`` always wins. Programs without a loop keep torch's default. The wrapper's own fix (recording the
carried names as allocated; with it the real scan above compiles and matches eager) was not taken: the kernel would then
write its output over the carried buffer, which before the first iteration is the loop's initial value, and whether
Inductor's reuse check sees through that alias (a loop that runs no iteration, over a buffer still read after it)
was not checked.
"""

from __future__ import annotations

from typing import Any

import torch
import torch._higher_order_ops  # noqa: F401  (registers while_loop, scan, map_impl)
from torch.export import ExportedProgram

# The loop ops Inductor lowers to a while loop with carried buffers (those this torch has).
LOOP_OPS = tuple(getattr(torch.ops.higher_order, name) for name in ("while_loop", "scan", "map_impl")
                 if hasattr(torch.ops.higher_order, name))


def has_loop(ep: ExportedProgram) -> bool:
    """Whether ``ep`` calls a loop op (LOOP_OPS), in its graph or in a subgraph (a loop inside a torch.cond)."""
    return any(node.op == "call_function" and node.target in LOOP_OPS
               for module in ep.graph_module.modules() if isinstance(module, torch.fx.GraphModule)
               for node in module.graph.nodes)


def loop_inductor_configs(configs: dict[str, Any], ep: ExportedProgram) -> dict[str, Any]:
    """``configs`` with ``inplace_buffers=False`` added where ``ep`` has a loop and the caller did not set it
    (module docstring); ``configs`` itself otherwise."""
    if "inplace_buffers" in configs or not has_loop(ep):
        return configs
    return {**configs, "inplace_buffers": False}
