"""aotcuda::row_product's Triton kernel against the plain-torch reference: on CUDA, and on the CPU in
Triton's interpreter where Triton is installed (float32 and float16; bfloat16 on CUDA only). Fresh random
rows and weights: one to sixteen rows, sizes that are no multiple of a block, a transposed weight (a linear
layer's), a bias; both forms of the kernel, the whole one and split-K (its slices summed by a second
kernel), the latter with a slice left empty."""

import importlib.util

import pytest
import torch

from aotcuda.kernels import row_product
from aotcuda.kernels.row_product import Plan
from comparisons import relative_error
from interpreted import run_code, run_interpreted

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
# (rows, K, N, bias, the weight as a transposed [N, K])
CASES = [(1, 2048, 3072, False, True), (8, 300, 70, True, True), (3, 130, 33, False, False),
         (16, 64, 16, True, False), (1, 8192, 512, False, True)]
# (rows, K, N, bias, transposed, plan): the split-K form with small blocks, so that the interpreter's sizes
# stay small. K = 200 in steps of 32 is 7 steps: slices of 3, 3 and 1 (the last step 8 deep); K = 70 in
# steps of 32 with 4 slices leaves the fourth empty (it writes zeros); 33 columns leave a block part-filled.
SPLIT_CASES = [(1, 200, 48, False, True, Plan(16, 32, 3, 4, 2)), (3, 200, 33, True, False, Plan(16, 32, 3, 4, 2)),
               (8, 70, 40, True, True, Plan(32, 32, 4, 4, 2)), (16, 300, 64, False, True, Plan(16, 64, 2, 4, 3)),
               (16, 257, 20, True, False, Plan(16, 16, 8, 4, 3))]


def _case(rows, k, n, bias, transposed, dtype, device):
    x = torch.randn(rows, k, dtype=dtype, device=device)
    w = torch.randn(n, k, dtype=dtype, device=device).t() if transposed else torch.randn(k, n, dtype=dtype, device=device)
    return x, w, (torch.randn(n, dtype=dtype, device=device) if bias else None)


def test_few_column_blocks_take_the_split_form():
    assert row_product.splits_wanted(2048, 8192, 132)  # w2
    assert row_product.splits_wanted(3072, 2048, 132)  # q/k/v
    assert not row_product.splits_wanted(16384, 2048, 132)  # w1/w3
    assert not row_product.splits_wanted(32000, 2048, 132)  # LM head
    assert not row_product.splits_wanted(2048, 128, 132)  # too shallow to cut
    assert all(plan.split_k > 1 for plan in row_product.SPLIT) and all(plan.split_k == 1 for plan in row_product.WHOLE)


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


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rows", [1, 8, 16])
@pytest.mark.parametrize("plan", row_product.SPLIT[:2] + row_product.WHOLE[:1], ids=str)
def test_each_form_on_cuda_matches_the_reference_and_repeats_its_bits(plan, rows, dtype):
    if not row_product.HAVE_TRITON:
        pytest.skip("Triton is not installed")
    torch.manual_seed(0)
    x, w, bias = _case(rows, 8192 + 40, 2048 + 8, True, True, dtype, "cuda")
    got = row_product.launch(x, w, bias, plan)
    assert relative_error(got, row_product.reference(x, w, bias)) < TOLERANCE[dtype]
    assert torch.equal(got, row_product.launch(x, w, bias, plan))  # slices summed in order: deterministic


def check_interpreted():
    """Each case in float32 and float16 through Triton's interpreter (run by interpreted.run_interpreted)."""
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        for case in CASES:
            x, w, bias = _case(*case, dtype, "cpu")
            error = relative_error(row_product.launch(x, w, bias), row_product.reference(x, w, bias))
            assert error < TOLERANCE[dtype], (case, dtype, error)
            print(case, dtype, f"{error:.1e}")
        for *case, plan in SPLIT_CASES:
            x, w, bias = _case(*case, dtype, "cpu")
            got = row_product.launch(x, w, bias, plan)
            assert got.shape == (x.shape[0], w.shape[1]) and got.dtype == dtype
            error = relative_error(got, row_product.reference(x, w, bias))
            assert error < TOLERANCE[dtype], (case, plan, dtype, error)
            print(case, plan, dtype, f"{error:.1e}")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_the_kernel_matches_the_reference_in_tritons_interpreter():
    assert len(run_interpreted("test_row_product_kernel")) == 2 * (len(CASES) + len(SPLIT_CASES))


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_element_offsets_past_two_to_the_31_are_not_wrapped(tmp_path):
    # A weight whose columns lie 2**27 elements apart (a view of a sparse file, no memory for the gaps):
    # column · stride passes 2**31, which an int32 offset wraps to a negative address. Both forms.
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
        want = row_product.reference(x, w, None)
        for plan in (None, row_product.Plan(16, 16, 2, 4, 2)):
            got = row_product.launch(x, w, None, plan)
            assert ((got.float() - want.float()).norm() / want.float().norm()).item() < 2e-3, plan
    """)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_a_strided_bias_and_a_float32_x_on_a_half_weight_in_the_interpreter():
    # Both kernels read the bias as contiguous (bias + n): a bias sliced with a step (stride 2) was read
    # from the wrong elements. A float32 x was rounded to the weight's float16 before the product (x.to(w's
    # dtype)): a relative error of 2e-4 on a float32 result. Both forms.
    run_code('''
        import torch
        from aotcuda.kernels import row_product
        torch.manual_seed(0)
        x, w, bias = torch.randn(3, 70), torch.randn(70, 40), torch.randn(80)[::2]
        half = torch.randn(70, 40, dtype=torch.float16)
        for plan in (row_product.Plan(32, 32, 1, 4, 2), row_product.Plan(16, 32, 3, 4, 2)):
            for args in ((x, w, bias), (x, half, None), (x, half, bias)):
                got, want = row_product.launch(*args, plan), row_product.reference(*args)
                error = ((got - want).norm() / want.norm()).item()
                assert got.dtype == torch.float32 and error < 1e-5, (plan, args[1].dtype, args[2] is None, error)
    ''')


def test_bad_shapes_are_refused_by_name_on_the_cpu():
    with pytest.raises(ValueError, match=r"x \[M, K\] and w \[K, N\] expected"):
        torch.ops.aotcuda.row_product(torch.randn(2, 8), torch.randn(9, 4), None)
    with pytest.raises(ValueError, match=r"bias must be \[N\] = \[4\]"):
        torch.ops.aotcuda.row_product(torch.randn(2, 8), torch.randn(8, 4), torch.randn(5))
