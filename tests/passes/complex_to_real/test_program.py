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


class OverwrittenState(torch.nn.Module):
    """Complex state written with a real value, and real state with a complex one; both read next call."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.register_buffer("h", torch.zeros(4, dtype=torch.complex64))
        self.register_buffer("r", torch.zeros(4))

    def forward(self, x, level):
        z = torch.view_as_complex(x)
        out = z * 2 + self.h + self.r
        if self.how == "fill_real_tensor":
            self.h.fill_(level)
        elif self.how == "copy_real_scalar":
            self.h.copy_(level)
        elif self.how == "copy_real_row":
            self.h.copy_(x[:, 0])
        elif self.how == "setitem_wider_real":
            self.h[:] = x[:, 1].double()
        elif self.how == "complex_into_real":
            self.r.copy_(z * 1j)
        return torch.view_as_real(out)


@pytest.mark.parametrize("how", ["fill_real_tensor", "copy_real_scalar", "copy_real_row", "setitem_wider_real",
                                 "complex_into_real"])
def test_state_overwritten_with_the_other_kind_of_value_matches_eager(how):
    """Found by an adversarial review, a silent wrong answer: functionalization hands over the real value
    itself as the complex buffer's new value (`h.fill_(level)` returns `level`), and the write-back's
    copy_ spread it over both halves of the pair. The pass now gives the write-back a (value, 0) pair,
    and the real part of a complex value written into real state, as copy_ does in eager."""
    module, reference = OverwrittenState(how), OverwrittenState(how)
    args = (pair(4), torch.tensor(2.0))
    new = ReplaceComplexWithRealPass(strict=True)(export(module, args)).module()
    for _ in range(3):  # each call reads the state the one before wrote
        x, level = pair(4), torch.randn(())
        assert_matches(reference(x, level), new(x, level), torch.float32)
    torch.testing.assert_close(new.h, torch.view_as_real(reference.h))
    torch.testing.assert_close(new.r, reference.r)


class ReadsRealStateAfterComplexWrite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("r", torch.zeros(4))

    def forward(self, x):
        z = torch.view_as_complex(x)
        self.r.copy_(z * 1j)
        return torch.view_as_real(z) + self.r.unsqueeze(-1)


def test_a_graph_whose_metadata_disagrees_with_its_values_is_refused_not_a_crash():
    """torch's decompositions (2.13) drop the complex-to-real cast of `r.copy_(complex)` when r is read
    afterwards: the graph adds a complex value where its metadata says real (ep.module() returns complex64
    where eager returns float32). The pass refuses such a program, naming the node, instead of raising
    from deep inside the rewrite: at the first node whose rule computes a complex value where the metadata
    says real (it used to come later, where running a node on the rewritten values failed). A torch that
    keeps the cast gives a consistent graph, rewritten as usual."""
    from aotcuda.errors import UnsupportedComplexOpError

    module, x = ReadsRealStateAfterComplexWrite(), pair(4)
    ep = export(module, (x,))
    if copy.deepcopy(ep).module()(x).dtype != ReadsRealStateAfterComplexWrite()(x).dtype:
        with pytest.raises(UnsupportedComplexOpError, match="metadata disagrees with its values"):
            ReplaceComplexWithRealPass(strict=True)(ep)
    else:
        new = ReplaceComplexWithRealPass(strict=True)(ep).module()
        reference = ReadsRealStateAfterComplexWrite()
        for _ in range(2):
            x = pair(4)
            assert_matches(reference(x), new(x), torch.float32)


class ReturnsWrittenState(torch.nn.Module):
    """Writes state with a value of the other kind (real into complex, complex into real) and returns the state."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.register_buffer("h", torch.randn(4, dtype=torch.complex64))
        self.register_buffer("r", torch.randn(4))

    def forward(self, x):
        if self.how == "real_into_complex":
            self.h.copy_(x)
            return self.h
        self.r.copy_(self.h * x)
        return self.r


def _call_complex(new, x):
    from aotcuda.passes.complex_to_real import complex_boundary

    out, (dtype,) = new.module()(x), complex_boundary(new).outputs
    return torch.view_as_complex(out) if dtype else out


@pytest.mark.parametrize("how", ["real_into_complex", "complex_into_real"])
def test_returned_state_written_with_the_other_kind_of_value_matches_eager(how):
    """Found by a breaker review, a silent wrong answer: functionalization drops the cast of the write, so
    the graph returns the written value's node both as the buffer's new value and as the user output, and
    ep.module() returns the buffer (torch's unlift) for it. The pass cast only the write-back: the user
    output came back as the uncast value (float32 x for `self.h.copy_(x); return self.h`, where eager
    returns complex64; complex64 h*x for `self.r.copy_(h*x); return self.r`, where eager returns float32).
    Now the user output is the state's new value, and the complex boundary records the state's dtype."""
    module = ReturnsWrittenState(how)
    reference = copy.deepcopy(module)
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(4),)))
    for _ in range(2):
        x = torch.randn(4)
        expected, got = reference(x), _call_complex(new, x)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)


class ReadsComplexInputWrittenIntoRealState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("r", torch.randn(4))

    def forward(self, x):
        self.r.copy_(torch.view_as_complex(x))
        return self.r * 2


def test_a_rule_result_of_the_wrong_kind_is_refused_not_returned():
    """Found by a breaker review, a silent wrong answer: the graph multiplies the complex input where
    `self.r * 2` is recorded as float32[4] (the dropped cast again); the mul rule computed a complex pair,
    and the program returned a float32[4, 2] tensor that the boundary called real. Every rule result is
    now checked against the node's metadata: complex exactly where it says complex."""
    from aotcuda.errors import UnsupportedComplexOpError

    module, x = ReadsComplexInputWrittenIntoRealState(), pair(4)
    ep = export(module, (x,))
    if copy.deepcopy(ep).module()(x).dtype != torch.float32:
        with pytest.raises(UnsupportedComplexOpError, match="metadata disagrees with its values"):
            ReplaceComplexWithRealPass(strict=True)(ep)
    else:  # a torch that keeps the cast: a consistent graph, rewritten as usual
        assert_matches(ReadsComplexInputWrittenIntoRealState()(x), ReplaceComplexWithRealPass(strict=True)(ep).module()(x),
                       torch.float32)


class ReadsComplexStateWrittenWithARealValue(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.randn(4, dtype=torch.complex64))

    def forward(self, x):
        self.h.copy_(x)
        return self.h * 2, self.h * self.h * 1j


def test_complex_state_read_after_a_real_write_matches_eager():
    """Found by a breaker review: after `self.h.copy_(x)` the graph reads the real x where eager reads
    h = x + 0i, so `self.h * 2` is a mul of real operands recorded as complex64 (ep.module() itself returns
    float32 there). The mul rule's real result is now the pair (x, 0), exact; it used to reach the output
    as a real tensor where the complex boundary records a complex one."""
    from aotcuda.passes.complex_to_real import complex_boundary

    module = ReadsComplexStateWrittenWithARealValue()
    new = ReplaceComplexWithRealPass(strict=True)(export(module, (torch.randn(4),)))
    assert complex_boundary(new).outputs == (torch.complex64, torch.complex64)
    x = torch.randn(4)
    got = [torch.view_as_complex(o) for o in new.module()(x)]
    assert_matches(ReadsComplexStateWrittenWithARealValue()(x), got, torch.float32)
