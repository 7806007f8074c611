"""aotcuda serve on GPUs: one replica per GPU (each on its own physical GPU), and more replicas than GPUs
refused at start. Marked cuda; the two-replica test also needs two GPUs, and all need aotcuda[serve]."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from aotcuda.errors import ServingConfigError
from serving_cases import SEQ, loopback_ray, relative_error, replica_stats, server_environment

serving = pytest.importorskip("aotcuda.serving")
pytest.importorskip("ray.serve")

pytestmark = pytest.mark.cuda
PORT = 8767


@pytest.fixture(scope="module")
def block_on_cuda(tmp_path_factory):
    import aotcuda
    from aotcuda.models import attention_block

    torch.manual_seed(0)
    model, (x,) = attention_block(device="cuda", dtype=torch.float32, batch=2, seq=SEQ)
    path = str(tmp_path_factory.mktemp("serving-cuda") / "block.pt2")
    aotcuda.lower(model, (x,), device="cuda", package_path=path,
                  dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=16)}})
    return path, model.cpu()


def test_more_replicas_than_gpus_is_refused_at_start(block_on_cuda):
    path, _ = block_on_cuda
    gpus = torch.cuda.device_count()
    with pytest.raises(ServingConfigError, match=rf"need {gpus + 1} GPU\(s\).*has {gpus}"):
        serving.serve_package(path, serving.ServeOptions(replicas=gpus + 1, port=PORT),
                              ray_init_options=loopback_ray())


def test_one_replica_per_gpu_each_on_its_own_gpu_matches_eager(block_on_cuda):
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two CUDA devices; torch sees {torch.cuda.device_count()}")
    path, model = block_on_cuda
    options = serving.ServeOptions(replicas=2, port=PORT, max_batch_size=8, batch_wait_ms=5, cuda_graphs=True)
    with server_environment(), serving.serve_package(path, options, ray_init_options=loopback_ray()) as server:
        stats = replica_stats(server.url)
        assert len(stats) == 2
        gpus = [tuple(s["gpu_ids"]) for s in stats.values()]
        assert all(len(ids) == 1 for ids in gpus) and len(set(gpus)) == 2, f"replicas' GPUs: {gpus}"
        client = serving.Client(server.url, retries=0)
        rng = random.Random(3)
        inputs = [torch.randn(rng.choice([1, 2]), SEQ, 256) for _ in range(200)]
        with ThreadPoolExecutor(16) as pool:
            outputs = list(pool.map(lambda x: client.predict({"x": x}), inputs))
        with torch.no_grad():
            for x, (y,) in zip(inputs, outputs):
                assert relative_error(y, model(x)) < 1e-4  # TF32-free float32 on GPU; batched rows


@pytest.mark.parametrize("cuda_graphs, max_batch_size", [(False, 1), (False, 8), (True, 1), (True, 8)])
def test_one_gpu_replica_answers_concurrent_clients_like_eager(block_on_cuda, cuda_graphs, max_batch_size):
    """One replica on the one GPU, with and without CUDA graphs and request batching: 64 concurrent
    requests of random batch sizes each match eager, and the replica runs on a GPU."""
    path, model = block_on_cuda
    options = serving.ServeOptions(replicas=1, port=PORT, max_batch_size=max_batch_size, batch_wait_ms=5,
                                   cuda_graphs=cuda_graphs)
    with server_environment(), serving.serve_package(path, options, ray_init_options=loopback_ray()) as server:
        (stats,) = replica_stats(server.url, replicas=1).values()
        assert len(stats["gpu_ids"]) == 1
        client = serving.Client(server.url, retries=0)
        rng = random.Random(max_batch_size + cuda_graphs)
        inputs = [torch.randn(rng.choice([1, 2]), SEQ, 256) for _ in range(64)]
        with ThreadPoolExecutor(16) as pool:
            outputs = list(pool.map(lambda x: client.predict({"x": x}), inputs))
        with torch.no_grad():
            for x, (y,) in zip(inputs, outputs):
                assert relative_error(y, model(x)) < 1e-4
