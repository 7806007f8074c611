"""The package signature's names, at the ExportedProgram level (no compile): each output is named by its
place in forward's result (``out``, ``out[0]``, ``out['logits']``, ``out.hidden``), never by FX node."""

import collections

import pytest
import torch

from aotcuda.lowering.signature import signature_from_exported_program
from aotcuda.passes.complex_to_real import ReplaceComplexWithRealPass

Pair = collections.namedtuple("Pair", "hidden scores")


def _rotate(x):
    return torch.view_as_real(torch.view_as_complex(x.reshape(2, 2, 2)) * 1j)


# forward's result for an input x of shape (2, 4), and the names its tensor leaves must get.
RESULTS = {
    "one tensor": (lambda x: x * 2, ["out"]),
    "tuple": (lambda x: (x * 2, x + 1), ["out[0]", "out[1]"]),
    "dict": (lambda x: {"logits": x * 2, "h": x.sum(0)}, ["out['logits']", "out['h']"]),
    "named tuple": (lambda x: Pair(x * 2, x - 1), ["out.hidden", "out.scores"]),
    "nested": (lambda x: [x * 2, {"k": (x + 3, x.mean())}], ["out[0]", "out[1]['k'][0]", "out[1]['k'][1]"]),
    "one tensor twice": (lambda x: (x * 2,) * 2, ["out[0]", "out[1]"]),
    "an input returned": (lambda x: (x, x + 1), ["out[0]", "out[1]"]),
    "complex, rewritten to a pair": (_rotate, ["out"]),
}


class Returning(torch.nn.Module):
    def __init__(self, result):
        super().__init__()
        self.result = result

    def forward(self, x):
        return self.result(x)


@pytest.mark.parametrize("kind", list(RESULTS))
def test_outputs_are_named_by_their_place_in_the_result(kind):
    result, names = RESULTS[kind]
    ep = torch.export.export(Returning(result), (torch.randn(2, 4),))
    rewritten = ReplaceComplexWithRealPass()(ep)
    signature = signature_from_exported_program(rewritten)
    assert [spec["name"] for spec in signature["outputs"]] == names
    assert [spec["name"] for spec in signature["inputs"]] == ["x"]
    # The names are the caller's paths: each reaches the matching leaf of the eager result.
    x = torch.randn(2, 4)
    out = result(x)
    for name, leaf in zip(names, torch.utils._pytree.tree_leaves(out)):
        assert torch.equal(eval(name, {"out": out}), leaf)


def test_a_transformers_model_output_is_named_by_its_keys():
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    ep = torch.export.export(Returning(lambda x: BaseModelOutputWithPooling(last_hidden_state=x * 2,
                                                                            pooler_output=x.sum(0))),
                             (torch.randn(2, 4),))
    signature = signature_from_exported_program(ep)
    assert [spec["name"] for spec in signature["outputs"]] == ["out['last_hidden_state']", "out['pooler_output']"]
