"""Sync: moving the workspace log between workspaces through an engine that already
exists (the git remote itself, or PostgreSQL), never a server of our own.

    stream.py         the stream id: origin URL → ``host/owner/repo`` → ``stream-<24 hex>``
    state.py          the binding and the watermarks (a local-only table in the log file)
    transport.py      the Transport interface (push batches, pull past a cursor) + registry
    git_transport.py  segments committed on one ref per origin: ``refs/nxs/<stream>/<origin>``
    pg_transport.py   one table per deployment, a gap-free per-stream sequence
    engine.py         one pass: push past the pushed watermark, pull past the cursor
    daemon.py         the foreground loop (debounced push, polling, back-off) and its
                      user-service install

Nothing is imported here: import the module you need.
"""
