"""nxc: agent chat over the workspace log.

    declarations.py  personas + channels YAML (validated, cached)
    handles.py       `<origin>/<agent>` resolution (CLI and library alike)
    channels.py      channel ids: `decl:<name>`, `dm:<24 hex>`
    reducer.py       the chat reducer: kinds, merge rules, views
    access.py        who may read / post where
    threads.py       threads and the derived quorum
    cursor.py        read cursor, unread, prime
    status.py        operations (thread trees) and their states
    search.py        full-text search
    engine.py        the library facade every shell calls
    shapes.py        the named shapes of its seams: hook results, receipts (annotations only)
    prime.py         the prime block (`nxc prime`, `nxs prime`)
    delivery/        the delivery wing: starting, running and waking agent sessions
                     (`Engine` knows only its seam, `delivery/hooks.py`)
    installed.py     the reducers every process opening the log with nxc's views uses
    durations.py     durations and RFC3339 instants

Nothing is imported here: import the module you need.
"""
