"""Where the pair form of each complex constant lives: on the device its program copies it to.

Models often keep complex tables as plain attributes on the CPU and move them in forward
(`self.freqs.to(x.device)`, diffusers' Qwen-Image). torch.export lifts such a table as a CPU constant
followed by `_to_copy(device=cuda)`. While the table was complex, only library (fallback) kernels read
it; once it is a real pair, Inductor fuses the copy into a Triton kernel, and Inductor's device copy of
a constant (ir.ConstantBuffer.constant_to_device, torch 2.11–2.13) keeps the constant's CPU layout: the
kernel's argument claims to be a CPU buffer, and AOTInductor's autotuning hands the kernel a CPU tensor
("Pointer argument cannot be accessed from Triton (cpu tensor?)").

The pass converts these constants anyway (complex → pair), so it stores the pair directly on the
device every one of its uses copies it to. The `_to_copy` nodes stay (same-device copies, which
Inductor turns into plain reads), so the program computes exactly what it did before.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.boundary import STATE_KINDS

aten = torch.ops.aten

# Uses that do not read the values, and which the pass drops for complex operands.
_IGNORED_USES = (aten._assert_tensor_metadata.default,)


def _copy_device(use: torch.fx.Node) -> torch.device | None:
    """The device a `_to_copy` use copies to, or None for any other use."""
    if use.op != "call_function" or use.target is not aten._to_copy.default:
        return None
    device = use.kwargs.get("device")
    return torch.device(device) if device is not None else None


def used_device(placeholder: torch.fx.Node) -> torch.device | None:
    """The one device all value-reading uses of a constant copy it to, if it differs from its own."""
    own = placeholder.meta["val"].device
    devices = set()
    for use in placeholder.users:
        if use.op == "call_function" and use.target in _IGNORED_USES:
            continue
        device = _copy_device(use)
        if device is None:
            return None
        devices.add(device)
    if len(devices) != 1:
        return None
    (device,) = devices
    return device if device != own else None


def constant_devices(ep: torch.export.ExportedProgram, complex_placeholders: set[str]) -> dict[str, torch.device]:
    """{placeholder name: device} for the complex parameters, buffers and constants that are only ever
    used on another device (see the module docstring); the others are absent and keep their device."""
    state = {s.arg.name for s in ep.graph_signature.input_specs if s.kind in STATE_KINDS}
    devices = {}
    for node in ep.graph.find_nodes(op="placeholder"):
        if node.name in complex_placeholders & state and (device := used_device(node)) is not None:
            devices[node.name] = device
    return devices
