"""DeepSeek-V2 (transformers, random weights, small config) end to end on CUDA in bfloat16.

    python benchmarks/models.py [--seqs 128 1024] [--hidden 512 --layers 4 --heads 8] [--json out.json]

Time per forward (median of triton.testing.do_bench, CUDA events) of: eager, torch.compile, AOTInductor
with complex fallback kernels (torch's own loader), and aotcuda (complex math rewritten as real, our
runtime), at each sequence length of one exported program with a dynamic length. Each row also gives
the relative error of the last hidden state against eager in float32 of the same weights.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The DeepSeek-V2 factory is test-only (transformers is a test dependency): it lives with the tests, in
# tests/models/library, imported as tests.models.library from the repository root.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _common import relative_error  # noqa: E402


def build_model(hidden: int, layers: int, heads: int, max_seq: int):
    import transformers

    from tests.models.library.transformers_models import DeepseekV2Hidden, deepseek_v2_config, widen_router_margins

    config = deepseek_v2_config(
        hidden_size=hidden, intermediate_size=4 * hidden, moe_intermediate_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=max_seq,
        kv_lora_rank=hidden // 4, q_lora_rank=hidden // 2, qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=64)
    model = transformers.DeepseekV2Model(config)
    widen_router_margins(model)
    return DeepseekV2Hidden(model.eval()), config.vocab_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=[128, 1024])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--json")
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/models.py needs a CUDA device")
    import triton.testing

    import aotcuda
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()
    torch.manual_seed(0)
    max_seq = max(opts.seqs) * 2
    model32, vocab = build_model(opts.hidden, opts.layers, opts.heads, max_seq)
    model32 = model32.cuda()
    model = __import__("copy").deepcopy(model32).to(torch.bfloat16)
    example = torch.randint(0, vocab, (opts.batch, opts.seqs[0]), device="cuda")
    example = (example, torch.ones_like(example))  # input_ids, attention_mask (no padding)
    seq = torch.export.Dim("seq", min=4, max=max_seq)
    dynamic = ({1: seq}, {1: seq})

    builds = {}
    with tempfile.TemporaryDirectory() as workdir:
        builds["torch.compile"] = (torch.compile(model, dynamic=True), None)
        start = time.perf_counter()
        ep = torch.export.export(model, example, dynamic_shapes=dynamic)
        path = torch._inductor.aoti_compile_and_package(ep, package_path=f"{workdir}/fallbacks.pt2")
        builds["AOTInductor, complex fallbacks"] = (torch._inductor.aoti_load_package(path),
                                                    time.perf_counter() - start)
        start = time.perf_counter()
        lowered = aotcuda.lower(model, example, dynamic_shapes=dynamic, device="cuda",
                                package_path=f"{workdir}/aotcuda.pt2")
        builds["aotcuda"] = (aotcuda.load(lowered.package_path), time.perf_counter() - start)
        rows = []
        for seq in opts.seqs:
            ids = torch.randint(0, vocab, (opts.batch, seq), device="cuda")
            ids = (ids, torch.ones_like(ids))
            with torch.no_grad():
                ref = model32(*ids)
                runs = {"eager": model, **{k: v[0] for k, v in builds.items()}}
                for name, fn in runs.items():
                    out = fn(*ids)
                    out = out[0] if isinstance(out, (list, tuple)) else out
                    us = 1e3 * triton.testing.do_bench(lambda: fn(*ids), warmup=25, rep=200, return_mode="median")
                    rows.append(dict(seq=seq, variant=name, us=us, error=relative_error(out, ref)))
    print(f"\nDeepSeek-V2 hidden {opts.hidden}, {opts.layers} layers, {opts.heads} heads, batch {opts.batch}, "
          f"bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| seq | variant | median µs | vs. eager | rel. error vs fp32 eager |")
    print("|---|---|---|---|---|")
    eager = {r["seq"]: r["us"] for r in rows if r["variant"] == "eager"}
    for r in rows:
        print(f"| {r['seq']} | {r['variant']} | {r['us']:.1f} | {eager[r['seq']] / r['us']:.2f}× | {r['error']:.1e} |")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(dict(rows=rows, torch=torch.__version__), f, indent=1)


if __name__ == "__main__":
    main()
