"""aotcuda::decode_attention's kernel and its candidate variants timed side by side, on CUDA.

    python3 benchmarks/scripts/decode_attention_sweep.py [--batch 1 8] [--position 1024 2047]
        [--variants NAME ...] [--budget 170] [--mask-dtype float32] [--splits 1] [--warps 4]
        [--module other.py ...] [--json out.json]

The attention of one layer of benchmarks/decode.py's decoder (benchmarks/decode_attention.py's inputs: 32
query heads over 8 KV heads of 64, a bf16 cache of 2048 positions, the positions past ``position`` hidden by
a [1, 1, 1, L] mask; float32 by default, as SplitCacheAttentionPass builds the decoder's bias, or
--mask-dtype bfloat16 as benchmarks/decode_attention.py's own), run through a kernel module's ``launch``:
the current kernels/decode_attention.py and each of VARIANTS below (its module settings, a factor on
``splits_for``'s chunk count and the chunk kernel's warps). Each row a CUDA graph replay (graph_replay_row:
triton.testing.do_bench_cudagraph, µs), beside a device copy of the whole cache (the step reads the
positions up to ``position``: about half of it at 1024) and the error against float64 math. Then one
table: each variant's µs at each (batch, position), the best per case in bold, and the best variant per
case with its gain over the current kernel. --budget (seconds) stops starting variants once spent (those
left are listed); VARIANTS is ordered most telling first. --module times other copies of the kernel module
(their OP renamed) at each --splits factor and --warps, as the current one.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import importlib.util
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from _common import graph_replay_row, markdown_row, write_device_rows  # noqa: E402



@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    path: str | None = None  # None: aotcuda.kernels.decode_attention
    settings: dict = dataclasses.field(default_factory=dict)  # module globals: BLOCK_L, STAGES
    splits: float = 1.0  # factor on splits_for's chunk count
    warps: int = 4  # the chunk kernel's num_warps


# The op's kernel with one setting changed each, most telling first (--budget cuts from the end). Names:
# s<N>: tl.range num_stages, b<N>: positions a block, x<F>: chunks times F, w<N>: warps. The kernel before
# session 15's (a run of 64-position blocks a chunk, each read behind a per-block branch) is git history:
# time it with --module on a copy of it (its OP renamed).
VARIANTS = [
    Variant("current"),
    Variant("s1", settings={"STAGES": 1}),
    Variant("s3", settings={"STAGES": 3}),
    Variant("b64", settings={"BLOCK_L": 64}),
    Variant("b64-s3", settings={"BLOCK_L": 64, "STAGES": 3}),
    Variant("x2", splits=2),
    Variant("x0.5", splits=0.5),
    Variant("w2", warps=2),
    Variant("w8", warps=8),
]


class _Launch:
    """A Triton kernel launched raw, with extra launch options (num_warps) for one kernel."""

    def __init__(self, kernel, options: dict):
        self.kernel, self.options = kernel, options

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.kernel[grid](*args, **kwargs, **self.options)


_MODULES: dict = {}


def _module(path: str | None):
    """The kernel module at path (each loaded once: loading registers its op), or the current one."""
    if path not in _MODULES and path is None:
        from aotcuda.kernels import decode_attention as module

        module.file_settings = {name: getattr(module, name) for name in ("BLOCK_L", "STAGES")}
        _MODULES[path] = module
    if path not in _MODULES:
        spec = importlib.util.spec_from_file_location(f"decode_attention_{len(_MODULES)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.file_settings = {name: value for name, value in vars(module).items() if name.isupper()}
        _MODULES[path] = module
    return _MODULES[path]


def _configure(module, factor: float, warps: int):
    """Point module.launch at raw launches with `warps` for the chunk kernel and splits_for scaled by factor
    (a power of two, at least one chunk, at most one block a chunk)."""
    chosen = module.splits_for.__wrapped__ if hasattr(module.splits_for, "__wrapped__") else module.splits_for

    def splits_for(batch_heads, length, processors):
        blocks = max(1, -(-length // module.BLOCK_L))
        want = max(1, int(chosen(batch_heads, length, processors) * factor))
        return min(1 << (want.bit_length() - 1), 1 << (blocks.bit_length() - 1))

    splits_for.__wrapped__ = chosen
    module.splits_for = splits_for
    module.launcher = lambda kernel: _Launch(kernel, {"num_warps": warps} if kernel is module._chunk_kernel else {})


def configured(variant: Variant):
    """variant's module with its settings (the others at the file's values), chunk factor and warps."""
    module = _module(variant.path)
    for name, value in {**getattr(module, "file_settings", {}), **variant.settings}.items():
        setattr(module, name, value)
    _configure(module, variant.splits, variant.warps)
    return module


def _summary(results: list, cases: list, names: list) -> None:
    """One table: a variant a row, a case a column (µs; the case's best in bold), then the best per case."""
    timed = {(r["kernel"], r["batch"], r["position"]): r for r in results}
    best = {}
    for case in cases:
        rows = [r for r in results if (r["batch"], r["position"]) == case and r["correct"]]
        best[case] = min(rows, key=lambda r: r["us"]) if rows else None
    print()
    print(markdown_row("variant", *[f"b{b} p{p} µs" for b, p in cases]))
    print(markdown_row(*["---"] * (len(cases) + 1)))
    for name in names:
        cells = []
        for case in cases:
            row = timed.get((name, *case))
            if row is None:
                cells.append("")
                continue
            cell = f"{row['us']:.1f}" + ("" if row["correct"] else " (wrong)")
            cells.append(f"**{cell}**" if best[case] is row else cell)
        print(markdown_row(name, *cells))
    print()
    print(markdown_row("batch", "position", "best variant", "µs", "of copy", "current µs", "current / best"))
    print(markdown_row(*["---"] * 7))
    for case in cases:
        row, current = best[case], timed.get(("current", *case))
        if row is None:
            continue
        base = f"{current['us']:.1f}" if current else ""
        gain = f"{current['us'] / row['us']:.2f}" if current else ""
        print(markdown_row(*case, row["kernel"], f"{row['us']:.1f}", f"{row['copy_us'] / row['us']:.0%}", base, gain))


def main() -> None:
    faulthandler.enable()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--position", type=int, nargs="+", default=[1024, 2047])
    parser.add_argument("--variants", nargs="*", help="names in VARIANTS (default: all; none: --module only)")
    parser.add_argument("--budget", type=float, default=170.0, help="seconds; no variant starts after them")
    parser.add_argument("--mask-dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--splits", type=float, nargs="+", default=[1], help="chunk factors for --module files")
    parser.add_argument("--warps", type=int, nargs="+", default=[4], help="chunk-kernel warps for --module files")
    parser.add_argument("--module", nargs="*", default=[], help="other copies of kernels/decode_attention.py")
    parser.add_argument("--json")
    options = parser.parse_args()
    from triton.testing import do_bench_cudagraph

    from decode_attention import _inputs, _reference

    started = time.monotonic()
    known = {variant.name for variant in VARIANTS}
    unknown = set(options.variants or []) - known
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {sorted(known)}")
    variants = [v for v in VARIANTS if options.variants is None or v.name in options.variants]
    variants += [Variant(f"{os.path.basename(path)}-x{factor:g}-w{warps}", os.path.abspath(path), {}, factor, warps)
                 for path in options.module for factor in options.splits for warps in options.warps]
    processors = torch.cuda.get_device_properties(0).multi_processor_count
    cases = [(batch, position) for batch in options.batch for position in options.position]
    inputs = {}
    print(markdown_row("batch", "position", "variant", "chunks", "warps", "µs", "of copy", "rel. error"))
    print(markdown_row(*["---"] * 8))
    for batch, position in cases:
        q, k, v, mask = _inputs(batch, position)
        mask = mask.to(getattr(torch, options.mask_dtype))
        cache = torch.cat([k.flatten(), v.flatten()])
        target = torch.empty_like(cache)
        copy_us = do_bench_cudagraph(lambda: target.copy_(cache)) * 1e3
        print(markdown_row(batch, position, "device copy of the cache", "", "", f"{copy_us:.1f}", "100%", ""))
        inputs[batch, position] = (q, k, v, mask), _reference(q, k, v, mask), copy_us
    results, left = [], []
    for variant in variants:  # variant-major: a cut budget leaves whole variants out, not whole cases
        if time.monotonic() - started > options.budget:
            left.append(variant.name)
            continue
        module = configured(variant)
        for batch, position in cases:
            args, want, copy_us = inputs[batch, position]
            q, k = args[0], args[1]
            group, scale = q.shape[1] // k.shape[1], 1.0 / q.shape[-1] ** 0.5
            chunks = module.splits_for(batch * k.shape[1], k.shape[2], processors)
            row = graph_replay_row((batch, position, variant.name, chunks, variant.warps),
                                   lambda *a: module.launch(*a, scale, group), args, want, copy_us)
            results.append({"batch": batch, "position": position, "kernel": variant.name, "chunks": chunks,
                            "warps": variant.warps, "settings": variant.settings, "splits": variant.splits,
                            "correct": row["error"] < 1e-2, **row})
    if left:
        print(f"\nbudget of {options.budget:.0f} s spent; not timed: {', '.join(left)}")
    _summary(results, cases, [v.name for v in variants if v.name not in left])
    print(f"\n{time.monotonic() - started:.0f} s")
    write_device_rows(options.json, results)


if __name__ == "__main__":
    main()
