"""The rule table, one module per op family. Importing this package registers every rule in registry.RULES."""

from aotcuda.passes.complex_to_real.rules import (  # noqa: F401
    comparison,
    control_flow,
    conversion,
    creation,
    elementary,
    elementwise,
    fft,
    householder,
    indexing,
    linalg,
    linalg_embedding,
    linalg_factors,
    lu,
    nn,
    reduction,
    shape,
    strided,
)
