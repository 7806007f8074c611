"""How a transform of static length n is computed: direct DFT, mixed-radix split, or Bluestein.

A length is split n = n1·n2 (Cooley–Tukey, four-step): n1 is a DFT product, n2 is planned again. n1 is
the divisor of n closest to √n among those up to MAX_RADIX, so a 400 becomes 20·20 and a 4096 64·64:
two GEMM stages with K = 2·n1 and 2·n2, whose cost is 8·n·(n1 + n2) real flops a row instead of the
direct DFT's 8·n². A length with no divisor in [2, MAX_RADIX] other than itself (a prime, or a
large prime factor left after splitting) above MAX_DIRECT runs as Bluestein's chirp-z transform: a
circular convolution of power-of-two length ≥ 2n − 1, itself planned as above.
"""

from __future__ import annotations

import dataclasses
import math

# Largest transform computed as one DFT product, and largest radix of a split (GEMM K = 2·radix).
MAX_DIRECT = 64
MAX_RADIX = 64
# A prime factor up to this is still a direct DFT (its table is [2p, 2p]); above it, Bluestein.
MAX_DIRECT_PRIME = 256


@dataclasses.dataclass(frozen=True)
class Plan:
    """kind "direct" (one DFT product), "split" (n = first·rest, rest a Plan) or "bluestein" (padded to
    `padded`, a Plan of that power of two)."""

    n: int
    kind: str
    first: int = 0
    rest: Plan | None = None
    padded: Plan | None = None

    def describe(self) -> str:
        if self.kind == "direct":
            return str(self.n)
        if self.kind == "split":
            return f"{self.first}·{self.rest.describe()}"
        return f"bluestein({self.n} via {self.padded.describe()})"


def _radix(n: int) -> int | None:
    """The divisor of n in [2, MAX_RADIX] closest to √n, or None."""
    divisors = [d for d in range(2, min(MAX_RADIX, n - 1) + 1) if n % d == 0]
    if not divisors:
        return None
    root = math.sqrt(n)
    return min(divisors, key=lambda d: (abs(math.log(d / root)), -d))


def plan(n: int) -> Plan:
    """The plan of a length-n complex DFT (n ≥ 1, static)."""
    if n <= MAX_DIRECT:
        return Plan(n, "direct")
    radix = _radix(n)
    if radix is not None:
        return Plan(n, "split", first=radix, rest=plan(n // radix))
    if n <= MAX_DIRECT_PRIME:
        return Plan(n, "direct")
    return Plan(n, "bluestein", padded=plan(1 << (2 * n - 2).bit_length()))
