"""The rules of the batch-rows walk (lowering/batch_row_flow.py): for each ATen op, where its result's batch rows lie
given where its inputs' lie, or why it mixes them.

A rule is ``rule(node, args, symbol) -> state`` (batch_row_states.py; a tuple of states for an op of several
outputs); it raises Mixes where the op mixes rows, NotKnown where it cannot say. Whole
kinds share one rule: every elementwise op (ATen's pointwise tag) broadcasts, every reduction, scan or sort maps its
dims, every view keeps the order of the elements.
"""

from __future__ import annotations

import dataclasses
import sys

import sympy
import torch
import torch.utils._pytree as pytree

from aotcuda.lowering.batch_row_states import (FREE, SIZE, Args, Lost, Mixes, NotKnown, Rows, dim_in, dims_in,
                                               free_symbols, has_rows, inner_of, mentions, packet_of, size_of, whole)

aten = torch.ops.aten


def _pointwise(node, args: Args, symbol):
    """Elementwise ops broadcast their tensors from the right: every tensor of the rows must put them at one dim of the
    result; a number of the batch size among the operands (x * x.shape[0]) makes the count a value."""
    rank = node.meta["val"].dim()
    places = set()
    for name in args.names:
        for leaf in pytree.tree_leaves(args[name]):
            if not isinstance(leaf, torch.fx.Node):
                continue
            state = args.states.get(leaf, FREE)
            if state == SIZE:
                raise Mixes("computes with the batch size as a value (x * x.shape[0]): a row's answer would "
                             "depend on how many rows share its batch")
            if has_rows(state):
                places.add((rank - leaf.meta["val"].dim() + state.dim, state.inner, state.outer))
    return _one_place(places)


def _one_place(places: set) -> object:
    if not places:
        return FREE
    if len({place[0] for place in places}) > 1:
        raise Mixes(f"meets inputs whose batch rows lie at different dims ({sorted({p[0] for p in places})}): every "
                     "row meets every other row")
    if len(places) > 1:
        raise NotKnown("meets inputs whose rows are laid out otherwise along one dim (blocks of other sizes)")
    dim, inner, outer = places.pop()
    return Rows(dim, inner, outer)


def _reshaped(node, args: Args, symbol):
    """A view of another shape keeps the order of the elements: where the input's elements before a row's first are
    O * batch * I apart (O the elements of the dims before the batch dim times its outer, I its inner times the dims
    after it), the result's rows lie at the dim whose prefix of dims divides O and whose dims up to it hold a multiple
    of O * batch: that dim's outer and inner follow."""
    state = args.state("self")
    if not has_rows(state):
        return _created(node, args, symbol)
    before, after = args.shape("self"), [size_of(s) for s in node.meta["val"].shape]
    outer = sympy.Mul(*before[:state.dim]) * state.outer
    prefix = sympy.Integer(1)
    for dim, size in enumerate(after):
        new_outer, new_inner = whole(outer / prefix, symbol), whole(prefix * size / (outer * symbol), symbol)
        if new_outer is not None and new_inner is not None:
            return dataclasses.replace(state, dim=dim, inner=new_inner, outer=new_outer)
        prefix = prefix * size
    raise NotKnown(f"reshapes {before} to {after} in a way the analysis cannot follow the rows through")


def _permuted(node, args: Args, symbol):
    state, rank = args.state("self"), args.rank("self")
    if not has_rows(state):
        return FREE
    if packet_of(node) == aten.permute:
        order = [dim_in(d, rank) for d in args["dims"]]
    else:  # transpose, t
        a, b = (dim_in(args["dim0"], rank), dim_in(args["dim1"], rank)) if packet_of(node) == aten.transpose else (0, 1)
        order = list(range(rank))
        order[a], order[b] = order[b], order[a]
    return dataclasses.replace(state, dim=order.index(state.dim))


def _expanded(node, args: Args, symbol):
    state = args.state("self")
    if not has_rows(state):
        return _created(node, args, symbol)  # a free value broadcast to the batch size: rows alike
    return dataclasses.replace(state, dim=state.dim + node.meta["val"].dim() - args.rank("self"))


def _repeated(node, args: Args, symbol):
    """x.repeat(...): tiles along a dim other than the batch dim stay within each row; tiles of the batch dim are
    blocks of all the rows (outer), which an output at dim 0 may not be."""
    state = args.state("self")
    if not has_rows(state):
        return _created(node, args, symbol)
    repeats = args["repeats"]
    shift = len(repeats) - args.rank("self")
    factor = repeats[shift + state.dim]
    factor = size_of(factor.meta["val"]) if isinstance(factor, torch.fx.Node) else sympy.sympify(factor)
    if symbol in factor.free_symbols:
        raise NotKnown("repeats the batch dim by the batch size")
    return dataclasses.replace(state, dim=state.dim + shift, outer=state.outer * factor)


def _same(node, args: Args, symbol):
    """Ops that keep their input's layout (a copy, a dtype, an alias)."""
    return args.state("self")


def _created(node, args: Args, symbol):
    """A new tensor: its values are constants or draws, alike for every row, unless a number of the batch size is one
    of them (torch.full((2,), x.shape[0]), torch.arange(x.shape[0])); where its shape holds the batch size, that dim is
    its rows (ones(x.shape[0]).sum() counts them)."""
    value = node.meta["val"]
    for name in ("fill_value", "start", "end", "step", "s", "value"):
        if args.state(name) == SIZE:
            if packet_of(node) == aten.arange:
                if _is_row_numbers(args, symbol):
                    return Rows(0, numbers=True)
                # arange(0, B * T, T): EmbeddingBag's offsets of 2-D ids, one bag per row; which ranges keep rows
                # apart is beyond this walk, and a false "mixes" would refuse a row-local model
                raise NotKnown("makes a range other than the row numbers from the batch size")
            raise Mixes("makes the batch size a value of a tensor (torch.arange(x.shape[0]), a fill of len(x)): a "
                         "row's answer would depend on how many rows share its batch")
    dims = [dim for dim, size in enumerate(value.shape) if symbol in free_symbols(size)]
    if not dims:
        return FREE
    if len(dims) == 1 and inner_of(size_of(value.shape[dims[0]]), symbol) is not None:
        return Rows(dims[0], inner_of(size_of(value.shape[dims[0]]), symbol))
    raise NotKnown(f"makes a tensor of shape {list(value.shape)} from the batch size")


def _is_row_numbers(args: Args, symbol) -> bool:
    start, end, step = args["start"], args["end"], args["step"]
    numbers = [start if start is not None else 0, end, step if step is not None else 1]
    sizes = [size_of(n.meta["val"]) if isinstance(n, torch.fx.Node) else n for n in numbers]
    return sizes[0] == 0 and sizes[2] == 1 and sympy.expand(sympy.sympify(sizes[1]) - symbol) == 0


def _along(dims_of):
    """Ops that compute along some dims (reductions, scans, sorts, softmax, flip, roll): mixing where the batch dim is
    one of them; a reduction without keepdim drops them."""
    def rule(node, args: Args, symbol):
        state, rank = args.state("self"), args.rank("self")
        if not has_rows(state):
            return FREE if not mentions(node.meta["val"], symbol) else _created(node, args, symbol)
        dims = dims_of(args, rank)
        if state.dim in dims:
            raise Mixes(f"computes along the batch dim (dim {state.dim}): every row's answer reads the other rows")
        out_rank = node.meta["val"][0].dim() if isinstance(node.meta["val"], (tuple, list)) else node.meta["val"].dim()
        dim = state.dim - sum(1 for d in dims if d < state.dim) if out_rank < rank else state.dim
        result = dataclasses.replace(state, dim=dim)
        values = node.meta["val"]
        return tuple(result for _ in values) if isinstance(values, (tuple, list)) else result
    return rule


def _named_dims(args: Args, rank: int) -> list[int]:
    for name in ("dim", "dims"):
        if name in args.values:
            return dims_in(args[name], rank)
    return list(range(rank))  # sum.default, amax of no dims: every dim


def _padded(node, args: Args, symbol):
    state, rank, pad = args.state("self"), args.rank("self"), args["pad"]
    if not has_rows(state):
        return FREE
    for index in range(0, len(pad), 2):  # pairs from the last dim
        if rank - 1 - index // 2 == state.dim and (pad[index] != 0 or pad[index + 1] != 0):
            raise Mixes("pads the batch dim: the rows move to other places")
    return state


def _sliced(node, args: Args, symbol):
    """A slice of another dim keeps the rows; of the batch dim, only whole blocks of all the rows (x[:] itself, or
    some of the tiles x.repeat(2, 1) made): any other slice moves rows to other places."""
    state, rank = args.state("self"), args.rank("self")
    if not has_rows(state):
        return FREE
    if dim_in(args["dim"], rank) != state.dim:
        return state
    blocks = _slice_blocks(args, state, symbol)
    if blocks is None:
        raise Mixes("takes some rows of the batch dim (x[start:end]): a row's answer would be another row's")
    return dataclasses.replace(state, outer=blocks)


def _bound_of(bound, size, default):
    """A slice's start or end as an expression, within [0, size] (torch clips a bound past the end)."""
    if bound is None:
        return sympy.sympify(default)
    value = size_of(bound.meta["val"]) if isinstance(bound, torch.fx.Node) else sympy.sympify(bound)
    if value.is_number and value < 0:
        value = size + value
    return size if value.is_number and value >= sys.maxsize // 2 else value


def _written_into(node, args: Args, symbol):
    """slice_scatter and select_scatter (x[:, :4] = y, functionalized): a write at other dims keeps the rows where the
    written values' rows lie where the destination's do; a write into some rows of the batch dim mixes."""
    self_state, src_state = args.state("self"), args.state("src")
    if not has_rows(self_state):
        if has_rows(src_state):
            raise Mixes("writes the rows' values into a tensor without the batch dim")
        return FREE
    dim = dim_in(args["dim"], args.rank("self"))
    selected = packet_of(node) == aten.select_scatter
    if dim == self_state.dim and (selected or _slice_blocks(args, self_state, symbol) != self_state.outer):
        raise Mixes("writes into some rows of the batch dim: a row's values land in other rows' places")
    place = self_state.dim - (1 if selected and dim < self_state.dim else 0)
    if has_rows(src_state) and (src_state.dim, src_state.inner, src_state.outer, src_state.numbers) != (
            place, self_state.inner, self_state.outer, False):
        raise NotKnown("writes values whose rows lie elsewhere than the destination's")
    return self_state


def _slice_blocks(args: Args, state: Rows, symbol):
    """How many whole blocks of all the rows a slice of the batch dim takes (start, end, step 1), None for a slice that
    cuts rows apart."""
    size, block = args.shape("self")[state.dim], symbol * state.inner
    start, end = (_bound_of(args[name], size, default) for name, default in (("start", 0), ("end", size)))
    first, last = whole(start / block, symbol), whole(end / block, symbol)
    if args["step"] != 1 or first is None or last is None or not sympy.simplify(last - first).is_positive:
        return None
    return sympy.simplify(last - first)


def _selected(node, args: Args, symbol):
    state, rank = args.state("self"), args.rank("self")
    if not has_rows(state):
        return FREE
    dim = dim_in(args["dim"], rank)
    if dim == state.dim:
        raise Mixes("picks one row of the batch dim (x[i]): every row's answer would read that row")
    return dataclasses.replace(state, dim=state.dim - (dim < state.dim))


def _concatenated(node, args: Args, symbol):
    tensors = args["tensors"]
    out_rank = node.meta["val"].dim()
    dim = dim_in(args["dim"], out_rank)
    places = set()
    for tensor in tensors:
        state = args.states.get(tensor, FREE)
        if has_rows(state):
            place = state.dim + (1 if packet_of(node) == aten.stack and state.dim >= dim else 0)
            if packet_of(node) == aten.cat and place == dim:
                raise Mixes("joins tensors along the batch dim: rows move to other places")
            places.add((place, state.inner, state.outer))
    return _one_place(places)


def _split(node, args: Args, symbol):
    state, rank = args.state("self"), args.rank("self")
    count = len(node.meta["val"])
    if not has_rows(state):
        return tuple(FREE for _ in range(count))
    dim = dim_in(args["dim"], rank)
    if dim == state.dim:
        raise Mixes("splits the batch dim into pieces: each piece holds some rows")
    kept = state if packet_of(node) != aten.unbind else dataclasses.replace(state, dim=state.dim - (dim < state.dim))
    return tuple(kept for _ in range(count))


def _products(node, args: Args, symbol):
    """mm, addmm, bmm, baddbmm: a batch dim that is a dim of the result (rows of the left, columns of the right, the
    shared leading dim of bmm) is kept; one that is contracted mixes."""
    packet = packet_of(node)
    left, right = ("mat1", "mat2") if packet == aten.addmm else ("batch1", "batch2") if packet == aten.baddbmm \
        else ("self", "mat2")
    batched = packet in (aten.bmm, aten.baddbmm)
    out_of_left, out_of_right = ({0: 0, 1: 1} if batched else {0: 0}), ({0: 0, 2: 2} if batched else {1: 1})
    places = set()
    for name, out in ((left, out_of_left), (right, out_of_right)):
        state = args.state(name)
        if has_rows(state):
            if state.dim not in out:
                raise Mixes("contracts the batch dim (a product over the rows): every row's answer sums over the "
                             "other rows")
            places.add((out[state.dim], state.inner, state.outer))
    bias = "self" if packet in (aten.addmm, aten.baddbmm) else None
    if bias is not None and has_rows(args.state(bias)):
        state = args.state(bias)
        places.add((node.meta["val"].dim() - args.rank(bias) + state.dim, state.inner, state.outer))
    return _one_place(places)


def _convolved(node, args: Args, symbol):
    state = args.state("input")
    if any(has_rows(args.state(name)) for name in ("weight", "bias")):
        raise NotKnown("convolves with a weight computed from the rows")
    if not has_rows(state):
        return FREE
    if state.dim != 0:
        raise Mixes(f"convolves across the batch dim (dim {state.dim}): a row's answer reads its neighbours")
    return state


def _pooled(node, args: Args, symbol):
    """Pooling and resizing of k-D: the last k dims are pooled, counted from the end, as torch takes an unbatched
    [C, H, W] too (the batch rows can be its H)."""
    name = "self" if "self" in args.values else "input"  # upsample_nearest2d.vec names it input
    state = args.state(name)
    pooled = 1 if "1d" in str(node.target) else 3 if "3d" in str(node.target) else 2
    if has_rows(state) and state.dim >= args.rank(name) - pooled:
        raise Mixes(f"pools across the batch dim (dim {state.dim})")
    count = len(node.meta["val"]) if isinstance(node.meta["val"], (tuple, list)) else 0
    return tuple(state for _ in range(count)) if count else state


def _attended(node, args: Args, symbol):
    """Attention over [..., L, E] queries and [..., S, E] keys: the leading dims are separate problems; a batch dim
    among the queries' positions or the keys' mixes (each query reads every key)."""
    places = set()
    for name in ("query", "key", "value", "attn_mask", "attn_bias"):  # the CUDA efficient and cudnn ops: attn_bias
        state = args.state(name)
        if has_rows(state):
            rank = args.rank(name)
            if state.dim >= rank - 2:
                raise Mixes(f"attends across the batch dim ({name}'s dim {state.dim}): each row reads the others")
            places.add((node.meta["val"][0].dim() - rank + state.dim if isinstance(node.meta["val"], (tuple, list))
                        else node.meta["val"].dim() - rank + state.dim, state.inner, state.outer))
    first = _one_place(places)
    values = node.meta["val"]
    if not isinstance(values, (tuple, list)):
        return first
    return tuple(first if index == 0 else _by_shape(value, first, symbol) for index, value in enumerate(values))


def _by_shape(value, state, symbol):
    """An extra output of an op (attention's logsumexp, a seed): its rows where its shape has the batch size at that
    dim, free where it has none."""
    if not isinstance(value, torch.Tensor) or not mentions(value, symbol):
        return FREE
    return state if has_rows(state) else Lost("an extra output of the batch size")


def _normalized(node, args: Args, symbol):
    """layer norm normalizes the last dims, group norm each sample (dim 0), batch norm without training each channel."""
    packet, state = packet_of(node), args.state("input")
    if any(has_rows(args.state(name)) for name in ("weight", "bias", "running_mean", "running_var")):
        raise NotKnown("normalizes with a weight computed from the rows")
    if not has_rows(state):
        return tuple(FREE for _ in node.meta["val"])
    rank = args.rank("input")
    if packet in (aten.native_layer_norm, aten._fused_rms_norm) and state.dim >= rank - len(args["normalized_shape"]):
        raise Mixes(f"normalizes across the batch dim (dim {state.dim})")
    if packet == aten.native_group_norm and state.dim != 0:
        raise Mixes(f"normalizes across the batch dim (dim {state.dim})")
    if packet == aten._native_batch_norm_legit and state.dim != 1:
        raise Mixes("normalizes with statistics over the batch (batch norm in training mode)")
    return tuple(_by_shape(value, state, symbol) for value in node.meta["val"])


def _embedded(node, args: Args, symbol):
    if has_rows(args.state("weight")):
        raise NotKnown("looks up a table computed from the rows")
    return args.state("indices")


def _indexed(node, args: Args, symbol):
    """x[i, j]: a free table indexed by tensors of the rows keeps them where the index puts them (an embedding); a
    tensor of the rows indexed at other dims by free tensors keeps its rows; an index at the batch dim mixes, but for
    the row numbers themselves (x[torch.arange(len(x)), last], each row picking from its own)."""
    self_state, rank = args.state("self"), args.rank("self")
    indices = list(args["indices"])
    indexed = [dim for dim, index in enumerate(indices) if index is not None]
    states = {dim: args.states.get(indices[dim], FREE) for dim in indexed}
    if has_rows(self_state) and self_state.numbers:
        raise Mixes("indexes the row numbers: a row's answer would depend on its place in the batch")
    if any(indices[dim].meta["val"].dtype in (torch.bool, torch.uint8) for dim in indexed):
        if has_rows(self_state) or any(has_rows(state) for state in states.values()):
            raise Mixes("selects elements by a mask: the result's length is the batch's count of true values")
        return FREE
    width = max(indices[dim].meta["val"].dim() for dim in indexed)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    front = indexed[0] if adjacent else 0  # where torch puts the index's dims in the result
    places = set()
    for dim in indexed:
        state = states[dim]
        if has_rows(state):
            if state.numbers and not (has_rows(self_state) and dim == self_state.dim):
                raise Mixes("indexes with the row numbers at a dim that is not the batch dim")
            places.add((front + width - indices[dim].meta["val"].dim() + state.dim, state.inner, state.outer))
    if has_rows(self_state):
        dim = self_state.dim
        if dim in indexed:
            if not (has_rows(states[dim]) and states[dim].numbers and (self_state.inner, self_state.outer) == (1, 1)):
                raise Mixes("indexes across the batch dim (x[ids]): a row's answer reads the rows its index names")
        else:
            kept = [d for d in range(rank) if d not in indexed]
            place = (dim if dim < front else dim - len(indexed) + width) if adjacent else width + kept.index(dim)
            places.add((place, self_state.inner, self_state.outer))
    return _one_place(places)


def _gathered(node, args: Args, symbol):
    self_state, index_state, rank = args.state("self"), args.state("index"), args.rank("self")
    dim = dim_in(args["dim"], rank)
    for state in (self_state, index_state):
        if has_rows(state) and state.dim == dim:
            raise Mixes("gathers along the batch dim: a row's answer reads the rows its index names")
    if has_rows(self_state) and not (has_rows(index_state) and index_state.dim == self_state.dim):
        raise Mixes("gathers rows of the batch by an index without them: a row's answer reads other rows")
    return _one_place({(s.dim, s.inner, s.outer) for s in (self_state, index_state) if has_rows(s)})


def _scattered(node, args: Args, symbol):
    """scatter writes where the index's shape reaches: into a tensor of the rows, only an index with the rows at the
    same dim reaches every row (a free index of 1 row writes the first row alone); the src it reads at the index's
    positions then holds them too."""
    self_state, index_state = args.state("self"), args.state("index")
    states = [args.state(name) for name in ("self", "index", "src") if name in args.values]
    dim = dim_in(args["dim"], args.rank("self"))
    if any(has_rows(s) and s.dim == dim for s in states):
        raise Mixes("writes along the batch dim at indices: a row's values land in other rows")
    if not has_rows(self_state) and any(has_rows(s) for s in states):
        raise Mixes("writes the rows' values into a tensor without the batch dim")
    if has_rows(self_state) and not (has_rows(index_state) and index_state.dim == self_state.dim):
        raise Mixes("writes at an index without the batch rows: only the rows its shape reaches get the write, so "
                     "a row's answer depends on its place in the batch")
    if isinstance(args["src"], torch.fx.Node) and has_rows(index_state) and not has_rows(args.state("src")):
        raise NotKnown("writes values of a tensor without the batch rows at an index of the rows")
    return _one_place({(s.dim, s.inner, s.outer) for s in states if has_rows(s)})


def _put(node, args: Args, symbol):
    """index_put: writing free values at free indices of other dims keeps the rows; a mask of the rows over the batch
    dim and the dims after it (x[mask] = 0) too; any other write at the batch dim or of the rows into a free tensor
    mixes."""
    self_state, values_state = args.state("self"), args.state("values")
    indices = [index for index in args["indices"]]
    index_states = [args.states.get(index, FREE) if index is not None else FREE for index in indices]
    if not has_rows(self_state):
        if has_rows(values_state) or any(has_rows(s) for s in index_states):
            raise Mixes("writes the rows' values into a tensor without the batch dim")
        return FREE
    indexed = [dim for dim, index in enumerate(indices) if index is not None]
    if self_state.dim in indexed:
        mask = indices[0] if len(indices) == 1 else None
        if mask is not None and mask.meta["val"].dtype == torch.bool and has_rows(index_states[0]) \
                and dataclasses.replace(index_states[0], numbers=False) == self_state and values_state == FREE:
            return self_state  # x[mask] = value: each row's mask picks its own elements
        raise Mixes("writes at indices of the batch dim: a row's values land in other rows")
    if any(has_rows(s) for s in index_states) or has_rows(values_state):
        raise NotKnown("writes values or indices of the rows at other dims")
    return self_state


def _transformed(node, args: Args, symbol):
    """aotcuda's FFT kernels (kernels/fft_rows.py, fft_cpu.py: a DFT along ``dim`` of x, of the complex dims where x
    is a pair): the other dims keep their order; a transform along the batch dim mixes."""
    state = args.state("x")
    if any(has_rows(args.state(name)) for name in ("tables", "window")) or has_rows(args.state("weight")):
        raise NotKnown("transforms with a table, window or weight computed from the rows")
    if not has_rows(state):
        return FREE
    pair = args["kind"] in ("c2c", "c2r")
    if dim_in(args["dim"], args.rank("x") - pair) == state.dim:
        raise Mixes(f"transforms along the batch dim (dim {state.dim}): every row's answer reads the other rows")
    return state


def _counted(node, args: Args, symbol):
    raise Mixes("lists the nonzero elements of every row together: the result's length is the batch's count")


_CREATED = {aten.full, aten.zeros, aten.ones, aten.empty, aten.empty_strided, aten.rand, aten.randn, aten.scalar_tensor,
            aten.arange, aten.new_zeros, aten.new_ones, aten.new_empty, aten.new_full, aten.full_like, aten.zeros_like,
            aten.ones_like, aten.empty_like, aten.rand_like, aten.randn_like, aten.randint_like}
# ops whose arguments are all followed through _pointwise's broadcast (no pointwise tag, or named for clarity)
_POINTWISE = (aten.copy, aten.fill, aten.masked_fill)
_SAME = (aten.alias, aten.clone, aten.contiguous, aten.detach, aten.view_as_real, aten.view_as_complex, aten._to_copy,
         aten.lift_fresh_copy)
# ops a tensor of row numbers may pass through unmixed: views and copies, and the index it is meant for
_NUMBERS_KEPT = {aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.expand, aten.permute,
                 aten._to_copy, aten.clone, aten.alias, aten.index, aten._unsafe_index}
_AOTCUDA_FFTS = ("aotcuda.fft_rows.default", "aotcuda.fft_rows_cpu.default")
RULES = {
    **{packet: _reshaped for packet in (aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze)},
    **{packet: _permuted for packet in (aten.permute, aten.transpose, aten.t)},
    aten.expand: _expanded,
    aten.repeat: _repeated,
    **{packet: _same for packet in _SAME},
    **{packet: _pointwise for packet in _POINTWISE},
    **{packet: _created for packet in _CREATED},
    **{packet: _along(_named_dims) for packet in (
        aten.sum, aten.mean, aten.amax, aten.amin, aten.max, aten.min, aten.argmax, aten.argmin, aten.prod, aten.any,
        aten.all, aten.var, aten.var_mean, aten.std, aten.std_mean, aten.logsumexp, aten.linalg_vector_norm,
        aten.cumsum, aten.cumprod, aten.logcumsumexp, aten.cummax, aten.cummin, aten._softmax, aten._log_softmax,
        aten.softmax, aten.log_softmax, aten.sort, aten.argsort, aten.topk, aten.kthvalue, aten.median, aten.mode,
        aten.flip, aten.nanmedian)},
    aten.roll: _along(lambda args, rank: dims_in(args["dims"], rank)),  # no dims: the flattened tensor rolls
    aten.tril: _along(lambda args, rank: [rank - 2, rank - 1]),
    aten.triu: _along(lambda args, rank: [rank - 2, rank - 1]),
    aten.unfold: _along(lambda args, rank: [dim_in(args["dimension"], rank)]),
    aten.constant_pad_nd: _padded,
    aten.slice: _sliced,
    aten.slice_scatter: _written_into,
    aten.select_scatter: _written_into,
    aten.select: _selected,
    aten.cat: _concatenated,
    aten.stack: _concatenated,
    **{packet: _split for packet in (aten.split, aten.split_with_sizes, aten.unbind, aten.chunk)},
    **{packet: _products for packet in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm)},
    aten.convolution: _convolved,
    **{packet: _pooled for packet in (aten.max_pool2d_with_indices, aten.avg_pool2d, aten._adaptive_avg_pool2d,
                                      aten.max_pool1d, aten.avg_pool1d, aten.upsample_nearest2d,
                                      aten.adaptive_max_pool2d, aten.upsample_bilinear2d, aten.avg_pool3d,
                                      aten.max_pool3d_with_indices, aten._adaptive_avg_pool3d)},
    **{packet: _attended for packet in (aten.scaled_dot_product_attention, aten._scaled_dot_product_flash_attention,
                                        aten._scaled_dot_product_flash_attention_for_cpu,
                                        aten._scaled_dot_product_efficient_attention,
                                        aten._scaled_dot_product_cudnn_attention)},
    **{packet: _normalized for packet in (aten.native_layer_norm, aten._fused_rms_norm, aten.native_group_norm,
                                          aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit)},
    aten.embedding: _embedded,
    aten.index: _indexed,
    aten._unsafe_index: _indexed,
    aten.gather: _gathered,
    **{packet: _scattered for packet in (aten.scatter, aten.scatter_add, aten.scatter_reduce)},
    aten.index_put: _put,
    aten._unsafe_index_put: _put,
    aten.index_select: lambda node, args, symbol: _selected_by_index(node, args),
    aten.nonzero: _counted,
    aten.native_dropout: lambda node, args, symbol: (args.state("input"), args.state("input")),
}


def _selected_by_index(node, args: Args):
    self_state, index_state, rank = args.state("self"), args.state("index"), args.rank("self")
    dim = dim_in(args["dim"], rank)
    if has_rows(self_state) and self_state.dim == dim:
        raise Mixes("selects rows of the batch dim by an index: a row's answer reads the rows its index names")
    if has_rows(self_state) and has_rows(index_state):
        raise NotKnown("selects with an index of the rows at another dim")
    if has_rows(index_state):
        return Rows(dim)
    return self_state


def rule_for(node):
    """The rule of a call_function node's op, None for an op the walk does not know. An elementwise op by ATen's tag
    first: max.other is elementwise, max.dim a reduction."""
    if str(node.target) in _AOTCUDA_FFTS:  # by name: the ops exist only once aotcuda's kernels are imported
        return _transformed
    packet = packet_of(node)
    if packet in _SAME:  # clone is tagged elementwise, but keeps the row numbers' mark, which _pointwise drops
        return _same
    return _pointwise if _is_pointwise(node) else RULES.get(packet)


# arguments that restate a shape (a view's, a new tensor's, group norm's N): the output's shape records them
_SIZE_ARGUMENTS = ("size", "shape", "sizes", "repeats", "stride", "N", "C", "HxW", "output_size")


def batch_size_argument(node, args: Args, symbol) -> str | None:
    """The name of an argument of a tensor op that is a number computed from the batch size, where the op reads it as a
    value (x[:, B // 8], x.narrow(1, B // 8, 4), x.kthvalue(B // 8 + 1, 1), tril's diagonal, roll's shifts): a row's
    answer would depend on how many rows share its batch. Not a size the output's shape records (x.view(B, -1),
    ones(8).expand(B, 8)), a slice's bounds of the batch dim (its rule checks they keep whole blocks of rows), nor the
    numbers of a new tensor (_created checks its fill and its range)."""
    if packet_of(node) in _CREATED:
        return None
    recorded = {sympy.expand(size_of(size)) for leaf in pytree.tree_leaves(node.meta["val"])
                if isinstance(leaf, torch.Tensor) for size in leaf.shape}
    for name in args.names:
        for leaf in pytree.tree_leaves(args[name]):
            if not isinstance(leaf, torch.fx.Node) or args.states.get(leaf, FREE) != SIZE:
                continue
            if name in _SIZE_ARGUMENTS and sympy.expand(size_of(leaf.meta["val"])) in recorded:
                continue
            if name == "groups" and has_rows(args.state("weight")):
                continue  # a weight of each row (StyleGAN2's modulated conv, groups=B): the convolution's rule says
            rows = args.state("self")
            if name in ("start", "end") and packet_of(node) in (aten.slice, aten.slice_scatter) and has_rows(rows) \
                    and dim_in(args["dim"], args.rank("self")) == rows.dim:
                continue
            return name
    return None


def keeps_row_numbers(node) -> bool:
    """Whether the row numbers (torch.arange of the batch size) may reach this op unmixed: a view, a copy, an index."""
    return packet_of(node) in _NUMBERS_KEPT


def _is_pointwise(node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and torch.Tag.pointwise in node.target.tags


