"""Known torch.export failures of library models get the fix as a note (issue 11 item 4)."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import aotcuda
from aotcuda.lowering.export_hints import export_hints, fix_for
from aotcuda.lowering.pipeline import before_compile


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


class SharedLength(torch.nn.Module):
    def forward(self, q, k):
        return q + k


def test_an_example_outside_the_dim_range_says_so_and_the_fix():
    seq = torch.export.Dim("seq", min=300, max=400)
    with pytest.raises(Exception) as caught:
        with export_hints():
            torch.export.export(SharedLength(), (torch.randn(2, 16), torch.randn(2, 16)),
                                dynamic_shapes=({1: seq}, {1: seq}), strict=False)
    notes = getattr(caught.value, "__notes__", [])
    assert any("an example input has size 16 in a dim whose torch.export.Dim range is [300, 400]" in n for n in notes), notes


def test_a_dim_specialized_by_another_input_names_the_shared_dim_fix():
    seq = torch.export.Dim("q_1", min=2, max=256)
    with pytest.raises(Exception) as caught:
        with export_hints():
            torch.export.export(SharedLength(), (torch.randn(2, 16), torch.randn(2, 16)),
                                dynamic_shapes=({1: seq}, None), strict=False)
    notes = getattr(caught.value, "__notes__", [])
    assert any("give that input's dim the same torch.export.Dim" in n and "q_1" in n for n in notes), (str(caught.value), notes)


def test_a_dim_met_in_a_tensor_op_says_so_not_that_the_line_needs_a_python_value():
    """q + k with q's dim dynamic and k's static: the op needs the sizes equal, no int() or comparison in the
    model's line; the note said "That line needs a Python value of the size" (a new user's trial)."""
    seq = torch.export.Dim("q_1", min=2, max=256)
    with pytest.raises(Exception) as caught:
        with export_hints():
            torch.export.export(SharedLength(), (torch.randn(2, 16), torch.randn(2, 16)),
                                dynamic_shapes=({1: seq}, None), strict=False)
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and "There a tensor op needs q_1 equal to a size 16 that is not dynamic" in notes[0], notes
    assert "Python value" not in notes[0] and "return q + k" in notes[0], notes


def test_a_dim_whose_example_has_size_one_says_to_give_a_larger_example():
    batch = torch.export.Dim("batch", min=1, max=32)
    with pytest.raises(Exception) as caught:
        with export_hints():
            torch.export.export(SharedLength(), (torch.randn(1, 16), torch.randn(1, 16)),
                                dynamic_shapes=({0: batch}, {0: batch}), strict=False)
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and "0/1 specialization" in notes[0] and "example of size 2 or more" in notes[0], notes


def test_a_derived_dim_whose_root_is_one_in_the_example_says_to_give_a_larger_example():
    """A new user's 16 * Dim("s") over an example of size 16 (s = 1 there, which torch makes a constant) was told that
    the line calling aotcuda.lower (``<frozen runpy>:88 in _run_code`` under the CLI) "needs a Python value of the
    size": the frame past aotcuda's export_program is the caller's, not the model's."""
    length = 16 * torch.export.Dim("s", min=1, max=8)
    with pytest.raises(aotcuda.DynamicShapesError) as caught:
        aotcuda.lower(SharedLength(), (torch.randn(2, 16), torch.randn(2, 16)), device="cpu",
                      dynamic_shapes=({1: length}, {1: length}))
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1, (str(caught.value), notes)
    assert "the example input's size 16 there gives s = 1" in notes[0] and "0/1 specialization" in notes[0], notes
    assert "Give an example of size 32 or more there (16*s with s >= 2" in notes[0], notes
    assert __file__ not in notes[0] and "needs a Python value" not in notes[0], notes


class ViewsPastItsTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(8, 4))

    def rows(self, n):
        return self.table[:n].view(1, n, 4)  # RAISING LINE

    def forward(self, x):
        return x * self.rows(x.shape[1])


def test_an_error_in_the_models_code_names_the_models_line():
    """A new user's example longer than a table the model slices got torch's `RuntimeError: shape '[1, 12, 4]' is
    invalid for input of size 32`, with no line of the model: which view was it?"""
    with pytest.raises(RuntimeError, match=r"shape '\[1, 12, 4\]' is invalid") as caught:
        aotcuda.lower(ViewsPastItsTable(), (torch.randn(2, 12, 4),), device="cpu")
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    lines, start = inspect.getsourcelines(ViewsPastItsTable)
    line = start + next(i for i, text in enumerate(lines) if "RAISING LINE" in text)
    assert len(notes) == 1 and notes[0].startswith(f"aotcuda: raised at {__file__}:{line} in rows: `return "
                                                   "self.table[:n].view(1, n, 4)"), notes
    with pytest.raises(aotcuda.DynamicShapesError) as caught:  # aotcuda's own refusal: no model line to name
        aotcuda.lower(ViewsPastItsTable(), (torch.randn(2, 4, 4),), device="cpu",
                      dynamic_shapes={"y": {0: torch.export.Dim("b")}})
    assert not [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda: raised at")]


def test_an_example_not_of_its_derived_dims_form_is_told_the_fix():
    """`--dynamic x:1:2:128:seq*3` over an example of size 16 got torch's `UserError: Expected shape[1] = 16 of input
    Tensor to be of the form 3*seq, where seq is an integer` alone: what to change went unsaid."""
    with pytest.raises(Exception) as caught:
        aotcuda.lower(SharedLength(), (torch.randn(2, 16), torch.randn(2, 16)), device="cpu",
                      dynamic_shapes=({1: 3 * torch.export.Dim("seq", min=1, max=40)}, None))
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and notes[0].startswith(
        "aotcuda: an example input has size 16 in dim 1, where its derived Dim asks for 3*seq with seq an integer: "
        "torch.export traces with the example inputs, so give an example of that form there (for N*seq: a multiple of "
        "N), or a derived Dim the example's size fits (on the command line, --dynamic NAME:DIM:MIN:MAX:seq*N with an N "
        "that divides 16)."), notes


class SpecializesByInt(torch.nn.Module):
    """The pattern of diffusers' QwenEmbedRope: a Python int of a dynamic size."""

    def forward(self, x):
        width = int(x.shape[1])  # SPECIALIZING LINE
        return x[:, :width] * 2


def _line_of(marker: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(SpecializesByInt)
    return start + next(i for i, line in enumerate(lines) if marker in line)


def test_a_dim_specialized_by_the_model_names_the_models_line():
    with pytest.raises(Exception) as caught:
        aotcuda.lower(SpecializesByInt(), (torch.randn(2, 5, 3),),
                      dynamic_shapes={"x": {1: torch.export.Dim("seq", min=2, max=64)}}, device="cpu")
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1, (str(caught.value), notes)
    assert f"{__file__}:{_line_of('SPECIALIZING LINE')} in forward" in notes[0], notes
    assert "int(x.shape[1])" in notes[0] and "the constant 5" in notes[0], notes


def test_the_specialization_watch_is_undone_after_export():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    before = ShapeEnv.__dict__["_set_replacement"]
    with pytest.raises(Exception):
        with export_hints():
            raise ValueError("boom")
    assert ShapeEnv.__dict__["_set_replacement"] is before


class BranchesOnValues(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # DATA-DEPENDENT LINE
            return x * 2
        return x - 1


def test_a_branch_on_tensor_values_names_the_line_and_the_fix_without_torchs_graph_dumps(capfd):
    """torch's error for `if x.sum() > 0` came after its partial graph printed twice (20 lines) and a warning
    with the graph; its own first line says nothing of the model. Now the note names the line and the
    rewrites, and nothing else reaches stderr."""
    from torch.export import _trace

    with pytest.raises(Exception, match="data-dependent") as caught:
        aotcuda.lower(BranchesOnValues(), (torch.randn(4, 4),), device="cpu")
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1, (str(caught.value), notes)
    lineno = inspect.getsourcelines(BranchesOnValues)[1] + 2
    assert f"{__file__}:{lineno} in forward: `if x.sum() > 0:  # DATA-DEPENDENT LINE`" in notes[0], notes
    assert "torch.where" in notes[0] and "torch.cond" in notes[0]
    err = capfd.readouterr().err
    assert "def forward(" not in err and "Unable to find user code" not in err, err
    assert "print" not in vars(_trace), "the print filter is removed after the step"


def test_a_size_one_example_gets_one_fix_not_torchs_contrary_one():
    """torch's "Suggested fixes: batch = 1" (make the dim static) sat above aotcuda's note (give an example
    of size 2 or more, the dim stays dynamic): only the note remains."""
    batch = torch.export.Dim("batch", min=1, max=32)
    with pytest.raises(aotcuda.DynamicShapesError) as caught:
        aotcuda.lower(SharedLength(), (torch.randn(1, 16), torch.randn(1, 16)),
                      dynamic_shapes=({0: batch}, {0: batch}), device="cpu")
    message = str(caught.value)
    assert "Suggested fixes" not in message and "batch = 1" not in message and "Adjust dynamic_shapes" not in message
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and "example of size 2 or more" in notes[0], notes


class ProjectsFeatures(torch.nn.Module):
    """A Linear of in_features 8: the feature dim of x must be 8, whatever its Dim says."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Sequential(torch.nn.Linear(8, 4, bias=False))

    def forward(self, x):
        return self.proj(x).relu()  # PARAMETER LINE


def test_a_dim_fixed_by_a_parameters_size_names_the_parameter_not_a_python_value():
    """The size is the weight's (in_features), not one the model's line asks of Python: the note names
    proj.0.weight and its shape, and does not advise keeping the size a tensor size."""
    from aotcuda.lowering.pipeline import before_compile

    with pytest.raises(Exception) as caught:
        before_compile(ProjectsFeatures(), (torch.randn(2, 8),), {},
                       {"x": {1: torch.export.Dim("feat", min=2, max=64)}})
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1, (str(caught.value), notes)
    assert "the constant 8" in notes[0] and "self.proj(x)" in notes[0], notes
    assert "proj.0.weight, of fixed shape (4, 8)" in notes[0], notes
    assert "Python value" not in notes[0], notes


class ComplexMean(torch.nn.Module):
    """A mean of a complex tensor over its dynamic batch dim (dim 0; dim 1 stays static, 8)."""

    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        z = torch.view_as_complex(x)
        return torch.view_as_real(z.mean(**self.dims))  # MEAN LINE


class ComplexMeanAsSum(ComplexMean):
    """The rewrite the note gives: the sum over the dim divided by its size."""

    def forward(self, x):
        z = torch.view_as_complex(x)
        if self.dims:
            return torch.view_as_real(z.sum(dim=0) / z.shape[0])
        return torch.view_as_real(z.sum() / z.numel())


@pytest.mark.parametrize("dims", [{"dim": 0}, {}], ids=["over batch", "over every dim"])
def test_a_complex_mean_over_a_dynamic_dim_names_that_dim_and_the_rewrite(dims):
    """torch's mean of a complex tensor divides by its count of elements made a Python complex (torch._refs.mean's
    type promotion: complex(n)), which makes a dynamic dim counted there a constant. The note said "a tensor op
    needs batch equal to a size 4 that is not dynamic, most often another input's dim left static": it blamed a
    static dim, where there is none to share a Dim with. Now it says the mean over the dynamic dim did it, and how to
    write the mean so that the dim stays dynamic (which the test exports)."""
    from aotcuda.lowering.pipeline import before_compile

    batch = {"x": {0: torch.export.Dim("batch", min=2, max=64)}}
    with pytest.raises(Exception) as caught:
        before_compile(ComplexMean(dims), (torch.randn(4, 8, 2),), {}, batch)
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1, (str(caught.value), notes)
    lines, start = inspect.getsourcelines(ComplexMean)
    line = start + next(i for i, text in enumerate(lines) if "MEAN LINE" in text)
    assert f"the dynamic dim batch the constant 4 at {__file__}:{line} in forward" in notes[0], notes
    assert "a mean of a complex tensor over the dynamic dim batch" in notes[0], notes
    assert "z.sum(dim) / z.shape[dim]" in notes[0] and "not dynamic" not in notes[0], notes
    assert "left static" not in notes[0], notes
    x = torch.randn(5, 8, 2)
    exported = torch.export.export(ComplexMeanAsSum(dims), (torch.randn(4, 8, 2),), dynamic_shapes=batch, strict=False)
    torch.testing.assert_close(exported.module()(x), ComplexMean(dims)(x))


class ToNumpy(torch.nn.Module):
    def forward(self, x):
        scale = torch.from_numpy(x.numpy()).abs().max()  # NUMPY LINE
        return x / scale


class ItemInMath(torch.nn.Module):
    def forward(self, x):
        return x * float(x.sum().item() ** 0.5)  # ITEM LINE


def _line(cls, mark: str) -> int:
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, text in enumerate(lines) if mark in text)


def test_a_conversion_to_numpy_in_forward_is_named_with_the_models_line():
    """A new user (2026-12-06, second): `.numpy()` inside forward got torch's `.numpy() is not supported for tensor
    subclasses` and aotcuda's note to check that the model runs in eager (it does). The note says that forward
    converts a traced tensor to NumPy, which torch.export cannot trace, at the model's line; a Python number made of
    .item() in math names its line too (torch's message clips the path)."""
    with pytest.raises(RuntimeError, match=r"\.numpy\(\) is not supported for tensor subclasses") as caught:
        aotcuda.lower(ToNumpy(), (torch.randn(2, 8),), device="cpu")
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and notes[0].startswith(
        f"aotcuda: forward converts a traced tensor to NumPy at {__file__}:{_line(ToNumpy, 'NUMPY LINE')} in forward: "
        "`scale = torch.from_numpy(x.numpy()).abs().max()"), notes
    assert "cannot become a NumPy array" in notes[0] and "runs in eager" not in notes[0], notes
    with pytest.raises(Exception, match="data-dependent") as caught:
        aotcuda.lower(ItemInMath(), (torch.randn(2, 8),), device="cpu")
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and f"at {__file__}:{_line(ItemInMath, 'ITEM LINE')} in forward" in notes[0], notes


class Tagger(torch.nn.Module):
    def __init__(self, kind: str, batch_first: bool):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(8, 8, batch_first=batch_first)
        self.batch_first = batch_first

    def forward(self, x):
        return self.rnn(x)[0]


@pytest.mark.parametrize("kind, batch_first", [("GRU", True), ("LSTM", False), ("RNN", True)])
def test_dynamic_time_steps_of_a_recurrent_layer_name_the_unrolled_loop(kind, batch_first):
    """Third new user (2026-12-06): a GRU tagger lowered with its sequence dim dynamic was told that "a tensor op
    needs ids_1 equal to a size 12 that is not dynamic, most often another input's dim left static (k beside q ...)":
    no other input is involved; torch.export runs the recurrent layer's loop once per step of the example. The note
    says so and to keep the dim static; the batch dim stays dynamic (exported here)."""
    steps = 1 if batch_first else 0
    model, x = Tagger(kind, batch_first).eval(), torch.randn(3, 12, 8) if batch_first else torch.randn(12, 3, 8)
    with pytest.raises(Exception) as caught:
        with export_hints(model):
            torch.export.export(model, (x,), dynamic_shapes=({steps: torch.export.Dim("seq", min=2, max=64)},),
                                strict=False)
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and f"There seq is the time steps of an nn.{kind}, and torch.export runs" in notes[0], notes
    assert "so the program takes 12 steps only. Keep seq static" in notes[0] and "k beside q" not in notes[0], notes
    with export_hints(model):
        torch.export.export(model, (x,), dynamic_shapes=({1 - steps: torch.export.Dim("batch", min=1, max=64)},),
                            strict=False)


class PackedTagger(torch.nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(8, 8, batch_first=True)

    def forward(self, x, lengths):
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return torch.nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True)[0]


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_packed_sequence_names_the_layer_and_the_padded_form_not_a_check_in_eager(kind):
    """Third new user (2026-12-06): a tagger running its LSTM on pack_padded_sequence (as taggers do) ended with
    torch's `zeros(): argument 'size' failed to unpack ... got FakeTensor` and the note "check that the model runs on
    those inputs in eager", which it does. The note says that torch.export cannot trace a PackedSequence, and the
    padded form that gives the same outputs."""
    model, x, lengths = PackedTagger(kind).eval(), torch.randn(3, 10, 8), torch.tensor([10, 7, 4])
    model(x, lengths)  # eager runs it
    with pytest.raises(Exception) as caught:
        before_compile(model, (x, lengths))  # lower()'s export, under export_hints
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and notes[0].startswith(f"aotcuda: forward runs an nn.{kind} on a PackedSequence "
                                                   "(pack_padded_sequence) at "), notes
    assert "which torch.export cannot trace" in notes[0] and "check that the model runs" not in notes[0], notes
    assert "self.rnn(packed)" in notes[0], notes


class AssignsAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(4, 4, batch_first=True)
        self.last = torch.zeros(1)

    def forward(self, x):
        self.last = x.sum(0)  # a tensor attribute of the model's own, assigned in forward: torch's notice stays
        return self.rnn(x)[0]


def test_torchs_notice_about_an_rnns_own_flat_weights_is_not_shown_and_a_models_own_attribute_still_is():
    """Third new user (2026-12-06): every lowering of a model with an nn.GRU/LSTM showed torch's `UserWarning: The
    tensor attributes self.rnn._flat_weights[0], ... were assigned during export. Such attributes must be registered
    as buffers using the `register_buffer` API` (in the CLI with a `contextlib.py:144` location and a source line),
    advice that cannot apply to torch's own module (the layer refreshes that list under export; torch restores it;
    the program matches eager). It is not shown now; the notice for an attribute of the model's own is."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before_compile(Tagger("LSTM", True).eval(), (torch.randn(2, 5, 8),))
        before_compile(Tagger("GRU", False).eval(), (torch.randn(5, 2, 8),))
    assert not [w for w in caught if "_flat_weights" in str(w.message)], [str(w.message) for w in caught]
    with pytest.warns(UserWarning, match=r"The tensor attributes self\.last, "):  # the whole notice, as torch says it
        before_compile(AssignsAttribute().eval(), (torch.randn(2, 5, 4),))


class CountsInABranch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        def positive(x):
            self.count.add_(1)
            return x.sin()

        return torch.cond(x.sum() > 0, positive, lambda x: x.cos(), (x,))  # COND LINE


class CountsAfterTheBranch(torch.nn.Module):
    """CountsInABranch as the note advises: the buffer an operand, its new value returned, written after."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        y, c = torch.cond(x.sum() > 0, lambda x, c: (x.sin(), c + 1), lambda x, c: (x.cos(), c.clone()),
                          (x, self.count))
        self.count.copy_(c)
        return y


def test_a_control_flow_branch_writing_a_buffer_is_named_with_the_fix_that_exports():
    """Sixth new user (2026-12-07): a torch.cond branch that counted in a buffer (`self.count.add_(1)`) got torch's
    `UncapturedHigherOrderOpError ... Encountered input mutation during higher order op tracing` (its hints: "avoid
    mutation", "open an issue") and aotcuda's note `check that the model runs on those inputs in eager`, which it
    does. Now the note says what torch cannot trace and how to write it; the advised form exports and keeps eager's
    values and buffer over calls."""
    with pytest.raises(Exception, match="mutation during higher order op tracing") as caught:
        aotcuda.lower(CountsInABranch(), (torch.randn(4),), device="cpu")
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    lines, start = inspect.getsourcelines(CountsInABranch)
    line = start + next(i for i, text in enumerate(lines) if "COND LINE" in text)
    assert len(notes) == 1, notes
    assert notes[0].startswith(f"aotcuda: a function given to torch.cond at {__file__}:{line} in forward: `return "
                               "torch.cond("), notes
    assert "self.count.copy_(c)" in notes[0] and "check that the model runs" not in notes[0], notes
    eager, ep = CountsAfterTheBranch(), torch.export.export(CountsAfterTheBranch(), (torch.randn(4),), strict=False)
    exported = ep.module()
    for shift in (2.0, -2.0, 2.0):
        x = torch.randn(4) + shift
        torch.testing.assert_close(exported(x), eager(x), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(exported.count, eager.count)
    assert float(eager.count) == 2.0


class ConjugatesInABranch(torch.nn.Module):
    def __init__(self, resolved: bool = False):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4, dtype=torch.cfloat))
        self.resolved = resolved

    def forward(self, x):
        z = torch.view_as_complex(x)

        def rotated(z):
            r = (z * 1j).conj()
            return r.resolve_conj() if self.resolved else r

        r = torch.cond(z.abs().sum() > 4, lambda z: z @ self.w, rotated, (z,))  # COND LINE
        return torch.view_as_real(r)


def test_a_cond_branch_returning_a_conjugate_view_is_named_with_the_fix_that_exports():
    """Sixth new user (2026-12-07): a complex torch.cond whose second branch returned `(z * 1j).conj()` failed in the
    export step with torch's `When merging two branches' output in torch.cond, expected same is_conj but got False and
    True` and aotcuda's note `check that the model runs on those inputs in eager`, which it does. Now the note names
    the conjugate view and the fix; the fixed model exports, and after ReplaceComplexWithRealPass matches eager."""
    from aotcuda.lowering.decompositions import decomposition_table
    from aotcuda.lowering.exporting import export_program
    from aotcuda.passes import ReplaceComplexWithRealPass

    with pytest.raises(Exception, match="expected same is_conj") as caught:
        aotcuda.lower(ConjugatesInABranch(), (torch.randn(3, 4, 2),), device="cpu")
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    lines, start = inspect.getsourcelines(ConjugatesInABranch)
    line = start + next(i for i, text in enumerate(lines) if "COND LINE" in text)
    assert len(notes) == 1 and notes[0].startswith(f"aotcuda: one branch of torch.cond at {__file__}:{line} in "
                                                   "forward: `r = torch.cond("), notes
    assert "returns a conjugate view (z.conj())" in notes[0] and "z.conj().resolve_conj()" in notes[0], notes
    torch.manual_seed(0)
    model = ConjugatesInABranch(resolved=True)
    ep = export_program(model, (torch.randn(3, 4, 2),), {}, None).run_decompositions(decomposition_table())
    rewritten = ReplaceComplexWithRealPass(strict=True)(ep).module()
    for scale in (3.0, 0.01):  # each branch
        x = torch.randn(3, 4, 2) * scale
        torch.testing.assert_close(rewritten(x), model(x), rtol=1e-5, atol=1e-6)


class IstftToLength(torch.nn.Module):
    """STFT -> mask -> iSTFT back to the input's length (a new user's denoiser, nu39, at toy size)."""

    def __init__(self, form):
        super().__init__()
        self.n_fft, self.hop, self.form = 16, 4, form
        self.register_buffer("window", torch.hann_window(16))

    def forward(self, wav):
        spec = torch.stft(wav, self.n_fft, self.hop, window=self.window, return_complex=True)
        spec = spec * torch.sigmoid(spec.abs())
        if self.form == "function":
            return torch.istft(spec,
                               self.n_fft, self.hop, window=self.window,
                               length=wav.shape[-1])  # a call over lines: its whole span is read
        if self.form == "method":
            return spec.istft(self.n_fft, hop_length=self.hop, window=self.window, length=wav.shape[-1])
        return torch.istft(spec, self.n_fft, self.n_fft // 4, window=self.window, length=wav.shape[-1])


@pytest.mark.parametrize("form, hop", [("function", "4"), ("method", "4"), ("computed hop", "HOP")])
def test_istft_given_a_dynamic_length_names_the_recipe_that_keeps_it_dynamic(form, hop):
    """A new user's trial (nu39, 2026-12-07): `torch.istft(..., length=wav.shape[-1])` with the samples dynamic
    failed export ("specialized it to be a constant"), and the note pointed at the line and said to keep the dim
    static, not the recipe docs/ops.md gives: drop length= and make the samples a multiple of the hop. The note says
    it now, with the hop where the source says it plainly, and the command line's hint gives the --dynamic option; the
    recipe itself exports and returns the input's length, as eager does with length=."""
    from aotcuda.cli import _dynamic_fix_hints

    samples = torch.export.Dim("wav_1", min=64, max=4096)
    with pytest.raises(Exception) as caught:
        with export_hints():
            torch.export.export(IstftToLength(form), (torch.randn(2, 400),), dynamic_shapes=({1: samples},),
                                strict=False)
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith("aotcuda:")]
    assert len(notes) == 1 and "There istft is given the size as its length=" in notes[0], notes
    assert f"{hop} * Dim(\"frames\", min=..., max=...)" in notes[0] and f"MAX:frames*{hop} (docs/ops.md" in notes[0]
    assert "Python value" not in notes[0], notes
    hints = _dynamic_fix_hints(str(caught.value), ("wav:1:64:4096",), "\n".join(caught.value.__notes__))
    assert hints == [f"on the command line, with istft's length= dropped from the model: --dynamic "
                     f"wav:1:64:4096:frames*{hop}; or leave out --dynamic wav:1:64:4096: the program then takes one "
                     "size there"], hints

    class WithoutLength(IstftToLength):
        def forward(self, wav):
            spec = torch.stft(wav, self.n_fft, self.hop, window=self.window, return_complex=True)
            return torch.istft(spec * torch.sigmoid(spec.abs()), self.n_fft, self.hop, window=self.window)

    ep = torch.export.export(WithoutLength(form), (torch.randn(2, 400),),
                             dynamic_shapes=({1: 4 * torch.export.Dim("frames", min=16, max=1024)},), strict=False)
    for length in (64, 400, 1000):
        wav = torch.randn(2, length)
        torch.testing.assert_close(ep.module()(wav), IstftToLength(form)(wav), rtol=1e-5, atol=1e-5)
