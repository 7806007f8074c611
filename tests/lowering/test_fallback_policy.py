"""The allow-list policy for real-valued library kernels beyond matmul (issue 11 item 4, docs/usage.md):
scans and histograms are allowed on both devices on real values, never on complex ones; a custom op
without a C shim that has a known fix names it."""

from __future__ import annotations

import pytest

from aotcuda.lowering.fallbacks import KNOWN_FIXES, SCAN_KERNELS, FallbackKernel, missing_kernels_message, split_allowed
from aotcuda.lowering.devices import DEVICE_PROFILES


@pytest.mark.parametrize("device", sorted(DEVICE_PROFILES))
@pytest.mark.parametrize("op", sorted(SCAN_KERNELS | {"_grouped_mm"}))
def test_real_scans_histograms_and_grouped_mm_are_allowed_on_every_device(device, op):
    kernel = FallbackKernel(f"aoti_torch_{device}_{op}", op)
    assert split_allowed([kernel], DEVICE_PROFILES[device].allowed_kernels) == ([], [kernel])


@pytest.mark.parametrize("device", sorted(DEVICE_PROFILES))
@pytest.mark.parametrize("op", sorted(SCAN_KERNELS))
def test_a_scan_on_complex_values_stays_a_missing_kernel(device, op):
    kernel = FallbackKernel(f"aoti_torch_{device}_{op}", op, complex_valued=True)
    assert split_allowed([kernel], DEVICE_PROFILES[device].allowed_kernels) == ([kernel], [])


def test_a_known_custom_op_gets_its_fix_in_the_message():
    kernel = FallbackKernel("transformers.grouped_mm_fallback.default (proxy executor)",
                            "transformers.grouped_mm_fallback.default")
    message = missing_kernels_message("forward", [kernel])
    assert KNOWN_FIXES["transformers::grouped_mm_fallback"] in message
    assert 'experts_implementation="batched_mm"' in message
