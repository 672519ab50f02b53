"""layoutopt: serving layouts for large language models that maximize goodput per dollar.

The public Python API lives in :mod:`layoutopt.api`; its main entry points are re-exported
here lazily so that ``import layoutopt`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

_API_NAMES = ("solve", "estimate", "simulate", "sweep")


def __getattr__(name: str):
    if name in _API_NAMES:
        from layoutopt import api

        return getattr(api, name)
    raise AttributeError(f"module 'layoutopt' has no attribute {name!r}")
