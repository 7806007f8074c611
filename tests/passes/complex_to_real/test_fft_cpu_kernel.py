"""The CPU kernel form (AOTCUDA_FFT_CPU_KERNEL: aotcuda::fft_rows_cpu, one C++ template kernel a transform,
kernels/fft_cpu.py and kernels/fft_cpu_template.py) lowered by aotcuda.lower into one AOTInductor package
and run through aotcuda.load, against eager torch.fft on fresh random inputs (float64 where the program
allows it): c2c, r2c and c2r, forward and inverse, a middle dim read in place, odd lengths (375, 96·…),
zero-padding and cropping, Bluestein inside the kernel (68 = 4·17 cropped from 96, an rfft/irfft pair at
134 = 2·67), the four-step split (an rfft/irfft pair at 2048, 400 points zero-padded), an stft, a dynamic row count, a
complex product fused into an irfft (its weight), and the op itself on bfloat16 data with a window. One compile
for all."""

import pytest
import torch

import aotcuda
from aotcuda.kernels import fft_cpu, fft_cpu_template
from aotcuda.kernels.fft_rows import reference
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import export



def test_the_template_is_available_on_every_supported_torch():
    """available() is checked on torch 2.11-2.15 (fft_cpu_template's docstring): False on one of them would turn
    the kernel form off there with nothing else failing, as it once did on 2.11."""
    assert fft_cpu_template.available(), f"torch {torch.__version__}: the CPU FFT template is unavailable"


class Transforms(torch.nn.Module):
    """Every kind of transform the kernel covers, in one program."""

    def __init__(self):
        super().__init__()
        spectral = torch.randn(201, 2, generator=torch.Generator().manual_seed(5))
        self.register_buffer("spectral", torch.view_as_complex(spectral))

    def forward(self, x, z, signal, xb, window):
        filtered = torch.fft.irfft(torch.fft.rfft(x, norm="ortho") * 3, n=400, norm="ortho")  # dynamic rows
        middle = torch.fft.fft(torch.view_as_complex(z), dim=1)  # [3, 96, 5]: a middle dim, in place
        odd = torch.fft.ifft(torch.view_as_complex(z).movedim(1, 2), n=375, norm="forward")  # zero-padded 96→375
        odd_r2c = torch.fft.rfft(x[:, :375])  # odd r2c, a strided input
        odd_c2r = torch.fft.irfft(odd_r2c, n=375)  # odd c2r
        cropped = torch.fft.irfft(torch.fft.rfft(x, n=96), n=90)  # r2c cropped to 96, c2r to 90 points
        two_sided = torch.fft.fft(x[:, :100])  # r2c of all 100 bins (fft of a real input)
        bluestein = torch.fft.fft(torch.view_as_complex(z).movedim(1, 2), n=68)  # 68 = 4·17: Bluestein, cropped
        prime = torch.fft.irfft(torch.fft.rfft(x[:, :134]) * 2, n=134)  # 67 complex points: Bluestein, both ways
        long = torch.fft.irfft(torch.fft.rfft(x, n=2048) * 2, n=2048)  # 1024 complex points: the four-step split
        spec = torch.stft(signal, 400, hop_length=160, window=torch.hann_window(400), return_complex=True)
        direct = torch.ops.aotcuda.fft_rows_cpu(xb, 1, 400, 201, "r2c", False, 0.5, window)
        direct_c2c = torch.ops.aotcuda.fft_rows_cpu(torch.view_as_real(middle).to(torch.bfloat16), 1, 96, 96,
                                                    "c2c", True, 1.0 / 96)
        return (filtered, torch.view_as_real(middle), torch.view_as_real(odd), odd_c2r, cropped,
                torch.view_as_real(two_sided), torch.view_as_real(bluestein), torch.view_as_real(spec), direct,
                direct_c2c, prime, long,
                torch.fft.irfft(torch.fft.rfft(x) * self.spectral, n=400))  # the product: the c2r's weight


def _inputs(seed: int, rows: int):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, 400, generator=generator), torch.randn(3, 96, 5, 2, generator=generator),
            torch.randn(2, 4000, generator=generator),
            torch.randn(4, 400, generator=generator).to(torch.bfloat16), torch.rand(400, generator=generator))


def _error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    path = tmp_path_factory.mktemp("fft_cpu_kernel") / "transforms.pt2"
    rows = torch.export.Dim("rows", min=2, max=4096)
    result = aotcuda.lower(Transforms(), _inputs(0, 6), dynamic_shapes=({0: rows}, None, None, None, None),
                           device="cpu", package_path=path)
    return result, aotcuda.load(path, device="cpu")


def _fft_rows_cpu_nodes(program) -> int:
    return sum(1 for node in program.graph.nodes if node.target is torch.ops.aotcuda.fft_rows_cpu.default)


def test_the_program_lowers_without_a_fallback_kernel_one_kernel_a_covered_transform(lowered):
    result, _ = lowered
    assert result.fallback_kernels == [] and result.proxy_executor_ops == []
    # filtered 2, middle, odd, odd_r2c, odd_c2r, cropped 2, two_sided, bluestein, spec, direct 2, prime 2, long 2,
    # the product 2 (its c2r weighted: spectral/product.py)
    assert _fft_rows_cpu_nodes(result.exported_program) == 19
    weighted = [node for node in result.exported_program.graph.nodes
                if node.target is torch.ops.aotcuda.fft_rows_cpu.default and len(node.args) > 8]
    assert len(weighted) == 1 and weighted[0].args[8] is not None


@pytest.mark.parametrize("rows", [6, 37, 1000])
def test_the_package_matches_eager_on_fresh_inputs(lowered, rows):
    _, program = lowered
    inputs = _inputs(rows, rows)
    outputs = program(*inputs)
    x, z, signal, xb, window = inputs
    # float64 reference of the float32 transforms: the same program in double
    want64 = Transforms()(x.double(), z.double(), signal.double(), xb, window)
    for index, (actual, expected) in [*enumerate(zip(outputs[:8], want64[:8], strict=True)),
                                      *((i, (outputs[i], want64[i])) for i in (10, 11, 12))]:
        assert actual.shape == expected.shape, index
        assert _error(actual, expected) <= 1e-5, (index, _error(actual, expected))
    direct = reference(xb, None, 1, 400, 201, "r2c", False, 0.5, window)
    assert outputs[8].dtype == torch.bfloat16 and outputs[8].shape == (4, 201, 2)
    assert _error(outputs[8], direct) <= 1e-2
    middle = torch.view_as_real(torch.fft.fft(torch.view_as_complex(z), dim=1)).to(torch.bfloat16)
    expected = reference(middle, None, 1, 96, 96, "c2c", True, 1.0 / 96)
    assert _error(outputs[9], expected) <= 1e-2


def test_the_switch_turns_the_kernel_form_off(monkeypatch):
    x = torch.randn(4, 400)
    ep = export(_Rfft(), (x,))
    assert _fft_rows_cpu_nodes(ReplaceComplexWithRealPass(strict=True)(ep)) == 1
    monkeypatch.setenv("AOTCUDA_FFT_CPU_KERNEL", "0")
    assert _fft_rows_cpu_nodes(ReplaceComplexWithRealPass(strict=True)(ep)) == 0


def test_fft_kernels_false_gives_plain_aten_ops_that_match_eager():
    """For a runtime without aotcuda's ops (an ExecuTorch CPU backend): no aotcuda op at all, eager's values;
    the next pass with the default takes the kernel form again."""
    x = torch.randn(4, 400)
    ep = export(_Rfft(), (x,))
    portable = ReplaceComplexWithRealPass(strict=True, fft_kernels=False)(ep)
    targets = {str(node.target) for node in portable.graph.nodes if node.op == "call_function"}
    assert not any(target.startswith("aotcuda.") for target in targets), targets
    assert _error(portable.module()(x), _Rfft()(x.double())) <= 1e-5
    assert _fft_rows_cpu_nodes(ReplaceComplexWithRealPass(strict=True)(ep)) == 1
    with pytest.raises(ValueError, match="fft_kernels=True: pass None"):
        ReplaceComplexWithRealPass(fft_kernels=True)


class _Primes(torch.nn.Module):
    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x) * 2, n=x.shape[-1])  # 1009: a prime, r2c and c2r
        middle = torch.fft.ifft(torch.view_as_complex(z), dim=1, norm="ortho")  # 134 = 2·67 along a middle dim
        return filtered, torch.view_as_real(middle)


def test_a_length_with_a_prime_factor_above_13_takes_the_kernel_bluestein_inside():
    x, z = torch.randn(3, 1009), torch.randn(2, 134, 3, 2)
    ep = export(_Primes(), (x, z))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert _fft_rows_cpu_nodes(new) == 3
    for actual, expected in zip(new.module()(x, z), _Primes()(x.double(), z.double()), strict=True):
        assert _error(actual, expected) <= 1e-5


class _Rfft(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(torch.fft.rfft(x))


@pytest.mark.parametrize("n, kind, covered", [(400, "r2c", True), (4096, "c2c", True), (8192, "r2c", True),
                                              (375, "c2r", True), (68, "c2c", True), (2 * 17, "r2c", True),
                                              (1001, "c2c", True), (4093, "c2r", True), (4099, "c2c", True),
                                              (32749, "r2c", True), (32768, "c2c", True), (32769, "c2r", False),
                                              (65536, "r2c", False), (1, "c2c", False)])
def test_covers(n, kind, covered):
    x = torch.empty(3, n, 2) if kind != "r2c" else torch.empty(3, n)
    assert fft_cpu.covers(x, 1, n, n // 2 + 1 if kind == "r2c" else n, kind) is covered
