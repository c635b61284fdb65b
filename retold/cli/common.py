"""What every ``retold`` command shares: the common options, the event loop, JSON output.

Kept apart from the commands so each command module stays one library call plus its
printing, and so a library error becomes the same one-line message and exit status
whichever command raised it.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any, TypeVar

import click

from retold.errors import RetoldError
from retold.models import Scope

__all__ = ["common_options", "echo_json", "jsonable", "parse_scope", "run_async"]

T = TypeVar("T")


def run_async(coro: Awaitable[T]) -> T:
    """The one place the CLI runs the event loop; retold errors become a clean exit."""
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except RetoldError as exc:
        raise click.ClickException(str(exc)) from exc


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--store, --config and --as on every command (spec §16)."""

    @click.option(
        "--store",
        "store_path",
        default="./memory.sqlite",
        show_default=True,
        envvar="RETOLD_STORE",
        type=click.Path(dir_okay=False),
        help="The SQLite store file, or a postgresql:// URL ($RETOLD_STORE).",
    )
    @click.option(
        "--config",
        "config_path",
        default=None,
        type=click.Path(exists=True, dir_okay=False),
        help="YAML config file; the defaults apply without one.",
    )
    @click.option(
        "--as",
        "actor",
        default="admin",
        show_default=True,
        help="Operator identity recorded on audit events.",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


def jsonable(value: Any) -> Any:
    """Library results are dataclasses with datetimes; json.dumps takes neither."""
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def echo_json(value: Any) -> None:
    """Indented and unescaped, because an operator reads it."""
    click.echo(json.dumps(jsonable(value), indent=2, ensure_ascii=False))


def parse_scope(text: str) -> Scope:
    """A malformed scope is the caller's typo: a usage error (exit 2), not a library failure."""
    try:
        return Scope.parse(text)
    except RetoldError as exc:
        raise click.BadParameter(str(exc)) from exc
