"""Refuse before compiling what is known before compiling: ops that AOTInductor would run through its proxy
executor, which aotcuda's runtime does not have (a package with one runs only in torch's loader).

Inductor turns each op of the program into generated code (a lowering or a decomposition) or a fallback
kernel; a fallback is a C-shim call where torchgen wrote a shim for the ATen overload
(``torchgen.aoti.fallback_ops.inductor_fallback_ops``, the list Inductor itself reads,
torch/_inductor/ir.py), a proxy-executor call otherwise, and always for a custom op (unless the user gave it
a C shim through ``torch._inductor.config.aot_inductor.custom_ops_to_c_shims``). All of that can be read
off the program and the installed torch, so lower() refuses such a program before a compile of minutes,
with the one hint that applies to the op, instead of after it.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from aotcuda.lowering.fallbacks import (KNOWN_FIXES, FallbackKernel, parametrization_of, refusal_line,
                                        relative_source_line, touches_complex)
from aotcuda.lowering.library_ops import has_inductor_lowering, is_custom_op, is_triton_op
from aotcuda.passes.complex_to_real.lapack_kernels import LAPACK_KERNELS, called_as, lapack_hint


def _inductor_generates(op: torch._ops.OpOverload) -> bool:
    """Whether Inductor has generated code for op: a composite (traced into other ops before Inductor sees
    it, as scaled_dot_product_attention), a decomposition, or a lowering that is not a fallback."""
    from torch._inductor import lowering
    from torch._inductor.decomposition import select_decomp_table

    composite = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    if composite or op in select_decomp_table():
        return True
    return op in lowering.lowerings and op not in lowering.fallbacks


def _has_c_shim(op: torch._ops.OpOverload) -> bool:
    if is_custom_op(op):
        return op in torch._inductor.config.aot_inductor.custom_ops_to_c_shims
    from torchgen.aoti.fallback_ops import inductor_fallback_ops

    return str(op) in inductor_fallback_ops


# Checks Inductor lowers to no kernel, whatever their operand's dtype: a complex operand's
# ``aten._assert_tensor_metadata`` (a ``.to(device)`` in the model) was predicted as a proxy-executor op, where the
# compile calls nothing for it (CI, 2026-12-07: a complex program lowered with allow_fallbacks listed it only as a
# complex node no call was traced to).
_NO_KERNEL = {torch.ops.aten._assert_tensor_metadata.default, torch.ops.aten._assert_scalar.default,
              torch.ops.aten._assert_async.default, torch.ops.aten._assert_async.msg}


def proxy_executor_kernels(ep: ExportedProgram, device_type: str = "cuda") -> list[FallbackKernel]:
    """The ops of ep that AOTInductor would run through its proxy executor, one FallbackKernel each (named
    as the fallback check names them), with the user's source lines. A Triton op (torch.library.triton_op)
    becomes its own kernels in the package on CUDA; on another device it is refused here. A custom op with an
    Inductor lowering of its own (library_ops.has_inductor_lowering) is generated code."""
    from aotcuda.lowering.known_fallbacks import complex_fallback_nodes

    # complex values: Inductor sends an op it has a lowering for to its ATen kernel (a clone to another layout)
    on_complex = {node: op for node, op in complex_fallback_nodes(ep)}
    kernels: dict[str, FallbackKernel] = {}
    for node in ep.graph.nodes:
        op = node.target
        if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
            continue
        if (is_triton_op(op) and device_type == "cuda") or has_inductor_lowering(op):
            continue
        if node in on_complex:
            if _has_c_shim(on_complex[node]) or op in _NO_KERNEL:
                continue
        elif not is_custom_op(op) and (op.namespace != "aten" or _inductor_generates(op)):
            continue
        if _has_c_shim(op):
            continue
        name = op._schema.name
        kernel = kernels.setdefault(name, FallbackKernel(f"{name} (proxy executor)", name))
        kernel.complex_valued = kernel.complex_valued or touches_complex(node)
        kernel.nodes.append(node.name)
        kernel.sources.append(relative_source_line(node))
        kernel.functions.append(called_as(node))
        parametrized = parametrization_of(node)  # None for a node outside a parametrization: no hint of its own
        if parametrized not in kernel.parametrized:
            kernel.parametrized.append(parametrized)
    return list(kernels.values())


def proxy_executor_message(kernels: list[FallbackKernel], untraced: dict[str, str], refusal=None,
                           complex_scalars: list[str] = ()) -> str:
    """The refusal: each op with its source lines, then the one hint that applies to it. Where the complex pass
    refused the program, what it refused comes first: the complex ops among these are there because the pass left
    the complex math as it was (a new user's dynamic FFT without a max read "rewrite that line with ops that have
    generated code" first, and the fix, a Dim max, last), and each of them says so instead of its generic hint.
    `complex_scalars` (complex_scalars.complex_scalar_lines): why allow_fallbacks cannot compile it either, said
    in place of the note that it can."""
    lines = ["aotcuda refuses this program before compiling: "
             + (f"{refusal_line(refusal)} So AOTInductor would run " if refusal is not None else "AOTInductor would run ")
             + f"{len(kernels)} op(s) through its proxy executor, which aotcuda.load does not have:"]
    lines += [f"  - {kernel.describe()}" for kernel in kernels]
    for kernel in kernels:
        if refusal is not None and refusal.node in kernel.nodes:
            hint = _refused_op_hint(kernel)
        elif refusal is not None and kernel.complex_valued:
            hint = ("complex math ReplaceComplexWithRealPass rewrites into generated code once what it refused "
                    "(above) is fixed")
        elif kernel.parametrized and None not in kernel.parametrized:
            hint = _parametrization_hint(kernel)
        elif kernel.op in LAPACK_KERNELS:
            hint = lapack_hint(kernel.op, kernel.functions)
        else:
            hint = _hint(kernel.op, untraced)
        lines.append(f"  {kernel.op}: {hint}")
    if not complex_scalars:
        lines.append("(allow_fallbacks=True compiles it anyway, for torch._inductor.aoti_load_package only.)")
    return "\n".join([*lines, *complex_scalars])


def _refused_op_hint(kernel: FallbackKernel) -> str:
    """The op the complex pass refused is itself the kernel: no fix elsewhere makes the pass rewrite it.
    A new user's trial (2026-12-07): torch.linalg.eigvals read "aten::linalg_eig: complex math
    ReplaceComplexWithRealPass rewrites into generated code once what it refused (above) is fixed", what it refused
    being that same linalg_eig."""
    why = "it is the op the pass refused (above), so no change elsewhere in the model removes it: "
    if kernel.op in LAPACK_KERNELS:
        return why + lapack_hint(kernel.op, kernel.functions)
    return why + ("Inductor has neither generated code nor a C shim for it on complex values; compute it outside the "
                  "program (before or after the call), or write it in ops that docs/ops.md lists")


def _parametrization_hint(kernel: FallbackKernel) -> str:
    """A kernel that computes a parametrized tensor (torch.nn.utils.parametrize: orthogonal's householder
    product or solve; its matrix_exp is generated code since lowering/matrix_exp.py): the tensor is the same at every
    call of an inference program, so baking it removes the op.
    Sixth new user (2026-12-07): `orthogonal(nn.Linear(6, 6))` got "rewrite that line of the model", the line being
    the Linear's call, which needs no rewrite."""
    module, tensor, kind = kernel.parametrized[0]
    owner = f"model.{module}" if module else "model"
    named = ", ".join(f"{m + '.' if m else ''}{t} from its parametrization ({k.rsplit('.', 1)[-1]})"
                      for m, t, k in kernel.parametrized[:3])
    return (f"it computes {named} (torch.nn.utils.parametrize), which does not change between "
            "calls of an inference program. Bake it into a plain tensor before lowering: "
            f"torch.nn.utils.parametrize.remove_parametrizations({owner}, {tensor!r}, leave_parametrized=True) "
            "(in place; to keep the parametrized model, bake a second one built alike: baking a copy.deepcopy "
            "breaks the original, which shares its parametrized class, torch 2.13)")


def _hint(op: str, untraced: dict[str, str]) -> str:
    if op in KNOWN_FIXES:
        return KNOWN_FIXES[op]
    from torch._library import triton

    if op in getattr(triton, "triton_ops_to_kernels", {}):
        return ("a Triton op (torch.library.triton_op): its kernels compile for CUDA only; lower for CUDA, or give "
                "the model a plain-torch path on this device")
    if op in untraced:
        return (f"a custom op whose implementation aotcuda could not trace ({untraced[op]}); make it plain torch "
                "without Python control flow on tensor values, or register a C shim for it "
                "(torch._inductor.config.aot_inductor.custom_ops_to_c_shims)")
    if "::" in op and not op.startswith("aten::"):
        return ("a custom op with no Python implementation to trace (a C++ or CUDA kernel): register a C shim for "
                "it (torch._inductor.config.aot_inductor.custom_ops_to_c_shims), or write it with torch.library."
                "custom_op in plain torch")
    return (f"{op} has no generated code in Inductor and no C shim in this torch ({torch.__version__}); rewrite "
            "that line of the model with ops that have either")
