"""nixx over MCP: the memory and agent-chat tools for coding agents (docs/mcp.md).

    memory.py    MemoryAPI: how memory tools reach the nixx server (HTTP, or the same
                 routes in process inside `nixx serve`)
    chat.py      ChatTools: the agent-chat tools, over `nixx.nxc.engine.Engine`
    tools.py     build_server(): the MCPServer with every tool registered
    stdio.py     `nixx mcp`: the stdio server an agent host starts
    http.py      `/mcp` on `nixx serve` (streamable HTTP)
    install.py   `nixx mcp install`: the project config of each client

Nothing is imported here: `nixx mcp` must answer `tools/list` fast.
"""
