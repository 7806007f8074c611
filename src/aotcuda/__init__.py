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


def _version() -> str:
    """The installed distribution's version (pyproject.toml's), or "0+unknown" where aotcuda runs from a source tree
    that was never installed (PYTHONPATH=src). A new user's trial (2026-12-07): aotcuda.__version__ was missing."""
    from importlib import metadata

    try:
        return metadata.version("aotcuda")
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _version()

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
