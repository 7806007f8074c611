"""Run a test module's ``check_interpreted()`` in a fresh process under Triton's interpreter
(TRITON_INTERPRET=1 is read when the kernels are defined, so it must be set before aotcuda.kernels is
imported): the kernels then run on CPU tensors."""

import functools
import os
import subprocess
import sys
import textwrap

import pytest

# A kernel whose loop bound is a kernel argument, as every kernel of aotcuda.kernels has.
_PROBE = """
import torch, triton, triton.language as tl
@triton.jit
def probe(out, n):
    total = 0
    for i in range(0, n, 1):
        total += i
    tl.store(out, total)
out = torch.zeros(1, dtype=torch.int32)
probe[(1,)](out, 4)
assert out.item() == 6, out
"""


@functools.cache
def _interpreter_problem() -> str | None:
    """Why this machine's Triton interpreter cannot run aotcuda's kernels, or None. Triton 3.6's interpreter
    (the H200's) types a scalar kernel argument as a 1-element array, and ``range()`` over it raises
    "only 0-dimensional arrays can be converted to Python scalars" under numpy 2; Triton 3.9's runs it."""
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300,
                          env=_interpreter_environment())
    if done.returncode == 0:
        return None
    import triton

    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return f"Triton {triton.__version__}'s interpreter cannot run a loop over a kernel argument ({last[:160]})"


def _need_interpreter() -> None:
    problem = _interpreter_problem()
    if problem:
        pytest.skip(problem + "; where a GPU is, the CUDA tests run the kernels themselves")


def _interpreter_environment() -> dict:
    """The subprocess's environment: the interpreter on, and tests/ on the path (comparisons.py, which the
    test modules import)."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}


def run_interpreted(module: str) -> list[str]:
    """The lines ``tests/kernels/<module>.py``'s check_interpreted() printed; fails the test on an error."""
    _need_interpreter()
    code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import {module}; {module}.check_interpreted()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                          env=_interpreter_environment())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def run_code(code: str) -> str:
    """Run ``code`` (dedented) in a fresh process under Triton's interpreter; its stdout. Fails the test
    on an error."""
    _need_interpreter()
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=900, env=_interpreter_environment())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
