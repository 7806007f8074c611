import pickle

from aotcuda.pickle_count import count_pickle


def test_counts_calls_and_the_items_put_into_lists_and_dicts_not_tuples():
    assert count_pickle(pickle.dumps([1, 2, 3], 2), 100, 100).objects == 3
    assert count_pickle(pickle.dumps({"a": 1, "b": [2]}, 2), 100, 100).objects == 5  # keys, values, the item
    assert count_pickle(pickle.dumps((1, 2, (3, 4)), 2), 100, 100).objects == 0


def test_stops_at_a_bound_and_reads_no_further():
    data = pickle.dumps(list(range(1000)), 2)
    count = count_pickle(data, 10, 10_000)
    assert count.stopped and count.objects > 10 and count.opcodes < 1100
    assert count_pickle(data, 10_000, 5) == count_pickle(data, 10_000, 5) and count_pickle(data, 10_000, 5).stopped


def test_bytes_that_are_no_pickle_end_the_count_without_an_error():
    for data in (b"", b"\x80\x02]q\x00(K\x01", b"\xff\xff", b"\x80\x02e."):
        assert not count_pickle(data, 10, 10).stopped


def test_a_call_that_takes_a_mark_counts_once():
    # MARK, GLOBAL, OBJ builds one object (the weights-only unpickler refuses OBJ; the count still sees it)
    data = b"(c__main__\nX\no."
    assert count_pickle(data, 10, 10).objects == 1
