"""The pass output compiled with AOTInductor on the CPU and run against eager (three compiles in all).

The rewritten programs must compile with no complex value left: no complex dtype in the generated C++
and no `aoti_torch_cpu_*` fallback other than the real matrix products Inductor always calls out for on
the CPU. The original complex program is compiled once too, to show that
this check does see complex fallbacks when they are there.
"""

import re
import zipfile

import pytest
import torch
from comparisons import torch_aoti_load

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import assert_matches, export, pair
from .rope_models import LlamaRope
from .test_program import Stateful

pytestmark = pytest.mark.slow  # three AOTInductor compiles; deselect with -m "not slow"

FALLBACK = re.compile(r"aoti_torch_cpu_\w+")
REAL_MATMUL_KERNELS = {"aoti_torch_cpu_mm_out", "aoti_torch_cpu_bmm_out", "aoti_torch_cpu_addmm_out"}
COMPLEX_IN_CODE = re.compile(r"complex(?:64|128|32)|c10::complex|ComplexFloat|ComplexDouble")


class ManyOps(Stateful):
    """Stateful's complex state plus one op of most rule families, real in and out."""

    def forward(self, x, index):
        z = torch.view_as_complex(x) * self.weight + self.persistent - self.transient * self.table
        w = (z / (self.weight + 2)).exp() * torch.polar(z.abs(), z.angle())
        w = torch.where(w.real > 0, w, w.conj_physical()) @ z.transpose(0, 1)[:, :3]
        picked = torch.cat([w[index], w.sum(0, keepdim=True)], 0).to(torch.complex128)
        return torch.view_as_real(picked * 1j).float(), z.abs()


def generated_sources(package: str) -> str:
    with zipfile.ZipFile(package) as archive:
        return "\n".join(archive.read(n).decode() for n in archive.namelist() if n.endswith(".cpp"))


def compile_and_load(ep, path):
    package = torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
    return package, torch_aoti_load(package)


@pytest.fixture(scope="module")
def rope_compiled(tmp_path_factory):
    model = LlamaRope()
    seq = torch.export.Dim("seq", min=2, max=64)
    ep = export(model, (torch.randn(2, 8, 3, 16), torch.randn(2, 8, 3, 16)), dynamic_shapes=({1: seq}, {1: seq}))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    package, runner = compile_and_load(new, tmp_path_factory.mktemp("aoti") / "rope.pt2")
    return model, ep, package, runner


@pytest.fixture(scope="module")
def many_ops_compiled(tmp_path_factory):
    model = ManyOps()
    ep = export(model, (pair(3, 4), torch.tensor([2, 0])))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    package, runner = compile_and_load(new, tmp_path_factory.mktemp("aoti") / "many_ops.pt2")
    return model, package, runner


@pytest.mark.parametrize("seq", [5, 37])
def test_rope_package_matches_eager_at_two_lengths(rope_compiled, seq):
    model, _, _, runner = rope_compiled
    q, k = torch.randn(2, seq, 3, 16), torch.randn(2, seq, 3, 16)
    assert_matches(model(q, k), runner(q, k), torch.float32)


def test_many_ops_package_matches_eager(many_ops_compiled):
    model, _, runner = many_ops_compiled
    x, index = pair(3, 4), torch.tensor([1, 2])
    assert_matches(model(x, index), runner(x, index), torch.float32)


def test_generated_code_has_no_fallback_and_no_complex(rope_compiled, many_ops_compiled):
    for package in (rope_compiled[2], many_ops_compiled[1]):
        source = generated_sources(package)
        assert source, f"no generated C++ in {package}"
        assert set(FALLBACK.findall(source)) <= REAL_MATMUL_KERNELS, set(FALLBACK.findall(source))
        assert not COMPLEX_IN_CODE.findall(source), COMPLEX_IN_CODE.findall(source)


def test_the_check_sees_complex_fallbacks_in_the_unrewritten_program(rope_compiled, tmp_path):
    _, ep, _, _ = rope_compiled
    package = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "complex.pt2"))
    source = generated_sources(package)
    assert set(FALLBACK.findall(source)) - REAL_MATMUL_KERNELS and COMPLEX_IN_CODE.findall(source)
