"""Zero-copy CUDA graphs: one captured graph bound to caller-owned static input (and output) buffers.

    bound = program.bind([tokens, position])          # capture on these tensors; they stay the caller's
    for step in range(n):
        tokens.copy_(next_tokens); position.fill_(step)  # write the next inputs in place
        logits, = bound.replay()                      # one graph launch: no checks, no copies
        ...                                           # read the outputs before the next replay

A graph reads its inputs from, and writes its outputs to, the addresses it was captured with. The
automatic graphs of ``load(..., cuda_graphs=True)`` therefore copy every input into their own buffers
and every output out of theirs, each call: for a memory-bound program that is three passes over the data
instead of one. A bound graph is captured on the CALLER's input tensors, so nothing is copied in: the
caller writes into those tensors (``tensor.copy_``, ``fill_``, or a kernel writing there) and replays.
The outputs are the graph's static output tensors (``bound.outputs``), overwritten by every replay; or,
with ``outputs=[...]`` given to ``bind``, the caller's buffers, which the graph itself fills at the end of
each replay (a device copy inside the graph, no host work). A slot where forward returns one of its inputs
(``return y, x``, ``x.add_(1); return x``) holds the caller's input tensor itself, as a call's does
(``aotcuda.runtime.returned_inputs``): every replay reads, and writes, that tensor in place.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from aotcuda.errors import InputError, RuntimeCallError
from aotcuda.runtime.checks import check_buffers_match
from aotcuda.runtime.graphs import capture
from aotcuda.runtime.returned_inputs import with_returned_inputs
from aotcuda.runtime.shared_results import with_shared_results


class BoundGraph:
    """A CUDA graph of one Program bound to fixed input and output tensors. Build it with ``Program.bind``.

    Attributes:
        inputs: the caller's input tensors, in the container's order (``Program.input_names``), that every
            replay reads in place.
        outputs: one tensor per output slot that every replay writes: the caller's buffers when bound,
            else the graph's own static outputs (slots that return one tensor share one; a slot that returns an
            input holds the caller's input tensor).
        graph: the ``torch.cuda.CUDAGraph``.
        program: the Program it was bound from (kept alive by the bound graph; closing it closes this).
    """

    program = None

    def __init__(self, inputs: list[torch.Tensor], outputs: list, graph: torch.cuda.CUDAGraph,
                 structure: Callable[[list], object], is_open: Callable[[], bool], keep_alive: list):
        self.inputs, self.outputs, self.graph = tuple(inputs), list(outputs), graph
        self._structured = structure(self.outputs)
        self._is_open = is_open
        self._keep_alive = keep_alive  # the graph's own outputs when copied into caller buffers

    def replay(self):
        """Launch the graph on the current CUDA stream; return ``outputs`` structured like the module's
        outputs (the same tensors every time, overwritten by the next replay: copy what must be kept).

        Raises RuntimeCallError when the Program or this bound graph was closed.
        """
        graph = self.graph
        if graph is None or not self._is_open():
            raise RuntimeCallError("this bound graph was closed (BoundGraph.close or Program.close); bind again "
                                   "on a loaded Program")
        graph.replay()
        return self._structured

    def close(self) -> None:
        """Free the graph and drop the references to the bound tensors (idempotent)."""
        self.graph, self._keep_alive, self._structured, self.program = None, [], None, None

    def __enter__(self) -> BoundGraph:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def bind_graph(run, device: torch.device, inputs: list[torch.Tensor], prepared: list[torch.Tensor], names,
               outputs: list | None, warmup_calls: int, adapt_outputs: Callable[[list], list],
               structure: Callable[[list], object], is_open: Callable[[], bool],
               returned: tuple[tuple[int, int], ...] = (), callers: list | None = None,
               shared: tuple[tuple[int, int], ...] = ()) -> BoundGraph:
    """Warm up, capture and bind (``Program.bind`` checks the arguments first).

    Args:
        run: the Program's run (``run(inputs, stream=None, single_threaded=False)``).
        inputs: the caller's tensors; prepared: what the container reads (the same memory: pairs of
            complex inputs are views), after the input checks.
        outputs: None, or checked caller buffers, one per output slot.
        adapt_outputs: the container's outputs in the caller's terms (complex views of pairs).
        returned: (output slot, input index) of the outputs that are inputs (``returned_inputs``): without caller
            buffers, those slots hold the caller's own tensor, ``callers[index]`` (the caller's objects, before any
            plain alias of a subclass; default ``inputs``), as a call's do.
        shared: (output slot, earlier slot) of the slots that hold one result (``shared_results``): without caller
            buffers, they hold one tensor object, as a call's do.

    Raises OutputError when a caller buffer does not match its output, InputError when an input would need a copy into the exported layout (a graph reads the memory
    it was captured on, so a copy would never see the caller's later writes), RuntimeCallError when the
    capture fails.
    """
    for index, (tensor, ready) in enumerate(zip(inputs, prepared)):
        if ready.data_ptr() != tensor.data_ptr() or ready.stride() != _pair_strides(tensor, ready):
            name = names[index] if index < len(names) else str(index)
            raise InputError(f"bind() reads input {name!r} (#{index}) in place, but it is not in the layout the "
                             f"program was exported with (strides {tuple(tensor.stride())}), so it would be "
                             "copied; bind a tensor in that layout, e.g. x.contiguous(), and write into it")
    if device.type != "cuda":
        raise RuntimeCallError(f"bind() captures a CUDA graph; this Program runs on {device}. Call the Program "
                               "directly on the CPU.")
    for _ in range(max(1, warmup_calls)):  # lazy work (kernel loading, cuBLAS handles) outside the capture
        results = run(prepared)
    if outputs is not None:  # unsigned packages: sizes are known only now, before anything is captured
        check_buffers_match(outputs, adapt_outputs(results))
    keep_alive: list = []

    def copy_out(results):
        if outputs is not None:
            for buffer, result in zip(outputs, adapt_outputs(results)):
                buffer.copy_(result)

    graph, results = capture(run, device, prepared, then=copy_out if outputs is not None else None)
    if outputs is None:  # an input returned: the caller's tensor, which each replay reads and writes in place
        bound_outputs = with_returned_inputs(adapt_outputs(results), inputs if callers is None else callers, returned)
        bound_outputs = with_shared_results(bound_outputs, shared)
    else:
        keep_alive, bound_outputs = results, outputs
    return BoundGraph(inputs, bound_outputs, graph, structure, is_open, keep_alive)


def _pair_strides(tensor: torch.Tensor, ready: torch.Tensor) -> tuple:
    """The strides ``ready`` has when it is ``tensor`` itself, or the view_as_real pair of a complex one."""
    if tensor.is_complex() and not ready.is_complex():
        return (*[2 * s for s in tensor.stride()], 1)
    return tensor.stride()
