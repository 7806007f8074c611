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
