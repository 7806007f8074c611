"""What the library-model builders share: importing a test-only library with an error that says how to get
it, torch.export's dynamic_shapes by parameter name, and the diffusers builders' random inputs and weights."""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType
from typing import Any

import torch
from torch import nn

from aotcuda.models.case import Case

ROTARY = "view_as_complex, mul, view_as_real"


def import_library(module: str) -> ModuleType:
    """importlib.import_module(module); ImportError naming the `aotcuda[test]` extra where it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{module} is needed for aotcuda's library-model examples; install it with "
            f"`pip install 'aotcuda[test]'` (it pins the tested version)"
        ) from error


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


def diffusers_case(name: str, stands_for: str, complex_ops: str, build, make_inputs, lengths: tuple[int, ...],
                   notes: str = "", export_error: str = "") -> Case:
    """A diffusers class as its pipeline calls it (build and make_inputs give (args, kwargs)), in float32."""
    return Case(name, stands_for, complex_ops, build, make_inputs, lengths, library="diffusers", notes=notes,
                export_error=export_error)


def diffusers() -> ModuleType:
    return import_library("diffusers")


def randn(*shape, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def redraw_zero_parameters(model: nn.Module, std: float = 0.05) -> nn.Module:
    """Re-draw every all-zero parameter (diffusers zero-initialises output projections, gates, controlnet
    projections and pad tokens for training): with them, outputs would be exactly zero, and a comparison with
    eager could not fail."""
    with torch.no_grad():
        for param in model.parameters():
            if param.numel() and not param.any():
                param.normal_(std=std)
    return model


def static_dims(kwargs: dict) -> dict:
    """dynamic_shapes entries (all None) mirroring each keyword argument's pytree structure."""
    return {name: torch.utils._pytree.tree_map(lambda _: None, value) for name, value in kwargs.items()}
