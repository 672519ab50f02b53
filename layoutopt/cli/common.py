"""Helpers every command shares: error rendering, output formats, file writing."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import click
from pydantic import BaseModel, ValidationError

from layoutopt.errors import InfeasibleError, InputError, LayoutoptError

EXIT_INFEASIBLE = 1
EXIT_BAD_INPUT = 2

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


def run_guarded(command: Callable[..., Any]) -> int:
    """Run a click command, turning expected errors into one line and an exit status."""
    try:
        result = command.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.UsageError as error:
        # One line, like every other input error, with where to look for the allowed values.
        command_path = error.ctx.command_path if error.ctx else "layoutopt"
        click.echo(f"error: {error.format_message()} (see '{command_path} --help')", err=True)
        return EXIT_BAD_INPUT
    except click.ClickException as error:
        error.show()
        return error.exit_code
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
        click.echo(f"error: {error.filename or ''}: {error.strerror or error}", err=True)
        return EXIT_BAD_INPUT
    # With standalone_mode=False click returns the code of a ctx.exit(n) instead of raising.
    return result if isinstance(result, int) else 0


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def echo_json(value: Any) -> None:
    click.echo(json.dumps(to_jsonable(value), indent=2))


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a failure never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
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
