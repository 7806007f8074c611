"""``aten.unfold_backward`` (istft's overlap-add) of a broadcast grad: the grad expanded first, so that torch's
decomposition takes its one vectorized ``index_put`` instead of a loop over the window's offsets.

Why: torch's istft reference (torch/_refs/__init__.py, torch 2.13) builds its window envelope as
``unfold_backward(window.pow(2).expand((1, n_frames, n_fft)), (batch, length), 1, n_fft, hop)``: a grad of batch 1
against an input of the signal's batch, which eager broadcasts. torch 2.13's decomposition
(torch/_decomp/decompositions.py) takes its vectorized path only where every grad dim is statically the input's, and
otherwise loops over the n_fft offsets (arange, narrow, select, index_add each): an STFT -> mask -> iSTFT denoiser
(n_fft 512, dynamic batch and samples) ran that loop with fake tensors in export (15.8 s), again in run_decompositions
(28.5 s), and left 4,173 nodes for Inductor (compile 106 s; 180 s in all on 2 cores).

Expanding a grad dim of size 1 to the input's size is what eager and torch's loop do to it anyway (the loop expands
each offset's slice to the input's shape), so the result is the same; only dims other than the unfolded one and the
window's are expanded, and a grad torch's vectorized path cannot take for another reason (fewer folds, another
window size) still goes to torch's loop, as before.

Two places run the decomposition: lower()'s table (``decompositions.decomposition_table`` wraps torch's entry with
``expanded_first``), and fake tensors, which compute the op's shape by torch's decomposition (its
``decomposition_table`` entry and the op's Meta Python kernel) in export and again in run_decompositions before the
table replaces the op (with the table's entry alone the decompose step still took 28.9 s of the benchmark's 34):
``broadcast_grads_expanded_for_tracing`` patches both for the export and decompose steps, a row of torch_fixes.FIXES.
Both are skipped where torch's own decomposition of a broadcast grad has no loop (``_loops_over_broadcast_grads``:
torch 2.11's is always vectorized).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten
UNFOLD_BACKWARD = aten.unfold_backward.default


def broadcast_grad_expanded(grad: torch.Tensor, input_size, dimension: int) -> torch.Tensor:
    """``grad`` with each dim of size 1 that stands for a larger dim of ``input_size`` (not the unfolded dim, not the
    window's) expanded to it: a view; ``grad`` itself where there is none or where its rank is not the input's + 1."""
    rank = len(input_size)
    if rank == 0 or grad.dim() != rank + 1:
        return grad
    dim = dimension % rank
    shape = [size if d != dim and statically_known_true(grad.shape[d] == 1) else grad.shape[d]
             for d, size in enumerate(input_size)]
    if all(statically_known_true(a == b) for a, b in zip(shape, grad.shape)):
        return grad
    return grad.expand(*shape, grad.shape[-1])


def expanded_first(torch_decomposition: Callable) -> Callable:
    """torch's unfold_backward decomposition, given a broadcast grad expanded first (module doc)."""
    @functools.wraps(torch_decomposition)
    def unfold_backward(grad, input_size, dimension, size, step):
        return torch_decomposition(broadcast_grad_expanded(grad, input_size, dimension), input_size, dimension, size,
                                   step)
    unfold_backward.expands_broadcast_grads = True
    return unfold_backward


@functools.cache
def _loops_over_broadcast_grads() -> bool:
    """Whether torch's decomposition of a broadcast grad (batch 1 against 2, window 4, hop 3) traces index_add,
    its loop over the offsets; once per process, on a graph of a few nodes."""
    from torch._decomp import decomposition_table
    from torch.fx.experimental.proxy_tensor import make_fx

    decomposition = decomposition_table.get(UNFOLD_BACKWARD)
    if decomposition is None:
        return False
    try:
        graph = make_fx(lambda grad: decomposition(grad, [2, 10], 1, 4, 3))(torch.zeros(1, 3, 4)).graph
    except Exception:  # noqa: BLE001 - a torch whose decomposition this probe cannot trace: left as torch has it
        return False
    return any(node.target in (aten.index_add.default, aten.index_add_.default) for node in graph.nodes)


def needs_expanding() -> bool:
    """Whether the installed torch's unfold_backward decomposition loops over a broadcast grad (module doc)."""
    return _loops_over_broadcast_grads()


@contextlib.contextmanager
def broadcast_grads_expanded_for_tracing() -> Iterator[None]:
    """For the export and decompose steps: torch's unfold_backward decomposition and Meta kernel, which fake tensors
    run to give the op its shape, with a broadcast grad expanded first (module doc); a no-op where torch's
    decomposition has no loop, or where this torch keeps neither where 2.13 does (then fake tensors run torch's:
    slower, the same shapes)."""
    from torch._decomp import decomposition_table

    meta = torch._C.DispatchKey.Meta
    py_kernels = getattr(UNFOLD_BACKWARD, "py_kernels", None)
    original = decomposition_table.get(UNFOLD_BACKWARD)
    if (original is None or py_kernels is None or meta not in py_kernels
            or getattr(original, "expands_broadcast_grads", False) or not needs_expanding()):
        yield  # entered already (a nested lower()), or nothing to do on this torch
        return
    original_meta = py_kernels[meta]
    decomposition_table[UNFOLD_BACKWARD] = expanded_first(original)
    py_kernels[meta] = expanded_first(original_meta)
    _clear_dispatch_cache()
    try:
        yield
    finally:
        decomposition_table[UNFOLD_BACKWARD] = original
        py_kernels[meta] = original_meta
        _clear_dispatch_cache()


def _clear_dispatch_cache() -> None:
    cache = getattr(UNFOLD_BACKWARD, "_dispatch_cache", None)
    if cache is not None:
        cache.clear()
