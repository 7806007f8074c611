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
the caller's buffers. A call whose inputs ARE the static input buffers skips their copy.

Zero copy: ``Program.bind`` (``BoundGraph`` below) captures one graph on the caller's own input tensors:
the caller writes new inputs into them in place and calls ``replay()``, which is one graph launch and
nothing else; the outputs are read from the graph's static output buffers (or, when the caller binds
output buffers, copied into them by the graph itself). A new input shape starts its own warm-up and capture; at most ``max_graphs``
graphs are kept (least recently used goes first). A failed capture raises RuntimeCallError, releases
every output handle once (ownership rule), and that shape runs eagerly from then on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from aotcuda.errors import RuntimeCallError

RunFn = Callable[..., list]  # run(inputs, stream=None, single_threaded=False) -> list[Tensor | None]


@dataclass
class _ShapeState:
    calls: int = 0
    eager_only: bool = False
    graph: torch.cuda.CUDAGraph | None = None
    static_inputs: list[torch.Tensor] = field(default_factory=list)
    static_outputs: list[torch.Tensor | None] = field(default_factory=list)


def shape_key(inputs: list[torch.Tensor]) -> tuple:
    return tuple([(t.shape, t.stride(), t.dtype) for t in inputs])


def capture(run: RunFn, device: torch.device, inputs: list[torch.Tensor], then=None) -> tuple:
    """Capture one run of the model on ``inputs`` into a new CUDA graph; return (graph, outputs).

    The run goes through ``RunSingleThreaded`` on a side stream (the container's pool and its events
    cannot be captured). ``then(outputs)``, when given, is captured after the run (e.g. copies of the
    outputs into caller-owned buffers). A failing run releases its output handles itself (ownership
    rule); the graph's outputs own theirs afterwards. Raises RuntimeCallError naming the cause.
    """
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    try:
        with torch.cuda.device(device), torch.cuda.graph(graph, stream=side):
            outputs = run(inputs, stream=side.cuda_stream, single_threaded=True)
            if then is not None:
                then(outputs)
    except Exception as exc:
        raise RuntimeCallError(f"capturing the model into a CUDA graph failed: {exc}") from exc
    torch.cuda.current_stream(device).wait_stream(side)
    return graph, outputs


def copy_into(statics: list[torch.Tensor], news: list[torch.Tensor]) -> None:
    """Copy each new input into its static buffer, skipping a buffer passed as its own input; several
    at once go through one ``torch._foreach_copy_`` (one multi-tensor launch instead of one each)."""
    pairs = [(s, n) for s, n in zip(statics, news) if n is not s]
    if len(pairs) == 1:
        pairs[0][0].copy_(pairs[0][1])
    elif pairs:
        torch._foreach_copy_([s for s, _ in pairs], [n for _, n in pairs])


class GraphRunner:
    """Runs a model through CUDA graphs, per input shape (see the module docstring).

    Args:
        run: the Program's eager run: ``run(inputs, stream=None, single_threaded=False)`` returning one
            tensor per output slot (slots that share a handle share one tensor).
        device: the CUDA device.
        warmup_calls: eager calls per shape before the capture.
        max_graphs: graphs kept at most.
    """

    def __init__(self, run: RunFn, device: torch.device, warmup_calls: int = 3, max_graphs: int = 8):
        self._run, self.device = run, device
        self.warmup_calls, self.max_graphs = warmup_calls, max_graphs
        self._states: OrderedDict[tuple, _ShapeState] = OrderedDict()
        self._last: tuple | None = None  # (key, state) of the latest call: repeats skip the LRU update

    def __call__(self, inputs: list[torch.Tensor]) -> tuple[list, bool]:
        """Run once; return (outputs, static): static is True when the outputs are the graph's buffers,
        which the caller must copy before the next call."""
        key = shape_key(inputs)
        last = self._last
        state = last[1] if last is not None and last[0] == key else self._state_for(key)
        if state.graph is not None:
            copy_into(state.static_inputs, inputs)
            state.graph.replay()
            return state.static_outputs, True
        if state.eager_only or state.calls < self.warmup_calls:
            state.calls += 1
            return self._run(inputs), False
        static_inputs = [t.clone() for t in inputs]
        try:
            graph, static_outputs = capture(self._run, self.device, static_inputs)
        except RuntimeCallError as exc:
            state.eager_only = True
            raise RuntimeCallError(f"{exc}. Calls of this input shape now run without a graph; load with "
                                   "cuda_graphs=False to skip capturing.") from exc.__cause__
        state.graph, state.static_inputs, state.static_outputs = graph, static_inputs, static_outputs
        graph.replay()
        return static_outputs, True

    @property
    def num_graphs(self) -> int:
        return sum(state.graph is not None for state in self._states.values())

    def _state_for(self, key: tuple) -> _ShapeState:
        if key in self._states:
            self._states.move_to_end(key)
            state = self._states[key]
        else:
            while self.max_graphs > 0 and len(self._states) >= self.max_graphs:
                self._states.popitem(last=False)
            self._states[key] = state = _ShapeState()
        self._last = (key, state)
        return state

    def clear(self) -> None:
        """Drop every graph and its static buffers."""
        self._states.clear()
        self._last = None
