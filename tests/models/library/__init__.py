"""The library-model catalogue: transformers and diffusers models with complex math, built from tiny configs
with random weights (no download), each a Case (aotcuda.models.case). Test-only: transformers and diffusers
are test dependencies, imported inside the builders (case.library names the one a case needs, so that a
test can skip a case whose library cannot be imported). Tests import it as ``tests.models.library``;
benchmarks/models.py puts the repository root on sys.path to do the same.

- LIBRARY_MODELS: DeepSeek-V2 and Qwen-Image in small wrappers, float32 and bfloat16 (tests/models/test_library.py);
- TRANSFORMERS_SUITE: transformers classes called as users call them (tests/models/test_transformers.py);
- VISION_LANGUAGE_SUITE: transformers vision-language models called with an image (tests/models/test_vision_language.py);
- DIFFUSERS_SUITE: diffusers classes called as their pipelines call them, and DIFFUSERS_HEAVY, those too slow
  to export in CI (tests/models/test_diffusers.py).
"""

from aotcuda.models.case import Case

from .diffusers_models import DIFFUSERS_MODELS
from .diffusers_suite import IMAGE_MODELS
from .diffusers_video_audio import HEAVY_MODELS, VIDEO_AUDIO_MODELS
from .transformers_models import TRANSFORMERS_MODELS, TRANSFORMERS_SUITE
from .vision_language import VISION_LANGUAGE_SUITE

LIBRARY_MODELS: dict[str, Case] = {**TRANSFORMERS_MODELS, **DIFFUSERS_MODELS}
DIFFUSERS_SUITE: dict[str, Case] = {**IMAGE_MODELS, **VIDEO_AUDIO_MODELS}
DIFFUSERS_HEAVY: dict[str, Case] = HEAVY_MODELS

__all__ = ["DIFFUSERS_HEAVY", "DIFFUSERS_SUITE", "LIBRARY_MODELS", "TRANSFORMERS_SUITE", "VISION_LANGUAGE_SUITE"]
