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



@pytest.fixture(autouse=True)
def _ieee_float32_on_cuda(request):
    """A CUDA test compares a float32 program against eager float32, so both run float32 math: cuDNN's
    convolutions default to TF32 (a 10-bit mantissa), which put eager itself 5.6e-4 from float64 on
    mmaudio_vae (H100 and H200, torch 2.11) and eager and the package, which may pick another convolution
    algorithm, 1.4e-4 apart; with IEEE float32 both are 4e-7 from float64. The package's convolutions call
    ATen, which reads the same flags when they run. Only tests marked cuda change them, only while they run.
    The allow_tf32 flags, not the fp32_precision settings of torch >= 2.9: reading a legacy flag after the new
    settings made cuDNN's convolutions and RNNs differ raises, and Inductor reads the legacy flags."""
    if "cuda" not in request.keywords or not torch.cuda.is_available():
        yield
        return
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


@pytest.fixture
def noexec_mount(monkeypatch):
    """``noexec_mount(folder)``: os.statvfs says ``folder`` is on a file system mounted noexec from then on (mounting one
    needs privileges); ``noexec_mount(None)`` takes it back."""
    statvfs = os.statvfs

    def mount(folder):
        if folder is None:
            monkeypatch.setattr(os, "statvfs", statvfs)
            return

        def noexec_there(path):
            answer = statvfs(path)
            if os.path.realpath(path) != os.path.realpath(folder):
                return answer
            return os.statvfs_result((*answer[:8], answer.f_flag | os.ST_NOEXEC, answer.f_namemax))

        monkeypatch.setattr(os, "statvfs", noexec_there)

    return mount
