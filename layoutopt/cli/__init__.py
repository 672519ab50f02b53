"""The ``layoutopt`` command line: parse arguments, call :mod:`layoutopt.api`, render.

Each command lives in its own module of this package, named in ``COMMAND_MODULES`` and imported
when the command runs (or when ``--help`` lists them): ``layoutopt solve`` does not pay for the
imports of the simulator, the sweep or the service. Errors a user can cause (``InputError``,
pydantic validation errors, unreadable files) become one line on stderr and exit status 2; an
infeasible problem exits with status 1.
"""

from __future__ import annotations

import importlib
import sys

import click

from layoutopt import __version__
from layoutopt.cli.common import run_guarded

# Command name -> module of this package that defines it as a click command named ``command``.
COMMAND_MODULES = {"catalog": "catalog", "estimate": "estimate", "solve": "solve", "simulate": "simulate",
                   "emit": "emit", "check-bench": "check_bench", "sweep": "sweep", "serve": "serve",
                   "calibrate": "calibrate"}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module on first use (click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            self.add_command(importlib.import_module(f"layoutopt.cli.{COMMAND_MODULES[cmd_name]}").command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="layoutopt")
def cli() -> None:
    """Find the LLM serving layout that maximizes goodput per dollar under TTFT/TPOT SLOs."""


def main() -> None:
    """Console-script entry point."""
    sys.exit(run_guarded(cli))
