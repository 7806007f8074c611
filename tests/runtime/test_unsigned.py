"""A package without aotcuda's signature never runs unchecked (issue 12, item 10).

Its inputs can be checked only by the checks in AOTInductor's generated code, which
AOTI_RUNTIME_CHECK_INPUTS=0 turns off; with that in the environment the package ran a float64 input as
float32 bytes and read a (2, 2) input past its end. Now load refuses, naming the variable and the fix.
"""

import pytest
import torch

import aotcuda
from aotcuda.errors import PackageError, RuntimeCallError


@pytest.mark.parametrize("value", ["0", "00", "0 please"])
def test_unsigned_package_is_refused_when_aoti_checks_are_off(twice_unsigned_pt2, monkeypatch, value):
    monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", value)
    with pytest.raises(PackageError, match=r"no aotcuda signature.*AOTI_RUNTIME_CHECK_INPUTS=.*turns them off.*"
                                           r"Unset AOTI_RUNTIME_CHECK_INPUTS.*write_signature"):
        aotcuda.load(twice_unsigned_pt2)


def test_signed_package_runs_checked_whatever_the_variable(twice_pt2, monkeypatch):
    monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", "0")
    with aotcuda.load(twice_pt2) as program:  # aotcuda checks these inputs itself
        with pytest.raises(aotcuda.InputError, match="float64"):
            program(torch.randn(3, 4, dtype=torch.float64))


@pytest.mark.parametrize("value", [None, "1", ""])
def test_unsigned_package_with_checks_on_rejects_wrong_inputs(twice_unsigned_pt2, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("AOTI_RUNTIME_CHECK_INPUTS", raising=False)
    else:
        monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", value)
    with aotcuda.load(twice_unsigned_pt2) as program:
        with pytest.raises(RuntimeCallError, match="unmatched|expected|printed the cause on stderr"):
            program(torch.randn(3, 4, dtype=torch.float64))
        with pytest.raises(RuntimeCallError, match="unmatched|expected|printed the cause on stderr"):
            program(torch.randn(2, 2))
        x = torch.randn(6, 4)
        torch.testing.assert_close(program(x)[1], x + 1)
