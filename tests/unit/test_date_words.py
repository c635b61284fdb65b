"""The words of a date the query names are no lexical evidence (issue 18): ``gate.date_words_uncounted``.

"What did Maria share on 16 June, 2023?" becomes a time window; the stored turn says what
was shared, never the date, so "16", "june" and "2023" must neither dilute its match nor let
a record that happens to hold "2023" pass as an identifier match would.
"""

from __future__ import annotations

from datetime import UTC, datetime

import retold
from retold.models import Candidate, GeneratorHit, LexicalMatch, LexicalTerm
from retold.retrieve.gate import GateSubject, passes_step1
from retold.retrieve.lexical import lexical_search
from retold.retrieve.query_terms import query_terms
from retold.retrieve.time_window import query_windows
from retold.retrieve.word_counts import date_words
from retold.store import Store

from .factories import MakeRecord
from .test_lexical import add

FLOORS = retold.Config().retrieval.gate.floors_for("tool")
EPISODE = GateSubject("episodic", "user_statement")
NOW = datetime(2024, 1, 1, tzinfo=UTC)


def _dates(query: str) -> list[str]:
    return [w.text for w in query_windows([query], NOW, 3)]


def test_date_words_are_the_words_of_the_dates_the_query_names() -> None:
    query = "What exciting news did Maria share on 16 June, 2023?"
    assert _dates(query) == ["on 16 June, 2023"]
    assert date_words(query_terms(query), _dates(query)) == {("16",), ("june",), ("2023",)}
    # No date named, nothing uncounted; a number that is not part of a date stays an identifier.
    assert date_words(query_terms("What is in release 2023 of the app?"), []) == set()
    relative = "What did I cook last week?"
    assert date_words(query_terms(relative), _dates(relative)) == {("last",), ("week",)}


def test_a_record_holding_only_the_dates_words_does_not_pass() -> None:
    # "2023" is an identifier-like term: alone it would pass the lexical floors as precise.
    year = LexicalTerm("2023", True, False)
    assert passes_step1(_lexical([year], 2), EPISODE, FLOORS) is not None  # "cooked in 2023"
    uncounted = LexicalTerm("2023", True, False, common=True)
    assert passes_step1(_lexical([uncounted], 2, uncounted=1), EPISODE, FLOORS) is None


def test_the_dates_words_no_longer_dilute_a_match_on_the_rest() -> None:
    # "exciting news ... 16 June, 2023" against "I have exciting news!": 2 of 5 counted terms is
    # over the fraction floor, 2 of 5 with three date words out is 2 of 2.
    terms = [LexicalTerm("exciting", False, False), LexicalTerm("news", False, False)]
    assert passes_step1(_lexical(terms, 7, uncounted=1), EPISODE, FLOORS) is None  # 2/6 < 0.34
    assert passes_step1(_lexical(terms, 7, uncounted=4), EPISODE, FLOORS) is not None  # 2/3


async def test_lexical_search_flags_the_dates_words_and_still_ranks_by_them(
    store: Store, make_record: MakeRecord
) -> None:
    news = await add(store, make_record, "I have some exciting news to share with you")
    dated = await add(store, make_record, "The 2023 festival starts on 16 June")
    query = "What exciting news did Maria share on 16 June, 2023?"
    eligible = {news, dated}
    hits = await lexical_search(store, [query], eligible, 10, dated=_dates(query))
    by_id = {h.record_id: h for h in hits}
    assert set(by_id) == eligible  # the date's words still find and rank records
    counted = {rid: h.match.counted for rid, h in by_id.items()}
    assert counted[dated] == (0, 4)  # "16", "june", "2023" matched, none counted; "festival" is no term
    assert counted[news][1] == 4  # exciting, news, maria, share: the date is not a term
    plain = await lexical_search(store, [query], eligible, 10)
    assert {h.record_id: h.match.counted for h in plain}[dated] == (3, 7)


def _lexical(terms: list[LexicalTerm], total: int, uncounted: int = 0) -> Candidate:
    return Candidate(
        "r", None, GeneratorHit(1, 5.0), LexicalMatch(tuple(terms), total, uncounted), None, None, 0.1,
        1, None, 0.1, None, None, None,
    )  # fmt: skip


async def test_a_date_of_numbers_alone_is_no_identifier_match(store: Store, make_record: MakeRecord) -> None:
    # A query whose only words are a date's numbers has no plain word to look up; its numbers
    # are still the date's, not identifiers a record could match on.
    release = await add(store, make_record, "The release notes went out 06/16/2023 with the new icons")
    query = "06/16/2023?"
    assert _dates(query) == ["06/16/2023"]
    (hit,) = await lexical_search(store, [query], {release}, 10, dated=_dates(query))
    assert hit.match.counted == (0, 0)
    assert all(t.common for t in hit.match.terms)
    (plain,) = await lexical_search(store, [query], {release}, 10)
    assert plain.match.counted == (1, 1)  # matched as an identifier would be: one is enough
