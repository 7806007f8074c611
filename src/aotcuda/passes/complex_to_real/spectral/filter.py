"""A spectral filter with a constant weight at a Bluestein length as one convolution kernel: half the DFTs.

irfft(rfft(x)·w, n) multiplies each row's spectrum by w and inverts it: it is the circular convolution of the row
with g = irfft(w, n) (the convolution theorem; the imaginary parts of w's bins 0 and n/2, which the c2r drops,
drop out of g alike). At a length no tiling covers (a prime factor above 61: 1009, 2039, 4093), the kernel form
runs the rfft and the irfft as Bluestein's chirp-z transform, each a convolution of length m ≥ 2n − 1: two
m-point DFTs for the rfft and two for the irfft, a pair of real rows (kernels/fft_bluestein.py). The circular
convolution with g is itself one linear convolution that m holds, y = IDFT_m(DFT_m(x)·DFT_m(b)) for b = g laid out
for it (fft_plan.filter_values), so two m-point DFTs do the whole filter: half the work, one kernel instead of
two (and the product between them, at 4093, where it is not fused), nothing through memory between them.

``fuse_filters`` finds, after the rewrite and fuse_products, each aotcuda::fft_rows c2r node at a Bluestein length
whose input is the only use of

    the product of an r2c fft_rows node of the same n and dim (no window) and a weight, or
    such an r2c node, the c2r given the weight (fuse_products),

where the weight is a constant of the program (a parameter, buffer or lifted constant, through shape ops:
view, unsqueeze, expand, clone, …) that every row shares (size 1 on every dim but the transformed one), and
replaces the three with one fft_rows node of kind "conv" over the r2c's input, its tables computed here in
float64 from the weight's values (g = s_r2c·s_c2r·irfft(w, n, norm="forward"), the two nodes' scales folded
into it) and kept as a program constant. A weight computed at each call (from an input) or one weight a
channel is left as it was: its kernel would have to be transformed at each call. Only where AOTCUDA_FFT_KERNEL's
fft_rows nodes are (CUDA), and AOTCUDA_FFT_FILTER_CONVOLUTION is on.
"""

from __future__ import annotations

import warnings

import torch

from aotcuda import switches
from aotcuda.passes.complex_to_real.spectral.product import argument, factors, tensor_value, values_of

aten = torch.ops.aten
# Ops that only reshape, select or copy a constant on the way to the product; evaluated on its value here.
_SHAPE_OPS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
              aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.expand.default, aten.permute.default,
              aten.clone.default, aten.alias.default, aten.slice.Tensor, aten.select.int, aten._to_copy.default}


def _constant_values(ep: torch.export.ExportedProgram) -> dict[str, torch.Tensor]:
    """Each placeholder of ep that holds a parameter, buffer or lifted constant that the program does not write:
    its value, a complex one as its pair (view_as_real), as the rewrite's graph holds it."""
    signature = ep.graph_signature
    written = set(signature.buffers_to_mutate.values()) | set(getattr(signature, "parameters_to_mutate", {}).values())
    values = {}
    for name, target in {**signature.inputs_to_parameters, **signature.inputs_to_buffers,
                         **signature.inputs_to_lifted_tensor_constants}.items():
        if target in written:  # state the program writes: its value at a call is not the one here
            continue
        value = ep.state_dict.get(target, ep.constants.get(target))
        if isinstance(value, torch.Tensor) and not value.is_meta:  # (a meta tensor has no values to read)
            values[name] = torch.view_as_real(value.detach()) if value.is_complex() else value.detach()
    return values


def _value(node, constants: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """The value of `node` where it is a constant of the program through _SHAPE_OPS, else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "placeholder":
        return constants.get(node.name)
    if node.op != "call_function" or node.target not in _SHAPE_OPS:
        return None
    source = _value(node.args[0], constants)
    rest = [*node.args[1:], *node.kwargs.values()]
    if source is None or any(isinstance(a, (torch.fx.Node, torch.SymInt)) for a in torch.utils._pytree.tree_leaves(rest)):
        return None
    kwargs = {k: v for k, v in node.kwargs.items() if k != "device"}
    return node.target(source, *node.args[1:], **kwargs)


def _shared_bins(weight: torch.Tensor, spectrum: torch.Tensor, dim: int) -> torch.Tensor | None:
    """The weight's bins (complex128 [bins]) where pair `weight` broadcasts against the pair `spectrum`
    ([..., bins at dim, ..., 2]) with size 1 on every dim but `dim`, else None."""
    if weight.dim() > spectrum.dim() or weight.shape[-1] != 2 or weight.dtype.is_complex:
        return None
    shape = [1] * (spectrum.dim() - weight.dim()) + list(weight.shape)
    bins = spectrum.shape[dim]
    if any(size != 1 for i, size in enumerate(shape[:-1]) if i != dim) or shape[dim] not in (1, bins):
        return None
    pairs = weight.reshape(shape[dim], 2).to(torch.float64)
    return torch.complex(pairs[:, 0], pairs[:, 1]).expand(bins).contiguous()


def _filter(c2r: torch.fx.Node, constants) -> tuple[torch.fx.Node, torch.Tensor] | None:
    """(the r2c node, the weight's bins) where c2r node `c2r` ends a filter the convolution takes (module
    docstring), else None."""
    n, dim = argument(c2r, "n"), argument(c2r, "dim")
    spectrum = c2r.args[0]
    if (not isinstance(spectrum, torch.fx.Node) or tensor_value(spectrum) is None
            or [u for u in spectrum.users if not _dead(u)] != [c2r]):
        return None
    weight = argument(c2r, "weight")
    if weight is not None:
        candidates = [(spectrum, weight)]
    else:
        found = factors(spectrum)
        if found is None or tensor_value(spectrum).dtype != torch.float32:
            return None
        candidates = [found, found[::-1]]
    for source, weight in candidates:
        r2c, order = values_of(source)
        bins = _value(weight, constants)
        # The r2c's spectrum must serve this c2r alone: every use of it dead once the c2r is.
        if (order != list(range(len(order))) or bins is None or not _call_of(r2c, c2r.target)
                or argument(r2c, "kind") != "r2c" or argument(r2c, "n") != n or argument(r2c, "dim") != dim
                or argument(r2c, "out_len") != n // 2 + 1 or argument(r2c, "window") is not None
                or not all(_dead(user, c2r) for user in r2c.users)):
            continue
        # The same rank (and so, with the weight's other dims 1, the same shape: a weight of more dims would add rows
        # the convolution of x does not have) and dtype in and out.
        bins = _shared_bins(bins, tensor_value(spectrum), dim)
        if (bins is not None and tensor_value(spectrum).dim() == tensor_value(r2c).dim()
                and tensor_value(r2c.args[0]).dtype == tensor_value(c2r).dtype):
            return r2c, bins
    return None


def _dead(node: torch.fx.Node, gone: torch.fx.Node | None = None) -> bool:
    """Whether node's value reaches no output once `gone` is removed: `gone` itself, or an aten op all of whose
    users are dead (fuse_products leaves the product it took apart so, for rebuild_program to remove)."""
    return node is gone or (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                            and node.target.namespace == "aten" and not node.target._schema.is_mutable
                            and all(_dead(user, gone) for user in node.users))


def _call_of(node, target) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is target


def fuse_filters(gm: torch.fx.GraphModule, ep: torch.export.ExportedProgram) -> int:
    """Replace each filter of `gm` (the rewrite's graph of `ep`, whose placeholders are ep's in order) that the
    convolution takes by one fft_rows conv node (module docstring); how many."""
    if not switches.flag("AOTCUDA_FFT_FILTER_CONVOLUTION") or not hasattr(torch.ops.aotcuda, "fft_rows"):
        return 0
    from aotcuda.kernels import fft_plan

    target = torch.ops.aotcuda.fft_rows.default
    values = _constant_values(ep)
    constants = {traced.name: values[original.name]
                 for traced, original in zip(gm.graph.find_nodes(op="placeholder"), ep.graph.find_nodes(op="placeholder"))
                 if original.name in values}
    count = 0
    for c2r in list(gm.graph.find_nodes(op="call_function", target=target)):
        n = argument(c2r, "n")
        plan = fft_plan.kernel_plan(n) if isinstance(n, int) else None
        if argument(c2r, "kind") != "c2r" or argument(c2r, "out_len") != n or not isinstance(plan, fft_plan.Bluestein):
            continue
        found = _filter(c2r, constants)
        if found is None:
            continue
        r2c, bins = found
        scale = argument(r2c, "scale") * argument(c2r, "scale")
        kernel = torch.fft.irfft(bins, n=n, norm="forward") * scale  # float64: g, both scales in it
        x = r2c.args[0]
        value = tensor_value(x)
        tables = fft_plan.filter_values(plan, kernel).to(torch.float32)
        name = f"_fft_filter_tables_{count}"
        while hasattr(gm, name):
            name += "_"
        setattr(gm, name, tables.to(value.device))  # a plain attribute, as make_fx keeps its tensor constants
        with gm.graph.inserting_before(c2r), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Attempted to insert a get_attr Node with no underlying reference")
            constant = gm.graph.get_attr(name)
            conv = gm.graph.call_function(target, (x, constant, argument(r2c, "dim"), n, n, "conv", False, 1.0))
        with value.fake_mode:
            constant.meta = {**c2r.meta, "val": value.fake_mode.from_tensor(getattr(gm, name), static_shapes=True)}
            conv.meta = {**c2r.meta, "val": target(value, constant.meta["val"], argument(r2c, "dim"), n, n,
                                                   "conv", False, 1.0)}
        c2r.replace_all_uses_with(conv)  # the r2c, the product and the c2r are dead: rebuild_program removes them
        count += 1
    return count
