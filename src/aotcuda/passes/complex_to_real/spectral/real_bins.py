"""A real input's bins that are real by symmetry, written as eager writes them: imaginary part +0.0.

The DFT of a real row is Hermitian: bin 0, and bin n/2 for an even n, are real. pocketfft and cuFFT write
them as (x, +0.0); the rewrite's forms (the kernels, Stockham stages, the GEMM plan, Bluestein) sum their way
there and can end in −0.0 (an odd n, a negative sum) or in a rounding residue. angle() and log().imag read
that sign: −π where eager gives +π, a silent wrong phase at half of all random rows (a new user's trial,
session 34). So the rewrite sets those bins' imaginary part to +0.0 after an r2c's rule, and after a c2c of a real
tensor cast to complex (fftn of a real x), per node (`as_eager_writes`).

The set is an elementwise pass with a mask, which stands between the r2c and what reads it: before another
transform (a filter irfft(rfft(x)·w), FreeU's masked ifftn) it would hide the r2c node from the spectral fusions
(spectral/product.py, spectral/filter.py) and cost a pass through memory, for bins whose imaginary parts the
next transform drops (c2r) or sums with rounding noise of its own (c2c). `only_transforms_read` tells, from
the original graph, an r2c whose spectrum reaches only transforms or abs (a magnitude), through linear elementwise
ops and views, whose result is left as summed.
"""

from __future__ import annotations

import torch

from aotcuda.passes.complex_to_real.pair import Pair

aten = torch.ops.aten
# Readers for which a zero's sign or a rounding residue in an imaginary part is rounding noise: transforms, and
# abs (a magnitude: Whisper's stft power).
_INSENSITIVE = {aten._fft_c2r.default, aten._fft_c2c.default, aten.abs.default}
# Ops that carry a spectrum to a transform unchanged but for a linear map of its values or their layout: the
# sign of a zero imaginary part, or its rounding residue, reaches the transform as rounding noise only.
_LINEAR = {aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.add.Tensor, aten.sub.Tensor,
           aten.neg.default, aten.clone.default, aten.alias.default, aten.view.default, aten._unsafe_view.default,
           aten.reshape.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
           aten.expand.default, aten.permute.default, aten.slice.Tensor, aten.constant_pad_nd.default,
           aten.index_select.default}  # index_select: fftshift (FreeU: fftn, fftshift, a mask, ifftshift, ifftn)


def only_transforms_read(node: torch.fx.Node) -> bool:
    """Whether every use of node's value ends in an FFT (_fft_c2r, _fft_c2c) or abs through _LINEAR ops only."""
    seen, frontier = set(), [node]
    while frontier:
        current = frontier.pop()
        for user in current.users:
            if user in seen:
                continue
            seen.add(user)
            if user.op != "call_function" or (user.target not in _INSENSITIVE and user.target not in _LINEAR):
                return False
            if user.target in _LINEAR:
                frontier.append(user)
    return True


def of_real_input(node: torch.fx.Node) -> bool:
    """Whether a c2c node transforms a real tensor cast to complex (``torch.fft.fftn(x)`` of a real x over every dim
    exports as ``_to_copy`` then ``_fft_c2c``): its bins real by symmetry are +0.0 in eager too."""
    source = node.args[0] if node.args else None
    if not (isinstance(source, torch.fx.Node) and source.op == "call_function"
            and source.target is aten._to_copy.default and source.args and isinstance(source.args[0], torch.fx.Node)):
        return False
    value = source.args[0].meta.get("val")
    return isinstance(value, torch.Tensor) and not value.is_complex()


def as_eager_writes(node: torch.fx.Node, args, result):
    """The rewritten `result` of FFT node `node` (its rewritten `args`), with its real bins' imaginary part +0.0
    where eager writes them so and a sign-sensitive op reads them: an r2c, or a c2c of a real tensor cast to complex;
    any other result as it is."""
    if not isinstance(result, Pair) or not (node.target is aten._fft_r2c.default or
                                            (node.target is aten._fft_c2c.default and of_real_input(node))):
        return result
    if only_transforms_read(node):
        return result
    source = args[0]  # the transformed input: the bin n/2 is of its length (an r2c keeps n // 2 + 1 bins)
    dims = [d % len(source.shape) for d in args[1]]
    return with_plus_zero(result, dims, [source.shape[d] for d in dims])


def with_plus_zero(result: Pair, dims: list[int], sizes: list[int]) -> Pair:
    """result ([..., 2] pair of a real input's transform over `dims` of lengths `sizes`) with imaginary part
    +0.0 where every transformed index k is 0 or n/2."""
    t = result.t
    mask = (torch.arange(2, device=t.device) == 1).view(*[1] * result.ndim, 2)  # the imaginary part
    for d, n in zip(dims, sizes):
        k = torch.arange(t.shape[d], device=t.device)
        shape = [1] * (result.ndim + 1)
        shape[d] = -1
        mask = mask & ((k == 0) | (k + k == n)).view(shape)
    return Pair(torch.where(mask, 0.0, t))
