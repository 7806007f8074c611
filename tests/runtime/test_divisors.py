"""Sizes a program divides by: a call whose shapes make one 0 is an InputError, not the end of the process.

``y.shape[0] // x.shape[0]`` with ``Dim("n", min=0)`` on x: the generated code computes the quotient in C++, and a call
with x of 0 rows (within the exported range) ended the process with SIGFPE, where eager raises ZeroDivisionError;
``100 // (y.shape[0] - 1)`` at 1 row returned a value eager never gives. The lowering records the divisors (the
signature's "divisors"), and the runtime refuses such sizes before the run (runtime/divisors.py). Each call runs in a
child process, so that a regression fails the test rather than the session.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import aotcuda
from least_time import least_cpu_seconds
from runtime_programs import with_edited_signature


class Divides(torch.nn.Module):
    def forward(self, x, y):
        n, m = x.shape[0], y.shape[0]
        return x * 2, m // n, m % n, torch.full((1,), 100 // (m - 1)) + y.sum()


@pytest.fixture(scope="module")
def divides_pt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("divisors") / "divides.pt2"
    n, m = torch.export.Dim("n", min=0, max=64), torch.export.Dim("m", min=1, max=64)
    aotcuda.lower(Divides(), (torch.randn(3, 4), torch.randn(5, 4)), device="cpu",
                  dynamic_shapes={"x": {0: n}, "y": {0: m}}, package_path=path)
    return str(path)


CALL = textwrap.dedent("""
    import sys, torch, aotcuda
    program = aotcuda.load(sys.argv[1])
    for rows in ((0, 5), (3, 1), (3, 5)):
        try:
            out = program(torch.randn(rows[0], 4), torch.randn(rows[1], 4))
            print("ran", out[1], out[2], flush=True)
        except aotcuda.InputError as error:
            print("InputError:", error, flush=True)
""")


def test_sizes_that_make_the_program_divide_by_zero_are_refused_and_the_next_call_runs(divides_pt2):
    child = subprocess.run([sys.executable, "-c", CALL, divides_pt2], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode == 0, f"the child died ({child.returncode}; main: SIGFPE, -8): {child.stderr[-1500:]}"
    lines = child.stdout.splitlines()
    assert len(lines) == 3, child.stdout
    assert lines[0].startswith("InputError: the inputs' sizes (n = 0) make the program divide by zero: it divides by "
                               "n, which is 0"), lines[0]
    assert "(m = 1)" in lines[1] and "divides by m - 1" in lines[1], lines[1]
    assert lines[2] == "ran 1 2", lines[2]


def test_the_signature_records_the_divisors(divides_pt2):
    signature = aotcuda.load(divides_pt2).signature
    assert len(signature["divisors"]) == 2 and any(text.endswith(" - 1") for text in signature["divisors"]), signature


class DividesATensorBySizes(torch.nn.Module):
    def forward(self, x, a):
        n = x.shape[0]
        return torch.div(a, n, rounding_mode="trunc"), a // n, a % (n + 1)


def test_a_tensor_divided_by_a_size_is_recorded():
    """No compile: the divisors lowering records from an ExportedProgram where a tensor op divides by a size (the
    generated code divides by it in C++: a trunc division by 0 there is SIGFPE)."""
    from aotcuda.lowering.signature import size_divisors

    n = torch.export.Dim("n", min=0, max=64)
    ep = torch.export.export(DividesATensorBySizes(), (torch.randn(4, 4), torch.arange(10)),
                             dynamic_shapes={"x": {0: n}, "a": None})
    found = size_divisors(ep.run_decompositions())
    assert len(found) == 2 and found[0].isidentifier() and found[1] == f"{found[0]} + 1", found


class MeanOverRows(torch.nn.Module):
    def forward(self, x, a):
        n = x.shape[0]
        return x.sum(0) / n, torch.div(x, n, rounding_mode="floor"), a.float() / n


def test_a_float_tensor_divided_by_a_size_is_not_recorded():
    """eager divides a float tensor by a size of 0 without an error (inf, nan): no refusal may be made there."""
    from aotcuda.lowering.signature import size_divisors

    n = torch.export.Dim("n", min=0, max=64)
    ep = torch.export.export(MeanOverRows(), (torch.randn(4, 4), torch.arange(10)),
                             dynamic_shapes={"x": {0: n}, "a": None})
    assert size_divisors(ep.run_decompositions()) == []


@pytest.mark.parametrize("divisors", ["s77", ["__import__('os')"], [5], {"expr": "s77"}, ["0"], ["s77", "2 - 2"]])
def test_divisors_load_refuses_are_refused_before_serving_starts(divides_pt2, tmp_path, divisors):
    """As every record load refuses (review 9): at serve's check, not in each replica as Ray starts it. A divisor with
    no size symbol ("0", which refused every call with an InputError telling the caller to change sizes) is one."""
    pytest.importorskip("ray")
    from aotcuda.errors import PackageError
    from aotcuda.serving.server import ServeOptions, check_package

    path = with_edited_signature(divides_pt2, tmp_path / "bad.pt2", lambda signature: signature.update(divisors=divisors))
    for refuse in (lambda: aotcuda.load(str(path)), lambda: check_package(str(path), ServeOptions())):
        with pytest.raises(PackageError, match="the signature's divisors are malformed"):
            refuse()


def test_divisors_sympy_recurses_on_are_read_or_refused_at_load():
    """A package's divisor of 20 characters, Max(1, Identity(s0)), raised a raw RecursionError at every call (sympy's
    int() of an unevaluated Identity recursed without end); ModularIndexing(s0, IntTrueDiv(s1, 2), 2) took 0.07 s to
    end in one, and a signature's 128 KiB of expressions held 3000 of them: minutes at each new shape. Identity is
    read as its argument; an integer function of a float is refused at load; what sympy still recurses on has no
    value (as a divisor of 0 in a size expression), never a raw error."""
    from aotcuda.errors import InputError, PackageError
    from aotcuda.runtime.divisors import SizeDivisors

    SizeDivisors.from_signature({"divisors": ["Max(1, Identity(s0))", "Min(s0, Identity(s0) + s1)"]}).check(
        {"s0": 1, "s1": 0})
    with pytest.raises(InputError, match="divides by Max"):
        SizeDivisors.from_signature({"divisors": ["Max(0, Identity(s0))"]}).check({"s0": 0})
    with pytest.raises(PackageError, match="not an integer"):
        SizeDivisors.from_signature({"divisors": ["ModularIndexing(s0, IntTrueDiv(s1, 2), 2)"]})
    many = SizeDivisors.from_signature({"divisors": [f"Max({k}, Identity(s0) * {k + 1})" for k in range(1, 200)]})
    took, _ = least_cpu_seconds(lambda: many.check({"s0": 3}))  # CPU time, least of three (least_time.py): ~0.06 s
    assert took < 5, took
