"""What a pickle would build, counted from its opcodes without running any of them (``aotcuda run --inputs``
reads a torch.save file, whose ``data.pkl`` torch.load unpickles whole before anything can look at the result).

A pickle is a program: ``BINGET rebuild, BINGET args, REDUCE`` makes one more tensor view in 5 bytes, so an
88 KB file built 12M tensors (6.7 GiB, 3 minutes) before the structure it held could be counted. This scan
walks the opcodes once (``pickletools.genops``: nothing is called, nothing is built), follows the kind of each
value on the unpickler's stack (a string or not: two values a byte), and counts as objects:

- what a call builds: REDUCE, NEWOBJ(_EX), OBJ, INST, and the storages of BINPERSID/PERSID;
- every container made (lists, dicts, tuples, and the list the unpickler makes for each MARK), and every item
  put into a list or dict (APPEND(S), SETITEM(S), LIST, DICT);
- every memo entry (PUT, BINPUT, LONG_BINPUT): the unpickler keeps each one in its memo dict.

What calls build is counted apart too (``calls``): a call may build a tensor view (~600 bytes), an item costs a
slot. Dict keys that are not strings are counted apart (``hashed``): a str's hash is salted per process, an int's or a
tuple's is not, so keys that all hash alike (``k * (2**61 - 1)``) make each insertion a walk over the ones
before (a 1.3 MB pickle of 100,000 such keys took 53 s to load). What hashes items another way is refused
(``refused``): sets and Counters (EMPTY_SET, FROZENSET, ADDITEMS, the globals ``set`` and ``Counter``), which
inputs never hold, and an OrderedDict built from items by its call (pickle writes ``OrderedDict()`` and puts
the items with SETITEMS, where their keys are counted). So are the calls inputs never make that build what their
arguments size, not what the file holds (``_never_held``, ``_not_called``: ``bytearray(2**30)``, a storage type called
with a size), and every GLOBAL is read as torch's reader resolves it (``UserDict Counter`` is a Counter).

How deep containers nest is followed too (``depth``: a container is one deeper than the deepest value put into
it, through the memo): Python hashes and compares a tuple by recursing in C, without the recursion limit, so a
tuple nested 400,000 deep (400 KB of TUPLE1 opcodes, within every count above) used as a dict key ended torch.load
with SIGSEGV when the dict was filled.

torch.save writes about 15 counted objects for a tensor held in a list (its rebuild call, argument tuples,
hooks' OrderedDict, storage, memo entries) and about 36 opcodes for a 4-dim one.
"""

from __future__ import annotations

import pickletools
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from dataclasses import dataclass

_CALLS = frozenset({"REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST", "BINPERSID", "PERSID"})
_CONTAINERS = frozenset({"EMPTY_LIST", "EMPTY_DICT", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "LIST",
                         "DICT"})
_ONE_ITEM = frozenset({"APPEND", "SETITEM"})
_ITEMS_SINCE_MARK = frozenset({"APPENDS", "SETITEMS", "LIST", "DICT"})
_KEYS_SINCE_MARK = frozenset({"SETITEMS", "DICT"})
_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_COPYING = frozenset({"REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD"})  # calls given the values above their first operand
_FILLING = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS", "BUILD"})  # put values into the one below, in place
_CALLABLE_AT = {"REDUCE": 2, "NEWOBJ": 2, "NEWOBJ_EX": 3}  # how far below the top a call's callable is
_FILLED_LATE = ("a list or dict filled after it was put into another value or handed to a call (a container that "
                "holds itself, or a pickle torch.save never writes)")
_MEMO_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_STRINGS = frozenset({"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE",
                      "BINUNICODE8"})
_SETS = frozenset({"EMPTY_SET", "ADDITEMS", "FROZENSET"})
_HASHING_GLOBALS = {"builtins set": "a set", "__builtin__ set": "a set", "builtins frozenset": "a set",
                    "__builtin__ frozenset": "a set", "collections Counter": "a Counter"}
_ORDERED_DICT_GLOBALS = frozenset({"collections OrderedDict"})
# Globals torch's weights-only unpickler calls that torch.save never writes for inputs, each of which builds a value
# the call's arguments size, not the file: bytearray(2**31) zero-fills 2 GiB, _codecs.encode copies one memoized
# string at each call (protocol 2's bytes), a tensor rebuilt for another device is a .to() that makes an expanded
# view dense (1.7 KB of pickle: 2 GiB), a legacy constructor (torch.FloatTensor) copies a memoized list at each call.
_NEVER_HELD = {"builtins bytearray": "a bytearray", "_codecs encode": "bytes (_codecs.encode)",
               "torch._utils _rebuild_device_tensor_from_cpu_tensor": "a tensor rebuilt for a device other than the "
               "CPU or CUDA (torch._utils._rebuild_device_tensor_from_cpu_tensor)",
               "torch._utils _rebuild_device_tensor_from_numpy": "a tensor rebuilt from NumPy for another device"}
# A NumPy array or scalar in the file (torch.save(np_array) pickles numpy's own rebuild calls): its bytes come through
# _codecs.encode, refused above, which named "bytes" where the user saved an array; said as what it is, with the fix.
NUMPY_VALUE = "a NumPy value"
_OTHER, _STR, _MARK, _ORDERED_DICT, _EMPTY_TUPLE, _NOT_CALLED = 0, 1, 2, 3, 4, 5  # the kinds of values on the stack


def _never_held(name: str) -> str | None:
    """What a GLOBAL (as loaded) that inputs never hold is, in a refusal's words; None for any other."""
    module, _, attribute = name.partition(" ")
    if module in ("torch", "torch.cuda") and attribute.endswith("Tensor") and attribute != "Tensor":
        return f"a legacy tensor constructor ({module}.{attribute})"
    if module == "numpy" or module.startswith("numpy."):  # an array or scalar saved as it was: NUMPY_VALUE's fix
        return f"{NUMPY_VALUE} ({module}.{attribute})"
    return _NEVER_HELD.get(name)


def _not_called(name: str) -> bool:
    """Whether a GLOBAL (as loaded) is a type torch.save writes as a value and never calls: a storage type (the
    persistent id of each tensor names one) or torch.Tensor; called, each allocates the size it is given."""
    module, _, attribute = name.partition(" ")
    return module in ("torch", "torch.cuda", "torch.storage") and (attribute.endswith("Storage")
                                                                   or attribute == "Tensor")


def _global_as_loaded(arg: str) -> str:
    """A GLOBAL's ``"module name"`` as torch's weights-only unpickler resolves it (``_read_global_instruction``):
    through pickle's Python 2 tables, so ``UserDict Counter`` is ``collections Counter``, which it calls. Compared
    as written, that name passed the refusals below (the breaker, 2026-12-05)."""
    module, _, name = arg.partition(" ")
    if (module, name) in NAME_MAPPING:
        module, name = NAME_MAPPING[(module, name)]
    elif module in IMPORT_MAPPING:
        module = IMPORT_MAPPING[module]
    return f"{module} {name}"


@dataclass(frozen=True)
class PickleCount:
    """``objects``: what the module docstring counts; ``calls``: those built by calls; ``hashed``: dict keys that are
    not strings; ``opcodes``: the
    opcodes read; ``stopped``: the scan ended at a bound (the counts are then lower bounds) rather than at the end
    of the pickle or at bytes that are no pickle (where the unpickler stops too); ``refused``: what the pickle
    holds that inputs never do (a set), or None."""

    objects: int
    calls: int
    hashed: int
    opcodes: int
    stopped: bool
    refused: str | None = None
    depth: int = 0  # the deepest nesting of containers met (a lower bound where the scan stopped)
    copied: int = 0  # the values handed to calls, counted again at each call (a call may copy what it is given)


def count_pickle(data: bytes, most_objects: int, most_opcodes: int, most_calls: int | None = None,
                 most_hashed: int | None = None, most_depth: int | None = None,
                 most_copied: int | None = None) -> PickleCount:
    """What ``data`` would build, counted up to one past ``most_objects``, ``most_opcodes``, ``most_calls``,
    ``most_hashed`` (the last two default to ``most_objects``) or ``most_copied`` (default: 4 × ``most_objects``), or
    ``most_depth`` levels of nested containers (default: no bound); the scan stops at the first bound passed: time
    linear in what is allowed, not in the pickle.

    ``copied``: each call (REDUCE, NEWOBJ, BUILD, a persistent id) counts the values it is given, containers with
    everything they hold, through the memo: ``torch.Size(l)`` copies ``l``, and a pickle that hands one memoized list
    of 1M ints to 400 such calls (4.9 MB) built 3.2 GB before anything could count what torch.load returned (the
    breaker, 2026-12-05). A container's count follows what is put into it after it was memoized."""
    most_calls = most_objects if most_calls is None else most_calls
    most_hashed = most_objects if most_hashed is None else most_hashed
    most_copied = 4 * most_objects if most_copied is None else most_copied
    objects = calls = hashed = opcodes = deepest = copied = 0
    stack = bytearray()  # the kind of each value the unpickler would hold
    depths: list[int] = []  # how deep each of those values nests containers (0: not a container)
    memo_kinds: dict[int, int] = {}  # memo slots that hold a value of a kind other than _OTHER
    memo_depths: dict[int, int] = {}  # memo slots that hold a container
    weights: list[int] = []  # how many values each of those holds, itself included (what a call given it may copy)
    # A memoized value may be on the stack and in the memo many times (two slots, a GET, a DUP) and be filled through
    # any of them: its weight is kept once, by number, and read from there (a list put in two slots and filled
    # through one was handed to calls through the other at its empty weight).
    numbers: list[int | None] = []  # the number of each value on the stack that was memoized (None: never)
    shared_weights: list[int] = []  # the weight of each memoized value, by number
    memo_numbers: dict[int, int] = {}  # memo slot -> the number of the value it holds
    # Memoized values put into another value or handed to a call: the weight of what holds them was taken then, so
    # such a value may not grow afterwards (torch.save fills every list and dict before it puts it anywhere).
    placed: set[int] = set()

    def current(start: int) -> list[int]:
        """The weights of the values from ``start``, a memoized one's as it is now."""
        if start >= len(weights):  # most opcodes take nothing from the stack
            return []
        return [weight if number is None else shared_weights[number]
                for weight, number in zip(weights[start:], numbers[start:])]

    def put_back(start: int, weight: int, count: int, kept: int | None) -> None:
        """The values from ``start`` replaced by ``count`` of ``weight``; ``kept``: the number of the one value put
        back changed in place (APPEND(S), SETITEM(S), BUILD), wherever else it is held."""
        if start < len(weights):
            del weights[start:], numbers[start:]
        weight = min(max(weight, 1), most_copied + 1)  # a list appended to itself doubles: no integer of a million bits
        if count == 1:  # nearly every opcode leaves one value
            weights.append(weight)
            numbers.append(kept)
        elif count:
            weights.extend([weight] * count)
            numbers.extend([kept] * count)
        if kept is not None:
            shared_weights[kept] = weight
    try:
        for op, arg, _ in pickletools.genops(data):
            opcodes += 1
            name = op.name
            if name == "GLOBAL":
                arg = _global_as_loaded(arg)
            refused = "a set" if name in _SETS else \
                (_HASHING_GLOBALS.get(arg) or _never_held(arg)) if name == "GLOBAL" else None
            if refused is None and name == "REDUCE" and len(stack) >= 2 and stack[-2] == _ORDERED_DICT \
                    and stack[-1] != _EMPTY_TUPLE:
                refused = "an OrderedDict built from items by its call"
            callable_at = _CALLABLE_AT.get(name)
            if refused is None and callable_at and len(stack) >= callable_at and stack[-callable_at] == _NOT_CALLED:
                refused = "a call of a storage type or of torch.Tensor (an allocation of the size it is given)"
            if refused:
                return PickleCount(objects, calls, hashed, opcodes, False, refused, deepest, copied)
            depth = 0  # how deep the value(s) this opcode leaves on the stack nest containers
            if name == "MARK":
                stack.append(_MARK)
                depths.append(0)
                weights.append(0)
                numbers.append(None)
                objects += 1
            elif name in _MEMO_GETS:
                stack.append(memo_kinds.get(arg, _OTHER))
                depths.append(depth := memo_depths.get(arg, 0))
                number = memo_numbers.get(arg)
                weights.append(1 if number is None else shared_weights[number])
                numbers.append(number)
            elif name in _MEMO_PUTS:
                if weights:
                    if numbers[-1] is None:
                        numbers[-1] = len(shared_weights)
                        shared_weights.append(weights[-1])
                    memo_numbers[arg] = numbers[-1]
                kind = stack[-1] if stack else _OTHER
                if kind == _OTHER:
                    memo_kinds.pop(arg, None)
                else:
                    memo_kinds[arg] = kind
                if depths and depths[-1]:
                    memo_depths[arg] = depths[-1]
                else:
                    memo_depths.pop(arg, None)
                objects += 1
            elif name == "MEMOIZE":
                break  # protocol 4's: torch's weights-only unpickler stops at it, so nothing after it is built
            elif name == "DUP":
                stack.append(stack[-1] if stack else _OTHER)
                depths.append(depths[-1] if depths else 0)
                weights.append(weights[-1] if weights else 1)
                numbers.append(numbers[-1] if numbers else None)
            elif pickletools.markobject in op.stack_before:
                mark = stack.rfind(_MARK)
                if mark < 0:
                    break  # the unpickler fails here (no mark to pop): it builds nothing more
                items = stack[mark + 1:]
                inner = max(depths[mark + 1:], default=0)
                held = sum(current(mark + 1))
                placed.update(numbers[mark + 1:])  # None among them too: never a value's number
                del stack[mark:], depths[mark:], weights[mark:], numbers[mark:]
                if name in _KEYS_SINCE_MARK:
                    hashed += sum(kind != _STR for kind in items[0::2])
                calls += name in _CALLS  # OBJ, INST
                objects += (len(items) if name in _ITEMS_SINCE_MARK else int(name in _CALLS)) + (name in _CONTAINERS)
                below = op.stack_before.index(pickletools.markobject)  # the operands under the mark (APPENDS' list)
                depth = max([inner + 1, *depths[max(len(depths) - below, 0):]])  # the items, one level in
                start = max(len(weights) - below, 0)
                held += sum(current(start)) + (name in _CONTAINERS)
                copied += held if name in _CALLS else 0  # OBJ, INST
                del stack[max(len(stack) - below, 0):], depths[max(len(depths) - below, 0):]
                stack.extend(bytes(len(op.stack_after)))
                depths.extend([depth] * len(op.stack_after))
                kept = numbers[start] if name in _FILLING and start < len(numbers) else None
                if kept is not None and kept in placed:
                    return PickleCount(objects, calls, hashed, opcodes, False, _FILLED_LATE, deepest, copied)
                put_back(start, held, len(op.stack_after), kept)
            else:
                if name == "SETITEM" and len(stack) >= 2 and stack[-2] != _STR:
                    hashed += 1
                calls += name in _CALLS
                objects += name in _CALLS or name in _ONE_ITEM or name in _CONTAINERS
                taken = max(len(depths) - len(op.stack_before), 0)
                operands = depths[taken:]
                if name in _ONE_ITEM or name == "BUILD":  # the container (or object) below, the rest put into it
                    depth = max([*operands[:1], *(d + 1 for d in operands[1:])])
                else:  # a container made of its operands (TUPLE1-3, EMPTY_*) is one level deeper than them
                    depth = max(operands, default=0) + (name in _CONTAINERS)
                start = max(len(weights) - len(op.stack_before), 0)
                given, kept = current(start) if op.stack_before else (), None
                if given:  # an opcode that takes values from the stack (most push one and take none)
                    kept = numbers[start] if name in _FILLING else None
                    if kept is not None and kept in placed:
                        return PickleCount(objects, calls, hashed, opcodes, False, _FILLED_LATE, deepest, copied)
                    placed.update(numbers[start + (kept is not None):])
                    copied += given[0] if name == "BINPERSID" else sum(given[1:]) if name in _COPYING else 0
                del stack[max(len(stack) - len(op.stack_before), 0):], depths[taken:]
                kind = _STR if name in _STRINGS else _EMPTY_TUPLE if name == "EMPTY_TUPLE" else \
                    _ORDERED_DICT if name == "GLOBAL" and arg in _ORDERED_DICT_GLOBALS else \
                    _NOT_CALLED if name == "GLOBAL" and _not_called(arg) else _OTHER
                stack.extend(bytes([kind]) * len(op.stack_after))
                depths.extend([depth] * len(op.stack_after))
                if given or len(op.stack_after) != 1:
                    put_back(start, sum(given) + (name in _CONTAINERS), len(op.stack_after), kept)
                else:  # one value pushed from nothing (a number, a string, a global, an empty container)
                    weights.append(1)
                    numbers.append(None)
            deepest = max(deepest, depth)
            if (objects > most_objects or opcodes > most_opcodes or calls > most_calls or hashed > most_hashed
                    or copied > most_copied or (most_depth is not None and deepest > most_depth)):
                return PickleCount(objects, calls, hashed, opcodes, True, None, deepest, copied)
    except ValueError:  # not a pickle from here on: the unpickler stops here too, having built what was counted
        pass
    return PickleCount(objects, calls, hashed, opcodes, False, None, deepest, copied)
