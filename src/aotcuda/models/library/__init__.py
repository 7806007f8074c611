"""Library models with complex math, built from tiny configs with random weights (no download).

One module per library (transformers_models, diffusers_models), each with its table of Cases; this
package merges them. LIBRARY_OF names the library each case needs, so that a test can skip a case whose
library cannot be imported. The libraries are imported inside the builders, not here.
"""

from aotcuda.models.library.diffusers_models import DIFFUSERS_MODELS
from aotcuda.models.library.transformers_models import TRANSFORMERS_MODELS
from aotcuda.models.patterns._common import Case

LIBRARY_MODELS: dict[str, Case] = {**TRANSFORMERS_MODELS, **DIFFUSERS_MODELS}
LIBRARY_OF: dict[str, str] = {
    **{name: "transformers" for name in TRANSFORMERS_MODELS},
    **{name: "diffusers" for name in DIFFUSERS_MODELS},
}

__all__ = ["DIFFUSERS_MODELS", "LIBRARY_MODELS", "LIBRARY_OF", "TRANSFORMERS_MODELS"]
