"""Helpers every command shares: error rendering, output formats, file writing."""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import click
from pydantic import BaseModel, ValidationError

from layoutopt.bounds import MAX_INSTANCES, MAX_RATE_RPS, MAX_SEED, MIN_RATE_RPS, MAX_SIM_REQUESTS, MAX_TOKENS
from layoutopt.errors import InfeasibleError, InputError, LayoutoptError
from layoutopt.io_safe import dumps_json

EXIT_INFEASIBLE = 1
EXIT_BAD_INPUT = 2


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan``, ``inf`` and ``-inf`` (which FloatRange lets through)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


# Option types with the bounds of layoutopt.bounds, shared by every command.
TOKENS = click.IntRange(1, MAX_TOKENS)
RATE_RPS = FiniteFloatRange(min=MIN_RATE_RPS, max=MAX_RATE_RPS)
POSITIVE_FINITE = FiniteFloatRange(min=0, min_open=True)
SIM_REQUESTS = click.IntRange(1, MAX_SIM_REQUESTS)
SEED = click.IntRange(0, MAX_SEED)
INSTANCES = click.IntRange(1, MAX_INSTANCES)

format_option = click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True,
    help="table for people, json for programs",
)


def validation_message(error: ValidationError, prefix: str = "") -> str:
    """One readable line from a pydantic error: 'field.path: message (got value)'."""
    parts = []
    for item in error.errors():
        loc = ".".join(str(p) for p in item.get("loc", ()) if p not in ("function-after",))
        field = ".".join(p for p in (prefix, loc) if p) or "input"
        msg = item.get("msg", "invalid value").removeprefix("Value error, ")
        got = item.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
        parts.append(f"{field}: {msg}{shown}")
    return "; ".join(parts)


REPORT_TO = "the layoutopt maintainers"
EXIT_INTERNAL_ERROR = 3
EXIT_ABORTED = 130  # interrupted (Ctrl-C), as shells report SIGINT
DEBUG_ENV = "LAYOUTOPT_DEBUG"


def run_guarded(command: Callable[..., Any], args: list[str] | None = None) -> int:
    """Run a click command and return its exit status; the one place exceptions become statuses.

    0: a plan (or the command's result); 1: infeasible; 2: bad input (one line naming the
    field, the value and what is allowed); 3: an internal error, shown as one line asking for a
    report, with the traceback only when ``LAYOUTOPT_DEBUG=1``; 130: interrupted. ``args``
    defaults to ``sys.argv[1:]``.
    """
    try:
        result = command.main(args=args, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_ABORTED
    except click.UsageError as error:
        # One line, like every other input error, with where to look for the allowed values.
        command_path = error.ctx.command_path if error.ctx else "layoutopt"
        click.echo(f"error: {error.format_message()} (see '{command_path} --help')", err=True)
        return EXIT_BAD_INPUT
    except click.ClickException as error:
        # click.Path(exists=True) and friends: a file the user named cannot be used
        click.echo(f"error: {error.format_message()}", err=True)
        return EXIT_BAD_INPUT
    except click.exceptions.Exit as done:
        return done.exit_code
    except InfeasibleError as error:
        click.echo(f"infeasible: {error}", err=True)
        for reason in error.reasons:
            click.echo(f"  - {reason}", err=True)
        return EXIT_INFEASIBLE
    except InputError as error:
        click.echo(f"error: {error}", err=True)
        return EXIT_BAD_INPUT
    except ValidationError as error:
        click.echo(f"error: {validation_message(error)}", err=True)
        return EXIT_BAD_INPUT
    except LayoutoptError as error:
        click.echo(f"error: {error}", err=True)
        return EXIT_BAD_INPUT
    except OSError as error:
        shown = _users_path(error.filename) if error.filename else ""
        click.echo(f"error: {shown}: {error.strerror or type(error).__name__}", err=True)
        return EXIT_BAD_INPUT
    except Exception as error:  # noqa: BLE001 - the last line of defence: never a traceback
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        click.echo(internal_error_line(error), err=True)
        return EXIT_INTERNAL_ERROR
    # With standalone_mode=False click returns the code of a ctx.exit(n) instead of raising.
    return result if isinstance(result, int) else 0


# Temporary names writers use next to their target: mkstemp's '.NAME.<random>.tmp' and 'NAME.tmp-<random>'.
_TEMP_NAMES = (re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]{6,}\.tmp$"), re.compile(r"^(?P<name>.+)\.tmp-[A-Za-z0-9_]+$"))


def _users_path(filename: object) -> str:
    """``filename`` with any temporary file or folder name replaced by the name the user gave."""
    parts = []
    for part in str(filename).split(os.sep):
        for pattern in _TEMP_NAMES:
            match = pattern.match(part)
            if match:
                part = match.group("name")
                break
        parts.append(part)
    return os.sep.join(parts)


def internal_error_line(error: BaseException) -> str:
    """The one line shown for an unexpected exception (a bug of layoutopt, not of the input)."""
    detail = str(error).splitlines()[0][:200] if str(error) else ""
    what = type(error).__name__ + (f": {detail}" if detail else "")
    return (f"internal error: {what} (please report it with the command line to {REPORT_TO}; "
            f"{DEBUG_ENV}=1 shows the traceback)")


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def json_text(value: Any) -> str:
    """Standard JSON of ``value`` (pydantic models dumped): a non-finite number is null, listed under
    ``non_finite_values`` (see :func:`layoutopt.io_safe.dumps_json`), never ``Infinity`` or ``NaN``."""
    return dumps_json(to_jsonable(value))


def echo_json(value: Any) -> None:
    click.echo(json_text(value))


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a failure never leaves a half-written file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise InputError("output", str(path), "a path in a writable folder", error.strerror or str(error)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as error:
        # name the user's file, never the temporary one beside it
        Path(tmp).unlink(missing_ok=True)
        raise InputError("output", str(path), "a writable file path", error.strerror or str(error)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def simple_table(title: str, columns: list[tuple[str, str]]):
    """A compact rich table; ``columns`` are (header, justify) pairs."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)
    return table


def console():
    """A rich console on stdout (no colour when not a terminal)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=max(100, Console().width))


def fail(field: str, value: object, allowed: str) -> None:
    raise InputError(field, value, allowed)


def stderr(message: str) -> None:
    print(message, file=sys.stderr)
