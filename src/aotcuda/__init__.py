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
from aotcuda.lowering import LoweredProgram, lower
from aotcuda.runtime.program import Program, load

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
