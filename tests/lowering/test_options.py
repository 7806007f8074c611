"""lower()'s options of the wrong kind are refused before any work (lowering/options.py): each was taken as it came
(allow_fallbacks="False" is true) or failed in torch's words, after the export or at the compile."""

from __future__ import annotations

import re

import pytest
import torch

import aotcuda
from aotcuda.lowering import pipeline


class ExportReached(Exception):
    """Raised by the stand-in export: lower() began its work."""


@pytest.fixture
def no_export(monkeypatch):
    def reached(*args, **kwargs):
        raise ExportReached

    monkeypatch.setattr(pipeline, "export_program", reached)


def _lower(**options):
    return aotcuda.lower(torch.nn.Linear(4, 4), (torch.randn(2, 4),), device="cpu", **options)


@pytest.mark.parametrize("value", ["False", "no", 0, None, [False]])
def test_allow_fallbacks_of_another_kind_than_bool_is_refused(no_export, value):
    """Before: allow_fallbacks="False" was true, and the package kept fallback kernels the caller had refused."""
    with pytest.raises(TypeError, match=r"^allow_fallbacks must be True or False, got .*; pass allow_fallbacks=True "
                                        r"or allow_fallbacks=False$"):
        _lower(allow_fallbacks=value)
    with pytest.raises(TypeError, match=r"got 'False' \(str\), which would be taken for True"):
        _lower(allow_fallbacks="False")


def test_a_progress_that_is_not_callable_is_refused(no_export):
    """Before: torch's raw "TypeError: 'int' object is not callable", from inside the step timer."""
    with pytest.raises(TypeError, match=r"^progress must be a function called as progress\(step, seconds\), or None; "
                                        r"got 5 \(int\)$"):
        _lower(progress=5)
    with pytest.raises(ExportReached):  # a callable, and None, are taken
        _lower(progress=lambda step, seconds: None)


def test_a_progress_that_cannot_take_two_arguments_is_refused(no_export):
    """Before: the first step raised "TypeError: <lambda>() takes 1 positional argument but 2 were given", naming
    neither progress nor how lower() calls it."""
    with pytest.raises(TypeError, match=r"^progress is called as progress\(step, seconds\) \(seconds None as a step "
                                        r"starts\), but <lambda>\(step\) cannot take those two arguments \(too many "
                                        r"positional arguments\); give it two parameters"):
        _lower(progress=lambda step: None)
    for taken in (print, lambda *args: None, lambda step, seconds, extra=1: None):
        with pytest.raises(ExportReached):
            _lower(progress=taken)


@pytest.mark.parametrize("configs", [[("max_autotune", True)], "max_autotune", ("max_autotune",)])
def test_inductor_configs_that_are_not_a_dict_are_refused(no_export, configs):
    """Before: "TypeError: 'list' object is not a mapping", raw."""
    with pytest.raises(TypeError, match=r"^inductor_configs must be a dict of Inductor option names to values, got "):
        _lower(inductor_configs=configs)


def test_an_inductor_option_torch_does_not_have_is_refused_before_the_export(no_export):
    """Before: the export, decompositions and passes ran (minutes for a large model), then torch's
    "AttributeError: torch._inductor.config.max_autotun does not exist" at the compile."""
    with pytest.raises(ValueError, match=r"^inductor_configs names 'max_autotun', which is not an option of "
                                         r"torch._inductor.config \(torch .*\); did you mean 'max_autotune'"):
        _lower(inductor_configs={"max_autotun": True})
    with pytest.raises(ValueError, match=r"names 1, which is not an option"):
        _lower(inductor_configs={1: True})
    with pytest.raises(ValueError, match=r"sets 'aot_inductor.output_path'.*package_path=\.\.\. instead"):
        _lower(inductor_configs={"aot_inductor.output_path": "/tmp/x.so"})


def test_a_switch_given_a_string_is_refused(no_export):
    """Before: {"max_autotune": "False"} turned max-autotune on (a non-empty string is true), without a word."""
    with pytest.raises(TypeError, match=r"^inductor_configs\['max_autotune'\] is a switch \(True or False\), got "
                                        r"'False' \(str\), which Inductor would take for True; pass True or False$"):
        _lower(inductor_configs={"max_autotune": "False"})
    with pytest.raises(ExportReached):  # real options of every kind are taken
        _lower(inductor_configs={"max_autotune": True, "cpp.weight_prepack": False, "triton.enable_pdl": 0,
                                 "aot_inductor.force_mmap_weights": True, "max_autotune_gemm_backends": "ATEN"})


class Two(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_example_inputs_that_do_not_fit_forward_name_its_signature(no_export):
    """Before: torch.export's bind said "TypeError: too many positional arguments" or "missing a required
    argument: 'y'", of no function (the CLI's --dynamic the same, from its own bind)."""
    x = torch.randn(2, 4)
    for args, kwargs, says in (((x, x, x), {}, r"too many positional arguments \(3 positional given\)"),
                               ((x,), {}, r"missing a required argument: 'y' \(1 positional given\)"),
                               ((x, x), {"z": x}, r"got an unexpected keyword argument 'z' \(2 positional and the "
                                                  r"keywords \['z'\] given\)")):
        with pytest.raises(TypeError, match=r"^the example inputs do not fit Two.forward\(x, y\): " + says
                                            + r"; give args one example input per positional argument"):
            aotcuda.lower(Two(), args, kwargs, device="cpu")
    with pytest.raises(ExportReached):
        aotcuda.lower(Two(), (x,), {"y": x}, device="cpu")


def test_meta_tensors_are_named_with_the_fix(no_export):
    """Before: moving them to the device raised torch's raw "NotImplementedError: Cannot copy out of meta tensor;
    no data!" (a model built under torch.device("meta") whose weights were never loaded; a meta example input)."""
    with pytest.raises(TypeError, match=r"^example input args\[0\] is a meta tensor \(shape \(2, 4\), no values\), "
                                        r"which cannot be moved to the device lowered for; pass a tensor with values, "
                                        r"e.g. torch.zeros\(2, 4, dtype=torch.float32\)$"):
        aotcuda.lower(torch.nn.Linear(4, 4), (torch.randn(2, 4, device="meta"),), device="cpu")
    with pytest.raises(TypeError, match=r"^example input kwargs\['y'\]\[1\] is a meta tensor"):
        aotcuda.lower(Two(), (torch.randn(2),), {"y": [torch.randn(2), torch.empty(2, device="meta")]}, device="cpu")
    with pytest.raises(TypeError, match=r"^the model's parameter 'weight' is on the meta device: .*load them first, "
                                        r"e.g. model.to_empty\(device='cpu'\) then model.load_state_dict"):
        aotcuda.lower(torch.nn.Linear(4, 4, device="meta"), (torch.randn(2, 4),), device="cpu")


def test_a_model_of_another_kind_is_named_with_what_to_pass(no_export):
    """Before: a ScriptModule got torch.export's "Exporting a ScriptModule is not supported. Maybe try converting
    your ScriptModule to an ExportedProgram using `TS2EPConverter(...)`" (a torch internal); an ExportedProgram, a
    function or the class itself only "model must be a torch.nn.Module, got ...", with no fix."""
    x = torch.randn(2, 4)
    for model, says in ((torch.jit.script(torch.nn.Linear(4, 4)), r"a TorchScript module .*; pass the nn.Module it "
                                                                  r"was made from"),
                        (torch.export.export(torch.nn.Linear(4, 4), (x,)), r"an ExportedProgram; pass its module, "
                                                                           r"model.module\(\)"),
                        (lambda v: v * 2, r"function; lower\(\) takes a torch.nn.Module: wrap the function in one"),
                        (torch.nn.Linear, r"the class Linear, not a module; pass an instance, e.g. Linear\(...\)")):
        with pytest.raises(TypeError, match=r"^model must be a torch.nn.Module, got " + says):
            aotcuda.lower(model, (x,), device="cpu")
    with pytest.raises(ExportReached):  # what the ExportedProgram's refusal advises is taken
        aotcuda.lower(torch.export.export(torch.nn.Linear(4, 4), (x,)).module(), (x,), device="cpu")


def test_a_sparse_example_input_is_refused_before_the_export(no_export):
    """Before: the export, decompositions and passes ran, then Inductor's compile failed: "InductorError:
    NotImplementedError: Cannot access storage of SparseTensorImpl"."""
    with pytest.raises(TypeError, match=r"^example input args\[0\] is a torch.sparse_coo tensor, but lowering traces "
                                        r"dense \(strided\) tensors.*; pass a dense one, e.g. tensor.to_dense\(\)$"):
        aotcuda.lower(torch.nn.Linear(4, 4), (torch.randn(2, 4).to_sparse(),), device="cpu")


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, n: int = 2):
        return self.linear(x) * n


@pytest.fixture
def no_torch_export(monkeypatch):
    from aotcuda.lowering import torch_fixes

    def reached(*args, **kwargs):
        raise ExportReached

    torch_fixes._repeat_interleave_specializes()  # its one-op export probe, once per process, before the stand-in:
    monkeypatch.setattr(torch.export, "export", reached)  # a test run alone stopped there, before lower()'s checks


def test_dynamic_shapes_of_another_kind_are_refused(no_torch_export):
    """Before: dynamic_shapes="batch" raised torch's raw "AssertionError: expected dynamic_shapes to be dict, tuple,
    or list, got <class 'str'>", a Dim or an int "TypeError: object of type 'Dim' has no len()"."""
    x, batch = torch.randn(3, 4), torch.export.Dim("batch", max=64)
    for spec, shown in (("batch", r"'batch' \(str\)"), (batch, r"Dim\('batch', min=0, max=64\) \(Dim\)"),
                        (3, r"3 \(int\)")):
        with pytest.raises(aotcuda.DynamicShapesError, match=r"^dynamic_shapes must be a dict keyed by forward's "
                                                             r"argument names, a tuple of one entry per argument, or "
                                                             r"None; got " + shown):
            aotcuda.lower(Scaled(), (x,), dynamic_shapes=spec, device="cpu")
    with pytest.raises(ExportReached):
        aotcuda.lower(Scaled(), (x,), dynamic_shapes={"x": {0: batch}}, device="cpu")


def test_dims_for_a_number_argument_are_refused(no_torch_export):
    """Before: {"n": {0: Dim}} for an int argument raised torch's raw "AssertionError: expected dynamic_shape to be
    None, int, or _DimHint for _IntWrapper, got <class 'dict'>"; a named Dim "Unable to specify input integers as
    dynamic through named Dims"."""
    x, batch = torch.randn(3, 4), torch.export.Dim("batch", max=64)
    for spec in ({0: batch}, batch, [batch]):
        with pytest.raises(aotcuda.DynamicShapesError, match=r"^dynamic_shapes for n is .*, but n is int 3, not a "
                                                             r"tensor: it has no dims to make dynamic; give it None "
                                                             r"\(the program is exported with n=3\)$"):
            aotcuda.lower(Scaled(), (x,), {"n": 3}, dynamic_shapes={"x": {0: batch}, "n": spec}, device="cpu")
    for spec in (None, torch.export.Dim.STATIC):  # what torch.export takes for a number is passed on
        with pytest.raises(ExportReached):
            aotcuda.lower(Scaled(), (x,), {"n": 3}, dynamic_shapes={"x": {0: batch}, "n": spec}, device="cpu")


class Added(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_a_per_input_dynamic_shapes_entry_of_the_wrong_kind_is_named_with_the_fix(no_torch_export):
    """The lower() API breaker (2026-12-06): {"x": Dim("b")} or {"x": "batch"} (an entry for a tensor that is no
    dict, list or tuple) got torch's "Unexpected input tensor shape Dim('b', min=0) specified at
    `dynamic_shapes['x']` (expected either a list/tuple of dimensions, ...)" and its advice to try draft_export();
    {"x": {0: "batch"}} "Unexpected dimension mapped to index 0 ... but got 'batch' instead"."""
    from torch.export import Dim

    x = torch.randn(3, 4)
    for spec, shown, example in ((Dim("b"), r"Dim\('b', min=0\) \(Dim\)", r"\{0: Dim\('b', min=0\)\}"),
                                 ("batch", r"'batch' \(str\)", r"\{0: Dim\('batch'\)\}"),
                                 (3, r"3 \(int\)", r"\{0: Dim\('batch'\)\}"),
                                 (Dim.AUTO, r".*AUTO.* \(_DimHint\)", r"\{0: Dim.AUTO\}")):
        for dynamic_shapes in ({"x": spec}, (spec,)):
            with pytest.raises(aotcuda.DynamicShapesError, match=rf"^dynamic_shapes for x is {shown}, but x is a tensor "
                                                                 r"of 2 dims \(shape \(3, 4\)\): its entry says which "
                                                                 r"of its dims are dynamic, as a dict \(e.g. "
                                                                 rf"{example}\), a list or tuple of one entry per dim, "
                                                                 r"or None for a static input$"):
                aotcuda.lower(Scaled(), (x,), dynamic_shapes=dynamic_shapes, device="cpu")
    for dynamic_shapes in ({"x": {0: "batch"}}, {"x": ["batch", None]}, {"x": {-2: "batch"}}):
        with pytest.raises(aotcuda.DynamicShapesError, match=r"^dynamic_shapes for x gives dim 0 'batch' \(str\), "
                                                             r"which is no dim: give it a Dim \(e.g. Dim\('batch'\), "
                                                             r"from torch.export import Dim\), an int for a static "
                                                             r"size, Dim.AUTO, Dim.DYNAMIC or Dim.STATIC, or None$"):
            aotcuda.lower(Scaled(), (x,), dynamic_shapes=dynamic_shapes, device="cpu")
    for spec in ({0: Dim("b")}, [Dim.AUTO, 4], None):  # what torch takes is passed on
        with pytest.raises(ExportReached):
            aotcuda.lower(Scaled(), (x,), dynamic_shapes={"x": spec}, device="cpu")


def test_one_dim_name_given_two_ranges_is_named_with_where_each_was_given(no_torch_export):
    """The lower() API breaker (2026-12-06): Dim("b", max=8) for x and Dim("b", max=16) for y got torch's "Found
    different definitions Dim('b', max=8) and Dim('b', max=16) for the same symbolic dimension Dim('b', max=16)!",
    which names neither input, and its advice to try draft_export()."""
    from torch.export import Dim

    x = torch.randn(4, 8)
    for dynamic_shapes, first, second in (
            ({"x": {0: Dim("b", min=2, max=8)}, "y": {0: Dim("b", max=16)}}, "[2, 8] at x dim 0", "[0, 16] at y dim 0"),
            (({0: Dim("b", max=8), -1: Dim("b", max=16)}, None), "[0, 8] at x dim 0", "[0, 16] at x dim 1"),
            ({"x": {1: 8 * Dim("s", max=4)}, "y": [None, Dim("s", max=64)]}, "[0, 4] at x dim 1", "[0, 64] at y dim 1")):
        with pytest.raises(aotcuda.DynamicShapesError, match=r"^dynamic_shapes gives the Dim '[bs]' two ranges: "
                                                             rf"{re.escape(first)} and {re.escape(second)}\. A Dim's "
                                                             r"name is one size, shared by every dim it is given to: "
                                                             r"make the Dim once \([bs] = Dim\('[bs]', \.\.\.\)\) "
                                                             r"and give that one to each, or give dims whose sizes "
                                                             r"differ Dims of different names$"):
            aotcuda.lower(Added(), (x, x), dynamic_shapes=dynamic_shapes, device="cpu")
    b, s = Dim("b", max=8), Dim("s", max=4)
    for dynamic_shapes in ({"x": {0: b}, "y": {0: Dim("b", max=8)}}, {"x": {1: 8 * s}, "y": {1: s * 8, 0: b}}):
        with pytest.raises(ExportReached):  # one range a name, in one object or several
            aotcuda.lower(Added(), (x, x), dynamic_shapes=dynamic_shapes, device="cpu")


def test_inductor_configs_that_make_a_package_aotcuda_load_refuses_are_refused(no_export):
    """Before: lower() compiled and wrote the package, and said nothing; aotcuda.load then refused it, telling the
    user to "lower the model again with aotcuda.lower": package_cpp_only ("holds C++ sources but no compiled .so"),
    package_constants_in_so=False ("its model keeps its weights outside its library ... pickle_weights")."""
    with pytest.raises(ValueError, match=r"^inductor_configs sets 'aot_inductor.package_cpp_only', which packages the "
                                         r"C\+\+ sources without a compiled library: aotcuda.load refuses"):
        _lower(inductor_configs={"aot_inductor.package_cpp_only": True})
    for configs in ({"aot_inductor.package_constants_in_so": False},
                    {"aot_inductor.package_constants_in_so": False,
                     "aot_inductor.package_constants_on_disk_format": "pickle_weights"}):
        with pytest.raises(ValueError, match=r"^inductor_configs keeps the weights outside the model library .*: "
                                             r"aotcuda.load reads them there only as 'binary_blob'; set "):
            _lower(inductor_configs=configs)
    with pytest.raises(ExportReached):  # the format aotcuda reads (ExecuTorch's AOTI backend writes it) is taken
        _lower(inductor_configs={"aot_inductor.package_constants_in_so": False,
                                 "aot_inductor.package_constants_on_disk_format": "binary_blob",
                                 "aot_inductor.package_cpp_only": False})


def test_runtime_constant_folding_is_refused_with_its_cause(no_export):
    """Session 38: benchmarks/rope.py's row lowered with aot_inductor.use_runtime_constant_folding ended the process
    with an illegal memory access on the H100; torch's own AOTInductor, given the rewritten program with no aotcuda
    step between, computes inf with it on the CPU (torch 2.13; without the option, eager's values)."""
    with pytest.raises(ValueError, match=r"^inductor_configs sets 'aot_inductor.use_runtime_constant_folding', with "
                                         r"which torch's AOTInductor computes wrong results .* leave it out$"):
        _lower(inductor_configs={"aot_inductor.use_runtime_constant_folding": True})
    with pytest.raises(ExportReached):  # off is torch's default, and taken
        _lower(inductor_configs={"aot_inductor.use_runtime_constant_folding": False})


def test_an_iterator_as_an_example_input_is_named_with_the_fix(no_export):
    """Before: torch.export's "ValueError: Unsupported input type <class 'generator'>. Export only supports pytree
    containers of basic types ... To register a custom dataclass, use torch.export.register_dataclass ...", advice
    that is not the fix (an `aotcuda lower` factory returning (model, (t for t in ...)) got it too)."""
    x = torch.randn(2, 4)
    for value, kind in (((t for t in [x]), "generator"), (iter([x]), "list_iterator"), (map(abs, [x]), "map")):
        with pytest.raises(TypeError, match=rf"^example input args\[0\] is a {kind}, an iterator, which torch.export "
                                            r"does not read; pass its items as a tuple or list, e.g. tuple\(...\)$"):
            aotcuda.lower(torch.nn.Linear(4, 4), (value,), device="cpu")


def test_a_torch_compiled_or_data_parallel_module_is_lowered_as_the_module_it_wraps(monkeypatch):
    """Before: torch.compile(model) (an OptimizedModule, whose forward takes (*args, **kwargs)) was exported as it
    was, and dynamic_shapes keyed by the model's argument names were refused: "When `dynamic_shapes` is specified as
    a dict, its top-level keys must be the arg names ['args'] of `inputs`, but here they are ['x']"; a tuple got
    "`inputs[0]` is a <class 'tuple'>, but `dynamic_shapes[0]` is a <class 'dict'>". nn.DataParallel the same
    (its arg names ['inputs'])."""
    exported = []

    def reached(model, *args, **kwargs):
        exported.append((model, kwargs.get("dynamic_shapes")))
        raise ExportReached

    monkeypatch.setattr(torch.export, "export", reached)
    model, batch = Scaled(), torch.export.Dim("batch", max=64)
    for wrapped in (torch.compile(model), torch.nn.DataParallel(model), torch.compile(torch.nn.DataParallel(model))):
        for shapes in ({"x": {0: batch}}, ({0: batch},)):
            with pytest.raises(ExportReached):
                aotcuda.lower(wrapped, (torch.randn(3, 4),), dynamic_shapes=shapes, device="cpu")
            assert exported[-1][0] is model  # the module itself, on the device already: no copy
