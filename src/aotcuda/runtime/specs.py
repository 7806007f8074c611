"""What a package's signature says of each tensor, read once and checked: ``TensorSpec`` and ``DimSpec``.

The signature is package content (``aotcuda.package_format``): every field is checked for its type here,
when the package is read, so that no call meets a value of the wrong type later, and load, ``aotcuda
inspect`` and ``aotcuda serve`` read it through the same function (``specs_from_signature``). The checks
of each call against these specs are ``aotcuda.runtime.checks``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from aotcuda.errors import PackageError, clipped, one_line, terminal_safe
from aotcuda.package_format import SCALAR_OUTPUT_DTYPES
from aotcuda.runtime.shape_expressions import shape_expression


_TORCH_SYMBOL = re.compile(r"\b[a-z]\d+\b")  # the names torch gives shape symbols: s27, u0
# torch's name for a data-dependent (unbacked) size: a value the program read from a tensor (``x.max().item()``,
# ``nonzero``), u0, u1, ... (torch.utils._sympy.symbol.SymT.UNBACKED_INT); its range is the model's torch._check.
_UNBACKED_SYMBOL = re.compile(r"\bu\d+\b")


def under_dim_names(expr: str, dim_names: dict[str, str] | None) -> str:
    """A dim's expression with each torch symbol under the Dim name the user gave it ("2*s27" → "2*seq")."""
    if not dim_names:
        return expr
    return _TORCH_SYMBOL.sub(lambda match: dim_names.get(match.group(0), match.group(0)), expr)


@dataclass(frozen=True)
class DimSpec:
    """One dim of an exported tensor: a static ``size``, or a sympy ``expr`` with its exported range.

    ``expr`` is in torch's symbols (``s27``), which the checks evaluate; ``user_expr`` is the same
    expression under the Dim names the user exported with (``seq``; the signature's ``dim_names``), which
    ``str()``, ``repr()`` and the error messages show. Without names, ``user_expr`` is None and ``expr`` is
    shown. A static dim's ``min`` and ``max`` are its size.
    """

    size: int | None = None
    expr: str | None = None
    min: int = 0
    max: int | None = None  # None: unbounded
    user_expr: str | None = None
    narrowed: str | None = None  # why the range is narrower than the lowering was asked (the signature's "narrowed")
    narrowed_bounds: tuple[str, ...] | None = None  # the ends "narrowed" is about ("min", "max"); None: both

    def __post_init__(self):
        if self.size is not None:  # a static dim's range is its size, not the dataclass defaults [0, None]
            object.__setattr__(self, "min", self.size)
            object.__setattr__(self, "max", self.size)

    def __repr__(self) -> str:
        return f"DimSpec({self})"  # DimSpec(4), DimSpec(seq in [2, 512]), DimSpec(2*seq in [4, inf])

    @classmethod
    def from_json(cls, dim, dim_names: dict[str, str] | None = None) -> DimSpec:
        """A dim from the signature: a size (an int ≥ 0), or {"expr": str, "min": int, "max": int | null} with an
        optional "narrowed": str (shown at most NARROWED_CHARS characters) and "narrowed_bounds": ["min"], ["max"]
        or both.
        Raises ValueError for anything else: every field is checked here, once, so that no call meets a
        value of the wrong type later (a "max" of "64" raised a raw TypeError at every call)."""
        if _is_int(dim):
            if not 0 <= dim <= INT64_MAX:  # torch's sizes and strides are int64: 2**64 raised a raw TypeError at calls
                raise ValueError(f"a size or stride of {_clipped(dim)}, outside [0, 2**63 - 1]")
            return cls(size=dim)
        if not isinstance(dim, dict):
            raise ValueError(f"a dim is a size or {{'expr': ..., 'min': ..., 'max': ...}}, got {_clipped(dim)}")
        shape_expression(dim.get("expr"))  # ShapeExpressionError (a ValueError) for a string outside the grammar
        low, high = dim.get("min"), dim.get("max")
        if any(isinstance(bound, float) and bound in (float("inf"), float("-inf")) for bound in (low, high)):
            raise OverflowError(f"the dim {dim['expr']!r} has the range [{low}, {high}]; its bounds are integers "
                                "(max: null when unbounded)")
        if not (low is None or _is_int(low)) or not (high is None or _is_int(high)):
            raise ValueError(f"the dim {dim['expr']!r} has the range [{_clipped(low)}, {_clipped(high)}]; its bounds "
                             "are integers (max: null when unbounded)")
        if high is not None and (high < 0 or (low is not None and high < low)):
            raise ValueError(f"the dim {dim['expr']!r} has the range [{low}, {high}], which holds no size")
        narrowed = dim.get("narrowed")
        if not (narrowed is None or isinstance(narrowed, str)):
            raise ValueError(f"the dim {dim['expr']!r} has a 'narrowed' of {_clipped(narrowed)}; it is a string")
        bounds = dim.get("narrowed_bounds")
        if not (bounds is None or (isinstance(bounds, list) and bounds and all(b in ("min", "max") for b in bounds))):
            raise ValueError(f"the dim {dim['expr']!r} has a 'narrowed_bounds' of {_clipped(bounds)}; it is a list of "
                             "'min' and 'max'")
        named = under_dim_names(dim["expr"], dim_names)
        return cls(expr=dim["expr"], min=low or 0, max=high, user_expr=named if named != dim["expr"] else None,
                   # one line, escaped: a refusal of a size quotes it (break41: raw, a package's ESC sequences and
                   # newlines reached a traceback and a served client's terminal)
                   narrowed=None if narrowed is None else terminal_safe(one_line(clipped(narrowed, NARROWED_CHARS))),
                   narrowed_bounds=None if bounds is None else tuple(bounds))

    @property
    def data_dependent(self) -> bool:
        """The dim's size comes from an input's values, not its shape (an unbacked symbol: u0)."""
        return self.expr is not None and _UNBACKED_SYMBOL.search(self.expr) is not None

    @property
    def symbols(self) -> frozenset[str]:
        """The names of the symbols the dim's expression holds (empty for a static dim)."""
        if self.expr is None:
            return frozenset()
        return frozenset(str(symbol) for symbol in shape_expression(self.expr).free_symbols)

    @property
    def shown(self) -> str:
        """The expression as the user knows it: under their Dim names where the package records them."""
        return self.user_expr or self.expr

    def __str__(self) -> str:
        if self.size is not None:
            return str(self.size)
        return f"{self.shown} in [{self.min}, {'inf' if self.max is None else self.max}]"


@dataclass(frozen=True)
class TensorSpec:
    """What the package expects of one input or output tensor."""

    name: str
    dtype: torch.dtype
    device_type: str
    dims: tuple[DimSpec, ...]
    contiguous: bool = True
    strides: tuple[DimSpec, ...] | None = None  # the exported example's; None in older packages
    mutated: bool | None = None  # inputs: the program writes it in place; None: unknown (older packages)
    # outputs that eager returns as a Python number (x.shape[0], a constant): "int", "float" or "bool" (a 0-d CPU
    # tensor of int64, float64 or bool in the container; Program's call gives the number); "none": forward returns
    # None there (the container's slot holds no handle; dtype and shape are a 0-d bool's, unused). None: a tensor
    scalar: str | None = None
    value: int | float | bool | str | None = None  # a scalar's value where lowering knew it: a number, or an
    # expression of the input size symbols (under the user's Dim names), "batch", "2*batch + 1"; None: unknown

    @property
    def scalar_type(self) -> type | None:
        """The Python type a call returns for this output (int, float, bool), or None for a tensor."""
        return _SCALAR_TYPES.get(self.scalar)

    @classmethod
    def from_json(cls, spec: dict, dim_names: dict[str, str] | None = None) -> TensorSpec:
        """A TensorSpec from its signature entry; ``dim_names`` (the signature's) names its symbolic dims.
        Raises KeyError, TypeError or ValueError for an entry that is not one (``specs_from_signature`` says
        which)."""
        if not isinstance(spec, dict):
            raise TypeError(f"a tensor spec is a JSON object, got {_clipped(spec)}")
        dtype = dtype_named(spec["dtype"])
        if dtype is None:
            raise ValueError(f"{_clipped(spec['dtype'])} is not a torch dtype")
        name, device, shape, strides = spec["name"], spec.get("device", ""), spec["shape"], spec.get("strides")
        if not isinstance(name, str) or not isinstance(device, str):
            raise TypeError(f"a tensor's name and device are strings, got {_clipped(name)} and {_clipped(device)}")
        if not isinstance(shape, list) or not (strides is None or (isinstance(strides, list) and len(strides) == len(shape))):
            raise TypeError(f"{name!r}: its shape is a list of dims and its strides null or as many, got "
                            f"{_clipped(shape)} and {_clipped(strides)}")
        for flag in ("contiguous", "mutated"):
            if not isinstance(spec.get(flag, False), (bool, type(None))):
                raise TypeError(f"{name!r}: {flag} is true, false or null, got {_clipped(spec[flag])}")
        scalar, value = _scalar_fields(name, spec, dtype, shape, dim_names)
        return cls(name, dtype, device, tuple(DimSpec.from_json(d, dim_names) for d in shape),
                   spec.get("contiguous") is not False,
                   None if strides is None else tuple(DimSpec.from_json(d, dim_names) for d in strides),
                   spec.get("mutated"), scalar, value)

    def __repr__(self) -> str:
        if self.scalar is not None:
            return f"TensorSpec({self.name!r}, {self.scalar}, value={self.value!r})"
        strides = "" if self.strides is None else f", strides={_tuple_text(self.strides)}"
        return (f"TensorSpec({self.name!r}, {self.dtype}, {self.device_type!r}, shape={self.shape_text()}"
                f"{strides}, contiguous={self.contiguous}, mutated={self.mutated})")

    @property
    def rank(self) -> int:
        return len(self.dims)

    def shape_text(self) -> str:
        return _tuple_text(self.dims)


# torch's dtypes by the names a signature writes them under (``str(dtype)`` less "torch.", and the aliases: float,
# long, ...), read from the module's own namespace. Never ``getattr(torch, name)`` with a package's string: the
# module's ``__getattr__`` imports torch._dynamo, torch._inductor, torch._export or torch.onnx for those names
# (seconds of a load's CPU, hundreds of modules whose import runs their code, for a package that is then refused)
# and calls the functions behind has_cuda, has_mps, ... with a deprecation warning (break42, 2026-12-07).
_DTYPES_BY_NAME = {name: value for name, value in vars(torch).items() if isinstance(value, torch.dtype)}


def dtype_named(name) -> torch.dtype | None:
    """The torch dtype a signature's ``name`` names ("float32", "int64", ...), None for anything else; no name
    reaches torch's module (``_DTYPES_BY_NAME``)."""
    return _DTYPES_BY_NAME.get(name) if isinstance(name, str) else None


_SCALAR_TYPES = {"int": int, "float": float, "bool": bool}
_SCALAR_DTYPES = {scalar: _DTYPES_BY_NAME[name] for scalar, name in SCALAR_OUTPUT_DTYPES.items()}


def _scalar_fields(name: str, spec: dict, dtype: torch.dtype, shape: list, dim_names) -> tuple:
    """(scalar, value) of a spec: (None, None) for a tensor; for a Python-number output, its type and its value (an
    expression read with the grammar, shown under the Dim names). Raises ValueError for a "scalar" that is not one
    of the three, or whose dtype or shape is not the 0-d tensor the container returns for it."""
    scalar = spec.get("scalar")
    if scalar is None:
        return None, None
    if scalar not in _SCALAR_DTYPES:
        raise ValueError(f"{name!r}: its 'scalar' is {_clipped(scalar)}, not 'int', 'float', 'bool' or 'none'")
    if dtype != _SCALAR_DTYPES[scalar] or shape != []:
        raise ValueError(f"{name!r}: a {scalar} output is a 0-d {_SCALAR_DTYPES[scalar]} tensor in the package, "
                         f"but its spec says {dtype} of shape {_clipped(shape)}")
    value = spec.get("value")
    if scalar == "none":
        return scalar, None
    if isinstance(value, dict):
        shape_expression(value.get("expr"))  # ShapeExpressionError (a ValueError) outside the grammar
        return scalar, under_dim_names(value["expr"], dim_names)
    if value is None or (type(value) is _SCALAR_TYPES[scalar]) or (scalar == "float" and type(value) is int):
        return scalar, value
    raise ValueError(f"{name!r}: its value {_clipped(value)} is not a {scalar}")


def specs_from_signature(signature: dict, path: str) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """(input specs, output specs) of a signature (complex tensors in the caller's terms or not, as given).
    Raises PackageError naming the package and the fault for a signature whose entries are not TensorSpecs:
    load, ``aotcuda inspect`` and ``aotcuda serve`` read the same fields the same way."""
    if not isinstance(signature, dict):
        raise _malformed(path, "", TypeError(f"the signature is {_clipped(signature)}, not an object"))
    names = signature.get("dim_names")  # the user's Dim names: specs and errors show "seq", not s27
    if names is not None and not isinstance(names, dict):
        raise _malformed(path, "", TypeError(f"dim_names is {_clipped(names)}, not an object"))
    specs = {}
    for kind in ("inputs", "outputs"):
        entries = signature.get(kind, [])
        if not isinstance(entries, list):
            raise _malformed(path, "", TypeError(f"{kind} is {_clipped(entries)}, not a list"))
        specs[kind] = tuple(_tensor_spec(entry, names, path, f"{kind}[{index}]") for index, entry in enumerate(entries))
    return specs["inputs"], specs["outputs"]


def _tensor_spec(entry, names: dict[str, str] | None, path: str, field: str) -> TensorSpec:
    try:
        return TensorSpec.from_json(entry, names)
    except KeyError as exc:  # a missing field is named as one, not as Python's KeyError: 'dtype'
        raise _malformed(path, f"{field} ", ValueError(f"has no {exc.args[0]!r} field"), "") from exc
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise _malformed(path, f"{field} ", exc) from exc


def _malformed(path: str, field: str, exc: Exception, kind: str | None = None) -> PackageError:
    """The PackageError of a signature entry that is not a TensorSpec: the package, the field, the fault."""
    kind = f"{type(exc).__name__}: " if kind is None else kind
    return PackageError(f"{path!r}: the aotcuda signature entry is malformed ({field}{kind}{exc}); lower the model "
                        "again, or write it with write_signature")


INT64_MAX = 2**63 - 1


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


NARROWED_CHARS = 300


def _clipped(value, limit: int = 60) -> str:
    """A value of a package as an error shows it: its repr, at most ``limit`` characters (errors.clipped)."""
    return clipped(repr(value), limit)


def _tuple_text(dims) -> str:
    """Dims as a Python tuple reads: (2, seq in [2, 512]), (4,), ()."""
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
