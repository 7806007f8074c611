"""Triton kernels that aotcuda's CUDA passes put into a program, each a ``torch.library.triton_op``.

A Triton op stays one node through export and aotcuda's passes; AOTInductor's functionalization traces it
into its kernels, which the package compiles to cubins and launches itself: no fallback kernel, no proxy
executor (lowering/library_ops.py, ``is_triton_op``). Each op also has a plain-torch implementation for
the CPU (the reference its tests compare against), so a program with one still runs eagerly there.

Triton is optional: where it is not installed (a CPU-only machine), the ops exist with their CPU
implementation only, and the CUDA passes that would emit them are not offered (``HAVE_TRITON``).
"""

from __future__ import annotations

import importlib.util

HAVE_TRITON = importlib.util.find_spec("triton") is not None


def launcher(kernel):
    """What launches a Triton kernel from an op's implementation: ``torch.library.wrap_triton(kernel)``,
    which lets export and AOTInductor trace the launch into the program; under Triton's interpreter
    (TRITON_INTERPRET=1, the CPU tests) the kernel itself, since torch 2.11's ``wrap_triton`` refuses the
    interpreter's kernel objects ("only works on functions annotated with triton.jit")."""
    import os

    if os.environ.get("TRITON_INTERPRET") == "1":
        return kernel
    from torch.library import wrap_triton

    return wrap_triton(kernel)
