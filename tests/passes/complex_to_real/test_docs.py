"""docs/ops.md is generated from the rule registry and must be up to date."""

from pathlib import Path

import pytest

from aotcuda.passes.complex_to_real.docs import render
from aotcuda.passes.complex_to_real.registry import RULES, op_name

OPS_MD = Path(__file__).resolve().parents[3] / "docs" / "ops.md"


def test_committed_ops_md_is_what_the_generator_prints():
    assert OPS_MD.read_text() == render(), (
        "docs/ops.md is stale: run `python -m aotcuda.passes.complex_to_real.docs > docs/ops.md`")


def test_every_registered_op_is_listed():
    text = render()
    assert RULES and all(f"`{op_name(op)}`" in text for op in RULES)


def test_refusals_read_in_public_terms_never_as_internal_names():
    """docs/ops.md once listed `aten.pow.Tensor_Scalar`: _complex_exponent (a check without a docstring
    shown by its function name): every refusal line must say what a user writes, from its docstring."""
    import pytest

    from aotcuda.passes.complex_to_real import docs
    from aotcuda.passes.complex_to_real.scan import REFUSAL_CHECKS

    text = render()
    checks = [*REFUSAL_CHECKS, *{rule.refuses for rule in RULES.values() if rule.refuses is not None}]
    assert checks and all(check.__name__ not in text for check in checks)
    assert "`torch.linalg.eigh(A)`, `torch.linalg.svd(A)` whose vectors are read" in text

    def undocumented(node):
        return None

    with pytest.raises(ValueError, match="undocumented has no docstring"):
        docs._first_line(undocumented)


def test_the_istft_length_note_says_what_torch_export_does():
    """A new user's trial (2026-12-07): docs/ops.md said stft/istft over a dynamic number of samples costs nothing
    extra, and `istft(..., length=y.shape[-1])` failed in torch.export itself. The note says to drop length=; both
    claims are checked here, with torch.export alone."""
    import torch
    from torch.export import Dim

    window = torch.hann_window(128)

    class RoundTrip(torch.nn.Module):
        def __init__(self, with_length):
            super().__init__()
            self.with_length = with_length

        def forward(self, y):
            spectrum = torch.stft(y, 128, 32, window=window, return_complex=True)
            return torch.istft(spectrum, 128, 32, window=window, length=y.shape[-1] if self.with_length else None)

    shapes = {"y": {1: 32 * Dim("frames", min=4, max=128)}}
    y = torch.randn(2, 1024)
    with pytest.raises(Exception, match="specialized it to be a constant"):
        torch.export.export(RoundTrip(True), (y,), dynamic_shapes=shapes, strict=False)
    program = torch.export.export(RoundTrip(False), (y,), dynamic_shapes=shapes, strict=False).module()
    longer = torch.randn(2, 640)
    torch.testing.assert_close(program(longer), RoundTrip(True)(longer), rtol=1e-5, atol=1e-5)
    text = OPS_MD.read_text()
    assert "Drop istft's `length=` there" in text
