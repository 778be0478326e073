"""The pages of the memory browser (``/ui``). Each handler reads or changes memory
through one `NixxService` call and renders a template; a change answers with a redirect
(post/redirect/get), so reloading a page never repeats it.

Pages: search (fused episodic search and source search), conversations (the buffer by
session, keyset-paged), summaries and sources (view, edit, delete, ingest), context
(what the next turn would send; what a past answer had recalled), settings (intent,
recall, summary interval) and agents (the workspace log's operations, read-only).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from nixx.errors import NixxError, NotFound, ValidationError
from nixx.memory.forget import SummaryCorrection
from nixx.secret import reveal
from nixx.server import shapes
from nixx.web.security import (
    LINK_LIFETIME,
    LOGIN_PATH,
    NOTICES,
    ONCE_PATH,
    SESSION_COOKIE,
    CsrfGuard,
    cookie_value,
    notice_text,
)

HERE = Path(__file__).parent
PAGE_ROWS = 50
FORM_MAX_BYTES = 1 << 20

router = APIRouter(include_in_schema=False)


# ---- plumbing ---------------------------------------------------------------------------
def _templates(request: Request) -> Any:
    state = request.app.state
    if getattr(state, "web_templates", None) is None:
        from fastapi.templating import Jinja2Templates

        templates = Jinja2Templates(directory=str(HERE / "templates"))
        templates.env.autoescape = True  # every value is escaped, whatever the file name
        templates.env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
        state.web_templates = templates
    return state.web_templates


def _guard(request: Request) -> CsrfGuard:
    state = request.app.state
    if getattr(state, "web_csrf", None) is None:
        state.web_csrf = CsrfGuard()
    return state.web_csrf  # type: ignore[no-any-return]


def _jobs(request: Request) -> Any:
    state = request.app.state
    if getattr(state, "web_jobs", None) is None:
        from nixx.web.jobs import IngestJobs

        state.web_jobs = IngestJobs()
    return state.web_jobs


def _service(request: Request) -> Any:
    return request.app.state.service


def _session(request: Request) -> str | None:
    """The browser's session token: "" when the page is open (no API key), None when a key
    is set and the browser is not signed in, else its valid token."""
    if not request.app.state.settings.api_key:
        return ""
    return request.app.state.web_sessions.from_cookies(request.headers.get("cookie", ""))  # type: ignore[no-any-return]


def render(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
    query = request.query_params
    context.setdefault("notice", notice_text(query.get("notice"), query.get("n")))
    context.setdefault("error", None)
    session = _session(request)
    context["csrf"] = _guard(request).token(session) if session is not None else ""
    context["signed_in"] = bool(session)
    context["path"] = request.url.path
    service = getattr(request.app.state, "service", None)
    context["failing"] = service.failing() if service is not None else {}
    context["stalls"] = service.stalls() if service is not None else []
    response: HTMLResponse = _templates(request).TemplateResponse(
        request, name, context, status_code=code
    )
    response.headers["Content-Security-Policy"] = (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    return response


def back(url: str, notice: str | None = None, n: int | None = None) -> RedirectResponse:
    """The redirect after a change; `notice` is a code of `NOTICES` (the page shows its
    text: an address never puts words of its own on a page)."""
    if notice:
        assert notice in NOTICES, notice
        url += ("&" if "?" in url else "?") + "notice=" + notice
        if n is not None:
            url += f"&n={n}"
    return RedirectResponse(url, status_code=303)


async def form(request: Request, *, token: bool = True) -> dict[str, str]:
    """The posted form (urlencoded), after the form-token check (`token`; where it came
    from was checked by `nixx.server.guard`); raises `_Refused`."""
    body = await request.body()
    if len(body) > FORM_MAX_BYTES:
        raise ValidationError("the form is too large")
    fields = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
    if token:
        session = _session(request)
        why = (_guard(request).check(fields.get("csrf"), session) if session is not None
               else "sign in first")
        if why is not None:
            raise _Refused(why)
    return fields


class _Refused(Exception):
    pass


async def submit(
    request: Request, act: Callable[[dict[str, str]], Awaitable[Response]], *, token: bool = True
) -> Response:
    """Every POST of the pages: the form (after the token check), then `act(fields)`;
    a refused form or a `NixxError` from either renders the error page (`_failure`)."""
    try:
        return await act(await form(request, token=token))
    except (_Refused, NixxError) as exc:
        return _failure(request, exc)


def _int(value: str | None, name: str, *, default: int | None = None) -> int | None:
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValidationError(f"{name} must be a whole number (got {value!r})", param=name) from None
    if not 1 <= number < 2**63:
        raise ValidationError(f"{name} must be between 1 and 2^63-1 (got {number})", param=name)
    return number


def _failure(request: Request, exc: Exception) -> HTMLResponse:
    if isinstance(exc, _Refused):
        return render(request, "error.html", code=403, error=str(exc), title="Refused")
    if isinstance(exc, NotFound):
        return render(request, "error.html", code=404, error=exc.message, title="Not found")
    assert isinstance(exc, NixxError)
    return render(request, "error.html", code=exc.http_status, error=exc.message, title="Error")


# ---- sign-in ----------------------------------------------------------------------------
@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=307)


@router.get("/ui/static/style.css")
async def style() -> FileResponse:
    return FileResponse(HERE / "static" / "style.css", media_type="text/css")


@router.get(LOGIN_PATH)
async def login_page(request: Request) -> HTMLResponse:
    return render(request, "login.html", title="Sign in")


@router.post(LOGIN_PATH)
async def login(request: Request) -> Response:
    """Sign in: no form token (a signed-out visitor is shown none; where the post came from
    is checked by the guard), wrong keys throttled per address, a new session each time."""
    import hmac

    async def act(fields: dict[str, str]) -> Response:
        state = request.app.state
        key = state.settings.api_key
        if not key:
            return back("/ui")
        address = request.client.host if request.client else "?"
        wait = state.web_throttle.wait(address)
        if wait > 0:
            response = render(request, "login.html", code=429, title="Sign in",
                              error=f"too many wrong keys (from {address}, or from all "
                              f"addresses together): try again in {int(wait) + 1} s")
            response.headers["Retry-After"] = str(int(wait) + 1)
            return response
        if not hmac.compare_digest(fields.get("key", "").encode(), (reveal(key) or "").encode()):
            state.web_throttle.failed(address)
            return render(request, "login.html", code=401, title="Sign in",
                          error="wrong key: give the server's NIXX_API_KEY")
        return _signed_in(request, state.web_sessions.start())

    return await submit(request, act, token=False)


def _signed_in(request: Request, session: str) -> Response:
    """To the page, with the new session's cookie (the old one ended: never reused)."""
    request.app.state.web_sessions.end(cookie_value(request.headers.get("cookie", "")))
    signed_in = back("/ui")
    signed_in.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict",
                         path="/", secure=request.url.scheme == "https")
    return signed_in


class SignInLink(TypedDict):
    """`POST /v1/web/sign-in-link`'s answer (`nixx web link`)."""

    url: str  # the page, or the one-time link that signs in to it
    expires_in: int | None  # seconds the link is good for (None: no key, no sign-in)
    needs_sign_in: bool


@router.post("/v1/web/sign-in-link", response_model=shapes.BODY)
async def sign_in_link(request: Request) -> SignInLink:
    """A one-time sign-in link for the owner (`nixx web link`): the key was checked as for
    every API call, so a throttled sign-in form does not keep the owner out."""
    base = str(request.base_url).rstrip("/")
    if not request.app.state.settings.api_key:
        return {"url": base + "/ui", "expires_in": None, "needs_sign_in": False}
    token = request.app.state.web_sessions.link()
    return {"url": f"{base}{ONCE_PATH}{token}", "expires_in": int(LINK_LIFETIME),
            "needs_sign_in": True}


@router.get(ONCE_PATH + "{link}")
async def sign_in_once(request: Request, link: str) -> Response:
    session = request.app.state.web_sessions.redeem(link)
    if session is None:
        return render(request, "login.html", code=400, title="Sign in",
                      error="this sign-in link was used or has lapsed: run `nixx web link` "
                      "for another")
    return _signed_in(request, session)


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    async def act(fields: dict[str, str]) -> Response:
        request.app.state.web_sessions.end(cookie_value(request.headers.get("cookie", "")))
        response = back(LOGIN_PATH, "signed-out")
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return await submit(request, act)


# ---- search -----------------------------------------------------------------------------
@router.get("/ui")
async def search_page(request: Request, q: str = "", scope: str = "memory") -> HTMLResponse:
    service = _service(request)
    results: Sequence[Mapping[str, object]] = []  # hits of either scope, for the template
    error = None
    if q.strip():
        try:
            if scope == "sources":
                hits = await service.search_sources(q, 10)
                results = [{"kind": "source", **shapes.memory_hit(h)} for h in hits]
            else:
                results = await _episodic(service, q)
        except NixxError as exc:
            error = exc.message
    status = await service.status()
    return render(request, "search.html", title="Search", q=q, scope=scope, results=results,
                  error=error, status=status)


async def _episodic(service: Any, q: str) -> list[shapes.ResultJson]:
    """The fused episodic search, one list best first (kind buffer | summary)."""
    answer = await service.search(q, 10)
    results: list[shapes.ResultJson] = []
    for found in answer.results:
        item = shapes.result(found)
        if item["kind"] == "buffer" and item["context"]:
            # the page shows a row inside its context: the row itself among its neighbours
            item["context"] = sorted([*item["context"], shapes.row(found.row)], key=lambda c: c["id"])
        results.append(item)
    return results


# ---- conversations ----------------------------------------------------------------------
@router.get("/ui/conversations")
async def conversations(request: Request, before: str | None = None, around: str | None = None
                        ) -> HTMLResponse:
    service = _service(request)
    try:
        before_id = _int(before, "before")
        around_id = _int(around, "around")
    except NixxError as exc:
        return _failure(request, exc)
    if around_id is not None:
        rows = await service.buffer_around(around_id)
    else:
        rows = await service.buffer_page(before_id=before_id, limit=PAGE_ROWS)
    older = rows[0].id if rows and rows[0].id > 1 else None
    newer = rows[-1].id + PAGE_ROWS + 1 if rows and (before_id or around_id) else None
    return render(request, "conversations.html", title="Conversations",
                  rows=[shapes.row(r) for r in rows], older=older, newer=newer,
                  highlight=around_id)


# ---- summaries --------------------------------------------------------------------------
@router.get("/ui/summaries")
async def summaries(request: Request, page: str | None = None) -> HTMLResponse:
    service = _service(request)
    try:
        number = _int(page, "page", default=1) or 1
    except NixxError as exc:
        return _failure(request, exc)
    items = await service.list_summaries(limit=PAGE_ROWS + 1, offset=(number - 1) * PAGE_ROWS)
    return render(request, "summaries.html", title="Summaries", page=number,
                  summaries=[shapes.summary(s) for s in items[:PAGE_ROWS]],
                  more=len(items) > PAGE_ROWS)


@router.get("/ui/summaries/{summary_id}")
async def summary_page(request: Request, summary_id: str) -> HTMLResponse:
    service = _service(request)
    try:
        found = await service.get_summary(_int(summary_id, "summary_id"))
    except NixxError as exc:
        return _failure(request, exc)
    return render(request, "summary.html", title=f"Summary {found.id}",
                  summary=shapes.summary(found))


@router.post("/ui/summaries/{summary_id}")
async def edit_summary(request: Request, summary_id: str) -> Response:
    async def act(fields: dict[str, str]) -> Response:
        sid = _int(summary_id, "summary_id")
        tags = [t.strip() for t in fields.get("tags", "").split(",") if t.strip()]
        entities = _entities(fields.get("entities", ""))
        await _service(request).update_summary(sid, SummaryCorrection(
            content=fields.get("content"), tags=tags, entities=entities))
        return back(f"/ui/summaries/{sid}", "summary-saved")

    return await submit(request, act)


def _entities(text: str) -> dict[str, list[str]]:
    """``tools: a, b`` lines (one category a line) → ``{"tools": ["a", "b"]}``."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        category, sep, names = line.partition(":")
        if not sep or not category.strip():
            raise ValidationError(
                f"entities: write one category a line, as 'tools: a, b' (got {line!r})",
                param="entities",
            )
        out[category.strip()] = [n.strip() for n in names.split(",") if n.strip()]
    return out


@router.post("/ui/summaries/{summary_id}/delete")
async def delete_summary(request: Request, summary_id: str) -> Response:
    async def act(fields: dict[str, str]) -> Response:
        sid = _int(summary_id, "summary_id")
        await _service(request).forget_summary(sid)
        return back("/ui/summaries", "summary-deleted", sid)

    return await submit(request, act)


# ---- sources ----------------------------------------------------------------------------
@router.get("/ui/sources")
async def sources(request: Request) -> HTMLResponse:
    items = await _service(request).list_sources()
    return render(request, "sources.html", title="Sources",
                  sources=[shapes.source(s) for s in items],
                  workspace=str(request.app.state.settings.workspace or ""))


@router.get("/ui/sources/{source_id}")
async def source_page(request: Request, source_id: str) -> HTMLResponse:
    service = _service(request)
    try:
        sid = _int(source_id, "source_id")
        found = await service.get_source(sid)
        chunks = await service.source_chunks(sid)
    except NixxError as exc:
        return _failure(request, exc)
    return render(request, "source.html", title=found.name, source=shapes.source(found),
                  chunks=[shapes.memory(m) for m in chunks])


@router.post("/ui/sources/{source_id}/delete")
async def delete_source(request: Request, source_id: str) -> Response:
    async def act(fields: dict[str, str]) -> Response:
        sid = _int(source_id, "source_id")
        await _service(request).forget_source(sid)
        return back("/ui/sources", "source-deleted", sid)

    return await submit(request, act)


@router.post("/ui/ingest")
async def start_ingest(request: Request) -> Response:
    async def act(fields: dict[str, str]) -> Response:
        target = fields.get("target", "").strip()
        if not target:
            return render(request, "error.html", code=400, title="Error",
                          error="give a file or folder path (in the workspace) or a web page URL")
        is_url = target.lower().startswith(("http://", "https://"))
        job = _jobs(request).start(_service(request), path=None if is_url else target,
                                   url=target if is_url else None)
        return back(f"/ui/ingest/{job.id}")

    return await submit(request, act)


@router.get("/ui/ingest/{job_id}")
async def ingest_page(request: Request, job_id: str) -> HTMLResponse:
    try:
        job = _jobs(request).get(_int(job_id, "job_id"))
    except NixxError as exc:
        return _failure(request, exc)
    if job is None:
        return render(request, "error.html", code=404, title="Not found",
                      error=f"no ingest {job_id} in this server's memory (it keeps the newest 20)")
    return render(request, "ingest.html", title=f"Ingest {job.target}", job=job)


# ---- context ----------------------------------------------------------------------------
@router.get("/ui/context")
async def context_page(request: Request, query: str | None = None, answer: str | None = None
                       ) -> HTMLResponse:
    service = _service(request)
    try:
        answer_id = _int(answer, "answer")
    except NixxError as exc:
        return _failure(request, exc)
    past: shapes.RowJson | None = None
    if answer_id is not None:
        rows = await service.buffer_around(answer_id, before=0, after=0)
        if not rows or rows[0].id != answer_id or rows[0].role != "assistant":
            return render(request, "error.html", code=404, title="Not found",
                          error=f"buffer row {answer_id} is not an answer")
        past = shapes.row(rows[0])
    ctx = await service.context(query or None)
    return render(request, "context.html", title="Context", ctx=ctx, query=query or "",
                  past=past, recalled=ctx.info()["recalled"])


# ---- intent and settings ----------------------------------------------------------------
@router.get("/ui/settings")
async def settings_page(request: Request) -> HTMLResponse:
    service = _service(request)
    return render(request, "settings.html", title="Intent and settings",
                  intent=await service.get_intent(), status=await service.status())


@router.post("/ui/intent")
async def set_intent(request: Request) -> Response:
    async def act(fields: dict[str, str]) -> Response:
        service = _service(request)
        action = fields.get("action", "set")
        if action == "clear":
            await service.clear_intent()
            return back("/ui/settings", "intent-cleared")
        if action == "derive":
            await service.derive_intent()
            return back("/ui/settings", "intent-derived")
        text = fields.get("intent", "").strip()
        if not text:
            raise ValidationError("write the intent, or clear it", param="intent")
        await service.set_intent(text)
        return back("/ui/settings", "intent-set")

    return await submit(request, act)


@router.post("/ui/settings")
async def save_settings(request: Request) -> Response:
    async def act(fields: dict[str, str]) -> Response:
        interval = _int(fields.get("interval"), "interval")
        recall = fields.get("recall") == "on"
        await _service(request).configure(interval=interval, recall=recall)
        return back("/ui/settings", "settings-saved")

    return await submit(request, act)


# ---- agents -----------------------------------------------------------------------------
def _engine(request: Request) -> Any:
    from nixx.server.deps import workspace_engine

    return workspace_engine(request)


@router.get("/ui/agents")
async def agents(request: Request) -> HTMLResponse:
    from anyio import to_thread

    from nixx.nxc import work

    def read() -> tuple[Any, list[Any], str]:
        with _engine(request) as engine:
            return (engine.status(include_finished=True), work.task_list(engine),
                    engine.store.replica)

    from nixx.nxc.durations import iso

    try:
        status, tasks, replica = await to_thread.run_sync(read)
    except NixxError as exc:
        return render(request, "agents.html", title="Agents", status=None, error=exc.message)
    leases = [{**x, "until_iso": iso(x["until"])} for x in status["leases"]]
    approvals = [{**a, "asked_iso": iso(a["asked"])} for a in status["approvals"]]
    return render(request, "agents.html", title="Agents", status=status, tasks=tasks,
                  leases=leases, replica=replica, approvals=approvals)


DECISIONS = {"approve": ("approved", "approval-approved"), "deny": ("denied", "approval-denied")}


@router.post("/ui/agents/approvals/{approval_id}/{step}")
async def decide(request: Request, approval_id: str, step: str) -> Response:
    """Approve or deny a held step as the person who runs the server (`nxc approve|deny`):
    a step held on this clone is taken now, one held on another when this syncs there."""
    from anyio import to_thread

    async def act(fields: dict[str, str]) -> Response:
        if step not in DECISIONS:
            raise NotFound(f"no decision {step!r}: approve or deny")
        decision, notice = DECISIONS[step]

        def run() -> None:
            with _engine(request) as engine:
                engine.decide(approval_id, decision, fields.get("note", "").strip())

        await to_thread.run_sync(run)
        return back("/ui/agents", notice)

    return await submit(request, act)


@router.post("/ui/agents/threads/{thread_id}/reply")
async def agent_reply(request: Request, thread_id: str) -> Response:
    """Post into a thread as the person who runs the server (`nxc reply`): an answer, or
    the opener's follow-up, which resumes the sessions answering it."""
    from anyio import to_thread

    async def act(fields: dict[str, str]) -> Response:
        body = fields.get("body", "").strip()
        if not body:
            raise ValidationError("write the reply first", param="body")

        def run() -> None:
            with _engine(request) as engine:
                engine.reply(body, thread=thread_id)

        await to_thread.run_sync(run)
        return back(f"/ui/agents/threads/{thread_id}", "reply-posted")

    return await submit(request, act)


TASK_STEPS = {"claim": "task-claimed", "release": "task-released", "done": "task-done"}


@router.post("/ui/agents/tasks/{task_id}/{step}")
async def task_step(request: Request, task_id: str, step: str) -> Response:
    """Claim, release or finish a task as the person who runs the server (`nxc task`)."""
    from anyio import to_thread

    from nixx.nxc import work

    async def act(fields: dict[str, str]) -> Response:
        if step not in TASK_STEPS:
            raise NotFound(f"no task step {step!r}: claim, release or done")
        do = {"claim": work.claim, "release": work.release_task, "done": work.finish_task}[step]

        def run() -> None:
            with _engine(request) as engine:
                do(engine, task_id)

        await to_thread.run_sync(run)
        return back("/ui/agents", TASK_STEPS[step])

    return await submit(request, act)


@router.post("/ui/agents/leases/{lease_id}/release")
async def lease_release(request: Request, lease_id: str) -> Response:
    """End a lease taken on this clone (`nxc release`)."""
    from anyio import to_thread

    from nixx.nxc import work

    async def act(fields: dict[str, str]) -> Response:
        def run() -> None:
            with _engine(request) as engine:
                work.release_lease(engine, lease_id)

        await to_thread.run_sync(run)
        return back("/ui/agents", "lease-released")

    return await submit(request, act)


@router.get("/ui/agents/threads/{thread_id}")
async def agent_thread(request: Request, thread_id: str) -> HTMLResponse:
    from anyio import to_thread

    def read() -> tuple[dict[str, Any], str]:
        with _engine(request) as engine:
            return engine.thread(thread_id), engine.handle

    try:
        thread, actor = await to_thread.run_sync(read)
    except NixxError as exc:
        return _failure(request, exc)
    return render(request, "thread.html", title=f"Thread {thread_id}", thread=thread,
                  actor=actor)
