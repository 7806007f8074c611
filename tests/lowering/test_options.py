"""lower()'s options of the wrong kind are refused before any work (lowering/options.py): each was taken as it came
(allow_fallbacks="False" is true) or failed in torch's words, after the export or at the compile."""

from __future__ import annotations

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
