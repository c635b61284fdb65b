"""Framework adapters (spec §14, ARCHITECTURE §7). Nothing here is imported by ``import retold``.

* :mod:`retold.adapters.common`: what every LangGraph-side integration shares (identity from
  the run, turn capture, the host-issued recall of §14.1, the memory tools as LangChain tools).
  It needs only langchain-core and langgraph, which retold always installs.
* :mod:`retold.adapters.profile`: the ambient profile appended to a system message (LangChain
  messages and CrewAI's message dicts); :mod:`~retold.adapters.langgraph_profile` is its
  read-only access through ``RetoldStore``.
* :mod:`retold.adapters.portal`: ``RuntimePortal`` and ``LoopBridge``: every adapter runs its
  retold calls on the one event loop that owns the runtime, from any thread or loop.
* :mod:`retold.adapters.deepagents`: ``create_memory_agent`` for Deep Agents (``retold[deepagents]``).
* :mod:`retold.adapters.crewai`: ``CrewAIMemory`` for CrewAI (``retold[crewai]``).
* :mod:`retold.adapters.crewai_memory`: ``RetoldCrewMemory``, CrewAI's own ``Memory`` on retold, and
  (:mod:`~retold.adapters.crewai_storage`) its ``StorageBackend``; both share
  :mod:`~retold.adapters.crewai_binding` (``retold[crewai]``).
* :mod:`retold.adapters.langgraph_store`: ``RetoldStore``, a LangGraph ``BaseStore`` (LangMem, Deep
  Agents' ``StoreBackend``, ``runtime.store``), with its checks, value text and filters in
  :mod:`~retold.adapters.langgraph_values`, its namespace map and caller identity in
  :mod:`~retold.adapters.langgraph_namespaces`; :mod:`~retold.adapters.langgraph_store_dev` serves it
  to ``langgraph dev``.
* :mod:`retold.adapters.mcp` / :mod:`retold.adapters.mcp_http`: ``retold mcp``, memory for any MCP
  client over stdio or streamable HTTP (``retold[mcp]``).
* :mod:`retold.adapters.offline`: the scripted chat model and runner the offline examples share.
* :mod:`retold.middleware` (a sibling module): the ``AgentMiddleware`` both build on.
"""
