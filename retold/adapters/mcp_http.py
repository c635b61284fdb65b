"""``retold mcp --http``: the streamable HTTP transport, identity bound per request by bearer token.

A tokens file (YAML) maps each bearer token to one principal::

    "4f1c...long random token...": {agent: claude, user: u1}
    "9a7e...another token...":     {agent: claude, user: u2, project: apollo}

Every principal gets its own MCP server and its own SDK session manager, built when the
server starts. A request is routed by its ``Authorization: Bearer`` header alone: a missing
or unknown token gets 401 and nothing else, and an MCP session id opened under one token is
unknown to every other token's manager, so a connection can never change whose memory it
reads. Tokens are compared in constant time (digests, every entry compared, no early exit).

Binding: 127.0.0.1 by default. On a loopback address without a tokens file, every request is
the ``--user``/``--agent`` principal (anyone on the machine can reach it, as with stdio); any
other address is refused without a tokens file. On loopback the SDK's DNS-rebinding guard
(Host and Origin checks) stays on, so a web page cannot reach the server through a rebound name.

A token holder's request body is bounded before the SDK reads it: larger than
:data:`MAX_BODY_BYTES` is 413, nested deeper than :data:`MAX_BODY_DEPTH` is 400 (the SDK's
JSON parser recurses, and 5,000 levels answered 500), each with a JSON-RPC error naming the
limit. The depth is a linear scan of the bytes, never a parse.

Each principal's retold session opens at its first request and ends when the server stops
(the idle split applies in between). The SDK is imported only here, lazily.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from retold.adapters.mcp import BoundSession, MemoryMcp, mcp_types
from retold.adapters.serving import serve_uvicorn
from retold.errors import ConfigError, InvalidArgumentError, RetoldError
from retold.models import Principal

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "MAX_BODY_BYTES", "MAX_BODY_DEPTH", "MCP_PATH", "MIN_TOKEN_CHARS", "HttpMemoryServer", "TokenMap",
    "body_depth_exceeds", "is_loopback", "serve_http",
]  # fmt: skip

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
MIN_TOKEN_CHARS = 16
"""A shorter bearer token is refused when the tokens file loads: it could be guessed."""
_TOKEN_KEYS = {"agent", "user", "project"}
MAX_BODY_BYTES = 1_048_576
"""A larger request body is refused (413) unread: the largest valid tool call is about 130 KiB."""
MAX_BODY_DEPTH = 64
"""Deeper nesting of a body's arrays and objects is refused (400) before the SDK parses it; a tool
call nests its payload (at most ``MAX_JSON_DEPTH``, 8, levels) three levels inside JSON-RPC."""
_STRUCTURE = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{}]', re.DOTALL)
"""A whole JSON string (escapes included, so a bracket inside one is not structure) or a bracket."""
_OPEN, _CLOSE = frozenset(b"[{"), frozenset(b"]}")
_UNAUTHORIZED = json.dumps(
    {"ok": False, "error": "unauthorized", "message": "send Authorization: Bearer <token>"}
).encode()


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP literal; a name that merely resolves there is not trusted."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class TokenMap:
    """Bearer token → principal (without a session id), looked up in constant time."""

    entries: tuple[tuple[bytes, Principal], ...]

    @classmethod
    def from_mapping(cls, data: Any, *, source: str = "tokens") -> TokenMap:
        if not isinstance(data, Mapping) or not data:
            raise ConfigError(f"{source}: expected a mapping of bearer token -> {{agent, user, project?}}")
        entries = []
        for index, (token, who) in enumerate(data.items(), start=1):
            where = f"{source}: entry {index}"  # never the token itself: it is a secret
            if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
                raise ConfigError(
                    f"{where}: a token must be a string of at least {MIN_TOKEN_CHARS} characters"
                )
            if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
                raise ConfigError(f"{where}: a token must be printable ASCII without spaces")
            if not isinstance(who, Mapping) or set(who) - _TOKEN_KEYS or not {"agent", "user"} <= set(who):
                raise ConfigError(f"{where}: expected {{agent: ID, user: ID, project: ID (optional)}}")
            project = who.get("project")
            try:
                principal = Principal(
                    agent_id=str(who["agent"]),
                    user_id=str(who["user"]),
                    project_id=None if project is None else str(project),
                )
            except RetoldError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
            entries.append((_digest(token), principal))
        return cls(tuple(entries))

    @classmethod
    def load(cls, path: str | Path) -> TokenMap:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the tokens file {path}: {type(exc).__name__}") from exc
        return cls.from_mapping(data, source=str(path))

    def principals(self) -> list[Principal]:
        return list(dict.fromkeys(p for _, p in self.entries))

    def lookup(self, token: str | None) -> Principal | None:
        """The token's principal; every entry is compared whatever matches, so timing says nothing."""
        presented = _digest(token or "")
        found = None
        for digest, principal in self.entries:
            if hmac.compare_digest(digest, presented) and token:
                found = principal
        return found


def _bearer(scope: Mapping[str, Any]) -> str | None:
    """The one ``Authorization: Bearer`` token of a request, or None (absent, repeated, other scheme)."""
    values = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
    if len(values) != 1:
        return None
    scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


_Send = Callable[[dict[str, Any]], Awaitable[None]]
_Receive = Callable[[], Awaitable[dict[str, Any]]]


async def _send_json(send: _Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                *headers,
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _send_unauthorized(send: _Send) -> None:
    await _send_json(send, 401, _UNAUTHORIZED, (b"www-authenticate", b'Bearer realm="retold"'))


async def _refuse_body(send: _Send, status: int, message: str, limit: int) -> None:
    """A JSON-RPC error without an id (the request was never parsed), naming the limit."""
    error = {"code": -32600, "message": message, "data": {"limit": limit}}
    await _send_json(send, status, json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode())


def body_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether ``body`` nests arrays and objects deeper than ``limit``: one pass, no recursion.

    Exact for valid JSON (every string is skipped whole, so brackets and escaped quotes inside
    one do not count); for invalid JSON it may over-count, which only refuses a body the SDK
    would refuse anyway.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # most bodies: too few brackets to nest that deep, counted at C speed
    depth = 0
    for match in _STRUCTURE.finditer(body):
        char = body[match.start()]
        if char in _OPEN:
            depth += 1
            if depth > limit:
                return True
        elif char in _CLOSE:
            depth = max(depth - 1, 0)
    return False


def _declared_length(scope: Mapping[str, Any]) -> int | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _bounded_body(receive: _Receive, send: _Send, scope: Mapping[str, Any]) -> _Receive | None:
    """Read a request's body within the limits and hand the SDK a ``receive`` that replays it.

    None when the request was answered here (413, 400) or the client went away; the body is
    read no further than :data:`MAX_BODY_BYTES`, whatever it declares.
    """
    too_large = f"request body is larger than {MAX_BODY_BYTES} bytes"
    declared = _declared_length(scope)
    if declared is not None and declared > MAX_BODY_BYTES:
        await _refuse_body(send, 413, too_large, MAX_BODY_BYTES)
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # http.disconnect: nobody to answer
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            await _refuse_body(send, 413, too_large, MAX_BODY_BYTES)
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    if body_depth_exceeds(body, MAX_BODY_DEPTH):
        too_deep = f"request body is nested deeper than {MAX_BODY_DEPTH} levels"
        await _refuse_body(send, 400, too_deep, MAX_BODY_DEPTH)
        return None
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replay


class HttpMemoryServer:
    """The ASGI app: token → that principal's MCP session manager; 401 for anything else."""

    def __init__(
        self,
        rt: Runtime,
        *,
        session_id: str,
        tokens: TokenMap | None = None,
        principal: Principal | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        if tokens is None and principal is None:
            raise InvalidArgumentError(
                "an MCP HTTP server needs a tokens file or (on loopback) one principal"
            )
        if tokens is None and not is_loopback(host):
            raise InvalidArgumentError(
                f"refusing to serve memory on {host} without a tokens file: pass --tokens PATH "
                "(bearer token -> principal), or bind to 127.0.0.1"
            )
        self.rt = rt
        self.host = host
        self.tokens = tokens
        principals = tokens.principals() if tokens is not None else [principal]
        self._sessions: dict[Principal, BoundSession] = {
            p: BoundSession(rt, replace(p, session_id=session_id)) for p in principals if p is not None
        }
        self._managers: dict[Principal, Any] = {}

    def _security(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        if not is_loopback(self.host):
            return None  # the bearer token is the guard; Host names are the operator's business
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )

    @asynccontextmanager
    async def lifespan(self, app: Any = None) -> Any:
        """Run one SDK session manager per principal; end every retold session on the way out."""
        mcp_types()
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        async with AsyncExitStack() as stack:
            for principal, session in self._sessions.items():
                stack.push_async_callback(session.close)
                manager = StreamableHTTPSessionManager(
                    app=MemoryMcp(self.rt, session).build(), security_settings=self._security()
                )
                await stack.enter_async_context(manager.run())
                self._managers[principal] = manager
            try:
                yield
            finally:
                self._managers.clear()

    def _principal_for(self, scope: Mapping[str, Any]) -> Principal | None:
        if self.tokens is None:
            return next(iter(self._sessions))
        return self.tokens.lookup(_bearer(scope))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan_protocol(receive, send)
            return
        if scope["type"] != "http":
            return
        principal = self._principal_for(scope)
        manager = self._managers.get(principal) if principal is not None else None
        if manager is None:
            await _send_unauthorized(send)
            return
        if scope.get("path", "").rstrip("/") != MCP_PATH:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope.get("method") == "POST":  # the only method whose body the SDK parses
            receive = await _bounded_body(receive, send, scope)
            if receive is None:
                return
        await manager.handle_request(scope, receive, send)

    async def _lifespan_protocol(self, receive: Any, send: Any) -> None:
        """ASGI lifespan, so uvicorn (or any ASGI server) starts and stops the managers."""
        message = await receive()
        assert message["type"] == "lifespan.startup"
        context = self.lifespan()
        try:
            await context.__aenter__()
        except Exception as exc:
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await context.__aexit__(None, None, None)
        finally:
            await send({"type": "lifespan.shutdown.complete"})


async def serve_http(
    app: HttpMemoryServer, *, port: int, on_ready: Callable[[int], None] | None = None
) -> None:
    """Serve ``app`` with uvicorn on ``app.host``:``port`` (0: any free port) until stopped.

    ``on_ready`` gets the bound port once the managers run. Cancelling this coroutine shuts
    the server down gracefully, so every retold session is ended before it returns.
    """
    mcp_types()  # the mcp extra (uvicorn with it), or an error naming it
    await serve_uvicorn(app, host=app.host, port=port, on_ready=on_ready)
