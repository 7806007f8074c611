"""Known torch.export failures of library models get the fix as a note (issue 11 item 4)."""

from __future__ import annotations

import pytest
import torch

import aotcuda
from aotcuda.export_hints import fix_for


class ReturnsUnknownType(torch.nn.Module):
    class Holder:
        def __init__(self, value):
            self.value = value

    def forward(self, x):
        return self.Holder(x + 1)


def test_an_unflattenable_output_gets_a_note_and_keeps_torch_error():
    with pytest.raises(RuntimeError, match="not a known type") as caught:
        aotcuda.lower(ReturnsUnknownType(), (torch.randn(3),), device="cpu")
    notes = [note for note in getattr(caught.value, "__notes__", []) if note.startswith("aotcuda:")]
    assert len(notes) == 1 and "Holder" in notes[0] and "register_pytree_node" in notes[0], notes


def test_a_transformers_cache_output_names_use_cache_false():
    message = ("Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not a known type. "
               "If this type holds tensors, you need to register a pytree for it.")
    assert '{"use_cache": False}' in fix_for(message)
    assert fix_for("some other export failure") is None
