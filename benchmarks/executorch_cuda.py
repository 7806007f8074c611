"""ExecuTorch's real CUDA backend on complex RoPE programs: missing fallback kernels without the pass, a .pte with it.

For each program of tests/with_executorch/et_programs.py (Llama-2 RoPE, "twice", Wan complex128 RoPE), exported
on the GPU, lowered with ``to_edge_transform_and_lower`` and ExecuTorch's ``CudaPartitioner``:

- without:        ExecuTorch as it ships; expected to fail with "missing fallback kernels (N total)";
- in the backend: ``aotcuda.executorch.complex_pass_in(CudaBackend)``: the pass runs in CudaBackend's
                  custom passes on the Edge program;
- before to_edge: ``ReplaceComplexWithRealPass`` on the decomposed ATen program, then ExecuTorch.

A route that succeeds writes ``<program>-<route>.pte`` (and the ``aoti_cuda_blob.ptd`` CudaBackend keeps
beside it) under --out. The .pte cannot be run here (the PyPI ExecuTorch runtime has no CUDA backend);
what it computes is checked against eager by tests/with_executorch on the CPU stand-in of the same backend.

    python benchmarks/executorch_cuda.py [--programs llama2 twice wan] [--routes without backend before]
                                        [--out DIR] [--json rows.json]

Needs ExecuTorch 1.5.1 (``pip install -e '.[executorch]'``, or its wheel with ruamel.yaml, flatbuffers
and tabulate where there is no network) and a CUDA device. Exit code 0 when every "without" run fails
with missing fallback kernels and every other run writes a .pte; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "with_executorch"))

import et_programs  # noqa: E402

from aotcuda.executorch import complex_pass_in  # noqa: E402
from aotcuda.lowering import decomposition_table  # noqa: E402
from aotcuda.passes import ReplaceComplexWithRealPass  # noqa: E402

ROUTES = {"without": "without the pass", "backend": "in the backend", "before": "before to_edge"}


def lower(ep: torch.export.ExportedProgram, route: str):
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    specs = [CudaBackend.generate_method_name_compile_spec("forward")]
    if route == "before":
        ep = ReplaceComplexWithRealPass(strict=True)(ep.run_decompositions(decomposition_table()))
    # The Edge IR check refuses complex dtypes for most ops; a program still holding them needs it off.
    config = EdgeCompileConfig(_check_ir_validity=route == "before")

    def run():
        return to_edge_transform_and_lower(ep, partitioner=[CudaPartitioner(specs)], compile_config=config)

    if route == "backend":
        with complex_pass_in(CudaBackend):
            return run()
    return run()


def run_one(name: str, route: str, out_dir: str) -> dict:
    case = et_programs.PROGRAMS[name]
    model, args, dynamic_shapes = case.build(torch.float32)
    model = model.cuda()
    args = tuple(a.cuda() for a in args)
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
    row = {"program": name, "route": ROUTES[route], "torch": torch.__version__}
    start = time.perf_counter()
    try:
        program = lower(ep, route).to_executorch()
    except Exception as error:  # noqa: BLE001 - the row records what ExecuTorch said
        message = str(error)
        missing = re.search(r"missing fallback kernels \((\d+) total\)", message)
        row.update(ok=route == "without" and missing is not None, seconds=round(time.perf_counter() - start, 1),
                   result=f"missing fallback kernels ({missing[1]} total)" if missing
                   else f"{type(error).__name__}: {message.splitlines()[0][:200]}",
                   kernels=re.findall(r"^  - (\S+)$", message, re.M))
        return row
    stem = os.path.join(out_dir, f"{name}-{route}")
    os.makedirs(stem, exist_ok=True)
    with open(f"{stem}/{name}.pte", "wb") as file:
        program.write_to_file(file)
    if getattr(program, "_tensor_data", None):  # the .ptd files; write_tensor_data_to_file asserts there are some
        program.write_tensor_data_to_file(stem)
    files = {f: os.path.getsize(os.path.join(stem, f)) for f in sorted(os.listdir(stem))}
    row.update(ok=route != "without", seconds=round(time.perf_counter() - start, 1),
               result=", ".join(f"{f} {size / 2**20:.2f} MiB" for f, size in files.items()), files=files)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", default=list(et_programs.PROGRAMS), choices=list(et_programs.PROGRAMS))
    parser.add_argument("--routes", nargs="+", default=list(ROUTES), choices=list(ROUTES))
    parser.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="aotcuda-et-"))
    parser.add_argument("--json", help="write the rows here")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA device: torch.cuda.is_available() is False", file=sys.stderr)
        return 1
    import executorch  # noqa: F401  (fail early and clearly where it is missing)

    rows = []
    for name in options.programs:
        for route in options.routes:
            rows.append(run_one(name, route, options.out))
            row = rows[-1]
            print(f"{'ok ' if row['ok'] else 'BAD'} {name:7} {row['route']:17} {row['seconds']:6.1f} s  {row['result']}",
                  flush=True)
    print(f"\n| program | route | result | seconds |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['program']} | {row['route']} | {row['result']} | {row['seconds']} |")
    print(f"\ntorch {torch.__version__}, {torch.cuda.get_device_name()}; files under {options.out}")
    if options.json:
        with open(options.json, "w") as file:
            json.dump(rows, file, indent=1)
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
