"""ASGI middleware that caps the size of request bodies (413 Payload Too Large beyond the cap).

It reads the body before the application does, so a body without ``Content-Length`` (chunked)
is capped as well; the body is then handed on unchanged. An oversized body up to
``DRAIN_FACTOR`` times the cap is read and dropped before the 413 is sent; beyond that the
connection is answered at once and closed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

DRAIN_FACTOR = 16
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodySizeLimit:
    def __init__(self, app: Callable[..., Awaitable[None]], max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes
        # A body somewhat over the cap is read to its end before the 413, so a client still
        # sending it reads the answer instead of a reset connection; a far larger one is cut off.
        self.max_drain_bytes = DRAIN_FACTOR * max_body_bytes

    async def _too_large(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body larger than {self.max_body_bytes} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_drain_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away; the application sees an empty body
            size += len(message.get("body", b""))
            if size > self.max_drain_bytes:
                break
            if size <= self.max_body_bytes:
                chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        if size > self.max_body_bytes:
            await self._too_large(send)
            return
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
