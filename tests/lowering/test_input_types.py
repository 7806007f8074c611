"""Input containers registered with torch's pytree without a serialized name: refused before compiling
(lowering/input_types.py)."""

from dataclasses import dataclass

import pytest
import torch

from aotcuda.lowering.pipeline import before_compile


@dataclass
class Unnamed:
    tokens: torch.Tensor
    weights: torch.Tensor


@dataclass
class Named:
    tokens: torch.Tensor
    weights: torch.Tensor


torch.export.register_dataclass(Unnamed)  # as torch's docs write it: no serialized_type_name
torch.export.register_dataclass(Named, serialized_type_name=f"{__name__}.Named")


class TakesBatch(torch.nn.Module):
    def forward(self, x, batch, scale: float = 1.0):
        return x * batch.tokens * batch.weights * scale


def test_a_dataclass_input_without_a_serialized_name_is_refused_before_compiling_with_the_fix():
    """Third new user (2026-12-06): a dataclass input registered with ``torch.export.register_dataclass(Batch)``
    compiled in full, then failed with torch's ``NotImplementedError: No registered serialization name for <class
    'models.Batch'> found. Please update your _register_pytree_node call with a `serialized_type_name` kwarg`` (a
    call the user never made). Now before the compile: the argument, the type and the registration that fixes it;
    the same model with a named dataclass goes on (by keyword too)."""
    x = torch.randn(2, 3)
    with pytest.raises(TypeError) as raised:
        before_compile(TakesBatch(), (x, Unnamed(torch.randn(2, 3), torch.randn(2, 3))))
    message = str(raised.value)
    assert message.startswith(f"input 'batch' holds a {__name__}.Unnamed, a type registered with torch's pytree "
                              "without a serialized name"), message
    assert (f"torch.export.register_dataclass(Unnamed, serialized_type_name='{__name__}.Unnamed')" in message)
    with pytest.raises(TypeError, match="input 'batch' holds"):
        before_compile(TakesBatch(), (x,), {"batch": Unnamed(torch.randn(2, 3), torch.randn(2, 3))})
    before_compile(TakesBatch(), (x, Named(torch.randn(2, 3), torch.randn(2, 3))))
