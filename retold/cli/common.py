"""What every ``retold`` command shares: the common options, the event loop, JSON output.

Kept apart from the commands so each command module stays one library call plus its
printing, and so a library error becomes the same one-line message and exit status
whichever command raised it. Long commands (extract, reembed, erase, retain, expire,
snapshot, migrate) run through :func:`operation`, so they all draw the same progress bar,
end with one summary line and answer ``--json`` with one object, errors included.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import click

from retold.errors import (
    ConfigError,
    InvalidArgumentError,
    MissingExtraError,
    NotFoundError,
    RetoldError,
    StoreError,
)
from retold.models import Scope
from retold.runtime import missing_store_file

if TYPE_CHECKING:
    from rich.progress import Progress as ProgressBar

    from retold.store import Store

__all__ = [
    "CommandFailed",
    "Operation",
    "StoreCreation",
    "common_options",
    "echo_json",
    "json_option",
    "jsonable",
    "operation",
    "parse_scope",
    "refuse_missing_store",
    "reported_errors",
    "resolve_record",
    "run_async",
]

T = TypeVar("T")


def run_async(coro: Awaitable[T]) -> T:
    """Run a short command's library call; retold errors become a clean exit."""
    with reported_errors(as_json=False):
        return asyncio.run(coro)  # type: ignore[arg-type]


# What a command does with a --store that names no SQLite file: refuse (every command that only
# reads or changes a store), create it (migrate), or create it only when --create is given.
StoreCreation = Literal["refuse", "create", "flag"]


def refuse_missing_store(store_path: str) -> None:
    """A missing SQLite file is a mistyped path, not an empty memory: one error line, nothing made.

    Opening it would create an empty store (file, -wal and -shm), and the command would then
    report that memory as clean or empty. A ``postgresql://`` URL is left to the server: a
    database that does not exist is its error (retold never creates one).
    """
    missing = missing_store_file(store_path)
    if missing is not None:
        raise StoreError(
            f"no store at {str(missing)!r}: the file does not exist, and nothing was created "
            f"(`retold migrate --store {missing!s}` creates a new store)"
        )


def store_options(func: Callable[..., Any] | None = None, *, missing: StoreCreation = "refuse") -> Any:
    """--store and --config: which store, under which settings.

    ``missing`` says what a --store naming no SQLite file does (see :data:`StoreCreation`);
    with ``"flag"`` the command gets a ``--create`` option. The check runs before the
    command's body, so a refused path leaves no file, no -wal/-shm and no directory behind.
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
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
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            create = kwargs.pop("create", False) if missing == "flag" else missing == "create"
            if not create:
                with reported_errors(bool(kwargs.get("as_json", False))):
                    refuse_missing_store(kwargs["store_path"])
            return command(*args, **kwargs)

        if missing == "flag":
            return click.option(
                "--create", is_flag=True, help="Create the store when --store names no file yet."
            )(wrapper)
        return wrapper

    return decorate(func) if func is not None else decorate


def common_options(func: Callable[..., Any] | None = None, *, missing: StoreCreation = "refuse") -> Any:
    """--store, --config and --as on every command (spec §16); ``missing`` as for :func:`store_options`."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @store_options(missing=missing)
        @click.option(
            "--as",
            "actor",
            default="admin",
            show_default=True,
            help="Operator identity recorded on audit events.",
        )
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return command(*args, **kwargs)

        return wrapper

    return decorate(func) if func is not None else decorate


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


# --- --json, progress and the summary line --------------------------------------------------------

# The "error" of a --json refusal: the first class that matches (subclasses come first).
_ERROR_CODES: tuple[tuple[type[RetoldError], str], ...] = (
    (NotFoundError, "not_found"),
    (InvalidArgumentError, "invalid"),
    (ConfigError, "config"),
    (MissingExtraError, "missing_extra"),
    (StoreError, "store"),
)


class CommandFailed(click.ClickException):
    """A run that ended without doing its job: an ``Error:`` line, or the error of the --json object.

    ``code`` is the ``error`` a script matches on; ``exit_code`` keeps each command's status;
    ``extra`` adds fields to the --json object (``matches`` of an ambiguous short id).
    """

    def __init__(
        self, message: str, *, code: str, exit_code: int = 1, extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code
        self.extra = dict(extra or {})


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--json`` (as ``as_json``): one object on stdout, for scripts."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON object (the result, or the error) instead of text.",
    )(func)


@contextmanager
def reported_errors(as_json: bool) -> Iterator[None]:
    """Refusals raised inside leave as one ``Error:`` line, or under --json as one object.

    ``{"ok": false, "error": <code>, "message": ...}`` on stdout with the same exit status
    as the text form, so a script parses stdout whatever happened. Click's own parsing
    errors happen before a command runs and stay text (exit 2).
    """
    try:
        yield
    except RetoldError as exc:
        if not as_json:
            raise click.ClickException(str(exc)) from exc
        code = next((c for kind, c in _ERROR_CODES if isinstance(exc, kind)), "error")
        _fail_json(code, str(exc), 1, exc)
    except click.ClickException as exc:
        if not as_json:
            raise
        extra: dict[str, Any] = {}
        if isinstance(exc, CommandFailed):
            code, extra = exc.code, exc.extra
        else:
            code = "usage" if isinstance(exc, click.UsageError) else "failed"
        _fail_json(code, exc.format_message(), exc.exit_code, exc, extra)


def _fail_json(
    code: str, message: str, exit_code: int, cause: BaseException, extra: dict[str, Any] | None = None
) -> NoReturn:
    echo_json({"ok": False, "error": code, "message": message, **(extra or {})})
    raise SystemExit(exit_code) from cause


async def resolve_record(store: Store, ref: str) -> str:
    """The one record ``ref`` names anywhere in the store: a full id or the 12-character short id.

    Read as the memory tools read an id (``MemoryTools._resolve``): surrounding blanks and the
    brackets results print around a short id are dropped, and an id in capitals is tried
    again in lower case. The operator reads the whole store, so no scope narrows the match.
    An unknown id is ``not_found``; a short id naming several records is ``ambiguous_id``,
    listing them (``matches``), and changes nothing. Both exit 1.
    """
    text = ref.strip().strip("[]").strip()
    found = await store.record_ids_named(text)
    if not found and text != text.lower():
        found = await store.record_ids_named(text.lower())
    if not found:
        raise NotFoundError(
            f"no record {ref.strip()[:80]!r} (give a full record id or its 12-character short id)"
        )
    if len(found) > 1:
        raise CommandFailed(
            f"short id {text!r} names {len(found)} records ({', '.join(found)}); give the full id",
            code="ambiguous_id",
            extra={"matches": found},
        )
    return found[0]


def _stderr_is_terminal() -> bool:
    """Only a person watching gets a bar; logs and pipes would keep its redraws as garbage."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def _progress_bar(label: str) -> ProgressBar:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # transient: the bar goes when the run ends, leaving the summary line (or the error) alone.
    # stdout stays the command's own (only the summary or the JSON object goes there).
    console = Console(stderr=True, force_terminal=True)
    return Progress(*columns, console=console, transient=True, redirect_stdout=False)


class Operation:
    """One long command's run: a bar on a terminal's stderr, then one summary line or one JSON object.

    Pass :meth:`progress` as the library call's ``progress`` callback; without one the bar
    pulses until the call returns. Built by :func:`operation`, which also reports errors.
    """

    def __init__(self, label: str, as_json: bool) -> None:
        self.as_json = as_json
        self._started = time.perf_counter()
        self._bar = None if as_json or not _stderr_is_terminal() else _progress_bar(label)
        self._task = None if self._bar is None else self._bar.add_task(label, total=None)

    def progress(self, done: int, total: int) -> None:
        """``progress(done, total)`` for the library call; a no-op when no bar is drawn."""
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=total)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run the library call with the bar live; :func:`operation` reports what it raises."""
        if self._bar is None:
            return asyncio.run(coro)
        with self._bar:
            return asyncio.run(coro)

    def finish(
        self,
        result: Any,
        summary: str,
        *,
        details: Iterable[str] = (),
        note: str | None = None,
        failure: CommandFailed | None = None,
    ) -> None:
        """Print the outcome, then raise ``failure`` (its exit status) if the run did not do its job.

        Text: the ``details`` lines, then ``summary`` with the elapsed time as the last line
        of stdout, and ``note`` on stderr. --json: one object, ``ok``, the fields of
        ``result`` (a mapping or a dataclass) and ``elapsed_s``, plus ``error`` and
        ``message`` on a failure.
        """
        elapsed = time.perf_counter() - self._started
        if self.as_json:
            fields = {"ok": failure is None, **jsonable(result), "elapsed_s": round(elapsed, 3)}
            if failure is not None:
                fields |= {"error": failure.code, "message": failure.message}
            echo_json(fields)
            if failure is not None:
                raise SystemExit(failure.exit_code)
            return
        for line in details:
            click.echo(line)
        click.echo(f"{summary} in {elapsed:.1f} s")
        if note:
            click.echo(note, err=True)
        if failure is not None:
            raise failure


@contextmanager
def operation(label: str, as_json: bool) -> Iterator[Operation]:
    """``with operation("expiring", as_json) as op:`` around a long command's body.

    ``label`` names the bar. Errors raised in the block are reported by
    :func:`reported_errors`, so under --json even a refusal is one object.
    """
    with reported_errors(as_json):
        yield Operation(label, as_json)
