"""The inspector's routes: input checked by :mod:`.inputs`, page data from :mod:`.views` and :mod:`.stages`.

One Starlette app per process. Every id in a URL is checked before it reaches the store
(an id no one could have written is a 404 like an unknown one), every query parameter and
form field is bounded (a bad one is a 400 page that names it), and no store error becomes
a 500 page: :class:`~retold.errors.NotFoundError` is 404, a refused argument or config
value 400. Admin routes answer 403 unless the process runs with ``allow_admin``, and their
POSTs need the process's CSRF token and a ticked confirmation.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from retold.adapters.serving import serve_uvicorn
from retold.errors import ConfigError, InvalidArgumentError, MissingExtraError, NotFoundError
from retold.ingest.write.revision import Reviser
from retold.models import ENTITY_KINDS, RECORD_TYPES, STATUSES, Scope, SearchRequest, SessionKey
from retold.retrieve.render import short_id
from retold.runtime import Runtime
from retold.tools.limits import MAX_K, MAX_QUERIES, MAX_QUERY_CHARS, MAX_REASON_CHARS
from retold.ui import stages, views
from retold.ui.inputs import (
    BadInput,
    Forbidden,
    acting_as,
    choice,
    floors_of,
    page_of,
    search_principal,
    text,
    url_id,
    whole,
)
from retold.ui.security import TokenGuard, UiSettings

__all__ = ["Links", "create_app", "serve"]

TEMPLATES = Path(__file__).parent / "templates"
RuntimeSource = Runtime | Callable[[], AbstractAsyncContextManager[Runtime]]


def _starlette() -> Any:
    """``starlette.applications``, or MissingExtraError naming ``retold[ui]`` for any missing part."""
    try:
        import jinja2  # noqa: F401
        import starlette.applications as applications
    except ImportError as exc:
        raise MissingExtraError(exc.name or "starlette", "ui", "retold ui (the memory inspector)") from exc
    if not (importlib.util.find_spec("python_multipart") or importlib.util.find_spec("multipart")):
        raise MissingExtraError("python-multipart", "ui", "retold ui (the memory inspector)")
    return applications


# --- links and rendering ----------------------------------------------------------------------


class Links:
    """URLs that keep the viewer: every link from a principal's page stays in that principal's view."""

    def __init__(self, as_param: str | None) -> None:
        self.as_param = as_param

    def __call__(self, path: str, **params: Any) -> str:
        pairs = [(k.replace("__", "."), v) for k, v in params.items() if v is not None and v != ""]
        if self.as_param is not None:
            pairs.append(("as", self.as_param))
        return path + ("?" + urlencode(pairs) if pairs else "")

    def record(self, record_id: str) -> str:
        return self(f"/records/{quote(record_id, safe='')}")

    def scope(self, scope: Scope) -> str:
        return self(f"/scopes/{quote(scope.kind, safe='')}/{quote(scope.id, safe='/')}")

    def entity(self, entity_id: str) -> str:
        return self(f"/entities/{quote(entity_id, safe='')}")

    def session(self, agent_id: str, user_id: str, session_id: str) -> str:
        parts = (quote(p, safe="") for p in (agent_id, user_id, session_id))
        return self("/sessions/" + "/".join(parts))

    def search(self, search_id: str, **params: Any) -> str:
        return self(f"/searches/{quote(search_id, safe='')}", **params)


def _ts(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value or "")[:19].replace("T", " ")


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _templates() -> Any:
    from starlette.templating import Jinja2Templates

    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters.update(short=short_id, ts=_ts, pretty=_pretty, q=lambda v: quote(str(v), safe=""))
    templates.env.globals.update(STATUSES=STATUSES, RECORD_TYPES=RECORD_TYPES, ENTITY_KINDS=ENTITY_KINDS)
    return templates


def create_app(
    source: RuntimeSource,
    settings: UiSettings | None = None,
    *,
    warm_report: Callable[[str], None] | None = None,
) -> Any:
    """The inspector as an ASGI app over a runtime, or over a factory the app opens and closes.

    ``source`` is an open :class:`~retold.runtime.Runtime` (the caller closes it) or a
    zero-argument callable returning an async context manager that yields one, such as
    ``lambda: retold.open_runtime("memory.sqlite")``, entered in the app's lifespan.

    At start-up the lifespan warms the embedder in the background
    (:meth:`~retold.runtime.Runtime.warm_in_background`, telling ``warm_report``; default:
    the runtime's logger), so the first live search does not pay the model's load; the app
    serves meanwhile.
    """
    applications = _starlette()
    from starlette.requests import Request
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Route

    settings = settings or UiSettings()
    templates = _templates()

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if isinstance(source, Runtime):
            app.state.rt = source
            source.warm_in_background(warm_report)
            yield
            return
        async with source() as rt:
            app.state.rt = rt
            rt.warm_in_background(warm_report)
            yield

    def runtime(request: Request) -> Runtime:
        return request.app.state.rt if hasattr(request.app.state, "rt") else source  # type: ignore[return-value]

    async def viewer(request: Request, params: Mapping[str, Any] | None = None) -> views.Viewer:
        principal = acting_as(request.query_params if params is None else params)
        return await views.Viewer.acting_as(runtime(request).store, principal)

    def render(
        request: Request, name: str, who: views.Viewer, context: dict[str, Any], code: int = 200
    ) -> Response:
        context = {**context, "viewer": who, "links": Links(who.as_param), "settings": settings}
        return templates.TemplateResponse(request, name, context, status_code=code)

    def page(name: str, build: Callable[..., Any], *args: Callable[[Request], Any]) -> Any:
        """A GET page: the viewer, then each ``arg(request)``, passed to ``build`` after the store."""

        async def endpoint(request: Request) -> Response:
            who = await viewer(request)
            values = [arg(request) for arg in args]
            return render(request, f"{name}.html", who, await build(runtime(request).store, who, *values))

        return endpoint

    def q(request: Request) -> Mapping[str, Any]:
        return request.query_params

    def scope_arg(request: Request) -> Scope:
        kind = request.path_params["kind"]
        try:
            return Scope(kind, request.path_params["scope_id"])  # type: ignore[arg-type]
        except InvalidArgumentError as exc:
            raise NotFoundError(f"no scope {kind[:20]!r}") from exc

    def session_arg(request: Request) -> SessionKey:
        p = request.path_params
        try:
            return SessionKey(p["agent_id"], p["user_id"], p["session_id"])
        except InvalidArgumentError as exc:
            raise NotFoundError("no such session") from exc

    async def search_page(request: Request) -> Response:
        who = await viewer(request)
        search_id = url_id(request.path_params["search_id"], "search")
        floors = floors_of(request.query_params)
        rt = runtime(request)
        data = await stages.search_page(rt.store, who, rt.config, search_id, floors)
        return render(request, "search.html", who, data)

    async def search_form(request: Request) -> Response:
        who = await viewer(request)
        return render(request, "search_form.html", who, {"csrf": settings.csrf})

    async def search_run(request: Request) -> Response:
        form = await request.form()
        if not settings.csrf_ok(form.get("csrf")):
            raise Forbidden("the form is missing this inspector's CSRF token: reload the search page")
        who = await viewer(request, form)
        principal = search_principal(form, who)
        queries = [q for q in str(form.get("queries") or "").splitlines() if q.strip()]
        if not 1 <= len(queries) <= MAX_QUERIES:
            raise BadInput(f"queries: give 1 to {MAX_QUERIES} queries, one per line")
        checked = [text({"queries": q}, "queries", max_len=MAX_QUERY_CHARS) or "" for q in queries]
        types = [str(t) for t in form.getlist("types")]
        if any(t not in RECORD_TYPES for t in types):
            raise BadInput(f"types must be drawn from {', '.join(RECORD_TYPES)}")
        request_ = SearchRequest(
            queries=checked,
            types=types or None,
            k=whole(form, "k", 1, MAX_K, None),
            include_history=form.get("history") is not None,
        )
        search_id = await stages.run_search(runtime(request), principal, request_)
        return RedirectResponse(Links(who.as_param).search(search_id), status_code=303)

    def admin(request: Request) -> None:
        if not settings.allow_admin:
            raise Forbidden("this inspector is read-only: restart it with --allow-admin to forget or erase")

    async def confirmed(request: Request) -> Mapping[str, Any]:
        admin(request)
        form = await request.form()
        if not settings.csrf_ok(form.get("csrf")):
            raise Forbidden(
                "the form is missing this inspector's CSRF token: open the confirmation page again"
            )
        if form.get("confirm") != "yes":
            raise BadInput("confirm: tick the box to confirm; nothing was changed")
        if text(form, "reason", max_len=MAX_REASON_CHARS) is None:
            raise BadInput("reason: say why; it is recorded on the audit event")
        return form

    async def forget_form(request: Request) -> Response:
        admin(request)
        record_id = url_id(request.path_params["record_id"], "record")
        record = await runtime(request).store.get_record(record_id)
        if record is None:
            raise NotFoundError(f"no record {record_id!r}")
        return render(
            request, "confirm_forget.html", views.Viewer(), {"record": record, "csrf": settings.csrf}
        )

    async def forget(request: Request) -> Response:
        form = await confirmed(request)
        record_id = url_id(request.path_params["record_id"], "record")
        rt = runtime(request)
        reason = text(form, "reason", max_len=MAX_REASON_CHARS) or ""
        await Reviser(rt.store, rt.index).forget(record_id, reason=reason, actor=settings.operator)
        return RedirectResponse(Links(None).record(record_id) + "?done=forgotten", status_code=303)

    def erase_target(params: Mapping[str, Any]) -> tuple[str, str]:
        kind = choice(params, "kind", ("record", "session", "user"))
        target = text(params, "target", max_len=200)
        if kind is None or target is None:
            raise BadInput("erase needs kind (record, session or user) and target")
        return kind, target

    async def erase_form(request: Request) -> Response:
        admin(request)
        kind, target = erase_target(request.query_params)
        rt = runtime(request)
        plan = await rt.ops.erase(**{kind: target}, reason="planning", actor=settings.operator, dry_run=True)
        context = {"kind": kind, "target": target, "plan": plan, "csrf": settings.csrf}
        return render(request, "confirm_erase.html", views.Viewer(), context)

    async def erase(request: Request) -> Response:
        form = await confirmed(request)
        kind, target = erase_target(form)
        reason = text(form, "reason", max_len=MAX_REASON_CHARS) or ""
        report = await runtime(request).ops.erase(**{kind: target}, reason=reason, actor=settings.operator)
        context = {"kind": kind, "target": target, "report": report}
        return render(request, "erased.html", views.Viewer(), context)

    async def failed(request: Request, exc: Exception) -> Response:
        from starlette.exceptions import HTTPException

        status, message = 500, "the inspector could not draw this page"
        if isinstance(exc, HTTPException):
            status, message = exc.status_code, str(exc.detail)
        elif isinstance(exc, NotFoundError):
            status, message = 404, str(exc)
        elif isinstance(exc, Forbidden):
            status, message = 403, str(exc)
        elif isinstance(exc, InvalidArgumentError | ConfigError):
            status, message = 400, str(exc)
        context = {"status_code": status, "message": message}
        return render(request, "error.html", views.Viewer(), context, code=status)

    def record_arg(request: Request) -> str:
        return url_id(request.path_params["record_id"], "record")

    def entity_arg(request: Request) -> str:
        return url_id(request.path_params["entity_id"], "entity")

    def scope_args(store: Any, who: views.Viewer, scope: Scope, p: Mapping[str, Any]) -> Any:
        return views.scope_page(store, who, scope, choice(p, "status", STATUSES), page_of(p))

    def entities_args(store: Any, who: views.Viewer, p: Mapping[str, Any]) -> Any:
        return views.entities_page(store, who, choice(p, "kind", ENTITY_KINDS), page_of(p))

    def session_args(store: Any, who: views.Viewer, key: SessionKey, p: Mapping[str, Any]) -> Any:
        return views.session_page(store, who, key, page_of(p))

    def audit_args(store: Any, who: views.Viewer, p: Mapping[str, Any]) -> Any:
        return views.audit_page(store, who, text(p, "kind"), text(p, "actor"), page_of(p))

    def metrics_args(store: Any, who: views.Viewer, p: Mapping[str, Any]) -> Any:
        days = whole(p, "days", 1, 366, views.METRICS_DAYS) or views.METRICS_DAYS
        return views.metrics_page(store, who, days)

    def paged(build: Callable[..., Any]) -> Callable[..., Any]:
        return lambda store, who, p: build(store, who, page_of(p))

    routes = [
        Route("/", page("home", views.home)),
        Route("/scopes/{kind}/{scope_id:path}", page("scope", scope_args, scope_arg, q)),
        Route("/records/{record_id}", page("record", views.record_page, record_arg)),
        Route("/records/{record_id}/forget", forget_form, methods=["GET"]),
        Route("/records/{record_id}/forget", forget, methods=["POST"]),
        Route("/erase", erase_form, methods=["GET"]),
        Route("/erase", erase, methods=["POST"]),
        Route("/entities", page("entities", entities_args, q)),
        Route("/entities/{entity_id}", page("entity", views.entity_page, entity_arg)),
        Route("/sessions", page("sessions", paged(views.sessions_page), q)),
        Route("/sessions/{agent_id}/{user_id}/{session_id}", page("session", session_args, session_arg, q)),
        Route("/audit", page("audit", audit_args, q)),
        Route("/searches", page("searches", paged(views.searches_page), q)),
        Route("/searches/{search_id}", search_page),
        Route("/search", search_form, methods=["GET"]),
        Route("/search", search_run, methods=["POST"]),
        Route("/plots", page("plots", views.plots_page)),
        Route("/metrics", page("metrics", metrics_args, q)),
    ]
    app = applications.Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={Exception: failed, 404: failed, 405: failed},
    )
    from starlette.exceptions import HTTPException

    for kind in (HTTPException, NotFoundError, Forbidden, InvalidArgumentError, ConfigError):
        app.add_exception_handler(kind, failed)
    app.state.settings = settings
    return TokenGuard(app, settings)


async def serve(app: Any, *, host: str, port: int, on_ready: Callable[[int], None] | None = None) -> None:
    """Serve ``app`` with uvicorn on ``host``:``port`` (0: any free port) until stopped.

    ``on_ready`` gets the bound port. Cancelling this coroutine shuts the server down.
    """
    try:
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("uvicorn", "ui", "retold ui (the memory inspector)") from exc
    await serve_uvicorn(app, host=host, port=port, on_ready=on_ready)
