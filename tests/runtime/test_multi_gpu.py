"""Packages on a GPU other than the one they were built on, and one package on several GPUs at once.

Marked cuda; the two-GPU tests also skip, saying so, where torch sees fewer than two GPUs. A device index
past the last GPU is refused with a clear error on any CUDA machine.
"""

from __future__ import annotations

import threading

import pytest
import torch

import aotcuda
from aotcuda.models import attention_block

pytestmark = pytest.mark.cuda


def needs_two_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two CUDA devices; torch sees {torch.cuda.device_count()}")


@pytest.fixture(scope="module")
def block_on_cuda0(tmp_path_factory):
    """(package path, eager model on cuda:0): lowered on cuda:0 with a dynamic sequence length."""
    torch.manual_seed(0)
    model, (x,) = attention_block(device="cuda:0", dtype=torch.float32, batch=2, seq=16)
    path = str(tmp_path_factory.mktemp("multi-gpu") / "block.pt2")
    aotcuda.lower(model, (x,), device="cuda", package_path=path,
                  dynamic_shapes={"x": {1: torch.export.Dim("seq", min=2, max=64)}})
    return path, model


def relative_error(actual, expected) -> float:
    return ((actual.double() - expected.double()).norm() / expected.double().norm()).item()


def test_a_device_index_past_the_last_gpu_is_refused_with_the_count(block_on_cuda0):
    path, _ = block_on_cuda0
    index = torch.cuda.device_count()
    with pytest.raises(aotcuda.PackageError, match=rf"cuda:{index}.*torch sees {index} CUDA device"):
        aotcuda.load(path, device=f"cuda:{index}")
    with aotcuda.load(path, device="cuda:0") as program:  # the package still loads where it can
        assert program.device == torch.device("cuda:0")


@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_a_package_built_on_cuda0_runs_on_cuda1(block_on_cuda0, cuda_graphs):
    needs_two_gpus()
    path, model = block_on_cuda0
    model1 = attention_block(device="cuda:1", dtype=torch.float32, batch=2, seq=16)[0]
    model1.load_state_dict(model.state_dict())
    with aotcuda.load(path, device="cuda:1", cuda_graphs=cuda_graphs) as program:
        assert program.device == torch.device("cuda:1")
        for seq in (16, 16, 16, 16, 40):  # past the warm-up calls, a capture and a replay; a new shape
            x = torch.randn(2, seq, 256, device="cuda:1")
            y = program(x)
            assert y.device == torch.device("cuda:1")
            with torch.no_grad():
                assert relative_error(y, model1(x)) < 1e-5


@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_one_program_per_gpu_called_from_two_threads_at_once(block_on_cuda0, cuda_graphs):
    needs_two_gpus()
    path, model = block_on_cuda0
    models = {}
    for index in (0, 1):
        models[index] = attention_block(device=f"cuda:{index}", dtype=torch.float32, batch=2, seq=16)[0]
        models[index].load_state_dict(model.state_dict())
    programs = {index: aotcuda.load(path, device=f"cuda:{index}", cuda_graphs=cuda_graphs) for index in (0, 1)}
    errors: list[str] = []
    start = threading.Barrier(2)

    def work(index: int) -> None:
        device = torch.device("cuda", index)
        try:
            start.wait()
            with torch.cuda.device(device):
                for step in range(30):
                    x = torch.randn(2, 16 + step % 3, 256, device=device)
                    y = programs[index](x)
                    with torch.no_grad():
                        error = relative_error(y, models[index](x))
                    if y.device != device or error >= 1e-5:
                        errors.append(f"cuda:{index} step {step}: {y.device}, relative error {error:.1e}")
        except Exception as exc:  # noqa: BLE001 - reported below with its thread
            errors.append(f"cuda:{index}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for program in programs.values():
        program.close()
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish in 300 s"
    assert errors == []
