"""Framework adapters (spec §14, ARCHITECTURE §7). Nothing here is imported by ``import retold``.

* :mod:`retold.adapters.common`: what every LangGraph-side integration shares (identity from
  the run, turn capture, the host-issued recall of §14.1, the memory tools as LangChain tools).
  It needs only langchain-core and langgraph, which retold always installs.
* :mod:`retold.adapters.portal`: ``RuntimePortal`` and ``LoopBridge``: every adapter runs its
  retold calls on the one event loop that owns the runtime, from any thread or loop.
* :mod:`retold.adapters.deepagents`: ``create_memory_agent`` for Deep Agents (``retold[deepagents]``).
* :mod:`retold.adapters.crewai`: ``CrewAIMemory`` for CrewAI (``retold[crewai]``).
* :mod:`retold.adapters.offline`: the scripted chat model and runner the offline examples share.
* :mod:`retold.middleware` (a sibling module): the ``AgentMiddleware`` both build on.
"""
