"""Workarounds for Inductor bugs that lower() hits, each scoped to one compile and undone after it.

Each touches one torch internal, says which and why, and is a no-op where that internal is missing (a torch
that moved it, or fixed the bug another way). ``inductor_workarounds()`` applies them all.

flex_attention's captured buffers (torch 2.11–2.13, CUDA)
    A score_mod/mask_mod that reads a tensor computed in the program (AnyFlow-FAR's mask_mod indexes a
    per-token frame table built with ``torch.cat``) gets that tensor as a "captured buffer". Inductor's
    flex_attention lowering (torch/_inductor/kernel/flex/flex_attention.py) inlines the mask/score subgraph
    with ``build_subgraph_buffer`` *before* it realizes the captured buffers (``maybe_realize`` comes later),
    so an unrealized pointwise producer is inlined into the Triton template. ``cat`` and ``constant_pad_nd``
    lower to ``ops.masked(mask, body, other)`` with a Python function as body, and Triton's ``masked`` reads
    ``body.graph``: ``LoweringException: AttributeError: 'function' object has no attribute 'graph'``
    (target: flex_attention). The C++ backend calls the body directly and is not affected.

    Two steps, both needed. (1) The wrapper realizes every captured TensorBox, in place, before Inductor's
    own lowering runs: the fix PyTorch made upstream (pytorch/pytorch#182737: materialize the captures
    before building the modification subgraphs), and what the lowering does to these buffers anyway a few
    lines later. (2) Realizing is not enough for a buffer that reads no other buffer (a table built from
    ``zeros``/``ones``/``full``/``arange`` and ``cat``, as tests/test_flex_attention.py's is; AnyFlow-FAR
    still failed on the H200 with step 1 alone):
    ``ComputedBuffer.make_loader`` inlines such a buffer's computation into every reader instead of
    loading it (torch/_inductor/ir.py, ``num_reads() == 0``), so the template still sees ``ops.masked``.
    Inductor's own switch against that inlining, ``ComputedBuffer.force_realize()``, is held for the
    lowering call, so every loader the modification subgraphs take is an ``ops.load`` of the stored
    buffer. The generated code differs only in that the template loads these small tables instead of
    recomputing them.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

# flex_attention(query, key, value, subgraph, block_mask, scale, kernel_options, score_mod_other_buffers,
#                mask_mod_other_buffers): the positions of the two captured-buffer tuples.
_CAPTURED_BUFFER_ARGS = (7, 8)


def _realize_captured_buffers(args: tuple) -> None:
    from torch._inductor import ir

    for position in _CAPTURED_BUFFER_ARGS:
        for buffer in args[position] if len(args) > position else ():
            if isinstance(buffer, ir.TensorBox):
                buffer.realize()


def _loaded_not_inlined() -> contextlib.AbstractContextManager:
    """Inductor's ComputedBuffer.force_realize() (torch 2.11–2.13): realized buffers that read no other
    buffer are loaded by their readers, not inlined into them; a no-op on a torch without it."""
    from torch._inductor import ir

    force_realize = getattr(ir.ComputedBuffer, "force_realize", None)
    return force_realize() if force_realize is not None else contextlib.nullcontext()


@contextlib.contextmanager
def flex_attention_captures_realized() -> Iterator[None]:
    """While active, Inductor's flex_attention lowering sees realized captured buffers (see module doc)."""
    try:
        from torch._inductor.lowering import lowerings
    except ImportError:  # a torch without Inductor's lowering table: nothing to fix
        yield
        return
    op = getattr(torch.ops.higher_order, "flex_attention", None)
    original = lowerings.get(op) if op is not None else None
    if original is None:
        yield
        return

    def lowering(*args, **kwargs):
        _realize_captured_buffers(args)
        with _loaded_not_inlined():
            return original(*args, **kwargs)

    lowerings[op] = lowering
    try:
        yield
    finally:
        lowerings[op] = original


@contextlib.contextmanager
def inductor_workarounds() -> Iterator[None]:
    """Every workaround of this module, for the duration of one Inductor compile."""
    with flex_attention_captures_realized():
        yield
