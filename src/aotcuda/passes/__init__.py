"""Graph passes run on an ExportedProgram before AOTInductor compiles it; the ordered list lives in lowering/pipeline.py (passes())."""

from aotcuda.passes.complex_to_real import ReplaceComplexWithRealPass
from aotcuda.passes.view_copy import ReplaceViewCopyWithViewPass

__all__ = ["ReplaceComplexWithRealPass", "ReplaceViewCopyWithViewPass"]
