"""Run the service: in the foreground (``layoutopt serve``) or in a background thread (tests, benchmarks).

Both run uvicorn with the service's read timeouts: ``timeout_keep_alive`` for idle connections,
``h11_max_incomplete_event_size`` for request heads, and the guarded h11 protocol
(``protocol.py``) for heads that arrive too slowly and for too many connections.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from layoutopt.service.app import create_app
from layoutopt.service.protocol import guarded_protocol
from layoutopt.service.settings import ServiceSettings, default_max_workers

STARTUP_TIMEOUT_S = 60.0


def uvicorn_options(settings: ServiceSettings) -> dict[str, Any]:
    """The ``uvicorn.Config`` options that enforce ``settings``' connection limits."""
    return {
        "http": guarded_protocol(settings.header_timeout_s, settings.max_connections, settings.retry_after_s),
        "timeout_keep_alive": settings.keep_alive_timeout_s,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        "timeout_graceful_shutdown": 5,
    }


def serve(host: str = "127.0.0.1", port: int = 8000, settings: ServiceSettings | None = None,
          log_level: str = "info") -> None:
    """Serve until interrupted."""
    import uvicorn

    settings = settings or ServiceSettings(max_workers=default_max_workers())
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level, **uvicorn_options(settings))


class BackgroundServer:
    """Serve ``app`` on loopback at a free port in a daemon thread; stop it on exit.

        with BackgroundServer(create_app()) as server:
            urllib.request.urlopen(server.url + "/healthz")
    """

    def __init__(self, app, host: str = "127.0.0.1", settings: ServiceSettings | None = None):
        import uvicorn

        settings = settings or app.state.service.settings
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))  # the kernel picks a free port; no race with other tests
        self.host, self.port = self._socket.getsockname()[:2]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", **uvicorn_options(settings))
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"layoutopt-serve-{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the service did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=15)
        self._socket.close()

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
