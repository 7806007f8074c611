"""A complex product before an inverse transform's kernel fused into it: the product's factors become the op's `weight`.

A spectral filter (irfft(rfft(x) · w), FFT convolution, FNO's pointwise modes) multiplies a spectrum by a weight
between two transforms. Left as it is, the product is one more pass through memory between the two kernels
(on the 2-core machine, 512 rows at n = 4096: 1.25 ms of a 5.7 ms filter, scalar code, since the weight's pair
is read with stride 2, docs/performance.md), plus the copy of the first transform's planes into eager's pair
layout that the product reads. After the rewrite, ``fuse_products`` finds each aotcuda::fft_rows_cpu node and
each aotcuda::fft_rows node (the CUDA kernel form's Triton op, kernels/fft_rows.py; c2c or c2r, no weight yet)
whose input is the only use of the product mul_pairs writes
(pair_algebra.mul_pairs: a·br + flip(a, −1)·(−bi, bi)),

    add(mul(a, slice(b, -1, 0, 1)), mul(flip(a, [-1]), mul(slice(b, -1, 1, ·), arange(-1, 2, 2))))

with a and b float32 pairs (the kernel multiplies in float32: no rounding of eager's is skipped) of which one has
the product's shape and the other broadcasts against it (fft_rows.check_weight, both ops' check), and hands the
op that one as x (its layout copies peeled off: both kernels read any strides) and the other as `weight`, which
the kernel multiplies the points by as it loads them (kernels/fft_cpu_source.py: in L1, between the transposes
and a c2r's merge; kernels/fft_rows.py: in registers, before a c2r's mirror, in the tiled and the Bluestein
kernel alike). The product is then dead (rebuild_program removes it). The two ops order their operands
differently (fft_rows has `tables` second); each operand's place is read from the op's schema by name. The
GEMM and Stockham ATen forms make no such node and keep the product.

On CUDA the product is fused only where the kernel's tile holds at most CUDA_TILE_MOST points: the weight's
loads and registers cost more than the product's pass through memory saves in the largest tiles
(H200, torch 2.11, 4096 rows, float32, the separate product kernel then fft_rows against fft_rows with the
weight, CUDA-graph replays, benchmarks/scripts/fft_weight_ab.py: 0.67-0.91x the time at n = 64, 400 and 1024,
0.94-0.97x at 1009 (Bluestein, a tile of 2048), but 1.11x for c2r and 0.99x for c2c at 4096 and 1.03-1.07x at
4093 (two halves of 4096)). The CPU kernel fuses at every length (its product is scalar code, 0.2x of a filter).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten
OPS = ("fft_rows_cpu", "fft_rows")  # the aotcuda ops that take a weight, each fused where it is registered
CUDA_TILE_MOST = 2048  # fft_rows (CUDA) takes a product's weight only where its plan's tile is at most this


def tensor_value(node) -> torch.Tensor | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _call(node, target, count: int) -> bool:
    return isinstance(node, torch.fx.Node) and node.target is target and len(node.args) == count and not node.kwargs


def _last(node: torch.fx.Node, dim) -> bool:
    value = tensor_value(node)
    return value is not None and isinstance(dim, int) and dim % value.dim() == value.dim() - 1


def _part(node, start: int, stop: int):
    """b where node is slice(b, last dim, start, stop…) (stop: at least `stop`), else None."""
    if not (isinstance(node, torch.fx.Node) and node.target is aten.slice.Tensor and not node.kwargs
            and len(node.args) == 4):
        return None
    b, dim, first, end = node.args
    return b if _last(b, dim) and first == start and isinstance(end, int) and end >= stop else None


def _is_rotate_sign(node) -> bool:
    """Whether node is pair.rotate_sign's arange(-1, 2, 2): [-1, 1]."""
    return (isinstance(node, torch.fx.Node) and node.target is aten.arange.start_step
            and tuple(node.args) == (-1, 2, 2))


def factors(product: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(a, b) where `product` is mul_pairs(a, b) as the rewrite writes it (module docstring), else None."""
    if not _call(product, aten.add.Tensor, 2):
        return None
    first, second = product.args
    if not (_call(first, aten.mul.Tensor, 2) and _call(second, aten.mul.Tensor, 2)):
        return None
    a, b = first.args[0], _part(first.args[1], 0, 1)
    flipped, signed = second.args
    if b is None or not (_call(flipped, aten.flip.default, 2) and flipped.args[0] is a):
        return None
    if not (len(flipped.args[1]) == 1 and _last(a, flipped.args[1][0]) and _call(signed, aten.mul.Tensor, 2)):
        return None
    im, sign = signed.args
    return (a, b) if _part(im, 1, 2) is b and _is_rotate_sign(sign) else None


def values_of(node: torch.fx.Node) -> tuple[torch.fx.Node, list[int]]:
    """(source, order): node's values are source.permute(order)'s, through the layout copies the rewrite adds
    (layout.py: permute → clone → permute) and any permute or clone."""
    order = list(range(tensor_value(node).dim()))
    while isinstance(node, torch.fx.Node):
        if node.target is aten.permute.default and len(node.args) == 2 and not node.kwargs:
            order = [node.args[1][i] for i in order]
        elif not (node.target is aten.clone.default and len(node.args) == 1):
            break
        node = node.args[0]
    return node, order


def operand_index(node: torch.fx.Node, name: str) -> int:
    """Where operand `name` (kind, window, weight) of an aotcuda op node sits in its arguments, from its schema."""
    return [argument.name for argument in node.target._schema.arguments].index(name)


def argument(node: torch.fx.Node, name: str):
    at = operand_index(node, name)
    return node.args[at] if len(node.args) > at else node.kwargs.get(name)


def _operands(node: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(x, weight) that fft_rows or fft_rows_cpu node `node` can take in place of its input, the product of
    the two."""
    # Imported here: fft_rows imports Triton where it is installed, which a CPU-only program never needs.
    from aotcuda.kernels.fft_rows import check_weight

    kind = argument(node, "kind")
    if kind not in ("c2c", "c2r") or argument(node, "weight") is not None or not _worth_it(node):
        return None
    product = node.args[0]
    found = factors(product) if isinstance(product, torch.fx.Node) and len(product.users) == 1 else None
    value = tensor_value(product)
    if found is None or value is None or value.dtype != torch.float32:
        return None
    for x, weight in (found, found[::-1]):
        xv, wv = tensor_value(x), tensor_value(weight)
        if xv is None or wv is None or xv.dtype != torch.float32 or tuple(xv.shape) != tuple(value.shape):
            continue
        try:
            check_weight(node.target.name(), xv, kind, wv)
        except ValueError:
            continue
        return x, weight
    return None


def _worth_it(node: torch.fx.Node) -> bool:
    """Whether the kernel of `node` gains by taking the weight: always for fft_rows_cpu; for fft_rows, where
    its plan's tile (a Bluestein plan's: each half's) holds at most CUDA_TILE_MOST points (module docstring)."""
    if node.target.name() != "aotcuda::fft_rows":
        return True
    from aotcuda.kernels.fft_plan import kernel_plan

    n = argument(node, "n")
    plan = kernel_plan(n) if isinstance(n, int) else None
    return plan is not None and plan.tile <= CUDA_TILE_MOST


def _targets() -> list:
    """The OPS registered in this process (an op's module registers it when a pass first wants it)."""
    namespace = getattr(torch.ops, "aotcuda", None)
    found = [getattr(namespace, name, None) if namespace is not None else None for name in OPS]
    return [target.default for target in found if target is not None]


def fuse_products(graph: torch.fx.Graph) -> int:
    """Give each fft_rows_cpu and fft_rows node of `graph` the complex product before it as its weight (module
    docstring); how many were fused."""
    count = 0
    for target in _targets():
        for node in graph.find_nodes(op="call_function", target=target):
            found = _operands(node)
            if found is None:
                continue
            x, weight = found
            source, order = values_of(x)
            if order != list(range(len(order))):
                with graph.inserting_before(node):
                    permuted = graph.call_function(aten.permute.default, (source, order))
                permuted.meta = {**x.meta, "val": tensor_value(source).permute(order)}
                source = permuted
            before = [argument.name for argument in target._schema.arguments][1:operand_index(node, "weight")]
            node.args = (source, *(argument(node, name) for name in before), weight)
            node.kwargs = {}
            count += 1
    return count
