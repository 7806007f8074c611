"""Programs and package builders shared by the runtime tests (the fixtures live in conftest.py).

A package is built with ``torch._inductor.aoti_compile_and_package`` directly (not aotcuda.lower, so that
these tests depend on the runtime alone), and gets aotcuda's signature entry from its ExportedProgram.
"""

import torch

from aotcuda.runtime.package import signature_from_exported_program, write_signature


class Twice(torch.nn.Module):
    """Returns one tensor in two non-adjacent slots: AOTI writes one handle into slots 0 and 2."""

    def forward(self, x):
        y = x * 2
        return y.detach(), x + 1, y.detach()


class Structured(torch.nn.Module):
    """A weight, a nested keyword input and a nested output structure."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, extra):
        h = self.lin(x)
        return {"h": h, "pair": (extra["scale"] * h, x.sum(-1))}


BATCH = torch.export.Dim("batch", min=2, max=64)


def build_package(module, args, path, *, kwargs=None, dynamic_shapes=None, signed=True, device="cpu"):
    """Export, compile and package ``module``; add the aotcuda signature unless signed=False."""
    ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
    torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
    if signed:
        write_signature(path, signature_from_exported_program(ep, device))
    return str(path)


def twice_package(path, device="cpu", signed=True):
    x = torch.randn(3, 4, device=device)
    return build_package(Twice(), (x,), path, dynamic_shapes=({0: BATCH},), signed=signed, device=device)
