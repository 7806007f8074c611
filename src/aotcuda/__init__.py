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
    """The installed distribution's version (pyproject.toml's) where that distribution is the aotcuda imported (its own
    files, or the source tree of an editable install), else "0+unknown" (a source tree on PYTHONPATH, beside another
    install). A new user's trial (2026-12-07): aotcuda.__version__ was missing; the review: read at import it cost
    every ``import aotcuda`` 14 ms (importlib.metadata), and named another tree's install. Read on first use."""
    import json
    import os
    from importlib import metadata

    try:
        distribution = metadata.distribution("aotcuda")
    except metadata.PackageNotFoundError:
        return "0+unknown"
    here = os.path.realpath(__file__)
    if any(file.name == "__init__.py" and os.path.realpath(distribution.locate_file(file)) == here
           for file in distribution.files or ()):
        return distribution.version
    try:  # an editable install (PEP 660): its source tree, as pip records it (PEP 610)
        url = json.loads(distribution.read_text("direct_url.json") or "{}").get("url", "")
    except (ValueError, AttributeError):
        url = ""
    tree = os.path.realpath(url[len("file://"):]) if url.startswith("file://") else None
    return distribution.version if tree and here.startswith(tree + os.sep) else "0+unknown"

# The runtime and the lowering (torch.export, the passes, Inductor) are imported when first used: a process
# that only runs packages (``aotcuda.load``) imports the runtime alone (tests/test_imports.py), and one that
# imports a module needing no torch (Ray Serve's HTTP proxy: serving/proxy.py) imports no torch.
_LAZY = {"LoweredProgram": "aotcuda.lowering", "lower": "aotcuda.lowering", "Program": "aotcuda.runtime.program",
         "load": "aotcuda.runtime.program"}


def __getattr__(name: str):
    if name == "__version__":
        global __version__
        __version__ = _version()
        return __version__
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aotcuda' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "__version__"})

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
