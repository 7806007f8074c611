"""Input signatures that passed every check once, so that a call repeating one skips the full checks.

``checks.check_inputs`` costs a few microseconds per input (dims against their specs, symbolic ranges,
derived dims, error labels), which is most of a plain call's host time on a small program. Every one of
those checks depends only on the inputs' signature: type, layout, dtype, device, sizes, contiguity and
the negation/conjugation bits. So a signature that passed once, and needed no layout conversion, is
remembered (keyed by the sizes; the rest must equal the exported specs), and a call that repeats it
skips straight to the run with the symbol values that the first check bound. Anything else (a new
shape, a strided view, a wrong dtype, a non-tensor) takes the full checks, which name the problem.

Only programs whose every input spec is contiguous use the cache (the usual export); a program exported
with a strided example checks each call fully, since its inputs may need a copy into that layout.
"""

from __future__ import annotations

import torch

_STRIDED = torch.strided
_Tensor, _Parameter = torch.Tensor, torch.nn.Parameter
_MAX_ENTRIES = 64  # distinct input shapes remembered; a program with more checks the rest in full


class AcceptedSignatures:
    """The input signatures of one Program that passed ``check_inputs`` without a layout conversion.

    Args:
        specs: the package's input TensorSpecs, or None for an unsigned package (then only the count,
            tensor type, layout, device and the lazy bits are what the full check looks at).
        device: the Program's device.
        num_inputs: the container's input count.
    """

    def __init__(self, specs, device: torch.device, num_inputs: int):
        # ``tensor.is_cpu``, or ``is_cuda`` and ``get_device()`` against an int, cost a third of ``tensor.device ==
        # device``, which makes a torch.device per tensor (a program's device is cpu or cuda:N: resolve_device)
        self._on_cpu = device.type == "cpu"
        self._index = -1 if self._on_cpu else device.index
        self._num_inputs = num_inputs
        # Unsigned packages keep the caller's layout (AOTI's own checks compare strides): any is fine.
        self._dtypes = None if specs is None else tuple(spec.dtype for spec in specs)
        # The conjugation bit exists only on complex tensors: a real dtype that matched needs no look at it.
        self._complex = None if specs is None else tuple(spec.dtype.is_complex for spec in specs)
        self.enabled = specs is None or all(spec.contiguous for spec in specs)
        # Read and changed without a lock (see remember): each dict operation is atomic.
        self._entries: dict[tuple, dict[str, int]] = {}

    def lookup(self, tensors: list) -> dict[str, int] | None:
        """The symbol values bound by the accepted signature these tensors repeat, or None: check fully.

        Never raises: whatever is not plainly a repeat (wrong count, a non-tensor, a sparse tensor) is
        left to the full checks, which say what is wrong.
        """
        if not self.enabled or len(tensors) != self._num_inputs:
            return None
        on_cpu, index = self._on_cpu, self._index
        try:
            if self._dtypes is None:  # unsigned: any dtype and layout (AOTI's own checks look at them)
                for tensor in tensors:
                    if ((type(tensor) is not _Tensor and type(tensor) is not _Parameter) or tensor.layout is not _STRIDED
                            or not (tensor.is_cpu if on_cpu else tensor.is_cuda and tensor.get_device() == index)
                            or tensor.is_neg() or tensor.is_conj()):
                        return None
            else:
                for tensor, dtype, is_complex in zip(tensors, self._dtypes, self._complex):
                    # torch's own types first: anything else answers what follows with its own Python (the checks
                    # name a non-tensor; plain_tensors made every tensor subclass a plain tensor before this)
                    if ((type(tensor) is not _Tensor and type(tensor) is not _Parameter) or tensor.dtype is not dtype
                            or tensor.layout is not _STRIDED
                            or not (tensor.is_cpu if on_cpu else tensor.is_cuda and tensor.get_device() == index)
                            or not tensor.is_contiguous() or tensor.is_neg() or (is_complex and tensor.is_conj())):
                        return None
            for tensor in tensors:  # its elements in memory of its own (no wrapper, FakeTensor or shrunk storage),
                storage = tensor.untyped_storage()  # else the full checks say what is wrong (checks.memory_fault);
                base = storage.data_ptr()  # a contiguous tensor ends nbytes past its pointer (signed: checked above)
                if (not base or tensor.data_ptr() + tensor.nbytes > base + storage.nbytes()
                        or (self._dtypes is None and not tensor.is_contiguous())):
                    return None
            return self._entries.get(tuple([tensor.shape for tensor in tensors]))
        except (AttributeError, TypeError, RuntimeError, NotImplementedError):
            return None

    def remember(self, tensors: list, prepared: list, bindings: dict[str, int]) -> None:
        """Record a signature that just passed the full checks, if it needed no layout conversion."""
        if not self.enabled or any(p is not t for p, t in zip(prepared, tensors)):
            return
        key = tuple([tensor.shape for tensor in tensors])
        # No lock: a call made by a signal's handler while this thread held it (a handler runs between bytecodes, in
        # here too) waited for it for ever, and a lock taken by a call can stay taken when an interrupt comes as that
        # call returns. Each dict operation is atomic; two threads evicting at once pop one key once (pop with a
        # default: the KeyError of issue 26, item 6) and may leave the cache an entry or two over its size.
        entries = self._entries
        if key not in entries and len(entries) >= _MAX_ENTRIES:
            try:
                oldest = next(iter(entries))
            except (StopIteration, RuntimeError):  # emptied, or changed by another thread meanwhile
                oldest = None
            entries.pop(oldest, None)
        entries[key] = bindings

    def clear(self) -> None:
        self._entries.clear()
