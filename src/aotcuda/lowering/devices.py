"""The target device: how a device argument is read, and what lowering for each device type needs.

What differs between devices lives in DEVICE_PROFILES (allow-list, Inductor options, passes), not in the
steps of lower(). ``target_device`` is the one place a device argument of the lowering (lower(), the demo,
``aotcuda lower --device``) is parsed and checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from aotcuda.errors import Advice, DeviceError
from aotcuda.lowering.fallbacks import LIBRARY_KERNELS, ONEDNN_KERNELS
from aotcuda import switches
from aotcuda.passes.common_subexpressions import EliminateCommonSubexpressionsPass
from aotcuda.passes.decode_attention import SplitCacheAttentionPass
from aotcuda.passes.norm_products import FoldRMSNormIntoProductPass
from aotcuda.passes.prompt_attention import PromptAttentionPass
from aotcuda.passes.result import GraphPass
from aotcuda.passes.row_products import RowProductsPass
from aotcuda.passes.sibling_products import ConcatSiblingProductsPass
from aotcuda.passes.vector_operands import StoreVectorOperandsPass


@dataclass(frozen=True)
class DeviceProfile:
    """What lowering for one device type needs to know.

    allowed_kernels: C-shim op names of the library kernels the generated code may call.
    inductor_configs: Inductor options for this device (the caller's ``inductor_configs`` win).
    passes: pass classes (each makes a GraphPass) run after the common passes, for what this device's
        code generation needs.
    pass_switches: the AOTCUDA_* flag (aotcuda.switches) that turns a pass of ``passes`` off, by pass.
    """

    allowed_kernels: frozenset[str]
    inductor_configs: dict[str, Any] = field(default_factory=dict)
    passes: tuple[Callable[[], GraphPass], ...] = ()
    pass_switches: dict[Callable[[], GraphPass], str] = field(default_factory=dict)

    def enabled_passes(self) -> list[Callable[[], GraphPass]]:
        """``passes`` without those whose switch is off (read now: each lower() reads them anew)."""
        return [make for make in self.passes if make not in self.pass_switches or switches.flag(self.pass_switches[make])]


DEVICE_PROFILES = {
    # coordinate_descent_tuning: Inductor tunes each kernel's block sizes; on the H200 it took the pair
    # product of a bf16 RoPE from 1.27x to 1.14x a device copy for a few seconds of compile time
    # (benchmarks/NOTES.md).
    # StoreVectorOperandsPass: with that option Inductor writes one-row matrix products as reductions that
    # inline their vector; a costly vector (a SwiGLU's silu product) is stored once instead
    # (passes/vector_operands.py: w2's kernels of the H200 decode step 272.6 -> 150.1 us).
    # Issue 29's passes, each behind its switch (aotcuda.switches says what the H200 measured): on by default,
    # ConcatSiblingProductsPass (q/k/v and w1/w3 as one product each, for products of 8 rows or more) and
    # SplitCacheAttentionPass (decode attention over the cache as a Triton op, or in split-cache form where
    # Triton is missing); PromptAttentionPass (written-out attention of many query rows, a prefill, as one
    # scaled_dot_product_attention call: the attentions SplitCacheAttentionPass leaves); off, RowProductsPass (few-row products as a Triton op, after the siblings are one
    # product), which did not win in the decode step. StoreVectorOperandsPass runs after them, on the
    # products left; FoldRMSNormIntoProductPass (off by default, not yet timed) before it, so that the products
    # it rewrites are seen there; EliminateCommonSubexpressionsPass (off by default, not yet timed) last, so that
    # what the others wrote per layer (the decode attention's mask) is merged too.
    "cuda": DeviceProfile(allowed_kernels=LIBRARY_KERNELS, inductor_configs={"coordinate_descent_tuning": True},
                          passes=(ConcatSiblingProductsPass, SplitCacheAttentionPass, PromptAttentionPass,
                                  RowProductsPass, FoldRMSNormIntoProductPass, StoreVectorOperandsPass,
                                  EliminateCommonSubexpressionsPass),
                          pass_switches={ConcatSiblingProductsPass: "AOTCUDA_SIBLING_PRODUCTS",
                                         SplitCacheAttentionPass: "AOTCUDA_DECODE_ATTENTION",
                                         PromptAttentionPass: "AOTCUDA_PROMPT_ATTENTION",
                                         RowProductsPass: "AOTCUDA_ROW_PRODUCTS",
                                         FoldRMSNormIntoProductPass: "AOTCUDA_NORM_PRODUCTS",
                                         EliminateCommonSubexpressionsPass: "AOTCUDA_COMMON_SUBEXPRESSIONS"}),
    "cpu": DeviceProfile(allowed_kernels=LIBRARY_KERNELS | ONEDNN_KERNELS),
}


def target_device(device: str | torch.device) -> torch.device:
    """The device to lower for: "auto" is CUDA when torch sees a GPU, else the CPU; "cuda", "cuda:N" and
    "cpu" are themselves, "cpu:0" is "cpu".

    Raises DeviceError (a ValueError): a string torch cannot parse, a device type aotcuda does not lower
    for, a CPU index other than 0, or CUDA asked for where torch sees none (or not that index).
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    supported = " or ".join(repr(name) for name in DEVICE_PROFILES)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise DeviceError(f"{device!r} is not a device; aotcuda lowers for {supported} (or 'cuda:N')") from exc
    if device.type not in DEVICE_PROFILES:
        raise DeviceError(f"aotcuda lowers for {supported}, not {device.type!r}")
    if device.type == "cpu":
        if device.index:  # torch places any cpu:N on the one CPU; lower() copied the model for the index it named
            raise DeviceError(f"device={str(device)!r} asked for, but the CPU takes no device index (torch has one CPU "
                              "device, and places every cpu:N on it); use device='cpu'", advice=(Advice("device", "cpu"),))
        return torch.device("cpu")  # cpu:0 is torch's name for it too: no index, or the model is copied for it
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"device={str(device)!r} asked for, but torch sees no CUDA device here; use device='cpu'",
                          advice=(Advice("device", "cpu"),))
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        # moving the model there raised torch's raw "CUDA error: invalid device ordinal"
        count = torch.cuda.device_count()
        raise DeviceError(f"device={str(device)!r} asked for, but torch sees {count} CUDA device"
                          f"{'' if count == 1 else 's'} here (cuda:0{'' if count == 1 else f' to cuda:{count - 1}'}); "
                          "use one of those, or device='cuda' for the current one", advice=(Advice("device", "cuda"),))
    return device
