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
    SigningKeyError,
    UnsupportedComplexOpError,
)

# The runtime and the lowering (torch.export, the passes, Inductor) are imported when first used: a process
# that only runs packages (``aotcuda.load``) imports the runtime alone (tests/test_imports.py), and one that
# imports a module needing no torch (Ray Serve's HTTP proxy: serving/proxy.py) imports no torch.
_LAZY = {"LoweredProgram": "aotcuda.lowering", "lower": "aotcuda.lowering", "Program": "aotcuda.runtime.program",
         "load": "aotcuda.runtime.program"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aotcuda' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

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
    "SigningKeyError",
    "UnsupportedComplexOpError",
    "load",
    "lower",
]
