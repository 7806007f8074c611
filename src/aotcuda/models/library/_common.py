"""What the library-model builders share: importing a test-only library with an error that says how to get it."""

from __future__ import annotations

import importlib
from types import ModuleType


def import_library(module: str) -> ModuleType:
    """importlib.import_module(module); ImportError naming the `aotcuda[test]` extra where it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{module} is needed for aotcuda's library-model examples; install it with "
            f"`pip install 'aotcuda[test]'` (it pins the tested version)"
        ) from error
