"""Caller output buffers that share memory with each other or with an input are refused (issue 12, item 5).

Each result is copied into its buffer in turn, so two overlapping buffers leave the first result
overwritten by the second, and a buffer over an input changes what later reads of that input see.
Interleaved views of one storage share no element and are accepted. ``shares_memory`` is checked
directly on a table of views; the Program on the Twice package (outputs 2x, x+1, 2x).
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from runtime_programs import Twice

import aotcuda
from aotcuda.errors import OutputError
from aotcuda.runtime import checks
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


@pytest.fixture(params=["mask", "addresses"])
def exact_way(request, monkeypatch):
    """Each table through both exact comparisons: the scratch mask, and the elements' addresses (taken where the
    ranges span more than the addresses would take; forced here, in chunks of 3 elements)."""
    if request.param == "addresses":
        monkeypatch.setattr(checks, "_ADDRESS_BYTES", 0)
        monkeypatch.setattr(checks, "_CHUNK", 3)
    return request.param


@pytest.mark.parametrize("kind", list(SHARING))
def test_views_that_share_an_element_are_found(kind, exact_way):
    a, b = SHARING[kind]
    assert shares_memory(a, b) and shares_memory(b, a)


@pytest.mark.parametrize("kind", list(APART))
def test_views_apart_are_not_confused(kind, exact_way):
    a, b = APART[kind]
    assert not shares_memory(a, b) and not shares_memory(b, a)


def test_elements_overlap_answers_as_counting_every_address_does():
    """checks.elements_overlap (break42b), against the set of every element's offset, on random small layouts: strides
    that torch's own check calls "too hard", ones that overlap, interleave apart, or hold a dim of 1 or 0."""
    import itertools
    import random

    rng = random.Random(42)
    for _ in range(400):
        rank = rng.randint(1, 3)
        shape = tuple(rng.choice([0, 1, 2, 3, 4, 5]) for _ in range(rank))
        strides = tuple(rng.randint(0, 7) for _ in range(rank))
        span = sum(max(size - 1, 0) * stride for size, stride in zip(shape, strides)) + 1
        tensor = torch.empty(span).as_strided(shape, strides)
        offsets = [sum(i * s for i, s in zip(index, strides)) for index in itertools.product(*map(range, shape))]
        assert checks.elements_overlap(tensor) == (len(set(offsets)) < len(offsets)), (shape, strides)


def test_elements_overlap_of_strides_up_to_a_trillion_answers_as_counting_every_address_does():
    """elements_overlap (overlap42) on random layouts whose strides mix small ones (a mask of the span) with ones up to
    10**12 (the span far past the elements: their offsets sorted), against the set of every offset; meta tensors, so
    that no span is allocated."""
    import itertools
    import random

    rng = random.Random(4242)
    for _ in range(400):
        rank = rng.randint(1, 4)
        shape = tuple(rng.choice([1, 2, 3, 4]) for _ in range(rank))
        strides = tuple(rng.choice([rng.randint(0, 7), rng.randint(0, 10**12)]) for _ in range(rank))
        if rng.random() < 0.3 and rank > 1:  # one stride the sum of others: elements at one address, far apart
            strides = strides[:-1] + (strides[0] * rng.randint(1, 3),)
        tensor = torch.empty_strided(shape, strides, device="meta")
        offsets = [sum(i * s for i, s in zip(index, strides)) for index in itertools.product(*map(range, shape))]
        assert checks.elements_overlap(tensor) == (len(set(offsets)) < len(offsets)), (shape, strides)


def test_elements_overlap_keeps_its_scratch_on_the_cpu_whatever_the_default_device():
    """Under torch.set_default_device("meta") the check's scratch tensors went to meta: a raw RuntimeError (.item() of
    a meta tensor) for a CPU buffer of interleaved strides (overlap42, 2026-12-07); on CUDA a device sync."""
    getattr(checks, "_layout_overlaps", None) and checks._layout_overlaps.cache_clear()  # an answer made on the CPU
    torch.set_default_device("meta")
    try:
        apart = torch.empty(32, device="cpu").as_strided((5, 4), (4, 5))
        meets = torch.empty(32, device="cpu").as_strided((4, 4), (2, 1))
        # offsets sorted, no mask
        far = torch.empty_strided((3, 2), (10**6 + 1, 2 * 10**6), dtype=torch.uint8, device="cpu")
        found = checks.elements_overlap(apart), checks.elements_overlap(meets), checks.elements_overlap(far)
    finally:
        torch.set_default_device(None)
    assert found == (False, True, False)


def test_elements_overlap_costs_memory_in_proportion_to_the_elements_not_the_span():
    """Six elements strided over 2**31 bytes of a storage the caller had not touched: the check marked the span in a
    mask and summed it into int64, 9 bytes a byte of the span: a raw RuntimeError from the allocator (17 GB), where
    2**28 bytes took 4.6 s and 2.3 GB (overlap42, 2026-12-07). In a child, so that its peak memory is its own: both
    answers (elements at one address, and apart) must cost almost nothing, and the overlap is an OutputError."""
    code = textwrap.dedent("""
        import resource, torch
        from aotcuda.errors import OutputError
        from aotcuda.runtime.checks import check_caller_outputs, elements_overlap
        n = 2**30
        storage = torch.empty(2 * n + 3, dtype=torch.uint8)  # untouched: address space, no resident memory
        meets = storage.as_strided((3, 2), (n // 2, n))  # offsets 0, n/2, n, n, 3n/2, 2n
        apart = storage.as_strided((3, 2), (n // 2 + 1, n))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            check_caller_outputs([meets], None, {}, torch.device("cpu"), 1)
            refused = "ran"
        except OutputError as error:
            refused = "OutputError"
        found = elements_overlap(meets), elements_overlap(apart)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(refused, *found, grown // 1024)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert child.returncode == 0, child.stderr[-2000:]
    refused, meets, apart, grown_mib = child.stdout.split()
    assert (refused, meets, apart) == ("OutputError", "True", "False")
    assert int(grown_mib) < 64, f"the check grew the process by {grown_mib} MiB"


def test_a_few_columns_of_a_large_table_are_compared_without_a_mask_of_the_table():
    """Output buffers that are column blocks of one large table (a caller's preallocated results) share no
    element, but their byte ranges span the table: the check made a scratch mask of the table's size and filled it,
    4 GiB and 11 s for three (5, 4) blocks of a (5, 2**28) table whose memory the caller had not touched (the
    breaker, 2026-12-06). In a child, so that its peak memory is its own: a (5, 2**26) table, 1.25 GiB of address
    space, must cost the check almost nothing."""
    code = textwrap.dedent("""
        import resource, torch
        from aotcuda.runtime.checks import check_caller_outputs, shares_memory
        table = torch.empty(5, 2**26)  # untouched: address space, no resident memory
        blocks = [table[:, 0:4], table[:, 4:8], table[:, 8:12]]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        check_caller_outputs(blocks, None, {}, torch.device("cpu"), 3, inputs=[table[:, 12:16]], input_names=["x"])
        found = shares_memory(table[:, 0:4], table[:, 3:7]), shares_memory(table[:, 0:4], table[4, 2:3])
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(*found, grown // 1024)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert child.returncode == 0, child.stderr[-2000:]
    first, second, grown_mib = child.stdout.split()
    assert (first, second) == ("True", "True")  # overlapping columns, and a column holding an element of a block
    assert int(grown_mib) < 64, f"the check grew the process by {grown_mib} MiB"


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


@pytest.mark.parametrize("changed_only", [False, True])
def test_inputs_whose_elements_overlap_through_strides_are_not_copied_back_over_themselves(changed_only):
    """copies_back skipped an input whose elements share memory only for a stride of 0: for a package that does not
    say which inputs it writes, a written copy of ``as_strided((4, 4), (1, 1))`` was copied back over itself, each
    element of the caller's memory left with whichever write came last (overlap42, 2026-12-07). It skips them by the
    rule check_mutated_inputs refuses them by (``elements_overlap``); inputs whose elements lie apart are copied
    back."""
    storage = torch.randn(48)
    kept = storage.clone()
    overlapping = storage[:7].as_strided((4, 4), (1, 1))
    apart = storage[8:].as_strided((5, 4), (4, 5))
    copies = [overlapping.contiguous(), apart.contiguous()]
    back = checks.copies_back([overlapping, apart], copies, [0, 1], changed_only=changed_only)
    written = [torch.randn(4, 4), torch.randn(5, 4)]
    for copy, value in zip(copies, written):
        copy.copy_(value)  # what the program writes
    list(back or ())
    assert torch.equal(storage[:8], kept[:8])  # the overlapping input as it was, not a copy over itself
    assert torch.equal(apart, written[1])


@pytest.mark.parametrize("strides", [(0, 1), (1, 1)])
def test_the_refusal_of_an_overlapping_written_input_says_what_eager_does_with_each_layout(strides):
    """The message said "pass tensor.clone(), as eager refuses it too (a stride of 0)", which read as if eager refused
    strides (1, 1) as well: it writes them, in an order of its own (overlap42, 2026-12-07)."""
    from aotcuda.errors import InputError

    cache = torch.zeros(20).as_strided((4, 4), strides)
    with pytest.raises(InputError, match=r"elements share memory .* pass tensor\.clone\(\) \(eager refuses a stride "
                                         r"of 0, and writes other overlapping strides in an order of its own\)$"):
        checks.check_mutated_inputs([cache], frozenset({0}), None, ["cache"])
