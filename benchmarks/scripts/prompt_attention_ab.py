"""PromptAttentionPass A/B on a prefill: our decoder's prompt of S tokens at batch 1 (Llama-3-shaped sizes,
bf16), exported and decomposed as lower() does, compiled with torch.compile as written and after the pass
(one scaled_dot_product_attention a layer), each timed with CUDA events; a table row each, and the relative
difference of their logits (bf16 rounding: ~1e-2 expected).

    python3 benchmarks/scripts/prompt_attention_ab.py [--layers 2] [--tokens 2048]    (on a CUDA machine)

The whole-program rows (16 layers, AOTInductor packages, AOTCUDA_PROMPT_ATTENTION=1) are benchmarks/prefill.py's.
"""

import argparse
import dataclasses
import faulthandler
import time

import torch

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.models.decoder import DecoderConfig, make_decoder
from aotcuda.passes.prompt_attention import PromptAttentionPass


def milliseconds(step, args, calls: int = 4, samples: int = 5) -> list[float]:
    """Per-call times of step(*args) in ms, each the mean of ``calls`` calls, after two warm calls."""
    for _ in range(2):
        step(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        start.record()
        for _ in range(calls):
            step(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return sorted(times)


def main() -> None:
    faulthandler.enable()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=2048)
    opts = parser.parse_args()
    started = time.time()
    config = dataclasses.replace(DecoderConfig.llama_1b(), n_layers=opts.layers)
    model = make_decoder(config, 1, device="cuda", dtype=torch.bfloat16)
    tokens = torch.randint(0, config.vocab_size, (1, opts.tokens), device="cuda")
    positions = torch.arange(opts.tokens, device="cuda")
    with torch.no_grad():
        ep = torch.export.export(model, (tokens, positions)).run_decompositions(decomposition_table())
        graph_pass = PromptAttentionPass()
        fused = graph_pass(ep)
        print(f"PromptAttentionPass: {graph_pass.result.counts}; {config.n_layers} layers, {opts.tokens} tokens, "
              f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
        print("| attention | ms per prefill (best) | median | compile s |\n|---|---|---|---|")
        logits = {}
        for name, program in (("written out (Inductor)", ep), ("one SDPA a layer (the pass)", fused)):
            step = torch.compile(program.module())
            compile_start = time.time()
            logits[name] = step(tokens, positions).float()
            torch.cuda.synchronize()
            compiled = time.time() - compile_start
            times = milliseconds(step, (tokens, positions))
            print(f"| {name} | {times[0]:.3f} | {times[len(times) // 2]:.3f} | {compiled:.0f} |", flush=True)
        written, fused_logits = logits.values()
        print(f"relative difference of the logits: {((written - fused_logits).norm() / written.norm()).item():.2e}; "
              f"{time.time() - started:.0f} s in all")


if __name__ == "__main__":
    main()
