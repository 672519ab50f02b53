"""Run the service: in the foreground (``layoutopt serve``) or in a background thread (tests, benchmarks)."""

from __future__ import annotations

import socket
import threading
import time

from layoutopt.service.app import ServiceSettings, create_app

STARTUP_TIMEOUT_S = 60.0


def serve(host: str = "127.0.0.1", port: int = 8000, settings: ServiceSettings | None = None,
          log_level: str = "info") -> None:
    """Serve until interrupted."""
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)


class BackgroundServer:
    """Serve ``app`` on loopback at a free port in a daemon thread; stop it on exit.

        with BackgroundServer(create_app()) as server:
            urllib.request.urlopen(server.url + "/healthz")
    """

    def __init__(self, app, host: str = "127.0.0.1"):
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))  # the kernel picks a free port; no race with other tests
        self.host, self.port = self._socket.getsockname()[:2]
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5, lifespan="on")
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
