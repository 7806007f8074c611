"""Programmatic dependent launch (PDL) of Inductor's Triton kernels in AOTInductor packages (a row of
aotcuda.lowering.torch_fixes, entered around the compile step; ``AOTCUDA_DEPENDENT_LAUNCH`` turns the codegen on).

What PDL is. On sm_90 and later a kernel launched with the attribute
``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` may start before the kernel ahead of it in the
stream has ended: once every program of that kernel has executed ``griddepcontrol.launch_dependents`` (or
exited). The dependent kernel must execute ``griddepcontrol.wait`` (which returns when the kernels ahead of
it have ended and their writes are visible) before it touches memory they write. What it does before the
wait (its prologue, index math, loads of weights nobody writes) overlaps the end of the kernel ahead. CUDA
graph capture keeps the relation as a programmatic edge between the two kernel nodes. (CUDA programming
guide, "Programmatic Dependent Launch and Synchronization"; PTX ISA, ``griddepcontrol``.)

What Inductor does. With ``triton.enable_pdl`` (torch 2.9 on, off by default), Inductor's Triton kernels on
sm_90+ carry the two instructions (torch/_inductor/codegen/triton.py: a ``tl.extra.cuda.gdc_wait()`` before the
first load or store of a buffer the scheduler's previous node writes, or before any access where the
previous node is not a generated kernel; ``gdc_launch_dependents()`` after the kernel's loads, always after a
wait), and mark the kernel ``launch_pdl`` in its ``triton_meta``; Triton's Python launcher then launches it
with the attribute, so torch.compile gets the overlap. Templates and user-defined Triton kernels are never
marked.

What AOTInductor lacks (torch 2.11 to 2.14; pytorch/pytorch#194079 adds it in 2.15, where this is a no-op). The
C++ wrapper launches every kernel with ``cuLaunchKernel`` (``launchKernel`` in the wrapper's kernel driver,
torch/_inductor/codegen/cuda/device_op_overrides.py), without the attribute: the instructions are compiled in and
do nothing (``griddepcontrol`` is a no-op for a kernel not launched as dependent). ``host_launches_for_pdl``
rewrites the generated wrapper before it is compiled: a ``launchKernelPdl`` beside ``launchKernel``, the same
arguments through ``cuLaunchKernelEx`` with the attribute, and each launch of a kernel whose ``triton_meta`` says
``launch_pdl`` and whose source executes ``gdc_wait()`` goes through it. Every other kernel keeps the plain
launch, which waits for the whole stream ahead: a user-defined Triton kernel (aotcuda's decode attention and FFT
ops) is never started early, and neither is a marked kernel without a wait (one that touches nothing the kernel
ahead writes, such as a fill). That second rule is what makes the order hold across more than two kernels: a
dependent kernel starts only once the kernel ahead has passed its own wait (Inductor triggers its dependents after
the wait) or ended, so everything before that one has ended; a kernel launched plainly starts after everything
ahead has ended. So before its wait a kernel can only meet the kernel right ahead of it, and Inductor's codegen
puts the wait before any access that kernel conflicts with.

Where the wrapper is not as expected (another launch helper's signature, no kernel driver) nothing is
rewritten: the kernels then run as without PDL, correct and unchanged in speed.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch

from aotcuda.switches import flag

log = logging.getLogger(__name__)

# The kernel driver's launch helper, as Inductor writes it (torch 2.11-2.14): its parameter list is what the
# rewritten calls pass on unchanged, so the rewrite requires exactly these parameters.
_LAUNCH_DEFINITION = re.compile(
    r"static inline void launchKernel\(\s*CUfunction func,\s*uint32_t gridX,\s*uint32_t gridY,\s*uint32_t gridZ,"
    r"\s*uint32_t numWarps,\s*uint32_t sharedMemBytes,\s*void\* args\[\],\s*cudaStream_t stream\)")
# A launch in a kernel's call function, launchKernel(kernels_.NAME, grid_0, grid_1, grid_2, warps, shared, args,
# stream) (AOT mode; NAME alone in JIT mode): rewritten only with the definition's eight plain arguments, so that
# a torch whose calls pass more (a launch flag of its own) is left as it is.
_LAUNCH_CALL = re.compile(r"\blaunchKernel\((\s*(?:kernels_\.)?(\w+)\s*,(?:[^,();]*,){6}[^,();]*\);)")

_PDL_LAUNCH_HELPER = """\
// aotcuda (lowering/dependent_launch.py): a kernel Inductor compiled with launch_pdl, launched as a
// programmatic dependent of the kernel ahead of it; the kernel's own griddepcontrol.wait orders its accesses.
static inline void launchKernelPdl(
        CUfunction func,
        uint32_t gridX,
        uint32_t gridY,
        uint32_t gridZ,
        uint32_t numWarps,
        uint32_t sharedMemBytes,
        void* args[],
        cudaStream_t stream) {
    CUlaunchAttribute attribute[1];
    attribute[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute[0].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig launch = {};
    launch.gridDimX = gridX;
    launch.gridDimY = gridY;
    launch.gridDimZ = gridZ;
    launch.blockDimX = 32 * numWarps;
    launch.blockDimY = 1;
    launch.blockDimZ = 1;
    launch.sharedMemBytes = sharedMemBytes;
    launch.hStream = stream;
    launch.attrs = attribute;
    launch.numAttrs = 1;
    CUDA_DRIVER_CHECK(cuLaunchKernelEx(&launch, func, args, nullptr));
}

"""


def rewrite_launches(wrapper_code: str, launches_dependent: Callable[[str], bool]) -> tuple[str, int]:
    """``wrapper_code`` (an AOTInductor C++ wrapper's source) with each launch of a kernel for which
    ``launches_dependent(kernel_name)`` is true made a programmatic dependent launch, and how many launch
    sites were rewritten. Unchanged (0) where the wrapper has no kernel driver of the expected signature."""
    definition = _LAUNCH_DEFINITION.search(wrapper_code)
    if definition is None:
        return wrapper_code, 0
    count = 0

    def launch(match: re.Match) -> str:
        nonlocal count
        if not launches_dependent(match.group(2)):
            return match.group(0)
        count += 1
        return "launchKernelPdl(" + match.group(1)

    head, tail = wrapper_code[:definition.start()], wrapper_code[definition.start():]
    tail = _LAUNCH_CALL.sub(launch, tail)
    if count == 0:
        return wrapper_code, 0
    return head + _PDL_LAUNCH_HELPER + tail, count


def _kernel_sources(graph) -> dict[str, str]:
    """The Triton source of each kernel of ``graph`` (a GraphLowering) by kernel name, from its wrapper's
    record of the kernels it defined (torch 2.13's ``_kernel_name_to_body``, else ``src_to_kernel``)."""
    wrapper = getattr(graph, "wrapper_code", None)
    by_name = dict(getattr(wrapper, "_kernel_name_to_body", None) or {})
    for source, name in (getattr(wrapper, "src_to_kernel", None) or {}).items():
        by_name.setdefault(name, source)
    return by_name


def _launches_dependent(sources: dict[str, str]) -> Callable[[str], bool]:
    """Whether a kernel may be launched as a programmatic dependent: Inductor compiled it with launch_pdl (its
    CudaKernelParamCache entry's triton_meta) and its source waits on the kernel ahead (``gdc_wait()``)."""
    from torch._inductor.codecache import CudaKernelParamCache

    def dependent(kernel_name: str) -> bool:
        params = CudaKernelParamCache.get(kernel_name) or {}
        marked = (params.get("triton_meta") or {}).get("launch_pdl") is True
        return marked and "gdc_wait()" in sources.get(kernel_name, "")

    return dependent


def _torch_launches_pdl_itself() -> bool:
    """Whether the installed torch's AOTInductor already launches PDL kernels with the attribute (#194079)."""
    from torch._inductor.codegen.cuda import device_op_overrides

    return "cuLaunchKernelEx" in device_op_overrides.CUDADeviceOpOverrides().kernel_driver()


def _available() -> bool:
    from torch._inductor import codecache, config

    return torch.version.hip is None and hasattr(config.triton, "enable_pdl") and hasattr(codecache, "AotCodeCompiler")


def with_pdl_codegen(device: torch.device, configs: dict[str, Any]) -> dict[str, Any]:
    """``configs`` (the Inductor options of a package for ``device``) with ``triton.enable_pdl`` on where
    ``AOTCUDA_DEPENDENT_LAUNCH`` asks for it: a CUDA device, a torch with Inductor's PDL codegen, and no
    ``triton.enable_pdl`` of the caller's (which wins)."""
    if device.type != "cuda" or "triton.enable_pdl" in configs or not flag("AOTCUDA_DEPENDENT_LAUNCH"):
        return configs
    if not _available():
        return configs
    return {**configs, "triton.enable_pdl": True}


@contextlib.contextmanager
def host_launches_for_pdl() -> Iterator[None]:
    """For the block, AOTInductor's C++ wrappers launch the kernels Inductor marked ``launch_pdl`` as programmatic
    dependent launches (see the module doc). A no-op where Inductor has no PDL codegen, on ROCm, and where
    torch's wrapper launches them so itself. Kernels are marked only when ``triton.enable_pdl`` is on."""
    if not _available() or _torch_launches_pdl_itself():
        yield
        return
    from torch._inductor.codecache import AotCodeCompiler

    original = AotCodeCompiler.__dict__["compile"]
    compile_function = original.__func__

    @functools.wraps(compile_function)
    def compile_with_pdl_launches(cls, graph, wrapper_code, *args, **kwargs):
        from torch._inductor import config

        if config.triton.enable_pdl:  # the package's options, patched in for its compile: else no kernel is marked
            wrapper_code, count = rewrite_launches(wrapper_code, _launches_dependent(_kernel_sources(graph)))
            if count:
                log.info("aotcuda: %d kernel launch sites made programmatic dependent launches", count)
        return compile_function(cls, graph, wrapper_code, *args, **kwargs)

    AotCodeCompiler.compile = classmethod(compile_with_pdl_launches)
    try:
        yield
    finally:
        AotCodeCompiler.compile = original
