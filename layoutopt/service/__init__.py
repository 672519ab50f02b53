"""The HTTP service (FastAPI on uvicorn) over the Python API: ``layoutopt serve``."""

from layoutopt.service.app import ServiceSettings, create_app
from layoutopt.service.server import BackgroundServer, serve

__all__ = ["BackgroundServer", "ServiceSettings", "create_app", "serve"]
