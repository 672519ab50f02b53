"""ASGI middleware that caps request bodies in size (413) and in the time they take to arrive (408).

It reads the body before the application does, so a body without ``Content-Length`` (chunked)
is capped as well; the body is then handed on unchanged. An oversized body up to
``DRAIN_FACTOR`` times the cap is read and dropped before the 413 is sent, so a client still
sending it reads the answer instead of a reset connection; beyond that the connection is
answered at once and closed. A body not complete within ``body_timeout_s`` gets 408.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from layoutopt.service.problems import ServiceError, item

DRAIN_FACTOR = 16
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _TooLarge(Exception):
    def __init__(self, size: int):
        self.size = size


class BodyLimits:
    def __init__(self, app: Callable[..., Awaitable[None]], max_body_bytes: int, body_timeout_s: float):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_drain_bytes = DRAIN_FACTOR * max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def _answer(self, send: Send, error: ServiceError) -> None:
        response = error.response()
        response.headers["connection"] = "close"
        await response({"type": "http"}, _no_receive, send)

    def _too_large(self, size: int | str) -> ServiceError:
        return ServiceError(413, [item("body_too_large", ["body"], f"{size} bytes",
                                       f"a request body of at most {self.max_body_bytes} bytes",
                                       f"body: larger than {self.max_body_bytes} bytes")])

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None when the client went away; raises ``_TooLarge``."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_drain_bytes:
                raise _TooLarge(size)
            if size <= self.max_body_bytes:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        if size > self.max_body_bytes:
            raise _TooLarge(size)
        return b"".join(chunks)

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_drain_bytes:
            await self._answer(send, self._too_large(int(declared)))
            return
        try:
            async with asyncio.timeout(self.body_timeout_s):
                body = await self._read(receive)
        except _TooLarge as error:
            await self._answer(send, self._too_large(f"over {error.size}" if error.size > self.max_body_bytes
                                                     else error.size))
            return
        except TimeoutError:
            await self._answer(send, ServiceError(408, [item(
                "request_timeout", ["body"], None, f"a body that arrives within {self.body_timeout_s:g} s",
                f"body: not received within {self.body_timeout_s:g} s")]))
            return
        if body is None:
            return  # the client went away before sending its body
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}
