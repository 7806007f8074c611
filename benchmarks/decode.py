"""An LLM decode step end to end: a Llama-3-shaped ~1B decoder, every way to run it, against the
memory-bandwidth bound.

    python3 benchmarks/decode.py [--batch 1] [--rows eager compile ...] [--json out.json]     (CUDA)
    python3 benchmarks/decode.py --tiny --device cpu                                           (CPU test)

The model is ``aotcuda.models.decoder`` (16 layers, dim 2048, 32 query / 8 KV heads of 64, FFN 8192,
vocab 32000, bfloat16, random weights; rotary embeddings in complex numbers as Meta's reference code
writes them; a static KV cache of 2048 positions in mutated buffers, written at ``input_pos``). One step
takes tokens [B, 1] and input_pos [1] and returns float32 logits [B, vocab].

Rows (``--rows``, default all): eager; torch.compile (default and mode="reduce-overhead");
AOTInductor with the complex fallback kernels (``aoti_compile_and_package`` + ``aoti_load_package``);
aotcuda.load without and with CUDA graphs, and a graph bound with ``Program.bind`` (zero-copy replay);
the graph rows run on CUDA only.
Each row starts from an empty cache, runs ``--check-steps`` steps on the same random tokens, and its last
logits are compared with float32 eager (the same bf16 weights, computed in float32): relative error
‖out − ref‖/‖ref‖. Then it is timed at position ``--pos`` (median of ``triton.testing.do_bench`` on CUDA,
of perf_counter batches on the CPU). tokens/s = B / step time. The bound: the bytes a step must read
(every weight matrix and the whole static cache, ``bytes_read_per_step``) at the bandwidth of a device
copy measured in the same run; each row's "of bound" is its tokens/s over the bound's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_row, relative_error  # noqa: E402

ROWS = ("eager", "compile", "compile-ro", "aoti", "aotcuda", "aotcuda-graphs", "aotcuda-bind")
ROW_NAMES = {
    "eager": "eager",
    "compile": "torch.compile",
    "compile-ro": 'torch.compile mode="reduce-overhead"',
    "aoti": "AOTInductor, complex fallback kernels (aoti_load_package)",
    "aotcuda": "aotcuda.load",
    "aotcuda-graphs": "aotcuda.load, cuda_graphs=True",
    "aotcuda-bind": "aotcuda, Program.bind(...).replay() (zero-copy graph)",
}


def timer(device: torch.device):
    """median µs of fn() for this device."""
    if device.type == "cuda":
        import triton.testing

        return lambda fn: 1e3 * triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")

    def cpu_us(fn, batches: int = 15, per_batch: int = 5) -> float:
        fn()
        times = []
        for _ in range(batches):
            start = time.perf_counter()
            for _ in range(per_batch):
                fn()
            times.append((time.perf_counter() - start) / per_batch * 1e6)
        return statistics.median(times)

    return cpu_us


def copy_bandwidth(device: torch.device, measure) -> float:
    """Bytes per second moved (read + written) by a device copy of 1 GiB (64 MiB on the CPU)."""
    size = (1 << 30) if device.type == "cuda" else (64 << 20)
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * size / (measure(lambda: dst.copy_(src)) * 1e-6)


def zero_caches(module: torch.nn.Module) -> None:
    for name, buffer in module.named_buffers():
        if "cache" in name:
            buffer.zero_()


def build_row(key, model, example, device, workdir, lowered: dict):
    """(step function taking (tokens, input_pos), reset function or None) for one row; the aotcuda rows
    share one lowering (kept in ``lowered``)."""
    import aotcuda

    reset = lambda: zero_caches(model)  # noqa: E731 - rows that run the eager module share its cache
    if key == "eager":
        return model, reset
    if key == "compile":
        return torch.compile(model), reset
    if key == "compile-ro":
        return torch.compile(model, mode="reduce-overhead"), reset
    if key == "aoti":
        ep = torch.export.export(model, example)
        path = torch._inductor.aoti_compile_and_package(ep, package_path=f"{workdir}/aoti.pt2")
        return torch._inductor.aoti_load_package(path), None
    if "path" not in lowered:
        lowered["path"] = aotcuda.lower(model, example, device=device.type,
                                        package_path=f"{workdir}/aotcuda.pt2").package_path
    return aotcuda.load(lowered["path"], cuda_graphs=key == "aotcuda-graphs"), None


def run_row(key, step, example, tokens_per_step, reference, measure, pos):
    """(relative error of the last checked step, µs per step)."""
    tokens_in, pos_in = example
    if key == "aotcuda-bind":
        bound = step.bind([tokens_in.clone(), pos_in.clone()])
        static_tokens, static_pos = bound.inputs
        for position, tokens in enumerate(tokens_per_step):  # the bind's warm-up wrote position 0: rewritten
            static_tokens.copy_(tokens)
            static_pos.fill_(position)
            logits = bound.replay()
        error = relative_error(logits, reference)
        static_pos.fill_(pos)
        return error, measure(bound.replay)
    for position, tokens in enumerate(tokens_per_step):
        logits = step(tokens, torch.tensor([position], device=tokens.device))
    error = relative_error(logits, reference)
    at = torch.tensor([pos], device=tokens_in.device)
    return error, measure(lambda: step(tokens_in, at))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=ROWS)
    parser.add_argument("--tiny", action="store_true", help="the test-size config (2 layers, dim 64)")
    parser.add_argument("--check-steps", type=int, default=4)
    parser.add_argument("--pos", type=int, help="position timed (default: half the cache)")
    parser.add_argument("--json")
    opts = parser.parse_args()
    from aotcuda.models.decoder import DecoderConfig, bytes_read_per_step, make_decoder
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()  # torch's own AOTI loader needs it on the H200 machine
    device = torch.device(opts.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device here: run with --device cpu (and --tiny)")
    config = DecoderConfig.tiny() if opts.tiny else DecoderConfig.llama_1b()
    pos = opts.pos if opts.pos is not None else config.max_seq_len // 2
    measure = timer(device)
    bandwidth = copy_bandwidth(device, measure)
    card = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    command = "python3 benchmarks/decode.py " + " ".join(sys.argv[1:])
    results = dict(torch=torch.__version__, card=card, command=command, config=dataclasses.asdict(config),
                   copy_bandwidth_gbs=bandwidth / 1e9, batches={})
    for batch in opts.batch:
        model = make_decoder(config, batch, device=device, dtype=torch.bfloat16)
        reference_model = make_decoder(config, batch, device=device, dtype=torch.float32)
        reference_model.load_state_dict({k: v.float() if v.is_floating_point() else v
                                         for k, v in model.state_dict().items()})
        generator = torch.Generator().manual_seed(batch)
        tokens_per_step = [torch.randint(0, config.vocab_size, (batch, 1), generator=generator).to(device)
                           for _ in range(opts.check_steps)]
        with torch.no_grad():
            for position, tokens in enumerate(tokens_per_step):
                reference = reference_model(tokens, torch.tensor([position], device=device))
        del reference_model
        example = (tokens_per_step[0], torch.zeros(1, dtype=torch.long, device=device))
        step_bytes = bytes_read_per_step(model)
        bound_tps = batch * bandwidth / step_bytes
        rows = []
        with tempfile.TemporaryDirectory() as workdir, torch.no_grad():
            lowered: dict = {}
            for key in opts.rows:
                if key in ("aotcuda-graphs", "aotcuda-bind") and device.type != "cuda":
                    continue  # CUDA graphs: CUDA only
                start = time.perf_counter()
                try:  # one failing row is reported in the table, the others still run
                    step, reset = build_row(key, model, example, device, workdir, lowered)
                    seconds = time.perf_counter() - start
                    if reset is not None:
                        reset()
                    error, us = run_row(key, step, example, tokens_per_step, reference, measure, pos)
                except Exception as exc:  # noqa: BLE001 - the table says why
                    rows.append(dict(row=key, variant=ROW_NAMES[key], failed=f"{type(exc).__name__}: {exc}"[:300]))
                    print(f"  {key}: failed: {exc}", file=sys.stderr)
                    continue
                tps = batch * 1e6 / us
                rows.append(dict(row=key, variant=ROW_NAMES[key], us=us, tokens_per_s=tps,
                                 of_bound=tps / bound_tps, error=error, build_s=seconds))
                print(f"  {key}: {us:.1f} µs, error {error:.1e}", file=sys.stderr)
        results["batches"][batch] = dict(bytes_per_step=step_bytes, bound_tokens_per_s=bound_tps, rows=rows)
        print(f"\nDecode step, {'tiny config' if opts.tiny else 'Llama-3-shaped 1.2B'}, batch {batch}, bf16, "
              f"cache {config.max_seq_len} at position {pos}; {card}, torch {torch.__version__}; `{command}`")
        print(f"Bound: {step_bytes / 1e9:.3f} GB read per step at {bandwidth / 1e9:.1f} GB/s (device copy) = "
              f"{bound_tps:.0f} tokens/s")
        print("| batch | how it runs | µs per step | tokens/s | of bound | rel. error vs float32 eager |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            if "failed" in r:
                print(markdown_row(batch, r["variant"], "failed", "", "", r["failed"].splitlines()[0][:120]))
                continue
            print(markdown_row(batch, r["variant"], f"{r['us']:.1f}", f"{r['tokens_per_s']:.0f}",
                               f"{r['of_bound']:.0%}", f"{r['error']:.1e}"))
        del model
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
