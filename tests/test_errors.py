"""aotcuda's errors cross processes: a process pool, Ray or a serving worker hands an exception back pickled,
and one that does not unpickle turns into an unrelated TypeError in the parent (or a pool that never answers)."""

import pickle

import pytest

from aotcuda.errors import Advice, InputError, MissingFallbackKernelsError, UnsupportedComplexOpError
from aotcuda.serving.body import LateBodyError, RequestError, SlowBodyError, SlowHeadError
from aotcuda.serving.client import ServingError

ERRORS = {
    "UnsupportedComplexOpError": lambda: UnsupportedComplexOpError("aten.foo.default", "foo_1", "model.py:3", "no rule"),
    "ServingError": lambda: ServingError(503, "busy", retriable=True, retry_after_s=2.0),
    "ServingError without an answer": lambda: ServingError(None, "could not connect", retriable=True),
    "InputError with advice": lambda: InputError("bad input", advice=(Advice("device", "cpu"),)),
    "MissingFallbackKernelsError": lambda: MissingFallbackKernelsError("kernels missing"),
    "RequestError": lambda: RequestError("not safetensors"),
    "SlowBodyError": lambda: SlowBodyError("slow"),
    "SlowHeadError": lambda: SlowHeadError("slow head"),
    "LateBodyError": lambda: LateBodyError("late"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_an_error_survives_pickling_with_its_message_and_attributes(name):
    error = ERRORS[name]()
    error.note = "set after raising"  # as lower() sets error.kernels and error.pass_results
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and copy.args == error.args
    assert vars(copy) == vars(error) and copy.advice == error.advice
