"""ReplaceComplexWithRealPass: complex tensors as real view_as_real pairs, every complex op as real math."""

from aotcuda.passes.complex_to_real.rewrite import ReplaceComplexWithRealPass

__all__ = ["ReplaceComplexWithRealPass"]
