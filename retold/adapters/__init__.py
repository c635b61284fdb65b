"""Framework adapters (spec §14, ARCHITECTURE §7). Nothing here is imported by ``import retold``.

* :mod:`retold.adapters.common`: what every LangGraph-side integration shares (identity from
  the run, turn capture, the host-issued recall of §14.1, the memory tools as LangChain tools).
  It needs only langchain-core and langgraph, which retold always installs.
* :mod:`retold.adapters.deepagents`: ``create_memory_agent`` for Deep Agents (``retold[deepagents]``).
* :mod:`retold.middleware` (a sibling module): the ``AgentMiddleware`` both build on.
"""
