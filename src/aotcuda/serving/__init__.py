"""Serve aotcuda packages as Ray Serve applications: one loaded Program per replica, over HTTP.

    pip install 'aotcuda[serve]'
    aotcuda serve block.pt2 --replicas 2 --max-batch-size 8          # or, from Python:

    from aotcuda.serving import ServeOptions, serve_package
    with serve_package("block.pt2", ServeOptions(replicas=2, max_batch_size=8)) as server:
        requests.post(server.url + "/predict", data=safetensors.torch.save({"x": x}))

The modules: client (HTTP with the retry rule), codec (the safetensors wire format), batching (which requests combine, pure tensor code),
deployment (the replica: routes, checks before batching, Ray Serve's batching), proxy (the request body read
in Ray Serve's HTTP proxy, on the client's time), server (start Ray or join RAY_ADDRESS, deploy, shut down). Ray is imported only by deployment and server. docs/serving.md has
the HTTP contract, the figures and the multi-node recipe.
"""

from aotcuda.serving.batching import BatchPlan
from aotcuda.serving.client import Client, ServingError
from aotcuda.serving.codec import RequestError, decode_inputs, encode_outputs
from aotcuda.serving.server import ServeOptions, Server, build_app, serve_package

__all__ = ["BatchPlan", "Client", "RequestError", "ServeOptions", "Server", "ServingError", "build_app",
           "decode_inputs", "encode_outputs", "serve_package"]
