"""Case: one program that aotcuda must lower, with what a test or a benchmark needs to check it.

The same record describes the built-in example programs (aotcuda.models.catalogue) and the library-model
factories beside the tests (tests/models/library): a program is built and called the way torch.export
takes it, positional arguments and keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn


@dataclass(frozen=True)
class Case:
    """One model or pattern that aotcuda must lower.

    build(dtype) -> (model, args, kwargs, dynamic_shapes), ready for
        ``torch.export.export(model, args, kwargs, dynamic_shapes=...)``; dynamic_shapes is None where nothing
        is dynamic.
    make_inputs(length, dtype) -> (args, kwargs): fresh random inputs with the dynamic dim (if any) at `length`.
    lengths[0] is the export length; lengths[1:] are other lengths the program must also run at (none: static).
    library: the test-only library the build imports ("transformers", "diffusers"); "" for aotcuda's own.
    notes: what a reader must know (why a dim is static, the smallest input that exports, library quirks).
    export_error: the first line of torch.export's error where the call as given cannot export, else "".
    """

    name: str
    stands_for: str
    complex_ops: str
    build: Callable[[torch.dtype], tuple[nn.Module, tuple, dict, Any]]
    make_inputs: Callable[[int, torch.dtype], tuple[tuple, dict]]
    lengths: tuple[int, ...]
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)
    library: str = ""
    notes: str = ""
    export_error: str = ""

    @property
    def dynamic(self) -> bool:
        return len(self.lengths) > 1

    @classmethod
    def positional(cls, name: str, stands_for: str, complex_ops: str,
                   build: Callable[[torch.dtype], tuple[nn.Module, tuple, Any]],
                   make_inputs: Callable[[int, torch.dtype], tuple], lengths: tuple[int, ...],
                   dtypes: tuple[torch.dtype, ...] = (torch.float32,), options: dict[str, Any] | None = None,
                   **fields: Any) -> Case:
        """A Case of a model called with its tensors positional: build(dtype) -> (model, args,
        dynamic_shapes), make_inputs(length, dtype) -> args; `options`, the keyword arguments users pass
        (``use_cache=False``), go with every call (torch.export's dynamic_shapes names them, as None, where
        it is a dict keyed by forward's parameter names)."""
        options = dict(options or {})

        def build_call(dtype: torch.dtype = torch.float32):
            model, args, dynamic_shapes = build(dtype)
            return model, args, dict(options), dynamic_shapes

        def inputs_call(length: int, dtype: torch.dtype = torch.float32):
            return make_inputs(length, dtype), dict(options)

        for wrapper, wrapped in ((build_call, build), (inputs_call, make_inputs)):
            wrapper.__doc__, wrapper.__wrapped__ = wrapped.__doc__, wrapped
        return cls(name, stands_for, complex_ops, build_call, inputs_call, tuple(lengths), tuple(dtypes), **fields)
