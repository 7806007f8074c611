"""The index ranges of a Program's inputs, checked before each call.

An integer input that reaches an index (an embedding's token ids, a gather's positions) must hold values
eager accepts there: the generated code's own check of an indirect index ends the process on the CPU (a C++
exception thrown inside an OpenMP region) and leaves the CUDA context unusable on the GPU (a device-side
assert). The lowering records each such range in the signature (``"index_ranges"``, format in
``aotcuda.package_format``; derived by ``aotcuda.lowering.index_ranges``); this module checks them.

An index read through selects and slices of constant bounds (``idx[0]`` where ``idx[1]`` is a multiplier) is checked
over that part only (the entry's ``"part"``: ``part_of``); the values elsewhere never reach the index, and eager runs
a call whatever they hold. A range of no part, whose reason says it was read through a slice, covers the whole input
because lowering could not tell the part (a slice after a permute, of a dynamic bound): its refusal says that, and how
to avoid it, not that eager refuses the call.

The cost: one min/max reduction per checked input (and part) (``torch.aminmax``) and, on CUDA, one synchronization per
call for all of them together (their results are stacked and read at once). Trusted callers turn it off with
``aotcuda.load(..., check_index_ranges=False)`` or ``AOTCUDA_CHECK_INDEX_RANGES=0``; measurements in
docs/performance.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from aotcuda.errors import InputError, PackageError, clipped, one_line, terminal_safe
from aotcuda.runtime.checks import evaluate_dim
from aotcuda.runtime.specs import DimSpec, dtype_named, under_dim_names
from aotcuda.runtime.shape_expressions import shape_expression


@dataclass(frozen=True)
class IndexRange:
    """One recorded range: bounds (an int, a DimSpec holding an expression of the size symbols, or None:
    not checked) and why (the indexing op and the user's line)."""

    low: int | DimSpec | None
    high: int | DimSpec | None
    reason: str
    part: tuple = ()  # the selects and slices of the input that reach the index (``part_of``); (): all of it
    item: bool = False  # the range torch.export gave the value read with .item() (lowering/item_ranges.py), not an index's

    @classmethod
    def from_json(cls, entry, dim_names) -> IndexRange:
        if not isinstance(entry, dict):
            raise ValueError(f"an index range is a JSON object, got {type(entry).__name__}")
        reason = entry.get("reason", "")
        # one line whatever the package wrote: the reason is quoted in InputErrors, and an error prints a line per
        # newline (a reason's own would print a line of the package's choosing under `aotcuda run`). Cut before and
        # after its symbols are named (break41): every refusal quotes it, and a reason of 5.7 MB naming s23 1.9
        # million times, each under a Dim name of 256 characters, made each refusal's message 488 MB (1.7 GB peak)
        # Escaped too (errors.terminal_safe): a Python traceback and a served client's terminal print it as it is
        reason = terminal_safe(one_line(clipped(reason, MAX_REASON_CHARS))) if isinstance(reason, str) else ""
        return cls(_bound(entry.get("min")), _bound(entry.get("max")),
                   clipped(under_dim_names(reason, dim_names), MAX_REASON_CHARS), _part(entry.get("part")),
                   entry.get("item") is True)

    def evaluate(self, bindings: dict[str, int], label: str = "the input") -> tuple[int | None, int | None]:
        """(low, high) for this call's sizes; None for a side that is not checked (null in the signature).
        Raises InputError for an expression bound with no value at these sizes (a divisor of 0, a symbol
        that no input size gives): the call is refused, never let through unchecked."""
        return _value(self.low, bindings, label, "lower"), _value(self.high, bindings, label, "upper")


def _bound(bound) -> int | DimSpec | None:
    if bound is None or (isinstance(bound, int) and not isinstance(bound, bool)):
        return bound
    if isinstance(bound, dict) and isinstance(bound.get("expr"), str):
        shape_expression(bound["expr"])  # ShapeExpressionError (a ValueError) for a string outside the grammar
        return DimSpec(expr=bound["expr"])
    raise ValueError(f"an index bound is an int, {{'expr': ...}} or null, got {bound!r}")


# The most characters of a range's reason kept (the op, what it indexes, the user's line: about 100 to 300)
MAX_REASON_CHARS = 1000

# a part's steps as lowering writes them (aotcuda.lowering.index_ranges._part_step): the kind, then its ints
_STEP_SIZES = {"select": 3, "slice": 5, "narrow": 4}
MAX_PART_STEPS = 64  # more selects and slices than a tensor has dims, many times over


def _part(part) -> tuple:
    """An entry's "part" as a tuple of steps; () where absent. ValueError for any other form."""
    if part is None:
        return ()
    if not isinstance(part, list) or len(part) > MAX_PART_STEPS:
        raise ValueError(f"a part is a list of at most {MAX_PART_STEPS} steps, got {str(part)[:80]!r}")
    steps = []
    for step in part:
        if (not isinstance(step, list) or not step or _STEP_SIZES.get(step[0]) != len(step)
                or any(isinstance(n, bool) or not isinstance(n, int) or abs(n) >= 2**63 for n in step[1:])
                or step[1] < 0 or (step[0] == "slice" and step[4] < 1) or (step[0] == "narrow" and step[3] < 0)):
            raise ValueError(f"a part's step is ['select', dim, index], ['slice', dim, start, end, step] or "
                             f"['narrow', dim, start, length], got {str(step)[:80]!r}")
        steps.append(tuple(step))
    return tuple(steps)


def part_of(tensor: torch.Tensor, part: tuple) -> tuple[torch.Tensor, list] | None:
    """(the view of ``tensor`` that ``part``'s steps take, and how to place an element of it back in ``tensor``:
    ``whole_place``), or None where a step does not fit this tensor (a dim it lacks, an index past a size): the whole
    tensor is then checked, as the program itself would fail on such a call."""
    placing = []
    try:
        for kind, dim, *numbers in part:
            size = tensor.shape[dim]
            if kind == "select":
                tensor, first, stride = tensor.select(dim, numbers[0]), numbers[0] % size if size else 0, None
            elif kind == "slice":
                start, _, stride = slice(*numbers).indices(size)
                tensor, first = tensor[(slice(None),) * dim + (slice(*numbers),)], start
            else:
                tensor, first, stride = tensor.narrow(dim, *numbers), numbers[0] % size if size else 0, 1
            placing.append((kind, dim, first, stride))
    except (IndexError, RuntimeError):
        return None
    return tensor, placing


def whole_place(place: tuple, placing: list) -> tuple:
    """A place in a part (``part_of``) as the place in the whole input."""
    place = list(place)
    for kind, dim, first, stride in reversed(placing):
        if kind == "select":
            place.insert(dim, first)
        else:
            place[dim] = first + place[dim] * stride
    return tuple(place)


def _intersection(entries) -> tuple[int | None, int | None]:
    lows = [entry.low for entry in entries if entry.low is not None]
    highs = [entry.high for entry in entries if entry.high is not None]
    return (max(lows) if lows else None), (min(highs) if highs else None)


@functools.lru_cache(maxsize=1024)
def _evaluated(expr: str, bindings: tuple) -> int | None:
    """``evaluate_dim`` of a bound, once per expression and sizes: through sympy it cost ~80 µs a call (a decode
    step's ``start_pos <= 128 - seq``, lowering/item_ranges.py), where the model itself ran in ~20."""
    return evaluate_dim(DimSpec(expr=expr), dict(bindings))


def _value(bound, bindings: dict[str, int], label: str, side: str) -> int | None:
    if bound is None or isinstance(bound, int):
        return bound
    value = _evaluated(bound.expr, tuple(sorted(bindings.items())))
    if value is None:
        sizes = ", ".join(f"{name}={bindings[name]}" for name in sorted(bindings)) or "none"
        raise InputError(f"{label}: the {side} bound {bound.expr!r} of the values it may hold as an index could not "
                         f"be evaluated for these sizes ({sizes}), so the call is refused rather than run unchecked; "
                         "the package's index_ranges are damaged or hostile, lower the model again, or load it with "
                         "check_index_ranges=False if you trust its inputs")
    return value


def _integer_dtype(name) -> bool:
    dtype = dtype_named(name)
    return dtype is not None and not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def parse_index_ranges(signature: dict | None, path: str = "") -> dict[int, tuple[IndexRange, ...]]:
    """{input index: its IndexRanges} of every input of the signature that records "index_ranges" (the one
    reading of that field: the runtime's checks and serving's batch plan both take it from here). Raises
    PackageError for a malformed field (not a list, an entry not in its form, ranges of a non-integer input,
    dim_names that are not strings): a package must not lose its checks silently."""
    inputs = (signature or {}).get("inputs")
    if not isinstance(inputs, list):
        return {}
    names = signature.get("dim_names") if isinstance(signature.get("dim_names"), dict) else None
    if names and not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise PackageError(f"{path!r}: the signature's dim_names {names!r:.80} is not an object of strings "
                           "(the index ranges name sizes by it); lower the model again")
    ranges = {}
    for index, spec in enumerate(inputs):
        entries = spec.get("index_ranges") if isinstance(spec, dict) else None
        if not entries:
            continue
        try:
            if not isinstance(entries, list):
                raise ValueError(f"index_ranges is a {type(entries).__name__}, not a list")
            if not _integer_dtype(spec.get("dtype")):  # the lowering records ranges of integer inputs only
                raise ValueError(f"they are given for a {str(spec.get('dtype'))[:40]!r} input; only integer "
                                 "inputs have index ranges (a NaN has no place in a range check)")
            ranges[index] = tuple(IndexRange.from_json(entry, names) for entry in entries)
        except (ValueError, TypeError) as exc:  # TypeError: a dim_names value that is not a string
            raise PackageError(f"{path!r}: the signature's index_ranges of input #{index} are malformed "
                               f"({exc}); lower the model again") from exc
    return ranges


def _aminmax(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(min, max) of the tensor as 0-d tensors on its device. torch has no min/max kernel for uint16, uint32 and uint64
    (NotImplementedError: every call of a program with such an index input failed), so uint64 is read by its bits as
    int64 (a value of 2**63 or more reads negative: ``_uint64_extremes``), and uint16 and uint32 by value as int64, a
    chunk at a time: a whole int64 copy took 4 times a uint16 input's memory (a 256 MiB request: 1 GiB more)."""
    if tensor.dtype == torch.uint64:
        return tensor.view(torch.int64).aminmax()
    if tensor.dtype not in _WIDE_UNSIGNED:
        return tensor.aminmax()
    parts = [torch.stack(chunk.to(torch.int64).aminmax()) for chunk in tensor.reshape(-1).split(_CHUNK_ELEMENTS)]
    both = torch.stack(parts)
    return both[:, 0].min(), both[:, 1].max()


_CHUNK_ELEMENTS = 1 << 22  # a uint16 or uint32 index input is read as int64 this many elements at a time (32 MiB)
_WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def _uint64_extremes(tensor: torch.Tensor) -> tuple[int, int]:
    """(min, max) of a uint64 tensor holding a value of 2**63 or more (read negative as int64 bits)."""
    signed = tensor.view(torch.int64)
    small, large = signed[signed >= 0], signed[signed < 0]
    high = int(large.max()) + 2**64
    return (int(small.min()) if small.numel() else int(large.min()) + 2**64), high


class IndexRangeChecks:
    """The inputs of one Program that have index ranges, and their check (``check``)."""

    def __init__(self, ranges: dict[int, tuple[IndexRange, ...]], labels: dict[int, str], device: torch.device):
        self._labels = labels
        self._on_cuda = device.type == "cuda"
        self._indices = tuple(sorted(ranges))
        # one check per input and part (an input read as an index through idx[0] and idx[2:] is checked over each)
        self._ranges: dict[tuple[int, tuple], tuple[IndexRange, ...]] = {}
        for index in self._indices:
            for part in dict.fromkeys(entry.part for entry in ranges[index]):
                self._ranges[(index, part)] = tuple(entry for entry in ranges[index] if entry.part == part)
        # Ranges of static bounds only (the usual case) are one comparison per side: their intersection.
        self._static = {key: _intersection(entries) for key, entries in self._ranges.items()
                        if all(isinstance(bound, (int, type(None))) for e in entries for bound in (e.low, e.high))}
        # An input read as indices through several parts (``emb[k](idx[:, k])`` for 26 k: review, 2026-12-07, 26
        # reductions, 179 us a call against 6 for the whole input) is first reduced whole, once: within the
        # intersection of every part's ranges (static ones), each part is within its own, and no part is reduced.
        self._whole_first = {index: _intersection(ranges[index]) for index in self._indices
                             if len({entry.part for entry in ranges[index]}) > 1
                             and all(isinstance(bound, (int, type(None)))
                                     for entry in ranges[index] for bound in (entry.low, entry.high))}

    @classmethod
    def from_signature(cls, signature: dict | None, num_inputs: int, device: torch.device,
                       path: str = "") -> IndexRangeChecks | None:
        """The checks the signature records (None when there are none). Raises PackageError for a
        malformed ``index_ranges`` field: a package must not lose its checks silently."""
        inputs = (signature or {}).get("inputs")
        if not isinstance(inputs, list) or len(inputs) != num_inputs:
            return None
        ranges = parse_index_ranges(signature, path)
        labels = {index: f"input {inputs[index].get('name', index)!r} (#{index})" for index in ranges}
        return cls(ranges, labels, device) if ranges else None

    def checked_copies(self, tensors: list, bindings: dict[str, int], callers: list | None = None) -> list:
        """``tensors`` with each input that has index ranges replaced by a copy of it, checked (``check``):
        the call must run on the values checked. The caller's memory may change between the check and the
        generated code's read (another thread, another process writing shared memory): an index checked in
        range and then read out of range ends the process (measured: an id rewritten in shared memory got
        past the check and aborted it). The copies cost one read of the index inputs (ids, positions),
        which the check reads anyway; a copy of an input the program writes is copied back after the call
        (``checks.copies_back``), as the exported-layout copies are. ``callers``: the caller's own tensors, where
        ``tensors`` may hold copies this call made (into the exported layout), which no one else can write: those
        are checked as they are (a second copy of an expanded input doubled the memory its layout copy had been
        allowed: 2 GiB for a (1024, 1024, 1024) uint8 expand of one byte)."""
        copies = list(tensors)
        for index in self._indices:
            if callers is None or tensors[index] is callers[index]:
                copies[index] = tensors[index].clone(memory_format=torch.preserve_format)
        self.check(copies, bindings)
        return copies

    def check(self, tensors: list, bindings: dict[str, int]) -> None:
        """Raise InputError, before the call, when an input holds a value outside a range it must keep."""
        whole_within = self._within_as_a_whole(tensors) if self._whole_first else ()
        parts = {}  # (input, part): (the values checked, how to place them back in the input)
        for index, part in self._ranges:
            if index in whole_within:
                continue
            taken = part_of(tensors[index], part) if part else None
            parts[(index, part)] = taken if taken is not None else (tensors[index], [])
        if self._on_cuda:
            checked = [key for key, (tensor, _) in parts.items() if tensor.numel()]
            if not checked:
                return
            # one synchronization for all of them
            extremes = torch.stack([torch.stack(_aminmax(parts[key][0])).long() for key in checked]).tolist()
        else:
            checked, extremes = [], []
            for key, (tensor, _) in parts.items():
                if tensor.numel() == 1 and tensor.dtype != torch.uint64:  # a position (start_pos): item(), not a
                    low = high = tensor.item()  # reduction (~10 µs a call on a 20 µs decode step)
                    checked.append(key)
                    extremes.append((low, high))
                elif tensor.numel():
                    low, high = _aminmax(tensor)
                    checked.append(key)
                    extremes.append((int(low), int(high)))
        for place, key in enumerate(checked):
            if parts[key][0].dtype == torch.uint64 and extremes[place][0] < 0:  # values of 2**63 or more
                extremes[place] = _uint64_extremes(parts[key][0])
        static = self._static
        for key, (low, high) in zip(checked, extremes):
            bounds = static.get(key)
            if bounds is not None and (bounds[0] is None or low >= bounds[0]) and (bounds[1] is None or high <= bounds[1]):
                continue  # within every range
            self._check_ranges(*parts[key], key, low, high, bindings)

    def _within_as_a_whole(self, tensors: list) -> set[int]:
        """The inputs of ``_whole_first`` whose every value is within the intersection of their parts' ranges (one
        reduction each, one synchronization for all on CUDA); the others are checked part by part, which names the
        place and the range a value breaks. uint64 inputs are always checked part by part (their extremes past 2**63
        need ``_uint64_extremes``)."""
        keys = [index for index in self._whole_first if tensors[index].numel() and tensors[index].dtype != torch.uint64]
        if not keys:
            return set()
        if self._on_cuda:
            extremes = torch.stack([torch.stack(_aminmax(tensors[index])).long() for index in keys]).tolist()
        else:
            extremes = [tuple(int(value) for value in _aminmax(tensors[index])) for index in keys]
        return {index for index, (low, high) in zip(keys, extremes)
                if (self._whole_first[index][0] is None or low >= self._whole_first[index][0])
                and (self._whole_first[index][1] is None or high <= self._whole_first[index][1])}

    def _check_ranges(self, tensor, placing: list, key: tuple, low: int, high: int, bindings: dict[str, int]) -> None:
        """Against every range of the input's part; a refusal shows their intersection and the reason of the
        range that refuses (the first of equals: the one of the user's own op)."""
        index = key[0]
        bounds = [(allowed, *allowed.evaluate(bindings, self._labels[index])) for allowed in self._ranges[key]]
        lows = [(lowest, allowed) for allowed, lowest, _ in bounds if lowest is not None]
        highs = [(highest, allowed) for allowed, _, highest in bounds if highest is not None]
        lowest = max(lows, key=lambda entry: entry[0], default=(None, None))
        highest = min(highs, key=lambda entry: entry[0], default=(None, None))
        if lowest[0] is not None and low < lowest[0]:
            self._refuse(tensor, index, low, lowest[0], highest[0], lowest[1].reason, placing, lowest[1].item)
        if highest[0] is not None and high > highest[0]:
            self._refuse(tensor, index, high, lowest[0], highest[0], highest[1].reason, placing, highest[1].item)

    def _refuse(self, tensor, index: int, value: int, lowest, highest, reason: str, placing: list = (),
                item: bool = False):
        where = _first_place(tensor, value)  # () only where the memory changed since the check read it
        at = f" at {whole_place(where, placing)}" if where else ""
        shown = f"[{'-inf' if lowest is None else lowest}, {'inf' if highest is None else highest}]"
        if item:  # no index: the value .item() reads, which the compiled program's own check refuses
            error = InputError(f"{self._labels[index]} holds {value}, outside {shown}, {reason}. Pass a value in "
                               "that range; nothing was run")
            error.client_text = (f"{self._labels[index]} holds {value}, outside {shown}, the range the program "
                                 "allows for it; pass a value in that range")
            raise error
        said = f"{self._labels[index]} holds {value}{at}, outside {shown}, the values it may hold as the index of "
        whole = WHOLE_INPUT_CHECKED in reason
        error = InputError(f"{said}{reason}. {_WHOLE_CHECKED + _TRUSTED if whole else _EAGER_REFUSES}")
        # a server's client gets the op, not the lowering host's file, line and source (``_op_of``), nor the advice
        # of a load option that is the server's
        error.client_text = f"{said}{_op_of(reason)}. {_WHOLE_CHECKED if whole else _EAGER_REFUSES}"
        raise error


# what lowering's reason says of a range read through a slice it could not tell (lowering.index_ranges._reason)
WHOLE_INPUT_CHECKED = "the whole input is checked"
_EAGER_REFUSES = "Eager refuses it too; pass values in that range"
_WHOLE_CHECKED = ("Only a part of this input is used as that index, but lowering could not tell which, so every "
                  "value of it is checked and eager may well run this call; pass values in that range, or pass the "
                  "part used as an index as an input of its own")
_TRUSTED = " (or load with check_index_ranges=False if you trust the values)"


def _op_of(reason: str) -> str:
    """A reason without where it was lowered: lowering writes ``"{op} over {what}, at {file}:{line}: {source}"``
    (``aotcuda.lowering.index_ranges._reason``), or the model's module after ", at "."""
    return reason.split(", at ", 1)[0]


def _first_place(tensor: torch.Tensor, value: int) -> tuple[int, ...]:
    """The index of the first element of ``tensor`` equal to ``value``, or () where none is. One byte an element (the
    comparison's mask), where ``nonzero()`` listed every place: 8 bytes a dim an element, 1.6 GiB for a 64 MiB uint8
    input of rank 3 holding the value everywhere (the breaker, 2026-12-06)."""
    found = (tensor == value).reshape(-1).view(torch.uint8)
    first = int(found.argmax()) if found.numel() else 0
    if not found.numel() or not found[first]:
        return ()
    place = []
    for size in reversed(tensor.shape):
        first, index = divmod(first, size)
        place.append(index)
    return tuple(reversed(place))

