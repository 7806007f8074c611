"""Copies the runtime makes into the exported layout are bounded by the memory available (the breaker, 2026-12-05).

A program reads its inputs in the layout it was exported with (contiguous for most), so the runtime copies an input
that is not in it. The copy holds every element, whatever memory the input holds: an expanded tensor (stride 0) of
16 bytes with 4e8 rows, for a dim without a max, made the runtime allocate 6.4 GB to sum it (eager sums it without
a copy); with 2e9 rows it raised torch's raw allocation error; sizes in between swap or meet the OOM killer.
"""

import pytest
import torch
from runtime_programs import build_package

import aotcuda
import aotcuda.runtime.checks as checks
from aotcuda.errors import InputError


class SumRows(torch.nn.Module):
    def forward(self, x):
        return x.sum(0, keepdim=True) + 1


@pytest.fixture(scope="module")
def open_dim(tmp_path_factory):
    path = build_package(SumRows(), (torch.randn(8, 4),), tmp_path_factory.mktemp("open") / "open.pt2",
                         dynamic_shapes=({0: torch.export.Dim("n")},))  # no max
    with aotcuda.load(path) as program:
        yield program


def assert_next_call_right(program):
    x = torch.randn(1000, 4).expand(1000, 4).t().contiguous().t()  # a copy of 16 KB still runs, as eager does
    torch.testing.assert_close(program(x), SumRows()(x), rtol=1e-4, atol=1e-3)  # sums of 1,000 in another order
    expanded = torch.randn(1, 4).expand(1000, 4)
    torch.testing.assert_close(program(expanded), SumRows()(expanded), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("make", [
    lambda: torch.randn(1, 4).expand(2**31, 4),  # 32 GiB of elements in 16 bytes (main: torch's raw RuntimeError)
    lambda: torch._neg_view(torch.randn(1, 4).expand(2**31, 4)),  # the copy that resolves a negation bit
    lambda: torch.randn(4, 1).expand(4, 2**31).t(),  # transposed
], ids=["expanded", "negated", "transposed"])
def test_a_copy_larger_than_the_memory_is_refused_before_it_is_made(open_dim, make):
    with pytest.raises(InputError, match=r"input 'x' \(#0\) \(shape \(2147483648, 4\), strides .*\) is not in the layout "
                                         r"the program reads, and copying it there would take 32.0 GiB, more than half "
                                         r"the memory available on cpu .*pass a tensor you hold in that layout"):
        open_dim(make())
    assert_next_call_right(open_dim)


def test_a_copy_of_more_than_half_the_available_memory_is_refused(open_dim, monkeypatch):
    monkeypatch.setattr(checks, "available_bytes", lambda device: 2**30)  # a machine with 1 GiB left
    with pytest.raises(InputError, match=r"would take 1.0 GiB, more than half the memory available on cpu \(1.0 GiB\)"):
        open_dim(torch.randn(1, 4).expand(2**26, 4))  # main: allocated 1 GiB and ran
    assert_next_call_right(open_dim)
