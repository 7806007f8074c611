"""A CPU stand-in of ExecuTorch's CUDA backend, and a runner for what it compiles.

ExecuTorch's CudaBackend cannot lower without a GPU (its preprocess moves the program to the device
first). Its lowering is AotiBackend.preprocess, with the device, fallback allow-list, compile options and
custom passes as hooks; these classes fill the hooks for the CPU, so that the same preprocess (ExecuTorch's
ReplaceViewCopyWithViewPass, the custom passes, AOTInductor, the missing-fallback-kernel check, the
named data of the .pte) runs here:

``CpuAotiBackend`` has no custom pass, as CudaBackend ships; inside ``aotcuda.executorch.complex_pass_in
(CpuAotiBackend)`` its custom passes end with ReplaceComplexWithRealEdgePass, as docs/usage.md tells
ExecuTorch users to do with CudaBackend. (ExecuTorch refuses subclasses of a concrete backend.)

The PyPI ExecuTorch runtime has no AOTI backend registered, so a .pte holding these delegates cannot run
here; each compiled delegate is kept (``CompiledDelegate``: its .so and weights blob) and run with
aotcuda's model-container binding instead. ``CODEGEN_ONLY`` in the compile specs stops after AOTInductor's
code generation (``package_cpp_only``): the missing-fallback-kernel check runs during code generation, so
a program that fails it fails the same way, without the C++ compile.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile

import torch
from executorch.backends.aoti.aoti_backend import AotiBackend
from executorch.backends.aoti.aoti_partitioner import AotiPartitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.backend.backend_details import BackendDetails
from executorch.exir.backend.compile_spec_schema import CompileSpec

from aotcuda.passes.complex_to_real.scan import program_has_complex
from aotcuda.runtime import ownership
from aotcuda.runtime.container import ModelContainer
from aotcuda.runtime.handles import handle_array, new_handles, steal_handles

CODEGEN_ONLY = CompileSpec("aotcuda_codegen_only", b"ON")


@dataclasses.dataclass
class CompiledDelegate:
    """One delegate compiled by the stand-in: the AOTInductor .so and its weights blob, in `folder`."""

    folder: str
    so_path: str | None = None
    blob_path: str | None = None

    def run(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """Run the delegate once in a fresh model container (inputs as the delegate takes them)."""
        container = ModelContainer(self.so_path, "cpu", None)
        try:
            container.load_constants_blob(self.blob_path)
            outputs = handle_array([0] * container.num_outputs)
            container.run(new_handles([t.detach() for t in inputs]), outputs)
            return ownership.adopt_all(list(outputs), steal_handles)
        finally:
            container.delete()


COMPILED: list[CompiledDelegate] = []  # one entry per preprocess call, in order


class CpuAotiBackend(AotiBackend, BackendDetails):
    """AotiBackend on the CPU: no allowed fallback kernels (as CudaBackend allows none of the complex ones),
    weights in a separate blob (as CudaBackend), no custom pass."""

    @classmethod
    def get_device_name(cls) -> str:
        return "cpu"

    @classmethod
    def get_supported_fallback_kernels(cls) -> dict:
        return {}

    @classmethod
    def get_decomposition_table(cls) -> dict:
        return {}

    @classmethod
    def get_aoti_compile_options(cls, compile_specs: list[CompileSpec]) -> dict:
        options = {
            "aot_inductor.package": True,
            "aot_inductor.package_constants_in_so": False,
            "aot_inductor.package_constants_on_disk_format": "binary_blob",
            "aot_inductor.compile_wrapper_opt_level": "O0",  # test compile time; the kernels keep -O3
        }
        if any(spec.key == CODEGEN_ONLY.key for spec in compile_specs):
            options["aot_inductor.package_cpp_only"] = True
        return options

    @classmethod
    def get_custom_passes(cls, compile_specs: list[CompileSpec]) -> list:
        return []

    @classmethod
    def preprocess(cls, edge_program, compile_specs):
        COMPILED.append(CompiledDelegate(tempfile.mkdtemp(prefix="aotcuda-et-")))
        return super().preprocess(edge_program, compile_specs)

    @classmethod
    def codesign_so(cls, so_path: str, compile_specs: list[CompileSpec]) -> None:
        # Called with the .so before preprocess reads and deletes it: keep a copy to run.
        COMPILED[-1].so_path = shutil.copy(so_path, COMPILED[-1].folder)

    @classmethod
    def load_weights_blob(cls, blob_path: str, compile_specs: list[CompileSpec]):
        COMPILED[-1].blob_path = shutil.copy(blob_path, COMPILED[-1].folder)
        return super().load_weights_blob(blob_path, compile_specs)


def lower(ep: torch.export.ExportedProgram, backend: type[AotiBackend], codegen_only: bool = False):
    """to_edge_transform_and_lower(ep) with every op delegated to `backend`; returns the
    EdgeProgramManager and the delegates it compiled.

    A program with complex ops is lowered without the Edge dialect's IR check, which refuses complex
    dtypes for most ops (aten.mul.Tensor on complex64: "make sure the dtypes of the Tensor inputs are the
    same as ..."); one without them gets the default check."""
    specs = [AotiBackend.generate_method_name_compile_spec("forward"), *([CODEGEN_ONLY] if codegen_only else [])]
    first = len(COMPILED)
    manager = to_edge_transform_and_lower(
        ep, partitioner=[AotiPartitioner(backend.__name__, specs)],
        compile_config=EdgeCompileConfig(_check_ir_validity=not program_has_complex(ep)))
    return manager, COMPILED[first:]


def run_lowered(manager, delegates: list[CompiledDelegate], *inputs: torch.Tensor) -> tuple:
    """Run the lowered program as ExecuTorch's runtime would: its top-level graph, each
    ``executorch_call_delegate`` by the compiled delegate (in the order the graph holds them), which
    receives the program's values in the order the partitioner chose (not the user's)."""
    graph_module = manager.exported_program().graph_module
    names = [node.target for node in graph_module.graph.nodes
             if node.op == "get_attr" and node.target.startswith("lowered_module")]
    assert len(names) == len(delegates), f"{len(names)} delegate calls, {len(delegates)} compiled delegates"
    by_module = {id(getattr(graph_module, name)): delegate for name, delegate in zip(names, delegates)}

    class Runtime(torch.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            if target is torch.ops.higher_order.executorch_call_delegate:
                lowered, *tensors = args
                return tuple(by_module[id(lowered)].run(*tensors))
            return super().call_function(target, args, kwargs)

    return tuple(Runtime(graph_module).run(*inputs))


def remove(delegates: list[CompiledDelegate]) -> None:
    for delegate in delegates:
        if os.path.isdir(delegate.folder):
            shutil.rmtree(delegate.folder)
