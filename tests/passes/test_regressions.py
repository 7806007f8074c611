"""Failures the property-based tests (test_properties.py) found, one named test each, with what went wrong."""

import pytest
import torch

from program_gen import Input, Program, Raw, Ref, Step
from test_properties import check_program

aten = torch.ops.aten


def scatter_of_wider_real_source(op, extra) -> Program:
    """op(complex64 destination [1], float64 source, *extra): the source is wider than the destination."""
    source_shape = () if op is aten.select_scatter.default else (1,)
    return Program([Input("view_as_complex", (Raw((1, 2), torch.float32),)),
                    Input("real", (Raw(source_shape, torch.float64),)),
                    Step(op, (Ref(0), Ref(1), *extra), {}, "view_as_real")], [])


@pytest.mark.parametrize("op, extra", [(aten.select_scatter.default, (0, 0)),
                                       (aten.slice_scatter.default, (0, 0, 1, 1))])
def test_scatter_of_a_wider_real_source_keeps_the_destination_dtype(op, extra):
    """Found: select_scatter(complex64, float64 source) came out complex128 after the default
    decompositions. Not the pass: torch decomposes select_scatter into where(mask, src, self), which
    promotes, while eager keeps self's dtype, and the pass faithfully rewrote the complex128 `where`.
    The pass's own rules keep the destination dtype; this checks them with the ops kept whole."""
    check_program(scatter_of_wider_real_source(op, extra), pipeline="rules_kept")


@pytest.mark.parametrize("op, args", [(aten.squeeze.dims, ([-1],)), (aten.squeeze.dim, (0,)),
                                      (aten.flip.default, ([-1],)), (aten.transpose.int, (0, -1))])
def test_dim_ops_on_a_complex_scalar_leave_it_unchanged(op, args):
    """Found: squeeze.dims([-1]) of a 0-dim complex tensor raised IndexError in the pass: the shape
    mechanism mapped dim -1 to -2, which does not exist on the pair [2]. On a 0-dim tensor eager takes
    dim 0 / -1 for squeeze, flip and transpose and returns the values unchanged; so does the rule now."""
    check_program(Program([Input("view_as_complex", (Raw((2,), torch.float32),)),
                           Step(op, (Ref(0), *args), {}, "view_as_real")], []), pipeline="rules_kept")


def test_view_of_a_result_laid_out_unlike_eager():
    """Found (soak run): _fft_r2c over dims [0, 1] (two-sided) of a real [2, 2, 1], then reshape to [4].
    Eager's FFT result is contiguous, so export turned the reshape into a view; the DFT rule's result
    has its dims moved back after a matmul (strides (2, 4, 4, 1) as a pair), where no view to [4, 2]
    exists, and the view rule raised. In the functional graph a view may copy: the rule now reshapes,
    which is still a view wherever one exists."""
    check_program(Program([Input("real", (Raw((2, 2, 1), torch.float32),)),
                           Step(aten._fft_r2c.default, (Ref(0), [0, 1], 0, False), {}, "view_as_real"),
                           Step(aten.reshape.default, (Ref(1), [4]), {}, "view_as_real")], []), pipeline="default")
