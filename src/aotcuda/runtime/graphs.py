"""CUDA graphs for a loaded Program: warm-up calls, capture, replay, graphs per input shape.

Per input signature (the shapes and dtypes of the call's inputs):
  * the first ``warmup_calls`` calls (3) run eagerly, so that lazy work (kernel loading from the cubins,
    cuBLAS handles, the caching allocator's first blocks) happens outside the capture;
  * the next call copies its inputs into static input buffers and captures one run of the model
    (``AOTInductorModelContainerRunSingleThreaded`` on a side stream, ``torch.cuda.CUDAGraph``), then
    replays the graph once to compute that call's outputs;
  * every later call copies its inputs into the static buffers (one multi-tensor copy; none for an input
    that IS its static buffer) and replays; or, where its inputs lie where the previous call's of that shape did,
    replays a capture that reads them in place (below).

Outputs without a copy: a replay writes the graph's static output buffers, which the next replay of that
graph overwrites. So a call hands the caller those buffers themselves (as aliases: new tensors on the
same memory; slots that share one tensor still share one) only while that graph has a spare: before a
graph replays again, every alias it handed out must be gone (nothing else holds its storage: the use
count of each output storage is back to what it was at capture, as torch.compile's CUDA-graph trees
check liveness). A shape keeps up to ``output_sets + 1`` captures (2 + 1): the usual loop, which drops a
call's result before the next but one, alternates between two graphs and never copies; a caller that
keeps every result gets its first ``output_sets`` results as aliases, then the last capture's outputs as
COPIES from then on (it is never lent, so there is always a graph to replay). ``output_sets=0``: always
copies, one capture. Each capture has its own memory pool (the model's intermediates and outputs for that
shape). As with the caching allocator, a caller that reads a result on another stream and drops it
before that work ends must ``record_stream`` it (or synchronize) first.
A new input shape starts its own warm-up and capture; at most ``max_graphs`` shapes keep graphs (least
recently used goes first). A failed capture raises RuntimeCallError, releases every output handle once
(ownership rule), and that shape runs eagerly from then on (a failed capture in place is quiet instead: the shape's
calls copy their inputs from then on).

Reading the caller's inputs in place: a call whose inputs lie at the same addresses as the previous call's of
that shape (the same tensors, refilled in place; or new tensors the caching allocator placed where the last ones
were, as a loop that frees each step's inputs before making the next gets) replays a capture made ON those addresses
instead of copying into static buffers. The first such repeat captures one (``in_place_sets``, 2: one is lent while
the next call replays the other, as above); later repeats replay it with no copy in and, for an input the program
writes, no copy back (the graph writes the caller's memory itself, as a call without graphs does). Its outputs are
lent like any capture's. This is exact whoever owns that memory: the call's own tensors are alive for the whole call
and sit at exactly the addresses, sizes, strides and dtypes the graph reads (the shape key holds the last three), so
a replay reads this call's values and writes where this call's tensors are; nothing of the caller is kept between
calls (the addresses alone). Addresses that change every call (alternating buffers, or results kept) never capture
one (a call at the addresses of the shape's captures in place replays them, repeat or not). When another set repeats,
the shape's in-place captures are dropped for new ones, at most ``MOST_ADDRESS_SETS`` (3) sets a shape: a capture
synchronizes the device and empties the caching allocator, so inputs that move between sets (two threads with buffers
of their own, double buffering) copy from then on instead of capturing again and again. A program that returns an
input (or a view of one: ``returned_inputs``) reads none in place: the capture's output would be the caller's memory.
Off: ``AOTCUDA_GRAPHS_IN_PLACE=0``.

Zero copy for inputs too: ``Program.bind`` (``aotcuda.runtime.bound``) captures one graph on the caller's
own tensors with ``capture`` below; its replay is one graph launch and nothing else.

Inputs the program writes in place (``mutated``) are written into the static input buffers by a replay of a
copying capture, which copies them back into the call's own inputs, as an eager run writes them (a capture in place
writes the caller's tensor itself).

Threads: calls of a Program with CUDA graphs run one at a time (a lock), warm-up calls included: a
graph has one set of static buffers, and the container's single-threaded run (which the capture uses)
takes its one model without the container's lock, so it must not overlap a pooled run. The copy of the
results out of the static buffers (``finish``) happens under the lock too. On the GPU the next call's
input copy must not overtake the previous call's output copy: calls on one stream are ordered by the
stream itself; a call on another stream first waits for an event recorded on the previous call's stream
(made only when the stream changes: an event per call costs microseconds of host time, the whole budget
of a replay). The capture uses ``capture_error_mode="thread_local"``, so that other threads' CUDA work
(other Programs) does not invalidate it.

A call from the thread that holds the lock (a signal's handler, a ``__del__`` the garbage collector runs, a weakref
callback, a trace hook, all run between the outer call's Python lines) would wait for itself forever on a plain lock,
and reusing the lock (a re-entrant lock) would hand it the static buffers the outer call is filling. It runs eagerly
instead, with its own outputs, as a call without graphs does; during a capture it is refused (RuntimeCallError): the
capture would record its work into the graph.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from aotcuda.errors import Advice, RuntimeCallError
from aotcuda.runtime.checks import copies_back

RunFn = Callable[..., list]  # run(inputs, stream=None, single_threaded=False) -> list[Tensor | None]


_use_count = torch._C._storage_Use_Count  # references to a StorageImpl (torch 2.11–2.15 have it)


@dataclass
class _Capture:
    """One captured graph of a shape and its static buffers. ``held``: (storage, its use count when only
    the static outputs held it) per distinct output storage; ``lent``: its outputs were handed out."""

    graph: torch.cuda.CUDAGraph
    static_inputs: list[torch.Tensor] | None  # None: it reads the caller's inputs in place, at ``addresses``
    static_outputs: list[torch.Tensor | None]
    held: tuple[tuple[int, int], ...]
    lent: bool = False
    addresses: tuple[int, ...] | None = None

    def free(self) -> bool:
        """True when a replay overwrites nothing the caller still holds."""
        if self.lent and all(_use_count(storage) == alone for storage, alone in self.held):
            self.lent = False
        return not self.lent


@dataclass
class _ShapeState:
    calls: int = 0
    eager_only: bool = False
    captures: list[_Capture] = field(default_factory=list)
    in_place: list[_Capture] = field(default_factory=list)  # all on one set of input addresses
    in_place_failed: bool = False  # a capture in place failed, or too many sets: the shape copies from then on
    address_sets: int = 0  # the sets of input addresses captured in place so far
    last_addresses: tuple[int, ...] | None = None  # the previous call's input addresses


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
        with torch.cuda.device(device), torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
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
        mutated: indices of the inputs the program writes in place (copied back after each replay).
        output_sets: captures per shape whose outputs may be handed out without a copy at once (0: always
            copy); a shape keeps at most ``output_sets + 1`` captures.
        in_place_sets: captures per shape that read the caller's inputs in place (0: none, every graph call
            copies its inputs in); all of one set of addresses.
    """

    def __init__(self, run: RunFn, device: torch.device, warmup_calls: int = 3, max_graphs: int = 8,
                 mutated: frozenset[int] = frozenset(), output_sets: int = 2, in_place_sets: int = 2):
        self._run, self.device = run, device
        self.warmup_calls, self.max_graphs = warmup_calls, max_graphs
        self.max_captures = output_sets + 1
        self.in_place_sets = in_place_sets
        self.mutated = mutated
        self._states: OrderedDict[tuple, _ShapeState] = OrderedDict()
        self._last: tuple | None = None  # (key, state) of the latest call: repeats skip the LRU update
        # Re-entrant only so that a call can tell, atomically with the acquire, that its own thread holds it
        # (``_is_owned``): such a call never acquires it again (``__call__``).
        self._lock = threading.RLock()
        self._capturing = False
        self._raw_stream = raw_stream_function(device)
        self._last_stream: int | None = None  # the raw stream of the last call through a graph

    def __call__(self, inputs: list[torch.Tensor], finish: Callable[[list, bool], list], lend: bool = False) -> list:
        """Run once and return ``finish(outputs, static)``: static is True when the outputs are the graph's
        buffers, which finish must copy (it runs under the lock, before the next replay can start). With
        ``lend``, the outputs may be aliases of a graph's buffers instead (static False): pass it only when
        finish hands them to the caller as they are."""
        if self._lock._is_owned():  # a call from inside this thread's own call (see the module docstring)
            return self._reentrant_call(inputs, finish)
        key = shape_key(inputs)
        with self._lock:
            last = self._last
            state = last[1] if last is not None and last[0] == key else self._state_for(key)
            addresses = tuple([t.data_ptr() for t in inputs]) if self.in_place_sets else None
            repeated, state.last_addresses = addresses == state.last_addresses, addresses
            if not state.captures and not state.in_place and (state.eager_only or state.calls < self.warmup_calls):
                state.calls += 1
                return finish(self._run(inputs), False)
            if self.in_place_sets and not state.in_place_failed and (
                    repeated or (state.in_place and state.in_place[0].addresses == addresses)):
                result = self._in_place_call(state, inputs, addresses, finish, lend)
                if result is not _NO_CAPTURE:
                    return result
            return self._graph_call(state, inputs, finish, lend)

    def _reentrant_call(self, inputs, finish) -> list:
        """A call made while this thread's outer call holds the lock: eager, never the static buffers."""
        if self._capturing:
            raise RuntimeCallError("this Program was called from inside its own call on the same thread (a signal "
                                   "handler, a __del__, a weakref callback or a trace hook) while that call captures a "
                                   "CUDA graph, which would record this call's work into the graph; make the call "
                                   "outside the handler (e.g. set a flag there and call after), or load with "
                                   "cuda_graphs=False", advice=(Advice("cuda_graphs", False),))
        return finish(self._run(inputs), False)

    def _graph_call(self, state: _ShapeState, inputs, finish, lend: bool) -> list:
        """Replay a free capture (capturing one first if none is), write back mutated inputs, finish; under
        the lock."""
        stream = self._raw_stream()
        self._wait_for_last_stream(stream)
        free = [c for c in state.captures if c.free()]
        if free:
            chosen = free[0]
            copy_into(chosen.static_inputs, inputs)
            self._replay(chosen.graph, inputs, chosen.static_inputs)  # once copy_into is done: nothing stale back
        elif state.eager_only:  # every capture is lent and a further capture failed before
            self._last_stream = stream
            return finish(self._run(inputs), False)
        else:
            chosen = self._capture(state, inputs)
        # Lend only while another capture stays free or can still be made: the next call needs a graph
        # whose outputs nobody holds (this keeps the last possible capture for copies).
        can_make = 0 if state.eager_only else self.max_captures - len(state.captures)
        spare = len(free) - bool(free) + can_make
        result = _hand_out(chosen, finish, lend and spare > 0)
        self._last_stream = stream
        return result

    def _in_place_call(self, state: _ShapeState, inputs, addresses: tuple, finish, lend: bool):
        """Replay a free capture made on these input addresses (capturing one first if none is and another may be
        made); ``_NO_CAPTURE`` when none can serve (each lent, or the capture failed): the call copies then. Under
        the lock."""
        if state.in_place and state.in_place[0].addresses != addresses:  # another set of addresses repeats now
            state.in_place = []
        if not state.in_place:
            if state.address_sets >= MOST_ADDRESS_SETS:  # the inputs move between sets: copy, never capture again
                state.in_place_failed = True
                return _NO_CAPTURE
            state.address_sets += 1
        chosen = next((c for c in state.in_place if c.free()), None)
        stream = self._raw_stream()
        if chosen is None and len(state.in_place) >= self.in_place_sets:
            return _NO_CAPTURE
        self._wait_for_last_stream(stream)
        if chosen is None:
            self._capturing = True
            try:
                graph, static_outputs = capture(self._run, self.device, inputs)
            except RuntimeCallError:  # the copying captures may still work: they take the call, quietly
                state.in_place_failed = True
                return _NO_CAPTURE
            finally:
                self._capturing = False
            if _shares_storage(static_outputs, inputs):  # an output is (a view of) an input: holding it would keep
                state.in_place_failed = True               # the caller's memory for as long as the capture lives
                return _NO_CAPTURE
            chosen = _Capture(graph, None, static_outputs, _held(static_outputs), addresses=addresses)
            state.in_place.append(chosen)
        chosen.graph.replay()  # reads, and writes, this call's own tensors: nothing to copy in or back
        result = _hand_out(chosen, finish, lend)  # lent: another is made, or the copying ones serve, meanwhile
        self._last_stream = stream
        return result

    def _wait_for_last_stream(self, stream: int) -> None:
        if self._last_stream is not None and stream != self._last_stream:
            # Another stream than the last call's: wait for everything queued there so far (its output copy).
            event = torch.cuda.Event()
            event.record(torch.cuda.ExternalStream(self._last_stream, device=self.device))
            torch.cuda.current_stream(self.device).wait_event(event)

    def _capture(self, state: _ShapeState, inputs) -> _Capture:
        static_inputs = [t.clone() for t in inputs]
        self._capturing = True
        try:
            graph, static_outputs = capture(self._run, self.device, static_inputs)
        except RuntimeCallError as exc:
            state.eager_only = True
            raise RuntimeCallError(f"{exc}. Calls of this input shape now run without a graph; load with "
                                   "cuda_graphs=False to skip capturing.",
                                   advice=(Advice("cuda_graphs", False),)) from exc.__cause__
        finally:
            self._capturing = False
        state.captures.append(made := _Capture(graph, static_inputs, static_outputs, _held(static_outputs)))
        self._replay(graph, inputs, static_inputs)
        return made

    def _replay(self, graph, inputs, static_inputs) -> None:
        """Replay ``graph``, whose static inputs hold ``inputs``' values, and copy each written one back into the
        caller's tensor. The copies are made before the replay and run in its finally as one C call: a signal's
        handler raises as any call returns (the replay's too), and a KeyboardInterrupt there left the caller's
        tensor without the replay's write (a KV cache one token behind the graph's). An interrupt before the copies
        are made comes before the replay: nothing was written."""
        back = copies_back(inputs, static_inputs, self.mutated) if self.mutated else None
        try:
            graph.replay()
        finally:
            if back is not None:
                list(back)

    @property
    def num_graphs(self) -> int:
        """Input shapes that have a graph (each may have several captures: ``output_sets``, ``in_place_sets``)."""
        return sum(bool(state.captures or state.in_place) for state in self._states.values())

    @property
    def num_captures(self) -> int:
        """Captures that copy their inputs in (``num_in_place_captures``: those that read them in place)."""
        return sum(len(state.captures) for state in self._states.values())

    @property
    def num_in_place_captures(self) -> int:
        return sum(len(state.in_place) for state in self._states.values())

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
        with self._lock:
            self._states.clear()
            self._last = None


def _hand_out(chosen: _Capture, finish, lend: bool) -> list:
    """``finish`` of a replayed capture's outputs: lent as aliases of its buffers (``lend``), or its buffers to copy."""
    if lend:
        chosen.lent = True
        return finish(_aliases(chosen.static_outputs), False)
    return finish(list(chosen.static_outputs), True)


def _held(static_outputs: list) -> tuple[tuple[int, int], ...]:
    """(storage, its use count now) per distinct output storage of a new capture, counted before any alias is made."""
    storages = {t.untyped_storage()._cdata for t in static_outputs if t is not None}
    return tuple((storage, _use_count(storage)) for storage in storages)


def _shares_storage(outputs: list, inputs: list) -> bool:
    storages = {t.untyped_storage()._cdata for t in inputs}
    return any(t is not None and t.untyped_storage()._cdata in storages for t in outputs)


_NO_CAPTURE = object()  # _in_place_call's "no capture in place serves this call"
MOST_ADDRESS_SETS = 3  # sets of input addresses a shape captures in place in its life (see the module docstring)


def per_distinct_tensor(tensors: list, make: Callable[[torch.Tensor], torch.Tensor]) -> list:
    """``make(t)`` once per distinct tensor of ``tensors`` (slots that share a tensor share the result; None
    stays None)."""
    made: dict[int, torch.Tensor] = {}
    return [None if t is None else made[id(t)] if id(t) in made else made.setdefault(id(t), make(t))
            for t in tensors]


def _aliases(tensors: list) -> list:
    """New tensors on the same memory (slots sharing a tensor still share), so that what the caller does to
    its tensors (resize_, set_) never changes the graph's own."""
    return per_distinct_tensor(tensors, lambda t: t.data)


def raw_stream_function(device: torch.device):
    """A function returning the current raw CUDA stream of ``device`` as an int, cheaply: Inductor's own
    ``torch._C._cuda_getCurrentRawStream`` where this torch has it, else through a Stream object."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return lambda: raw(device.index)
    return lambda: torch.cuda.current_stream(device).cuda_stream
