"""ExecuTorch's real CUDA backend on complex RoPE programs: missing fallback kernels without the pass, a .pte with it.

For each program of tests/with_executorch/et_programs.py (Llama-2 RoPE, "twice", Wan complex128 RoPE), exported
on the GPU after ``model.cuda()`` (each program keeps its table where that moves it: a buffer, or a move in
forward), lowered with ``to_edge_transform_and_lower`` and ExecuTorch's ``CudaPartitioner``:

- without:        ExecuTorch as it ships; expected to fail with "missing fallback kernels (N total)";
- in the backend: ``aotcuda.executorch.complex_pass_in(CudaBackend)``: the pass runs in CudaBackend's
                  custom passes on the Edge program;
- before to_edge: ``ReplaceComplexWithRealPass`` on the decomposed ATen program, then ExecuTorch.

A route that succeeds writes ``<program>-<route>/<program>.pte`` and the ``aoti_cuda_blob.ptd`` CudaBackend
keeps beside it under --out. The .pte cannot be run here (the PyPI ExecuTorch runtime has no CUDA backend);
what it computes is checked against eager by tests/with_executorch on the CPU stand-in of the same backend.
Each row goes to --json as soon as it is known (the file always holds valid JSON); one table at the end.

    python benchmarks/executorch_cuda.py [--programs llama2 twice wan] [--routes without backend before]
                                        [--device cuda|cpu] [--jobs N] [--out DIR] [--json rows.json]

``--device cpu`` lowers with the CPU stand-in of CudaBackend (tests/with_executorch/aoti_cpu.py), to check
the script without a GPU. ``--jobs N`` lowers N programs/routes at once in separate processes (AOTInductor's
C++ compile is mostly one core; every route compiles, "without" too: AotiBackend reports missing kernels
after the compile); the seconds of a row are then its own wall time among the others.

Needs ExecuTorch 1.5.1 (``pip install -e '.[executorch]'``, or its wheel with ruamel.yaml, flatbuffers
and tabulate, --no-deps, where there is no network) and, for --device cuda, a CUDA device. Exit code 0 when
every "without" run fails with missing fallback kernels and every other run writes a .pte (and, on CUDA,
a .ptd); 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "with_executorch"))

import et_programs  # noqa: E402

from aotcuda.executorch import complex_pass_in  # noqa: E402
from aotcuda.lowering.decompositions import decomposition_table  # noqa: E402
from aotcuda.passes import ReplaceComplexWithRealPass  # noqa: E402

ROUTES = {"without": "without the pass", "backend": "in the backend", "before": "before to_edge"}


def backend_and_partitioner(device: str, specs: list):
    """(backend class, partitioner): CudaBackend/CudaPartitioner, or on the CPU the stand-in of CudaBackend."""
    if device == "cuda":
        from executorch.backends.cuda.cuda_backend import CudaBackend
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner

        return CudaBackend, CudaPartitioner(specs)
    import aoti_cpu
    from executorch.backends.aoti.aoti_partitioner import AotiPartitioner

    return aoti_cpu.CpuAotiBackend, AotiPartitioner(aoti_cpu.CpuAotiBackend.__name__, specs)


def lower(ep: torch.export.ExportedProgram, route: str, device: str):
    from executorch.backends.aoti.aoti_backend import AotiBackend
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    backend, partitioner = backend_and_partitioner(device, [AotiBackend.generate_method_name_compile_spec("forward")])
    if route == "before":
        ep = ReplaceComplexWithRealPass(strict=True)(ep.run_decompositions(decomposition_table()))
    # The Edge IR check refuses complex dtypes for most ops; a program still holding them needs it off.
    config = EdgeCompileConfig(_check_ir_validity=route == "before")

    def run():
        return to_edge_transform_and_lower(ep, partitioner=[partitioner], compile_config=config)

    if route == "backend":
        with complex_pass_in(backend):
            return run()
    return run()


def run_one(name: str, route: str, device: str, out_dir: str) -> dict:
    """Export, lower and write one program by one route; the row says what happened."""
    row = {"program": name, "route_id": route, "route": ROUTES[route], "device": device, "torch": torch.__version__}
    start = time.perf_counter()
    try:
        case = et_programs.PROGRAMS[name]
        model, args, _, dynamic_shapes = case.build(torch.float32)  # positional: no keyword arguments
        model = model.to(device)
        ep = torch.export.export(model, tuple(a.to(device) for a in args), dynamic_shapes=dynamic_shapes, strict=False)
        program = lower(ep, route, device).to_executorch()
    except Exception as error:  # noqa: BLE001 - the row records what ExecuTorch said
        message = str(error)
        missing = re.search(r"missing fallback kernels \((\d+) total\)", message)
        row.update(ok=route == "without" and missing is not None, seconds=round(time.perf_counter() - start, 1),
                   result=f"missing fallback kernels ({missing[1]} total)" if missing
                   else f"{type(error).__name__}: {(message.splitlines() or [''])[0][:200]}",
                   kernels=re.findall(r"^  - (\S+)$", message, re.M), files={})
        return row
    finally:
        if device == "cpu":  # the stand-in keeps each compiled delegate to run it; nothing runs them here
            import aoti_cpu

            aoti_cpu.remove(aoti_cpu.COMPILED)
            aoti_cpu.COMPILED.clear()
    stem = os.path.join(out_dir, f"{name}-{route}")
    os.makedirs(stem, exist_ok=True)
    with open(os.path.join(stem, f"{name}.pte"), "wb") as file:
        program.write_to_file(file)
    if getattr(program, "_tensor_data", None):  # the .ptd files; write_tensor_data_to_file asserts there are some
        program.write_tensor_data_to_file(stem)
    files = {f: os.path.getsize(os.path.join(stem, f)) for f in sorted(os.listdir(stem))}
    wrote_ptd = any(f.endswith(".ptd") for f in files)
    row.update(ok=route != "without" and (wrote_ptd or device != "cuda"), seconds=round(time.perf_counter() - start, 1),
               result="wrote " + " + ".join(sorted({os.path.splitext(f)[1] for f in files})), kernels=[], files=files)
    return row


def size_of(row: dict, suffix: str) -> str:
    sizes = [size for f, size in row["files"].items() if f.endswith(suffix)]
    return f"{sum(sizes) / 1024:.1f} KiB" if sizes else "–"


def write_json(path: str | None, rows: list[dict], device: str) -> None:
    if path:
        with open(path + ".tmp", "w") as file:
            json.dump({"device": device, "torch": torch.__version__, "rows": rows}, file, indent=1)
        os.replace(path + ".tmp", path)  # a reader (or a run cut short) sees the whole file or the last one


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", default=list(et_programs.PROGRAMS), choices=list(et_programs.PROGRAMS))
    parser.add_argument("--routes", nargs="+", default=list(ROUTES), choices=list(ROUTES))
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--jobs", type=int, default=1, help="lowerings at once, each in its own process")
    parser.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(prefix="aotcuda-et-"))
    parser.add_argument("--json", help="write the rows here, after each one")
    options = parser.parse_args()
    if options.device == "cuda" and not torch.cuda.is_available():
        print("needs a CUDA device: torch.cuda.is_available() is False (--device cpu runs the CPU stand-in)",
              file=sys.stderr)
        return 1
    import executorch  # noqa: F401  (fail early and clearly where it is missing)

    device = torch.cuda.get_device_name() if options.device == "cuda" else "CPU stand-in of CudaBackend"
    tasks = [(name, route) for name in options.programs for route in options.routes]
    rows: list[dict] = []

    def record(row: dict) -> None:
        rows.append(row)
        print(f"{'ok ' if row['ok'] else 'BAD'} {row['program']:7} {row['route']:17} {row['seconds']:6.1f} s  "
              f"{row['result']}", flush=True)
        write_json(options.json, rows, device)

    if options.jobs > 1:
        # spawn: a forked child cannot use CUDA once the parent has; each worker imports this script afresh.
        pool = concurrent.futures.ProcessPoolExecutor(options.jobs, mp_context=multiprocessing.get_context("spawn"))
        with pool:
            # "without" first: it compiles the complex fallback kernels too, the longest lowering of a program.
            ordered = sorted(tasks, key=lambda task: task[1] != "without")
            futures = [pool.submit(run_one, name, route, options.device, options.out) for name, route in ordered]
            for future in concurrent.futures.as_completed(futures):
                record(future.result())
    else:
        for name, route in tasks:
            record(run_one(name, route, options.device, options.out))

    rows.sort(key=lambda row: tasks.index((row["program"], row["route_id"])))
    write_json(options.json, rows, device)
    print(f"\n| program | route | result | .pte | .ptd | seconds |\n|---|---|---|---|---|---|")
    for row in rows:
        result = row["result"] + (f": {', '.join(row['kernels'])}" if row["kernels"] else "")
        print(f"| {row['program']} | {row['route']} | {'' if row['ok'] else 'UNEXPECTED: '}{result} | "
              f"{size_of(row, '.pte')} | {size_of(row, '.ptd')} | {row['seconds']} |")
    print(f"\ntorch {torch.__version__}, {device}, --jobs {options.jobs}; files under {options.out}")
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
