"""Complex inputs and outputs of a loaded Program, adapted at the boundary with zero-copy views.

A package lowered by aotcuda takes and returns real pairs where the user's program took and returned
complex tensors (ReplaceComplexWithRealPass: a complex tensor of shape S is a real tensor of shape
S + [2], complex32/64/128 → float16/32/64). Its signature marks those inputs and outputs: the
TensorSpec's ``"complex"`` field names the user's complex dtype, while ``"dtype"``, ``"shape"`` and
``"strides"`` describe the pair the generated code reads (see ``aotcuda.package_format``).

`split_signature` turns such a signature into the user's terms (dtype complex64, shape S, strides in
complex elements), so that every check and error speaks of the tensors the caller passes, and returns
a `ComplexAdapter` that adapts each call (the pass's own record of the same inputs and outputs is
``aotcuda.passes.complex_to_real.ComplexBoundary``, which the lowering writes into the signature):

- inputs: ``torch.view_as_real(z)``, a view. The checks have already resolved a conjugate bit and laid
  the complex tensor out as exported (a copy only when its layout differs), so the pair has the layout
  the generated code reads.
- outputs: ``torch.view_as_complex(pair)``, a view, when the pair's last dim has stride 1 and its other
  strides and storage offset are even; otherwise (never seen from Inductor, which writes outputs densely)
  a contiguous copy first. Slots that share one pair share one complex tensor.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from aotcuda.errors import PackageError
from aotcuda.package_format import REAL_OF_COMPLEX, ShapeExpressionError
from aotcuda.runtime.shape_expressions import shape_expression


@dataclass(frozen=True)
class ComplexAdapter:
    """Which flat inputs and outputs of a Program are complex for the caller and pairs for the container."""

    inputs: frozenset[int]
    outputs: frozenset[int]

    def inputs_as_pairs(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """The container's inputs: each complex input as its view_as_real pair (no copy)."""
        return [_as_pair(t) if i in self.inputs else t for i, t in enumerate(tensors)]

    def outputs_as_complex(self, tensors: list) -> list:
        """The caller's outputs: each pair output as a complex view (a copy only for an odd layout)."""
        views: dict[int, torch.Tensor] = {}
        adapted = []
        for index, tensor in enumerate(tensors):
            if index in self.outputs and tensor is not None:
                if id(tensor) not in views:
                    views[id(tensor)] = _as_complex(tensor)
                tensor = views[id(tensor)]
            adapted.append(tensor)
        return adapted


def _as_pair(z: torch.Tensor) -> torch.Tensor:
    if z.is_conj():  # view_as_real refuses a lazily conjugated tensor
        z = z.resolve_conj()
    return torch.view_as_real(z)


def viewable_as_complex(pair: torch.Tensor) -> bool:
    """Whether torch.view_as_complex accepts the pair as it is: [..., 2], last stride 1, the other strides
    and the storage offset even (a complex element is two reals)."""
    return (pair.dim() >= 1 and pair.shape[-1] == 2 and pair.stride(-1) == 1
            and all(stride % 2 == 0 for stride in pair.stride()[:-1]) and pair.storage_offset() % 2 == 0)


def _as_complex(pair: torch.Tensor) -> torch.Tensor:
    return torch.view_as_complex(pair if viewable_as_complex(pair) else pair.contiguous())


def split_signature(signature: dict | None, path: str = "") -> tuple[dict | None, ComplexAdapter | None]:
    """The signature in the caller's terms, and the boundary to adapt calls (None: nothing is complex).

    Raises PackageError when a ``"complex"`` field does not describe a pair (unknown dtype, a pair dtype
    that does not match it, a last dim other than 2).
    """
    if not signature:
        return signature, None
    user = copy.deepcopy(signature)
    marked = {}
    for kind in ("inputs", "outputs"):
        specs = user.get(kind)
        if not isinstance(specs, list):
            continue
        marked[kind] = frozenset(i for i, spec in enumerate(specs)
                                 if isinstance(spec, dict) and spec.get("complex") is not None)
        for i in marked[kind]:
            try:
                specs[i] = _user_spec(specs[i], path)
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:  # a field of another type
                raise PackageError(f"{path!r}: the signature's complex {kind}[{i}] is malformed ({type(exc).__name__}: "
                                   f"{str(exc)[:200]}); the package is damaged, lower the model again") from exc
    if not any(marked.values()):
        return signature, None
    return user, ComplexAdapter(marked.get("inputs", frozenset()), marked.get("outputs", frozenset()))


def _user_spec(spec: dict, path: str) -> dict:
    """A pair's TensorSpec (dtype float32, shape S + [2]) as the complex tensor's (complex64, shape S)."""
    name, complex_dtype = spec.get("name"), spec.get("complex")
    shape, strides = spec.get("shape"), spec.get("strides")
    if (REAL_OF_COMPLEX.get(complex_dtype) != spec.get("dtype") or not isinstance(shape, list) or not shape
            or shape[-1] != 2 or (strides is not None and (not isinstance(strides, list) or strides[-1:] != [1]))):
        raise PackageError(f"{path!r}: the signature marks {name!r} as {complex_dtype!r}, but it is not that "
                           f"dtype's real pair (dtype {spec.get('dtype')!r}, shape {shape!r}); the package is "
                           "damaged, lower the model again")
    return {**spec, "dtype": complex_dtype, "shape": shape[:-1],
            "strides": None if strides is None else [_halved(s, name, path) for s in strides[:-1]],
            "complex": None}


def _halved(stride, name: str, path: str):
    """A pair stride (in reals) as a complex stride (in complex elements): half of it."""
    if isinstance(stride, int):
        if stride % 2:
            raise PackageError(f"{path!r}: the signature gives {name!r} an odd pair stride {stride}; the package "
                               "is damaged, lower the model again")
        return stride // 2
    import sympy

    try:
        half = shape_expression(stride["expr"]) / 2  # parsed by the grammar, never sympify'd
    except ShapeExpressionError as exc:
        raise PackageError(f"{path!r}: the signature's stride of {name!r} is not a shape expression ({exc}); the "
                           "package is damaged or hostile, lower the model again") from exc
    if any(not number.is_Integer for number in half.atoms(sympy.Rational)):
        raise PackageError(f"{path!r}: the signature gives {name!r} the pair stride {stride['expr']!r}, which is not "
                           "even; the package is damaged, lower the model again")
    bound = lambda v: None if v is None else int(v) // 2  # noqa: E731
    return {"expr": str(half), "min": bound(stride.get("min")), "max": bound(stride.get("max"))}
