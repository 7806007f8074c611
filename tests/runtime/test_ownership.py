"""The output-handle ownership rule, with fake handles and a counting release (no model, no GPU)."""

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aotcuda.runtime import ownership


class CountingRelease:
    def __init__(self, fail_on=()):
        self.count, self.fail_on = Counter(), set(fail_on)

    def __call__(self, handle):
        self.count[handle] += 1
        if handle in self.fail_on:
            raise RuntimeError(f"release of {handle} failed")


def assert_each_released_once(release, handles):
    assert release.count == Counter({h: 1 for h in handles if h}), release.count


@pytest.mark.parametrize(
    "handles, releasing",
    [
        ([1, 2, 3], [True, True, True]),
        ([1, 1, 2], [False, True, True]),  # adjacent repeat
        ([1, 2, 1], [False, True, True]),  # non-adjacent repeat: AOTI's `output_handles[2] = output_handles[0]`
        ([5, 5, 5], [False, False, True]),
        ([0, 1, None, 1, 0], [False, False, False, True, False]),  # null slots hold nothing
        ([None, None], [False, False]),
        ([], []),
    ],
)
def test_release_slots_picks_the_last_slot_of_each_handle(handles, releasing):
    assert ownership.release_slots(handles) == releasing


@pytest.mark.parametrize("handles", [[1, 2, 1], [1, 1, 2], [0, 3, 0, 3, 3], [7], [None, 0]])
def test_release_all_releases_each_distinct_handle_once(handles):
    release = CountingRelease()
    ownership.release_all(handles, release)
    assert_each_released_once(release, handles)


def test_release_all_releases_the_rest_when_one_release_fails():
    release = CountingRelease(fail_on={2})
    with pytest.raises(RuntimeError, match="release of 2 failed"):
        ownership.release_all([1, 2, 3, 1], release)
    assert_each_released_once(release, [1, 2, 3])


def test_take_slot_clears_every_slot_sharing_the_handle():
    handles = [1, 2, 1, 0]
    assert ownership.take_slot(handles, 0) == 1
    assert handles == [None, 2, None, 0]
    assert ownership.take_slot(handles, 3) is None


def test_error_after_some_slots_were_handed_on():
    """A copy loop hands on slot 0's handle, then fails at slot 1: the cleanup must not release the
    handed-on handle again (slot 2 held it too), and must release the rest once."""
    handles = [10, 20, 10, 30]
    handed_on = ownership.take_slot(handles, 0)
    release = CountingRelease()
    ownership.release_all(handles, release)
    assert handed_on == 10
    assert_each_released_once(release, [20, 30])


def test_adopt_all_adopts_each_handle_once_and_shares_it_between_slots():
    adopted_calls = []

    def adopt(distinct, record):
        adopted_calls.append(list(distinct))
        return [object() for _ in distinct]

    handles = [1, 2, 1, 0]
    objects = ownership.adopt_all(handles, adopt)
    assert sorted(adopted_calls[0]) == [1, 2] and len(adopted_calls) == 1
    assert objects[0] is objects[2] and objects[1] is not objects[0] and objects[3] is None
    assert handles == [None] * 4  # the objects own the handles now


def test_adopt_all_failure_leaves_the_handles_for_release_all():
    def adopt(distinct, record):
        raise MemoryError("no memory")

    handles = [1, 2, 1]
    with pytest.raises(MemoryError):
        ownership.adopt_all(handles, adopt)
    release = CountingRelease()
    ownership.release_all(handles, release)
    assert_each_released_once(release, [1, 2])


handle_lists = st.lists(st.one_of(st.none(), st.just(0), st.integers(1, 6)), max_size=12)


@given(handle_lists)
def test_property_every_handle_released_exactly_once(handles):
    release = CountingRelease()
    ownership.release_all(handles, release)
    assert_each_released_once(release, handles)
    plan = ownership.release_slots(handles)
    for slot, releases in enumerate(plan):
        if releases:  # no later slot holds the same handle
            assert handles[slot] not in handles[slot + 1:]


@given(handle_lists, st.data())
def test_property_handing_on_some_slots_then_cleaning_up(handles, data):
    """Any mix of handed-on slots and an error cleanup: each handle ends with exactly one owner."""
    original, handles = list(handles), list(handles)
    taken = Counter()
    for slot in data.draw(st.lists(st.integers(0, max(len(handles) - 1, 0)), max_size=5)):
        if slot < len(handles):
            handle = ownership.take_slot(handles, slot)
            if handle:
                taken[handle] += 1
    release = CountingRelease()
    ownership.release_all(handles, release)
    assert taken + release.count == Counter({h: 1 for h in original if h})
