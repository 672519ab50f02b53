"""The HTTP service (FastAPI on uvicorn) over the Python API: ``layoutopt serve``."""

from layoutopt.service.app import create_app
from layoutopt.service.server import BackgroundServer, serve
from layoutopt.service.settings import ServiceSettings

__all__ = ["BackgroundServer", "ServiceSettings", "create_app", "serve"]
