"""CUDA graphs for a loaded Program: warm-up calls, capture, replay, one graph per input shape.

Per input signature (the shapes and dtypes of the call's inputs):
  * the first ``warmup_calls`` calls (3) run eagerly, so that lazy work (kernel loading from the cubins,
    cuBLAS handles, the caching allocator's first blocks) happens outside the capture;
  * the next call copies its inputs into static input buffers and captures one run of the model
    (``AOTInductorModelContainerRunSingleThreaded`` on a side stream, ``torch.cuda.CUDAGraph``), then
    replays the graph once to compute that call's outputs;
  * every later call copies its inputs into the static buffers and replays.
The outputs of a replay live in the graph's static output buffers, which the next replay overwrites; the
Program returns COPIES of them (slots that share one tensor still share one copy) or copies them into
the caller's buffers. A new input shape starts its own warm-up and capture; at most ``max_graphs``
graphs are kept (least recently used goes first). A failed capture raises RuntimeCallError, releases
every output handle once (ownership rule), and that shape runs eagerly from then on.

Inputs the program writes in place (``mutated``) are written into the static input buffers by a
replay; each replay copies them back into the call's own inputs, as an eager run writes them.

Threads: calls of a Program with CUDA graphs run one at a time (a lock), warm-up calls included: a
graph has one set of static buffers, and the container's single-threaded run (which the capture uses)
takes its one model without the container's lock, so it must not overlap a pooled run. The copy of the
results out of the static buffers (``finish``) happens under the lock too, and on the GPU the next call
waits for the previous call's copy (an event), whichever stream each call runs on. The capture uses
``capture_error_mode="thread_local"``, so that other threads' CUDA work (other Programs) does not
invalidate it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from aotcuda.errors import RuntimeCallError
from aotcuda.runtime.checks import write_back

RunFn = Callable[..., list]  # run(inputs, stream=None, single_threaded=False) -> list[Tensor | None]


@dataclass
class _ShapeState:
    calls: int = 0
    eager_only: bool = False
    graph: torch.cuda.CUDAGraph | None = None
    static_inputs: list[torch.Tensor] = field(default_factory=list)
    static_outputs: list[torch.Tensor | None] = field(default_factory=list)


def shape_key(inputs: list[torch.Tensor]) -> tuple:
    return tuple((tuple(t.shape), t.stride(), t.dtype) for t in inputs)


class GraphRunner:
    """Runs a model through CUDA graphs, per input shape (see the module docstring).

    Args:
        run: the Program's eager run: ``run(inputs, stream=None, single_threaded=False)`` returning one
            tensor per output slot (slots that share a handle share one tensor).
        device: the CUDA device.
        warmup_calls: eager calls per shape before the capture.
        max_graphs: graphs kept at most.
        mutated: indices of the inputs the program writes in place (copied back after each replay).
    """

    def __init__(self, run: RunFn, device: torch.device, warmup_calls: int = 3, max_graphs: int = 8,
                 mutated: frozenset[int] = frozenset()):
        self._run, self.device = run, device
        self.warmup_calls, self.max_graphs = warmup_calls, max_graphs
        self.mutated = mutated
        self._states: OrderedDict[tuple, _ShapeState] = OrderedDict()
        self._lock = threading.Lock()
        self._outputs_read: torch.cuda.Event | None = None  # recorded after the last call's finish()

    def __call__(self, inputs: list[torch.Tensor], finish: Callable[[list, bool], list]) -> list:
        """Run once and return ``finish(outputs, static)``: static is True when the outputs are the graph's
        buffers, which finish must copy (it runs under the lock, before the next replay can start)."""
        with self._lock:
            state = self._state_for(shape_key(inputs))
            if state.graph is None and (state.eager_only or state.calls < self.warmup_calls):
                state.calls += 1
                return finish(self._run(inputs), False)
            return self._graph_call(state, inputs, finish)

    def _graph_call(self, state: _ShapeState, inputs, finish) -> list:
        """Replay (capturing first if needed), write back mutated inputs, finish; under the lock."""
        stream = torch.cuda.current_stream(self.device)
        if self._outputs_read is not None:
            stream.wait_event(self._outputs_read)
        if state.graph is not None:
            outputs = self._replay(state, inputs)
        else:
            self._capture(state, inputs)
            outputs = list(state.static_outputs)
        write_back(inputs, state.static_inputs, self.mutated)
        result = finish(outputs, True)
        self._outputs_read = torch.cuda.Event()
        self._outputs_read.record(stream)
        return result

    @property
    def num_graphs(self) -> int:
        return sum(state.graph is not None for state in self._states.values())

    def _state_for(self, key: tuple) -> _ShapeState:
        if key in self._states:
            self._states.move_to_end(key)
            return self._states[key]
        while self.max_graphs > 0 and len(self._states) >= self.max_graphs:
            self._states.popitem(last=False)
        self._states[key] = state = _ShapeState()
        return state

    def _replay(self, state: _ShapeState, inputs) -> list:
        for static, new in zip(state.static_inputs, inputs):
            static.copy_(new)
        state.graph.replay()
        return list(state.static_outputs)

    def _capture(self, state: _ShapeState, inputs) -> None:
        static_inputs = [t.clone() for t in inputs]
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        try:
            capture = torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local")
            with torch.cuda.device(self.device), capture:
                # A failing run releases its output handles itself (ownership rule); after a successful
                # one the tensors own them, and dropping them below releases each handle once.
                static_outputs = self._run(static_inputs, stream=side.cuda_stream, single_threaded=True)
        except Exception as exc:
            state.eager_only = True
            raise RuntimeCallError(
                f"capturing the model into a CUDA graph failed: {exc}. Calls of this input shape now run "
                "without a graph; load with cuda_graphs=False to skip capturing."
            ) from exc
        state.graph, state.static_inputs, state.static_outputs = graph, static_inputs, static_outputs
        graph.replay()

    def clear(self) -> None:
        """Drop every graph and its static buffers."""
        with self._lock:
            self._states.clear()
