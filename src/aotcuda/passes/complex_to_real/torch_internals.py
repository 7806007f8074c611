"""Every private torch symbol ReplaceComplexWithRealPass uses, in one place, with what it is for.

torch moves its internals every release. The pass imports each one from here (never from torch
directly), so that a torch upgrade is checked in one file: `SYMBOLS` says where each comes from, what
uses it and what breaks without it; tests/passes/complex_to_real/test_torch_internals.py checks that every
one resolves. Checked on torch 2.11 (2.11.0+cu130) and 2.13 (2.13.0, CPU). The pass's torch-version
workarounds (layout.py, symbols.py, placement.py) are rows of the one table of every torch-version fix,
aotcuda.lowering.torch_fixes.FIXES, with when to remove each.

Two of the uses are speed-ups only, and can be turned off (``ReplaceComplexWithRealPass(speedups=False)``,
or ``AOTCUDA_PASS_SPEEDUPS=0`` in the environment): then the pass traces every node with make_fx as any
make_fx user does, and gives the same graph (tests/passes/complex_to_real/test_speedups.py), only slower:

- replay (replay.py): an op met again on inputs of the same metadata gets a copy of the first result's
  metadata instead of a fake-tensor dispatch;
- copying unchanged nodes (rewrite.py ``_copy_unchanged``, ``_original_if_same``): a node whose inputs
  are the original values is put into the new graph with its original meta instead of being traced.

The others are needed for the pass to work at all: make_fx itself, reading a tensor's or SymInt's proxy,
registering the SymInts of the original program (symbols.py), making constant tables outside the trace,
and lifting constants into the rebuilt program.

| symbol | from | used by | without it |
|---|---|---|---|
| make_fx | torch.fx.experimental.proxy_tensor | rewrite | no rewrite (the trace itself) |
| get_proxy_mode | torch.fx.experimental.proxy_tensor | rewrite, pair, replay | no tracer to emit into; constants not shared per trace |
| get_proxy_slot | torch.fx.experimental.proxy_tensor | rewrite, replay, symbols | no proxy of a value: replay, copying and symbol tracking fail |
| set_proxy_slot | torch.fx.experimental.proxy_tensor | symbols | original SymInts not traceable: PowByNatural / Min sizes fail |
| track_tensor | torch.fx.experimental.proxy_tensor | rewrite, replay (speed-ups) | no copied or replayed node (speed-ups off) |
| fetch_sym_proxy | torch.fx.experimental.proxy_tensor | replay, rewrite (speed-ups) | SymInt arguments of copied/replayed nodes (speed-ups off) |
| disable_proxy_modes_tracing | torch.fx.experimental.proxy_tensor | layout, replay, spectral.tables | strides read / tables made inside the trace: extra nodes |
| FakeTensor (constructed directly) | torch._subclasses.fake_tensor | replay (speed-up) | no replayed fake value (replay off) |
| in_kernel_invocation_manager | torch._subclasses.fake_tensor | replay (speed-up) | as FakeTensor |
| unset_fake_temporarily | torch._subclasses.fake_tensor | spectral.tables | DFT tables would be fake: not constants |
| no_python_dispatcher | torch._dispatch.python | replay (speed-up) | as FakeTensor |
| _pop_mode_temporarily | torch.utils._python_dispatch | replay (speed-up) | higher-order ops under replay (replay off) |
| TorchDispatchMode | torch.utils._python_dispatch | replay (speed-up) | no replay mode (replay off) |
| sympy_interp | torch.utils._sympy.interp | symbols | as set_proxy_slot |
| PythonReferenceAnalysis | torch.utils._sympy.reference | symbols | as set_proxy_slot |
| bound_sympy, ValueRanges | torch.utils._sympy.value_ranges | symbols | no lower bound of a size over the user's Dim ranges: a dynamic FFT of 0 points is not refused on the call |
| lift_constants_pass, ConstantAttrMap | torch._export.passes.lift_constants_pass | program | rebuilt program keeps tensor constants unlifted |
| tracer.symnode_tracker, tracer.sympy_expr_tracker | make_fx's PythonKeyTracer (attributes) | symbols | as set_proxy_slot |
| tracer.graph._target_to_str | torch.fx.Graph (method) | replay (speed-up) | replayed node names (replay off) |
"""

from __future__ import annotations

from torch._dispatch.python import no_python_dispatcher
from torch._export.passes.lift_constants_pass import ConstantAttrMap, lift_constants_pass
from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager, unset_fake_temporarily
from torch.fx.experimental.proxy_tensor import (
    disable_proxy_modes_tracing,
    fetch_sym_proxy,
    get_proxy_mode,
    get_proxy_slot,
    make_fx,
    set_proxy_slot,
    track_tensor,
)
from torch.utils._python_dispatch import TorchDispatchMode, _pop_mode_temporarily
from torch.utils._sympy.interp import sympy_interp
from torch.utils._sympy.reference import PythonReferenceAnalysis
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from aotcuda import switches

# name → (module it comes from, needed only by the speed-ups)
SYMBOLS: dict[str, tuple[str, bool]] = {
    "make_fx": ("torch.fx.experimental.proxy_tensor", False),
    "get_proxy_mode": ("torch.fx.experimental.proxy_tensor", False),
    "get_proxy_slot": ("torch.fx.experimental.proxy_tensor", False),
    "set_proxy_slot": ("torch.fx.experimental.proxy_tensor", False),
    "track_tensor": ("torch.fx.experimental.proxy_tensor", True),
    "fetch_sym_proxy": ("torch.fx.experimental.proxy_tensor", True),
    "disable_proxy_modes_tracing": ("torch.fx.experimental.proxy_tensor", False),
    "FakeTensor": ("torch._subclasses.fake_tensor", True),
    "in_kernel_invocation_manager": ("torch._subclasses.fake_tensor", True),
    "unset_fake_temporarily": ("torch._subclasses.fake_tensor", False),
    "no_python_dispatcher": ("torch._dispatch.python", True),
    "_pop_mode_temporarily": ("torch.utils._python_dispatch", True),
    "TorchDispatchMode": ("torch.utils._python_dispatch", True),
    "sympy_interp": ("torch.utils._sympy.interp", False),
    "PythonReferenceAnalysis": ("torch.utils._sympy.reference", False),
    "bound_sympy": ("torch.utils._sympy.value_ranges", False),
    "ValueRanges": ("torch.utils._sympy.value_ranges", False),
    "lift_constants_pass": ("torch._export.passes.lift_constants_pass", False),
    "ConstantAttrMap": ("torch._export.passes.lift_constants_pass", False),
}
# Attributes of make_fx's tracer the pass reads (checked by the test on a live trace).
TRACER_ATTRIBUTES = ("symnode_tracker", "sympy_expr_tracker")
CHECKED_ON = ("2.11", "2.13")

SPEEDUPS_VARIABLE = "AOTCUDA_PASS_SPEEDUPS"


def speedups_default() -> bool:
    """Whether the pass uses its speed-ups unless told otherwise: yes, unless AOTCUDA_PASS_SPEEDUPS=0."""
    return switches.flag(SPEEDUPS_VARIABLE)


__all__ = [*SYMBOLS, "SYMBOLS", "TRACER_ATTRIBUTES", "CHECKED_ON", "SPEEDUPS_VARIABLE", "speedups_default"]
