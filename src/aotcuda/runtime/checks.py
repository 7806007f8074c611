"""Input and output checks of a loaded Program, made BEFORE anything runs.

The generated code of an AOTI package trusts its inputs: a wrong dtype, rank or size reads memory
wrongly or crashes. So every call is checked here against the package's signature (see
``aotcuda.package_format``): count, type, layout, dtype, device, rank, static sizes, symbolic sizes within
their exported range, and sizes that share one symbol being equal. Every error names the input and the fix.

The generated code also reads each input through its raw data pointer with the strides of the exported
example, baked in. So an accepted input is handed on in exactly that layout (copied where it differs: a
transposed view, an expanded tensor, a program exported with a transposed example called with a
contiguous tensor), and without the lazy negation/conjugation bits that a data pointer does not carry.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re

import torch

from aotcuda.errors import Advice, InputError, OutputError, PackageError, clipped, terminal_clipped, terminal_safe
from aotcuda.runtime.devices import available_bytes
from aotcuda.runtime.dtype_fixes import dtype_fix
from aotcuda.runtime.shape_expressions import EVALUATION_ERRORS, evaluate_expression, shape_expression
from aotcuda.runtime.specs import DimSpec, TensorSpec, specs_from_signature, under_dim_names  # noqa: F401 - re-exported
from aotcuda.runtime.specs import INT64_MAX


def _is_symbol(expr: str) -> bool:
    return expr.isidentifier()


def _label(specs, names, index: int) -> str:
    name = specs[index].name if specs else (names[index] if names and index < len(names) else str(index))
    return f"input {name!r} (#{index})"


def check_input_count(tensors, num_inputs: int, names: list[str]) -> None:
    if len(tensors) != num_inputs:
        # cut and escaped: a signature may list 10,000 inputs of 1,024 characters, and names without a signature are
        # the pytree's keys, any string
        listing = f" ({clipped(terminal_safe(', '.join(names[:100])), 1000)})" if names else ""
        raise InputError(f"the program takes {num_inputs} tensor input(s){listing}, got {len(tensors)}; "
                         "pass exactly those, in that order (or as the exported module's arguments)")


def check_inputs(tensors, specs: list[TensorSpec] | None, names: list[str], device: torch.device,
                 num_inputs: int, mutated: frozenset[int] = frozenset()) -> tuple[list[torch.Tensor], dict[str, int]]:
    """Check the flat input tensors; return them ready to run (in the layout the generated code reads,
    see the module docstring) and the value of every shape symbol.

    ``mutated``: the inputs the program writes in place. Those must be writable as eager writes them
    (see ``check_mutated_inputs``); a copy made for the layout is written back by ``copies_back``.

    Raises InputError naming the first bad input and the fix.
    """
    if len(tensors) != num_inputs:
        check_input_count(tensors, num_inputs, [spec.name for spec in specs] if specs else names)
    bindings, bound_by, everything = {}, {}, (specs, names, tensors)
    for index, tensor in enumerate(tensors):
        label = _label(specs, names, index)
        if not isinstance(tensor, torch.Tensor):
            raise _not_a_tensor(tensor, specs[index] if specs else None, label, device)
        _check_tensor_on_device(tensor, device, label, InputError, f"move it there first, e.g. tensor.to({str(device)!r})")
        if specs:
            _check_tensor(tensor, specs[index], label, bindings, bound_by, everything)
    if specs:
        _check_derived_dims(tensors, specs, bindings, names)
    if mutated:
        check_mutated_inputs(tensors, mutated, specs, names)
    prepared = list(tensors)
    for index, tensor in enumerate(tensors):
        spec = specs[index] if specs else None
        # The common case, checked inline (each call pays it): plain values, a contiguous program and input.
        if tensor.is_neg() or tensor.is_conj() or not (spec is None or (spec.contiguous and tensor.is_contiguous())):
            prepared[index] = _in_exported_layout(tensor, spec, bindings, _label(specs, names, index))
    return prepared, bindings


def check_mutated_inputs(tensors, mutated: frozenset[int], specs, names) -> None:
    """Refuse, as eager does, inputs that the program's in-place write cannot update: elements that share
    memory (expand(); other strides that overlap, ``elements_overlap``, which eager writes in an order of its own), a
    leaf that requires grad or a view of one (with grad on), an inference tensor outside inference mode; and an input
    written in place that shares memory with another input (eager's result then depends on the order of reads and
    writes, the generated code's on its fusion)."""
    for index in sorted(mutated):
        tensor, label = tensors[index], _label(specs, names, index)
        # eager writes such a one element by element, the program a copy, copied back over itself
        if shares_own_elements(tensor):
            raise InputError(f"{label} is written in place by the program, but its elements share memory (shape "
                             f"{tuple(tensor.shape)}, strides {tensor.stride()}, e.g. from expand() or as_strided()), "
                             "so what it holds after the write depends on the order of the writes; pass "
                             "tensor.clone() (eager refuses a stride of 0, and writes other overlapping strides in "
                             "an order of its own)")
        leaf = _grad_leaf(tensor)
        if leaf:
            raise InputError(f"{label} is written in place by the program, but it is {leaf} that requires "
                             "grad; call under torch.no_grad(), or pass tensor.detach() (same memory)")
        if tensor.is_inference() and not torch.is_inference_mode_enabled():
            raise InputError(f"{label} is written in place by the program, but it is an inference tensor and "
                             "inference mode is off; call under torch.inference_mode(), or pass tensor.clone()")
        for other, value in enumerate(tensors):
            if other != index and shares_memory(tensor, value):
                raise InputError(f"{label} is written in place by the program and shares memory with "
                                 f"{_label(specs, names, other)}; pass separate tensors (e.g. clone one)")


def _grad_leaf(tensor: torch.Tensor) -> str | None:
    """What makes an in-place write of ``tensor`` an error in eager with grad on, said for a message: a leaf that
    requires grad, or a view of one (a parameter's slice: eager refuses it too, and a write there changed the
    parameter behind autograd's back); None where eager writes it."""
    if not (tensor.requires_grad and torch.is_grad_enabled()):
        return None
    if tensor.is_leaf:
        return "a leaf tensor"
    base = tensor._base
    return "a view of a leaf tensor (a parameter's slice, w[:])" if base is not None and base.is_leaf else None


GPU_ALIGN_BYTES = 16  # Inductor's (utils.GPU_ALIGN_BYTES): the alignment its CUDA code assumes of an input


def aligned_written_inputs(prepared: list, written) -> list:
    """``prepared`` with each written input not 16-byte aligned replaced by an aligned copy (``copies_back`` writes it
    back). AOTInductor's CUDA code runs on a clone of an input less aligned than its example was
    (cpp_wrapper_gpu.codegen_inputs), so a program's in-place write went to the clone: ``cache = buf[1:]`` kept its
    values (the H200, torch 2.11). The CPU code reads any address."""
    copies = None
    for index in written:
        tensor = prepared[index]
        if tensor.data_ptr() % GPU_ALIGN_BYTES:
            copies = copies if copies is not None else list(prepared)
            copies[index] = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                                                device=tensor.device).copy_(tensor)
    return prepared if copies is None else copies


def copies_back(originals: list[torch.Tensor], prepared: list[torch.Tensor], indices, changed_only: bool = False):
    """The copies of each written input that was laid out anew (a copy) back into the caller's tensor, whatever
    its layout (transposed, strided, a negation or conjugation view), as eager's in-place op would have updated
    it: a lazy ``map`` made before the run, which ``list(back)`` runs after it in one C call (None: nothing to
    copy). Made before, so that the finally of a call copies back with no Python call in between, where a signal's
    handler could raise first and leave the caller's tensor without the run's write. Inputs that no in-place op
    could write (elements sharing memory, by a stride of 0 or by strides that overlap, ``elements_overlap``; an
    inference tensor outside inference mode) are skipped: check_mutated_inputs refuses those, by the same rule, when
    the program is known to write them, so here they are inputs the program only reads (packages that do not say;
    one that did write such an input leaves the caller's memory as it was, where a copy back over itself left each
    element with whichever write came last).

    ``changed_only``: for a package that does not say which inputs its program writes (``indices`` is then every
    input), copy back only a copy whose bits the run changed. An input it only reads is then never written: the copy
    back wrote each one's own values into the caller's memory, and where that memory is read-only (a NumPy memory map,
    ``np.load(..., mmap_mode="r")``, under a negation view or a bool mask) the process ended with SIGSEGV where eager
    only reads it (breakcall, 2026-12-07). The comparison is lazy too, of C iterators over views made here, so that
    ``list(back)`` still runs in one C call."""
    targets, sources, before, after = [], [], [], []
    for index in indices:
        original, copy = originals[index], prepared[index]
        if copy is original or shares_own_elements(original) or (  # the rule check_mutated_inputs refuses by
                original.is_inference() and not torch.is_inference_mode_enabled()):
            continue
        # detach(): the write of no_grad (a leaf that requires grad: eager refuses the write, check_mutated_inputs
        # too), the same memory and version counter, with no context manager to leave after the run
        targets.append(original.detach())
        sources.append(copy)
        if changed_only:  # the copy's bits after the run against the original's, which the run did not touch
            bits = _bits_pair(original, copy)
            before.append(bits[0])
            after.append(bits[1])
    if not targets:
        return None
    if not changed_only:
        return map(torch.Tensor.copy_, targets, sources)
    changed = map(operator.not_, map(torch.equal, before, after))  # bitwise: -0.0 is not 0.0, a nan is itself
    return itertools.starmap(torch.Tensor.copy_, itertools.compress(zip(targets, sources), changed))


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def as_bits(tensor: torch.Tensor) -> torch.Tensor:
    """An integer view of ``tensor``'s bits, for bitwise comparisons (-0.0 is not 0.0, a nan equals its own bits): a
    complex tensor as its real pairs'. Raises KeyError for an element size without an integer dtype, RuntimeError where
    torch cannot view it so (a layout the view cannot keep)."""
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.view(_BITS[tensor.element_size()])
_UNEQUAL = (torch.zeros(1, dtype=torch.uint8), torch.ones(1, dtype=torch.uint8))  # "changed": copied back


def _bits_pair(original: torch.Tensor, copy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(original, copy) as integer views of their bits, for a bitwise comparison: views, except for an original with a
    negation or conjugation bit, whose values are resolved now (a copy of that input, before the run, which does not
    write it). A dtype without an integer of its size is compared as changed (copied back, as before)."""
    try:
        if original.is_neg() or original.is_conj():
            original = original.resolve_conj().resolve_neg()
        return as_bits(original), as_bits(copy)
    except (KeyError, RuntimeError, TypeError):
        return _UNEQUAL


# --- memory overlap ---------------------------------------------------------------------------------------


def _byte_range(tensor: torch.Tensor) -> tuple[int, int] | None:
    """[first, last) byte of memory the tensor's elements can touch; None for an empty tensor."""
    if tensor.numel() == 0:
        return None
    span = sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride()))
    start = tensor.data_ptr()
    return start, start + (span + 1) * tensor.element_size()


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors have an element (a byte) in common. Cheap when their byte ranges are apart (the
    usual case: two comparisons); otherwise exact, so that interleaved views of one storage (x[:, ::2] and
    x[:, 1::2]) do not: by marking a's bytes in a scratch mask the size of the ranges and reading b's, or, where
    the ranges span more bytes than the elements' addresses take (a few columns of a large table: the mask was
    the table's size, 4 GiB for three (5, 4) column blocks of a (5, 2**28) table), by comparing the elements'
    addresses (``_elements_meet``), so the check costs memory in proportion to the elements, never to the span."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.device != b.device:
        return False
    range_a, range_b = _byte_range(a), _byte_range(b)
    if range_a is None or range_b is None or range_a[1] <= range_b[0] or range_b[1] <= range_a[0]:
        return False
    if a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride():
        return True
    base, span = min(range_a[0], range_b[0]), max(range_a[1], range_b[1]) - min(range_a[0], range_b[0])
    if span > _ADDRESS_BYTES * max(a.numel(), b.numel()):  # a mask larger than the elements' addresses would be
        return _elements_meet(a, b)
    mask = torch.zeros(span, dtype=torch.uint8, device=a.device)
    _bytes_of(mask, a, base).fill_(1)
    return bool(_bytes_of(mask, b, base).any())


# What _elements_meet holds per element of the smaller tensor (its address, and a sorted copy); the mask is kept where it
# is at most this per element of the larger one, whose every element _elements_meet would search (2**26 elements
# strided through a 512 MiB storage: 6 s of searches where the mask took 0.4 s)
_ADDRESS_BYTES = 16
_CHUNK = 1 << 20  # elements of the larger tensor whose addresses are made at once


def _elements_meet(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether an element of ``a`` and one of ``b`` share a byte, from their addresses (on the CPU, whatever the
    tensors' device): the smaller tensor's element addresses, sorted, are searched for each element of the larger,
    a chunk at a time. For an element [s, s + size_a), the element of b that starts last before its end is the one
    that can reach into it (b's elements all have one size)."""
    if a.numel() < b.numel():
        a, b = b, a
    starts = _element_addresses(b, 0, b.numel()).sort().values
    size_a, size_b = a.element_size(), b.element_size()
    for first in range(0, a.numel(), _CHUNK):
        element = _element_addresses(a, first, min(first + _CHUNK, a.numel()))
        before = torch.searchsorted(starts, element + size_a) - 1  # the last start below each element's end
        if bool(((before >= 0) & (starts[before.clamp(min=0)] + size_b > element)).any()):
            return True
    return False


def _element_addresses(tensor: torch.Tensor, first: int, stop: int) -> torch.Tensor:
    """The addresses (int64, on the CPU) of the tensor's elements ``first`` to ``stop`` in row-major order."""
    index = torch.arange(first, stop, dtype=torch.int64)
    address = torch.full_like(index, tensor.data_ptr())
    for size, stride in zip(reversed(tensor.shape), reversed(tensor.stride())):
        address += (index % size) * (stride * tensor.element_size())
        index = index.div(size, rounding_mode="floor")
    return address


def not_a_tensor_error(value, spec: TensorSpec | None, label: str, device: torch.device) -> InputError:
    """The InputError for ``value`` (a list, a NumPy array, a number) where the program takes a tensor: the Program's
    own check of a list given where the input spec has a tensor uses it too (``_not_a_tensor``)."""
    return _not_a_tensor(value, spec, label, device)


def _bytes_of(mask: torch.Tensor, tensor: torch.Tensor, base: int) -> torch.Tensor:
    """The bytes of ``mask`` (which starts at address ``base``) that ``tensor``'s elements occupy."""
    item = tensor.element_size()
    return mask.as_strided((*tensor.shape, item), (*(stride * item for stride in tensor.stride()), 1),
                           tensor.data_ptr() - base)


def _not_a_tensor(value, spec: TensorSpec | None, label: str, device: torch.device) -> InputError:
    """The InputError for an input that is not a tensor, with the tensor the program wants there: its shape,
    dtype and device, and a conversion that gives that tensor (``torch.as_tensor(3)`` has shape (), not the
    (1,) a program may take; None is a missing input, not a value to convert)."""
    on = "" if device.type == "cpu" else f", device={str(device)!r}"
    wanted = (f"a tensor of shape {spec.shape_text()} and dtype {spec.dtype} on {device}" if spec is not None
              else f"a tensor on {device}")
    if value is None:  # passed as None (a left-out argument is the keywords' error): forward's None branch, if any,
        # was not traced (export follows the example's tensor), so no call can reach it in this package
        name = spec.name if spec is not None and spec.name.isidentifier() else None
        return InputError(f"{label} is None, but the program was lowered with a tensor there, so it takes {wanted}: "
                          f"a branch of forward for None (`if {name or 'x'} is None:`) is not in the package; pass "
                          f"that tensor, or lower again with {f'{name}=None' if name else 'None there'} for a package "
                          "of that branch")
    example = None
    static = spec is not None and all(dim.size is not None for dim in spec.dims)
    if spec is not None and isinstance(value, (bool, int, float, complex)):
        shape = tuple(dim.size for dim in spec.dims)
        if static and all(size == 1 for size in shape):  # one element: the value in as many brackets as dims
            example = f"torch.tensor({'[' * len(shape)}{value!r}{']' * len(shape)}, dtype={spec.dtype}{on})"
        elif static:
            example = f"torch.full({shape!r}, {value!r}, dtype={spec.dtype}{on})"
    elif spec is not None:  # a list, a numpy array: its own shape, which must be the wanted one
        example = f"torch.as_tensor(value, dtype={spec.dtype}{on})"
    else:
        example = f"torch.as_tensor(value{on})"
    return InputError(f"{label} must be a torch.Tensor, got {type(value).__name__}; the program takes {wanted}"
                      + (f", e.g. {example}" if example else ""))


def _check_tensor_on_device(value, device: torch.device, label: str, error: type, fix: str) -> None:
    if not isinstance(value, torch.Tensor):  # inputs: _not_a_tensor, first
        raise error(f"{label} must be a torch.Tensor, got {type(value).__name__}; allocate one, e.g. with torch.empty")
    if value.is_nested:  # strided ones pass the layout test, then fail in torch ("doesn't support sizes")
        raise error(f"{label} is a nested tensor (torch.nested), but the program takes dense tensors of one shape; "
                    "pass a dense one, e.g. torch.nested.to_padded_tensor(tensor, 0.0), or each component in a call")
    if value.layout != torch.strided:
        raise error(f"{label} is a {value.layout} tensor, but the program works on dense (strided) tensors; "
                    "pass a dense one, e.g. tensor.to_dense()")
    if value.device != device:
        raise error(f"{label} is on {value.device}, but the program runs on {device}; {fix}")
    fault = memory_fault(value)
    if fault is not None:
        raise error(f"{label} {fault}; the program reads and writes its tensors as plain memory: pass a plain tensor "
                    "holding the values (a DTensor's .full_tensor()), and call the program outside torch.func "
                    "transforms and FakeTensorMode")


def memory_fault(tensor: torch.Tensor) -> str | None:
    """Why the generated code cannot use the tensor's elements as plain memory through its data pointer, or None.

    A tensor subclass or wrapper (FakeTensor, DTensor, a functional tensor, the tensors inside torch.func's
    grad and vmap) has no storage of its elements, or one on meta, and a storage resized below its elements
    (``tensor.untyped_storage().resize_(0)``) holds fewer bytes than the tensor spans: the generated code
    would read or write through a null or short pointer (a segmentation fault, or other memory).
    """
    try:
        storage = tensor.untyped_storage()
        address, held = storage.data_ptr(), storage.nbytes()  # a wrapper's "invalid python storage" raises here
    except (RuntimeError, NotImplementedError) as exc:  # or here: "Cannot access storage of TensorWrapper"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"is a {type(tensor).__name__} without memory of its own (a tensor subclass or wrapper: "
                f"{clipped(first, 100)})")
    if storage.device != tensor.device:
        return f"is a {type(tensor).__name__} whose memory is on {storage.device}, not {tensor.device}"
    if tensor.numel() == 0:
        return None
    span = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    need = (tensor.storage_offset() + span + 1) * tensor.element_size()
    if not address or held < need:
        return f"spans {need} bytes of its storage, which holds {held} (a storage resized below its elements)"
    return None


def _in_exported_layout(tensor: torch.Tensor, spec: TensorSpec | None, bindings: dict[str, int],
                        label: str) -> torch.Tensor:
    """The tensor as the generated code reads it: no negation/conjugation bit, and the exported strides
    (contiguous for most programs). Unsigned packages (spec None) keep their layout: AOTI's own input
    checks compare the strides there."""
    if tensor.is_neg() or tensor.is_conj():
        _check_room_for_a_copy(tensor, label)
        tensor = tensor.resolve_conj().resolve_neg()
    if spec is None:
        return tensor
    if spec.contiguous:
        if tensor.is_contiguous():
            return tensor
        _check_room_for_a_copy(tensor, label)
        return tensor.contiguous()
    strides = [evaluate_dim(stride, bindings) for stride in spec.strides] if spec.strides else [None]
    if None in strides or _has_strides(tensor, strides):
        return tensor  # an older package without strides: the layout cannot be checked
    if max(strides) > INT64_MAX:  # torch's raw TypeError from empty_strided, with its C++ stack trace, at each call
        raise PackageError(f"{label}: the package's signature gives it the strides {clipped(str(tuple(strides)), 200)} "
                           "at these sizes, past the int64 a stride is: no program has them, so the package is damaged "
                           "or was altered; lower the model again")
    _check_room_for_a_copy(tensor, label)
    try:
        return torch.empty_strided(tensor.shape, strides, dtype=tensor.dtype, device=tensor.device).copy_(tensor)
    except RuntimeError as exc:  # e.g. exported strides of 0 (an expanded example) and values that differ
        raise InputError(f"{label} cannot be laid out with the strides {tuple(strides)} that the program was "
                         f"exported with ({exc}); re-export with a contiguous example input") from exc


_ROOM_ASKED_FROM = 1 << 28  # a copy below 256 MiB is made without asking the system for its free memory


def _check_room_for_a_copy(tensor: torch.Tensor, label: str) -> None:
    """Refuse a copy into the exported layout that would take more than half the memory available on the tensor's
    device. The copy holds every element, whatever memory the tensor holds: an expanded tensor (stride 0) of 16
    bytes, with 4e8 rows for an unbounded dim, made the runtime allocate 6.4 GB to sum it (eager sums it without a
    copy), one of 2e9 rows raised torch's raw allocation error, and sizes in between push the machine into swap
    or the OOM killer."""
    need = tensor.numel() * tensor.element_size()
    if need < _ROOM_ASKED_FROM:
        return
    available = available_bytes(tensor.device)
    if available is not None and need > available // 2:
        raise InputError(f"{label} (shape {clipped(tuple(tensor.shape), 120)}, strides {clipped(tensor.stride(), 120)}) "
                         f"is not in the layout the program reads, and copying it there would take {need / 2**30:.1f} "
                         f"GiB, more than half the memory available on {tensor.device} ({available / 2**30:.1f} GiB); "
                         "pass a tensor you hold in that layout (contiguous for most programs), or a smaller one")


def _has_strides(tensor: torch.Tensor, strides: list[int]) -> bool:
    """Whether the tensor has these strides where they matter (dims of size 1 are read at index 0 only)."""
    return all(size <= 1 or have == want for size, have, want in zip(tensor.shape, tensor.stride(), strides))


def _check_tensor(tensor, spec: TensorSpec, label: str, bindings: dict, bound_by: dict, everything=None) -> None:
    """``everything``: (every input's spec, names, the call's inputs), read only to word a refusal
    (``_broadcast_refusal``)."""
    if tensor.dtype != spec.dtype:
        raise InputError(f"{label} has dtype {tensor.dtype}, but the program was exported with {spec.dtype}; "
                         f"{dtype_fix(tensor, spec)}")
    if tensor.dim() != spec.rank:
        # a served request's shape may have any number of dims: show a few, not 480,000
        shape = tuple(tensor.shape) if tensor.dim() <= 8 else f"({', '.join(map(str, tensor.shape[:8]))}, ...)"
        raise InputError(f"{label} has {tensor.dim()} dim{'' if tensor.dim() == 1 else 's'} (shape {shape}), "
                         "but the program takes "
                         f"{spec.rank} (shape {spec.shape_text()}); pass a tensor of that shape")
    for axis, (size, dim) in enumerate(zip(tensor.shape, spec.dims)):
        where = f"{label} dim {axis} is {size}"
        if dim.size is not None:
            if size != dim.size:
                raise InputError(f"{where}, but the program was exported with size {dim.size} there (shape "
                                 f"{spec.shape_text()}); pass that size, or re-export with a torch.export.Dim there",
                                 advice=(Advice("dynamic_shapes", "dynamic there", relower=True),))
            continue
        past = "min" if size < dim.min else "max" if dim.max is not None and size > dim.max else None
        if past is not None and dim.narrowed and (dim.narrowed_bounds is None or past in dim.narrowed_bounds):
            raise InputError(f"{where}, outside the exported range [{dim.min}, "
                             f"{'inf' if dim.max is None else dim.max}] of {dim.shown}, which lowering narrowed from "
                             f"the range it was asked ({dim.narrowed}); pass a size in that range, or lower "
                             "another program for those sizes")
        if size == 1 < dim.min and everything is not None and _is_symbol(dim.expr):
            refusal = _broadcast_refusal(tensor, spec, axis, where, *everything)
            if refusal is not None:
                raise refusal
        if size < dim.min and _is_auto_dim(dim):
            raise InputError(f"{where}, outside the exported range [2, {'inf' if dim.max is None else dim.max}] of "
                             f"that dim (torch's symbol {dim.expr}): torch.export specializes sizes 0 and 1, so a dim "
                             "exported with Dim.AUTO or Dim.DYNAMIC starts at 2. To take a size of 1, re-export with "
                             f"torch.export.Dim({_dim_name(spec, axis)!r}, min=1) for that dim in dynamic_shapes (where "
                             f"{spec.name!r} is forward's argument itself, not a leaf of a nested input: "
                             f"dynamic_shapes={{{spec.name!r}: {{{axis}: torch.export.Dim({_dim_name(spec, axis)!r}, "
                             f"min=1)}}}}; a named Dim keeps its min; min=0 for empty tensors too)",
                             advice=(Advice("dynamic_shapes", "wider", relower=True),))
        if size < dim.min or (dim.max is not None and size > dim.max):
            raise InputError(f"{where}, outside the exported range [{dim.min}, "
                             f"{'inf' if dim.max is None else dim.max}] of {dim.shown}; pass a size in that range, "
                             "or re-export with a wider torch.export.Dim",
                             advice=(Advice("dynamic_shapes", "wider", relower=True),))
        if _is_symbol(dim.expr):
            if dim.expr in bindings and bindings[dim.expr] != size:
                raise InputError(f"{where}, but it must equal {bound_by[dim.expr]} ({bindings[dim.expr]}): the "
                                 f"program was exported with both as {dim.shown}")
            bindings.setdefault(dim.expr, size)
            bound_by.setdefault(dim.expr, f"{label} dim {axis}")


def _broadcast_refusal(tensor, spec: TensorSpec, axis: int, where: str, specs, names, tensors):
    """The refusal of a size of 1 where the program's dim is a symbol another place of this call gives a larger size
    (a mask of ``[b, 1, 1, s]`` for ``[b, 1, seq, seq]``: eager's attention broadcasts it), or None where no place
    does (one token: seq is 1 everywhere, and the range advice is the right one). A new user's trial (nu40): "outside
    the exported range [2, 256] of seq; ... re-export with a wider torch.export.Dim", advice that does not help: the
    compiled program reads that dim as seq rows, whatever its range. The suggested ``expand`` fills every dim of this
    input that carries a symbol some place gives a size above 1 (review40c: one dim at a time took two refusals)."""
    full: dict[str, int] = {}  # symbol -> the size above 1 a place of this call gives it
    givers: dict[str, list[str]] = {}
    for index, (other, value) in enumerate(zip(specs, tensors)):
        if not isinstance(value, torch.Tensor) or value.dim() != len(other.dims):
            continue
        for place, (shared, size) in enumerate(zip(other.dims, value.shape)):
            if shared.expr is not None and size > 1:
                full.setdefault(shared.expr, size)
                givers.setdefault(shared.expr, []).append(
                    f"its own dim {place}" if other is spec else f"{_label(specs, names, index)} dim {place}")
    dim = spec.dims[axis]
    if dim.expr not in full:
        return None
    others = sorted(givers[dim.expr], key=lambda text: text.startswith("its own"))  # another input's first
    shape = ", ".join(str(full[shared.expr]) if size == 1 and shared.expr in full else str(size)
                      for size, shared in zip(tensor.shape, spec.dims))
    name = re.sub(r"\W+", "_", spec.name).strip("_") or "tensor"
    if not name.isidentifier():
        name = "tensor"
    return InputError(f"{where}, but the program was exported with that dim equal to {dim.shown} (as "
                      f"{', '.join(others[:3])} of this call, of size {full[dim.expr]}), in [{dim.min}, "
                      f"{'inf' if dim.max is None else dim.max}]: the compiled program does not broadcast a size of 1 "
                      f"there, as eager may. Pass it at full size, {name}.expand({shape}), or lower the model with "
                      "that dim as 1 if the model broadcasts it")


def _is_auto_dim(dim) -> bool:
    """A dim of Dim.AUTO or Dim.DYNAMIC: torch's own symbol (no Dim name recorded) whose range starts at 2, where
    export puts it. A new user's trial (2026-12-07): a call of size 1 read "outside the exported range [2, inf] of
    s77 ... re-export with a wider torch.export.Dim", naming neither why 2 nor the Dim that takes 1."""
    return dim.user_expr is None and dim.min == 2 and _is_symbol(dim.expr)


def _dim_name(spec: TensorSpec, axis: int) -> str:
    base = re.sub(r"\W+", "_", spec.name).strip("_") or "input"
    return f"{base}_dim{axis}"


def _check_derived_dims(tensors, specs, bindings: dict, names) -> None:
    """Dims like ``2*s0`` or ``160*frames + 1`` must equal their expression of the program's symbols.

    A symbol that no plain dim binds (``audio`` of shape ``[1, 160*frames]``) is solved for from the size
    (``bind_derived_symbols``): a size the expression cannot take (23456 is no multiple of 160) is refused,
    since the generated code would read only ``160*frames`` of it and silently drop the rest.
    """
    _bind_derived_symbols(tensors, specs, bindings, names)
    for index, (tensor, spec) in enumerate(zip(tensors, specs)):
        for axis, dim in enumerate(spec.dims):
            if dim.expr is None or _is_symbol(dim.expr):
                continue
            expected = evaluate_dim(dim, bindings)
            if expected is None:
                raise InputError(f"{_label(specs, names, index)} dim {axis} is {tensor.shape[axis]}, but the "
                                 f"program was exported with {dim.shown} there, and aotcuda cannot tell whether "
                                 "that size fits it; re-export with a plain torch.export.Dim for that dim")
            if expected != tensor.shape[axis]:
                raise InputError(f"{_label(specs, names, index)} dim {axis} is {tensor.shape[axis]}, but the "
                                 f"program was exported with {dim.shown} = {expected} there (from the other inputs)")


def _bind_derived_symbols(tensors, specs, bindings: dict, names) -> None:
    """Solve each dim ``a*s + b`` whose one unbound symbol ``s`` no other dim gives, until none is left."""
    progress = True
    while progress:
        progress = False
        for index, (tensor, spec) in enumerate(zip(tensors, specs)):
            for axis, dim in enumerate(spec.dims):
                if dim.expr is None or _is_symbol(dim.expr):
                    continue
                unknown = _linear_unknown(dim.expr, bindings)
                if unknown is None:
                    continue
                symbol, scale, offset = unknown
                size = tensor.shape[axis]
                value, remainder = divmod(size - offset, scale)
                if remainder or value < 0:
                    fits = [offset + scale * k for k in (value, value + 1) if k >= 0]
                    raise InputError(
                        f"{_label(specs, names, index)} dim {axis} is {size}, but the program was exported with "
                        f"{dim.shown} there, which no whole value of its size symbol gives (the nearest sizes it "
                        f"takes are {' and '.join(map(str, fits))}); pad or crop the input to such a size")
                bindings[symbol] = value
                progress = True


@functools.lru_cache(maxsize=256)
def _linear_form(expr: str) -> tuple[tuple[str, int, int], ...] | None:
    """``expr`` as (symbol, scale, offset) triples, one per free symbol it is linear in with integer
    coefficients (the others held fixed), or None when it is not such an expression. Only sums, products
    and powers of symbols and integers are considered (an expression with one of torch's functions is not
    linear: differentiating or substituting into it would evaluate the function on symbols, which runs
    sympy's gcd); linear means the derivative is free of the symbol and not zero (a derivative expands
    nothing: Poly of a package's ``(s0 + ... + s9)**60`` would)."""
    import sympy

    parsed = shape_expression(expr)
    if any(not isinstance(node, (sympy.Add, sympy.Mul, sympy.Pow, sympy.Symbol, sympy.Number))
           for node in sympy.preorder_traversal(parsed)):
        return None
    forms = []
    for symbol in parsed.free_symbols:
        scale = parsed.diff(symbol)
        if scale == 0 or symbol in scale.free_symbols or scale.has(sympy.Derivative):
            return None
        forms.append((str(symbol), scale, parsed.xreplace({symbol: sympy.Integer(0)})))
    return tuple(forms)


def _linear_unknown(expr: str, bindings: dict[str, int]) -> tuple[str, int, int] | None:
    """(symbol, scale, offset) when ``expr`` has exactly one unbound symbol and is ``scale*symbol + offset``
    in it with integers once the bound ones are substituted; else None."""
    form = _linear_form(expr)
    if form is None:
        return None
    unbound = [entry for entry in form if entry[0] not in bindings]
    if len(unbound) != 1:
        return None
    symbol, scale, offset = unbound[0]
    values = {name: bindings[name] for name, _, _ in form if name in bindings}
    scale = evaluate_expression(scale, values) if hasattr(scale, "xreplace") else scale
    offset = evaluate_expression(offset, values) if hasattr(offset, "xreplace") else offset
    if not (getattr(scale, "is_Integer", False) and getattr(offset, "is_Integer", False)) or int(scale) <= 0:
        return None
    return symbol, int(scale), int(offset)


def evaluate_dim(dim: DimSpec, bindings: dict[str, int]) -> int | None:
    """The size of a dim given the input symbols' values, or None when it depends on unknown symbols or
    has no value at these sizes (a divisor of 0)."""
    if dim.size is not None:
        return dim.size
    if _is_symbol(dim.expr):
        return bindings.get(dim.expr)
    expr = shape_expression(dim.expr)
    if any(str(symbol) not in bindings for symbol in expr.free_symbols):
        return None
    try:
        value = evaluate_expression(expr, bindings)
    except EVALUATION_ERRORS:  # a package's FloorDiv(s0, s1 - 4) at s1 = 4: no size, the caller is told
        return None
    if not value.is_number:
        return None
    try:
        return int(value)
    except EVALUATION_ERRORS:
        return None


def check_caller_outputs(outputs, specs: list[TensorSpec] | None, bindings: dict[str, int],
                         device: torch.device, num_outputs: int, inputs=(), input_names=()) -> None:
    """Check caller-provided output buffers before running, as far as the signature allows.

    Raises OutputError for a wrong count, type, device, dtype, rank or (computable) size, and for buffers
    that share memory with another buffer or with an input (each result is copied into its buffer in
    turn, so a later copy would overwrite an earlier result, or an input the run still reads).
    """
    if len(outputs) != num_outputs:
        raise OutputError(f"the program has {num_outputs} outputs, got {len(outputs)} output buffers; "
                          "pass one tensor per output (Program.output_specs lists them)")
    for index, out in enumerate(outputs):
        _check_tensor_on_device(out, device, f"output buffer #{index}", OutputError,
                                f"allocate it there, e.g. torch.empty(..., device={str(device)!r})")
        _check_buffer_writable(out, index)
        if specs:
            spec = specs[index]
            shape = [evaluate_dim(dim, bindings) for dim in spec.dims]
            _check_buffer(out, index, spec.dtype, shape, spec.name)
    _check_buffers_apart(outputs, inputs, input_names)


def _check_buffers_apart(outputs, inputs, input_names) -> None:
    for index, out in enumerate(outputs):
        for other in range(index):
            if shares_memory(out, outputs[other]):
                what = "is the same tensor as" if out is outputs[other] else "shares memory with"
                raise OutputError(f"output buffer #{index} {what} output buffer #{other}; each output needs "
                                  "memory of its own (the second copy would overwrite the first result): pass "
                                  "separate tensors, e.g. torch.empty for each")
        for position, tensor in enumerate(inputs):
            if shares_memory(out, tensor):
                name = input_names[position] if position < len(input_names) else str(position)
                raise OutputError(f"output buffer #{index} shares memory with input {name!r} (#{position}); "
                                  "write the outputs into buffers apart from the inputs, e.g. torch.empty")


def _check_buffer_writable(out: torch.Tensor, index: int) -> None:
    """The result is copied into the buffer in place: refuse buffers that an in-place copy cannot write."""
    leaf = _grad_leaf(out)
    if leaf:
        raise OutputError(f"output buffer #{index} is {leaf} that requires grad, which cannot be written "
                          "in place; pass buffer.detach() (same memory), or call under torch.no_grad()")
    if out.is_inference() and not torch.is_inference_mode_enabled():
        raise OutputError(f"output buffer #{index} is an inference tensor and inference mode is off, so it cannot "
                          "be written in place; call under torch.inference_mode(), or allocate the buffer outside it")
    if shares_own_elements(out):
        raise OutputError(f"output buffer #{index} has elements that share memory (shape {tuple(out.shape)}, "
                          f"strides {out.stride()}, e.g. from expand() or as_strided()): each result copied into it "
                          "would overwrite its own elements; pass a buffer of its own, e.g. torch.empty")


def shares_own_elements(tensor: torch.Tensor) -> bool:
    """Whether two elements of ``tensor`` share memory: torch's own check answers 1 (MemOverlap::Yes, a stride of 0)
    or 2 (TooHard: not dense, where elements_overlap decides exactly). The one rule for output buffers, inputs written
    in place, and the inputs copies_back leaves."""
    overlap = torch._debug_has_internal_overlap(tensor)
    return overlap == 1 or (overlap == 2 and elements_overlap(tensor))


def elements_overlap(tensor: torch.Tensor) -> bool:
    """Whether two elements of ``tensor`` lie at one address, exactly. torch's own check answers "too hard" for every
    layout that is not dense but a stride of 0, so a buffer of ``as_strided((5, 4), (1, 1))`` passed it, and the copy
    of each result into it wrote over itself: execute() returned the caller's buffer holding no result, silently
    (break42b, 2026-12-07). The answer depends on the shape and strides alone (``_layout_overlaps``, cached)."""
    return tensor.numel() != 0 and _layout_overlaps(tuple(tensor.shape), tuple(tensor.stride()))


@functools.lru_cache(maxsize=256)
def _layout_overlaps(shape: tuple, strides: tuple) -> bool:
    """``elements_overlap`` of a non-empty layout, at a cost in proportion to its elements, never to its span (as
    ``shares_memory``): a mask of the span took 9 bytes an element of it, 2.3 GB and 4.6 s for six elements strided
    over 2**28 bytes, and a raw allocator error for 2**31 (overlap42, 2026-12-07). Strides that each pass the farthest
    offset of the smaller ones prove the elements apart at once (every other column, a slice: ~2 us); more elements
    than addresses in the span prove two at one address; otherwise the offsets are marked in a mask of the span where
    it is at most 8 bytes an element (0.9 s for 16.8 million elements, where sorting them took 2.9 s), else sorted and
    their neighbours compared. Its scratch tensors are made on the CPU whatever torch's default device is: under
    ``torch.set_default_device("meta")`` the check was a raw RuntimeError, under ``torch.device("cuda")`` a device
    sync."""
    dims = sorted((stride, size) for size, stride in zip(shape, strides) if size > 1)
    reach = 0  # the farthest offset, in elements, that the dims of smaller strides reach
    for stride, size in dims:
        if stride <= reach:
            break
        reach += (size - 1) * stride
    else:
        return False
    numel = 1
    for size in shape:
        numel *= size
    span = sum((size - 1) * stride for stride, size in dims) + 1
    if numel > span:  # pigeonhole: more elements than addresses
        return True
    offsets = torch.zeros((), dtype=torch.int64, device="cpu")
    for stride, size in dims:
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64, device="cpu") * stride
    offsets = offsets.reshape(-1)
    if span <= 8 * numel:  # a mask no larger than the offsets themselves
        mask = torch.zeros(span, dtype=torch.bool, device="cpu")
        mask[offsets] = True
        return int(mask.count_nonzero()) < numel
    ordered = offsets.sort().values
    return bool((ordered[1:] == ordered[:-1]).any())


def check_buffers_match(outputs, results) -> None:
    """After a run: every caller buffer must have its result's dtype and shape (for unsigned packages)."""
    for index, (out, result) in enumerate(zip(outputs, results)):
        if result is not None:  # a None output: nothing is written to its buffer
            _check_buffer(out, index, result.dtype, list(result.shape), f"output{index}")


def _check_buffer(out, index: int, dtype, shape: list, name: str) -> None:
    name = terminal_clipped(name, 80)  # the package's output name, quoted in the messages (break41: raw before)
    if out.dtype != dtype:
        raise OutputError(f"output buffer #{index} ({name}) has dtype {out.dtype}, but the output is {dtype}; "
                          f"allocate it with dtype={dtype}")
    if out.dim() != len(shape) or any(want is not None and want != got for want, got in zip(shape, out.shape)):
        wanted = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
        raise OutputError(f"output buffer #{index} ({name}) has shape {tuple(out.shape)}, but this call's output "
                          f"has shape {wanted}; allocate it with that shape")
