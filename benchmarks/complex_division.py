"""The CPU cost of the pass's complex division: a [n]-element complex64 a / b, lowered and loaded.

    python benchmarks/complex_division.py                 # this tree's rule, n = 1M
    python benchmarks/complex_division.py --label before  # run with PYTHONPATH at another tree's src

The program takes two float32 pair tensors [n, 2] (ordinary values: standard normal parts) and returns
view_as_real(view_as_complex(a) / view_as_complex(b)); it is lowered with aotcuda.lower(device="cpu")
(one AOTInductor compile) and called through load(). Printed: median and best wall-clock milliseconds
of `--repeats` calls after 5 warm-up calls, beside eager's complex64 division of the same values.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

import aotcuda


class Divide(torch.nn.Module):
    def forward(self, a, b):
        return torch.view_as_real(torch.view_as_complex(a) / torch.view_as_complex(b))


def timed_ms(fn, repeats: int) -> tuple[float, float]:
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--label", default="this tree")
    args = parser.parse_args()
    a, b = torch.randn(args.n, 2), torch.randn(args.n, 2)
    with tempfile.TemporaryDirectory() as tmp:
        program = aotcuda.lower(Divide(), (a, b), device="cpu", package_path=Path(tmp) / "div.pt2").load()
        out = program(a, b)
        out = out[0] if isinstance(out, (list, tuple)) else out
        torch.testing.assert_close(out, Divide()(a, b), rtol=1e-5, atol=1e-5)
        lowered = timed_ms(lambda: program(a, b), args.repeats)
    za, zb = torch.view_as_complex(a), torch.view_as_complex(b)
    eager = timed_ms(lambda: za / zb, args.repeats)
    print(json.dumps({"label": args.label, "n": args.n, "threads": torch.get_num_threads(),
                      "lowered_median_ms": round(lowered[0], 3), "lowered_best_ms": round(lowered[1], 3),
                      "eager_median_ms": round(eager[0], 3), "eager_best_ms": round(eager[1], 3)}))


if __name__ == "__main__":
    main()
