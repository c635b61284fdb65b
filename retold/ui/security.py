"""Who may reach ``retold ui`` and what they may change: settings, the token guard, CSRF.

* **Binding.** 127.0.0.1 by default. Any other interface needs a token (``--token`` or
  ``RETOLD_UI_TOKEN``): :meth:`UiSettings.check` refuses to build the settings otherwise.
* **The token.** With a token set, every request carries it: ``Authorization: Bearer
  <token>``, or the cookie a ``?token=<token>`` visit sets once (HttpOnly, SameSite=Strict,
  answered by a redirect to the same address without the token, so it leaves the address
  bar and the history). The cookie holds an HMAC of the token, not the token. Both are
  compared as SHA-256 digests with :func:`hmac.compare_digest`, in constant time.
* **Host names.** On loopback without a token, a request must name 127.0.0.1, localhost or
  [::1] in its Host header, so a page that rebinds its own DNS name to 127.0.0.1 cannot
  read the inspector through the visitor's browser.
* **Forms that change something** carry a per-process CSRF token (:attr:`UiSettings.csrf`).
* Every response forbids scripts, frames and outside resources (``Content-Security-Policy``)
  and caching, and sends no referrer.

Nothing here imports Starlette: the guard is plain ASGI, so ``import retold.ui`` stays lean.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from retold.errors import InvalidArgumentError
from retold.models import validate_id

__all__ = ["COOKIE", "MIN_TOKEN_CHARS", "TokenGuard", "UiSettings", "default_operator", "is_loopback"]

COOKIE = "retold_ui"
MIN_TOKEN_CHARS = 16
"""A shorter token is refused: it could be guessed."""
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
        b"frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP literal; a name that merely resolves there is not trusted.

    The same rule as ``retold mcp --http`` (:func:`retold.adapters.mcp_http.is_loopback`),
    kept here so that importing the UI does not import the MCP adapter.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_operator() -> str:
    """The OS user running the inspector: who the audit trail names for an admin action."""
    try:
        return getpass.getuser() or "operator"
    except (KeyError, OSError):  # no passwd entry (a container's anonymous uid)
        return "operator"


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class UiSettings:
    """How one ``retold ui`` process serves: where, to whom, and whether it may change anything."""

    host: str = "127.0.0.1"
    """The interface bound; anything but loopback needs ``token``."""
    token: str | None = None
    """Every request must carry it when set (header, or the cookie ``?token=`` sets)."""
    allow_admin: bool = False
    """Forget and erase, each behind a confirmation form; read-only (403) otherwise."""
    operator: str = field(default_factory=default_operator)
    """The actor admin actions are audited under."""
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """The per-process token every form that changes something must carry."""

    def __post_init__(self) -> None:
        validate_id("operator", self.operator, allow_slash=True, max_len=200)
        if self.token is not None:
            token = self.token
            if len(token) < MIN_TOKEN_CHARS or not token.isascii() or not token.isprintable() or " " in token:
                raise InvalidArgumentError(
                    f"the UI token must be at least {MIN_TOKEN_CHARS} printable ASCII characters without "
                    "spaces; make one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
                )
        elif not is_loopback(self.host):
            raise InvalidArgumentError(
                f"refusing to serve the memory inspector on {self.host} without a token: pass --token "
                "(or set RETOLD_UI_TOKEN), or bind to 127.0.0.1"
            )

    def csrf_ok(self, presented: object) -> bool:
        """Whether a form carried this process's CSRF token (constant time)."""
        return isinstance(presented, str) and hmac.compare_digest(_digest(presented), _digest(self.csrf))


class TokenGuard:
    """Plain ASGI middleware: the token, the Host check and the security headers, before any route."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], settings: UiSettings) -> None:
        self.app = app
        self.settings = settings
        self._token = None if settings.token is None else _digest(settings.token)
        self._cookie = None if settings.token is None else self.cookie_value(settings.token)
        self._check_host = settings.token is None

    @staticmethod
    def cookie_value(token: str) -> str:
        """What the cookie holds: an HMAC of the token (the token itself never sits in a cookie jar)."""
        return hmac.new(token.encode(), b"retold-ui-cookie", hashlib.sha256).hexdigest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)

        async def secured(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if self._check_host and not _loopback_host(headers.get(b"host", [b""])[0]):
            await _plain(secured, 400, "unknown Host: open the inspector as http://127.0.0.1:PORT/")
            return
        if self._token is not None:
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            offered = [v for k, v in query if k == "token"]
            if offered:
                if len(offered) == 1 and self._matches(offered[0]):
                    await self._set_cookie(scope, query, secured)
                else:
                    await _plain(secured, 401, "wrong token")
                return
            if not (self._bearer_ok(headers) or self._cookie_ok(headers)):
                await _plain(secured, 401, "this inspector needs its token: open it once as /?token=<token>")
                return
        await self.app(scope, receive, secured)

    def _matches(self, token: str) -> bool:
        assert self._token is not None
        return hmac.compare_digest(_digest(token), self._token) and bool(token)

    def _bearer_ok(self, headers: dict[bytes, list[bytes]]) -> bool:
        values = headers.get(b"authorization", [])
        if len(values) != 1:
            return False
        scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
        return scheme.lower() == "bearer" and self._matches(token.strip())

    def _cookie_ok(self, headers: dict[bytes, list[bytes]]) -> bool:
        assert self._cookie is not None
        jar: SimpleCookie = SimpleCookie()
        for value in headers.get(b"cookie", []):
            try:
                jar.load(value.decode("latin-1"))
            except CookieError:
                continue
        morsel = jar.get(COOKIE)
        return morsel is not None and hmac.compare_digest(_digest(morsel.value), _digest(self._cookie))

    async def _set_cookie(self, scope: Scope, query: list[tuple[str, str]], send: Send) -> None:
        assert self.settings.token is not None
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        location = (scope.get("root_path", "") + scope.get("path", "/")) or "/"
        cookie = f"{COOKIE}={self.cookie_value(self.settings.token)}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", (location + ("?" + rest if rest else "")).encode("utf-8", "replace")),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _headers(scope: Scope) -> dict[bytes, list[bytes]]:
    found: dict[bytes, list[bytes]] = {}
    for key, value in scope.get("headers", ()):
        found.setdefault(key.lower(), []).append(value)
    return found


def _loopback_host(value: bytes) -> bool:
    host = value.decode("latin-1").strip().lower()
    if host.startswith("["):
        name = host[: host.find("]") + 1] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name in _LOOPBACK_NAMES


async def _plain(send: Send, status: int, text: str) -> None:
    body = f"{text}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="retold ui"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
