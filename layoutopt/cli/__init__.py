"""The ``layoutopt`` command line: parse arguments, call :mod:`layoutopt.api`, render.

Each command lives in its own module of this package and is registered below. Errors a user can
cause (``InputError``, pydantic validation errors, unreadable files) become one line on stderr and
exit status 2; an infeasible problem exits with status 1.
"""

from __future__ import annotations

import sys

import click

from layoutopt import __version__
from layoutopt.cli.common import run_guarded


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="layoutopt")
def cli() -> None:
    """Find the LLM serving layout that maximizes goodput per dollar under TTFT/TPOT SLOs."""


# Command modules of this package; each exposes a click command named ``command``.
COMMAND_MODULES = ("catalog", "estimate", "solve", "simulate", "emit", "check_bench", "sweep", "serve", "calibrate")


def _register() -> None:
    import importlib

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"layoutopt.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"layoutopt.cli.{name}":
                continue  # command not built yet
            raise
        cli.add_command(module.command)


_register()


def main() -> None:
    """Console-script entry point."""
    sys.exit(run_guarded(cli))
