"""Full-text search over the messages a caller may read (SQLite FTS5, BM25 ranking).

The query's words are OR-ed (a natural question matches rows that share some of its
words, best first) rather than AND-ed, and quoted, so punctuation never becomes FTS
syntax.
"""

from __future__ import annotations

import re

from nixx.errors import ValidationError
from nixx.nxc.access import MESSAGE_READABLE, MESSAGE_VISIBLE
from nixx.nxc.durations import iso

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from apsw import Connection

    from nixx.nxc.shapes import SearchHit

_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str) -> str:
    words = _WORD.findall(text)
    if not words:
        raise ValidationError(f"search query {text!r} has no words to look for", param="query")
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))


def search(conn: Connection, me: str, query: str, *, limit: int = 20) -> list[SearchHit]:
    rows: list[Any] = conn.execute(
        "SELECT m.message_id, m.channel_id, m.thread_id, m.sender, m.body, m.created"
        " FROM nxc_messages_fts f JOIN nxc_messages m ON m.mrow = f.rowid"
        f" WHERE nxc_messages_fts MATCH :q AND {MESSAGE_READABLE} AND {MESSAGE_VISIBLE}"
        " ORDER BY bm25(nxc_messages_fts), m.pos DESC LIMIT :limit",
        {"q": fts_query(query), "me": me, "limit": limit},
    ).fetchall()
    return [
        {"message_id": r[0], "channel_id": r[1], "thread_id": r[2], "sender": r[3],
         "body": r[4], "created": iso(r[5])}
        for r in rows
    ]
