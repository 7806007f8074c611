"""What a pickle would build, counted from its opcodes without running any of them (``aotcuda run --inputs``
reads a torch.save file, whose ``data.pkl`` torch.load unpickles whole before anything can look at the result).

A pickle is a program: ``BINGET rebuild, BINGET args, REDUCE`` makes one more tensor view in 5 bytes, so an
88 KB file built 12M tensors (6.7 GiB, 3 minutes) before the structure it held could be counted. This scan
walks the opcodes once (``pickletools.genops``: nothing is called, nothing is built) and counts:

- objects built by a call: REDUCE, NEWOBJ(_EX), OBJ, INST, and the storages of BINPERSID/PERSID;
- items put into lists, dicts and sets: APPEND, SETITEM (1 each), APPENDS, SETITEMS, LIST, DICT, FROZENSET,
  ADDITEMS (the items since their MARK).

Tuple items are not counted: every tensor's arguments are tuples (its storage key, shape and strides), so
counting them would count a tensor's dims; the opcode bound (``most_opcodes``) bounds them instead.
torch.save writes 4 counted objects for a tensor held in a list (its rebuild call, its hooks' OrderedDict, its
storage, its slot; 5 in a dict: its key too) and about 36 opcodes for a 4-dim one.
"""

from __future__ import annotations

import pickletools
from dataclasses import dataclass

_CALLS = frozenset({"REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST", "BINPERSID", "PERSID"})
_ONE_ITEM = frozenset({"APPEND", "SETITEM"})
_ITEMS_SINCE_MARK = frozenset({"APPENDS", "SETITEMS", "LIST", "DICT", "FROZENSET", "ADDITEMS"})


@dataclass(frozen=True)
class PickleCount:
    """``objects``: objects built by calls and items put into containers (module docstring); ``opcodes``: the
    opcodes read; ``stopped``: the scan ended at a bound (the counts are then lower bounds) rather than at the
    end of the pickle or at bytes that are no pickle (which torch.load refuses at the same place)."""

    objects: int
    opcodes: int
    stopped: bool


def count_pickle(data: bytes, most_objects: int, most_opcodes: int) -> PickleCount:
    """The objects ``data`` would build and its opcodes, counted up to one past ``most_objects`` or
    ``most_opcodes`` (the scan stops there: time linear in what is allowed, not in the pickle)."""
    objects = opcodes = depth = 0
    marks: list[int] = []
    try:
        for op, _, _ in pickletools.genops(data):
            opcodes += 1
            name = op.name
            if name == "MARK":
                marks.append(depth)
            elif pickletools.markobject in op.stack_before:
                start = marks.pop() if marks else depth
                objects += max(depth - start, 0) if name in _ITEMS_SINCE_MARK else int(name in _CALLS)  # OBJ, INST
                below = op.stack_before.index(pickletools.markobject)  # the operands under the mark (APPENDS' list)
                depth = max(start - below, 0) + len(op.stack_after)
            else:
                objects += 1 if name in _CALLS or name in _ONE_ITEM else 0
                depth = max(depth + len(op.stack_after) - len(op.stack_before), 0)
            if objects > most_objects or opcodes > most_opcodes:
                return PickleCount(objects, opcodes, True)
    except ValueError:  # not a pickle from here on: the unpickler stops here too, having built what was counted
        pass
    return PickleCount(objects, opcodes, False)
