"""emit: add one ATen node to a graph with the metadata Inductor and re-export read.

A pass that builds new nodes gives each ``meta["val"]`` (computed by running the op on the arguments'
fake tensors, so SymInts stay symbolic) and the stack trace of the node it stands for (DESIGN.md: every
node created carries both). Shared by the passes that write new math (sibling_products.py,
decode_attention.py).
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree


# Node metadata a new node shares with the node it stands for (error messages, profiles, re-export).
SHARED_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "torch_fn", "from_node")


def fake_of(value):
    """The fake value a node stands for (its meta["val"]); anything else is itself."""
    return value.meta["val"] if isinstance(value, torch.fx.Node) else value


def emit(graph: torch.fx.Graph, target, args: tuple, kwargs: dict | None = None, *, like: torch.fx.Node | None = None
         ) -> torch.fx.Node:
    """A new ``call_function`` node ``target(*args, **kwargs)`` at the graph's insertion point, with
    ``meta["val"]`` from the fake arguments and ``like``'s stack trace, module stack and source (SHARED_META)."""
    kwargs = kwargs or {}
    node = graph.call_function(target, args, kwargs)
    fake_args, fake_kwargs = pytree.tree_map(fake_of, (args, kwargs))
    node.meta["val"] = target(*fake_args, **fake_kwargs)
    if like is not None:
        node.meta.update({key: like.meta[key] for key in SHARED_META if key in like.meta})
    return node


def replace_uses(node: torch.fx.Node, new: torch.fx.Node, signature) -> None:
    """Every use of ``node`` reads ``new`` instead, the program's outputs too: an output spec of the
    graph signature that names ``node`` names ``new``."""
    node.replace_all_uses_with(new)
    for spec in signature.output_specs:
        if getattr(spec.arg, "name", None) == node.name:
            spec.arg.name = new.name
