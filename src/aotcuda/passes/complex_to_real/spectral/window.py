"""stft's front end fused into aotcuda::fft_rows: the window multiply becomes the op's `window` operand.

torch.stft lowers to frames (unfold of the padded signal: a view whose frame dim, stride hop < n, overlaps
the transformed dim), a multiply by the window, and _fft_r2c (_fft_c2c for a complex signal). The rules
rewrite the transform into an fft_rows node that reads its input with any strides; left so, the multiply
would be one more kernel, writing every frame's n values out once. After the rewrite,
``fuse_windows`` finds each fft_rows node (c2c or r2c, no window yet) whose input is the only use of

    mul(frames, window)                    r2c: window real 1-D of x.shape[dim] values, dim the last
    mul(frames, unsqueeze(window, -1))     c2c: the pair rule's real operand, dim the last complex one

with frames of the product's own shape and dtype (no broadcast, no promotion), and hands the op `frames`
and `window` instead: the frames, still the unfold view, are read from the signal in place and multiplied
by the window as they are loaded. The multiply is then dead (rebuild_program removes it). The CPU kernel
form's aotcuda::fft_rows_cpu (kernels/fft_cpu.py: the same operands without `tables`) takes its window the
same way. The GEMM and Stockham forms make no such node and keep the multiply.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _tensor(node) -> torch.Tensor | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _window_of(factor: torch.fx.Node, kind: str) -> torch.fx.Node | None:
    """The 1-D real window a factor of the product multiplies along the transformed dim, or None."""
    if kind == "c2c":
        if factor.target is not aten.unsqueeze.default or factor.args[1] not in (-1, 1):
            return None
        factor = factor.args[0]
    value = _tensor(factor)
    if value is None or value.dim() != 1 or not value.dtype.is_floating_point:
        return None
    return factor


def _operands(node: torch.fx.Node) -> int:
    """How many operands come before `window`: 8 for fft_rows (x, tables, dim, …), 7 for fft_rows_cpu."""
    return 7 if node.target.name().startswith("aotcuda::fft_rows_cpu") else 8


def fused(node: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(frames, window) that fft_rows (or fft_rows_cpu) node `node` can take in place of its multiplied
    input, or None."""
    count = _operands(node)
    x, dim, kind = node.args[0], node.args[count - 6], node.args[count - 3]
    if kind not in ("c2c", "r2c") or (len(node.args) > count and node.args[count] is not None) or "window" in node.kwargs:
        return None
    if not (isinstance(x, torch.fx.Node) and x.target is aten.mul.Tensor and len(x.users) == 1
            and len(x.args) == 2 and not x.kwargs):
        return None
    product = _tensor(x)
    last = product.dim() - (1 if kind == "r2c" else 2) if product is not None else None
    if product is None or dim != last:
        return None
    for frames, factor in (x.args, x.args[::-1]):
        values = _tensor(frames)
        if values is None or not isinstance(factor, torch.fx.Node):
            continue
        window = _window_of(factor, kind)
        if window is None or values.dtype != product.dtype or values.device != product.device:
            continue
        length = _tensor(window).shape[0]
        if (isinstance(length, int) and length == values.shape[dim] and tuple(values.shape) == tuple(product.shape)
                and _tensor(window).device == values.device):
            return frames, window
    return None


def fuse_windows(graph: torch.fx.Graph) -> int:
    """Give each fft_rows and fft_rows_cpu node of `graph` its window multiply (module docstring); how many
    were fused."""
    namespace = getattr(torch.ops, "aotcuda", None)
    count = 0
    for name in ("fft_rows", "fft_rows_cpu"):
        target = getattr(namespace, name, None) if namespace is not None else None
        if target is None:
            continue
        for node in graph.find_nodes(op="call_function", target=target.default):
            found = fused(node)
            if found is None:
                continue
            frames, window = found
            node.args = (frames, *node.args[1:_operands(node)], window)
            count += 1
    return count
