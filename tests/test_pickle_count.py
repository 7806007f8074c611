import io
import pickle
import pickletools
import zipfile

from aotcuda.pickle_count import count_pickle


def _opcodes(data: bytes) -> list[str]:
    return [op.name for op, _, _ in pickletools.genops(data)]


def test_counts_containers_items_calls_and_memo_entries():
    data = pickle.dumps([1, 2, 3], 2)  # PROTO EMPTY_LIST BINPUT MARK BININT1 x3 APPENDS STOP
    assert _opcodes(data)[1:4] == ["EMPTY_LIST", "BINPUT", "MARK"]
    count = count_pickle(data, 100, 100)
    assert (count.objects, count.calls, count.hashed) == (6, 0, 0)  # the list, its memo entry, the mark's list, 3 items
    # a tuple and its memo entry (its items are not put into anything)
    assert count_pickle(pickle.dumps((1, 2), 2), 100, 100).objects == 2
    # a call: REDUCE counts as a call and an object
    count = count_pickle(pickle.dumps(complex(1, 2), 2), 100, 100)
    assert count.calls == 1 and count.objects >= 2


def test_empty_containers_and_memo_entries_are_counted():
    """Breaker, review 7: 6.3M EMPTY_SETs (or MARK + EMPTY_LIST pairs) built nothing counted: 1.6 GB."""
    assert count_pickle(b"\x80\x02" + b"]" * 1000 + b".", 100, 10_000).stopped
    assert count_pickle(b"\x80\x02" + b"(]" * 500 + b".", 100, 10_000).stopped
    assert count_pickle(b"\x80\x02N" + b"q\x01" * 1000 + b".", 100, 10_000).stopped  # BINPUT after BINPUT


def test_what_hashes_items_outside_setitems_is_refused():
    """Sets (their opcodes, or the global ``set`` called on a list: protocol 2), Counters, and an OrderedDict
    called with items (pickle itself writes ``OrderedDict()`` and SETITEMS, where the keys are counted)."""
    import collections

    for value, protocol in (({1, 2}, 4), (frozenset({1}), 4), ({1, 2}, 2), (frozenset({1}), 2)):
        assert count_pickle(pickle.dumps(value, protocol), 100, 100).refused == "a set"
    assert count_pickle(pickle.dumps(collections.Counter("ab"), 2), 100, 100).refused == "a Counter"
    ordered = pickle.dumps(collections.OrderedDict([(1, 2), (3, 4)]), 2)
    count = count_pickle(ordered, 100, 100)
    assert count.refused is None and count.hashed == 2
    called = b"\x80\x02ccollections\nOrderedDict\nq\x00]q\x01(K\x01K\x02\x86K\x03K\x04\x86e\x85R."
    assert pickle.loads(called) == collections.OrderedDict([(1, 2), (3, 4)])
    assert count_pickle(called, 100, 100).refused == "an OrderedDict built from items by its call"
    through_memo = b"\x80\x02ccollections\nOrderedDict\nq\x000h\x00]q\x01(K\x01K\x02\x86e\x85R."
    assert count_pickle(through_memo, 100, 100).refused == "an OrderedDict built from items by its call"



def test_globals_named_by_their_python_2_modules_are_refused_as_torch_reads_them():
    """The breaker (2026-12-05): torch's weights-only unpickler maps a GLOBAL's module through pickle's Python 2
    table (``_compat_pickle.IMPORT_MAPPING``: ``UserDict``, ``UserList`` and ``UserString`` are ``collections``),
    so ``UserDict Counter`` is the Counter it allows and calls, while the count compared the name as written and
    let it through: a 240 KB inputs file of 20,000 int keys that hash alike, counted into ``UserDict Counter``,
    held `aotcuda run` 4.5 s in torch.load (100,000: minutes; quadratic)."""
    import collections

    from torch._weights_only_unpickler import _read_global_instruction

    for module in ("UserDict", "UserList", "UserString"):
        called = b"\x80\x02c" + module.encode() + b"\nCounter\n]K\x01a\x85R."
        assert pickle.loads(called) == collections.Counter([1])  # pickle reads it so too (fix_imports)
        assert _read_global_instruction(io.BytesIO(module.encode() + b"\nCounter\n").readline) == \
            ("collections", "Counter")
        assert count_pickle(called, 100, 100).refused == "a Counter"
    aliased = b"\x80\x02cUserDict\nOrderedDict\n]K\x01K\x02\x86a\x85R."
    assert pickle.loads(aliased) == collections.OrderedDict([(1, 2)])
    assert count_pickle(aliased, 100, 100).refused == "an OrderedDict built from items by its call"
    assert count_pickle(b"\x80\x02c__builtin__\nset\n]K\x01a\x85R.", 100, 100).refused == "a set"
    assert count_pickle(pickle.dumps(collections.OrderedDict([(1, 2)]), 2), 100, 100).refused is None


def test_calls_that_build_what_their_arguments_size_are_refused():
    """The breaker (2026-12-05): torch's weights-only unpickler calls bytearray, _codecs.encode, legacy tensor
    constructors, storage types and _rebuild_device_tensor_from_cpu_tensor, none of which torch.save writes for
    inputs, and each builds what its arguments size, not what the file holds: an 837-byte inputs file of
    ``bytearray(2**30)`` took `aotcuda run` to 1.3 GB (three: 3.4 GB), 1.7 KB of ``.to(float64)`` of an expanded view
    2.3 GB, all before the checks that follow torch.load."""
    import io as bytes_io

    import torch

    assert count_pickle(pickle.dumps(bytearray(b"x"), 2), 100, 100).refused == "a bytearray"
    assert count_pickle(pickle.dumps(b"x", 2), 100, 100).refused == "bytes (_codecs.encode)"
    assert count_pickle(b"\x80\x02ctorch\nFloatTensor\n]\x85R.", 100, 100).refused == \
        "a legacy tensor constructor (torch.FloatTensor)"
    device = b"\x80\x02ctorch._utils\n_rebuild_device_tensor_from_cpu_tensor\nN\x85R."
    assert "a tensor rebuilt for a device other than the CPU or CUDA" in count_pickle(device, 100, 100).refused
    for called in (b"\x80\x02ctorch\nFloatStorage\nJ\x00\x00\x00@\x85R.",  # FloatStorage(2**30), REDUCE
                   b"\x80\x02ctorch\nTensor\nq\x00h\x00J\x00\x00\x00@\x85\x81.",  # Tensor.__new__, through the memo
                   b"\x80\x02ctorch.storage\nUntypedStorage\nJ\x00\x00\x00@\x85}\x92."):  # NEWOBJ_EX
        assert count_pickle(called, 100, 100).refused.startswith("a call of a storage type")
    values = {"t": torch.ones(2, dtype=torch.complex64), "p": torch.nn.Parameter(torch.ones(2)), "c": 3 + 4j,
              "m": torch.empty(2, device="meta"), "s": torch.Size([2, 3]), "d": torch.device("cpu"),
              "sparse": torch.eye(2).to_sparse(), "dtype": torch.float16, "view": torch.zeros(1).expand(4)}
    for name, value in values.items():  # what torch.save writes for inputs: storage types as values, never called
        saved = bytes_io.BytesIO()
        torch.save({"args": (value,)}, saved)
        with zipfile.ZipFile(saved) as archive:
            data = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
        assert count_pickle(data, 1000, 1000).refused is None, name


def test_values_handed_to_calls_are_counted_at_each_call_through_the_memo():
    """The breaker (2026-12-05): a call may copy what it is given (``torch.Size(l)`` copies ``l``, BUILD puts a dict's
    items into an OrderedDict), and the memo hands one container to any number of calls: 4.9 MB handing one list of
    1M ints to 400 torch.Size calls made torch.load build 3.2 GB. Each call now counts what it is given, a container
    with what was put into it after it was memoized (a pickler memoizes a list before it fills it)."""
    ints = b"(" + b"K\x01" * 1000 + b"e"
    sizes = b"\x80\x02]q\x01" + ints + b"ctorch\nSize\nq\x02(" + b"h\x02h\x01\x85R" * 100 + b"l."
    count = count_pickle(sizes, 1_000_000, 1_000_000, most_copied=50_000)
    assert count.stopped and count.copied > 50_000 and count.calls < 100
    keys = b"}q\x03(" + b"".join(b"X\x03\x00\x00\x00" + f"{i:03d}".encode() + b"K\x01" for i in range(1000)) + b"u"
    built = b"\x80\x02" + keys + b"ccollections\nOrderedDict\nq\x04(" + b"h\x04)Rh\x03b" * 100 + b"l."
    assert count_pickle(built, 1_000_000, 1_000_000, most_copied=50_000).stopped
    once = b"\x80\x02]q\x01" + ints + b"ctorch\nSize\nq\x02(h\x02h\x01\x85Rl."  # handed once: counted once
    assert 1000 < count_pickle(once, 1_000_000, 1_000_000).copied < 1100
    # one list in two memo slots, filled through the first, handed to calls through the second (torch reads it:
    # 100 sizes of 1,000): its weight is the list's, not the slot's
    aliased = b"\x80\x02]q\x01q\x02h\x01" + ints + b"ctorch\nSize\nq\x03](" + b"h\x03h\x02\x85R" * 100 + b"e."
    assert count_pickle(aliased, 1_000_000, 1_000_000, most_copied=50_000).stopped
    # an empty list put into a tuple, then filled, then the tuple handed to 100 calls: the tuple's count was taken
    # when it was made, so a list may not grow once it is in another value (torch.save fills each before)
    late = b"\x80\x02]q\x01\x85q\x02h\x01" + ints + b"ctorch\nSize\nq\x03](" + b"h\x03h\x02R" * 100 + b"e."
    assert count_pickle(late, 1_000_000, 1_000_000).refused.startswith(
        "a list or dict filled after it was put into another value or handed to a call")

def test_dict_keys_that_are_not_strings_are_counted_through_the_memo():
    """Keys whose hashes collide (``k * (2**61 - 1)``: all hash to 0) make each insertion walk the ones before: a
    1.3 MB pickle of 100,000 of them took 53 s to load. Strings (salted hashes) are not counted, also when the
    pickle memoizes a key and gets it again."""
    colliding = {k * (2**61 - 1): 0 for k in range(50)}
    assert count_pickle(pickle.dumps(colliding, 2), 1000, 1000).hashed == 50
    assert count_pickle(pickle.dumps({(1, "a"): 0, 2: 1}, 2), 1000, 1000).hashed == 2
    key = "shared"
    strings = [{key: 1}, {key: 2}, {"a": 3}]  # the second dict's key is a BINGET of the first's
    data = pickle.dumps(strings, 2)
    assert "BINGET" in _opcodes(data) and count_pickle(data, 1000, 1000).hashed == 0
    count = count_pickle(pickle.dumps(colliding, 2), 1000, 1000, most_hashed=10)
    assert count.stopped and count.hashed > 10  # SETITEMS puts its batch at once


def test_stops_at_a_bound_and_reads_no_further():
    data = pickle.dumps(list(range(1000)), 2)
    count = count_pickle(data, 10, 10_000)
    assert count.stopped and count.objects > 10 and count.opcodes < 1100
    assert count_pickle(data, 10_000, 5).stopped and count_pickle(data, 10_000, 5).opcodes == 6


def test_bytes_that_are_no_pickle_end_the_count_without_an_error():
    for data in (b"", b"\x80\x02]q\x00(K\x01", b"\xff\xff", b"\x80\x02e."):
        assert not count_pickle(data, 10, 10).stopped


def test_a_call_that_takes_a_mark_counts_once():
    # MARK, GLOBAL, OBJ builds one object (the weights-only unpickler refuses OBJ; the count still sees it)
    count = count_pickle(b"(c__main__\nX\no.", 10, 10)
    assert count.calls == 1 and count.objects == 2  # the mark's list, the object


def test_the_nesting_of_containers_is_followed_through_the_memo():
    """Review 10: a tuple nested 400,000 deep (1 byte a level) is hashed by recursion in C: SIGSEGV in torch.load."""
    assert count_pickle(pickle.dumps([1, [2, (3, {"a": ()})]], 2), 100, 100).depth == 5
    assert count_pickle(pickle.dumps([[1] * 50] * 3, 2), 1000, 1000).depth == 2  # appends add no level
    deep = b"\x80\x02)" + b"\x85" * 100_000 + b"."
    count = count_pickle(deep, 10**6, 10**6, most_depth=128)
    assert count.stopped and count.depth == 129 and count.opcodes < 200  # stopped at the bound, read no further
    assert count_pickle(deep, 10**6, 10**6).depth == 100_001  # no bound: counted whole
    through_memo = b"\x80\x02)" + b"\x85q\x00h\x00" * 200 + b"."  # each level memoized, then fetched back
    assert count_pickle(through_memo, 10**6, 10**6).depth == 201
