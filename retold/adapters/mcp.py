"""retold's memory as an MCP server (``retold mcp``), on the official ``mcp`` SDK, 1.x and 2.x lines.

What an MCP client gets, for the one principal the host bound to the server:

* Tools: the five memory tools with exactly the provider-portable schemas
  ``rt.tools.atool_schemas(principal)`` publishes (``memory_write`` only when something is
  writable). A call runs ``rt.tools.call``; its result is the text a model should read
  (the §10.9 rendering for a search, one-line JSON otherwise), the result dict as
  ``structuredContent`` (both without stage timings: clients hand either to the model; see
  :func:`~retold.tools.payloads.model_view`), and ``isError`` when ``ok`` is false. Bad
  input, hostile input and unknown tool names are answered with retold's structured refusal,
  never a protocol error.
* Prompt ``memory_policy``: the §13 policy (tool_only: no host-issued recall over MCP); the
  same text is the server's ``instructions``.
* Resources: ``retold://records/{id}`` (a full or short id) reads what ``memory_get`` returns
  for that id, so a foreign id reads exactly like a missing one; the listing shows the
  principal's newest live records by label only (type, scope, status, source), never their text.

Identity is the host's: a server serves one :class:`BoundSession`, never a principal taken from
a request. The MCP connection is one retold session, started before serving and ended (so
extraction can run) when the server stops. MCP clients send no conversation turns, so the
transcript stays empty: a ``user_statement`` write cannot find its quoted evidence and is
stored, by the ordinary evidence rule, as a provisional ``agent_inference``.

The SDK is imported only when a server is built; without it :class:`~retold.errors.MissingExtraError`
names ``retold[mcp]``. Handlers are written once against the shared wire types and registered
through :func:`build_server`, which speaks both SDK lines' low-level ``Server`` APIs (1.x:
the ``request_handlers`` map; 2.x: the ``on_*`` constructor arguments).
"""

from __future__ import annotations

import inspect
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from retold.adapters.common import tool_text
from retold.errors import MissingExtraError, StoreClosedError
from retold.models import Principal
from retold.policy.grants import readable_scopes
from retold.policy.prompt import policy_text
from retold.retrieve.render import json_line, short_id
from retold.tools.handlers import ToolError
from retold.tools.payloads import model_view
from retold.util import format_ts

if TYPE_CHECKING:
    from retold.runtime import Runtime

__all__ = [
    "MAX_LISTED_RESOURCES",
    "POLICY_PROMPT",
    "RECORD_URI_PREFIX",
    "RECORD_URI_TEMPLATE",
    "SERVER_NAME",
    "BoundSession",
    "MemoryMcp",
    "build_server",
    "mcp_types",
    "sdk_major",
    "serve_stdio",
]

SERVER_NAME = "retold"
POLICY_PROMPT = "memory_policy"
RECORD_URI_PREFIX = "retold://records/"
RECORD_URI_TEMPLATE = RECORD_URI_PREFIX + "{id}"
MAX_LISTED_RESOURCES = 50
"""resources/list shows at most this many of the newest readable records (no paging)."""
_MODE = "tool_only"  # an MCP host issues no searches of its own (spec §14.1)
_READ_ONLY = ("memory_search", "memory_get")
_DESTRUCTIVE = ("memory_revise", "memory_forget")


def mcp_types() -> Any:
    """``mcp.types``, or MissingExtraError naming ``retold[mcp]``."""
    try:
        import mcp.types as types
    except ImportError as exc:
        raise MissingExtraError("mcp", "mcp", "retold mcp (the MCP server)") from exc
    return types


def sdk_major() -> int:
    """The installed SDK's major version (1 or 2): the two lines register handlers differently."""
    mcp_types()
    from mcp.server.lowlevel import Server

    return 2 if "on_call_tool" in inspect.signature(Server.__init__).parameters else 1


def _retold_version() -> str:
    try:
        return version("retold")
    except PackageNotFoundError:  # a source checkout run without installing
        return "0"


def _protocol_error(code: int, message: str) -> Exception:
    """A JSON-RPC error for what is not a tool call (an unknown prompt), in either SDK line."""
    types = mcp_types()
    from mcp.shared import exceptions

    if hasattr(exceptions, "MCPError"):  # 2.x
        return exceptions.MCPError(code, message)
    return exceptions.McpError(types.ErrorData(code=code, message=message))


class BoundSession:
    """The one principal an MCP server serves, and its retold session.

    :meth:`principal` opens the session (idempotent) before every request, so a connection
    idle past ``ingestion.session_idle_timeout_minutes`` continues under a split session
    (``s1~2``) exactly as a framework adapter's would. :meth:`close` ends it once.
    """

    def __init__(self, rt: Runtime, principal: Principal) -> None:
        if not isinstance(principal, Principal) or not principal.session_id:
            raise TypeError("BoundSession needs a retold.Principal with a session_id, bound by the host")
        self._rt = rt
        self._principal = principal
        self._started = False
        self._closed = False

    @property
    def bound(self) -> Principal:
        """The principal as the host bound it (its session id may since have split)."""
        return self._principal

    async def principal(self) -> Principal:
        if self._closed:
            raise StoreClosedError("this MCP session has ended")
        self._principal = await self._rt.hooks.on_session_start(self._principal)
        self._started = True
        return self._principal

    async def close(self) -> None:
        """End the session (extraction is scheduled by the runtime); later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            await self._rt.hooks.on_session_end(self._principal)


class MemoryMcp:
    """The MCP handlers for one bound principal, written once against the wire types."""

    def __init__(self, rt: Runtime, session: BoundSession) -> None:
        self.rt = rt
        self.session = session
        self.types = mcp_types()
        self.policy = policy_text(_MODE)

    # --- tools --------------------------------------------------------------------------------

    async def list_tools(self) -> Any:
        principal = await self.session.principal()
        tools = [
            self.types.Tool.model_validate(
                {
                    "name": s["name"],
                    "description": s["description"],
                    "inputSchema": s["input_schema"],
                    "annotations": {
                        "readOnlyHint": s["name"] in _READ_ONLY,
                        "destructiveHint": s["name"] in _DESTRUCTIVE,
                        "openWorldHint": False,
                    },
                }
            )
            for s in await self.rt.tools.atool_schemas(principal)
        ]
        return self.types.ListToolsResult(tools=tools)

    async def call_tool(self, name: Any, arguments: Any) -> Any:
        """Always a result: a refusal is ``isError`` with retold's error dict, never an exception."""
        principal = await self.session.principal()
        result = await self.rt.tools.call(principal, name, {} if arguments is None else arguments)
        shown = name if isinstance(name, str) else ""
        return self.types.CallToolResult.model_validate(
            {
                "content": [{"type": "text", "text": tool_text(shown, result)}],
                "structuredContent": model_view(result),  # clients may show the model this, not the text
                "isError": not result.get("ok", False),
            }
        )

    # --- prompts ------------------------------------------------------------------------------

    async def list_prompts(self) -> Any:
        prompt = self.types.Prompt(
            name=POLICY_PROMPT,
            description="retold's memory policy: how to use the memory tools. Add it to the system prompt.",
            arguments=[],
        )
        return self.types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(self, name: Any, arguments: Any) -> Any:
        if name != POLICY_PROMPT:
            raise _protocol_error(
                self.types.INVALID_PARAMS, f"unknown prompt {str(name)[:80]!r}; prompts: {POLICY_PROMPT}"
            )
        return self.types.GetPromptResult.model_validate(
            {
                "description": "retold's memory policy",
                "messages": [{"role": "user", "content": {"type": "text", "text": self.policy}}],
            }
        )

    # --- resources ----------------------------------------------------------------------------

    async def list_resources(self) -> Any:
        """The newest live readable records, by label: their text is read through the resource."""
        principal = await self.session.principal()
        store = self.rt.store
        readable = await readable_scopes(store, principal)
        ids = sorted(await store.eligible_ids(readable, now=self.rt.clock.now()), reverse=True)
        records = sorted(
            await store.get_records(ids[:MAX_LISTED_RESOURCES]), key=lambda r: r.id, reverse=True
        )
        resources = [
            self.types.Resource.model_validate(
                {
                    "uri": RECORD_URI_PREFIX + r.id,
                    "name": f"memory {short_id(r.id)}",
                    "description": f"{r.type} memory in {r.scope}: {r.status}, source {r.source_kind}, "
                    f"created {format_ts(r.created_at)}",
                    "mimeType": "application/json",
                }
            )
            for r in records
            if r.scope in readable
        ]
        return self.types.ListResourcesResult(resources=resources)

    async def list_resource_templates(self) -> Any:
        template = self.types.ResourceTemplate.model_validate(
            {
                "uriTemplate": RECORD_URI_TEMPLATE,
                "name": "memory",
                "description": "One memory by full or short id: what memory_get returns for it.",
                "mimeType": "application/json",
            }
        )
        return self.types.ListResourceTemplatesResult(resourceTemplates=[template])

    async def read_resource(self, uri: Any) -> Any:
        """memory_get for the id in the URI: the same payload, the same not_found for a foreign id."""
        text = str(uri)
        if text.startswith(RECORD_URI_PREFIX) and text[len(RECORD_URI_PREFIX) :]:
            principal = await self.session.principal()
            ref = unquote(text[len(RECORD_URI_PREFIX) :])
            result = await self.rt.tools.call(principal, "memory_get", {"ids": [ref]})
        else:
            result = ToolError(
                "invalid_input", f"unknown resource; memories are read as {RECORD_URI_TEMPLATE}"
            ).as_dict()
        contents = {"uri": text, "mimeType": "application/json", "text": json_line(result)}
        return self.types.ReadResourceResult.model_validate({"contents": [contents]})

    def build(self) -> Any:
        return build_server(self)


def build_server(handlers: MemoryMcp) -> Any:
    """A low-level ``mcp`` Server serving ``handlers``, in whichever SDK line is installed."""
    types = mcp_types()
    from mcp.server.lowlevel import Server

    name, release, instructions = SERVER_NAME, _retold_version(), handlers.policy
    if sdk_major() >= 2:

        async def list_tools(ctx: Any, params: Any) -> Any:
            return await handlers.list_tools()

        async def call_tool(ctx: Any, params: Any) -> Any:
            return await handlers.call_tool(params.name, params.arguments)

        async def list_prompts(ctx: Any, params: Any) -> Any:
            return await handlers.list_prompts()

        async def get_prompt(ctx: Any, params: Any) -> Any:
            return await handlers.get_prompt(params.name, params.arguments)

        async def list_resources(ctx: Any, params: Any) -> Any:
            return await handlers.list_resources()

        async def list_templates(ctx: Any, params: Any) -> Any:
            return await handlers.list_resource_templates()

        async def read_resource(ctx: Any, params: Any) -> Any:
            return await handlers.read_resource(params.uri)

        return Server(
            name,
            version=release,
            instructions=instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
        )

    server = Server(name, version=release, instructions=instructions)

    def register(request_type: Any, run: Any) -> None:
        async def handler(request: Any) -> Any:
            return types.ServerResult(await run(request.params))

        server.request_handlers[request_type] = handler

    # The raw map, not the decorators: 1.x's call_tool decorator would validate arguments with
    # its own messages and turn exceptions into text; retold's handlers answer every call.
    register(types.ListToolsRequest, lambda params: handlers.list_tools())
    register(types.CallToolRequest, lambda params: handlers.call_tool(params.name, params.arguments))
    register(types.ListPromptsRequest, lambda params: handlers.list_prompts())
    register(types.GetPromptRequest, lambda params: handlers.get_prompt(params.name, params.arguments))
    register(types.ListResourcesRequest, lambda params: handlers.list_resources())
    register(types.ListResourceTemplatesRequest, lambda params: handlers.list_resource_templates())
    register(types.ReadResourceRequest, lambda params: handlers.read_resource(params.uri))
    return server


async def serve_stdio(rt: Runtime, principal: Principal) -> None:
    """Serve ``principal`` over stdin/stdout until the client disconnects; one session per run."""
    mcp_types()
    from mcp.server.stdio import stdio_server

    session = BoundSession(rt, principal)
    await session.principal()  # the session opens at connect, not at the first call
    server = MemoryMcp(rt, session).build()
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await session.close()  # the end itself runs to completion even when cancelled
