"""Issue 15 item 8: one tenant's words never change another tenant's lexical search.

Variant expansion, common-term selection and BM25 read statistics of the index they search.
Those statistics must come from the rows the searcher may read (``Store.lexical_index``), so
the hits, matched terms and scores u2 gets are the same whether or not u1 exists, and the
caches they are kept in forget a record's words as soon as it is forgotten or erased.
"""

from __future__ import annotations

import asyncio
import json
import string
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retold
import retold.retrieve.lexical as lexical
import retold.retrieve.query_terms as query_terms_module
import retold.retrieve.word_counts as word_counts
from retold.models import Principal, Record, Scope
from retold.retrieve.lexical import LexicalHit, lexical_search
from retold.retrieve.query_terms import fts_tokens, query_terms
from retold.store import Store
from retold.store.lexical_index import TermStatistics
from retold.testing import FakeClock, FakeEmbedder, FakeJudge

from .factories import MakeRecord, build_entity, build_record
from .slow import examples

U1 = Scope("user", "u1")
U2 = Scope("user", "u2")


async def add(store: Store, make_record: MakeRecord, content: str, scope: Scope = U2) -> str:
    record = make_record(content=content, scope=scope)
    await store.insert_record(record)
    return record.id


async def add_many(store: Store, records: Sequence[Record]) -> None:
    """One bulk transaction: hundreds of rows without hundreds of commits."""
    await store.bulk_insert(records, np.zeros((len(records), 4)), model="none", version="0")


async def search_u2(store: Store, clock: FakeClock, queries: list[str]) -> list[LexicalHit]:
    eligible = await store.eligible_ids([U2], now=clock.now())
    return await lexical_search(store, queries, eligible, 10, scopes=[U2])


async def temp_tables(store: Store) -> list[str]:
    """The ``temp`` tables of the connection searches read through (outside a transaction).

    PostgreSQL copies nothing: its statistics are queries over the readable rows.
    """
    if store.dialect == "postgresql":
        return []
    rows = await store.db.fetchall("SELECT name FROM temp.sqlite_master WHERE type = 'table'")
    return sorted(r[0] for r in rows)


def cached_words(store: Store, *, indexed_only: bool = False) -> set[str]:
    """Every word held by the store's lexical caches (vocabulary counts and stem ranges).

    ``indexed_only`` leaves out words cached with no record (a query's own words, count 0).
    """
    state = getattr(store, "_lexical", None)
    if store.dialect == "postgresql":
        indexes = list(store.__dict__.get("_pg_lexical", {}).values())
    elif state is None:
        return set()
    else:
        indexes = [*state.private.values(), *([state.shared] if state.shared is not None else [])]
    vocabularies = [index.vocabulary for index in indexes]
    if state is not None and getattr(state, "carried", None) is not None:
        vocabularies.append(state.carried[1])  # set aside across a write, for the next search
    words: set[str] = set()
    for vocabulary in vocabularies:
        words.update(w for w, n in vocabulary.counts.items() if n or not indexed_only)
        if not indexed_only:
            words.update(vocabulary.variants)
        words.update(term for found in vocabulary.variants.values() for term, _ in found)
    return words


# --- the reproduction ----------------------------------------------------------------------------


async def test_another_users_private_tokens_do_not_crowd_out_my_inflection(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    """u1's 256 ``connect0…`` tokens filled the stem's vocabulary read; "connected" fell out."""
    mine = await add(store, make_record, "The router connected at noon")
    await add(store, make_record, "Lunch with the team on Friday")
    before = await search_u2(store, clock, ["connect"])
    assert [h.record_id for h in before] == [mine]
    await add_many(store, [make_record(content=f"connect{i:03d} token", scope=U1) for i in range(256)])
    after = await search_u2(store, clock, ["connect"])
    assert after == before  # same hit, rank, BM25 score and matched terms


async def test_another_users_common_word_does_not_drop_my_term(
    store: Store, make_record: MakeRecord, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Common-term selection counts u2's records only: u1 repeating a word cannot silence it for u2."""
    monkeypatch.setattr(word_counts, "COMMON_TERM_MIN_RECORDS", 1)
    rare = await add(store, make_record, "billing migration notes")
    for i in range(9):
        await add(store, make_record, f"status update {i}")
    before = await search_u2(store, clock, ["billing status"])
    assert [h.record_id for h in before] == [rare]
    await add_many(store, [make_record(content=f"billing {i}", scope=U1) for i in range(40)])
    assert await search_u2(store, clock, ["billing status"]) == before


async def test_another_users_records_do_not_change_my_bm25_order(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    """BM25's IDF and average length are u2's: u1 making "espresso" common cannot reorder u2's hits."""
    tea = await add(store, make_record, "green tea with breakfast most mornings at home")
    espresso = await add(store, make_record, "espresso")
    await add(store, make_record, "a walk in the park")
    before = await search_u2(store, clock, ["espresso tea"])
    assert {h.record_id for h in before} == {tea, espresso}
    await add_many(store, [make_record(content="espresso " * 5, scope=U1) for _ in range(50)])
    await add_many(store, [make_record(content=" ".join(["word"] * 60), scope=U1) for _ in range(20)])
    assert await search_u2(store, clock, ["espresso tea"]) == before


async def test_the_memory_search_response_is_the_same_with_or_without_the_other_tenant(
    tmp_path: Path,
) -> None:
    """The issue's reproduction through the public API: u2's ``memory_search`` answer is unchanged."""
    async with tenants(tmp_path / "m.sqlite") as (rt, clock):
        mine = await put(rt, clock, U2, "The router connected at noon")
        await put(rt, clock, U2, "Dinner plans for Saturday")
        before = await answer(rt, ["connect"])
        lexical_hits = json.loads(before["log"]["lexical"])  # one term alone does not pass the gate
        assert [(h[0], h[3]) for h in lexical_hits] == [(mine, [["connect", False, False, False, False]])]
        for i in range(256):
            await put(rt, clock, U1, f"connect{i:03d}")
        assert await answer(rt, ["connect"]) == before


# --- properties ----------------------------------------------------------------------------------

WORD = st.text(alphabet=string.ascii_lowercase[:8], min_size=2, max_size=7)
SUFFIXES = ["", "s", "ed", "ing", "er", "0", "1", "2", "00", "ation"]


def sentences(words: list[str], picks: list[tuple[int, int, int]]) -> list[str]:
    """Record texts over a vocabulary: each pick is (first word, second word, suffix)."""
    return [
        f"{words[a % len(words)]}{SUFFIXES[s % len(SUFFIXES)]} {words[b % len(words)]}" for a, b, s in picks
    ]


tenant_text = st.tuples(
    st.lists(WORD, min_size=1, max_size=6, unique=True),
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=12),
)


async def lexical_world(
    path: Path,
    mine: list[str],
    theirs: list[str],
    queries: list[str],
    *,
    theirs_first: bool,
) -> tuple[list[LexicalHit], list[LexicalHit]]:
    """u2's hits before and after u1's records exist (``theirs_first``: u1 wrote before u2 did)."""
    clock = FakeClock()
    store = await Store.open(path, clock=clock)
    try:
        if theirs_first:  # rowids and segments interleave differently from a store u2 had alone
            await add_many(store, [build_record(clock.now(), content=t, scope=U1) for t in theirs])
            await add_many(store, [build_record(clock.now(), content=t, scope=U2) for t in mine])
            with_them = await search_u2(store, clock, queries)
            for record_id in [
                r[0] for r in await store.db.fetchall("SELECT id FROM records WHERE scope_id = 'u1'")
            ]:
                await store.set_status(record_id, "deleted")
            return await search_u2(store, clock, queries), with_them
        await add_many(store, [build_record(clock.now(), content=t, scope=U2) for t in mine])
        alone = await search_u2(store, clock, queries)
        await add_many(store, [build_record(clock.now(), content=t, scope=U1) for t in theirs])
        return alone, await search_u2(store, clock, queries)
    finally:
        await store.close()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mine=tenant_text,
    theirs=tenant_text,
    shared=st.lists(WORD, max_size=2),
    query=st.lists(
        st.tuples(st.booleans(), st.integers(0, 20), st.sampled_from([0, 0, 0, 1, 2, 3, 5, 9])),
        min_size=1,
        max_size=4,
    ),
    common=st.booleans(),
    scan=st.sampled_from([2, 4, 256]),
    theirs_first=st.booleans(),
)
def test_lexical_hits_do_not_depend_on_another_tenants_records(
    mine: tuple[list[str], list[tuple[int, int, int]]],
    theirs: tuple[list[str], list[tuple[int, int, int]]],
    shared: list[str],
    query: list[tuple[bool, int, int]],
    common: bool,
    scan: int,
    theirs_first: bool,
) -> None:
    """Hits, ranks, BM25 scores and matched terms of u2 are identical with and without u1's rows.

    The vocabularies overlap (shared words, the same stems with digit and inflection suffixes),
    common-term selection is switched on for tiny stores, and the per-stem vocabulary read is
    made small, so every statistic the old index-wide reads leaked is exercised.
    """
    my_words = mine[0] + shared
    their_words = theirs[0] + shared + [w + "0" for w in my_words]
    queries = [
        " ".join(
            (my_words if own else their_words)[i % len(my_words if own else their_words)] + SUFFIXES[s]
            for own, i, s in query
        )
    ]
    saved = (word_counts.COMMON_TERM_MIN_RECORDS, lexical.VARIANT_SCAN_MAX)
    word_counts.COMMON_TERM_MIN_RECORDS = 1 if common else saved[0]
    lexical.VARIANT_SCAN_MAX = scan
    my_texts = sentences(my_words, mine[1])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            alone, with_them = asyncio.run(
                lexical_world(
                    Path(tmp) / "m.sqlite",
                    my_texts,
                    sentences(their_words, theirs[1]),
                    queries,
                    theirs_first=theirs_first,
                )
            )
    finally:
        word_counts.COMMON_TERM_MIN_RECORDS, lexical.VARIANT_SCAN_MAX = saved
    assert with_them == alone
    # Positive control: a query word u2 wrote verbatim is found (common-term selection may
    # leave a common word out of the FTS query, so only without it).
    mine_tokens = {t for text in my_texts for t in fts_tokens(text)}
    if not common and any(t.tokens[0] in mine_tokens for t in query_terms(queries[0])):
        assert alone


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mine=tenant_text,
    theirs=tenant_text,
    query=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 9)), min_size=1, max_size=3),
)
def test_the_whole_memory_search_answer_does_not_depend_on_another_tenant(
    mine: tuple[list[str], list[tuple[int, int, int]]],
    theirs: tuple[list[str], list[tuple[int, int, int]]],
    query: list[tuple[int, int]],
) -> None:
    """The tool answer and the logged rankings of u2 (minus ids and timings) ignore u1's records."""
    my_words = mine[0]
    their_words = theirs[0] + [w + "0" for w in my_words]
    pool = my_words + their_words
    queries = [" ".join(pool[i % len(pool)] + SUFFIXES[s] for i, s in query)]

    async def run(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        async with tenants(path) as (rt, clock):
            for text in sentences(my_words, mine[1]):
                await put(rt, clock, U2, text)
            alone = await answer(rt, queries)
            for text in sentences(their_words, theirs[1]):
                await put(rt, clock, U1, text)
            return alone, await answer(rt, queries)

    with tempfile.TemporaryDirectory() as tmp:
        alone, with_them = asyncio.run(run(Path(tmp) / "m.sqlite"))
    assert with_them == alone


# --- caches: forgotten and erased words leave ----------------------------------------------------


async def test_a_forgotten_records_words_leave_expansion_and_every_cache(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    connected = await add(store, make_record, "The router connected at noon")
    reconnects = await add(store, make_record, "The client connects quietly")
    await add(store, make_record, "private diary entry", scope=U1)  # u2's search needs its own index
    hits = await search_u2(store, clock, ["connect"])
    assert {h.record_id for h in hits} == {connected, reconnects}
    assert "connects" in cached_words(store)
    if store.dialect == "sqlite":
        assert any(name.startswith("lexical_") for name in await temp_tables(store))
    await store.set_status(reconnects, "deleted")  # forget: the commit drops every lexical cache
    assert "connects" not in cached_words(store)
    await settle(store)
    assert not [name for name in await temp_tables(store) if name.startswith("lexical_")]
    assert [h.record_id for h in await search_u2(store, clock, ["connect"])] == [connected]
    assert "connects" not in cached_words(store)


async def test_an_erased_records_words_leave_every_cache(tmp_path: Path) -> None:
    async with tenants(tmp_path / "m.sqlite") as (rt, clock):
        await put(rt, clock, U2, "The router connected at noon")
        secret = await put(rt, clock, U2, "zanzibarish connects quietly")
        await put(rt, clock, U1, "unrelated words of another tenant")
        await answer(rt, ["zanzibarish connect"])
        assert {"zanzibarish", "connects"} <= cached_words(rt.store)
        await rt.ops.erase(record=secret, reason="asked")
        assert not {"zanzibarish", "connects"} & cached_words(rt.store)
        await settle(rt.store)
        for name in await temp_tables(rt.store):
            assert not name.startswith("lexical_")
        result = await answer(rt, ["zanzibarish connect"])
        assert not {"zanzibarish", "connects"} & cached_words(rt.store, indexed_only=True)
        assert "zanzibarish" not in json.dumps(result["payload"]["results"])


async def test_a_write_by_another_process_refreshes_the_vocabulary(
    store_path: Path, store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    """No in-process commit to hear about: the records_version and FTS5 state read per search do it."""
    await add(store, make_record, "The router connected at noon")
    await add(store, make_record, "private diary entry", scope=U1)
    assert len(await search_u2(store, clock, ["connect"])) == 1
    other = await Store.open(store_path, clock=clock)
    try:
        fresh = await add(other, make_record, "It keeps connecting overnight")
    finally:
        await other.close()
    assert fresh in {h.record_id for h in await search_u2(store, clock, ["connect"])}


async def test_a_search_inside_a_transaction_keeps_nothing(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    """On the writer, the index reflects uncommitted rows: it is built for the search and dropped."""
    await add(store, make_record, "private diary entry", scope=U1)
    async with store.transaction():
        mine = await add(store, make_record, "The router connected at noon")
        hits = await search_u2(store, clock, ["connect"])
        assert [h.record_id for h in hits] == [mine]
        assert not [n for n in await temp_tables(store) if n.startswith("lexical_")]  # the writer's
    assert cached_words(store) == set()


@pytest.mark.sqlite_only("PostgreSQL builds no per-tenant copy to cancel")
async def test_a_search_cancelled_while_copying_leaves_no_copy_behind(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    await add(store, make_record, "The router connected at noon")
    await add(store, make_record, "private diary entry", scope=U1)

    def cancel_the_copy(sql: str, params: object) -> None:
        if sql.lstrip().startswith("INSERT INTO temp.lexical_"):
            raise asyncio.CancelledError

    store.db.tracer = cancel_the_copy
    with pytest.raises(asyncio.CancelledError):
        await search_u2(store, clock, ["connect"])
    store.db.tracer = None
    assert len(await search_u2(store, clock, ["connect"])) == 1
    (index,) = store._lexical.private.values()  # type: ignore[attr-defined]
    left = [n for n in await temp_tables(store) if n.startswith("lexical_") and not n.startswith(index.name)]
    assert left == []


@pytest.mark.sqlite_only("PostgreSQL builds no per-tenant copy")
async def test_a_single_tenant_store_searches_its_own_index_without_a_copy(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    mine = await add(store, make_record, "The router connected at noon")
    assert [h.record_id for h in await search_u2(store, clock, ["connect"])] == [mine]
    assert not [n for n in await temp_tables(store) if n.startswith("lexical_")]
    await add(store, make_record, "connect000", scope=U1)
    assert [h.record_id for h in await search_u2(store, clock, ["connect"])] == [mine]
    assert [n for n in await temp_tables(store) if n.startswith("lexical_")]


async def test_an_in_memory_store_builds_the_readable_index_per_search_and_keeps_none() -> None:
    """One connection serves every task there, so nothing is left on it between searches."""
    async with tenants(Path(":memory:")) as (rt, clock):
        await put(rt, clock, U1, "connect000 connect001")
        mine = await put(rt, clock, U2, "The router connected at noon")
        logged = json.loads((await answer(rt, ["connect"]))["log"]["lexical"])
        assert [h[0] for h in logged] == [mine]
        assert not [n for n in await temp_tables(rt.store) if n.startswith("lexical_")]
        assert cached_words(rt.store) == set()


def test_the_stemmer_keeps_no_words() -> None:
    stemmer = query_terms_module._stemmer()
    assert getattr(stemmer, "maxCacheSize", 0) == 0
    assert not hasattr(query_terms_module.stem, "cache_info")


# --- helpers for the runtime-level tests ---------------------------------------------------------


@asynccontextmanager
async def tenants(path: Path) -> AsyncIterator[tuple[retold.Runtime, FakeClock]]:
    """A runtime on fakes with users u1 and u2, each readable by the agent when acting for them."""
    clock = FakeClock()
    # FakeEmbedder's float32 cosines: the dense channel rounds them (retold.index.vector), so a
    # record's score is the same whether or not another tenant's rows share the matrix.
    async with retold.open_runtime(path, embedder=FakeEmbedder(64), judge=FakeJudge(), clock=clock) as rt:
        for user in ("u1", "u2"):
            await rt.host.provision_user(user)
            await rt.host.grant("agent", Scope("user", user), read=True, write=True)
        yield rt, clock


async def put(rt: retold.Runtime, clock: FakeClock, scope: Scope, content: str) -> str:
    record = build_record(clock.now(), content=content, scope=scope)
    await rt.store.insert_record(record)
    await rt.store.put_embedding(
        record.id, rt.embedder.name, rt.embedder.version, rt.embedder.embed_documents([content])[0]
    )
    return record.id


_VOLATILE = {"id", "at", "search_id", "timings_ms", "warm"}


async def answer(rt: retold.Runtime, queries: list[str]) -> dict[str, Any]:
    """u2's ``memory_search`` payload and its logged rankings, without ids of the search and timings."""
    payload = await rt.tools.call(Principal("agent", "u2", "s"), "memory_search", {"queries": queries})
    assert payload["ok"], payload
    row = await rt.store.search_log(payload["search_id"])
    assert row is not None
    logged = {k: row[k] for k in row.keys() if k not in _VOLATILE}  # noqa: SIM118 - sqlite3.Row
    flags = json.loads(logged.pop("config_flags"))
    flags.pop("index_refresh", None)  # how many vectors the refresh loaded: u1's writes count there
    return {
        "payload": {k: v for k, v in payload.items() if k not in _VOLATILE},
        "log": logged,
        "flags": flags,
    }


async def settle(store: Store) -> None:
    """Let the background drop of stale ``temp`` copies finish."""
    state = getattr(store, "_lexical", None)
    if state is not None and state.drops:
        await asyncio.gather(*state.drops)


# --- caches brought forward across writes --------------------------------------------------------


@pytest.mark.sqlite_only("PostgreSQL keeps no vocabulary between searches to bring forward")
async def test_a_write_keeps_the_vocabulary_but_its_own_words_are_read_anew(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    """A search after a write reads only what the write touched, yet sees every new word."""
    painted = await add(store, make_record, "We painted the fence green")
    await add(store, make_record, "The router connected at noon")
    assert [h.record_id for h in await search_u2(store, clock, ["paint", "connect"])]
    assert {"painted", "connected"} <= cached_words(store)
    painting = await add(store, make_record, "A painting class on Tuesday")
    assert "connected" in cached_words(store)  # set aside, not dropped
    hits = {h.record_id for h in await search_u2(store, clock, ["paint"])}
    assert hits == {painted, painting}  # "painting" was new: the stem's range was read again
    state = store._lexical  # type: ignore[attr-defined]
    assert state.shared is not None and "connected" in state.shared.vocabulary.counts  # kept
    assert state.shared.vocabulary.counts.get("painting") == 1
    assert state.shared.rows == 3


@pytest.mark.sqlite_only("PostgreSQL keeps no vocabulary between searches to bring forward")
async def test_a_new_tenant_written_after_a_search_gets_its_own_index(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    """The scopes holding records are brought forward too: another tenant's first write counts."""
    mine = await add(store, make_record, "The router connected at noon")
    assert [h.record_id for h in await search_u2(store, clock, ["connect"])] == [mine]
    await add(store, make_record, "connect000 connect001 connect002", scope=U1)
    assert [h.record_id for h in await search_u2(store, clock, ["connect"])] == [mine]
    (searched,) = store._lexical.private.values()  # type: ignore[attr-defined]
    assert "connect000" not in {term for found in searched.vocabulary.variants.values() for term, _ in found}
    assert [n for n in await temp_tables(store) if n.startswith("lexical_")]


async def test_a_new_alias_reaches_the_records_it_names(
    store: Store, make_record: MakeRecord, clock: FakeClock
) -> None:
    """An alias added later rewrites its records' FTS rows; the next search matches that name."""
    entity = build_entity(clock.now(), "Robin", scope=U2)
    await store.insert_entity(entity)
    record = make_record(content="The router connected at noon", scope=U2)
    await store.insert_record(record, links=[(entity.id, "about")])
    assert [h.record_id for h in await search_u2(store, clock, ["connect", "robin"])] == [record.id]
    assert [h.record_id for h in await search_u2(store, clock, ["zorblaxes"])] == []
    async with store.transaction():  # as a write that names the entity anew does it
        await store.add_aliases(entity.id, ["zorblax"], scope=U2)
        await store.rewrite_fts([record.id])
        other = await add(store, make_record, "Another note about lunch")
    # "zorblaxes" reaches the alias through its stem's variants, read before the alias existed.
    assert [h.record_id for h in await search_u2(store, clock, ["zorblaxes"])] == [record.id]
    assert [h.record_id for h in await search_u2(store, clock, ["lunch"])] == [other]


_WORDS = ["paint", "painted", "painter", "paints", "pain", "connect", "connected", "zed", "zebra", "zeal"]


@pytest.mark.sqlite_only("PostgreSQL keeps no vocabulary between searches to bring forward")
@settings(
    max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["insert", "insert", "supersede", "alias", "search"]),
            st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=12,
    )
)
async def test_a_vocabulary_brought_forward_equals_one_read_anew(
    steps: list[tuple[str, list[str]]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whatever mix of new records, status changes and aliases: the counts and stem ranges a
    search reads after the writes are those a store with cold caches reads."""
    clock = FakeClock()
    path = tmp_path_factory.mktemp("carry") / "m.sqlite"
    store = await Store.open(path, clock=clock)
    entity = build_entity(clock.now(), "Robin", scope=U2)
    await store.insert_entity(entity)
    written: list[str] = []
    stems, tokens = ["pain", "paint", "conn", "ze", "z"], ["paint", "zed", "connected", "nothing"]

    async def statistics(of: Store) -> TermStatistics:
        async with of.lexical_index([U2]) as index:
            return await of.term_statistics(tokens, stems, index=index, limit=3)

    try:
        await statistics(store)  # warm: every later read is brought forward
        for action, words in steps:
            if action == "insert" or not written:
                record = build_record(clock.now(), content=" ".join(words), scope=U2)
                await store.insert_record(record, links=[(entity.id, "about")])
                written.append(record.id)
            elif action == "supersede":
                await store.set_status(written[len(words) % len(written)], "superseded")
            elif action == "alias":
                await store.add_aliases(entity.id, ["".join(words)[:12]], scope=U2)
                await store.rewrite_fts(written)
            carried = await statistics(store)
            cold = await Store.open(path, clock=clock)
            try:
                assert carried == await statistics(cold), (action, words)
            finally:
                await cold.close()
    finally:
        await store.close()


@pytest.mark.sqlite_only("SQLite's DROP TABLE of a temp index copy, refused while a statement reads")
async def test_a_copy_sqlite_will_not_drop_yet_never_fails_a_search(
    store: Store, make_record: MakeRecord, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent searches on the shared reader make SQLITE_LOCKED on DROP routine: cleanup waits."""
    from retold.errors import StoreError

    kept = await add(store, make_record, "The router connected at noon")
    await add(store, make_record, "private diary entry", scope=U1)  # u2's search needs its own index
    await search_u2(store, clock, ["router"])
    execute = store.db.execute

    async def locked(sql: str, params: Any = None) -> int:
        if sql.startswith("DROP TABLE"):
            raise StoreError("the store is locked by another writer (database table is locked)")
        return await execute(sql, params)

    monkeypatch.setattr(store.db, "execute", locked)
    await add(store, make_record, "The client connects quietly")  # retires the copy
    await settle(store)
    assert [h.record_id for h in await search_u2(store, clock, ["router"])] == [kept]
    assert store._lexical.doomed  # type: ignore[attr-defined]  # kept for a later drop
    monkeypatch.setattr(store.db, "execute", execute)
    await add(store, make_record, "another write")
    await settle(store)
    await search_u2(store, clock, ["router"])
    live = {index.name for index in store._lexical.private.values()}  # type: ignore[attr-defined]
    stale = {"_".join(n.split("_")[:2]) for n in await temp_tables(store) if n.startswith("lexical_")} - live
    assert not stale  # the copy SQLite refused to drop went at the next chance
