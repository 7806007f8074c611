"""Shared test setup: tests marked ``@pytest.mark.cuda`` skip, with a printed reason, without a CUDA device;
under pytest-xdist (the README's ``-n 2 --dist loadgroup``) each test file runs in one worker, so that a
file's module- and session-scoped packages compile once, and the files that start Ray share one worker."""

import os

import pytest
import torch

# Tests that start a Ray cluster or an ``aotcuda serve`` process run one after another, never beside each
# other: each takes the machine's cores for its workers.
_SERVING = "serving"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = os.path.basename(os.path.dirname(str(item.path)))
        group = _SERVING if folder == _SERVING else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; torch.cuda.is_available() is False here")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
