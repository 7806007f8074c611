"""Caller output buffers that share memory with each other or with an input are refused (issue 12, item 5).

Each result is copied into its buffer in turn, so two overlapping buffers leave the first result
overwritten by the second, and a buffer over an input changes what later reads of that input see.
Interleaved views of one storage share no element and are accepted. ``shares_memory`` is checked
directly on a table of views; the Program on the Twice package (outputs 2x, x+1, 2x).
"""

import pytest
import torch
from runtime_programs import Twice

import aotcuda
from aotcuda.errors import OutputError
from aotcuda.runtime.checks import shares_memory

BASE = torch.zeros(6, 8)
SHARING = {
    "same tensor": (BASE, BASE),
    "two views of all of it": (BASE, BASE.view(8, 6)),
    "overlapping row slices": (BASE[:4], BASE[2:]),
    "a column inside a block": (BASE[:, 3], BASE[1:3, 2:5]),
    "transposed views": (BASE, BASE.t()),
    "another dtype over the same bytes": (BASE, BASE.view(torch.int32)),
    "one byte in common": (BASE.view(torch.uint8)[0, :5], BASE.view(torch.uint8)[0, 4:9]),
}
APART = {
    "different tensors": (BASE, torch.zeros(6, 8)),
    "adjacent row slices": (BASE[:3], BASE[3:]),
    "interleaved columns": (BASE[:, ::2], BASE[:, 1::2]),
    "interleaved rows of a transpose": (BASE.t()[::2], BASE.t()[1::2]),
    "empty slice": (BASE, BASE[:0]),
}


@pytest.mark.parametrize("kind", list(SHARING))
def test_views_that_share_an_element_are_found(kind):
    a, b = SHARING[kind]
    assert shares_memory(a, b) and shares_memory(b, a)


@pytest.mark.parametrize("kind", list(APART))
def test_views_apart_are_not_confused(kind):
    a, b = APART[kind]
    assert not shares_memory(a, b) and not shares_memory(b, a)


@pytest.fixture(scope="module")
def program(twice_pt2):
    with aotcuda.load(twice_pt2) as loaded:
        yield loaded


def _eager(x):
    return [t.clone() for t in Twice()(x)]


def _buffers(kind, x):
    """Three output buffers of shape (5, 4), arranged as the kind says."""
    storage = torch.zeros(40)
    if kind == "one tensor twice":
        a = torch.empty(5, 4)
        return [a, torch.empty(5, 4), a], r"output buffer #2 is the same tensor as output buffer #0"
    if kind == "views of one storage that overlap":
        return [storage[:20].view(5, 4), storage[10:30].view(5, 4), torch.empty(5, 4)], \
            r"output buffer #1 shares memory with output buffer #0"
    if kind == "partially overlapping slices":
        return [torch.empty(5, 4), storage[:20].view(5, 4), storage[19:39].view(5, 4)], \
            r"output buffer #2 shares memory with output buffer #1"
    if kind == "output is the input":
        return [x, torch.empty(5, 4), torch.empty(5, 4)], r"output buffer #0 shares memory with input 'x' \(#0\)"
    if kind == "output is a view of the input":
        return [torch.empty(5, 4), torch.empty(5, 4), x.t().t()], r"output buffer #2 shares memory with input 'x'"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["one tensor twice", "views of one storage that overlap",
                                  "partially overlapping slices", "output is the input",
                                  "output is a view of the input"])
def test_overlapping_output_buffers_are_refused(program, kind):
    x = torch.randn(5, 4)
    before = x.clone()
    buffers, message = _buffers(kind, x)
    with pytest.raises(OutputError, match=message):
        program.execute([x], outputs=buffers)
    assert torch.equal(x, before)  # refused before running: nothing was written
    outputs = program.execute([x], outputs=[torch.empty(5, 4) for _ in range(3)])
    for got, want in zip(outputs, _eager(x)):
        torch.testing.assert_close(got, want)


def test_interleaved_views_of_one_storage_are_accepted(program):
    x = torch.randn(5, 4)
    storage = torch.zeros(5, 4, 3)
    buffers = [storage[..., 0], storage[..., 1], storage[..., 2]]
    outputs = program.execute([x], outputs=buffers)
    assert all(out is buf for out, buf in zip(outputs, buffers))
    for got, want in zip(outputs, _eager(x)):
        torch.testing.assert_close(got, want)
    rows = torch.zeros(15, 4)  # adjacent row blocks of one tensor
    program.execute([x], outputs=[rows[:5], rows[5:10], rows[10:]])
    torch.testing.assert_close(rows, torch.cat(_eager(x)))
