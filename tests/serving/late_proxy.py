"""A Ray Serve HTTP-proxy callback for test_proxy.py (RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=late_proxy:middlewares):
aotcuda's own middleware, and inside it one that holds each POST body for LATE_BODY_DELAY_S seconds before the
proxy may hand it to the replica, as a busy proxy delays the replica's fetch (issue 26). The client's sending
is not delayed."""

from __future__ import annotations

import asyncio
import os

from starlette.middleware import Middleware

from aotcuda.serving import proxy

DELAY_VARIABLE = "LATE_BODY_DELAY_S"


class LateHandOver:
    def __init__(self, app, *, delay_s: float):
        self.app, self.delay_s = app, delay_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        first = True

        async def late_receive():
            nonlocal first
            if first:
                first = False
                await asyncio.sleep(self.delay_s)
            return await receive()

        await self.app(scope, late_receive, send)


def middlewares() -> list[Middleware]:
    # Ray's proxy wraps its app in each in turn: the last is outermost, and reads the client's body first
    return [Middleware(LateHandOver, delay_s=float(os.environ[DELAY_VARIABLE])), *proxy.middlewares()]
