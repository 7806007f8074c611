"""What the benchmark scripts share."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def relative_error(outs: torch.Tensor | Sequence[torch.Tensor], refs: torch.Tensor | Sequence[torch.Tensor]) -> float:
    """‖out − ref‖ / ‖ref‖ over all outputs together, computed in float64."""
    if isinstance(outs, torch.Tensor):
        outs, refs = [outs], [refs]
    num = sum(float((o.double() - r.double()).norm() ** 2) for o, r in zip(outs, refs))
    den = sum(float(r.double().norm() ** 2) for r in refs)
    return (num / den) ** 0.5


def markdown_row(*cells) -> str:
    """One Markdown table row, ready to paste into docs/performance.md."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"
