"""Hostile input to `retold ui`: unknown or malformed ids are 404, bad parameters 400, never a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .slow import examples
from .ui_world import Facts, client, populate


@pytest.fixture
def world(store_location: Any) -> tuple[Path | str, Facts]:
    path = store_location("ui.sqlite")
    return path, populate(path)


def test_unknown_and_malformed_ids_are_404_pages(world: tuple[Path | str, Facts]) -> None:
    path, facts = world
    with client(path) as c:
        for url in (
            "/records/%00",
            "/records/" + "x" * 500,
            "/records/01900000-0000-7000-8000-000000000000",
            "/records/" + facts.ids["detailed"][-12:],  # a short id is not a page address
            "/records/%E2%80%AE",
            "/entities/%0a",
            "/entities/" + facts.ids["detailed"],  # a record id is not an entity
            "/scopes/planet/x",
            "/scopes/user/%00",
            "/scopes/user/nobody-has-this",
            "/sessions/a/b/c",
            "/sessions/planner/u1/%00",
            "/sessions/planner/u2/s1",  # the session id exists, for another owner
            "/searches/zzz",
            "/searches/" + facts.ids["detailed"],
            "/nowhere",
        ):
            answer = c.get(url)
            assert answer.status_code == 404, (url, answer.status_code)
            assert "Not found" in answer.text and "<!doctype html>" in answer.text


def test_bad_parameters_are_400_pages_that_name_them(world: tuple[Path | str, Facts]) -> None:
    path, facts = world
    search = f"/searches/{facts.searches['found']}"
    with client(path) as c:
        for url, params, named in (
            ("/audit", {"page": "0"}, "page"),
            ("/sessions", {"page": "1" * 30}, "page"),
            ("/entities", {"kind": "planet"}, "kind"),
            ("/scopes/user/u1", {"status": "bogus"}, "status"),
            ("/", {"as": "nobody"}, "as must be"),
            ("/", {"as": "a/b/c"}, "as:"),
            ("/audit", {"kind": "record\x00created"}, "kind"),
            ("/audit", {"actor": "a" * 300}, "actor"),
            (search, {"replay": "1", "dense.semantic": "abc"}, "dense.semantic"),
            (search, {"replay": "1", "dense.semantic": "nan"}, "dense.semantic"),
            (search, {"replay": "1", "dense.semantic": "2"}, "retrieval.gate.dense_floor.semantic"),
            (search, {"replay": "1", "lexical_min_matched_terms": "0.5"}, "lexical_min_matched_terms"),
        ):
            answer = c.get(url, params=params)
            assert answer.status_code == 400, (url, params, answer.status_code)
            assert named in answer.text, (url, params, answer.text[-300:])


_TEXT = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60),
    st.sampled_from(
        ["", "0", "-1", "1e999", "nan", "inf", "9" * 40, "\x00", "../..", "%00", "a/b", "planner/u1",
         "helper/u2", "user:u1", "agent:planner/u1", "1", "yes", "<script>", "'; DROP TABLE records; --"]
    ),
)  # fmt: skip
_PARAMS = st.dictionaries(
    st.sampled_from(
        ["as", "page", "status", "kind", "actor", "replay", "dense.semantic", "dense.episodic",
         "lexical_min_matched_terms", "relative_floor", "token", "k", "target", "done"]
    ),
    _TEXT,
    max_size=4,
)  # fmt: skip
_PATHS = st.sampled_from(
    ["/records/{0}", "/records/{0}/forget", "/entities/{0}", "/scopes/{0}/{1}", "/scopes/user/{0}",
     "/sessions/{0}/{1}/{2}", "/searches/{0}", "/{0}", "/", "/audit", "/entities", "/plots", "/search",
     "/searches", "/sessions", "/erase"]
)  # fmt: skip


@pytest.fixture
def browsing(world: tuple[Path | str, Facts]) -> Iterator[tuple[Any, Facts]]:
    """One in-process client for every example (the runtime opens once)."""
    path, facts = world
    with client(path) as c:
        yield c, facts


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_no_path_or_parameter_gives_a_server_error(browsing: tuple[Any, Facts], data: st.DataObject) -> None:
    c, facts = browsing
    known = [*facts.ids.values(), *facts.searches.values(), *facts.entities.values()]
    segment = st.one_of(_TEXT, st.sampled_from(known)).map(lambda s: quote(s, safe=""))
    template = data.draw(_PATHS)
    url = template.format(*(data.draw(segment) for _ in range(3)))
    params = data.draw(_PARAMS)
    method = data.draw(st.sampled_from(["GET", "GET", "GET", "POST"]))
    answer = c.request(method, url, params=params if method == "GET" else None,
                       data=params if method == "POST" else None)  # fmt: skip
    assert answer.status_code < 500, (method, url, params, answer.status_code, answer.text[-500:])
