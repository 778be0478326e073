"""The ingest pipeline: read → chunk → embed in batches → store in one transaction.

    ingestor = Ingestor(store, embedder, settings, progress=print)
    result = ingestor.ingest_path("~/notes")            # a file or a folder
    result = ingestor.ingest_url("https://example.org/post")
    result = ingestor.ingest_text("...", name="meeting notes")

One call makes (or updates) one source: a file is a `document`, a folder a `document`
(a `repo` when it is a git work tree), a URL is `web`. The source's meta keeps where it
came from (``path`` or ``url``), a ``content_hash``, the ``tags`` and what was skipped;
each memory's metadata keeps its provenance: ``chunk``/``total_chunks``, ``path`` (within
a folder), ``page`` (PDF), ``heading``, the char range ``start``/``end`` within its file
(or page) text, and the chunk's ``hash``.

Nothing is written until everything has been read and embedded; then the source and all
its memories go in with one `add_source` / `replace_source` (one transaction), so an
ingest that fails or is killed half way leaves nothing behind. Ingesting content whose
hash (and name and tags) match the stored source is a no-op; changed content replaces
the old memories atomically, re-using the stored vectors of chunks whose text did not
change. The LLM summary (display only) is optional and written after the source is
stored, by `NixxService.summarise_sources` (from each result's `summary_input`;
`nixx.ingest.summary` has the prompt).

Reading is confined: with ``root`` set (the server passes ``settings.workspace``) only
paths that resolve inside it are read; the CLI reads the paths its user names.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from nixx.config import Settings
from nixx.embed.base import Embedder
from nixx.errors import Forbidden, NixxError, NotFound, ValidationError
from nixx.ingest.document import Document
from nixx.ingest.fetch import fetch
from nixx.ingest.readers import fallback_reader, reader_for_media_type, reader_for_path
from nixx.ingest.walk import Skipped, walk
from nixx.memory.chunking import chunk_text
from nixx.paths import hard_link_refusal, is_secret, open_beneath
from nixx.store.base import MemoryStore
from nixx.store.records import NewChunk, Source

# Part of every content hash: bump it when reading or chunking changes, so that
# re-ingesting re-chunks instead of keeping chunks made the old way.
PIPELINE_VERSION = "nixx-ingest/1"
CHUNK_CHARS = 800
CHUNK_OVERLAP = 100
SUMMARY_INPUT_CHARS = 6000

# Serialises the final look-up-then-write of every ingest in this process, so two ingests
# of the same input cannot both create a source (the slow work runs outside it).
_write_lock = threading.Lock()


@dataclass(frozen=True)
class Progress:
    """Where an ingest is; handed to the `progress` callback after every step."""

    stage: str  # "read" | "embed" | "store" | "done"
    target: str  # the path, URL or name being ingested
    files_done: int = 0
    files_total: int = 0
    chunks: int = 0
    embedded: int = 0  # chunks with a vector so far (computed or re-used)
    path: str | None = None  # the file just read


class IngestedSource(TypedDict):
    """The source an ingest made or found (`IngestResult.to_dict`'s ``source``)."""

    id: int
    name: str
    type: str  # "document" | "repo" | "web"
    summary: str | None
    created_at: str
    meta: dict[str, Any]  # path/url, content_hash, tags, skipped: the source's own JSON
    chunk_count: int


class SkippedJson(TypedDict):
    """A file an ingest did not read, and why (`nixx.ingest.walk.Skipped`)."""

    path: str
    reason: str


class IngestResultJson(TypedDict):
    """An `IngestResult` as JSON (`IngestResult.to_dict`): the `nixx ingest` CLI prints a
    list of them (``sources``); `POST /v1/ingest` reads its counts and ``skipped``."""

    status: str  # "created" | "replaced" | "unchanged"
    source: IngestedSource
    files: int
    chunks: int
    embedded: int
    reused: int
    skipped: list[SkippedJson]
    summary_error: str | None


@dataclass
class IngestResult:
    source: Source
    status: str  # "created" | "replaced" | "unchanged"
    files: int = 0  # files read
    chunks: int = 0
    embedded: int = 0  # vectors computed by this ingest
    reused: int = 0  # vectors re-used from the stored chunks
    skipped: list[Skipped] = field(default_factory=list)
    # the text to summarise for display ("" when unchanged and it has its summary already)
    summary_input: str = ""
    summary_error: str | None = None  # why no summary was made (`summarise_sources`)

    def to_dict(self) -> IngestResultJson:
        s = self.source
        return {
            "status": self.status,
            "source": {
                "id": s.id,
                "name": s.name,
                "type": s.type,
                "summary": s.summary,
                "created_at": s.created_at,
                "meta": s.meta,
                "chunk_count": s.chunk_count or self.chunks,
            },
            "files": self.files,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "reused": self.reused,
            "skipped": [{"path": k.path, "reason": k.reason} for k in self.skipped],
            "summary_error": self.summary_error,
        }


@dataclass
class _Piece:
    """A chunk ready to embed."""

    content: str
    embed_text: str
    metadata: dict[str, Any]


@dataclass
class _Plan:
    name: str
    type: str
    identity: dict[str, str]  # the meta key(s) that find this source again
    meta: dict[str, Any]
    documents: list[tuple[str | None, Document]]  # (path within a folder, document)
    files: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    given_name: str | None = None  # the name the caller chose, if any


def sha256(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def parse_tags(tags: str | Sequence[str] | None) -> list[str] | None:
    """Tags from a list or a comma-separated string: trimmed, empty ones dropped, unique.
    None stays None (on re-ingest: keep the stored tags)."""
    if tags is None:
        return None
    items = tags.split(",") if isinstance(tags, str) else list(tags)
    out: list[str] = []
    for tag in items:
        if not isinstance(tag, str):
            raise ValidationError(f"tags must be strings (got {tag!r})", param="tags")
        tag = tag.strip()
        if tag and tag not in out:
            out.append(tag)
    return out


class Ingestor:
    """Turns files, folders, pages and text into sources of semantic memory."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        settings: Settings,
        *,
        progress: Callable[[Progress], None] | None = None,
        chunk_chars: int = CHUNK_CHARS,
        chunk_overlap: int = CHUNK_OVERLAP,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.progress = progress
        self.chunk_chars = chunk_chars
        self.chunk_overlap = chunk_overlap

    # ---- entry points ----------------------------------------------------------------
    def ingest_path(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        tags: str | Sequence[str] | None = None,
        root: Path | None = None,
    ) -> IngestResult:
        """Ingest a file or a folder. With `root`, the path must resolve inside it.
        Secrets (`nixx.paths.SECRET_PATHS`) are never read: a file named is refused, a
        folder's are skipped. Every file is opened beneath the confining folder (`root`,
        else the folder ingested, else the file's own folder) without following a
        symlink (`nixx.paths.open_beneath`), so a swap mid-way cannot lead outside."""
        target = self._resolve(path, root)
        base = root.resolve() if root is not None else None
        if target.is_dir():
            plan = self._plan_folder(target, name, base or target)
        elif target.is_file():
            plan = self._plan_file(target, name, base or target.parent)
        else:
            raise ValidationError(f"{path} is neither a regular file nor a folder", param="path")
        return self._run(plan, parse_tags(tags))

    def ingest_url(
        self, url: str, *, name: str | None = None, tags: str | Sequence[str] | None = None
    ) -> IngestResult:
        """Fetch a web page (see `nixx.ingest.fetch`) and ingest its main text."""
        if not isinstance(url, str) or not url.strip():
            raise ValidationError("url must be a non-empty string", param="url")
        url = url.strip()
        self._emit(Progress("read", url, 0, 1))
        page = fetch(
            url,
            allow_private=self.settings.ingest_allow_private_urls,
            max_bytes=self.settings.ingest_max_file_bytes,
            timeout=self.settings.ingest_url_timeout,
        )
        reader = reader_for_media_type(page.media_type)
        assert reader is not None  # fetch() refuses media types no reader handles
        document = reader.read(page.utf8(), page.url)
        plan = _Plan(
            name=_clean_name(name) or document.title or url,
            given_name=_clean_name(name),
            type="web",
            identity={"url": url},
            meta={
                "url": url,
                "final_url": page.url,
                "media_type": page.media_type,
                "title": document.title,
                "content_hash": sha256(PIPELINE_VERSION + "\0" + document.text),
            },
            documents=[(None, document)],
            files=1,
        )
        return self._run(plan, parse_tags(tags))

    def ingest_text(
        self, text: str, *, name: str, tags: str | Sequence[str] | None = None
    ) -> IngestResult:
        """Ingest text given directly; `name` is required and identifies the source."""
        clean = _clean_name(name)
        if not clean:
            raise ValidationError("text needs a non-empty name", param="name")
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("text is empty: nothing to ingest", param="text")
        if len(text.encode("utf-8")) > self.settings.ingest_max_file_bytes:
            raise ValidationError(
                f"text is over the {self.settings.ingest_max_file_bytes}-byte limit "
                "(NIXX_INGEST_MAX_FILE_BYTES)",
                param="text",
            )
        kind = "markdown" if _looks_like_markdown(text) else "text"
        from nixx.ingest.document import Section

        document = Document(kind, (Section(text, kind),))
        plan = _Plan(
            name=clean,
            given_name=clean,
            type="document",
            identity={"text_name": clean},
            meta={"text_name": clean, "content_hash": sha256(PIPELINE_VERSION + "\0" + text)},
            documents=[(None, document)],
            files=0,
        )
        return self._run(plan, parse_tags(tags))

    # ---- planning: read everything first -----------------------------------------------
    def _resolve(self, path: str | Path, root: Path | None) -> Path:
        if not isinstance(path, str | Path) or not str(path).strip():
            raise ValidationError("path must be a non-empty string", param="path")
        if "\0" in str(path):
            raise ValidationError("path contains a NUL byte", param="path")
        raw = Path(str(path)).expanduser()
        outside = Forbidden(
            f"{path} is outside the workspace {root} (NIXX_WORKSPACE); ingest reads only under it",
            param="path",
        )
        if root is not None:
            base = root.resolve()
            raw = raw if raw.is_absolute() else base / raw
            # Refuse what lies outside before asking whether it exists: the answer must not
            # tell a client which files exist elsewhere on the machine.
            try:
                if not raw.resolve(strict=False).is_relative_to(base):
                    raise outside
            except (OSError, RuntimeError):
                raise outside from None
        try:
            target = raw.resolve(strict=True)
        except FileNotFoundError:
            raise NotFound(f"no such file or folder: {path}", param="path") from None
        except (OSError, RuntimeError) as exc:
            raise ValidationError(f"cannot resolve {path}: {exc}", param="path") from None
        if root is not None and not target.is_relative_to(root.resolve()):
            raise outside
        return target

    def _plan_file(self, path: Path, name: str | None, base: Path) -> _Plan:
        self._emit(Progress("read", str(path), 0, 1, path=str(path)))
        _refuse_secret(path, base)
        size = path.stat().st_size
        if size > self.settings.ingest_max_file_bytes:
            raise ValidationError(
                f"{path} is {size} bytes, over the {self.settings.ingest_max_file_bytes}-byte "
                "limit (NIXX_INGEST_MAX_FILE_BYTES)",
                param="path",
            )
        data = _read_bytes(path, self.settings.ingest_max_file_bytes, base,
                          allow_hard_links=self.settings.allow_hard_links)
        document = _read_document(data, path)
        self._emit(Progress("read", str(path), 1, 1, path=str(path)))
        return _Plan(
            name=_clean_name(name) or path.name,
            given_name=_clean_name(name),
            type="document",
            identity={"path": str(path)},
            meta={
                "path": str(path),
                "format": document.format,
                "bytes": size,
                "title": document.title,
                "content_hash": sha256(PIPELINE_VERSION.encode() + b"\0" + data),
            },
            documents=[(None, document)],
            files=1,
        )

    def _plan_folder(self, folder: Path, name: str | None, base: Path) -> _Plan:
        _refuse_secret(folder, base)
        walked = walk(folder, max_file_bytes=self.settings.ingest_max_file_bytes)
        total = len(walked.files)
        documents: list[tuple[str | None, Document]] = []
        skipped = list(walked.skipped)
        digest = hashlib.sha256(PIPELINE_VERSION.encode() + b"\0")
        for i, path in enumerate(walked.files, start=1):
            rel = path.relative_to(folder).as_posix()
            try:
                data = _read_bytes(path, self.settings.ingest_max_file_bytes, base,
                                   allow_hard_links=self.settings.allow_hard_links)
                document = _read_document(data, path, display=rel)
            except NixxError as exc:
                skipped.append(Skipped(rel, exc.message))
            else:
                documents.append((rel, document))
                digest.update(rel.encode() + b"\0" + sha256(data).encode() + b"\0")
            self._emit(Progress("read", str(folder), i, total, path=rel))
        if not documents:
            reasons = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:5])
            detail = f" (skipped {len(skipped)}: {reasons})" if skipped else ""
            raise ValidationError(
                f"{folder} has nothing readable{detail}"
                + (f"; {walked.ignored} file(s) ignored by .gitignore" if walked.ignored else ""),
                param="path",
            )
        return _Plan(
            name=_clean_name(name) or folder.name,
            given_name=_clean_name(name),
            type="repo" if walked.is_git_repo else "document",
            identity={"path": str(folder)},
            meta={
                "path": str(folder),
                "files": len(documents),
                "ignored": walked.ignored,
                "skipped": [{"path": s.path, "reason": s.reason} for s in skipped[:100]],
                "skipped_count": len(skipped),
                "content_hash": digest.hexdigest(),
            },
            documents=documents,
            files=len(documents),
            skipped=skipped,
        )

    # ---- chunk, embed, store -----------------------------------------------------------
    def _run(self, plan: _Plan, tags: list[str] | None) -> IngestResult:
        existing = self.store.find_sources(**plan.identity)
        old = existing[0] if existing else None
        if old is not None:
            # Re-ingest: what was not given again is kept (name, tags).
            plan.name = plan.given_name or old.name
            if tags is None:
                tags = list(old.meta.get("tags", []))
        plan.meta["tags"] = tags or []
        plan.meta = {k: v for k, v in plan.meta.items() if v is not None}
        if (
            old is not None
            and old.meta.get("content_hash") == plan.meta["content_hash"]
            and old.name == plan.name
            and list(old.meta.get("tags", [])) == plan.meta["tags"]
        ):
            # Unchanged content; but a display summary that never came (the backend was
            # down, the process was killed while it was being written) is made now.
            result = IngestResult(
                old,
                "unchanged",
                files=plan.files,
                chunks=old.chunk_count,
                skipped=plan.skipped,
                summary_input=_summary_input(plan) if old.summary is None else "",
            )
            self._emit(
                Progress(
                    "done", plan.name, plan.files, plan.files, old.chunk_count, old.chunk_count
                )
            )
            return result

        pieces = self._chunk(plan)
        if not pieces:
            raise ValidationError(f"{plan.name} holds no text to ingest")
        self.store.bind_embedder(self.embedder.model, int(self.embedder.dim))
        reusable = self._stored_vectors(old) if old is not None else {}
        vectors, computed = self._embed(plan, pieces, reusable)
        chunks = [
            NewChunk(content=p.content, embedding=vectors[i], metadata=p.metadata)
            for i, p in enumerate(pieces)
        ]
        self._emit(Progress("store", plan.name, plan.files, plan.files, len(pieces), len(pieces)))
        with _write_lock:
            # Another ingest of the same input may have finished while this one embedded.
            current = self.store.find_sources(**plan.identity)
            old = current[0] if current else None
            source, status = self._write(plan, chunks, old)
        result = IngestResult(
            source if source.chunk_count else replace(source, chunk_count=len(pieces)),
            status,
            files=plan.files,
            chunks=len(pieces),
            embedded=computed,
            reused=len(pieces) - computed,
            skipped=plan.skipped,
            summary_input=_summary_input(plan),
        )
        self._emit(Progress("done", plan.name, plan.files, plan.files, len(pieces), len(pieces)))
        return result

    def _write(self, plan: _Plan, chunks: list[NewChunk], old: Source | None) -> tuple[Source, str]:
        if old is None:
            source = self.store.add_source(plan.name, plan.type, chunks, meta=plan.meta)
            status = "created"
        elif old.name == plan.name and old.type == plan.type:
            source = self.store.replace_source(old.id, chunks, meta=plan.meta)
            status = "replaced"
        else:
            # Renamed (or a folder that became a git repo): the store keeps name and type
            # from creation, so the new source is written whole, then the old one dropped.
            source = self.store.add_source(plan.name, plan.type, chunks, meta=plan.meta)
            self.store.delete_source(old.id)
            status = "replaced"
        return source, status

    def _chunk(self, plan: _Plan) -> list[_Piece]:
        pieces: list[_Piece] = []
        for rel, document in plan.documents:
            for section in document.sections:
                for chunk in chunk_text(
                    section.text,
                    target_chars=self.chunk_chars,
                    overlap_chars=self.chunk_overlap,
                    kind=section.kind,
                ):
                    content = chunk.text.strip()
                    if not content:
                        continue
                    meta: dict[str, Any] = {}
                    if rel is not None:
                        meta["path"] = rel
                    meta.update(section.location)
                    if chunk.heading:
                        meta["heading"] = chunk.heading
                    meta["start"], meta["end"] = chunk.start, chunk.end
                    meta["format"] = document.format
                    context = [x for x in (rel, chunk.heading) if x and x not in content]
                    embed_text = "\n".join([*context, content])
                    meta["hash"] = sha256(embed_text)[:32]
                    pieces.append(_Piece(content, embed_text, meta))
        total = len(pieces)
        for i, piece in enumerate(pieces):
            piece.metadata = {"chunk": i, "total_chunks": total, **piece.metadata}
        return pieces

    def _stored_vectors(self, source: Source) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        try:
            memories = self.store.source_chunks(source.id)
        except NotFound:
            return out
        for memory in memories:
            key = memory.metadata.get("hash")
            if key and memory.embedding is not None and len(memory.embedding) == self.embedder.dim:
                out[str(key)] = np.asarray(memory.embedding, dtype=np.float32)
        return out

    def _embed(
        self, plan: _Plan, pieces: list[_Piece], reusable: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, int]:
        dim = int(self.embedder.dim)
        vectors = np.zeros((len(pieces), dim), dtype=np.float32)
        todo = []
        for i, piece in enumerate(pieces):
            hit = reusable.get(piece.metadata["hash"])
            if hit is not None:
                vectors[i] = hit
            else:
                todo.append(i)
        done = len(pieces) - len(todo)
        self._emit(Progress("embed", plan.name, plan.files, plan.files, len(pieces), done))
        batch = max(1, self.settings.embed_batch_size)
        for b in range(0, len(todo), batch):
            idx = todo[b : b + batch]
            got = self.embedder.embed([pieces[i].embed_text for i in idx])
            vectors[idx] = got
            done += len(idx)
            self._emit(Progress("embed", plan.name, plan.files, plan.files, len(pieces), done))
        return vectors, len(todo)

    def _emit(self, event: Progress) -> None:
        if self.progress is not None:
            self.progress(event)


# ---- helpers -----------------------------------------------------------------------


def _refuse_secret(path: Path, base: Path) -> None:
    """`Forbidden` when `path` (or a folder on its way from `base`) is a secret."""
    try:
        parts = path.relative_to(base).parts or (path.name,)
    except ValueError:
        parts = path.parts
    hit = is_secret(parts)
    if hit is not None:
        raise Forbidden(
            f"{path} is a secret (pattern {hit!r}): ingest never reads it (nixx.paths "
            "SECRET_PATHS; docs/ingest.md)", param="path")


def _read_bytes(path: Path, limit: int, base: Path, *, allow_hard_links: bool = False) -> bytes:
    """The file's bytes, opened beneath `base` without following a symlink on the way
    (`open_beneath`: `path` is `base`'s real descendant as walked; a symlinked file inside
    is read at its resolved place, which must be beneath `base` too). `ValidationError`
    if it grew past `limit` since it was listed, `Forbidden` if a folder or the file was
    swapped for a symlink, or it is not beneath `base` after all, or it is a hard link
    (more than one name: `nixx.paths.hard_link_refusal`) and `allow_hard_links` is off."""
    import errno
    import os
    import stat

    escaped = Forbidden(f"{path} changed while it was read (a symlink appeared on the way) "
                        "or leads outside the folder: not read", param="path")
    real = path
    if path.is_symlink():
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise escaped from None
    try:
        parts = real.relative_to(base).parts
    except ValueError:
        raise escaped from None
    try:
        fd = open_beneath(base, parts)
    except PermissionError:
        raise Forbidden(f"permission denied reading {path}", param="path") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EINVAL):
            raise escaped from None
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}", param="path") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValidationError(f"{path} is not a regular file", param="path")
        linked = None if allow_hard_links else hard_link_refusal(st, str(path))
        if linked is not None:
            raise Forbidden(linked, param="path")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise ValidationError(
                f"{path.name} is over the {limit}-byte limit (NIXX_INGEST_MAX_FILE_BYTES)",
                param="path",
            )
        return data
    except PermissionError:
        raise Forbidden(f"permission denied reading {path}", param="path") from None
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}", param="path") from None
    finally:
        os.close(fd)


def _read_document(data: bytes, path: Path, *, display: str | None = None) -> Document:
    name = display or str(path)
    reader = reader_for_path(path) or fallback_reader()
    return reader.read(data, name)


def _clean_name(name: str | None) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise ValidationError("name must be a string", param="name")
    return " ".join(name.split()) or None


def _looks_like_markdown(text: str) -> bool:
    return any(line.lstrip().startswith(("#", "```", "~~~")) for line in text.splitlines()[:200])


def _summary_input(plan: _Plan) -> str:
    """What the LLM sees to summarise a source: for a folder, its file list, then the
    beginning of its documents (a README first)."""
    parts: list[str] = []
    docs = plan.documents
    if len(docs) > 1:
        names = [rel or "" for rel, _ in docs]
        parts.append("Files: " + ", ".join(names[:60]) + (" ..." if len(names) > 60 else ""))
        docs = sorted(docs, key=lambda d: not (d[0] or "").lower().startswith("readme"))
    size = sum(len(p) for p in parts)
    for rel, document in docs:
        if size >= SUMMARY_INPUT_CHARS:
            break
        head = f"## {rel}\n" if rel else (f"# {document.title}\n" if document.title else "")
        text = head + document.text[: SUMMARY_INPUT_CHARS - size]
        parts.append(text)
        size += len(text)
    return "\n\n".join(parts)[:SUMMARY_INPUT_CHARS]


__all__ = ["IngestResult", "Ingestor", "Progress", "parse_tags"]
