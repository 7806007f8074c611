"""Integer division rounded toward zero by a tensor holding a zero: eager's ZeroDivisionError, not the end of the process.

Inductor computes ``torch.div(a, b, rounding_mode="trunc")`` of integer tensors with a plain C++ ``/``: a zero in b (a
request's value) ended the process with SIGFPE. lower() writes it with the floor division and remainder Inductor
guards (aotcuda/lowering/integer_division.py). The calls run in a child process, so that a regression fails the test
rather than the session.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import aotcuda


class TruncDivide(torch.nn.Module):
    def forward(self, a, b):
        return torch.div(a, b, rounding_mode="trunc"), a.div(b, rounding_mode="floor")


@pytest.fixture(scope="module")
def trunc_pt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("integer_division") / "trunc.pt2"
    a, b = torch.randint(-100, 100, (8192,)), torch.randint(1, 100, (8192,))  # 8192: a parallel kernel
    aotcuda.lower(TruncDivide(), (a, b), device="cpu", package_path=path)
    return str(path)


CALLS = textwrap.dedent("""
    import sys, torch, aotcuda
    program = aotcuda.load(sys.argv[1])
    torch.manual_seed(0)
    a, b = torch.randint(-100, 100, (8192,)), torch.randint(-100, 100, (8192,))
    b[b == 0] = 7
    zero = b.clone()
    zero[4000] = 0
    try:
        program(a, zero)
        print("ran", flush=True)
    except aotcuda.RuntimeCallError as error:
        print("RuntimeCallError:", str(error).splitlines()[0], flush=True)
    got = program(a, b)
    print("next call right:", torch.equal(got[0], torch.div(a, b, rounding_mode="trunc")) and
          torch.equal(got[1], torch.div(a, b, rounding_mode="floor")), flush=True)
""")


def test_a_zero_divisor_of_a_trunc_division_is_an_error_and_the_next_call_runs(trunc_pt2):
    child = subprocess.run([sys.executable, "-c", CALLS, trunc_pt2], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode == 0, f"the child died ({child.returncode}; main: SIGFPE, -8): {child.stderr[-1500:]}"
    lines = child.stdout.splitlines()
    assert lines[0].startswith("RuntimeCallError:") and "ZeroDivisionError" in lines[0], child.stdout
    assert lines[1] == "next call right: True", child.stdout


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_the_decomposition_is_eagers_trunc_division(dtype):
    from aotcuda.lowering.integer_division import trunc_division_guarded

    torch.manual_seed(0)
    low = 0 if dtype == torch.uint8 else -100
    a, b = torch.randint(low, 100, (4096,), dtype=dtype), torch.randint(low, 100, (4096,), dtype=dtype)
    b[b == 0] = 3
    assert torch.equal(trunc_division_guarded(a, b, rounding_mode="trunc"), torch.div(a, b, rounding_mode="trunc"))
    assert trunc_division_guarded(a.float(), b.float(), rounding_mode="trunc") is NotImplemented
    assert trunc_division_guarded(a, b, rounding_mode="floor") is NotImplemented


MOST_NEGATIVE = textwrap.dedent("""
    import sys, torch, aotcuda
    program = aotcuda.load(sys.argv[1])
    a, b = torch.tensor([-2**63, 7] * 4096), torch.tensor([-1, 2] * 4096)
    got = program(a, b)
    print(got[0][:2].tolist(), got[1][:2].tolist(), flush=True)
""")


def test_the_most_negative_int64_divided_by_minus_one_wraps_and_does_not_end_the_process(trunc_pt2):
    """INT64_MIN / -1 traps on x86 (the quotient does not fit): eager's own trunc division ends its process there
    (SIGFPE), its floor division wraps. The decomposition's floor division and remainder (cpp_prefix.h guards that
    case) give the wrapped quotient for both, as eager's floor division does."""
    child = subprocess.run([sys.executable, "-c", MOST_NEGATIVE, trunc_pt2], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-1500:]}"
    assert child.stdout.strip() == f"[{-2**63}, 3] [{-2**63}, 3]", child.stdout
