"""The composition root: one object that owns the store, the host API and the models.

The CLI, the adapters, the graphs and the benchmarks all build retold through
:func:`open_runtime`, so they share one wiring and one lifecycle.

One job: composition, building every service from config or the host's arguments and
closing them in order; it is long because all of that wiring is here and nowhere else.

    async with retold.open_runtime("memory.sqlite") as rt:
        await rt.host.grant("planner", Scope("user", "u1"), read=True, write=True)

    rt = await retold.open_runtime("memory.sqlite")   # or without the block
    await rt.close()
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import time
from collections.abc import Callable, Generator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from retold.config import Config, load_config
from retold.errors import ConfigError, InvalidArgumentError, NotFoundError, StoreClosedError
from retold.host import MemoryHost
from retold.index.dense import dense_search_for
from retold.index.vector import VectorIndex
from retold.ingest.activation import ActivationService
from retold.ingest.write.ingestor import Ingestor
from retold.ingest.write.revision import Reviser
from retold.ingest.write.session import SessionHooks
from retold.models import Principal, SearchRequest, SearchResponse, SessionInfo, SessionKey
from retold.operations import Operations
from retold.retrieve.profile import ProfileAssembler
from retold.store import Store
from retold.store.postgres import is_postgres_url
from retold.util import Clock, SystemClock

if TYPE_CHECKING:
    from retold.ingest.extraction.run import ExtractionResult, ExtractionServices
    from retold.retrieve.search_run import SearchRun, SearchServices

__all__ = ["Runtime", "open_runtime"]

logger = logging.getLogger(__name__)


class Runtime:
    """Everything one process needs to serve memory for one store file.

    Model arguments left as ``None`` are built from config: the embedder is created at
    once but loads its weights on first use (or :meth:`warm`); the judge comes from
    ``ingestion.equivalence.model``; hosted models only when a feature enables them, on
    ``chat_model`` (a LangChain ``BaseChatModel``) when one is given, else on the provider
    SDK client that config names.
    """

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        clock: Clock,
        embedder: Any = None,
        judge: Any = None,
        reranker: Any = None,
        rewriter: Any = None,
        extractor: Any = None,
        reviewer: Any = None,
        chat_model: Any = None,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        if embedder is None:
            from retold.index.embedding_backend import build_embedder

            embedder = build_embedder(config.embedding)
        if chat_model is not None:
            from retold.chat_stages import hosted_stages

            judge, rewriter, extractor, reviewer = hosted_stages(
                config, chat_model, judge=judge, rewriter=rewriter, extractor=extractor, reviewer=reviewer
            )
        if judge is None:
            from retold.ingest.equivalence.judge import build_judge

            judge = build_judge(config, embedder)
        if rewriter is None:
            from retold.retrieve.rewrite import rewriter_from_config

            rewriter = rewriter_from_config(config.retrieval.rewrite)
        if reranker is None:
            from retold.index.reranker import reranker_from_config

            reranker = reranker_from_config(config.reranker)
        if extractor is None:
            from retold.ingest.extraction.structured import extractor_from_config

            extractor = extractor_from_config(config)
        if extractor is not None and reviewer is None:
            reviewer = _reviewer_from_config(config)
        self.embedder = embedder
        self.judge = judge
        self.index = VectorIndex(embedder.name, embedder.version, embedder.dims)
        # Dense search for searches and duplicate checks: this index on SQLite, pgvector inside
        # PostgreSQL (where this process then holds no vectors).
        self.dense = dense_search_for(store, self.index, config.embedding, config.store)
        self.reviser = Reviser(store, self.index)
        self.activation = ActivationService(
            store, config.activation, clock, reviser=self.reviser,
            classifier=_activation_classifier(config, chat_model),
        )  # fmt: skip
        self.profiles = ProfileAssembler(store, config.activation, clock)
        self.ingestor = Ingestor(
            store, config, clock, embedder=embedder, judge=judge, index=self.index, dense=self.dense,
            activation=self.activation,
        )  # fmt: skip
        self.hooks = SessionHooks(store, config, clock, on_end=self._on_session_end)
        self.host = MemoryHost(store, clock, self.ingestor)
        self.ops = Operations(
            store,
            config,
            clock,
            embedder=embedder,
            index=self.index,
            caches=(judge, reranker, rewriter, extractor, reviewer),
        )
        self.reranker = reranker
        self.rewriter = rewriter
        self._search_graph: Any = None
        self._search_services: SearchServices | None = None
        self._extraction_services: ExtractionServices | None = None
        from retold.tools.handlers import MemoryTools

        self.tools = MemoryTools(self)
        self.extractor = extractor
        self.reviewer = reviewer
        self._extraction_graph: Any = None
        # Extractions scheduled by on_session_end run here; close() waits for them.
        self._background: set[asyncio.Task[Any]] = set()
        # The extraction of each session running in this runtime (inline or in the background):
        # a call for the same session waits on it instead of losing to its claim. Resolved with
        # the run's result, or None when the run ended without one (cancelled, failed to run).
        self._extracting: dict[SessionKey, asyncio.Future[ExtractionResult | None]] = {}
        # The warm-up a server started at launch (warm_in_background); close() cancels it.
        self._warming: asyncio.Task[bool] | None = None
        self._closing = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("this retold runtime has been closed; open a new one with open_runtime()")

    async def profile(self, principal: Principal) -> str:
        """The ambient profile block for ``principal`` ("" when nothing they may read is ambient).

        Byte-identical between calls while the readable ambient set is unchanged, so a host can
        put it at the top of a system prompt and keep the prompt cache's prefix.
        """
        self._check_open()
        return await self.profiles.profile(principal)

    def search_services(self) -> SearchServices:
        """What the search stages use: this runtime's store, models and config, nothing else (built once)."""
        if self._search_services is None:
            from retold.retrieve.search_run import SearchServices

            self._search_services = SearchServices(
                config=self.config, store=self.store, clock=self.clock, embedder=self.embedder,
                dense=self.dense, rewriter=self.rewriter, reranker=self.reranker,
            )  # fmt: skip
        return self._search_services

    @property
    def search_graph(self) -> Any:
        """The compiled search graph (spec §10 as LangGraph nodes), built on first use."""
        if self._search_graph is None:
            from retold.graph_nodes.search import build_search_graph

            self._search_graph = build_search_graph(self.search_services())
        return self._search_graph

    async def search(self, principal: Principal, request: SearchRequest) -> SearchResponse:
        """Run one search for ``principal`` through the search graph; returns the response.

        The caller's identity is the principal the host derived; the readable scopes come
        from its grants. Raises :class:`~retold.errors.InvalidArgumentError` for a malformed
        request (the tool layer turns that into ``invalid_input``). A trace of the run (when
        the host configures LangSmith or OpenTelemetry) is named ``retold_search`` and carries
        the search id and the principal's ids as metadata.
        """
        self._check_open()
        from retold.graph_nodes.search import SearchContext
        from retold.retrieve.retriever import SearchRun, begin_embedding, validate_request

        run = SearchRun(principal=principal, request=validate_request(request))
        if not self.config.retrieval.rewrite.enabled:  # the queries as given are the ones searched
            begin_embedding(self.search_services(), run, run.request.queries)
        await self.search_graph.ainvoke(
            {"queries": run.request.queries},
            config={"run_name": "retold_search", "metadata": _trace_metadata(run), "tags": ["retold"]},
            context=SearchContext(run),
        )
        assert run.response is not None
        return run.response

    def extraction_services(self) -> ExtractionServices:
        """What the extraction stages use: this runtime's store, write path, models and config."""
        if self._extraction_services is None:
            from retold.ingest.extraction.run import ExtractionServices

            self._extraction_services = ExtractionServices(
                config=self.config, store=self.store, clock=self.clock, ingestor=self.ingestor,
                judge=self.judge, extractor=self.extractor, reviewer=self.reviewer,
            )  # fmt: skip
        return self._extraction_services

    @property
    def extraction_graph(self) -> Any:
        """The compiled extraction graph (spec §8.2 as LangGraph nodes), built on first use."""
        if self._extraction_graph is None:
            from retold.graph_nodes.extraction import build_extraction_graph

            self._extraction_graph = build_extraction_graph(self.extraction_services())
        return self._extraction_graph

    async def extract_session(
        self, session_id: str | SessionKey, *, force: bool = False, actor: str | None = None
    ) -> ExtractionResult:
        """Run session extraction now and wait for it; returns what the run did.

        ``session_id`` is a bare id while only one principal uses it, else the qualified
        ``agent/user/session`` (or a :class:`~retold.models.SessionKey`).

        ``status`` is ``extracted``, ``skipped`` (not ended, already extracted — pass
        ``force=True`` to re-run —, or claimed by another worker) or ``failed`` (closed:
        nothing written, ``extraction.failed`` appended, the claim left to expire).
        When this runtime is already extracting the session (the run ``on_session_end``
        scheduled, or a concurrent call), the call waits for that run and returns its result;
        ``claimed_by_other`` means another runtime or process holds the claim.
        Raises :class:`~retold.errors.ConfigError` without an extractor and
        :class:`~retold.errors.NotFoundError` for an unknown session.
        """
        self._check_open()
        if self.extractor is None:
            raise ConfigError(
                "no extractor is configured: set ingestion.extraction_enabled: true (with the provider's "
                "API key) or pass extractor= to open_runtime",
                key="ingestion.extraction_enabled",
            )
        from retold.ingest.extraction.run import shares_the_result

        key = await self.store.resolve_session(session_id)
        result: ExtractionResult | None = None
        while (inflight := self._extracting.get(key)) is not None:
            await asyncio.wait({inflight})
            shared = inflight.result()
            if shares_the_result(shared, force=force):
                result = shared
                break
        if result is None:
            self._check_open()
            result = await self._run_extraction(key, self._reserve_extraction(key), force=force, actor=actor)
        if result.status == "skipped" and result.reason == "not_found":
            raise NotFoundError(f"no session {str(key)!r}")
        return result

    def _reserve_extraction(self, key: SessionKey) -> asyncio.Future[ExtractionResult | None]:
        """Mark ``key`` as being extracted here; later calls for it wait on the returned slot."""
        slot: asyncio.Future[ExtractionResult | None] = asyncio.get_running_loop().create_future()
        self._extracting[key] = slot
        return slot

    def _release_extraction(
        self, key: SessionKey, slot: asyncio.Future[ExtractionResult | None], result: ExtractionResult | None
    ) -> None:
        """Resolve ``slot`` (waiters wake) and forget it, in one step with no await between."""
        if not slot.done():
            slot.set_result(result)
        if self._extracting.get(key) is slot:
            del self._extracting[key]

    async def _run_extraction(
        self,
        key: SessionKey,
        slot: asyncio.Future[ExtractionResult | None],
        *,
        force: bool,
        actor: str | None,
    ) -> ExtractionResult:
        """One run of the extraction graph for ``key``; ``slot`` is resolved however it ends."""
        from retold.graph_nodes.extraction import ExtractionContext
        from retold.ingest.extraction.run import EXTRACTION_ACTOR, ExtractionRun

        result: ExtractionResult | None = None
        try:
            run = ExtractionRun(key=key, force=force, actor=actor or EXTRACTION_ACTOR)
            await self.extraction_graph.ainvoke(
                {"session_id": str(key)},
                config={
                    "run_name": "retold_extraction",
                    "metadata": _extraction_metadata(key),
                    "tags": ["retold"],
                },
                context=ExtractionContext(run),
            )
            assert run.result is not None
            result = run.result
            return result
        finally:
            self._release_extraction(key, slot, result)

    async def _on_session_end(self, session: SessionInfo) -> None:
        """The session hooks' seam: schedule extraction in the background when an extractor exists.

        The run is registered before this returns, so an ``extract_session`` right after the
        session ends waits for it rather than racing it for the claim.
        """
        if self.extractor is None or self._closing or self._closed:
            return
        key = session.key
        previous = self._extracting.get(key)
        slot = self._reserve_extraction(key)
        # A fresh context: the task must not inherit a caller's store transaction.
        task = asyncio.get_running_loop().create_task(
            self._extract_in_background(key, slot, previous), context=contextvars.Context()
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        # A task cancelled before it starts never runs its body: release its slot all the same.
        task.add_done_callback(lambda _done: self._release_extraction(key, slot, None))

    async def _extract_in_background(
        self,
        key: SessionKey,
        slot: asyncio.Future[ExtractionResult | None],
        previous: asyncio.Future[ExtractionResult | None] | None,
    ) -> None:
        try:
            if previous is not None:  # a run of this session was already in flight: let it finish
                await asyncio.wait({previous})
            result = await self._run_extraction(key, slot, force=False, actor=None)
        except Exception:
            logger.exception("background extraction of session %s could not run", key)
            return
        if result.status == "failed":
            logger.warning("background extraction of session %s failed closed: %s", key, result.reason)

    async def join_background(self) -> None:
        """Wait until every extraction scheduled so far has finished."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def warm(self) -> None:
        """Load the embedder and the vector index now, so the first search pays nothing.

        The packaged embedder takes seconds (importing torch and sentence-transformers:
        ``benchmarks/cold_start.py``), else paid by the first call that embeds. Await this at
        start-up, or call :meth:`warm_in_background` to go on meanwhile.
        """
        self._check_open()
        from retold.index.embedder import warm

        await warm(self.embedder)
        await self.dense.refresh()

    def warm_in_background(self, report: Callable[[str], None] | None = None) -> asyncio.Task[bool]:
        """Start :meth:`warm` as a task on the running loop and return it at once (for servers).

        ``report`` (default: this module's logger, INFO) hears ``retold: warming the embedder
        in the background`` now and ``retold: the embedder is ready in 4.2 s`` later. A failure
        is reported (``retold: warming the embedder failed (...)``), never raised: the first call
        that embeds then loads the model itself and raises its own error. Calls meanwhile wait
        for the load rather than starting a second. Called again while a warm-up runs or after
        one succeeded, it returns that task (its result: True when the warm-up succeeded);
        :meth:`close` cancels one still running.
        """
        self._check_open()
        current = self._warming
        if current is not None and not (current.done() and (current.cancelled() or not current.result())):
            return current
        say = report or logger.info
        say("retold: warming the embedder in the background")
        # A fresh context: the task must not inherit a caller's store transaction.
        task = asyncio.get_running_loop().create_task(self._warm_reported(say), context=contextvars.Context())
        self._warming = task
        return task

    async def _warm_reported(self, say: Callable[[str], None]) -> bool:
        """:meth:`warm`, its time or its failure told to ``say``; True when it succeeded."""
        import anyio.to_thread

        start = time.perf_counter()
        try:
            load = getattr(self.embedder, "warm", None)
            if callable(load):
                # Abandoned on cancel (close): the load cannot be interrupted, so it finishes in
                # its thread while the runtime closes, instead of holding the close up.
                await anyio.to_thread.run_sync(load, abandon_on_cancel=True)
            await self.warm()
        except Exception as exc:  # a warm-up never takes the server down
            logger.debug("warming the embedder failed", exc_info=True)
            say(
                f"retold: warming the embedder failed ({type(exc).__name__}: {exc}); "
                "the first call that embeds will try to load it again"
            )
            return False
        say(f"retold: the embedder is ready in {time.perf_counter() - start:.1f} s")
        return True

    async def close(self, *, cancel_background: bool = False) -> None:
        """Finish (or, with ``cancel_background``, cancel) scheduled extractions, then close the store.

        A cancelled extraction writes nothing: its transaction rolls back and its claim
        expires, so the next ``retold extract`` reclaims the session. Calling close again
        does nothing.
        """
        if self._closed or self._closing:
            return
        self._closing = True
        try:
            if self._warming is not None and not self._warming.done():
                self._warming.cancel()
                await asyncio.wait({self._warming})
            if cancel_background:
                for task in list(self._background):
                    task.cancel()
            await self.join_background()
        except BaseException:  # the close itself was cancelled: do not leave runs behind
            pending = list(self._background)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            raise
        finally:
            self._closed = True
            await self.store.close()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close(cancel_background=exc is not None)


def _trace_metadata(run: SearchRun) -> dict[str, Any]:
    """What makes a search's trace findable: its id, who searched, how."""
    p = run.principal
    return {
        "retold_search_id": run.search_id, "agent_id": p.agent_id, "user_id": p.user_id,
        "session_id": p.session_id, "trigger": run.request.trigger,
    }  # fmt: skip


def _extraction_metadata(key: SessionKey) -> dict[str, Any]:
    return {"session_id": key.session_id, "agent_id": key.agent_id, "user_id": key.user_id}


def _activation_classifier(config: Config, chat_model: Any) -> Any:
    """The model that proposes activation categories when ``activation.classifier: model``."""
    if config.activation.classifier != "model":
        return None
    from retold.ingest.activation_model import ModelActivationClassifier

    if chat_model is not None:
        return ModelActivationClassifier.from_chat_model(chat_model, config)
    return ModelActivationClassifier.from_config(config)


def _reviewer_from_config(config: Config) -> Any:
    """The hosted reviewer an extractor needs, with a hint for hosts that pass their own models."""
    from retold.ingest.extraction.structured import reviewer_from_config

    try:
        return reviewer_from_config(config)
    except ConfigError as exc:
        raise ConfigError(
            f"{exc} Session extraction reviews every candidate before it is written: configure "
            "ingestion.review_provider or pass reviewer= to open_runtime "
            "(retold.testing.FakeReviewer in tests).",
            key=exc.key,
        ) from exc


async def _open(
    path: str | os.PathLike[str] | None,
    config: Config | str | os.PathLike[str] | None,
    clock: Clock | None,
    allow_migration_issues: bool,
    allow_embedding_mismatch: bool,
    models: dict[str, Any],
) -> Runtime:
    if config is None or isinstance(config, str | os.PathLike):
        config = load_config(config)
    elif not isinstance(config, Config):
        kind = type(config).__name__
        raise InvalidArgumentError(f"config must be a Config, a YAML path or None, got {kind}")
    clock = clock or SystemClock()
    store_path = store_location(path, config)
    store = await Store.open(
        store_path,
        busy_timeout_s=config.store.busy_timeout_seconds,
        pool_min=config.store.pool_min,
        pool_max=config.store.pool_max,
        allow_migration_issues=allow_migration_issues,
        clock=clock,
    )
    try:
        runtime = Runtime(config=config, store=store, clock=clock, **models)
        if not allow_embedding_mismatch:
            from retold.index.embedder import check_store_compatibility

            await check_store_compatibility(store, runtime.embedder)
        await _recheck_ambient_once(runtime)
    except BaseException:
        await store.close()
        raise
    return runtime


async def _recheck_ambient_once(runtime: Runtime) -> None:
    """On a store's first open by this version, demote the ambient records whose evidence is a
    quote from material the user pasted or forwarded (issue 45): written before the user's own
    words were told apart from what they quoted, they would otherwise stay in every system
    prompt. One ``store_meta`` read on every later open."""
    if await runtime.store.ambient_rechecked():
        return
    changed = await runtime.activation.recheck_ambient(actor="retold-upgrade")
    if changed:
        logger.warning("demoted %d ambient record(s) whose evidence was quoted material", len(changed))
    await runtime.store.mark_ambient_rechecked()


def store_location(path: str | os.PathLike[str] | None, config: Config) -> str | Path:
    """Where the store is: ``path``, else ``$RETOLD_STORE``, else ``config.store.path``.

    A ``postgresql://`` URL stays a string (``Path`` would fold its ``//``); anything else
    is a SQLite file.
    """
    location = os.fspath(path) if path is not None else os.environ.get("RETOLD_STORE") or config.store.path
    return location if is_postgres_url(location) else Path(location)


def missing_store_file(location: str | os.PathLike[str]) -> Path | None:
    """The SQLite file ``location`` names when no such file exists; else None.

    Opening a missing SQLite file creates an empty store, which is what :func:`open_runtime`
    means to do. A command that only reads or repairs a store (``retold check``, ``copy``'s
    source) must refuse instead, or a mistyped path reports an empty, "clean" memory. A
    ``postgresql://`` URL and ``:memory:`` answer None: the server (or nothing) decides.
    """
    text = os.fspath(location)
    if is_postgres_url(text) or text == ":memory:":
        return None
    path = Path(text)
    return None if path.is_file() else path


class _RuntimeOpener:
    """Awaitable and async context manager, like ``aiosqlite.connect``."""

    def __init__(self, *args: Any) -> None:
        self._args = args
        self._runtime: Runtime | None = None

    def __await__(self) -> Generator[Any, None, Runtime]:
        return _open(*self._args).__await__()

    async def __aenter__(self) -> Runtime:
        self._runtime = await _open(*self._args)
        return self._runtime

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runtime is not None:
            await self._runtime.close(cancel_background=exc is not None)


def open_runtime(
    path: str | os.PathLike[str] | None = None,
    config: Config | str | os.PathLike[str] | None = None,
    *,
    embedder: Any = None,
    judge: Any = None,
    reranker: Any = None,
    rewriter: Any = None,
    extractor: Any = None,
    reviewer: Any = None,
    chat_model: Any = None,
    clock: Clock | None = None,
    allow_migration_issues: bool = False,
    allow_embedding_mismatch: bool = False,
) -> _RuntimeOpener:
    """Open (creating and migrating if needed) a store and wire retold around it.

    ``path`` is a SQLite file or a ``postgresql://`` URL; it defaults to ``$RETOLD_STORE``,
    then ``config.store.path``. ``config`` is a :class:`Config`, a YAML
    path, or ``None`` for the defaults. ``None`` for a model means "build it from config";
    pass ``retold.testing.FakeEmbedder()`` and friends to replace one. ``chat_model``, a
    LangChain chat model (``init_chat_model("anthropic:…")``), answers every hosted feature
    config enables (extraction, review, rewriting, a ``<provider>:<model>`` judge) that
    is not passed itself, instead of the provider SDK client and its API key variable.

    Opening refuses (:class:`~retold.errors.EmbeddingMismatchError`) a store whose
    vectors came from another embedding model, version or width, unless
    ``allow_embedding_mismatch`` (what ``retold reembed`` uses).
    """
    models = {
        "embedder": embedder,
        "judge": judge,
        "reranker": reranker,
        "rewriter": rewriter,
        "extractor": extractor,
        "reviewer": reviewer,
        "chat_model": chat_model,
    }
    return _RuntimeOpener(path, config, clock, allow_migration_issues, allow_embedding_mismatch, models)
