"""Run a test module's ``check_interpreted()`` in a fresh process under Triton's interpreter
(TRITON_INTERPRET=1 is read when the kernels are defined, so it must be set before aotcuda.kernels is
imported): the kernels then run on CPU tensors."""

import os
import subprocess
import sys
import textwrap


def run_interpreted(module: str) -> list[str]:
    """The lines ``tests/kernels/<module>.py``'s check_interpreted() printed; fails the test on an error."""
    code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import {module}; {module}.check_interpreted()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def run_code(code: str) -> str:
    """Run ``code`` (dedented) in a fresh process under Triton's interpreter; its stdout. Fails the test
    on an error."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
