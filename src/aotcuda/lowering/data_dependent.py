"""Decompositions of the data-dependent ops model libraries emit, so that they become generated code on every
device instead of fallback kernels.

Every transformers vision-language model merges its image features into the text embeddings with
``inputs_embeds.masked_scatter(image_mask, image_features)``, after a check that the two agree
(``torch_compilable_check(n_image_tokens * hidden == image_features.numel(), ...)``, which is
``torch._check_tensor_all`` under export). Inductor (torch 2.11-2.15) has:

- ``masked_scatter``: a decomposition only where the backend has MASKED_SCATTER_WITH_INDEX (Triton, so CUDA);
  on the CPU a fallback kernel (``aoti_torch_cpu_masked_scatter``, outside the allow-list);
- ``_is_all_true`` (the tensor check): no lowering and no C shim: a proxy-executor call, which aotcuda.load
  cannot run;
- ``_assert_async.default`` (``torch._assert_async(t)``): a lowering for the ``.msg`` overload only.

The functions below are those ops in plain torch, exact (no arithmetic on the values; only indexing), with
eager's error when the data disagree: Inductor's own masked_scatter algorithm (running index of the mask
by cumsum, a masked gather from the source, a select) on every device, with eager's check that the source
has enough elements; ``_is_all_true`` as ``all``; ``_assert_async`` with eager's message.
"""

from __future__ import annotations

from typing import Callable

import torch

aten = torch.ops.aten

# eager's messages (aten/src/ATen/native/TensorAdvancedIndexing.cpp, TensorCompare.cpp)
MASKED_SCATTER_SOURCE_TOO_SMALL = "masked_scatter: expected source to have at least as many elements as ones in mask"
ASSERT_ASYNC_FAILED = "Expected Tensor with single nonzero value, but got zero"


def masked_scatter(self: torch.Tensor, mask: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """self where mask is False; the source's elements, in order, where it is True (mask broadcasts with
    self, as in eager)."""
    self, mask = aten.broadcast_tensors([self, mask])
    mask_flat = mask.reshape(-1)
    source_flat = source.reshape(-1)
    source_index = mask_flat.cumsum(0) - 1  # the running count: where each True position reads the source
    # side-effectful, so kept: a short source raises as eager does, instead of reading past its end
    aten._assert_async.msg(torch.all(source_index < source_flat.numel()), MASKED_SCATTER_SOURCE_TOO_SMALL)
    taken = aten._unsafe_masked_index(source_flat, mask_flat, [source_index], 0)
    return torch.where(mask_flat, taken, self.reshape(-1)).view(self.shape)


def is_all_true(self: torch.Tensor) -> torch.Tensor:
    """The 0-d bool every element of self is true (torch._check_tensor_all's test)."""
    return torch.all(self)


def assert_async(self: torch.Tensor) -> None:
    aten._assert_async.msg(self, ASSERT_ASYNC_FAILED)


DATA_DEPENDENT_DECOMPOSITIONS: dict[torch._ops.OpOverload, Callable] = {
    aten.masked_scatter.default: masked_scatter,
    aten._is_all_true.default: is_all_true,
    aten._assert_async.default: assert_async,
}
