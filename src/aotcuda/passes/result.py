"""The pass contract, and the record of what a pass did to a program (``PassResult``).

Every pass, in ``aotcuda.lowering.pipeline.passes()`` and in a device profile's ``passes``, is a
``GraphPass``: called as ``ep = graph_pass(ep)``, it sets ``graph_pass.result``. The pipeline reads
nothing else. As ExecuTorch's PassResult and Torch-TensorRT's pass list: `lower()` collects one result
per pass, in order, on ``LoweredProgram.pass_results``, and on an error after the passes
(``error.pass_results``).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

from torch.export import ExportedProgram


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


@runtime_checkable
class GraphPass(Protocol):
    """What every pass is: ``graph_pass(ep) -> ExportedProgram``, and ``graph_pass.result``.

    - ``__call__(ep)`` returns the program to use from then on: a new ExportedProgram when it changed
      anything (sharing ep's weights: passes/program_copy.py), else ep itself. ep is never modified.
    - ``result`` is a PassResult, ``PassResult(type(self).__name__)`` before the first call, and set
      anew by each call to what that call did: changed, counts (the pass's own, by name), and the
      refusal, if the pass left a program as it was because it could not rewrite it whole.
    - The refusal lives only in ``result.refusal``: a pass has no other attribute the pipeline reads.
      A pass may keep details for logs and tests beside it (ReplaceViewCopyWithViewPass's node names).
    """

    result: PassResult

    def __call__(self, ep: ExportedProgram) -> ExportedProgram: ...
