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
def open_dim_path(tmp_path_factory):
    return build_package(SumRows(), (torch.randn(8, 4),), tmp_path_factory.mktemp("open") / "open.pt2",
                         dynamic_shapes=({0: torch.export.Dim("n")},))  # no max


@pytest.fixture(scope="module")
def open_dim(open_dim_path):
    with aotcuda.load(open_dim_path) as program:
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


# A child process under an address-space limit (ulimit -v): the room the copy may take is what the limit leaves, not
# the machine's free memory (the amplification breaker, 2026-12-07).
_UNDER_A_LIMIT = r"""
import resource, sys, torch, aotcuda
program = aotcuda.load(sys.argv[1])
mapped = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (mapped + (3 << 29), resource.getrlimit(resource.RLIMIT_AS)[1]))  # 1.5 GiB left
try:
    program(torch.randn(1, 4).expand(2**27, 4))  # 16 bytes held, a 2 GiB copy
    print("RAN")
except Exception as error:
    print(type(error).__name__, str(error).splitlines()[0][:400])
x = torch.randn(5, 4)
print("NEXT", bool(torch.allclose(program(x), x.sum(0, keepdim=True) + 1)))
"""


def test_a_copy_past_an_address_space_limit_is_refused_not_left_to_the_allocator(open_dim_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT, open_dim_path], capture_output=True, text=True, timeout=300)
    lines = done.stdout.splitlines()
    # main: "RuntimeError ... DefaultCPUAllocator: can't allocate memory: you tried to allocate 2147483648 bytes"
    assert any(line.startswith("InputError") and "would take 2.0 GiB, more than half the memory available on cpu"
               in line for line in lines), done.stdout + done.stderr[-2000:]
    assert "NEXT True" in lines, done.stdout + done.stderr[-2000:]


def _cgroup_tree(root, version: int, limit: int, usage: int):
    """A /proc/self and a memory cgroup mount, as a container's process sees them, under ``root``."""
    proc, mount = root / "proc", root / "cgroup"
    folder = mount / "pod" / "worker"
    folder.mkdir(parents=True)
    proc.mkdir()
    if version == 2:
        (proc / "mountinfo").write_text(f"30 20 0:26 / {mount} rw - cgroup2 cgroup2 rw,nsdelegate\n")
        (proc / "cgroup").write_text("0::/pod/worker\n")
        (folder / "memory.max").write_text(f"{limit}\n")
        (folder / "memory.current").write_text(f"{usage}\n")
        (folder.parent / "memory.max").write_text("max\n")
        (folder / "memory.stat").write_text("anon 1000\ninactive_file 0\n")
    else:
        (proc / "mountinfo").write_text(f"31 20 0:27 / {mount} rw - cgroup cgroup rw,memory\n")
        (proc / "cgroup").write_text("5:cpu,cpuacct:/pod/worker\n4:memory:/pod/worker\n0::/\n")
        (folder / "memory.limit_in_bytes").write_text(f"{limit}\n")
        (folder / "memory.usage_in_bytes").write_text(f"{usage}\n")
        (folder.parent / "memory.limit_in_bytes").write_text("9223372036854771712\n")
        (folder.parent / "memory.usage_in_bytes").write_text(f"{usage}\n")
        (folder / "memory.stat").write_text("cache 0\ntotal_inactive_file 0\n")
    (proc / "status").write_text("VmSize:\t  100 kB\nVmData:\t  100 kB\n")
    return proc


@pytest.mark.parametrize("version", [1, 2])
def test_a_copy_past_a_containers_memory_limit_is_refused_not_met_by_the_oom_killer(open_dim, tmp_path, monkeypatch,
                                                                                    version):
    # A container limited to 1 GiB (Docker --memory, a pod's limit) that uses 600 MiB, on a machine with GiBs free:
    # a 256 MiB copy of a 16-byte input is more than half the 424 MiB the cgroup leaves. Measured with a real cgroup
    # v1 of 1.5 GiB: main copied 2 GiB for (1, 4).expand(2**27, 4) and the kernel killed the process (SIGKILL).
    from aotcuda.runtime import host_memory

    monkeypatch.setattr(host_memory, "PROC_SELF", str(_cgroup_tree(tmp_path, version, 1 << 30, 600 << 20)))
    with pytest.raises(InputError, match=r"would take 0.2 GiB, more than half the memory available on cpu \(0.4 GiB\)"):
        open_dim(torch.randn(1, 4).expand(2**24, 4))
    assert_next_call_right(open_dim)
