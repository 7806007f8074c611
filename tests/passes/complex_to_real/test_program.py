"""Program-level behaviour: state and graph signature, the argument left as it was, re-decomposition."""

import copy

import pytest
import torch
from torch.export.graph_signature import InputKind

from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import assert_matches, assert_no_complex, export, pair


class Stateful(torch.nn.Module):
    """A complex parameter, persistent and non-persistent complex buffers, a complex constant, real state."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, dtype=torch.complex64))
        self.register_buffer("persistent", torch.randn(4, dtype=torch.complex64))
        self.register_buffer("transient", torch.randn(4, dtype=torch.complex64), persistent=False)
        self.table = torch.randn(4, dtype=torch.complex64)  # lifted as a constant tensor
        self.scale = torch.nn.Parameter(torch.rand(4))

    def forward(self, x):
        z = torch.view_as_complex(x) * self.weight + self.persistent - self.transient * self.table
        return torch.view_as_real(z * self.scale).flatten(-2)


@pytest.fixture(scope="module")
def stateful():
    model = Stateful()
    ep = export(model, (pair(3, 4),))
    before = (ep.graph_module.code, copy.deepcopy(ep.graph_signature), {k: v.clone() for k, v in ep.state_dict.items()},
              {k: v.clone() for k, v in ep.constants.items()})
    return model, ep, ReplaceComplexWithRealPass(strict=True)(ep), before


def test_state_becomes_pairs_under_the_same_names(stateful):
    model, ep, new, _ = stateful
    assert set(new.state_dict) == set(ep.state_dict) and set(new.constants) == set(ep.constants)
    assert isinstance(new.state_dict["weight"], torch.nn.Parameter)
    torch.testing.assert_close(new.state_dict["weight"].data, torch.view_as_real(model.weight.data))
    torch.testing.assert_close(new.state_dict["persistent"], torch.view_as_real(model.persistent))
    torch.testing.assert_close(new.constants["transient"], torch.view_as_real(model.transient))
    constant = next(k for k in new.constants if k != "transient")
    torch.testing.assert_close(new.constants[constant], torch.view_as_real(model.table))
    assert new.state_dict["scale"] is ep.state_dict["scale"]  # real state is shared, not copied
    assert_no_complex(new)


def test_graph_signature_keeps_names_kinds_and_order(stateful):
    _, ep, new, _ = stateful
    old_specs, new_specs = ep.graph_signature.input_specs, new.graph_signature.input_specs
    assert [(s.kind, s.arg.name, s.target, s.persistent) for s in old_specs] == \
           [(s.kind, s.arg.name, s.target, s.persistent) for s in new_specs]
    assert [n.name for n in new.graph.nodes if n.op == "placeholder"] == [s.arg.name for s in new_specs]
    assert {s.kind for s in new_specs} >= {InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR}
    assert list(new.graph_signature.non_persistent_buffers) == ["transient"]


def test_the_argument_program_is_left_as_it_was(stateful):
    _, ep, _, (code, signature, state, constants) = stateful
    assert ep.graph_module.code == code
    assert str(ep.graph_signature) == str(signature)
    for k, v in state.items():
        assert ep.state_dict[k].dtype == v.dtype and torch.equal(ep.state_dict[k], v)
    for k, v in constants.items():
        assert ep.constants[k].dtype == v.dtype and torch.equal(ep.constants[k], v)


def test_result_runs_through_module_and_survives_run_decompositions(stateful):
    model, _, new, _ = stateful
    x = pair(3, 4)
    assert_matches(model(x), new.module()(x), torch.float32)
    again = new.run_decompositions()
    assert_no_complex(again)
    assert_matches(model(x), again.module()(x), torch.float32)


def test_a_program_without_complex_values_comes_back_as_is():
    ep = export(torch.nn.Linear(4, 3), (torch.randn(2, 4),))
    assert ReplaceComplexWithRealPass(strict=True)(ep) is ep


def test_an_output_that_is_an_input_after_the_rewrite():
    class RoundTrip(torch.nn.Module):
        def forward(self, x):
            return torch.view_as_real(torch.view_as_complex(x)), x * 2

    ep = export(RoundTrip(), (pair(3),))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    x = pair(3)
    assert_matches(RoundTrip()(x), new.module()(x), torch.float32)
    assert_matches(RoundTrip()(x), new.run_decompositions().module()(x), torch.float32)


def test_dynamic_dims_stay_symbolic_in_every_new_node():
    class Rotate(torch.nn.Module):
        def forward(self, x, f):
            return torch.view_as_real(torch.view_as_complex(x) * torch.view_as_complex(f)[: x.shape[0]])

    seq = torch.export.Dim("seq", max=32)
    ep = export(Rotate(), (pair(5, 4), pair(32, 4)), dynamic_shapes=({0: seq}, None))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    first_dims = [n.meta["val"].shape[0] for n in new.graph.nodes
                  if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)
                  and n.meta["val"].ndim == 3 and n.meta["val"].shape[1] == 4]
    assert first_dims and all(isinstance(d, torch.SymInt) for d in first_dims)
    for length in (3, 17):
        x, f = pair(length, 4), pair(32, 4)
        assert_matches(Rotate()(x, f), new.module()(x, f), torch.float32)
