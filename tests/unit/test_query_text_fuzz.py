"""Whatever text a caller sends, the query-reading stages answer and never raise."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from retold.retrieve.query_focus import without_mentions
from retold.retrieve.query_kind import about_self, asks
from retold.retrieve.time_window import query_windows

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
WORDS = st.sampled_from(
    ["What", "did", "Nate", "Nate's", "on", "May", "8,", "2022", "last", "week", "since", "March", "?", "I",
     "want", "wow!", "in", "October", "2023.", "yesterday", "ago", "3", "years", "’s", "\n", "Ünïcode",
     "my", "you"]
)  # fmt: skip
TEXT = st.one_of(st.text(max_size=300), st.lists(WORDS, max_size=40).map(" ".join))


@settings(max_examples=300, deadline=None)
@given(queries=st.lists(TEXT, max_size=3), aliases=st.sets(st.text(max_size=20), max_size=4))
def test_query_stages_accept_any_text(queries: list[str], aliases: set[str]) -> None:
    assert isinstance(asks(queries), bool)
    # A question about the searcher asks (the gate relies on it: such a search is never a statement).
    assert not about_self(queries) or asks(queries)
    for query in queries:
        focused = without_mentions(query, aliases, max_alias_tokens=4)
        assert isinstance(focused, str) and (focused == query or len(focused) < len(query))
    for window in query_windows(queries, NOW, slack_days=1):
        assert window.start < window.end
