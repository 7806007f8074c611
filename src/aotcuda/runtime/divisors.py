"""The size expressions a program divides by, checked once per input shape: none may be 0.

The generated code computes a program's own arithmetic on sizes in C++ (``y.shape[0] // x.shape[0]``, a ``Mod`` of
sizes, a view whose size is a quotient), where an integer division by zero ends the process (SIGFPE) and a float
one gives inf, where eager raises ZeroDivisionError. A Dim whose range holds 0 (``Dim("n", min=0)``), or a divisor
such as ``m - 1`` at ``m = 1``, lets a call's shapes reach one: a request of an empty batch ended a replica. The
lowering records each divisor (the signature's ``"divisors"``, ``aotcuda.lowering.signature.size_divisors``); a call
whose sizes make one 0 is refused with InputError before it runs. The check runs with the full input checks, so a
shape that passed once (``aotcuda.runtime.accepted``) costs nothing more.
"""

from __future__ import annotations

from aotcuda.errors import InputError, PackageError
from aotcuda.runtime.checks import evaluate_dim
from aotcuda.runtime.specs import DimSpec, under_dim_names

MAX_DIVISORS = 1000  # the lowering records at most 64


class SizeDivisors:
    """The divisors of one Program (``check``)."""

    def __init__(self, divisors: tuple[DimSpec, ...], dim_names: dict[str, str] | None):
        self._divisors, self._dim_names = divisors, dim_names

    @classmethod
    def from_signature(cls, signature: dict | None, path: str = "") -> SizeDivisors | None:
        """The signature's divisors (None where it records none: older packages, programs that divide by no size).
        Raises PackageError for a field that is not a list of expressions of the grammar."""
        recorded = (signature or {}).get("divisors")
        if recorded is None:
            return None
        names = (signature or {}).get("dim_names")
        names = names if isinstance(names, dict) and all(isinstance(v, str) for v in names.values()) else None
        try:
            if not isinstance(recorded, list) or len(recorded) > MAX_DIVISORS:
                raise ValueError(f"it is not a list of at most {MAX_DIVISORS} expressions")
            divisors = tuple(DimSpec.from_json({"expr": text, "min": 0, "max": None}) for text in recorded)
            constant = next((divisor.expr for divisor in divisors if not divisor.symbols), None)
            if constant is not None:  # the lowering records expressions of sizes only: "0" refused every call
                raise ValueError(f"{constant[:80]!r} holds no size symbol")
        except (ValueError, TypeError, OverflowError) as exc:
            raise PackageError(f"{path!r}: the signature's divisors are malformed ({exc}); lower the model again") from None
        return cls(divisors, names) if divisors else None

    def check(self, bindings: dict[str, int]) -> None:
        """Raise InputError where these sizes make a divisor 0 (a divisor no input size gives is left alone)."""
        for divisor in self._divisors:
            if evaluate_dim(divisor, bindings) == 0:
                symbols = sorted(divisor.symbols)
                sizes = ", ".join(f"{under_dim_names(symbol, self._dim_names)} = {bindings[symbol]}" for symbol in symbols)
                raise InputError(f"the inputs' sizes ({sizes}) make the program divide by zero: it divides by "
                                 f"{under_dim_names(divisor.expr, self._dim_names)}, which is 0 at these sizes (eager "
                                 "raises ZeroDivisionError there, and the generated code would end the process); pass "
                                 "sizes where it is not 0")
