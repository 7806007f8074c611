"""Output slots that hold one result come back as one tensor object, as from eager (aotcuda.runtime.shared_results).

A new user's README-only trial (2026-12-07): `return out, out, k` gave two tensor objects over one memory where eager
gives `o[0] is o[1]`, though docs/usage.md says "slots that hold one result share one tensor": the generated code makes
a new handle per slot where the result is a view, and the complex boundary a view per slot.
"""

from __future__ import annotations

import itertools

import pytest
import torch

import aotcuda
from aotcuda.errors import PackageError
from runtime_programs import with_edited_signature


class OneResultInTwoSlots(torch.nn.Module):
    def forward(self, x):
        out = (x * 2).t()  # a view of the program's own buffer
        rows = (x + 1)[1:]  # another view, at an offset
        flat = x.view(-1)  # a view of the input
        k = x.sum(0)  # a buffer of its own (one handle: one object before the fix too)
        z = torch.view_as_complex(x.reshape(3, 2, 2)) * 1j  # complex: the caller's view of the pair
        return out, out, k, {"y": rows, "again": rows, "flat": flat}, flat, z, k, z


def _leaves(result):
    return torch.utils._pytree.tree_leaves(result)


@pytest.fixture(scope="module")
def shared_pt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("shared") / "shared.pt2"
    aotcuda.lower(OneResultInTwoSlots(), (torch.randn(3, 4),), device="cpu", package_path=path)
    return path


def test_slots_that_hold_one_result_are_one_tensor_object_as_in_eager(shared_pt2):
    program = aotcuda.load(shared_pt2)
    marks = [spec.get("same_result_as") for spec in program.signature["outputs"]]
    assert marks == [None, 0, None, None, 3, None, 5, None, 2, 7], marks
    for call in range(2):  # the second call repeats an accepted signature (accepted.py's fast path)
        x = torch.randn(3, 4)
        actual, expected = _leaves(program(x)), _leaves(OneResultInTwoSlots()(x))
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype and a.shape == e.shape and torch.equal(a, e)
        for i, j in itertools.combinations(range(len(expected)), 2):
            assert (actual[i] is actual[j]) == (expected[i] is expected[j]), (call, i, j)
        flat = program(x)[4]
        flat.add_(1)  # eager's flat is a view of x: the write reaches x
        torch.testing.assert_close(x.view(-1), flat)


def test_execute_into_caller_buffers_keeps_one_buffer_per_slot(shared_pt2):
    program = aotcuda.load(shared_pt2)
    x = torch.randn(3, 4)
    buffers = [torch.empty_like(t) for t in _leaves(OneResultInTwoSlots()(x))]
    results = program.execute([x], outputs=buffers)
    assert all(r is b for r, b in zip(results, buffers))
    for b, e in zip(buffers, _leaves(OneResultInTwoSlots()(x))):
        assert torch.equal(b, e)


@pytest.mark.parametrize("mark", [5, 1, "0", "another dtype", "a marked slot"])
def test_a_same_result_mark_that_is_not_an_earlier_output_of_its_kind_is_refused_at_load(twice_pt2, tmp_path, mark):
    """Twice returns y.detach() in slots 0 and 2 and x + 1 in slot 1, all (n, 4) float32 (its package, exported without
    lower()'s decompositions, keeps the two detach nodes: no mark). A mark pointing at its own slot or past it, not
    an int, at another dtype, or at a slot itself marked, is a damaged package, refused before any call hands out a
    tensor of another kind."""
    def edit(signature):
        if mark == "another dtype":
            signature["outputs"][1]["dtype"] = "float64"
            signature["outputs"][2]["same_result_as"] = 1
        elif mark == "a marked slot":
            signature["outputs"][1]["same_result_as"] = 0
            signature["outputs"][2]["same_result_as"] = 1
        else:
            signature["outputs"][1]["same_result_as"] = mark

    edited = with_edited_signature(twice_pt2, tmp_path / "edited.pt2", edit)
    with pytest.raises(PackageError, match=r"output #[12] is the result of output .*not an earlier output of the "
                                           r"same dtype.*lower the model again"):
        aotcuda.load(edited)
