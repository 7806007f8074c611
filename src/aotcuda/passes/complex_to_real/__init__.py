"""ReplaceComplexWithRealPass: complex tensors as real view_as_real pairs, every complex op as real math.

The data's way through one call (rewrite.py ``ReplaceComplexWithRealPass.__call__``):

    scan       scan.py       every node that reads or writes a complex value, and its rule (registry.py,
                             rules/); the refused cases, one check each (scan.REFUSAL_CHECKS)
    decide     scan.py       a Plan (the rules, the nodes computed in float32: half.py) or a Refusal
                             (op, node, source line, reason): then the program is returned unchanged
    rewrite    rewrite.py    the graph runs in a torch.fx.Interpreter on fake values under make_fx,
                             complex values as Pairs; each complex node calls its rule, whose result is
                               laid out as eager's (layout.py), reused for repeated calls (reuse.py),
                               its ops replayed when met again on the same metadata (replay.py);
                             unchanged nodes are copied with their meta (the speed-ups can be turned
                             off: torch_internals.py, which holds every private torch symbol used)
    rebuild    program.py    a new ExportedProgram around the traced graph: graph signature, state
    boundary   boundary.py   the record of which inputs/outputs/state were complex (ComplexBoundary)
    constants  placement.py  complex constants, buffers and parameters become pairs in the program's
                             state, on the device their uses need (found before the trace, applied here)

``pass.result`` (passes/result.py) says what the last call did. Where the math lives: pair.py (the Pair
type, dim and shape arithmetic, constants shared per trace), pair_algebra.py (arithmetic on Pairs the
rule files share), pair_math.py (functions that keep special values right), rules/ (one file per op
family), spectral/ (FFTs as real matrix products).
"""

from aotcuda.passes.complex_to_real.boundary import ComplexBoundary, complex_boundary
from aotcuda.passes.complex_to_real.rewrite import ReplaceComplexWithRealPass

__all__ = ["ComplexBoundary", "ReplaceComplexWithRealPass", "complex_boundary"]
