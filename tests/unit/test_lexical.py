"""Lexical search (spec §10.2, §17.4): query terms, FTS5 safety, eligibility and term coverage."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retold.models import LexicalTerm, Scope
from retold.retrieve.lexical import lexical_search, term_coverage
from retold.retrieve.query_terms import QueryTerm, fts_query, fts_tokens, is_identifier, query_terms
from retold.retrieve.stopwords import STOPWORDS
from retold.store import Store
from retold.testing import FakeClock

from .factories import MakeEntity, MakeRecord
from .writepath import World


def values(query: str, aliases: frozenset[str] = frozenset()) -> list[str]:
    return [t.value for t in query_terms(query, aliases)]


async def add(store: Store, make_record: MakeRecord, content: str, **fields: object) -> str:
    links = fields.pop("links", ())
    record = make_record(content=content, **fields)
    await store.insert_record(record, links=links)  # type: ignore[arg-type]
    return record.id


# --- query terms -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "word", ["bge-m3", "deploy.yml", "ERR42", "camelCase", "a/b", "src/app.py", "snake_case", "iPhone"]
)
def test_identifier_tokens(word: str) -> None:
    assert is_identifier(word)
    assert query_terms(f"check {word} now")[-1].is_identifier


@pytest.mark.parametrize("word", ["follow-up", "e-mail", "and/or", "Aditya", "NASA", "e.g"])
def test_plain_words_are_not_identifiers(word: str) -> None:
    assert not is_identifier(word)


def test_identifier_keeps_its_tokens_as_one_phrase() -> None:
    terms = {t.value: t for t in query_terms("why does bge-m3 fail on deploy.yml, ERR42?")}
    assert terms["bge-m3"].tokens == ("bge", "m3")
    assert terms["deploy.yml"].tokens == ("deploy", "yml")
    assert terms["err42"].tokens == ("err42",)
    assert all(t.is_identifier for t in terms.values() if t.value != "fail")


def test_hyphenated_plain_word_is_a_phrase_but_not_an_identifier() -> None:
    (term,) = query_terms("the follow-up")
    assert (term.value, term.tokens, term.is_identifier) == ("follow-up", ("follow", "up"), False)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("I'm sure what's wrong, don't ask", ["sure", "wrong", "ask"]),
        ("What\u2019s Aditya\u2019s favourite tea?", ["aditya", "favourite", "tea"]),
        ("aditya's plan", ["aditya", "plan"]),
        ("we'll see what they've done, he'd say", ["see"]),
        ("users' settings", ["users", "settings"]),
    ],
)
def test_contractions_and_possessives_reduce_to_their_stem(query: str, expected: list[str]) -> None:
    got = values(query)
    assert got == expected
    assert not {"i", "im", "i'm", "what", "what's", "don", "don't", "do", "s", "t"} & set(got)


def test_stopwords_drop_but_proper_nouns_and_identifiers_stay() -> None:
    assert values("where does Will work") == ["will", "work"]
    assert values("Will it rain in May") == ["rain", "may"]
    assert values("what is it") == []
    assert values("The deploy") == ["deploy"]  # sentence-initial capital is not a proper noun
    assert values("I think. The end") == ["think", "end"]  # nor is the first word of a sentence
    assert "do" in STOPWORDS and "get" in STOPWORDS and "the" in STOPWORDS


def test_one_character_terms_are_dropped() -> None:
    assert values("x y z go b2") == ["b2"]


def test_terms_are_deduplicated_keeping_either_spellings_flags() -> None:
    terms = query_terms("camelcase and camelCase and CAMELCASE")
    assert len(terms) == 1 and terms[0].is_identifier


def test_entity_alias_flag_single_and_multi_word() -> None:
    aliases = frozenset({"aditya kumar", "atlas"})
    terms = {t.value: t for t in query_terms("Does Aditya Kumar own atlas and coffee?", aliases)}
    assert terms["aditya kumar"].tokens == ("aditya", "kumar")
    assert terms["aditya kumar"].is_entity_alias and terms["atlas"].is_entity_alias
    assert not terms["coffee"].is_entity_alias
    assert "aditya" not in terms and "kumar" not in terms  # the run became one phrase term


def test_alias_dict_works_as_the_alias_set() -> None:
    (term,) = query_terms("atlas", {"atlas": ["e1"]})  # type: ignore[arg-type]
    assert term.is_entity_alias


def test_fts_tokens_agree_with_the_fts5_tokenizer() -> None:
    import sqlite3

    samples = [
        "Café naïve e\u0301te\u0301 Straße ﬁne x²",
        "हिन्दी भाषा",
        "foo_bar deploy.yml bge-m3 O'Brien don\u2019t",
        "東京タワー 123 ΆΈ İstanbul Ǆemal",
    ]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(a, tokenize = 'unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    for text in samples:
        conn.execute("INSERT INTO f(a) VALUES (?)", (text,))
    fts = [r[0] for r in conn.execute("SELECT term FROM v ORDER BY doc, offset")]
    assert [t for text in samples for t in fts_tokens(text)] == fts


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_fts_tokens_of_ascii_text_agree_with_the_fts5_tokenizer(text: str) -> None:
    """The ASCII fast path tokenises exactly as FTS5 does (every ASCII character drawn)."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(a, tokenize = 'unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    conn.execute("INSERT INTO f(a) VALUES (?)", (text,))
    assert list(fts_tokens(text)) == [r[0] for r in conn.execute("SELECT term FROM v ORDER BY offset")]


def test_fts_query_quotes_every_term_and_phrases_multi_token_terms() -> None:
    terms = query_terms("bge-m3 coffee")
    assert fts_query(terms) == '"bge m3" OR "coffee"'
    assert fts_query([QueryTerm('a"b', ('a"b',), False, False)]) == '"a""b"'
    assert fts_query([]) == ""


def test_term_coverage_requires_a_phrase_to_be_contiguous_in_one_field() -> None:
    terms = query_terms("follow-up")
    assert term_coverage(terms, ["schedule the follow-up call"]) == terms
    assert term_coverage(terms, ["follow the plan then wrap up"]) == []
    assert term_coverage(terms, ["please follow", "up next"]) == []  # split across two fields


# --- search against SQLite ---------------------------------------------------------------------


async def test_phrase_matches_only_adjacent_tokens(store: Store, make_record: MakeRecord) -> None:
    adjacent = await add(store, make_record, "Schedule the follow-up call with the vendor")
    apart = await add(store, make_record, "Follow the plan and wrap up by Friday")
    hits = await lexical_search(store, ["follow-up"], {adjacent, apart}, 10)
    assert [h.record_id for h in hits] == [adjacent]
    assert hits[0].match.terms == (LexicalTerm("follow-up", False, False),)


async def test_identifiers_match_as_written(store: Store, make_record: MakeRecord) -> None:
    yml = await add(store, make_record, "The pipeline reads deploy.yml at start")
    other = await add(store, make_record, "Deploy the yml files later")
    err = await add(store, make_record, "Login fails with ERR42 after the upgrade")
    hits = await lexical_search(store, ["deploy.yml", "ERR42"], {yml, other, err}, 10)
    assert {h.record_id for h in hits} == {yml, err}
    by_id = {h.record_id: h for h in hits}
    assert by_id[err].match.terms == (LexicalTerm("err42", True, False),)
    assert by_id[yml].match.total_terms == 1


@pytest.mark.parametrize(
    "query",
    [
        'say "hello',
        '"unbalanced quote" AND "',
        "deploy* OR",
        "NEAR(coffee tea, 2)",
        "coffee AND NOT tea",
        "(coffee",
        "content:coffee subject:tea",
        "^coffee - {a b} + ",
        "''",
        "'\"'\"",
    ],
)
async def test_fts_syntax_in_queries_is_inert(store: Store, make_record: MakeRecord, query: str) -> None:
    rid = await add(store, make_record, "Aditya drinks coffee and tea, says hello")
    hits = await lexical_search(store, [query], {rid}, 5)
    assert all(h.record_id == rid for h in hits)


async def test_raw_quote_inside_a_term_is_escaped(store: Store, make_record: MakeRecord) -> None:
    rid = await add(store, make_record, "coffee")
    rows = await store.fts_search(fts_query([QueryTerm("x", ('co"ffee',), False, False)]), {rid}, 5)
    assert rows == []


async def test_equal_scores_rank_by_record_id_whatever_the_insertion_order(
    store: Store, make_record: MakeRecord
) -> None:
    """Ties break by record id, also where the limit cuts through them: SQLite scores in FTS5
    alone and reads rows by rowid, which here runs opposite to the ids."""
    ids = sorted(str(uuid.uuid4()) for _ in range(12))
    for rid in reversed(ids):
        await add(store, make_record, "the same quiet harbour note", id=rid)
    match = fts_query(query_terms("harbour"))
    rows = await store.fts_search(match, set(ids), 5)
    assert [r[0] for r in rows] == ids[:5]
    assert len({r[1] for r in rows}) == 1  # one score: the order is the tie-break's alone
    assert [r[0] for r in await store.fts_search(match, set(ids[3:]), 4)] == ids[3:7]


async def test_ineligible_matches_cannot_crowd_out_an_eligible_one(
    store: Store, make_record: MakeRecord
) -> None:
    for _ in range(100):
        await add(store, make_record, "kubernetes kubernetes kubernetes", subject="kubernetes")
    weak = await add(
        store, make_record, "A long note that mentions kubernetes once among many other words about life"
    )
    hits = await lexical_search(store, ["kubernetes"], {weak}, 5)
    assert [h.record_id for h in hits] == [weak]
    assert hits[0].rank == 1 and hits[0].bm25 > 0


async def test_the_large_set_path_is_as_tight_and_as_exact_as_the_join(
    store: Store, make_record: MakeRecord, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large eligible sets probe FTS5 alone first; the answer must equal the join's."""
    import retold.store.eligible as eligible_module

    other = Scope("user", "u2")
    # Strong matches the search may not rank: they fill every probe slot. They are readable
    # (another tenant's rows are not in the index a u1 search reads at all) but of the wrong type.
    for _ in range(100):
        await add(
            store, make_record, "kubernetes kubernetes kubernetes", subject="kubernetes", type="episodic"
        )
    await add(store, make_record, "kubernetes kubernetes kubernetes", subject="kubernetes", scope=other)
    weak = await add(store, make_record, "A long note that mentions kubernetes once among other words")
    mine = [await add(store, make_record, f"kubernetes pod note {i}", type="episodic") for i in range(8)]
    monkeypatch.setattr(eligible_module, "TEMP_TABLE_MAX", 0)  # force the predicate path
    eligible = await store.eligible_ids([Scope("user", "u1")], now=clock.now(), types=["semantic"])
    assert eligible == {weak} and eligible.join_clause("x") is not None
    crowded = await lexical_search(store, ["kubernetes"], eligible, 5)
    assert [h.record_id for h in crowded] == [weak]
    mixed = await store.eligible_ids([Scope("user", "u1")], now=clock.now())
    probed = await lexical_search(store, ["kubernetes"], mixed, 5)
    as_join = await lexical_search(store, ["kubernetes"], set(mixed), 5)  # temp-table join path
    assert [(h.record_id, h.rank) for h in probed] == [(h.record_id, h.rank) for h in as_join]
    assert len(probed) == 5 and {h.record_id for h in probed} <= set(mixed)
    everyone = await store.eligible_ids([Scope("user", "u1"), other], now=clock.now())
    probed = await lexical_search(store, ["kubernetes", "pod"], everyone, 5)
    joined = await lexical_search(store, ["kubernetes", "pod"], set(everyone), 5)
    assert [h.record_id for h in probed] == [h.record_id for h in joined]
    assert set(mine) & {h.record_id for h in probed}


async def test_ranks_follow_bm25_and_scores_are_higher_is_better(
    store: Store, make_record: MakeRecord
) -> None:
    strong = await add(store, make_record, "espresso espresso espresso")
    weak = await add(store, make_record, "espresso and a long tail of unrelated words about other topics")
    hits = await lexical_search(store, ["espresso"], {strong, weak}, 5)
    assert [(h.record_id, h.rank) for h in hits] == [(strong, 1), (weak, 2)]
    assert hits[0].bm25 > hits[1].bm25 > 0


async def test_limit_applies_after_eligibility(store: Store, make_record: MakeRecord) -> None:
    ids = [await add(store, make_record, f"matcha note {i}") for i in range(6)]
    hits = await lexical_search(store, ["matcha"], set(ids), 3)
    assert len(hits) == 3 and [h.rank for h in hits] == [1, 2, 3]


async def test_best_coverage_per_query_and_its_term_count(store: Store, make_record: MakeRecord) -> None:
    err = await add(store, make_record, "ERR42 appeared during the deploy")
    coffee = await add(store, make_record, "Morning coffee before standup")
    queries = ["coffee preference morning routine", "ERR42 deploy"]
    hits = {h.record_id: h.match for h in await lexical_search(store, queries, {err, coffee}, 10)}
    assert [t.value for t in hits[err].terms] == ["err42", "deploy"]
    assert hits[err].total_terms == 2
    assert [t.value for t in hits[coffee].terms] == ["coffee", "morning"]
    assert hits[coffee].total_terms == 4


async def test_entity_alias_flag_reaches_the_match(store: Store, make_record: MakeRecord) -> None:
    rid = await add(store, make_record, "Atlas ships in May")
    (hit,) = await lexical_search(
        store, ["when does atlas ship"], {rid}, 5, entity_aliases=frozenset({"atlas"})
    )
    assert LexicalTerm("atlas", False, True) in hit.match.terms


async def test_aliases_column_lets_a_name_find_a_pronoun_record(
    store: Store, make_record: MakeRecord, make_entity: MakeEntity
) -> None:
    priya = make_entity("Priya Raman", aliases=["priya raman", "priya"])
    await store.insert_entity(priya)
    rid = await add(store, make_record, "She prefers green tea", links=[(priya.id, "about")])
    (hit,) = await lexical_search(store, ["What does Priya drink?"], {rid}, 5)
    assert hit.record_id == rid and LexicalTerm("priya", False, False) in hit.match.terms
    (phrase,) = await lexical_search(
        store, ["Priya Raman tea"], {rid}, 5, entity_aliases=frozenset({"priya raman"})
    )
    assert phrase.match.terms == (LexicalTerm("priya raman", False, True), LexicalTerm("tea", False, False))


async def test_written_records_are_searchable_through_the_write_path(world: World) -> None:
    result = await world.write(
        "Prefers concise answers about bge-m3",
        attribute="answer_style",
        entities=[("person", "Aditya", "about")],
    )
    assert result.ok, result
    eligible = {result.record_id or ""}
    (hit,) = await lexical_search(world.rt.store, ["Aditya's bge-m3 notes"], eligible, 5)
    assert {t.value for t in hit.match.terms} == {"aditya", "bge-m3"}


async def test_nothing_to_search_touches_no_sql(store: Store, make_record: MakeRecord) -> None:
    rid = await add(store, make_record, "coffee")
    seen: list[str] = []
    store.db.tracer = lambda sql, params: seen.append(sql)
    assert await lexical_search(store, ["what is it?", "a"], {rid}, 5) == []
    assert await lexical_search(store, ["coffee"], set(), 5) == []
    assert seen == []


async def test_a_300_word_query_runs_as_one_fts_query(store: Store, make_record: MakeRecord) -> None:
    rid = await add(store, make_record, "word7 and word299 appear here")
    query = " ".join(f"word{i}" for i in range(300))
    (hit,) = await lexical_search(store, [query], {rid}, 5)
    assert [t.value for t in hit.match.terms] == ["word7", "word299"] and hit.match.total_terms == 300


async def test_terms_in_most_records_are_left_out_of_the_fts_query_but_still_count(
    store: Store, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retold.retrieve.word_counts as word_counts

    monkeypatch.setattr(word_counts, "COMMON_TERM_MIN_RECORDS", 1)
    ids = [await add(store, make_record, f"status update number {i}") for i in range(4)]
    rare = await add(store, make_record, "status update about the billing migration")
    hits = await lexical_search(store, ["status billing"], set(ids) | {rare}, 10)
    assert [h.record_id for h in hits] == [rare]  # "status" is in every record: not searched
    assert {t.value for t in hits[0].match.terms} == {"status", "billing"}  # yet it still counts
    only_common = await lexical_search(store, ["status"], set(ids) | {rare}, 10)
    assert len(only_common) == 5  # with nothing selective left, the common term is searched


async def test_terms_in_over_a_tenth_of_records_are_not_searched_but_the_rarest_stays(
    store: Store, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retold.retrieve.word_counts as word_counts

    monkeypatch.setattr(word_counts, "COMMON_TERM_MIN_RECORDS", 1)
    filler = [await add(store, make_record, f"plain filler note {i}") for i in range(16)]
    alphas = [await add(store, make_record, f"alpha gamma report {i}") for i in range(3)]  # 3/20 > 10 %
    gammas = [await add(store, make_record, f"gamma only {i}") for i in range(2)]  # gamma 5/21... common
    beta = await add(store, make_record, "alpha beta memo")
    everyone = set(filler) | set(alphas) | set(gammas) | {beta}
    hits = await lexical_search(store, ["alpha beta"], everyone, 10)
    assert [h.record_id for h in hits] == [beta]  # alpha is common: only beta is searched
    assert {t.value for t in hits[0].match.terms} == {"alpha", "beta"}
    rarest = await lexical_search(store, ["alpha gamma"], everyone, 10)
    assert {h.record_id for h in rarest} == {*alphas, beta}  # both common: the rarer (alpha) alone


async def test_a_plain_word_matches_its_indexed_inflections_but_not_longer_words(
    store: Store, make_record: MakeRecord
) -> None:
    painted = await add(store, make_record, "I painted the lake sunrise last year")
    painting = await add(store, make_record, "Painting classes start on Monday")
    paint = await add(store, make_record, "Bought blue paint for the fence")
    paintball = await add(store, make_record, "Paintball with friends on Saturday")
    everyone = {painted, painting, paint, paintball}
    hits = await lexical_search(store, ["when did she paint a sunrise"], everyone, 10)
    assert {h.record_id for h in hits} == {painted, painting, paint}
    best = hits[0]
    assert best.record_id == painted  # "paint" (as "painted") and "sunrise": two of the query's terms
    assert [t.value for t in best.match.terms] == ["paint", "sunrise"]
    assert "painted" in fts_query([QueryTerm("paint", ("paint",), False, False, ("painted",))])


async def test_identifiers_aliases_and_short_stems_match_exactly(
    store: Store, make_record: MakeRecord
) -> None:
    deploying = await add(store, make_record, "deploying the yml parser tomorrow")
    ads = await add(store, make_record, "ads for the spring campaign")
    painting = await add(store, make_record, "painting the fence on Sunday")
    everyone = {deploying, ads, painting}
    assert await lexical_search(store, ["deploy.yml"], everyone, 10) == []  # identifiers: as written
    assert await lexical_search(store, ["ad"], everyone, 10) == []  # stem "ad": too short to widen
    assert await lexical_search(store, ["paint"], everyone, 10, entity_aliases={"paint"}) == []  # alias
    assert [h.record_id for h in await lexical_search(store, ["paint"], everyone, 10)] == [painting]
