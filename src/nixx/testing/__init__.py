"""Test support shipped with nixx.

    fake_llm.py     FakeLLM: the scripted OpenAI-compatible backend over real HTTP
    live_server.py  LiveServer: a nixx app under a real uvicorn on a loopback port
    fixtures.py     the pytest fixture of FakeLLM
    postgres.py, pg_fixtures.py   embedded PostgreSQL for the store tests
    clients.py      real clients (npm: the MCP Inspector, Codex, Claude Code; PyPI: llm),
                    installed pinned, once, into a cache folder
"""
