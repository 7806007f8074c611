"""Ops traced again on inputs of the same metadata: the new node gets a copy of the first one's result metadata.

Why: every op the rewrite traces costs a fake-tensor dispatch through make_fx, and with symbolic
shapes that is about a millisecond (FakeTensorMode's dispatch cache is hit, but rebuilding a fake
tensor with SymInt sizes redoes the symbolic contiguity and memory-format arithmetic, and make_fx
redoes it again for node.meta["tensor_meta"]). A model's layers repeat the same ops on values of the
same shapes, so the rewrite traces the same (op, input metadata) over and over.

How: `ReplayMode` is a TorchDispatchMode active while the interpreter runs, above make_fx's proxy
mode. The first call of an op on inputs of given metadata runs as usual. A later call whose inputs
have the same metadata (dtype, device, layout, sizes, strides and storage offset, SymInts compared by
their expression) and the same other arguments creates its graph node directly: its meta["val"] is
a new fake tensor detached from the first result (same sizes, strides and symbolic expressions, about
20 µs; the call returns another, as make_fx does) and its meta["tensor_meta"] is the first node's. The node itself is new, with its own inputs and
the stack trace of the node being rewritten: only the metadata computation is skipped.

Not replayed (they run as usual): ops that mutate an argument, ops whose result creates new symbols
(data-dependent shapes), results that are not one tensor, inputs that are not fake tensors traced
by make_fx or that make_fx tracks as constants. Higher-order ops (torch.cond, ...) refuse user dispatch
modes, so the interpreter runs them with the mode suspended (`suspended`).
"""

from __future__ import annotations

import contextlib

import torch
from torch.utils import _pytree as pytree

from aotcuda.passes.complex_to_real.torch_internals import (
    FakeTensor,
    TorchDispatchMode,
    _pop_mode_temporarily,
    disable_proxy_modes_tracing,
    fetch_sym_proxy,
    get_proxy_mode,
    get_proxy_slot,
    in_kernel_invocation_manager,
    no_python_dispatcher,
    track_tensor,
)

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PLAIN_TYPES = (bool, int, str, torch.dtype, torch.device, torch.layout, torch.memory_format)
_DATA_DEPENDENT = (torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output)


def plain_key(value: object) -> object:
    """A hashable key for a non-tensor argument, equal only for interchangeable values; None if there is
    none. SymInts by expression; floats by their bits (−0.0 ≠ 0.0); True ≠ 1 (the type is part of it)."""
    if isinstance(value, _SYM_TYPES):
        return ("sym", type(value), value.node.expr)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, complex):
        return ("complex", value.real.hex(), value.imag.hex())
    if value is None or isinstance(value, _PLAIN_TYPES):
        return (type(value), value)
    return None


def _size_key(size) -> object:
    return size.node.expr if isinstance(size, torch.SymInt) else size


def _tensor_key(t: torch.Tensor) -> tuple | None:
    """Everything about a fake tensor that an op's result metadata can depend on."""
    if not isinstance(t, FakeTensor) or t.constant is not None or t.is_sparse:
        return None
    return ("tensor", t.dtype, t.device, t.layout, tuple(map(_size_key, t.shape)),
            tuple(map(_size_key, t.stride())), _size_key(t.storage_offset()), t.is_conj(), t.is_neg(),
            t.requires_grad)


def replayable_op(op: object) -> bool:
    if not isinstance(op, torch._ops.OpOverload) or op._schema.is_mutable:
        return False
    return not any(tag in op.tags for tag in _DATA_DEPENDENT)


def metadata_key(op: object, args, kwargs) -> tuple | None:
    """The key of a call by its inputs' metadata, or None when the call must run as usual."""
    if not replayable_op(op):
        return None
    leaves, spec = pytree.tree_flatten((args, kwargs))
    keys = tuple(_tensor_key(v) if isinstance(v, torch.Tensor) else plain_key(v) for v in leaves)
    if any(k is None for k in keys):
        return None
    return (op, str(spec), keys)


def traced_node_argument(value: object, tracer):
    """What stands for a run-time value in a node's arguments: a tensor's or SymInt's proxy, or the
    literal. Raises KeyError for a tensor make_fx does not trace (or tracks as a constant)."""
    if isinstance(value, torch.Tensor):
        slot = get_proxy_slot(value, tracer)
        if slot.constant is not None:
            raise KeyError("a constant-tracked tensor")
        return slot.proxy
    if isinstance(value, _SYM_TYPES):
        return fetch_sym_proxy(tracer)(value)
    return value


def detached_fake(value: FakeTensor) -> FakeTensor:
    """A new fake tensor with exactly `value`'s metadata (it shares value's fake storage)."""
    # Outside make_fx's proxy mode: the copy recomputes its numel, which would be traced as SymInt nodes.
    with disable_proxy_modes_tracing():
        with in_kernel_invocation_manager(value.fake_mode), no_python_dispatcher():  # the C++ meta kernel
            meta = torch.ops.aten.detach.default(value)
        copy = FakeTensor(value.fake_mode, meta, value.device)
        copy.numel()
    return copy


class ReplayMode(TorchDispatchMode):
    """See the module docstring. One instance per traced graph (its nodes belong to that graph)."""

    def __init__(self):
        super().__init__()
        self._first: dict[tuple, torch.fx.Node] = {}
        self.replayed = 0  # how many calls were replayed (for tests and profiling)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        key = metadata_key(func, args, kwargs)
        first = self._first.get(key) if key is not None else None
        if first is not None:
            with contextlib.suppress(KeyError):
                return self._replay(func, args, kwargs, first)
        symbols_before = _symbol_count(args)
        out = func(*args, **kwargs)
        if key is not None and self._recordable(out, symbols_before):
            self._first[key] = get_proxy_slot(out, get_proxy_mode().tracer).proxy.node
        return out

    @staticmethod
    def _recordable(out: object, symbols_before: int | None) -> bool:
        """One fake tensor, traced, not a constant, and no symbol created on the way."""
        if not isinstance(out, FakeTensor) or out.constant is not None or symbols_before is None:
            return False
        if _symbol_count((out,)) != symbols_before:
            return False
        tracer = get_proxy_mode().tracer
        slot = get_proxy_slot(out, tracer, default=None)
        return slot is not None and slot.constant is None and "tensor_meta" in slot.proxy.node.meta

    def _replay(self, func, args, kwargs, first: torch.fx.Node) -> FakeTensor:
        tracer = get_proxy_mode().tracer
        node_args, node_kwargs = pytree.tree_map(lambda v: traced_node_argument(v, tracer), (args, kwargs))
        proxy = tracer.create_proxy("call_function", func, node_args, node_kwargs,
                                    name=tracer.graph._target_to_str(func.overloadpacket.__name__))
        # The node's own copy, as make_fx keeps a snapshot: a result also held by meta["val"] is shared, and
        # autograd's make_variable (behind torch.ones_like and the other factories of torch.*) detaches a
        # shared result again, a detach that make_fx would trace into the graph.
        proxy.node.meta["val"] = detached_fake(first.meta["val"])
        value = detached_fake(first.meta["val"])
        proxy.node.meta["tensor_meta"] = first.meta["tensor_meta"]
        proxy.node.meta["original_aten"] = func
        track_tensor(value, proxy, constant=None, tracer=tracer)
        self.replayed += 1
        return value


def _symbol_count(args) -> int | None:
    """How many symbols the shape env of the call's fake tensors knows (None: no fake tensor)."""
    fake = next((v for v in pytree.tree_leaves(args) if isinstance(v, FakeTensor)), None)
    if fake is None or fake.fake_mode.shape_env is None:
        return None
    return len(fake.fake_mode.shape_env.var_to_range)


@contextlib.contextmanager
def suspended(mode: ReplayMode):
    """Run without `mode` (it must be the innermost user mode): for higher-order ops."""
    with _pop_mode_temporarily() as popped:
        if popped is not mode:
            raise RuntimeError("ReplayMode is not the innermost dispatch mode")
        yield
