"""What a pass did to a program: the small record every pass keeps after a call (``pass.result``).

As ExecuTorch's PassResult and Torch-TensorRT's pass list: `lower()` collects one per pass, in order, on
``LoweredProgram.pass_results``, and on an error after the passes (``error.pass_results``).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class PassResult:
    """name: the pass's class name. changed: whether it returned a different program. counts: what it
    counted (e.g. {"replaced": 3, "kept": 1}), by name. refusal: why it left the program as it was, if
    it refused one (an object with op, node, source and reason, e.g. the complex pass's scan.Refusal)."""

    name: str
    changed: bool = False
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    refusal: object | None = None

    def summary(self) -> str:
        """One line: "ReplaceViewCopyWithViewPass: changed (replaced 3, kept 1)"."""
        counts = ", ".join(f"{name} {count}" for name, count in self.counts.items())
        what = "changed" if self.changed else "unchanged"
        line = f"{self.name}: {what}" + (f" ({counts})" if counts else "")
        if self.refusal is not None:
            refusal = self.refusal
            line += (f"; refused {refusal.op} (node {refusal.node}, at "
                     f"{refusal.source or 'an unknown source line'}): {refusal.reason}")
        return line
