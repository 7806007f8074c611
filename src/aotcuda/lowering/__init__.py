"""lower(): nn.Module → AOTInductor package, as short ordered steps, one module each.

    devices.py              the target device and what lowering for it needs (allow-list, options, passes)
    dynamic_shapes_checks.py  dynamic_shapes checked against forward and the example inputs, before the export
    exporting.py            torch.export.export, with guards torch cannot prove checked by aotcuda
    export_hints.py         the fix, stated, for export failures a library model hits
    whole_tensor_writes.py  buffer.copy_(x) keeps its cast through the decompositions
    decompositions.py       the decomposition table (and the window ops torch cannot decompose)
    (passes)                aotcuda.passes: the pass list is ``pipeline.passes()``
    fallbacks.py            which ATen kernels the generated code calls, against the allow-list
    signature.py            the package signature written beside the AOTI package (package_format.py)
    torch_fixes.py          every torch-version workaround and backport, in one table
    pipeline.py             lower() itself: the steps above in order, with their times
"""

from aotcuda.lowering.cache_folders import import_inductor

import_inductor()  # first: torch makes Inductor's cache folder as it imports it, and a raw OSError said nothing

from aotcuda.lowering.pipeline import STEPS, LoweredProgram, lower  # noqa: E402 - after import_inductor

__all__ = ["STEPS", "LoweredProgram", "lower"]
