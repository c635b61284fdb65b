"""Suite-wide guards: no telemetry, no model hub, and no silent skips."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LANGSMITH_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    # The ONNX export of the packaged model (embedding.backend auto), made once per checkout
    # (`make test` makes it first), not in the user's home.
    "RETOLD_CACHE_DIR": str(Path(__file__).resolve().parent.parent / ".cache" / "retold"),
}.items():
    os.environ.setdefault(_key, _value)


def _backends() -> list[str]:
    """``RETOLD_TEST_BACKENDS=sqlite,postgresql`` (default: both) picks what ``store_path`` opens."""
    return [
        b.strip() for b in os.environ.get("RETOLD_TEST_BACKENDS", "sqlite,postgresql").split(",") if b.strip()
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that opens a store (``store``, ``store_path``, ``world``) runs on each backend.

    ``@pytest.mark.sqlite_only(reason)`` keeps a test of SQLite's own machinery on SQLite.
    """
    if "backend" not in metafunc.fixturenames:
        return
    backends = _backends()
    marker = metafunc.definition.get_closest_marker("sqlite_only")
    if marker is not None:
        if not marker.args:
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: sqlite_only needs a reason")
        backends = [b for b in backends if b == "sqlite"] or ["sqlite"]
    metafunc.parametrize("backend", backends, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The store backend a conformance test runs on (see :func:`pytest_generate_tests`)."""
    return str(request.param)


@pytest.fixture
def store_location(tmp_path: Path, backend: str) -> Callable[[str], Path | str]:
    """``store_location("name.sqlite")``: a new store location on this test's backend.

    A SQLite file under ``tmp_path``, or the URL of a fresh PostgreSQL database (the name
    is ignored there: every call gives a database of its own).
    """

    def location(name: str) -> Path | str:
        if backend == "postgresql":
            from tests.postgres_server import fresh_database

            return fresh_database()
        return tmp_path / name

    return location


@pytest.fixture(autouse=True)
def _drop_test_databases() -> Iterator[None]:
    """The PostgreSQL databases a test made go when it ends (after its other fixtures)."""
    yield
    import sys

    server = sys.modules.get("tests.postgres_server")
    if server is not None:
        server.drop_databases()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A skipped test is a test that did not run: fail the run instead of passing quietly.

    A missing optional dependency must break the suite, not shrink it. Set
    RETOLD_ALLOW_SKIPS=1 to look at a partial run locally. The embedded PostgreSQL server
    stops here too, in each xdist worker, which ends without running ``atexit``.
    """
    import sys

    server = sys.modules.get("tests.postgres_server")
    if server is not None:
        server.stop()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped and os.environ.get("RETOLD_ALLOW_SKIPS") != "1" and exitstatus == 0:
        if reporter:
            reporter.write_line(f"FAILED: {skipped} test(s) were skipped; retold's suite allows no skips.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say so when RETOLD_SLOW_TESTS=1 scales the property and fuzz tests (tests/unit/slow.py)."""
    if os.environ.get("RETOLD_SLOW_TESTS") == "1":
        return "RETOLD_SLOW_TESTS=1: property and fuzz tests run at least 10,000 examples each"
    return None


if os.environ.get("RETOLD_SLOW_TESTS") == "1":
    from hypothesis import settings as _hypothesis_settings

    # A failure deep in a 10,000-example run must be replayable: print its reproduction blob.
    _hypothesis_settings.register_profile("retold-slow", deadline=None, print_blob=True)
    _hypothesis_settings.load_profile("retold-slow")
