"""`retold mcp` from an MCP client: the SDK spawns the server over stdio, lists tools, writes, searches.

python examples/mcp_quickstart.py [store.sqlite]
"""

import json
import os
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import retold
from retold.adapters.offline import run_example


async def main(store: Path) -> None:
    async with retold.open_runtime(store) as rt:  # the host grants once; the server only serves
        await rt.host.grant("claude", retold.Scope("user", "u1"), read=True, write=True)
    args = ["-m", "retold", "mcp", "--store", str(store), "--user", "u1", "--agent", "claude"]
    server = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as mcp:
        await mcp.initialize()
        print("tools:", ", ".join(t.name for t in (await mcp.list_tools()).tools))
        fact = {"type": "semantic", "content": "The user drinks oat milk flat whites.", "attribute": "coffee"}
        written = json.loads((await mcp.call_tool("memory_write", fact)).content[0].text)
        print("write:", written["outcome"], written["status"])  # no transcript over MCP: an inference
        found = (await mcp.call_tool("memory_search", {"queries": ["oat milk flat whites"]})).content[0].text
        print("search:", next(line for line in found.splitlines() if line.startswith(">")))


if __name__ == "__main__":
    run_example(main)
