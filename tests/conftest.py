"""Suite-wide guards: no telemetry, no model hub, and no silent skips."""

from __future__ import annotations

import os

import pytest

for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LANGSMITH_TRACING": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}.items():
    os.environ.setdefault(_key, _value)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A skipped test is a test that did not run: fail the run instead of passing quietly.

    A missing optional dependency must break the suite, not shrink it. Set
    RETOLD_ALLOW_SKIPS=1 to look at a partial run locally.
    """
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
