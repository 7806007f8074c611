"""A real-input transform of dynamic length on the CPU (Bluestein in aotcuda::fft_rows_cpu, a Dim max above 64) runs
two real rows as one complex row where x has a batch dim of static size above 1 (spectral/dynamic.py,
_two_rows_at_once): the kernels transform half the rows. Each side of that choice against eager torch.fft on fresh
random inputs: an even static batch dim (no padding), an odd one (one row padded), the batch dim before and after
the transformed dim, a dynamic batch dim beside a static one, and the forms left as they were (8 static rows or
fewer, which fill one of the kernel's 8-row blocks paired or not; only dynamic batch dims; no batch dim; a max of
the direct form). Error: ‖actual − eager‖ / ‖eager‖ ≤ 1e-5 (float32; Bluestein's
error here is 1–3e-7 at every length tried, flat in the length)."""

import pytest
import torch

from aotcuda.kernels import fft_cpu  # noqa: F401  (registers aotcuda::fft_rows_cpu, which _kernel_batches names)
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import assert_no_complex, export

Dim = torch.export.Dim
RTOL = 1e-5


class Rfft(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.view_as_real(torch.fft.rfft(x, dim=self.dim, norm="ortho"))


class FftOfReal(torch.nn.Module):
    """fft of a real x (an r2c of every bin, not one-sided) along its last dim."""

    def forward(self, x):
        return torch.view_as_real(torch.fft.fft(x))


def _kernel_batches(program) -> list[tuple]:
    """The batch dims (the transformed dim and the pair's 2 left out; None where dynamic) of the input of each
    aotcuda::fft_rows_cpu op of the program."""
    batches = []
    for node in program.graph.nodes:
        if node.target is torch.ops.aotcuda.fft_rows_cpu.default:
            x, dim = node.args[0].meta["val"], node.args[1]
            batches.append(tuple(s if isinstance(s, int) else None for d, s in enumerate(x.shape[:-1]) if d != dim))
    return batches


def _relative_error(actual, expected) -> float:
    return ((actual - expected).norm() / expected.norm()).item()


# name: (module, example shape, dynamic dims, lengths tried at the transformed dim, row counts tried at a dynamic
# dim 0, the batch dims of each kernel's input: half of one static batch dim where two real rows go as one)
CASES = {
    "even_batch_dim_before": (Rfft(1), (6, 80, 3), {1: Dim("n", min=2, max=100)}, [100, 71, 3, 2], [], (3, 3)),
    "odd_batch_dim_padded": (Rfft(1), (9, 80), {1: Dim("n", min=2, max=100)}, [100, 99, 3, 2], [], (5,)),
    "eight_rows_one_block_either_way": (Rfft(1), (8, 80), {1: Dim("n", min=2, max=100)}, [100, 51], [], (8,)),
    "batch_dims_both_sides": (Rfft(1), (3, 80, 4), {1: Dim("n", min=2, max=200)}, [200, 131, 65, 2], [], (3, 2)),
    "dynamic_and_static_batch_dims": (FftOfReal(), (5, 4, 80),
                                      {0: Dim("b", min=1, max=16), 2: Dim("n", min=2, max=100)},
                                      [100, 67, 9, 2], [1, 7], (None, 2)),
    "only_a_dynamic_batch_dim": (FftOfReal(), (4, 80), {0: Dim("b", min=1, max=16), 1: Dim("n", min=2, max=100)},
                                 [100, 33], [1, 2, 3], (None,)),
    "no_batch_dim": (FftOfReal(), (80,), {0: Dim("n", min=2, max=100)}, [100, 77], [], ()),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_dynamic_real_transform_pairs_rows_where_a_static_batch_dim_allows_against_eager(case):
    module, shape, dims, lengths, row_counts, kernel_batch = CASES[case]
    ep = export(module, (torch.randn(*shape),), dynamic_shapes=(dims,))
    with pytest.warns(UserWarning, match="Bluestein"):
        new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert _kernel_batches(new) == [kernel_batch] * 2  # the forward and the inverse transform
    n_dim = next(d for d, dim in dims.items() if dim.__name__ == "n")
    for length in lengths:
        for rows in row_counts or [shape[0]]:
            fresh = [length if d == n_dim else rows if d == 0 else size for d, size in enumerate(shape)]
            x = torch.randn(*fresh)
            error = _relative_error(new.module()(x), module(x))
            assert error <= RTOL, f"{case}: shape {fresh}, relative error {error:.2e}"


def test_the_direct_form_of_a_small_max_is_left_as_it_was():
    """A max ≤ 64 (the direct form: one DFT product, no aotcuda kernel) pairs no rows."""
    module = Rfft(1)
    ep = export(module, (torch.randn(6, 40, 3),), dynamic_shapes=({1: Dim("n", min=2, max=48)},))
    with pytest.warns(UserWarning):
        new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert _kernel_batches(new) == []
    for length in (48, 17):
        x = torch.randn(6, length, 3)
        assert _relative_error(new.module()(x), module(x)) <= RTOL


def test_two_rows_at_once_compiled_against_eager():
    """The paired form through Inductor (the C++ kernel at m = 200, the split fused by Inductor), odd and even
    lengths, one compile."""
    module = Rfft(1)
    ep = export(module, (torch.randn(5, 80, 2),), dynamic_shapes=({1: Dim("n", min=2, max=100)},))
    with pytest.warns(UserWarning, match="Bluestein"):
        compiled = torch.compile(ReplaceComplexWithRealPass(strict=True)(ep).module(), dynamic=True)
    with torch.no_grad():
        for length in (100, 61, 3):
            x = torch.randn(5, length, 2)
            error = _relative_error(compiled(x), module(x))
            assert error <= RTOL, f"n={length}: relative error {error:.2e}"


class Irfft(torch.nn.Module):
    """irfft along dim 1 of a half spectrum h (a pair), to the length of x's dim 1 (dynamic), ortho."""

    def forward(self, h, x):
        return torch.fft.irfft(torch.view_as_complex(h), n=x.shape[1], dim=1, norm="ortho")


# name: (h's example shape, (bins, n) tried, the batch dims of each kernel's input)
C2R_CASES = {
    "odd_batch_dim_padded": ((9, 51, 3, 2), [(51, 100), (30, 59), (2, 3)], (9, 2)),
    "even_batch_dim": ((16, 51, 2), [(51, 100), (51, 101), (30, 59)], (8,)),
    "eight_rows_one_block_either_way": ((8, 51, 2), [(51, 100), (30, 59)], (8,)),
}


@pytest.mark.parametrize("case", list(C2R_CASES))
def test_a_dynamic_c2r_pairs_spectra_where_a_static_batch_dim_allows_against_eager(case):
    """The c2r side: two Hermitian spectra as one row X1 + i·X2 (_two_spectra_at_once), their bin-0 and bin-n/2
    imaginary parts (which a c2r drops) zeroed first: fresh random half spectra have them, and without that they
    landed in the other row (a relative error of 8e-2 at n = 100)."""
    shape, tried, kernel_batch = C2R_CASES[case]
    module = Irfft()
    bins, n = Dim("bins", min=2, max=101), Dim("n", min=3, max=200)
    ep = export(module, (torch.randn(*shape), torch.randn(1, 100)), dynamic_shapes=({1: bins}, {1: n}))
    with pytest.warns(UserWarning, match="Bluestein"):
        new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert _kernel_batches(new) == [kernel_batch] * 2
    for half, length in tried:
        h = torch.randn(shape[0], half, *shape[2:])
        x = torch.randn(1, length)
        error = _relative_error(new.module()(h, x), module(h, x))
        assert error <= RTOL, f"{case}: bins {half}, n {length}, relative error {error:.2e}"
