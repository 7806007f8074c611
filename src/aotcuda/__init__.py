"""aotcuda: lower PyTorch programs ahead of time with AOTInductor (complex numbers included) and run them.

    program = aotcuda.lower(model, args, device="cuda")      # torch.export → passes → AOTI package
    runner = aotcuda.load(program.package_path)               # model container + output ownership
    outputs = runner(*args)
"""

from aotcuda.errors import (
    AotcudaError,
    DeviceError,
    DynamicShapesError,
    InputError,
    MissingFallbackKernelsError,
    OutputError,
    PackageError,
    RuntimeCallError,
    UnsupportedComplexOpError,
)
from aotcuda.runtime.program import Program, load

# The lowering (torch.export, the passes, Inductor) is imported when first used, so that a process that
# only runs packages (``aotcuda.load``) imports the runtime alone (tests/test_imports.py).
_LOWERING = frozenset({"LoweredProgram", "lower"})


def __getattr__(name: str):
    if name in _LOWERING:
        from aotcuda import lowering

        return getattr(lowering, name)
    raise AttributeError(f"module 'aotcuda' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LOWERING})

__all__ = [
    "AotcudaError",
    "DeviceError",
    "DynamicShapesError",
    "InputError",
    "LoweredProgram",
    "MissingFallbackKernelsError",
    "OutputError",
    "PackageError",
    "Program",
    "RuntimeCallError",
    "UnsupportedComplexOpError",
    "load",
    "lower",
]
