"""Serve aotcuda packages as Ray Serve applications: one loaded Program per replica, over HTTP.

    pip install 'aotcuda[serve]'
    aotcuda serve block.pt2 --replicas 2 --max-batch-size 8          # or, from Python:

    from aotcuda.serving import ServeOptions, serve_package
    with serve_package("block.pt2", ServeOptions(replicas=2, max_batch_size=8)) as server:
        requests.post(server.url + "/predict", data=safetensors.torch.save({"x": x}))

The modules: client (HTTP with the retry rule), body (the request body under its limits, no torch), codec (the safetensors wire format), batching (which requests combine, pure tensor code),
deployment (the replica: routes, checks before batching, Ray Serve's batching), deadline (the run deadline),
health (GET /healthz), proxy (the request body read in Ray Serve's HTTP proxy, on the client's time), server (start
Ray or join RAY_ADDRESS, deploy, shut down). Ray is imported only by deployment, health and server. docs/serving.md has
the HTTP contract, the figures and the multi-node recipe.
"""

import importlib

# Each name is imported from its module when first used, so that importing one module of the package
# (Ray Serve's HTTP proxy imports proxy.py) does not import the others, nor torch (body.py says why).
_EXPORTS = {"BatchPlan": "batching", "Client": "client", "ServingError": "client", "RequestError": "body",
            "decode_inputs": "codec", "encode_outputs": "codec", "ServeOptions": "server", "Server": "server",
            "build_app": "server", "serve_package": "server"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"aotcuda.serving.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'aotcuda.serving' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
