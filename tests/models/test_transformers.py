"""The transformers library-model suite (issue 11): each class of tests.models.library.TRANSFORMERS_SUITE,
exported as its library calls it (the class itself, with the keyword arguments users pass), checked at
three levels:

1. ExportedProgram (every case, CI): export → decompose → passes → ReplaceComplexWithRealPass(strict)
   leaves no complex value, and ``.module()`` matches eager at every length (a second length where a dim is
   dynamic). Relative-error tolerance float32 1e-5 (same ATen ops, same precision).
2. lower() + load() in a fresh process (FRESH_PROCESS_CASES, CI, CPU; `aotcuda run` and `inspect` on one): the package is loaded and run by a
   new Python process that has imported neither transformers' output classes nor the model, as a
   deployment does; its outputs, structure included, match eager (compiled: 1e-4).
3. lower(device="cuda") + load() (every case, marked cuda): no fallback kernel beyond the allow-list, and
   the outputs match eager at every length.

Cases that fail today for a known root cause are not in the normal tests: KNOWN_LIMITS (and, on CUDA,
KNOWN_CUDA_LIMITS) records each with the first line of its error, and
test_known_limits_fail_with_their_documented_cause runs the same step and asserts that error. A fix
elsewhere makes that test fail with a message to move the case back to the normal cases. docs/models.md
has the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest
import torch
import torch.utils._pytree as pytree

import aotcuda
from model_checks import assert_fails_with_documented_cause, complex_values_left, export_real, relative_error
from tests.models.library import TRANSFORMERS_SUITE

PASS_TOLERANCE, COMPILED_TOLERANCE = 1e-5, 1e-4
TABLE = "docs/models.md (transformers table)"


@dataclass(frozen=True)
class KnownLimit:
    """A case that fails today: `match` is a regex over "ErrorType: message" (the first error line
    docs/models.md records), `cause` the root cause in words."""

    match: str
    cause: str


# ExportedProgram level (export → decompose → ReplaceComplexWithRealPass(strict)), every device.
KNOWN_LIMITS = {
    "autoformer": KnownLimit(
        r"shape '\[2, 2, 12, 12\]' is invalid for input of size 384",
        "torch.export: under export transformers' create_bidirectional_mask builds a [B, 1, T, T] mask (eager "
        "skips it) that Autoformer's auto-correlation adds to [B*H, T, head_dim] weights (docs/models.md)"),
}
# On CUDA (torch 2.11 on the H200) in addition: lower(device="cuda") + load().
# (deepseek_v2_moe was one until its float32 experts' transformers::grouped_mm_fallback was traced through a
# plain-torch rule: aotcuda/lowering/library_ops.py.)
KNOWN_CUDA_LIMITS: dict[str, KnownLimit] = {}
WORKING = [name for name in TRANSFORMERS_SUITE if name not in KNOWN_LIMITS]
WORKING_ON_CUDA = [name for name in WORKING if name not in KNOWN_CUDA_LIMITS]
# The most representative, one compile each (the fresh-process compile is the slow part of this file): the
# control (no complex math, a ModelOutput return, the CLI on its package). The diffusers suite's qwen_image
# is the second fresh-process case (complex RoPE). The other cases were lowered and loaded in a fresh
# process the same way (docs/models.md); to run one again, add it here, e.g. "xcodec2_decoder" (polar +
# irfft over a dynamic frame count) or "deepseek_v2_dense" (complex RoPE): +1 CPU compile each.
FRESH_PROCESS_CASES = ("llama_causal_lm",)


def built(name: str, suite: dict = TRANSFORMERS_SUITE):
    """(case, model, example args, example kwargs, dynamic_shapes) of suite[name], weights seeded."""
    case = suite[name]
    pytest.importorskip(case.library, reason=f"{name} needs {case.library}; pip install -e '.[test]'")
    torch.manual_seed(0)
    model, args, kwargs, dims = case.build(torch.float32)
    return case, model, args, kwargs, dims


def tensors_of(outputs) -> tuple[torch.Tensor, ...]:
    return tuple(leaf for leaf in pytree.tree_leaves(outputs) if isinstance(leaf, torch.Tensor))


def eager(model, args, kwargs):
    with torch.no_grad():
        return model(*args, **kwargs)


@pytest.mark.parametrize("name", WORKING)
def test_exported_program_has_no_complex_and_matches_eager(name):
    case, model, args, kwargs, dims = built(name)
    ep = export_real(model, args, dims, kwargs=kwargs)
    assert complex_values_left(ep) == []
    for length in case.lengths:
        fresh, options = case.make_inputs(length, torch.float32)
        error = relative_error(tensors_of(ep.module()(*fresh, **options)), tensors_of(eager(model, fresh, options)))
        print(f"{name} at length {length}: relative error {error:.1e}")
        assert error <= PASS_TOLERANCE, f"{name} at length {length}: relative error {error:.2e}"


@pytest.mark.parametrize("name", list(KNOWN_LIMITS))
def test_known_limits_fail_with_their_documented_cause(name):
    """The step the normal test runs (export → decompose → pass) raises the recorded error."""
    case, model, args, kwargs, dims = built(name)
    limit = KNOWN_LIMITS[name]
    assert_fails_with_documented_cause(name, lambda: export_real(model, args, dims, kwargs=kwargs),
                                       limit.match, limit.cause, f"KNOWN_LIMITS and {TABLE}")


# --- lower() + load() in a fresh process --------------------------------------------------------------

# Loads the package and runs it on saved inputs in a process that has imported neither the model nor
# transformers' output classes; reports the outputs' structure and which transformers modules it imported.
LOAD_AND_RUN = textwrap.dedent("""
    import json, sys, torch, aotcuda
    import torch.utils._pytree as pytree
    package, inputs, outputs = sys.argv[1:4]
    saved = torch.load(inputs)
    result = aotcuda.load(package)(*saved["args"], **saved["kwargs"])
    torch.save([t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)], outputs)
    print(json.dumps({"type": f"{type(result).__module__}.{type(result).__qualname__}",
                      "transformers_modules": sorted(m for m in sys.modules if m.startswith("transformers"))}))
""")


def fresh_python(*argv: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.abspath("src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module", params=FRESH_PROCESS_CASES)
def lowered_on_cpu(request, tmp_path_factory):
    """(name, case, eager model, LoweredProgram) of one CPU compile per case, in this process."""
    name = request.param
    case, model, args, kwargs, dims = built(name)
    folder = tmp_path_factory.mktemp(name)
    lowered = aotcuda.lower(model, args, kwargs, dynamic_shapes=dims, device="cpu",
                            package_path=folder / f"{name}.pt2")
    return name, case, model, lowered


def test_lowered_package_runs_in_a_fresh_process_and_matches_eager(lowered_on_cpu, tmp_path):
    name, case, model, lowered = lowered_on_cpu
    assert lowered.fallback_kernels == [], f"{name}: {[k.describe() for k in lowered.fallback_kernels]}"
    for length in case.lengths:
        fresh, options = case.make_inputs(length, torch.float32)
        torch.save({"args": fresh, "kwargs": options}, tmp_path / "inputs.pt")
        run = fresh_python("-c", LOAD_AND_RUN, lowered.package_path, str(tmp_path / "inputs.pt"),
                           str(tmp_path / "outputs.pt"))
        assert run.returncode == 0, run.stderr[-3000:]
        report = json.loads(run.stdout.strip().splitlines()[-1])
        expected = eager(model, fresh, options)
        assert report["type"] == f"{type(expected).__module__}.{type(expected).__qualname__}", report
        error = relative_error(tuple(torch.load(tmp_path / "outputs.pt")), tensors_of(expected))
        print(f"{name} in a fresh process at length {length}: {report['type']}, relative error {error:.1e}")
        assert error <= COMPILED_TOLERANCE, f"{name} at length {length}: relative error {error:.2e}"


def test_cli_runs_and_inspects_a_package_with_library_outputs(lowered_on_cpu, tmp_path):
    """`aotcuda run` and `aotcuda inspect` in new processes, on a package whose outputs are a ModelOutput."""
    name, case, _, lowered = lowered_on_cpu
    if name != "llama_causal_lm":
        pytest.skip("one package with a ModelOutput return is enough for the CLI")
    args, kwargs = case.make_inputs(case.lengths[-1], torch.float32)
    torch.save({"args": args, "kwargs": kwargs}, tmp_path / "inputs.pt")
    run = fresh_python("-m", "aotcuda", "run", lowered.package_path, "--inputs", str(tmp_path / "inputs.pt"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"(2, {case.lengths[-1]}, 128)" in run.stdout, run.stdout  # the logits
    inspect = fresh_python("-m", "aotcuda", "inspect", lowered.package_path)
    assert inspect.returncode == 0, inspect.stderr[-3000:]
    assert "fallback kernels: 0" in inspect.stdout, inspect.stdout


# --- CUDA ---------------------------------------------------------------------------------------------

def lower_on_cuda_and_compare(name: str, tmp_path, suite: dict = TRANSFORMERS_SUITE) -> None:
    """lower(device="cuda") + load(): no fallback kernel beyond the allow-list, outputs match eager at every
    length."""
    case, model, args, kwargs, dims = built(name, suite)
    model = model.cuda()
    on_cuda = lambda values: tuple(v.cuda() if isinstance(v, torch.Tensor) else v for v in values)  # noqa: E731
    lowered = aotcuda.lower(model, on_cuda(args), kwargs, dynamic_shapes=dims, device="cuda",
                            package_path=tmp_path / f"{name}.pt2", allow_fallbacks=True)
    assert lowered.fallback_kernels == [], f"{name}: {[k.describe() for k in lowered.fallback_kernels]}"
    program = lowered.load()
    for length in case.lengths:
        fresh, options = case.make_inputs(length, torch.float32)
        fresh = on_cuda(fresh)
        error = relative_error(tensors_of(program(*fresh, **options)), tensors_of(eager(model, fresh, options)))
        print(f"{name} on CUDA at length {length}: relative error {error:.1e}")
        assert error <= COMPILED_TOLERANCE, f"{name} on CUDA at length {length}: relative error {error:.2e}"


@pytest.mark.cuda
@pytest.mark.parametrize("name", WORKING_ON_CUDA)
def test_lowered_on_cuda_has_no_fallback_kernels_and_matches_eager(name, tmp_path):
    lower_on_cuda_and_compare(name, tmp_path)


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(KNOWN_CUDA_LIMITS))
def test_known_cuda_limits_fail_with_their_documented_cause(name, tmp_path):
    """The CUDA step raises the recorded error: from lower()/load(), or the fallback-kernel check naming it."""
    limit = KNOWN_CUDA_LIMITS[name]
    assert_fails_with_documented_cause(name, lambda: lower_on_cuda_and_compare(name, tmp_path), limit.match,
                                       limit.cause, f"KNOWN_CUDA_LIMITS and {TABLE}")


def test_the_first_call_a_user_writes_names_use_cache_false():
    """aotcuda.lower(LlamaForCausalLM(cfg), (input_ids,)): the DynamicCache output cannot be exported; the
    error is torch's, with the fix as a note (the call with the fix is the fresh-process case above)."""
    case, model, args, _, _ = built("llama_causal_lm")
    with pytest.raises(RuntimeError, match="DynamicCache") as caught:
        aotcuda.lower(model, args, device="cpu")
    assert any('{"use_cache": False}' in note for note in getattr(caught.value, "__notes__", [])), caught.value
