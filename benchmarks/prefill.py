"""LLM prefill end to end: a prompt of 2048 tokens at batch 1 through a Llama-3-shaped ~1B decoder and
transformers' LlamaForCausalLM of the same sizes, every way to run them, against the compute (FLOP) bound.

    python3 benchmarks/prefill.py [--tokens 2048] [--rows eager,compile-max-autotune,...] [--json out.json]  (CUDA)
    python3 benchmarks/prefill.py --tiny --device cpu                                        (CPU smoke run, 16 tokens)
    python3 benchmarks/prefill.py --prebuilt decoder=PKG llama=PKG --rows aotcuda,llama-aotcuda   (time packages)

The models: ``aotcuda.models.decoder`` (16 layers, dim 2048, 32 query / 8 KV heads of 64, FFN 8192, vocab
32000, bfloat16, decode.py's seeded random weights, complex RoPE), called with tokens [1, S] at input_pos
arange(S): it writes S rows of each layer's static cache (``--cache-len``, default the config's 2048) and
attends causally over the cache; only the last token goes through the LM head. And transformers'
LlamaForCausalLM of the same sizes and weights' scale (``llama-*`` rows) over its StaticCache, one call of
S tokens exported as users export it: ``TorchExportableModuleForDecoderOnlyLM(...).export(input_ids [1, S],
cache_position arange(S))`` (the ExecuTorch recipe; tests/models/library/transformers_models.py); the recipe
computes the logits of all S tokens (no ``logits_to_keep``), and the last are kept. Its "eager" row runs the
recipe's exported module (ATen ops one by one, as eager runs them).

Rows (``--rows``, default all), for each model: eager; torch.compile (default, and mode="max-autotune": the
one to beat; on CUDA that mode replays CUDA graphs); aotcuda (``aotcuda.lower`` of the prefill → ``aotcuda.load``,
the device's default Inductor options, on CUDA coordinate-descent tuning) and aotcuda-max-autotune (the same
with Inductor's ``max_autotune=True``: GEMM templates autotuned, as torch.compile's mode does; on the CPU
also ``cpp.weight_prepack=False``, see child_build). Prefill is
long kernels, so no CUDA-graph rows of the packages: a few hundred launches are hidden behind them.
lower()'s passes are switched as in any lowering (``AOTCUDA_*`` in the environment, docs/usage.md); the
decode passes keep a prefill's attention (its rows per KV head are far above their limit) and products.

How it runs: the packages are compiled in child processes started first (``--build``; each makes the same
seeded model; decode.py's ``Builds``), while this process makes the models, their float32 references and
the torch.compile rows (which compile at their first call); every row is timed only after all compiles
have ended. The compiles share the machine, and the max-autotune ones time their candidate kernels on the
GPU that the others use: for picks made on a quiet GPU, build one package at a time with the children's
command (``python3 benchmarks/prefill.py --build decoder-max-autotune --package PATH [--tokens ...]``) and
time them with ``--prebuilt decoder-max-autotune=PATH``. A child still compiling at ``--deadline`` is stopped and its
rows say so. Each row prints its table row and rewrites ``--json`` as soon as it is measured.

Method: every row runs the same random prompt from an empty cache (the prefill writes every position it
reads, so repeated calls compute the same thing); its last token's logits are compared with float32 eager
(the same bf16 weights in float32): relative error ‖out − ref‖/‖ref‖. Then it is timed (median of
``triton.testing.do_bench`` on CUDA, of perf_counter batches on the CPU). tokens/s = B·S / prefill time.

Bound: prefill is compute-bound, so the bound is FLOPs at ``--peak-tflops`` (default 989: the H200's dense
bf16 tensor-core peak), not bytes. A prefill of S tokens from position 0 must compute at least
    2 · P · S                  every layer's weight matrices for each token,
                               P = L · (2·dim·H·hd + 2·dim·KV·hd + 3·dim·ffn)
  + 2 · dim · vocab            the LM head for the last token
  + 2 · L · dim · S · (S + 1)  causal attention: token p's q·kᵀ and p·v over p + 1 positions, 2·hd FLOPs each,
                               for H heads of hd (H · hd = dim): 4 · hd · H · S(S+1)/2 a layer
(1.24e9-parameter sizes, S = 2048: 3.986 + 0.0001 + 0.275 = 4.26 TFLOP, 4.31 ms at 989 TFLOP/s). Norms, RoPE and
softmax are not counted; a row that computes more (all S logits, the masked part of the cache) pays for it.
"of peak" = the bound's time over the row's. On the CPU the peak is not the CPU's: that column then says nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_row, relative_error  # noqa: E402
from decode import (Builds, build_package, make_model, parse_inductor_configs, parse_rows, timer,  # noqa: E402
                    zero_caches)

ROWS = ("eager", "compile", "compile-max-autotune", "aotcuda", "aotcuda-max-autotune",
        "llama-eager", "llama-compile", "llama-compile-max-autotune", "llama-aotcuda", "llama-aotcuda-max-autotune")
LLAMA = "transformers Llama, StaticCache, executorch recipe export"
ROW_NAMES = {
    "eager": "eager",
    "compile": "torch.compile",
    "compile-max-autotune": 'torch.compile mode="max-autotune"',
    "aotcuda": "aotcuda.load",
    "aotcuda-max-autotune": "aotcuda.load, package compiled with max_autotune=True",
    "llama-eager": f"{LLAMA}: eager (the exported module)",
    "llama-compile": f"{LLAMA}: torch.compile",
    "llama-compile-max-autotune": f'{LLAMA}: torch.compile mode="max-autotune"',
    "llama-aotcuda": f"{LLAMA}: aotcuda.load",
    "llama-aotcuda-max-autotune": f"{LLAMA}: aotcuda.load, package compiled with max_autotune=True",
}
# The package each aotcuda row loads; "-max-autotune" packages add MAX_AUTOTUNE to the Inductor options.
PACKAGES = {"aotcuda": "decoder", "aotcuda-max-autotune": "decoder-max-autotune",
            "llama-aotcuda": "llama", "llama-aotcuda-max-autotune": "llama-max-autotune"}
MAX_AUTOTUNE = {"max_autotune": True}


def family(key: str) -> str:
    """"llama" (transformers' LlamaForCausalLM) for rows and packages named llama-*, else "decoder"."""
    return "llama" if key.startswith("llama") else "decoder"


def prefill_flops(config, tokens: int) -> float:
    """The FLOPs a prefill of ``tokens`` tokens from position 0 must compute (module docstring, "Bound")."""
    hd = config.head_dim
    per_layer = 2 * config.dim * config.n_heads * hd + 2 * config.dim * config.n_kv_heads * hd \
        + 3 * config.dim * config.ffn_dim
    weights = 2 * config.n_layers * per_layer * tokens
    attention = 2 * config.n_layers * config.n_heads * hd * tokens * (tokens + 1)
    return weights + 2 * config.dim * config.vocab_size + attention


def prompt_inputs(batch: int, tokens: int, device, vocab: int = 1, seed: int = 0):
    """(tokens [batch, tokens] int64, input_pos arange(tokens)): random ids below ``vocab`` (zeros for 1)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, tokens), generator=generator)
    return ids.to(device), torch.arange(tokens, device=device)


class PrefillBuilds(Builds):
    """decode.py's Builds with this script's children and package kinds."""

    @staticmethod
    def prebuilt(opts) -> dict:
        prebuilt = {}
        for value in opts.prebuilt or ():
            kind, sep, path = value.partition("=")
            if not sep or kind not in PACKAGES.values() or not os.path.exists(path):
                raise SystemExit(f"--prebuilt {value!r}: write KIND=PATH of an existing package, KIND one of "
                                 f"{', '.join(PACKAGES.values())}")
            prebuilt[kind] = path
        return prebuilt

    @staticmethod
    def child_command(kind, path, opts, batch) -> list[str]:
        command = [sys.executable, os.path.abspath(__file__), "--build", kind, "--package", path, "--batch",
                   str(batch), "--tokens", str(opts.tokens), "--cache-len", str(opts.cache_len),
                   "--device", opts.device] + (["--tiny"] if opts.tiny else [])
        return command + [arg for value in opts.inductor_config or () for arg in ("--inductor-config", value)]


def sizes(opts):
    """The DecoderConfig of the run, its cache ``--cache-len`` positions long (both models' caches)."""
    from aotcuda.models.decoder import DecoderConfig

    config = DecoderConfig.tiny() if opts.tiny else DecoderConfig.llama_1b()
    return dataclasses.replace(config, max_seq_len=opts.cache_len)


def child_build(opts) -> None:
    """``--build KIND``: compile one prefill package for the parent process and exit."""
    # Its own Inductor cache: the default and max_autotune packages of one model are the same graph, and
    # two children writing it into one cache at once left a package whose wrapper metadata did not parse.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = f"{os.path.abspath(opts.package)}.inductor-cache"
    device = torch.device(opts.device)
    model = make_model(family(opts.build), sizes(opts), opts.batch, device, tokens=opts.tokens)
    configs = parse_inductor_configs(opts.inductor_config)
    if opts.build.endswith("-max-autotune"):
        configs = {**configs, **MAX_AUTOTUNE}
        if device.type == "cpu":
            # torch 2.13's CPU AOTInductor with max_autotune and its prepacked weights (cpp GEMM templates)
            # gives our decoder wrong logits (relative error 0.5-1, its decode step too, through
            # aoti_compile_and_package as well); without the prepacking, right ones (1e-7 in float32).
            configs = {"cpp.weight_prepack": False, **configs}
    start = time.perf_counter()
    with torch.no_grad():
        build_package(opts.build, model, prompt_inputs(opts.batch, opts.tokens, device), device, opts.package,
                      configs or None)
    print(f"built {opts.build} in {time.perf_counter() - start:.1f} s: {opts.package}")


def make_step(key, model, builds):
    """(the row's prefill: a callable (tokens, input_pos) → logits, compile seconds or None)."""
    import aotcuda

    base = key.removeprefix("llama-")
    if base == "eager":
        return model, None
    if base.startswith("compile"):
        return torch.compile(model, mode="max-autotune" if base.endswith("max-autotune") else None), None
    path, seconds = builds.path(PACKAGES[key])
    return aotcuda.load(path), seconds


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, help="prompt tokens S (default 2048; 16 with --tiny)")
    parser.add_argument("--cache-len", type=int, help="the static caches' positions (default the config's: "
                        "2048; 32 with --tiny); at least --tokens")
    parser.add_argument("--rows", nargs="+", default=[",".join(ROWS)],
                        help=f"comma- or space-separated, from {','.join(ROWS)} (default: all)")
    parser.add_argument("--tiny", action="store_true", help="the test-size config (2 layers, dim 64)")
    parser.add_argument("--peak-tflops", type=float, default=989.0,
                        help="the device's peak for the bound (default 989: H200 dense bf16)")
    parser.add_argument("--deadline", type=float, default=1800.0,
                        help="seconds from the start after which compiles still running are stopped")
    parser.add_argument("--json")
    parser.add_argument("--inductor-config", nargs="+", metavar="KEY=VALUE",
                        help="Inductor options for every package's compile, e.g. combo_kernels=True")
    parser.add_argument("--prebuilt", nargs="+", metavar="KIND=PATH",
                        help=f"time these packages ({', '.join(f'{k}=PATH' for k in PACKAGES.values())}) "
                             "instead of compiling them (built with the same --tokens, --cache-len, --batch)")
    parser.add_argument("--build", choices=tuple(PACKAGES.values()), help=argparse.SUPPRESS)  # child process
    parser.add_argument("--package", help=argparse.SUPPRESS)
    parser.set_defaults(serial=False)  # decode.py's Builds reads it: the packages always compile in children
    opts = parser.parse_args()
    opts.tokens = opts.tokens or (16 if opts.tiny else 2048)
    opts.cache_len = opts.cache_len or (32 if opts.tiny else 2048)
    if opts.tokens > opts.cache_len:
        parser.error(f"--tokens {opts.tokens} does not fit a cache of --cache-len {opts.cache_len}")
    return opts


def main() -> None:
    started = time.perf_counter()
    opts = parse_args()
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()  # torch's own AOTI loader needs it on the H200 machine
    if opts.build:
        return child_build(opts)
    rows_wanted = parse_rows(opts.rows, ROWS)
    device = torch.device(opts.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device here: run with --device cpu (and --tiny)")
    config = sizes(opts)
    card = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    command = "python3 benchmarks/prefill.py " + " ".join(sys.argv[1:])
    flops = prefill_flops(config, opts.tokens) * opts.batch
    bound_ms = flops / (opts.peak_tflops * 1e12) * 1e3
    results = dict(torch=torch.__version__, card=card, command=command, config=dataclasses.asdict(config),
                   batch=opts.batch, tokens=opts.tokens, flops=flops, peak_tflops=opts.peak_tflops,
                   bound_ms=bound_ms, rows=[])

    def save():
        if opts.json:
            with open(opts.json, "w") as f:
                json.dump(results, f, indent=1)

    with tempfile.TemporaryDirectory() as workdir, torch.no_grad():
        kinds = sorted({PACKAGES[r] for r in rows_wanted if r in PACKAGES})
        builds = PrefillBuilds(kinds, opts, opts.batch, workdir, started + opts.deadline)  # children compile now
        try:
            print(f"\nPrefill, {'tiny config' if opts.tiny else 'Llama-3-shaped 1.2B'}, batch {opts.batch}, "
                  f"{opts.tokens} prompt tokens, bf16, cache {config.max_seq_len}; {card}, torch {torch.__version__}; "
                  f"`{command}`")
            print(f"Bound: {flops / 1e12:.3f} TFLOP a prefill at {opts.peak_tflops:g} TFLOP/s = {bound_ms:.3f} ms")
            print("| tokens | how it runs | ms per prefill | tokens/s | of peak | rel. error vs float32 eager "
                  "| compile s |")
            print("|---|---|---|---|---|---|---|", flush=True)
            run_rows(rows_wanted, builds, config, device, opts, bound_ms, results["rows"], save)
        finally:
            builds.stop()
    save()
    print(f"\ntotal {time.perf_counter() - started:.0f} s", file=sys.stderr)


def run_rows(rows_wanted, builds, config, device, opts, bound_ms, rows, save) -> None:
    """Every wanted row: the models and the torch.compile rows made and checked while the children compile,
    then each row timed once all compiles have ended; each printed and saved as it is measured."""
    tokens, input_pos = prompt_inputs(opts.batch, opts.tokens, device, config.vocab_size)
    measure = timer(device)
    subjects = {}

    def subject(kind):
        """(bf16 model, float32 eager logits of the prompt) of a family, made once."""
        if kind not in subjects:
            model = make_model(kind, config, opts.batch, device, tokens=opts.tokens)
            reference_model = make_model(kind, config, opts.batch, device, dtype=torch.float32, tokens=opts.tokens)
            reference_model.load_state_dict({k: v.float() if v.is_floating_point() else v
                                             for k, v in model.state_dict().items()})
            subjects[kind] = (model, reference_model(tokens, input_pos))
            del reference_model
        return subjects[kind]

    def failed(key, exc):
        rows.append(dict(row=key, variant=ROW_NAMES[key], failed=f"{type(exc).__name__}: {exc}"[:600]))
        print(markdown_row(opts.tokens, ROW_NAMES[key], "failed", "", "", str(exc).splitlines()[0][:160], ""),
              flush=True)
        save()

    # Phase 1, while the children compile: the rows this process runs are made and checked (torch.compile
    # compiles at the first call). Phase 2: every row timed, in order.
    steps = {}
    for key in rows_wanted:
        try:
            model, reference = subject(family(key))
            if key in PACKAGES:
                continue
            zero_caches(model)
            start = time.perf_counter()
            step, _ = make_step(key, model, builds)
            error = relative_error(step(tokens, input_pos), reference)
            steps[key] = (step, error, None if key.endswith("eager") else time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - one failing row is reported, the others still run
            failed(key, exc)
    builds.wait_all()
    for key in rows_wanted:
        try:
            if key in PACKAGES:
                _, reference = subject(family(key))
                step, seconds = make_step(key, None, builds)
                error = relative_error(step(tokens, input_pos), reference)
            elif key in steps:
                step, error, seconds = steps[key]
            else:
                continue  # failed in phase 1
            ms = measure(lambda: step(tokens, input_pos)) / 1e3
        except Exception as exc:  # noqa: BLE001
            failed(key, exc)
            continue
        tps = opts.batch * opts.tokens * 1e3 / ms
        rows.append(dict(row=key, variant=ROW_NAMES[key], tokens=opts.tokens, ms=ms, tokens_per_s=tps,
                         of_peak=bound_ms / ms, error=error, compile_s=seconds))
        print(markdown_row(opts.tokens, ROW_NAMES[key], f"{ms:.2f}", f"{tps:.0f}", f"{bound_ms / ms:.0%}",
                           f"{error:.1e}", "" if seconds is None else f"{seconds:.0f}"), flush=True)
        save()


if __name__ == "__main__":
    main()
