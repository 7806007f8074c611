"""Input containers registered with torch's pytree without a serialized name: refused before compiling
(lowering/input_types.py)."""

import warnings
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


def test_dynamic_dims_of_a_dataclass_input_are_taken_as_the_dataclass_or_from_the_command_line():
    """Third new user (2026-12-06): `aotcuda lower ... --dynamic batch.tokens:0:1:32:b --dynamic batch_weights:0:1:32:b`
    for a dataclass input ended with torch's `ValueError: Node type mismatch; expected <class 'list'>, but got <class
    'Named'>` (the command line built the dims as a Named of dim dicts, the form a user writes in Python too, where
    torch.export reads a registered type's dims as the list of its children's). Both forms export now."""
    from aotcuda.cli_inputs import dynamic_shapes_from

    model, x = TakesBatch(), torch.randn(4, 3)
    batch = Named(torch.randn(4, 3), torch.randn(4, 3))
    dim = torch.export.Dim("b", min=1, max=32)
    for dynamic in ({"x": {0: dim}, "batch": Named({0: dim}, {0: dim})},
                    dynamic_shapes_from(("x:0:1:32:b", "batch.tokens:0:1:32:b", "batch_weights:0:1:32:b"),
                                        model, (x, batch), {})):
        ep = before_compile(model, (x, batch), {}, dynamic).program
        sizes = [str(node.meta["val"].shape[0]) for node in ep.graph.nodes
                 if node.op == "placeholder" and node.name in ("x", "batch_tokens", "batch_weights")]
        assert len(sizes) == 3 and len(set(sizes)) == 1 and not sizes[0].isdigit(), sizes


class ReturnsUnnamed(torch.nn.Module):
    def forward(self, x):
        return Unnamed(x * 2, x + 1)


class ReturnsTopk(torch.nn.Module):
    def forward(self, x):
        return torch.topk(x, 2)


def test_a_dataclass_output_without_a_serialized_name_is_said_to_come_back_as_a_tuple():
    """Third new user (2026-12-06): forward returning ``Out(logits, hidden)``, registered with
    ``torch.export.register_dataclass(Out)``, lowered and ran, and every call returned ``(logits, hidden)``, a tuple,
    without a word. A warning says so, with the registration that keeps the type; torch's own named tuples (topk),
    which have no serialized name, stay silent as before."""
    with pytest.warns(UserWarning) as caught:
        before_compile(ReturnsUnnamed(), (torch.randn(2, 3),))
    (message,) = [str(w.message) for w in caught if "forward returns" in str(w.message)]
    assert message.startswith(f"forward returns a {__name__}.Unnamed, a type registered with torch's pytree without a "
                              "serialized name, which the package cannot store: a call returns its tensors as a "
                              "plain tuple, in order."), message
    assert f"torch.export.register_dataclass(Unnamed, serialized_type_name='{__name__}.Unnamed')" in message
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("always")
        before_compile(ReturnsTopk(), (torch.randn(2, 3),))
    assert not [w for w in quiet if "forward returns" in str(w.message)]
