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


def cuda_kernels_a_call(fn, *args) -> int:
    """CUDA kernels one call of fn(*args) launches (torch.profiler; copies and memsets not counted)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset")))


def markdown_row(*cells) -> str:
    """One Markdown table row, ready to paste into docs/performance.md."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def graph_replay_row(cells: tuple, run, args: tuple, want: torch.Tensor, copy_us: float, rep: int = 20) -> dict:
    """Run ``run(*args)`` once, time its CUDA graph replay (triton.testing.do_bench_cudagraph over ``rep``
    ms, median µs), print one table row: cells, µs, the copy's time over it, relative error against
    ``want`` (float64)."""
    from triton.testing import do_bench_cudagraph

    with torch.no_grad():
        got = run(*args)
        us = do_bench_cudagraph(lambda: run(*args), rep=rep) * 1e3
    error = relative_error(got, want)
    print(markdown_row(*cells, f"{us:.1f}", f"{copy_us / us:.0%}", f"{error:.1e}"))
    return {"us": us, "copy_us": copy_us, "error": error}


def write_device_rows(path: str | None, rows: list) -> None:
    """The rows as JSON, with the torch version and the card's name (nothing when path is None)."""
    if path:
        import json

        with open(path, "w") as file:
            json.dump({"torch": torch.__version__, "card": torch.cuda.get_device_name(), "rows": rows}, file, indent=1)
