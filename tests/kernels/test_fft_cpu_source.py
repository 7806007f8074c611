"""aotcuda::fft_rows_cpu's C++ (kernels/fft_cpu.py kernel_body) built alone with the system C++ compiler and
run through ctypes against torch.fft on random rows: every kind, forward and inverse, even and odd lengths,
each radix (4, 2, 3, 5, 7, 11, 13), zero-padding and cropping, a window, a partial last block of rows, pairs
interleaved and as planes, with Inductor's flags (-fno-tree-loop-vectorize -ffp-contract=off) and without.
A second or so a case, where an Inductor compile takes tens: the lowered kernel's own tests are
tests/passes/complex_to_real/test_fft_cpu_kernel.py."""

import ctypes
import math
import shutil
import subprocess

import pytest
import torch

from aotcuda.kernels import fft_cpu_source
from aotcuda.kernels.fft_cpu import bluestein_length, complex_length
from aotcuda.kernels.fft_rows import transformed

COMPILER = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")


def _build(tmp_path, n, kind, inverse, in_len, out_len, scale, window, x, y, flags, ctype="float"):
    """The kernel for contiguous-batch x and y (any strides along the dim and the pair), one batch dim, x and
    y of C++ type ctype (float, or _Float16: the scalar loads and stores)."""
    pair_in, pair_out = kind != "r2c", kind != "c2r"
    pre, body = fft_cpu_source.kernel_body(
        n, kind, inverse, in_len, out_len, scale, window, ["R"], [str(x.stride(0))], [str(y.stride(0))],
        str(x.stride(1)), str(x.stride(2)) if pair_in else "0", str(y.stride(1)), str(y.stride(2)) if pair_out else "0",
        "1", "0", "0", ctype, ctype == "float")
    source = tmp_path / "kernel.cpp"
    source.write_text(pre + f'extern "C" void k(const {ctype}* X, const float* WIN, {ctype}* Y, int64_t R) {{\n'
                      + body + "\n}\n")
    library = tmp_path / "kernel.so"
    subprocess.check_call([COMPILER, "-O2", "-march=native", *flags, "-fopenmp", "-shared", "-fPIC", str(source),
                           "-o", str(library)])
    return ctypes.CDLL(str(library)).k


def _float64_error(folder, case, x, y, window, ctype="float") -> float:
    """The kernel of `case` (n, kind, inverse, in_len, out_len, scale, window) built and run on x [R, in_len, 1 or
    2] into y, and its error relative to torch.fft in float64."""
    n, kind, inverse, in_len, out_len, scale, has_window = case
    pair_in, pair_out = kind != "r2c", kind != "c2r"
    kernel = _build(folder, n, kind, inverse, in_len, out_len, scale, has_window, x, y, (), ctype)
    kernel(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(window.data_ptr()), ctypes.c_void_p(y.data_ptr()),
           ctypes.c_int64(x.shape[0]))
    source = (x if pair_in else x[..., 0]).double()
    expected = transformed(source, 1, n, out_len, kind, inverse, scale, window.double() if has_window else None)
    actual = (y if pair_out else y[..., 0]).double()
    return ((actual - expected).norm() / expected.norm()).item()


CASES = {  # n, kind, inverse, in_len, out_len, scale, window
    "c2c_8": (8, "c2c", False, 8, 8, 1.0, False),
    "c2c_16_inverse_scaled": (16, "c2c", True, 16, 16, 0.5, False),
    "c2c_400": (400, "c2c", False, 400, 400, 1.0, False),
    "c2c_375_inverse": (375, "c2c", True, 375, 375, 1.0, False),
    "c2c_96_padded_cropped": (96, "c2c", False, 90, 50, 1.0, False),
    "c2c_1001_radix_7_11_13": (1001, "c2c", False, 1001, 1001, 1.0, False),
    "c2c_1625_window": (1625, "c2c", False, 1625, 1625, 1.0, True),
    "r2c_512": (512, "r2c", False, 512, 257, 1.0, False),
    "r2c_400_two_sided": (400, "r2c", False, 400, 400, 1.0, False),
    "r2c_400_window": (400, "r2c", False, 400, 201, 0.25, True),
    "r2c_375": (375, "r2c", False, 375, 188, 1.0, False),
    "r2c_100_odd_in_len": (100, "r2c", False, 91, 51, 1.0, False),
    "r2c_4096": (4096, "r2c", False, 4096, 2049, 1.0, False),
    "c2r_512": (512, "c2r", True, 257, 512, 1 / 512, False),
    "c2r_400": (400, "c2r", True, 201, 400, 1.0, False),
    "c2r_375": (375, "c2r", True, 188, 375, 1.0, False),
    "c2r_96_few_bins": (96, "c2r", True, 30, 96, 1.0, False),
    "c2r_96_odd_out_len": (96, "c2r", True, 60, 95, 1.0, False),
    "c2r_4096": (4096, "c2r", True, 2049, 4096, 1.0, False),
    "c2c_32768": (32768, "c2c", False, 32768, 32768, 1.0, False),  # MAX_N: about a second a build
    "r2c_32768": (32768, "r2c", False, 32768, 16385, 1.0, False),
    "c2r_32768": (32768, "c2r", True, 16385, 32768, 1 / 32768, False),
    # Bluestein: a prime factor above 13 in the complex length
    "bluestein_c2c_67": (67, "c2c", False, 67, 67, 1.0, False),
    "bluestein_c2c_1009_inverse_scaled": (1009, "c2c", True, 1009, 1009, 1 / 1009, False),
    "bluestein_c2c_68_padded_cropped": (68, "c2c", False, 60, 40, 1.0, False),
    "bluestein_c2c_4093": (4093, "c2c", False, 4093, 4093, 1.0, False),
    "bluestein_c2c_1031_window": (1031, "c2c", False, 1031, 1031, 0.5, True),
    "bluestein_r2c_1009": (1009, "r2c", False, 1009, 505, 1.0, False),
    "bluestein_r2c_134_window": (134, "r2c", False, 134, 68, 0.25, True),
    "bluestein_r2c_134_two_sided": (134, "r2c", False, 134, 134, 1.0, False),
    "bluestein_r2c_4078": (4078, "r2c", False, 4078, 2040, 1.0, False),
    "bluestein_r2c_32749": (32749, "r2c", False, 32749, 16375, 1.0, False),  # packed, m = 65536: 8.7 MB of C++
    "bluestein_c2r_1009": (1009, "c2r", True, 505, 1009, 1 / 1009, False),
    "bluestein_c2r_134": (134, "c2r", True, 68, 134, 1.0, False),
    "bluestein_c2r_134_few_bins_odd_out_len": (134, "c2r", True, 30, 133, 1.0, False),
}


@pytest.mark.parametrize("planes", [False, True], ids=["interleaved", "planes"])
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_kernel_source_matches_torch_fft(case, planes, tmp_path):
    n, kind, inverse, in_len, out_len, scale, has_window = CASES[case]
    rows = 37  # four full blocks of 8 rows and a partial one
    generator = torch.Generator().manual_seed(len(case))
    pair_in, pair_out = kind != "r2c", kind != "c2r"

    def pair_tensor(length):  # [rows, length, 2], the 2 innermost or each row's re then im
        if planes:
            return torch.empty(rows, 2, length).transpose(1, 2)
        return torch.empty(rows, length, 2)

    x = pair_tensor(in_len) if pair_in else torch.empty(rows, in_len, 1)
    x.copy_(torch.randn(x.shape, generator=generator))
    y = pair_tensor(out_len) if pair_out else torch.empty(rows, out_len, 1)
    window = torch.rand(in_len, generator=generator)
    flags = ("-fno-tree-loop-vectorize", "-ffp-contract=off") if planes else ()
    kernel = _build(tmp_path, n, kind, inverse, in_len, out_len, scale, has_window, x, y, flags)
    kernel(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(window.data_ptr()), ctypes.c_void_p(y.data_ptr()),
           ctypes.c_int64(rows))
    source = x if pair_in else x[..., 0]
    expected = transformed(source.double().float(), 1, n, out_len, kind, inverse, scale,
                           window if has_window else None)
    actual = y if pair_out else y[..., 0]
    error = ((actual - expected).norm() / expected.norm()).item()
    # Bluestein's two m-point transforms and three products: a few times a plain FFT's error, ~log(n)
    assert error <= (1e-6 if bluestein_length(complex_length(n, kind)) is None else 1e-7 * math.log2(n)), error


HALF = {  # Bluestein on float16 rows (float32 math, the scalar loads and stores), the dim strided
    "c2c_67_inverse": (67, "c2c", True, 67, 67, 1 / 67, False),
    "r2c_1009_window": (1009, "r2c", False, 1009, 505, 0.5, True),
    "c2r_134": (134, "c2r", True, 68, 134, 1 / 134, False),
}


@pytest.mark.parametrize("case", HALF, ids=list(HALF))
def test_bluestein_on_float16_rows(case, tmp_path):
    n, kind, inverse, in_len, out_len, scale, has_window = HALF[case]
    rows = 21
    generator = torch.Generator().manual_seed(len(case))
    pair_in, pair_out = kind != "r2c", kind != "c2r"
    # the transformed dim outermost: its points R rows apart, as a middle dim is read in place
    x = torch.randn(in_len, rows, 2 if pair_in else 1, generator=generator).half().transpose(0, 1)
    y = torch.empty(rows, out_len, 2 if pair_out else 1, dtype=torch.float16)
    window = torch.rand(in_len, generator=generator)
    error = _float64_error(tmp_path, HALF[case], x, y, window, "_Float16")
    assert error <= 1e-3, error


LARGE = {  # n, kind, inverse, out_len, scale, the input: results float32 holds, sums on the way that it would not
    "r2c_400_split": (400, "r2c", False, 201, 1.0, "first_two"),  # |X[0]| = 2e38: the split's halves first
    "r2c_4096_forward": (4096, "r2c", False, 2049, 1 / 4096, "constant"),  # the scale before the stages
    "c2c_4096_ortho": (4096, "c2c", False, 4096, 1 / 64, "constant"),
    "c2c_375_inverse": (375, "c2c", True, 375, 1 / 375, "constant"),
    "c2r_512_backward": (512, "c2r", True, 512, 1 / 512, "constant"),
    "c2r_375_backward": (375, "c2r", True, 375, 1 / 375, "constant"),
}


@pytest.mark.parametrize("case", LARGE, ids=list(LARGE))
def test_values_near_float32s_largest_stay_finite(case, tmp_path):
    """Inputs near float32's largest value whose transform float32 still holds (torch.fft gives finite
    values): the kernel scales the points as it loads them and halves before it adds in the r2c split, so
    no intermediate sum overflows."""
    n, kind, inverse, out_len, scale, pattern = LARGE[case]
    rows, pair_in, pair_out = 9, kind != "r2c", kind != "c2r"
    in_len = n // 2 + 1 if kind == "c2r" else n
    x = torch.empty(rows, in_len, 2) if pair_in else torch.empty(rows, in_len, 1)
    if pattern == "constant":
        x.fill_(1e36)
    else:
        x.zero_()
        x[:, :2] = 1e38
    x.mul_(torch.rand(rows, 1, 1, generator=torch.Generator().manual_seed(7)) * 0.5 + 0.5)  # rows of other sizes
    y = torch.empty(rows, out_len, 2) if pair_out else torch.empty(rows, out_len, 1)
    kernel = _build(tmp_path, n, kind, inverse, in_len, out_len, scale, False, x, y, ())
    kernel(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(0), ctypes.c_void_p(y.data_ptr()), ctypes.c_int64(rows))
    source = x if pair_in else x[..., 0]
    expected = transformed(source.double(), 1, n, out_len, kind, inverse, scale).double()
    actual = (y if pair_out else y[..., 0]).double()
    assert torch.isfinite(expected).all() and torch.isfinite(actual).all(), case
    error = ((actual - expected).norm() / expected.norm()).item()
    assert error <= 1e-6, error


FOUR_STEP = {  # the four-step split (fft_cpu.four_step: 1024 points and more), against float64; (m1, m2) in the id
    "c2c_1024_32x32": (1024, "c2c", False, 1024, 1024, 1.0, False),  # the first length that takes it
    "c2c_1125_25x45_inverse_window": (1125, "c2c", True, 1125, 1125, 1 / 1125, True),  # odd m2: one column at a time
    "r2c_2400_30x40_window": (2400, "r2c", False, 2400, 1201, 0.5, True),  # the split reads X[k] where rows leave it
    "r2c_2400_padded_cropped": (2400, "r2c", False, 2000, 700, 1.0, False),
    "c2r_2400_few_bins_odd_out_len": (2400, "c2r", True, 900, 2399, 1 / 2400, False),  # natural order: a pass more
    "r2c_1215_27x45_packed": (1215, "r2c", False, 1215, 608, 1.0, False),
    "c2r_1215_packed": (1215, "c2r", True, 608, 1215, 1.0, False),
    "bluestein_r2c_2042_32x64_window": (2042, "r2c", False, 2042, 1022, 1.0, True),  # 1021 via 2048
    "bluestein_c2r_2042": (2042, "c2r", True, 1022, 2042, 1 / 2042, False),
}


@pytest.mark.parametrize("case", FOUR_STEP, ids=list(FOUR_STEP))
def test_four_step_matches_float64(case, tmp_path):
    """The four-step split on rows whose transformed dim is strided (the dim outermost, its points R rows
    apart; the scalar loads and stores) and on dense rows (the AVX2 transposes), against torch.fft in float64."""
    n, kind, inverse, in_len, out_len, scale, has_window = FOUR_STEP[case]
    rows = 13  # a full block of 8 and a partial one (packed: one partial block of 16)
    generator = torch.Generator().manual_seed(len(case))
    pair_in, pair_out = kind != "r2c", kind != "c2r"
    window = torch.rand(in_len, generator=generator)
    for strided in (True, False):
        x = torch.randn(in_len, rows, 2 if pair_in else 1, generator=generator)
        x = x.transpose(0, 1) if strided else x.transpose(0, 1).contiguous()
        y = torch.empty(rows, out_len, 2 if pair_out else 1)
        folder = tmp_path / ("strided" if strided else "dense")
        folder.mkdir()
        error = _float64_error(folder, FOUR_STEP[case], x, y, window)
        bluestein = bluestein_length(complex_length(n, kind)) is not None
        assert error <= (1e-7 * math.log2(n) if bluestein else 1e-6), (strided, error)


FUSED = {  # an even r2c's split fused into its stores, an even c2r's merge into its loads (_split_store, _merged_load)
    "r2c_32_m16": (32, "r2c", False, 32, 17, 1.0, False),  # the split's one-point tail past 16
    "r2c_100_cropped_to_24": (100, "r2c", False, 100, 24, 1.0, False),  # whole transposes only
    "r2c_100_cropped_to_30": (100, "r2c", False, 100, 30, 1.0, False),
    "r2c_4096_32x64_window": (4096, "r2c", False, 4096, 2049, 0.5, True),  # X[k] where the four-step rows leave it
    "r2c_8192_64x64": (8192, "r2c", False, 8192, 4097, 1.0, False),
    "bluestein_r2c_2042": (2042, "r2c", False, 2042, 1022, 1.0, False),
    "c2r_32_m16": (32, "c2r", True, 17, 32, 1.0, False),  # the smallest fused merge: one pair of transposes
    "c2r_36_m18": (36, "c2r", True, 19, 36, 1 / 36, False),  # m not a multiple of 8: the mirror chunks overlap
    "c2r_100_more_bins": (100, "c2r", True, 60, 100, 1.0, False),  # bins past m + 1, not read
    "c2r_100_odd_out_len": (100, "c2r", True, 51, 99, 1.0, False),
    "c2r_4096_32x64": (4096, "c2r", True, 2049, 4096, 1 / 4096, False),
    "c2r_8192_64x64": (8192, "c2r", True, 4097, 8192, 1.0, False),
    "bluestein_c2r_2042": (2042, "c2r", True, 1022, 2042, 1 / 2042, False),
}


@pytest.mark.parametrize("planes", [False, True], ids=["interleaved", "planes"])
@pytest.mark.parametrize("case", FUSED, ids=list(FUSED))
def test_fused_split_and_merge_match_float64(case, planes, tmp_path):
    """The fused passes on full blocks of 8 dense rows (pairs interleaved and as planes), and the two-pass code
    they fall back to on the partial block after them, against torch.fft in float64."""
    n, kind, inverse, in_len, out_len, scale, has_window = FUSED[case]
    tables, gather, stages, store = fft_cpu_source.kernel_source(n, kind, inverse, in_len, out_len, scale,
                                                                 has_window, True)
    assert any("merged = true" in line for line in gather) if kind == "c2r" else \
        any("split_done = true" in line for line in store)
    rows = 21  # two full blocks and a partial one
    generator = torch.Generator().manual_seed(len(case))

    def tensor(length, pair):  # [rows, length, 2 or 1], a pair's 2 innermost or each row's re then im
        if pair and planes:
            return torch.empty(rows, 2, length).transpose(1, 2)
        return torch.empty(rows, length, 2 if pair else 1)

    x = tensor(in_len, kind == "c2r")
    x.copy_(torch.randn(x.shape, generator=generator))
    y = tensor(out_len, kind == "r2c")
    window = torch.rand(in_len, generator=generator)
    error = _float64_error(tmp_path, FUSED[case], x, y, window)
    bluestein = bluestein_length(complex_length(n, kind)) is not None
    assert error <= (1e-7 * math.log2(n) if bluestein else 1e-6), error


def test_planes_it_cannot_allocate_raise_instead_of_being_written_through(tmp_path):
    """A transform of m = 16384 points and more allocates its planes for the one call: where that allocation
    fails (here an address-space limit set just before the call), the kernel throws a C++ exception that names the bytes,
    which AOTInductor's run turns into an error code, instead of writing through a null pointer. Run in a
    small C++ driver of its own, one OpenMP thread, so that the limit meets only the planes."""
    n, rows = 32768, 9
    x, y = torch.empty(rows, n, 2), torch.empty(rows, n, 2)
    pre, body = fft_cpu_source.kernel_body(
        n, "c2c", False, n, n, 1.0, False, ["R"], [str(x.stride(0))], [str(y.stride(0))],
        "2", "1", "2", "1", "1", "0", "0", "float", True)
    driver = r"""
#include <cstdio>
#include <vector>
#include <sys/resource.h>
int main(int argc, char**) {
  std::vector<float> x(%(size)d, 1.0f), y(%(size)d);
  if (argc > 1) {  // the address space in use now, plus 1 MiB: less than the planes' 4 MiB
    rlimit limit{};
    FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || std::fscanf(f, "%%lu", &pages) != 1) return 3;
    std::fclose(f);
    limit.rlim_cur = limit.rlim_max = pages * 4096UL + (1UL << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) return 4;
  }
  try {
    k(x.data(), nullptr, y.data(), %(rows)d);
  } catch (const std::exception& e) {
    std::printf("caught: %%s\n", e.what());
    return 2;
  }
  std::printf("ran: %%g\n", static_cast<double>(y[0]));
  return 0;
}
""" % {"size": x.numel(), "rows": rows}
    source = tmp_path / "driver.cpp"
    source.write_text(pre + 'void k(const float* X, const float* WIN, float* Y, int64_t R) {\n' + body + "\n}\n"
                      + driver)
    program = tmp_path / "driver"
    subprocess.check_call([COMPILER, "-O1", "-march=native", "-fopenmp", str(source), "-o", str(program)])
    environment = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    free = subprocess.run([str(program)], env=environment, capture_output=True, text=True, timeout=120)
    assert free.returncode == 0 and free.stdout == f"ran: {n}\n", free  # all ones: X[0] = n
    limited = subprocess.run([str(program), "limit"], env=environment, capture_output=True, text=True, timeout=120)
    assert limited.returncode == 2, limited
    assert "caught: aotcuda::fft_rows_cpu: out of memory" in limited.stdout and "bytes of planes" in limited.stdout


WEIGHTED = {  # n, kind, inverse, in_len, out_len, scale: a weight multiplied into the loads (fft_cpu's `weight`)
    "c2r_32_m16": (32, "c2r", True, 17, 32, 1 / 32),  # the fused merge's one pair of transposes
    "c2r_36_m18": (36, "c2r", True, 19, 36, 1.0),  # the mirror chunks overlap: each point weighed once
    "c2r_96_few_bins": (96, "c2r", True, 30, 96, 1.0),  # the two-pass merge, zero-padded
    "c2r_100_more_bins": (100, "c2r", True, 60, 100, 1.0),  # bins past m + 1: two-pass, cropped
    "c2r_375_packed": (375, "c2r", True, 188, 375, 1 / 375),  # odd: two rows a complex row
    "c2r_4096_four_step": (4096, "c2r", True, 2049, 4096, 1 / 4096),
    "c2r_134_bluestein": (134, "c2r", True, 68, 134, 1.0),
    "c2c_400": (400, "c2c", True, 400, 400, 1 / 400),
    "c2c_96_padded_cropped": (96, "c2c", False, 90, 50, 1.0),
}


def _weighted_kernel(tmp_path, case, x, y, w, w_strides, uniform):
    """The kernel of a WEIGHTED case for x, y [R, length, 2] and the weight w [·, in_len, 2] (batch stride
    w_strides[0], "0" where one weight serves every row), built and loaded."""
    n, kind, inverse, in_len, out_len, scale = case
    weight = dict(strides=w_strides, wt=str(w.stride(-2)), wp=str(w.stride(-1)), offset="0", uniform=uniform)
    pre, body = fft_cpu_source.kernel_body(
        n, kind, inverse, in_len, out_len, scale, False, ["R"], [str(x.stride(0))], [str(y.stride(0))],
        str(x.stride(1)), str(x.stride(2)), str(y.stride(1)), str(y.stride(2)) if kind == "c2c" else "0", "1", "0",
        "0", "float", True, weight=weight)
    source = tmp_path / "kernel.cpp"
    source.write_text(pre + 'extern "C" void k(const float* X, const float* WIN, const float* WGT, float* Y, '
                      'int64_t R) {\n' + body + "\n}\n")
    library = tmp_path / "kernel.so"
    subprocess.check_call([COMPILER, "-O2", "-march=native", "-fno-tree-loop-vectorize", "-ffp-contract=off",
                           "-fopenmp", "-shared", "-fPIC", str(source), "-o", str(library)])
    return ctypes.CDLL(str(library)).k


@pytest.mark.parametrize("per_row", [False, True], ids=["one_weight", "a_weight_a_row"])
@pytest.mark.parametrize("planes", [False, True], ids=["interleaved", "planes"])
@pytest.mark.parametrize("case", WEIGHTED, ids=list(WEIGHTED))
def test_weight_multiplied_into_the_loads_matches_torch_fft(case, planes, per_row, tmp_path):
    """x times a complex weight (one for every row, or each row's own; interleaved, as the pass hands a filter's
    parameter) as the kernel loads it, then the transform: full blocks (the fused merge where it runs) and a
    partial one, x interleaved or as planes, against torch.fft of the product taken in float64."""
    n, kind, inverse, in_len, out_len, scale = WEIGHTED[case]
    rows = 21
    generator = torch.Generator().manual_seed(len(case) + 7 * per_row)

    def pair_tensor(length):
        return torch.empty(rows, 2, length).transpose(1, 2) if planes else torch.empty(rows, length, 2)

    x = pair_tensor(in_len)
    x.copy_(torch.randn(x.shape, generator=generator))
    y = pair_tensor(out_len) if kind == "c2c" else torch.empty(rows, out_len, 1)
    w = torch.randn(rows if per_row else 1, in_len, 2, generator=generator)
    strides = [str(w.stride(0))] if per_row else ["0"]
    kernel = _weighted_kernel(tmp_path, WEIGHTED[case], x, y, w, strides, not per_row)
    window = torch.zeros(1)
    kernel(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(window.data_ptr()), ctypes.c_void_p(w.data_ptr()),
           ctypes.c_void_p(y.data_ptr()), ctypes.c_int64(rows))
    product = torch.view_as_real(torch.view_as_complex(x.double().contiguous())
                                 * torch.view_as_complex(w.double().contiguous()))
    expected = transformed(product, 1, n, out_len, kind, inverse, scale)
    actual = (y if kind == "c2c" else y[..., 0]).double()
    error = ((actual - expected).norm() / expected.norm()).item()
    bluestein = bluestein_length(complex_length(n, kind)) is not None
    assert error <= (1e-7 * math.log2(n) if bluestein else 1e-6), error
