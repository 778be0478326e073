"""Values checked at the edge, once for every route, so nothing out of range reaches the
store, the embedder or the backend (where it would be a 500):

- ids and offsets: `MAX_ID` (SQLite's and PostgreSQL's 64-bit integer) bounds every id,
  offset and count a route takes (`Id` and ``le=MAX_ID`` on the route's own
  fields); a negative or too large one is a 400 naming the parameter;
- `check_json_values`, an app-wide dependency: a JSON body may not carry NaN or
  ±Infinity (Python's parser accepts them; JSON does not, and the backend request could
  not be encoded) nor a lone UTF-16 surrogate (``"\\ud800"``: no UTF-8 encoding, so it
  could be neither stored nor sent) anywhere, keys included — a 400 with the path of the
  value as `param` (``messages.0.content``, ``top_p``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Request
from pydantic import Field

from nixx.errors import ValidationError
from nixx.values import MAX_ID, bad_json_value

__all__ = ["MAX_ID", "Id", "bad_json_value", "check_json_values"]

Id = Annotated[int, Field(ge=1, le=MAX_ID)]


async def check_json_values(request: Request) -> None:
    """App-wide dependency: refuse NaN/Infinity and lone surrogates in a JSON body. The
    body was already parsed by FastAPI for the route (``request.json()`` is cached), so
    this is one walk over it, not a second parse."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return
    content_type = request.headers.get("content-type", "")
    if "json" not in content_type:
        return
    try:
        body = await request.json()
    except ValueError:
        return  # not JSON: the route's own validation said so already
    found = bad_json_value(body)
    if found is not None:
        param, problem = found
        raise ValidationError(f"invalid request: {param or 'body'}: {problem}", param=param or None)
