"""The workspace operation log (`nxs`): one append-only log of immutable operations per
workspace, folded into views by the reducers products register.

    op.py         the operation record, its content-derived id
    clock.py      hybrid logical clock
    ids.py        ULIDs, replica prefixes
    reducer.py    the reducer contract and registry
    store.py      SQLite store: append, insert foreign ops, fold, refold, ops past a seq
    watcher.py    PRAGMA data_version change notification
    workspace.py  finding / creating `.nxs/db.sqlite`

Nothing is imported here: import the module you need.
"""
