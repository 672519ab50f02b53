"""uvicorn's h11 protocol with the read timeouts it lacks, and a cap on open connections.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) and caps the size of a
request head (``h11_max_incomplete_event_size``), but a client that sends its request line and
headers a byte at a time holds a connection for as long as it likes. Here a connection whose
request head is not complete within ``header_timeout_s`` of its opening (or of the previous
answer) is answered ``408`` and closed; a connection beyond ``max_connections`` is answered
``503`` with ``Retry-After`` and closed. Bodies are timed by ``limits.BodyLimits``.
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.h11_impl import H11Protocol

from layoutopt.service.problems import ErrorBody, item


def _raw_response(status: int, reason: str, type_: str, message: str, headers: dict[str, str] | None = None) -> bytes:
    body = json.dumps(ErrorBody(detail=[item(type_, ["request"], None, message, message)]).model_dump(mode="json"))
    lines = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(body)}",
             "connection: close", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


def guarded_protocol(header_timeout_s: float, max_connections: int, retry_after_s: int) -> type[H11Protocol]:
    """An ``H11Protocol`` class (for ``uvicorn.Config(http=...)``) with these limits."""

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                self.transport.write(_raw_response(503, "Service Unavailable", "busy",
                                                   f"more than {max_connections} connections open; retry later",
                                                   {"retry-after": str(retry_after_s)}))
                self.transport.close()
                return
            self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
                return  # closed already, or a request is being served (its body has its own timeout)
            self.transport.write(_raw_response(
                408, "Request Timeout", "request_timeout",
                f"the request line and headers did not arrive within {header_timeout_s:g} s"))
            self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._cancel_head_timer()  # the head is complete: the application has the request

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()  # the next request on this connection gets the same time

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

    return GuardedH11Protocol


__all__ = ["guarded_protocol"]
