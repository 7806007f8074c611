"""ReplaceComplexWithRealPass: complex tensors as real view_as_real pairs, every complex op as real math."""

from aotcuda.passes.complex_to_real.boundary import ComplexBoundary, complex_boundary
from aotcuda.passes.complex_to_real.rewrite import ReplaceComplexWithRealPass

__all__ = ["ComplexBoundary", "ReplaceComplexWithRealPass", "complex_boundary"]
