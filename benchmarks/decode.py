"""An LLM decode step end to end: a Llama-3-shaped ~1B decoder, every way to run it, against the
memory-bandwidth bound.

    python3 benchmarks/decode.py --batch 1 [--rows eager,compile,...] [--json out.json]       (CUDA)
    python3 benchmarks/decode.py --tiny --device cpu --batch 1                                (CPU smoke run)

The model is ``aotcuda.models.decoder`` (16 layers, dim 2048, 32 query / 8 KV heads of 64, FFN 8192,
vocab 32000, bfloat16, random weights; rotary embeddings in complex numbers as Meta's reference code
writes them; a static KV cache of 2048 positions in mutated buffers, written at ``input_pos``). One step
takes tokens [B, 1] and input_pos [1] and returns float32 logits [B, vocab].

Rows (``--rows``, default all): eager; torch.compile (default and mode="reduce-overhead", and
reduce-overhead on the same model with its RoPE in real numbers as gpt-fast writes it, ``compile-ro-real``);
AOTInductor with the complex fallback kernels (``aoti_compile_and_package`` + ``aoti_load_package``);
aotcuda.load without and with CUDA graphs, the latter also without its index-range check
(``aotcuda-graphs-unchecked``: ``check_index_ranges=False``, what the check's synchronization costs a step),
and a graph bound with ``Program.bind`` (zero-copy replay).
The ``llama-*`` rows run transformers' LlamaForCausalLM of the same sizes over its StaticCache, one decode
step exported as users export it (``TorchExportableModuleForDecoderOnlyLM(...).export``, the ExecuTorch
recipe; tests/models/library/transformers_models.py), lowered by aotcuda with the same passes, and under
torch.compile reduce-overhead. The graph rows run on CUDA only. lower()'s passes are switched as in any
lowering: ``AOTCUDA_SIBLING_PRODUCTS=0`` / ``AOTCUDA_DECODE_ATTENTION=0`` in the environment turn one off
for the package compiles (docs/usage.md, "Environment switches").
How it runs in a few minutes: the two AOTInductor packages (complex fallbacks; aotcuda) are compiled in
two child processes started first (``--build``; each makes the same seeded model), while this process
compiles the torch.compile rows; every row is timed only after all compiles have ended, so that no row
is timed while another compiles. Each row prints its table row and rewrites ``--json`` as soon as it is
measured; a child still compiling at ``--deadline`` seconds is stopped and its rows say so.
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

# A row's key says how it runs: [llama-]<way>[-real], the way (base_row) one of eager, compile, compile-ro,
# aoti, aotcuda, aotcuda-graphs, aotcuda-bind, aotcuda-graphs-unchecked. The sets below follow from the key.
ROW_NAMES = {
    "eager": "eager",
    "compile": "torch.compile",
    "compile-ro": 'torch.compile mode="reduce-overhead"',
    "compile-ro-real": 'torch.compile mode="reduce-overhead", RoPE in real numbers (gpt-fast)',
    "aoti": "AOTInductor, complex fallback kernels (aoti_load_package)",
    "aotcuda": "aotcuda.load",
    "aotcuda-graphs": "aotcuda.load, cuda_graphs=True",
    "aotcuda-bind": "aotcuda, Program.bind(...).replay() (zero-copy graph)",
    "aotcuda-graphs-unchecked": "aotcuda.load, cuda_graphs=True, check_index_ranges=False",
    "llama-compile-ro": 'transformers Llama, StaticCache: torch.compile mode="reduce-overhead"',
    "llama-aotcuda": "transformers Llama, StaticCache, executorch recipe export: aotcuda.load",
    "llama-aotcuda-graphs": "transformers Llama, StaticCache, executorch recipe export: aotcuda.load, cuda_graphs=True",
    "llama-aotcuda-bind": "transformers Llama, StaticCache, executorch recipe export: aotcuda, Program.bind",
    "llama-aotcuda-graphs-unchecked": "transformers Llama, StaticCache, executorch recipe export: aotcuda.load, "
                                      "cuda_graphs=True, check_index_ranges=False",
}
ROWS = tuple(ROW_NAMES)


def family(key: str) -> str:
    """Which model a row runs: "llama" (transformers' LlamaForCausalLM), "real" (our decoder with real
    RoPE) or "decoder" (our decoder, complex RoPE)."""
    return "llama" if key.startswith("llama-") else "real" if key.endswith("-real") else "decoder"


def base_row(key: str) -> str:
    """The way of running a row names, whatever its model: llama-aotcuda-graphs -> aotcuda-graphs."""
    return key.removeprefix("llama-").removesuffix("-real")


def package_kind(key: str) -> str | None:
    """The package a row loads (a ``--build`` kind): "aoti", "aotcuda" (our decoder) or "llama" (transformers'
    Llama), both of the latter lowered by aotcuda; None for a row that compiles no package."""
    base = base_row(key)
    if base == "aoti":
        return "aoti"
    if base == "aotcuda" or base.startswith("aotcuda-"):
        return "llama" if family(key) == "llama" else "aotcuda"
    return None


# CUDA only: the rows that run a CUDA graph (aotcuda-graphs*, and aotcuda-bind's bound graph)
GRAPH_ROWS = tuple(key for key in ROWS if base_row(key).startswith("aotcuda-"))
PACKAGE_ROWS = {key: package_kind(key) for key in ROWS if package_kind(key) is not None}


def make_model(kind: str, config, batch: int, device, dtype=torch.bfloat16, tokens: int = 1):
    """The model of a family (see family()) with decode.py's seeded weights, an empty cache. ``tokens``: the
    tokens a call of the transformers Llama is exported for (1: a decode step; our decoder takes any)."""
    from aotcuda.models.decoder import make_decoder

    if kind != "llama":
        return make_decoder(config, batch, device=device, dtype=dtype, real_rope=kind == "real")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests.models.library
    from tests.models.library.transformers_models import build_llama_decode_step, llama_decode_config

    sizes = llama_decode_config(dim=config.dim, layers=config.n_layers, heads=config.n_heads,
                                kv_heads=config.n_kv_heads, ffn=config.ffn_dim, vocab=config.vocab_size,
                                max_seq=config.max_seq_len)
    return build_llama_decode_step(sizes, batch, device=device, dtype=dtype, tokens=tokens)


def bytes_read(model) -> int:
    """bytes_read_per_step of any of the models: every weight but the token embedding table (only the rows
    looked up are read), and the whole static KV cache (buffers named ...cache...)."""
    weights = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
                  if "tok_embeddings" not in n and "embed_tokens" not in n)
    cache = sum(b.numel() * b.element_size() for n, b in model.named_buffers() if "cache" in n)
    return weights + cache


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


def build_package(kind: str, model, example, device, path: str, inductor_configs=None) -> str:
    """Compile one package: "aoti" (torch.export + aoti_compile_and_package, the complex ops as fallback
    kernels) or "aotcuda" / "llama" (aotcuda.lower of the model given), with ``inductor_configs`` over each
    one's defaults. Returns its path."""
    if kind == "aoti":
        ep = torch.export.export(model, example)
        return torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=inductor_configs)
    import aotcuda

    lowered = aotcuda.lower(model, example, device=device.type, package_path=path, inductor_configs=inductor_configs)
    for result in lowered.pass_results:
        print(f"pass {kind}: {result.summary()}", flush=True)
    return lowered.package_path


def parse_inductor_configs(values) -> dict:
    """``--inductor-config KEY=VALUE ...`` → {KEY: VALUE}, VALUE read as a Python literal where it is one."""
    import ast

    configs = {}
    for value in values or ():
        key, sep, text = value.partition("=")
        if not sep:
            raise SystemExit(f"--inductor-config {value!r}: write KEY=VALUE, e.g. combo_kernels=True")
        try:
            configs[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            configs[key] = text
    return configs


def parse_prebuilt(values) -> dict:
    """``--prebuilt KIND=PATH ...`` → {KIND: PATH}: packages to time instead of compiling them."""
    prebuilt = {}
    for value in values or ():
        kind, sep, path = value.partition("=")
        if not sep or kind not in ("aoti", "aotcuda", "llama") or not os.path.exists(path):
            raise SystemExit(f"--prebuilt {value!r}: write aoti=PATH, aotcuda=PATH or llama=PATH of an existing package")
        prebuilt[kind] = path
    return prebuilt


def example_inputs(batch: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """What the packages are exported with (static shapes: only the shapes matter)."""
    return torch.zeros(batch, 1, dtype=torch.long, device=device), torch.zeros(1, dtype=torch.long, device=device)


class Builds:
    """The package compiles, each in a child process (``--build``) started at once, or in this process
    (``--serial``). ``path(kind)`` waits for one and returns its package, or raises RuntimeError with the
    child's last lines (or the deadline) as the reason."""

    def __init__(self, kinds, opts, batch, workdir, deadline):
        import subprocess

        self._procs, self._paths, self._deadline, self._workdir, self._done = {}, {}, deadline, workdir, {}
        self._serial, self._configs = opts.serial, parse_inductor_configs(opts.inductor_config)
        prebuilt = self.prebuilt(opts)
        for kind in kinds:
            path = f"{workdir}/{kind}.pt2"
            self._paths[kind] = path
            if kind in prebuilt:
                self._paths[kind] = prebuilt[kind]
                self._done[kind] = (prebuilt[kind], None)  # its compile time is not known here
                continue
            if opts.serial:
                continue
            log = open(f"{workdir}/{kind}.log", "w")
            self._procs[kind] = (subprocess.Popen(self.child_command(kind, path, opts, batch), stdout=log,
                                                  stderr=subprocess.STDOUT, start_new_session=True),
                                 log, time.perf_counter())

    @staticmethod
    def prebuilt(opts) -> dict:
        """{kind: path} of the packages given with --prebuilt (a subclass for another script reads its own kinds)."""
        return parse_prebuilt(opts.prebuilt)

    @staticmethod
    def child_command(kind, path, opts, batch) -> list[str]:
        """The command line of the child that compiles ``kind`` into ``path`` (it prints ``built KIND in S s``)."""
        command = [sys.executable, os.path.abspath(__file__), "--build", kind, "--package", path,
                   "--batch", str(batch), "--device", opts.device] + (["--tiny"] if opts.tiny else [])
        return command + [arg for value in opts.inductor_config or () for arg in ("--inductor-config", value)]

    def wait_all(self) -> None:
        """Wait for every child (until the deadline), so that no row is timed while one compiles."""
        for kind in list(self._procs):
            try:
                self.path(kind)
            except RuntimeError:
                pass  # kept: path() raises it again for the row

    def path(self, kind, model=None, example=None, device=None) -> tuple[str, float]:
        """(package path, seconds its compile took)."""
        if kind not in self._done:
            try:
                self._done[kind] = self._wait(kind, model, example, device)
            except RuntimeError as exc:
                self._done[kind] = exc
        if isinstance(self._done[kind], RuntimeError):
            raise self._done[kind]
        return self._done[kind]

    def _wait(self, kind, model, example, device) -> tuple[str, float]:
        import signal
        import subprocess

        if self._serial:
            start = time.perf_counter()
            build_package(kind, model, example, device, self._paths[kind], self._configs)
            return self._paths[kind], time.perf_counter() - start
        proc, log, started = self._procs[kind]
        try:
            proc.wait(timeout=max(1.0, self._deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(f"the {kind} compile did not end by the deadline "
                               f"({time.perf_counter() - started:.0f} s after it started); raise --deadline") from None
        finally:
            log.close()
        with open(f"{self._workdir}/{kind}.log") as f:
            lines = f.read()[-4000:].strip().splitlines()
        for line in lines:
            if line.startswith(f"pass {kind}: "):
                print(line, file=sys.stderr)  # what lower()'s passes did to this package
        if proc.returncode != 0:
            raise RuntimeError(f"the {kind} compile failed (exit {proc.returncode}): {' / '.join(lines[-3:])}")
        # The child's own figure (export and compile, not the model's making); the wall time otherwise.
        built = [line.split()[3] for line in lines if line.startswith(f"built {kind} in ")]
        return self._paths[kind], float(built[-1]) if built else time.perf_counter() - started

    def stop(self) -> None:
        import signal

        for proc, log, _ in (v for v in self._procs.values() if isinstance(v, tuple)):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()


def check_row(key, step, tokens_per_step, reference):
    """Relative error of the last of the checked steps (from an empty cache, positions 0, 1, ...)."""
    if base_row(key) == "aotcuda-bind":
        static_tokens, static_pos = step.inputs
        for position, tokens in enumerate(tokens_per_step):  # the bind's warm-up wrote position 0: rewritten
            static_tokens.copy_(tokens)
            static_pos.fill_(position)
            logits = step.replay()
        return relative_error(logits, reference)
    for position, tokens in enumerate(tokens_per_step):
        logits = step(tokens, torch.tensor([position], device=tokens.device))
    return relative_error(logits, reference)


def time_row(key, step, example, measure, pos) -> float:
    """µs per step at position ``pos``."""
    if base_row(key) == "aotcuda-bind":
        step.inputs[1].fill_(pos)
        return measure(step.replay)
    tokens_in = example[0]
    at = torch.tensor([pos], device=tokens_in.device)
    return measure(lambda: step(tokens_in, at))


def make_step(key, model, builds, example, device):
    """(the row's step: a callable (tokens, input_pos) → logits, or a BoundGraph; compile seconds or None)."""
    import aotcuda

    base = base_row(key)
    if base == "eager":
        return model, None
    if base in ("compile", "compile-ro"):
        return torch.compile(model, mode="reduce-overhead" if base == "compile-ro" else None), None
    path, seconds = builds.path(PACKAGE_ROWS[key], model, example, device)
    if base == "aoti":
        return torch._inductor.aoti_load_package(path), seconds
    # "-unchecked": without the index-range check (runtime/index_ranges.py), which synchronizes before each
    # call; the row beside aotcuda-graphs says what that synchronization costs a step
    program = aotcuda.load(path, cuda_graphs=base.startswith("aotcuda-graphs"),
                           check_index_ranges=False if base.endswith("-unchecked") else None)
    if base == "aotcuda-bind":
        return program.bind([t.clone() for t in example]), seconds
    return program, seconds


def parse_rows(values, known=ROWS) -> list[str]:
    """``--rows`` values (comma- or space-separated) → row keys, each one of ``known``."""
    rows = [r for value in values for r in value.split(",") if r]
    unknown = [r for r in rows if r not in known]
    if unknown:
        raise SystemExit(f"--rows: unknown row(s) {unknown}; choose from {','.join(known)}")
    return rows


def child_build(opts) -> None:
    """``--build KIND``: compile one package for the parent process and exit."""
    from aotcuda.models.decoder import DecoderConfig

    config = DecoderConfig.tiny() if opts.tiny else DecoderConfig.llama_1b()
    device = torch.device(opts.device)
    model = make_model("llama" if opts.build == "llama" else "decoder", config, opts.batch[0], device)
    start = time.perf_counter()
    with torch.no_grad():
        build_package(opts.build, model, example_inputs(opts.batch[0], device), device, opts.package,
                      parse_inductor_configs(opts.inductor_config))
    print(f"built {opts.build} in {time.perf_counter() - start:.1f} s: {opts.package}")


def main() -> None:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rows", nargs="+", default=[",".join(ROWS)],
                        help=f"comma- or space-separated, from {','.join(ROWS)} (default: all)")
    parser.add_argument("--tiny", action="store_true", help="the test-size config (2 layers, dim 64)")
    parser.add_argument("--check-steps", type=int, default=4)
    parser.add_argument("--pos", type=int, help="position timed (default: half the cache)")
    parser.add_argument("--deadline", type=float, default=540.0,
                        help="seconds from the start after which compiles still running are stopped")
    parser.add_argument("--serial", action="store_true", help="compile the packages in this process, one by one")
    parser.add_argument("--json")
    parser.add_argument("--inductor-config", nargs="+", metavar="KEY=VALUE",
                        help="Inductor options for both packages' compiles, e.g. combo_kernels=True")
    parser.add_argument("--prebuilt", nargs="+", metavar="KIND=PATH",
                        help="time these packages (aoti=PATH, aotcuda=PATH) instead of compiling them; one --batch")
    parser.add_argument("--build", choices=("aoti", "aotcuda", "llama"), help=argparse.SUPPRESS)  # child process
    parser.add_argument("--package", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()  # torch's own AOTI loader needs it on the H200 machine
    if opts.build:
        return child_build(opts)
    rows_wanted = parse_rows(opts.rows)
    from aotcuda.models.decoder import DecoderConfig

    device = torch.device(opts.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device here: run with --device cpu (and --tiny)")
    if device.type != "cuda":
        rows_wanted = [r for r in rows_wanted if r not in GRAPH_ROWS]  # CUDA only
    config = DecoderConfig.tiny() if opts.tiny else DecoderConfig.llama_1b()
    pos = opts.pos if opts.pos is not None else config.max_seq_len // 2
    deadline = started + opts.deadline
    measure = timer(device)
    bandwidth = copy_bandwidth(device, measure)  # before any compile starts: a quiet machine
    card = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    command = "python3 benchmarks/decode.py " + " ".join(sys.argv[1:])
    results = dict(torch=torch.__version__, card=card, command=command, config=dataclasses.asdict(config),
                   copy_bandwidth_gbs=bandwidth / 1e9, batches={})

    def save():
        if opts.json:
            with open(opts.json, "w") as f:
                json.dump(results, f, indent=1)

    for batch in opts.batch:
        with tempfile.TemporaryDirectory() as workdir, torch.no_grad():
            kinds = sorted({PACKAGE_ROWS[r] for r in rows_wanted if r in PACKAGE_ROWS})
            builds = Builds(kinds, opts, batch, workdir, deadline)  # the children compile from here on
            try:
                run_batch(batch, rows_wanted, builds, config, device, measure, bandwidth, pos, opts,
                          results, save, card, command)
            finally:
                builds.stop()
    save()
    print(f"\ntotal {time.perf_counter() - started:.0f} s", file=sys.stderr)


def run_batch(batch, rows_wanted, builds, config, device, measure, bandwidth, pos, opts, results, save, card,
              command) -> None:
    """Every wanted row at one batch size: check each (the compiles overlap the children's), then time
    each once all compiles have ended; print and save each row as it is measured."""
    generator = torch.Generator().manual_seed(batch)
    tokens_per_step = [torch.randint(0, config.vocab_size, (batch, 1), generator=generator).to(device)
                       for _ in range(opts.check_steps)]
    subjects = {}

    def subject(kind):
        """(model, float32 eager logits of the checked steps, bound in tokens/s) of a family, made once."""
        if kind not in subjects:
            model = make_model(kind, config, batch, device)
            reference_model = make_model(kind, config, batch, device, dtype=torch.float32)
            reference_model.load_state_dict({k: v.float() if v.is_floating_point() else v
                                             for k, v in model.state_dict().items()})
            for position, tokens in enumerate(tokens_per_step):
                reference = reference_model(tokens, torch.tensor([position], device=device))
            del reference_model
            subjects[kind] = (model, reference, batch * bandwidth / bytes_read(model))
        return subjects[kind]

    example = example_inputs(batch, device)
    model, _, bound_tps = subject("decoder")
    step_bytes = bytes_read(model)
    rows = []
    results["batches"][batch] = dict(bytes_per_step=step_bytes, bound_tokens_per_s=bound_tps, rows=rows)
    print(f"\nDecode step, {'tiny config' if opts.tiny else 'Llama-3-shaped 1.2B'}, batch {batch}, bf16, "
          f"cache {config.max_seq_len} at position {pos}; {card}, torch {torch.__version__}; `{command}`")
    print(f"Bound: {step_bytes / 1e9:.3f} GB read per step at {bandwidth / 1e9:.1f} GB/s (device copy) = "
          f"{bound_tps:.0f} tokens/s (the transformers Llama's rows: its own bytes, the same within the "
          f"embedding)")
    print("| batch | how it runs | µs per step | tokens/s | of bound | rel. error vs float32 eager | compile s |")
    print("|---|---|---|---|---|---|---|", flush=True)

    def failed(key, exc):
        rows.append(dict(row=key, variant=ROW_NAMES[key], failed=f"{type(exc).__name__}: {exc}"[:600]))
        print(markdown_row(batch, ROW_NAMES[key], "failed", "", "", str(exc).splitlines()[0][:160], ""), flush=True)
        save()

    # Phase 1, while the children compile: the rows run by this process are made and checked (the
    # torch.compile rows compile at their first call here). Phase 2: every row timed, in order.
    steps = {}
    for key in rows_wanted:
        if key in PACKAGE_ROWS:
            continue
        try:
            start = time.perf_counter()
            model, reference, _ = subject(family(key))
            zero_caches(model)
            step, _ = make_step(key, model, builds, example, device)
            error = check_row(key, step, tokens_per_step, reference)
            steps[key] = (step, error, None if key == "eager" else time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - one failing row is reported, the others still run
            failed(key, exc)
    builds.wait_all()
    for key in rows_wanted:
        try:
            model, reference, bound_tps = subject(family(key))
            if key in PACKAGE_ROWS:
                step, seconds = make_step(key, model, builds, example, device)
                error = check_row(key, step, tokens_per_step, reference)
            elif key in steps:
                step, error, seconds = steps[key]
            else:
                continue  # failed in phase 1
            us = time_row(key, step, example, measure, pos)
        except Exception as exc:  # noqa: BLE001
            failed(key, exc)
            continue
        tps = batch * 1e6 / us
        rows.append(dict(row=key, variant=ROW_NAMES[key], us=us, tokens_per_s=tps, of_bound=tps / bound_tps,
                         error=error, compile_s=seconds))
        print(markdown_row(batch, ROW_NAMES[key], f"{us:.1f}", f"{tps:.0f}", f"{tps / bound_tps:.0%}",
                           f"{error:.1e}", "" if seconds is None else f"{seconds:.0f}"), flush=True)
        save()
    del model, steps, subjects


if __name__ == "__main__":
    main()
