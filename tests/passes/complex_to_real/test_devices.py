"""Device consistency of the rewrite, without a GPU: every pattern and library model exported the way
aotcuda.lower exports for an accelerator (parameters, buffers and inputs moved; plain-attribute tensors
left on the CPU, moved by the model's own forward), on the "meta" device, rewritten, and checked.

The H200 failure this guards against (docs/models.md, Qwen-Image): a CPU tensor reached a Triton kernel.
Checked here: no tensor of the rewritten graph outside the program's state is on the CPU; every op's
tensor operands are on its result's device (device copies excepted); complex state that the program
only uses on the target device is stored there (placement.py); and the nodes the pass creates keep the
device of the node they replace (helpers.assert_devices_carried, also run by every other pass test).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree

from aotcuda.lowering.decompositions import decomposition_table
from aotcuda.models.patterns import PATTERNS
from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.view_copy import ReplaceViewCopyWithViewPass
from tests.models.library import LIBRARY_MODELS
from tests.passes.complex_to_real.helpers import assert_devices_carried, assert_no_complex

TARGET = torch.device("meta")
DEVICE_COPIES = {torch.ops.aten._to_copy.default, torch.ops.prims.device_put.default}
CASES = {**PATTERNS, **LIBRARY_MODELS}


def export_on(case, device: torch.device) -> torch.export.ExportedProgram:
    """The case exported and decomposed as aotcuda.lower does it for `device` (see lowering._on_device)."""
    model, args, kwargs, dynamic_shapes = case.build(torch.float32)
    model = model.to(device)  # parameters and buffers only: plain attributes stay where they are
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), (args, kwargs))
    ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    return ReplaceViewCopyWithViewPass()(ep.run_decompositions(decomposition_table()))


def _tensors(value) -> list[torch.Tensor]:
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def misplaced_operands(ep: torch.export.ExportedProgram, device: torch.device) -> list[str]:
    """Nodes computing on `device` that read a tensor from another device (device copies excepted)."""
    found = []
    for node in (n for n in ep.graph.nodes if n.op == "call_function"):
        outputs = _tensors(node.meta.get("val"))
        if node.target in DEVICE_COPIES or not outputs or outputs[0].device != device:
            continue
        for operand in node.all_input_nodes:
            for t in _tensors(operand.meta.get("val")):
                if t.device != device:
                    found.append(f"{node.name} ({node.target}) reads {operand.name} on {t.device}")
    return found


@pytest.fixture(scope="module", params=sorted(CASES))
def rewritten(request):
    name = request.param
    library = CASES[name].library
    if library:
        pytest.importorskip(library, reason=f"{name} needs {library}")
    ep = export_on(CASES[name], TARGET)
    return name, ep, ReplaceComplexWithRealPass(strict=True)(ep)


def test_no_op_reads_a_tensor_from_another_device(rewritten):
    name, _, new = rewritten
    assert_no_complex(new)
    assert misplaced_operands(new, TARGET) == []


def test_complex_state_lives_where_it_is_used(rewritten):
    name, ep, new = rewritten
    assert_devices_carried(ep, new)
    state = {**new.state_dict, **new.constants}
    complex_state = {s.target for s in ep.graph_signature.input_specs
                     if s.target in {**ep.state_dict, **ep.constants} and
                     {**ep.state_dict, **ep.constants}[s.target].is_complex()}
    moved_only = {s.target for s in ep.graph_signature.input_specs if s.target in complex_state
                  and _only_copied_to(ep, s.arg.name, TARGET)}
    for target in moved_only:
        assert state[target].device == TARGET, f"{name}: {target} stays on {state[target].device}"


def _only_copied_to(ep, placeholder_name: str, device: torch.device) -> bool:
    node = next(iter(ep.graph.find_nodes(op="placeholder", target=placeholder_name)))
    uses = [u for u in node.users if u.target is not torch.ops.aten._assert_tensor_metadata.default]
    return bool(uses) and all(u.target is torch.ops.aten._to_copy.default
                              and torch.device(u.kwargs.get("device", "cpu")) == device for u in uses)


def test_qwen_image_tables_are_copied_in_forward():
    """The case behind the H200 failure really has CPU tables moved in forward (else the test is moot)."""
    pytest.importorskip("diffusers")
    ep = export_on(LIBRARY_MODELS["qwen_image"], TARGET)
    cpu_constants = [name for name, value in ep.constants.items()
                     if isinstance(value, torch.Tensor) and value.is_complex() and value.device.type == "cpu"]
    assert len(cpu_constants) == 2
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert all(new.constants[name].device == TARGET for name in cpu_constants)


def test_cpu_scalar_operand_is_moved_to_the_result_device():
    """A 0-dim CPU tensor times a complex tensor on the target: eager allows it; the pair math must not
    turn it into a 1-dim CPU tensor, which neither eager nor Inductor accepts."""

    class ScaleByCpuScalar(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.tensor(0.5)  # plain attribute: stays on the CPU

        def forward(self, x):
            z = torch.view_as_complex(x)
            return torch.view_as_real(z * self.scale + self.scale)

    x = torch.randn(3, 4, 2, device=TARGET)
    ep = torch.export.export(ScaleByCpuScalar(), (x,), strict=False).run_decompositions()
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_devices_carried(ep, new)
    # eager on the CPU, for the values
    module, x_cpu = ScaleByCpuScalar(), torch.randn(3, 4, 2)
    new_cpu = ReplaceComplexWithRealPass(strict=True)(
        torch.export.export(module, (x_cpu,), strict=False).run_decompositions())
    torch.testing.assert_close(new_cpu.module()(x_cpu), module(x_cpu), rtol=1e-5, atol=1e-5)


def test_device_check_compares_each_result_with_its_own_value():
    """A while_loop carries a 0-dim CPU counter next to CUDA values (found on the H200): each result is
    checked against the original value in its own position, not against the first one's device."""
    from aotcuda.passes.complex_to_real.pair import Pair
    from aotcuda.passes.complex_to_real.rewrite import misplaced_device

    counter, values = torch.zeros((), dtype=torch.int64), torch.empty(4, dtype=torch.complex64, device=TARGET)
    pairs = Pair(torch.empty(4, 2, device=TARGET))
    assert misplaced_device((counter, pairs), (counter, values)) == ""
    assert misplaced_device((counter.to(TARGET), pairs), (counter, values)) == "meta, the op's result is on cpu"
    assert misplaced_device((counter, Pair(torch.empty(4, 2))), (counter, values)) == "cpu, the op's result is on meta"
