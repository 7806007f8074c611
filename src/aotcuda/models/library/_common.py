"""What the library-model builders share: importing a test-only library with an error that says how to get
it, and LibraryCase, one library class called the way its library calls it."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable

import torch
from torch import nn


def import_library(module: str) -> ModuleType:
    """importlib.import_module(module); ImportError naming the `aotcuda[test]` extra where it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{module} is needed for aotcuda's library-model examples; install it with "
            f"`pip install 'aotcuda[test]'` (it pins the tested version)"
        ) from error


@dataclass(frozen=True)
class LibraryCase:
    """One library class, exported and called as its users call it: the class itself (no wrapper), tensor
    inputs positional, and the keyword arguments users pass (``use_cache=False``, ``return_dict=False``)
    as ``options``, given to torch.export.export and to every call.

    build(dtype) -> (model, args, dynamic_shapes): dynamic_shapes is a dict keyed by forward's argument
        names (options included, as None), or None where the model has no dynamic dim.
    make_inputs(length, dtype) -> args, fresh random inputs with the dynamic dim (if any) at `length`.
    lengths: the export length first, then the other lengths it must run at (one entry: static).
    library: the module to import ("transformers"); cls: the class's name, for tables and errors.
    """

    name: str
    library: str
    cls: str
    complex_ops: str
    build: Callable[[torch.dtype], tuple[nn.Module, tuple[Any, ...], Any]]
    make_inputs: Callable[[int, torch.dtype], tuple[Any, ...]]
    lengths: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)

    @property
    def dynamic(self) -> bool:
        return len(self.lengths) > 1


def dims_by_name(model: nn.Module, tensor_dims: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """torch.export's dynamic_shapes, keyed by forward's parameter names: `tensor_dims` for the tensors,
    None for each option that forward names, and the options it takes through ``**kwargs`` (return_dict
    on most transformers models) under that parameter's name, as torch.export asks."""
    parameters = inspect.signature(model.forward).parameters
    var_keyword = next((p.name for p in parameters.values() if p.kind is p.VAR_KEYWORD), None)
    dims = dict(tensor_dims)
    for name in options:
        if name in parameters:
            dims[name] = None
        elif var_keyword is not None:
            dims.setdefault(var_keyword, {})[name] = None
    return dims
