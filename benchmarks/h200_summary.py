"""The issue-14 targets from one h200_suite.sh run's JSON rows, one Markdown row each (printed last).

    python3 benchmarks/h200_summary.py $OUT        # the folder with rope.json, latency.json, decode*.json
"""

from __future__ import annotations

import json
import os
import sys


def load(folder: str, name: str):
    path = os.path.join(folder, f"{name}.json")
    return json.load(open(path)) if os.path.exists(path) else None


def us_of(rows, prefix: str):
    return next((r["us"] for r in rows if r["variant"].startswith(prefix) and r.get("us") is not None), None)


def ratio(a, b) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}×"


def print_plain_call(what: str, rows) -> None:
    """The plain-call target: aotcuda.load against torch's loader on the same package."""
    loader, plain = us_of(rows, "torch's AOTI"), us_of(rows, "aotcuda.load")
    if loader is not None and plain is not None:
        print(f"| {what}: aotcuda.load vs torch's loader | {plain:.1f} vs {loader:.1f} µs ({ratio(plain, loader)}) "
              "| ≤ 1.00× |")


def main(folder: str) -> None:
    print("\n| target | measured | goal |")
    print("|---|---|---|")
    latency = load(folder, "latency")
    if latency:
        rows = latency["rows"]
        print_plain_call("demo block", rows)
        graphs, floor = us_of(rows, "aotcuda.load, CUDA graphs"), us_of(rows, "the captured graph alone")
        bound = us_of(rows, "aotcuda, bound")
        print(f"| demo block: cuda_graphs=True replay − graph alone | {graphs - floor:+.1f} µs ({graphs:.1f} vs {floor:.1f}) | ≤ 3 µs |")
        if bound is not None:
            print(f"| demo block: bound graph replay − graph alone | {bound - floor:+.1f} µs | ≤ 3 µs |")
    overhead = load(folder, "overhead")
    if overhead:
        print_plain_call("tiny program", overhead["rows"])
    rope = load(folder, "rope")
    if rope:
        rows = rope["rows"]
        copy, ours = us_of(rows, "device copy"), us_of(rows, "aotcuda (complex")
        graphs, bound = us_of(rows, "aotcuda, CUDA graph"), us_of(rows, "aotcuda, bound")
        folded = us_of(rows, "aotcuda, runtime constant folding")
        print(f"| RoPE: aotcuda vs device copy | {ratio(ours, copy)} (runtime constant folding: {ratio(folded, copy)}) "
              "| ≤ 1.05× |")
        print(f"| RoPE: bound graph vs no graph | {ratio(bound, ours)} (cuda_graphs=True: {ratio(graphs, ours)}) | ≤ 1.05× |")
    for name in ("decode1", "decode8"):
        decode = load(folder, name)
        if not decode:
            continue
        for batch, entry in decode["batches"].items():
            by_row = {r["row"]: r for r in entry["rows"] if "failed" not in r}
            best = max((r for k, r in by_row.items() if k.startswith("aotcuda")), key=lambda r: r["tokens_per_s"],
                       default=None)
            ro = by_row.get("compile-ro")
            if best is not None:
                vs = f", reduce-overhead {ro['tokens_per_s']:.0f}" if ro else ""
                print(f"| decode B={batch}: best aotcuda row ({best['row']}) | {best['tokens_per_s']:.0f} tokens/s, "
                      f"{best['of_bound']:.0%} of bound{vs} | ≥ reduce-overhead; ≥ 70% of bound at B=1 |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp/aotcuda-out"))
