"""Complex Python numbers as scalar arguments of fallback kernels: what AOTInductor cannot compile.

AOTInductor's C++ wrapper passes a fallback kernel's Scalar arguments as int, float or bool only
(torch/_inductor/codegen/cpp_wrapper_cpu.py asserts so, without a message). A program whose complex math is left
to ATen kernels (ReplaceComplexWithRealPass refused it) and one of whose ops takes a complex number where its
schema says Scalar (`w ** 1j` on a complex w; `masked_fill(mask, 2j)`, which export makes a `scalar_tensor(2j)`)
ended its compile in `InductorError: AssertionError:` and nothing after it, with allow_fallbacks=True, the fix the
refusal had advised (torch's own aoti_compile_and_package fails the same way; a new user's trial, 2026-12-07).
A number where the op takes a tensor (`z * 1j`: mul.Tensor) becomes a constant tensor and compiles, and so does a
number held in a buffer (`w ** self.exponent`: pow.Tensor_Tensor), which is the fix said here.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from aotcuda.lowering.fallbacks import relative_source_line, touches_complex


def complex_scalar_nodes(ep: ExportedProgram) -> list[torch.fx.Node]:
    """The op nodes on complex values that take a Python complex number as a Scalar argument: each one is an ATen
    kernel in the package (Inductor generates no code for complex values) that AOTInductor cannot call."""
    return [node for node in ep.graph.nodes
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and _complex_scalar(node) is not None and touches_complex(node)]


def _complex_scalar(node: torch.fx.Node) -> tuple[str, complex] | None:
    """(argument name, value) of the node's first Scalar argument that is a Python complex number, or None."""
    for index, argument in enumerate(node.target._schema.arguments):
        value = node.args[index] if index < len(node.args) else node.kwargs.get(argument.name)
        kind = argument.type.getElementType() if isinstance(argument.type, torch.OptionalType) else argument.type
        if isinstance(value, complex) and isinstance(kind, torch.NumberType):
            return argument.name, value
    return None


def complex_scalar_lines(nodes: list[torch.fx.Node]) -> list[str]:
    """Why allow_fallbacks cannot ship these kernels, each with its source line, and the fixes that work."""
    lines = ["allow_fallbacks=True is no fix here: AOTInductor's C++ wrapper passes a fallback kernel's scalar "
             "arguments as int, float or bool only, and these ops of the complex math left as it was take a complex "
             "number as one (the compile would end in torch's bare `InductorError: AssertionError:`, as torch's own "
             "aoti_compile_and_package does):"]
    for node in nodes:
        name, value = _complex_scalar(node)
        lines.append(f"  - {node.target} (node {node.name}) takes {value!r} for its argument {name}  <- {relative_source_line(node)}")
    name, value = _complex_scalar(nodes[0])
    fixes = [f"Fix what the pass refused, so that it rewrites the complex math into real math"]
    held = [node for node in nodes if node.target in _BUFFER_TAKES]
    if held:  # pow.Tensor_Tensor, where.self then: a buffer is a tensor there
        name, value = _complex_scalar(held[0])
        fixes.append(f"for a power's exponent or a masked_fill/where value, hold the number in a buffer, "
                     f"self.register_buffer('value', torch.tensor({value!r})), used in place of {value!r}")
    if len(held) < len(nodes):  # alpha=, a fill or pad value: export reads a buffer there as a number again
        value = next(_complex_scalar(node)[1] for node in nodes if node.target not in _BUFFER_TAKES)
        fixes.append(f"for any other, take the number in as a factor of a tensor (`x * {value!r}`, which the kernel "
                     "takes as a tensor) instead of as an argument: `e + e * 1j` for `torch.add(e, e, alpha=1j)`, "
                     "`torch.ones_like(z) * 2j` for `torch.full_like(z, 2j)` (a buffer there is read as a number "
                     "again, and export refuses it)")
    lines.append("; or ".join(fixes) + ".")
    return lines


# Where a buffer in place of the number compiles (review39b): the power becomes pow.Tensor_Tensor, masked_fill's and
# where's value (scalar_tensor) a where.self; alpha=, full_like's and a pad's value read the buffer as a number again.
_BUFFER_TAKES = (torch.ops.aten.pow.Tensor_Scalar, torch.ops.aten.pow.Scalar, torch.ops.aten.scalar_tensor.default)


def complex_scalars_message(nodes: list[torch.fx.Node], refusal_line: str | None) -> str:
    """The refusal before compiling where allow_fallbacks would compile the rest: what the pass refused (the
    first thing to fix), then the kernels that take complex numbers."""
    head = "aotcuda refuses this program before compiling: AOTInductor cannot compile it, with allow_fallbacks=True or without."
    return "\n".join([head, *([refusal_line] if refusal_line else []), *complex_scalar_lines(nodes)])
