"""aotcuda::row_product's Triton kernel against the plain-torch reference: on CUDA, and on the CPU in
Triton's interpreter where Triton is installed (float32 and float16; bfloat16 on CUDA only). Fresh random
rows and weights: one to sixteen rows, sizes that are no multiple of a block, a transposed weight (a linear
layer's), a bias."""

import importlib.util

import pytest
import torch

from aotcuda.kernels import row_product
from comparisons import relative_error
from interpreted import run_code, run_interpreted

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
# (rows, K, N, bias, the weight as a transposed [N, K])
CASES = [(1, 2048, 3072, False, True), (8, 300, 70, True, True), (3, 130, 33, False, False),
         (16, 64, 16, True, False), (1, 8192, 512, False, True)]


def _case(rows, k, n, bias, transposed, dtype, device):
    x = torch.randn(rows, k, dtype=dtype, device=device)
    w = torch.randn(n, k, dtype=dtype, device=device).t() if transposed else torch.randn(k, n, dtype=dtype, device=device)
    return x, w, (torch.randn(n, dtype=dtype, device=device) if bias else None)



@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_the_cuda_kernel_matches_the_reference(case, dtype):
    if not row_product.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(0)
    x, w, bias = _case(*case, dtype, "cuda")
    got = torch.ops.aotcuda.row_product(x, w, bias)
    assert got.shape == (x.shape[0], w.shape[1]) and got.dtype == dtype
    assert relative_error(got, row_product.reference(x, w, bias)) < TOLERANCE[dtype]


def check_interpreted():
    """Each case in float32 and float16 through Triton's interpreter (run by interpreted.run_interpreted)."""
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        for case in CASES:
            x, w, bias = _case(*case, dtype, "cpu")
            error = relative_error(row_product.launch(x, w, bias), row_product.reference(x, w, bias))
            assert error < TOLERANCE[dtype], (case, dtype, error)
            print(case, dtype, f"{error:.1e}")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_the_kernel_matches_the_reference_in_tritons_interpreter():
    assert len(run_interpreted("test_row_product_kernel")) == 2 * len(CASES)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_element_offsets_past_two_to_the_31_are_not_wrapped(tmp_path):
    # A weight whose columns lie 2**27 elements apart (a view of a sparse file, no memory for the gaps):
    # column · stride passes 2**31, which an int32 offset wraps to a negative address.
    run_code(f"""
        import torch
        from aotcuda.kernels import row_product
        elements = 2 ** 32
        with open({str(tmp_path / "weight.bin")!r}, "wb") as f:
            f.truncate(elements * 2)
        storage = torch.from_file({str(tmp_path / "weight.bin")!r}, shared=True, size=elements, dtype=torch.float16)
        w = storage.as_strided((64, 20), (1, 2 ** 27 + 64))
        torch.manual_seed(0)
        w.copy_(torch.randn(64, 20, dtype=torch.float16))
        x = torch.randn(2, 64, dtype=torch.float16)
        got, want = row_product.launch(x, w, None), row_product.reference(x, w, None)
        assert ((got.float() - want.float()).norm() / want.float().norm()).item() < 2e-3
    """)
