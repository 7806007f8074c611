"""Which device a loaded package runs on, checked against the package and this machine."""

from __future__ import annotations

import functools
import os
import platform

import torch

from aotcuda.errors import Advice, DeviceError, PackageError, clipped
from aotcuda.runtime.libloader import compiled_machine_flags, holds_amx_instructions
from aotcuda.runtime.package import ExtractedPackage

__all__ = ["resolve_device"]

_DEVICE_TYPES = ("cpu", "cuda")  # what the runtime drives (streams, CUDA graphs, handles)

# The vector instruction sets Inductor compiles a package's C++ for (its metadata's AOTI_CPU_ISA: the upper-cased
# str() of torch._inductor.cpu_vec_isa.pick_vec_isa() on the machine that lowered it, one token each, with that ISA's
# -m flags), and torch's probe of this CPU for each: the ones Inductor's own x86_isa_checker picks the ISA by
# (cpuid through cpuinfo, not /proc/cpuinfo, which a sandbox may show otherwise).
_ISA_PROBES = {
    "AVX2": ("_is_avx2_supported",),
    "AVX512": ("_is_avx512_supported",),
    "AVX512_VNNI": ("_is_avx512_supported", "_is_vnni_supported"),
    "AMX_TILE": ("_is_amx_tile_supported",),
}


def resolve_device(package: ExtractedPackage, device) -> torch.device:
    """The device a Program of ``package`` runs on: ``device`` (default: the package's device type, on CUDA the
    current device), checked against the package and this machine.

    Raises PackageError naming the fix when the package was built for another device type or for a device
    type aotcuda does not run, or when the device is not here (no CUDA, an index past the visible devices);
    DeviceError, as lower() raises it, for a CPU index other than 0.
    """
    package_type = package.device_type
    if not package_type:
        raise PackageError(f"{package.path!r}: the model's metadata names no device (no AOTI_DEVICE_KEY); "
                           "the package is damaged or not from AOTInductor, lower the model again")
    if package_type not in _DEVICE_TYPES:
        raise PackageError(f"{package.path!r} was built for {package_type!r}; aotcuda runs packages built for "
                           f"{' or '.join(_DEVICE_TYPES)}: lower the model again with one of those devices")
    if package_type == "cpu":  # a CUDA package's metadata records the ISA too, which its host code is not built for
        check_cpu_isa(package)
    try:
        wanted = torch.device(device) if device is not None else torch.device(package_type)
    except (RuntimeError, TypeError) as exc:
        raise PackageError(f"device={device!r} is not a device ({exc}); pass e.g. 'cpu' or 'cuda:0'") from exc
    if wanted.type == "cpu" and wanted.index:  # refused as lower() refuses it: the index would mean nothing
        raise DeviceError(f"device={str(wanted)!r} asked for, but the CPU takes no device index (torch has one CPU "
                          "device, and places every cpu:N on it); use device='cpu'", advice=(Advice("device", "cpu"),))
    if wanted.type == "cpu":  # cpu:0 is torch's name for the CPU: the Program's device is 'cpu', as its tensors'
        wanted = torch.device("cpu")
    if wanted.type not in _DEVICE_TYPES:  # lower() refuses it too: "lower again for mps" was advice no call takes
        raise PackageError(f"device={device!r}: aotcuda runs packages on {' or '.join(_DEVICE_TYPES)}, not "
                           f"{wanted.type}; load this one with device={package_type!r}",
                           advice=(Advice("device", package_type),))
    if wanted.type != package_type:
        raise PackageError(f"the package was built for {package_type} and cannot run on {wanted}; "
                           f"load it with device={package_type!r}, or lower the model again with device={wanted.type!r}",
                           advice=(Advice("device", package_type), Advice("device", wanted.type, relower=True)))
    if wanted.type == "cuda":
        if not torch.cuda.is_available():
            raise PackageError(f"{package.path!r} was built for CUDA, but torch sees no CUDA device here; run it "
                               "on a machine with a CUDA GPU, or lower the model again with device='cpu'",
                               advice=(Advice("device", "cpu", relower=True),))
        if wanted.index is None:
            wanted = torch.device("cuda", torch.cuda.current_device())
        count = torch.cuda.device_count()
        if wanted.index >= count:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            raise PackageError(f"device={str(wanted)!r}, but torch sees {count} CUDA device(s) here (cuda:0"
                               f"{'' if count == 1 else f' to cuda:{count - 1}'}"
                               f"{'' if visible is None else f'; CUDA_VISIBLE_DEVICES={visible!r}'}); pass one of those")
    return wanted


def check_cpu_isa(package: ExtractedPackage) -> None:
    """PackageError when the package's code was compiled for vector instructions this CPU lacks (its metadata's
    AOTI_CPU_ISA): the library loads, and its first kernel that uses one ends the process with SIGILL (an
    AVX-512 package on an AVX2 machine; AMX_TILE, which Inductor picks on Sapphire Rapids hosts, on one
    without AMX). Tokens torch does not probe here (another architecture's, whose library dlopen refuses) are
    not compared. The library's own compile flags and AMX instructions are compared too (``library_isa``): the
    metadata is JSON that may be edited without the library. For CPU packages only: AOTInductor records the lowering
    host's ISA in every package's metadata (codecache.get_device_information), but compiles with its -m flags only
    the code that needs them, a CPU package's kernels; a CUDA package's host code is not, and refusing it would
    refuse packages that run."""
    isa = package.metadata.get("AOTI_CPU_ISA")
    supported = cpu_isa()
    if supported is None:
        return
    recorded = isa.split() if isinstance(isa, str) else []
    # each token once: a metadata of "AVX512 AVX512 ..." (8 MiB) made a refusal of megabytes (the amplification breaker)
    missing = list(dict.fromkeys(token for token in recorded if token in _ISA_PROBES and token not in supported))
    compiled = library_isa(package.so_path)
    unrecorded = [token for token in compiled if token not in supported and token not in missing]
    if unrecorded:  # the library's own record says more than the metadata: the metadata is JSON, edited or not
        said = f"AOTI_CPU_ISA in its metadata says {clipped(repr(isa), 80)}" if isinstance(isa, str) else \
            "its metadata has no AOTI_CPU_ISA"
        told = ["the compiler's record of its flags in the library"] if set(compiled) - {"AMX_TILE"} else []
        told += ["AMX instructions in its code"] if "AMX_TILE" in compiled else []
        what = (f"its model library was compiled for a CPU with {', '.join(compiled)} ({', and '.join(told)}; "
                f"{said}, which is not what the library holds)")
    else:
        what = f"was compiled for a CPU with {clipped(repr(isa), 80)} (AOTI_CPU_ISA in its metadata)"
    if missing or unrecorded:
        lacks = missing + unrecorded
        raise PackageError(f"{package.path!r} {what}, and this CPU lacks {', '.join(lacks)}: its code "
                           "would stop the process with an illegal instruction (SIGILL). Lower the model again on a "
                           "machine with this CPU's instruction set (the machine that runs it, or one of its kind)"
                           + (_WITHOUT_AMX if lacks == ["AMX_TILE"] and "AMX_TILE" in compiled else ""))


# Inductor writes AMX kernels only in its C++ GEMM template (max_autotune with the CPP backend, cpp_micro_gemm.py)
_WITHOUT_AMX = (", or lower it where it was, without AMX kernels: inductor_configs={'max_autotune_gemm_backends': "
                "'ATEN'} (AMX kernels come from max_autotune's C++ GEMM template)")


# The -m options of the library's compile command that give the ISA of an AOTI_CPU_ISA token (Inductor's
# cpu_vec_isa: each ISA's build flags). -march=native's expansion of the lowering host's features is in the same
# record, and the compiler may vectorize with any of them (AVX-512 among them: a SIGILL on a CPU without it). Not
# -mamx-tile: the compiler never emits AMX by itself, only kernels Inductor writes for AMX, and the flag is there
# wherever Inductor picked AMX_TILE (and from -march=native on any AMX host), whether or not it wrote one: AMX_TILE
# is told by the instructions themselves (``holds_amx_instructions``), looked for where the flag allows them.
_ISA_FLAGS = {"-mavx2": "AVX2", "-mavx512f": "AVX512", "-mavx512vnni": "AVX512_VNNI"}


def library_isa(so_path: str) -> list[str]:
    """The AOTI_CPU_ISA tokens of the ISA the library's code was compiled for, from the compilers' record in it
    (``libloader.compiled_machine_flags``), and AMX_TILE where its code holds AMX instructions: a package whose
    metadata was edited to say less (or nothing) still holds code for what the library was built with. Without a
    record, only AMX_TILE is told (by the instructions)."""
    flags = compiled_machine_flags(so_path)
    tokens = [token for flag, token in _ISA_FLAGS.items() if flag in (flags or ())]
    if (flags is None or "-mamx-tile" in flags) and holds_amx_instructions(so_path):
        tokens.append("AMX_TILE")
    return tokens


@functools.cache
def cpu_isa() -> frozenset[str] | None:
    """The AOTI_CPU_ISA tokens this CPU runs (torch.cpu's probes), or None off x86 or where torch lacks them."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    probes = {name: getattr(torch.cpu, name, None) for names in _ISA_PROBES.values() for name in names}
    if None in probes.values():
        return None
    return frozenset(token for token, names in _ISA_PROBES.items() if all(probes[name]() for name in names))


def available_bytes(device: torch.device) -> int | None:
    """The memory a new allocation on ``device`` may take without swapping (the CPU) or failing (CUDA: free memory
    and the caching allocator's unused blocks); None for another device."""
    if device.type == "cpu":  # the least of the machine's, this process's cgroups' and its rlimits' (host_memory)
        from aotcuda.runtime.host_memory import available_cpu_bytes

        return available_cpu_bytes()
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return None
