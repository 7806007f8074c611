"""The kernel form of a static-length transform: one aotcuda::fft_rows op per transformed dim
(spectral/transform.py, AOTCUDA_FFT_KERNEL), instead of the GEMM form's DFT products.

The form is taken on a non-CPU device where Triton is installed. Here, without a GPU:
- programs on the meta device (standing in for CUDA: the choice reads the traced tensor's device) are
  rewritten with fft_rows nodes and nothing else of the transform with the switch on (a length with a
  prime factor above 61 too: Bluestein inside the kernel), with DFT products with it off, for lengths the
  kernel does not cover (a prime above 4096), and for float64;
- the same rewrite made on the CPU (the device check pretends it is not one) runs the op's CPU
  implementation (torch.fft, kernels/fft_rows.py), and matches eager on every FFT case of test_fft.py,
  stft/istft, a transform along a middle dim and a dynamic batch: the rule's dims, bins, lengths and
  scales reach the op right. The kernel itself is tested in tests/kernels/test_fft_rows_kernel.py.
- stft's front end is fused (spectral/window.py): a Whisper-like stft (n_fft 400, hop 160, hann window,
  center=True reflect) is one fft_rows node given the window, reading unfold's overlapping frames with no
  multiply or copy before it, on meta and run on the CPU against eager; a complex stft (c2c) likewise.
- a spectral filter's complex product is fused (spectral/product.py): irfft(rfft(x)·w) and ifft(fft(z)·v) are
  two fft_rows nodes each, the second given the product's factors as x and `weight`, no multiply, flip or
  add left, on meta and run on the CPU against eager; a product that is also an output stays (the kernel
  itself, and such a program run through it: tests/kernels/test_fft_rows_kernel.py, in the interpreter).
- benchmarks/fft.py's issue-30 programs: FreeU's fourier_filter (fftn/fftshift/ifftn: four fft_rows nodes),
  a bfloat16 filter (float32 transforms between casts, kernel and CPU forms), and a Whisper stft over a
  named Dim of frames (one windowed fft_rows node, its frame count symbolic), each against eager.
Triton itself is not needed: the op exists without it (its CPU implementation), so the switch's
"Triton is installed" is set true here.
"""

import copy

import pytest
import torch

import aotcuda.kernels.fft_rows  # noqa: F401 - registers the op
from aotcuda.passes import ReplaceComplexWithRealPass
from aotcuda.passes.complex_to_real.spectral import transform as spectral

from .helpers import ComplexFn, assert_no_complex, export, fresh_like
from .test_fft import C2C_CASES, C2R_CASES, R2C_CASES, assert_close_to_scale, pair, real

aten = torch.ops.aten
FFT_ROWS = torch.ops.aotcuda.fft_rows.default
PRODUCTS = (aten.mm.default, aten.bmm.default)


@pytest.fixture
def switch_on(monkeypatch):
    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "1")
    monkeypatch.setattr(spectral, "HAVE_TRITON", True)


@pytest.fixture
def kernel_form_on_cpu(switch_on, monkeypatch):
    monkeypatch.setattr(spectral, "on_cpu", lambda x: False)


def _calls(ep, targets):
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target in targets]


def _rewrite_and_compare(fn, *args, n_complex=0, dynamic_shapes=None, fresh=None):
    module = ComplexFn(fn, n_complex)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, args, dynamic_shapes))
    assert_no_complex(new)
    assert _calls(new, (FFT_ROWS,)) and not _calls(new, PRODUCTS)
    for inputs in fresh or [tuple(fresh_like(a) for a in args)]:
        assert_close_to_scale(new.module()(*inputs), module(*inputs), torch.float32)
    return new


CASES = {**{f"r2c {k}": (fn, (real(*shape),), 0) for k, (fn, shape) in R2C_CASES.items()},
         **{f"c2c {k}": (fn, (pair(*shape),), 1) for k, (fn, shape) in C2C_CASES.items()},
         **{f"c2r {k}": (fn, (pair(*shape),), 1) for k, (fn, shape) in C2R_CASES.items()}}


@pytest.mark.parametrize("name", list(CASES))
def test_every_fft_case_runs_as_the_kernel_op_and_matches_eager(kernel_form_on_cpu, name):
    fn, args, n_complex = CASES[name]
    _rewrite_and_compare(fn, *args, n_complex=n_complex)


def test_stft_and_istft_of_a_whisper_frame_run_as_the_kernel_op(kernel_form_on_cpu):
    window = torch.hann_window(400)
    _rewrite_and_compare(lambda x: torch.stft(x, 400, hop_length=160, window=window, return_complex=True),
                         real(2, 4000))
    new = _rewrite_and_compare(lambda z: torch.istft(z, 64, hop_length=16, window=torch.hann_window(64)),
                               pair(2, 33, 12), n_complex=1)
    assert len(_calls(new, (FFT_ROWS,))) == 1


def test_a_middle_dim_and_a_dynamic_batch(kernel_form_on_cpu):
    batch = torch.export.Dim("batch", min=2, max=64)
    new = _rewrite_and_compare(lambda x: torch.fft.irfft(torch.fft.rfft(x, dim=1) * 2, n=100, dim=1),
                               real(3, 100, 5), dynamic_shapes=(({0: batch},),),
                               fresh=[(real(size, 100, 5),) for size in (2, 11, 64)])
    batch_sizes = [n.meta["val"].shape[0] for n in _calls(new, (FFT_ROWS,))]
    assert len(batch_sizes) == 2 and all(isinstance(size, torch.SymInt) for size in batch_sizes)


class RfftIrfftAndFft(torch.nn.Module):
    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x) * 2, n=x.shape[-1])
        return filtered, torch.view_as_real(torch.fft.fft(torch.view_as_complex(z), dim=0))


def _on_meta(n=100, m=128, dtype=torch.float32):
    args = (torch.randn(3, n, device="meta", dtype=dtype), torch.randn(m, 3, 2, device="meta", dtype=dtype))
    return ReplaceComplexWithRealPass(strict=True)(export(RfftIrfftAndFft(), args))


def test_a_non_cpu_program_takes_one_kernel_a_transform_with_the_switch_on(switch_on):
    """rfft and irfft of 100, fft of 128 along dim 0: three fft_rows nodes, each the only op of its
    transform (no product, no copy: the op reads the dim where it is and writes eager's layout)."""
    new = _on_meta()
    kernels = _calls(new, (FFT_ROWS,))
    assert [k.args[2:6] for k in kernels] == [(1, 100, 51, "r2c"), (1, 100, 100, "c2r"), (0, 128, 128, "c2c")]
    assert [n.target for n in new.graph.nodes if n.op == "call_function"] == [FFT_ROWS, aten.mul.Tensor,
                                                                              FFT_ROWS, FFT_ROWS]


def test_the_gemm_form_stays_with_the_switch_off_an_uncovered_length_or_float64(monkeypatch, switch_on):
    uncovered = _on_meta(n=8209)  # a prime above 8192: rfft and irfft as DFT products, the fft of 128 a kernel
    assert len(_calls(uncovered, (FFT_ROWS,))) == 1 and _calls(uncovered, PRODUCTS)
    assert len(_calls(_on_meta(n=100, m=8209), (FFT_ROWS,))) == 2
    assert not _calls(_on_meta(dtype=torch.float64), (FFT_ROWS,))
    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "0")
    off = _on_meta()
    assert not _calls(off, (FFT_ROWS,)) and len(_calls(off, PRODUCTS)) == 6


@pytest.mark.parametrize("n, m", [(67, 134), (1009, 2039), (97 * 2, 67), (4093, 2 * 1031)])
def test_a_length_with_a_prime_factor_above_61_is_one_bluestein_kernel_a_transform(switch_on, n, m):
    """Lengths no tiling covers (kernels/fft_plan.py: a prime factor ≥ 67, n ≤ 4096) run Bluestein inside
    aotcuda::fft_rows: rfft, irfft and fft are one fft_rows node each, no DFT product left, their tables
    (m's DFT, the chirp, the kernel's spectrum) one program constant each."""
    from aotcuda.kernels import fft_plan

    assert fft_plan.tiling(n) is None and fft_plan.tiling(m) is None
    new = _on_meta(n=n, m=m)
    kernels = _calls(new, (FFT_ROWS,))
    assert [k.args[2:6] for k in kernels] == [(1, n, n // 2 + 1, "r2c"), (1, n, n, "c2r"), (0, m, m, "c2c")]
    assert not _calls(new, PRODUCTS)
    # r2c's tables (forward) and c2r's (inverse) of n, c2c's of m
    assert sorted(c.numel() for c in new.constants.values()) == sorted(
        fft_plan.bluestein(length).table_numel() for length in (n, n, m))


def test_a_bluestein_length_rewritten_runs_the_ops_cpu_implementation_and_matches_eager(kernel_form_on_cpu):
    """1009 (a prime; Bluestein m = 2048) along a middle dim, rfft → complex weight → irfft, and a c2c of 134:
    the rule's dims, bins and scales reach the op right for a Bluestein length (the kernel itself:
    tests/kernels/test_fft_rows_bluestein.py)."""
    weight = torch.randn(505, 1, dtype=torch.complex64)
    _rewrite_and_compare(lambda x: torch.fft.irfft(torch.fft.rfft(x, dim=1) * weight, n=1009, dim=1),
                         real(3, 1009, 2))
    _rewrite_and_compare(lambda z: torch.fft.ifft(z, dim=0, norm="ortho"), pair(134, 3), n_complex=1)


def test_the_entry_points_take_the_op_when_asked_on_any_device():
    """kernel=True: the op on CPU tensors (its CPU implementation), its dim where it is, scale applied."""
    z, x, h = pair(4, 64, 3), real(4, 100, 3), pair(4, 51, 3)
    zc, hc = torch.view_as_complex(z), torch.view_as_complex(h)
    assert_close_to_scale(spectral.c2c_along(z, 1, True, 0.5, kernel=True),
                          torch.view_as_real(torch.fft.ifft(zc, dim=1, norm="forward") * 0.5), torch.float32)
    assert_close_to_scale(spectral.r2c_along(x, 1, 51, 1.0, kernel=True), torch.view_as_real(torch.fft.rfft(x, dim=1)),
                          torch.float32)
    assert_close_to_scale(spectral.c2r_along(h, 1, 100, 0.01, kernel=True), torch.fft.irfft(hc, n=100, dim=1),
                          torch.float32)
    assert not spectral.kernel_form(z, 1, 64, "c2c", kernel=False)


class WhisperStft(torch.nn.Module):
    """Whisper's front end up to the power spectrum's input: stft(n_fft 400, hop 160, hann, center, reflect)."""

    def __init__(self, device="cpu"):
        super().__init__()
        self.register_buffer("window", torch.hann_window(400, device=device))

    def forward(self, audio):
        return torch.view_as_real(torch.stft(audio, 400, 160, window=self.window, center=True, pad_mode="reflect",
                                             return_complex=True))


MATERIALIZING = (aten.mul.Tensor, aten.clone.default, aten.copy.default, aten._to_copy.default,
                 aten.as_strided_copy.default, aten.unfold_copy.default)


def _ancestors(node):
    seen, todo = set(), list(node.all_input_nodes)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += n.all_input_nodes
    return seen


def assert_window_fused(ep, window_name):
    """One fft_rows node, given the window placeholder, reading unfold's view; no multiply or copy before it."""
    (kernel,) = _calls(ep, (FFT_ROWS,))
    assert len(kernel.args) == 9 and kernel.args[8].op == "placeholder" and window_name in kernel.args[8].name
    frames = kernel.args[0]
    assert frames.target is aten.unfold.default, frames.target  # the view itself, not a materialized copy
    x = frames.meta["val"]
    assert x.stride(-2) == 160 < x.shape[-1] == 400  # overlapping frames
    before = [n.target for n in _ancestors(kernel) if n.op == "call_function"]
    assert not [t for t in before if t in MATERIALIZING], before
    return kernel


def test_a_whisper_stft_fuses_its_window_and_frames_into_one_kernel(switch_on):
    ep = export(WhisperStft("meta"), (torch.randn(2, 16000, device="meta"),))
    assert _calls(ep, (aten.mul.Tensor,))  # the window multiply, before the pass
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    kernel = assert_window_fused(new, "window")
    assert kernel.args[2:8] == (2, 400, 201, "r2c", False, 1.0)
    assert not _calls(new, (aten.mul.Tensor,) + PRODUCTS)


def test_a_whisper_stft_with_the_fused_window_matches_eager_on_the_cpu(kernel_form_on_cpu):
    module = WhisperStft()
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(2, 16000),)))
    assert_window_fused(new, "window")
    audio = torch.randn(2, 16000)
    assert_close_to_scale(new.module()(audio), module(audio), torch.float32)


def test_a_complex_stft_fuses_its_window_into_the_c2c_kernel(kernel_form_on_cpu):
    window = torch.hann_window(64)
    new = _rewrite_and_compare(lambda z: torch.stft(z, 64, hop_length=16, window=window, center=False,
                                                    return_complex=True), pair(2, 1000), n_complex=1)
    (kernel,) = _calls(new, (FFT_ROWS,))
    assert kernel.args[5] == "c2c" and len(kernel.args) == 9 and kernel.args[8] is not None
    assert not _calls(new, (aten.mul.Tensor,))


def test_the_gemm_form_keeps_the_window_multiply(monkeypatch, switch_on):
    monkeypatch.setenv("AOTCUDA_FFT_KERNEL", "0")
    new = ReplaceComplexWithRealPass(strict=True)(export(WhisperStft("meta"), (torch.randn(2, 16000, device="meta"),)))
    assert not _calls(new, (FFT_ROWS,)) and _calls(new, (aten.mul.Tensor,))


class SpectralProducts(torch.nn.Module):
    """A filter (one weight a bin and channel, along a middle dim), an inverse c2c of a product (weight first),
    and a product that is also an output (left unfused: the product is computed once either way)."""

    def __init__(self, n=64, device="cpu"):
        super().__init__()
        self.n = n
        self.w = torch.nn.Parameter(torch.randn(n // 2 + 1, 3, dtype=torch.complex64, device=device))
        self.v = torch.nn.Parameter(torch.randn(n, dtype=torch.complex64, device=device))

    def forward(self, x, z):
        filtered = torch.fft.irfft(torch.fft.rfft(x, dim=1) * self.w, n=self.n, dim=1)
        c2c = torch.fft.ifft(self.v * torch.fft.fft(torch.view_as_complex(z)), norm="ortho")
        kept = torch.fft.rfft(x[:, :, 0]) * self.w[:, 0]
        return filtered, torch.view_as_real(c2c), torch.fft.irfft(kept, n=self.n), torch.view_as_real(kept)


def _weights(ep):
    """The kind of each fft_rows node given a weight, and of each left without one."""
    kernels = _calls(ep, (FFT_ROWS,))
    given = [k for k in kernels if len(k.args) > 9 and k.args[9] is not None]
    return [k.args[5] for k in given], [k.args[5] for k in kernels if k not in given]


def test_a_spectral_filters_product_is_fused_into_the_kernels_weight(switch_on):
    """On meta (standing in for CUDA): the filter's c2r and the c2c take their products as x and weight; the
    product of mul_pairs (mul, flip, add) is gone but for the one that is also an output."""
    args = (torch.randn(2, 64, 3, device="meta"), torch.randn(4, 64, 2, device="meta"))
    new = ReplaceComplexWithRealPass(strict=True)(export(SpectralProducts(device="meta"), args))
    assert _weights(new) == (["c2r", "c2c"], ["r2c", "c2c", "r2c", "c2r"])
    (kept,) = [k for k in _calls(new, (FFT_ROWS,)) if k.args[5] == "c2r" and len(k.args) <= 9]
    assert kept.args[0].target is aten.add.Tensor and len(kept.args[0].users) == 2
    assert len(_calls(new, (aten.flip.default,))) == 1  # the kept product's, and no other


@pytest.mark.parametrize("n, fused", [(1009, True), (4096, False), (4093, False)])
def test_the_cuda_form_fuses_a_product_only_where_its_tile_gains(switch_on, n, fused):
    """fft_rows takes a product's weight where its plan's tile holds at most 2048 points (1009: Bluestein's
    m = 2048) and keeps the product at 4096's tile and 4093's two halves of it, where the weighted kernel
    measured slower than the product and the transform apart (spectral/product.py)."""
    args = (torch.randn(2, n, 3, device="meta"), torch.randn(4, n, 2, device="meta"))
    new = ReplaceComplexWithRealPass(strict=True)(export(SpectralProducts(n, device="meta"), args))
    assert _weights(new)[0] == (["c2r", "c2c"] if fused else [])
    assert len(_calls(new, (aten.flip.default,))) == (1 if fused else 3)


def test_a_spectral_filter_with_the_fused_product_matches_eager_on_the_cpu(kernel_form_on_cpu):
    module = SpectralProducts()
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (real(2, 64, 3), pair(4, 64))))
    assert _weights(new)[0] == ["c2r", "c2c"]
    for _ in range(2):
        args = (real(2, 64, 3), pair(4, 64))
        with torch.no_grad():
            for got, want in zip(new.module()(*args), module(*args), strict=True):
                assert_close_to_scale(got, want, torch.float32)


def fourier_filter(x, threshold=1, scale=0.9):
    """diffusers' FreeU fourier_filter (utils/torch_utils.py), float32 x [B, C, H, W]."""
    x_freq = torch.fft.fftshift(torch.fft.fftn(x, dim=(-2, -1)), dim=(-2, -1))
    B, C, H, W = x_freq.shape
    mask = torch.ones((B, C, H, W), device=x.device)
    crow, ccol = H // 2, W // 2
    mask[..., crow - threshold:crow + threshold, ccol - threshold:ccol + threshold] = scale
    x_freq = torch.fft.ifftshift(x_freq * mask, dim=(-2, -1))
    return torch.fft.ifftn(x_freq, dim=(-2, -1)).real


def test_freeu_fourier_filter_runs_as_one_kernel_op_a_dim_of_each_transform(kernel_form_on_cpu):
    """fftn and ifftn over (H, W) with fftshift between (benchmarks/fft.py "freeu"): four fft_rows nodes, c2c
    along dims 2 then 3 (H, then W), forward then inverse; no FFT op left; eager's result on fresh maps."""
    new = _rewrite_and_compare(fourier_filter, real(2, 6, 32, 16))
    kernels = _calls(new, (FFT_ROWS,))
    assert [k.args[2:7] for k in kernels] == [(2, 32, 32, "c2c", False), (3, 16, 16, "c2c", False),
                                              (2, 32, 32, "c2c", True), (3, 16, 16, "c2c", True)]


class FilterInBfloat16(torch.nn.Module):
    """benchmarks/fft.py's "filter_bf16": a bfloat16 signal filtered with float32 FFTs (torch.fft takes no bfloat16)."""

    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n // 2 + 1, dtype=torch.complex64) / n)

    def forward(self, x):
        return torch.fft.irfft(torch.fft.rfft(x.float()) * self.weight, n=x.shape[-1]).to(x.dtype)


@pytest.mark.parametrize("on_cpu", [False, True], ids=["kernel form", "cpu form"])
def test_a_bfloat16_filter_takes_float32_transforms_and_matches_eager(switch_on, monkeypatch, on_cpu):
    """The casts stay ops of their own around float32 fft_rows nodes (the kernel form) or Stockham stages (the
    CPU form); the bfloat16 result is eager's within a bfloat16 rounding (the same float32 value rounded)."""
    if not on_cpu:
        monkeypatch.setattr(spectral, "on_cpu", lambda x: False)
    module = FilterInBfloat16(400)
    x = torch.randn(8, 400).bfloat16()
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (x,)))
    assert_no_complex(new)
    kernels = _calls(new, (FFT_ROWS,))
    assert [k.args[0].meta["val"].dtype for k in kernels] == ([] if on_cpu else [torch.float32] * 2)
    for _ in range(3):
        x = torch.randn(8, 400).bfloat16()
        got, want = new.module()(x), module(x).detach()
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got, want, rtol=2 ** -7, atol=2 ** -7 * want.abs().max().item())


def test_a_whisper_front_end_over_a_named_dynamic_frame_count_runs_as_one_windowed_kernel_op(kernel_form_on_cpu):
    """benchmarks/fft.py "stft_dynamic": samples = 160·frames (a named Dim with a max), one fft_rows node given
    the window, its frame count symbolic; eager's result at two lengths."""
    window = torch.hann_window(400)
    frames = torch.export.Dim("frames", min=8, max=3000)
    new = _rewrite_and_compare(lambda x: torch.stft(x, 400, 160, window=window, return_complex=True).abs() ** 2,
                               real(2, 160 * 50), dynamic_shapes=(({1: 160 * frames},),),
                               fresh=[(real(2, 160 * f),) for f in (9, 120)])
    (kernel,) = _calls(new, (FFT_ROWS,))
    assert kernel.args[8] is not None and isinstance(kernel.meta["val"].shape[1], torch.SymInt)


class ConstantFilter(torch.nn.Module):
    """benchmarks/fft.py's filter, generalized: irfft(rfft(x)·w) with a weight Parameter of `shape` shared by every row,
    along `dim`, with each transform's norm."""

    def __init__(self, n, shape, dim=-1, norms=("backward", "backward")):
        super().__init__()
        self.n, self.dim, self.norms = n, dim, norms
        self.weight = torch.nn.Parameter(torch.randn(*shape, dtype=torch.complex64))

    def forward(self, x):
        spectrum = torch.fft.rfft(x, n=self.n, dim=self.dim, norm=self.norms[0])
        return torch.fft.irfft(spectrum * self.weight, n=self.n, dim=self.dim, norm=self.norms[1])


def _kinds(ep) -> list[str]:
    return [k.args[5] for k in _calls(ep, (FFT_ROWS,))]


CONVOLUTIONS = {  # (n, the weight's shape, dim, norms, x's shape)
    "4093, the product apart": (4093, (2047,), -1, ("backward", "backward"), (4, 4093)),
    "1009, the product in the c2r's weight": (1009, (505,), -1, ("backward", "backward"), (5, 1009)),
    "middle dim, mixed norms, shorter rows": (1009, (505, 1), 1, ("ortho", "forward"), (2, 1000, 3)),
    "one weight for every bin, longer rows": (2039, (1,), -1, ("forward", "backward"), (3, 2050)),
}


@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_a_constant_filter_at_a_bluestein_length_is_one_convolution_kernel(kernel_form_on_cpu, name):
    """spectral/filter.py: irfft(rfft(x)·w) with a constant w shared by every row, at a length the kernel runs as
    Bluestein, is one fft_rows node of kind conv (two m-point DFTs a pair of rows instead of four), no product left,
    and matches eager (the op's CPU implementation: kernels/fft_rows.py's convolved) on fresh inputs; a dynamic batch
    too. Main: an r2c and a c2r node."""
    n, shape, dim, norms, x_shape = CONVOLUTIONS[name]
    module = ConstantFilter(n, shape, dim, norms)
    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(module, (real(*x_shape),), dynamic_shapes=({0: batch},)).run_decompositions()
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert _kinds(new) == ["conv"]
    assert not _calls(new, (aten.mul.Tensor, aten.flip.default, aten.add.Tensor))
    for rows in (x_shape[0], 1, 7):
        x = real(rows, *x_shape[1:])
        with torch.no_grad():
            assert_close_to_scale(new.module()(x), module(x), torch.float32)


class FilterWithSideValues(torch.nn.Module):
    """Filters the convolution does not take: a weight a channel, a weight passed in, a weight computed at each call,
    a spectrum that is also an output; and a tiled length."""

    def __init__(self):
        super().__init__()
        self.per_channel = torch.nn.Parameter(torch.randn(3, 505, dtype=torch.complex64))
        self.shared = torch.nn.Parameter(torch.randn(505, dtype=torch.complex64))
        self.tiled = torch.nn.Parameter(torch.randn(513, dtype=torch.complex64))

    def forward(self, x, w, y):
        per_channel = torch.fft.irfft(torch.fft.rfft(x) * self.per_channel, n=1009)
        passed_in = torch.fft.irfft(torch.fft.rfft(x) * torch.view_as_complex(w), n=1009)
        computed = torch.fft.irfft(torch.fft.rfft(x) * (self.shared * y.mean()), n=1009)
        spectrum = torch.fft.rfft(x)
        kept = torch.fft.irfft(spectrum * self.shared, n=1009)
        tiled = torch.fft.irfft(torch.fft.rfft(y) * self.tiled, n=1024)
        return per_channel, passed_in, computed, kept, torch.view_as_real(spectrum), tiled


def test_filters_the_convolution_cannot_take_keep_their_transforms(kernel_form_on_cpu, monkeypatch):
    """Each of FilterWithSideValues's filters stays an r2c and a c2r (its kernel would have to be transformed at each
    call, or one kernel serves some rows only, or the spectrum is needed anyway), and matches eager; with
    AOTCUDA_FFT_FILTER_CONVOLUTION=0 a filter the convolution takes stays so too."""
    module = FilterWithSideValues()
    args = (real(3, 1009), pair(505), real(3, 1024))
    new = ReplaceComplexWithRealPass(strict=True)(export(module, args))
    assert "conv" not in _kinds(new) and _kinds(new).count("c2r") == 5
    fresh = (real(3, 1009), pair(505), real(3, 1024))
    with torch.no_grad():
        for got, want in zip(new.module()(*fresh), module(*fresh), strict=True):
            assert_close_to_scale(got, want, torch.float32)
    monkeypatch.setenv("AOTCUDA_FFT_FILTER_CONVOLUTION", "0")
    off = ReplaceComplexWithRealPass(strict=True)(export(ConstantFilter(4093, (2047,)), (real(2, 4093),)))
    assert _kinds(off) == ["r2c", "c2r"]


class FilterOfWrittenState(torch.nn.Module):
    """A filter whose weight is a buffer the program writes after it: its value at a call is not its value at
    lowering, so it must stay a weight read at each call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(505, dtype=torch.complex64))

    def forward(self, x):
        y = torch.fft.irfft(torch.fft.rfft(x) * self.w, n=1009)
        self.w.mul_(0.5)
        return y


def test_a_filter_whose_weight_the_program_writes_is_not_baked_into_a_convolution(kernel_form_on_cpu):
    """On the code before the check, the first call was right and every later one filtered with the lowering's
    weight, not the halved one."""
    eager, x = FilterOfWrittenState(), real(3, 1009)
    new = ReplaceComplexWithRealPass(strict=True)(export(copy.deepcopy(eager), (x,)))
    assert _kinds(new) == ["r2c", "c2r"]
    lowered = new.module()
    for _ in range(3):
        x = real(3, 1009)
        with torch.no_grad():
            assert_close_to_scale(lowered(x), eager(x), torch.float32)


class TwoFiltersOneWeight(torch.nn.Module):
    """One weight (written first in the product) for two filters, of two inputs, one along a middle dim."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(2047, dtype=torch.complex64))

    def forward(self, x, y):
        along_last = torch.fft.irfft(self.weight * torch.fft.rfft(x), n=4093)
        along_first = torch.fft.irfft(self.weight[:, None] * torch.fft.rfft(y, dim=0), n=4093, dim=0)
        return along_last, along_first


def test_a_weight_written_first_and_shared_by_two_filters_makes_two_convolutions(kernel_form_on_cpu):
    module = TwoFiltersOneWeight()
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (real(3, 4093), real(4093, 2))))
    assert _kinds(new) == ["conv", "conv"]
    fresh = (real(3, 4093), real(4093, 2))
    with torch.no_grad():
        for got, want in zip(new.module()(*fresh), module(*fresh), strict=True):
            assert_close_to_scale(got, want, torch.float32)
