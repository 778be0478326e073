"""The git transport: the stream lives in the repository's own remote.

Layout on the remote, per stream::

    refs/nxs/<stream>/<origin>     one ref per replica, written only by that replica
        commit  "nxs segment <blob> ops=<n>"   parent: the previous segment of that origin
          tree
            segment.jsonl          one immutable segment: the batch, one op per line
                                   (canonical JSON, the wire form)

Each replica appends commits to its own ref only, so two replicas never race on one ref
(a push is a fast-forward of a ref nobody else writes). A pull fetches
``refs/nxs/<stream>/*`` and reads, for every other origin, the segments past the commit
it read last (the cursor is ``{origin: commit}``, JSON).

Objects are made with git itself (one `fast-import` per push for the blobs and the chain
of commits, `push`/`fetch` with explicit refspecs, `log`/`cat-file --batch` to read) in
a private bare repository under
the workspace's `.nxs/sync.git`, so the user's own repository, index and refs are never
touched. Credentials are whatever git uses for that URL (ssh keys, credential helpers of
the user's global config).

Crash safety:
- A push leaves out the ops that the latest segments of our ref already hold (by op id),
  and a batch whose blob is already there, so a push repeated after a crash (pushed, but
  the watermark not yet advanced) adds nothing. Op ids, not local seqs, decide: a
  workspace restored from a backup reuses seqs for new ops, and those still go out.
- A push rejected as non-fast-forward (the local ref lost track of the remote one: a
  deleted `.nxs/sync.git`, a restored workspace, two workspaces sharing a replica prefix)
  fetches the remote ref and rebuilds the new segments on top of it; nothing is lost, and
  readers deduplicate by op id anyway.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import IO

from nixx.errors import SyncError
from nixx.log.op import Op
from nixx.sync.transport import (
    END_BYTES,
    Oversized,
    Pulled,
    Transport,
    decode_op,
    encode_op,
    oversized,
)

SEGMENT = "segment.jsonl"
LOCAL_PREFIX = "refs/nxs-seen"  # where fetched refs land in the private repository
#: how many of our ref's latest segments a push reads to leave out ops already there: more
#: than one push call writes (`engine.BATCHES_PER_PUSH`), so a call repeated after a
#: crash is recognised whole
_RECENT = 32
_SELF = "__self__"  # cursor key: has our own ref been read back since the (re)bind?
_ID_RE = re.compile(rb'"id":"(o[0-9a-f]{32})"')
_PUSH_ATTEMPTS = 3
_CHUNK = 1 << 16


def _lines(stream: IO[bytes], size: int, max_len: int,
           ) -> Iterator[tuple[bytes | tuple[bytes, bytes], int]]:
    """The non-empty lines of the next `size` bytes of `stream`, each with its length; a
    line longer than `max_len` comes as (its first, its last `END_BYTES`): memory stays
    within `max_len` plus a chunk whatever the segment holds."""
    buf = b""
    head: bytes | None = None  # set while inside an oversized line
    tail, length = b"", 0
    left = size
    while left > 0:
        chunk = stream.read(min(_CHUNK, left))
        if not chunk:
            raise SyncError("git cat-file ended in the middle of a segment")
        left -= len(chunk)
        while chunk:
            cut = chunk.find(b"\n")
            piece, chunk = (chunk, b"") if cut < 0 else (chunk[:cut], chunk[cut + 1:])
            if head is None:
                buf += piece
                if len(buf) > max_len:
                    head, tail, length, buf = buf[:END_BYTES], buf[-END_BYTES:], len(buf), b""
            else:
                tail, length = (tail + piece)[-END_BYTES:], length + len(piece)
            if cut >= 0:
                if head is not None:
                    yield (head, tail), length
                elif buf.strip():
                    yield buf, len(buf)
                head, tail, length, buf = None, b"", 0, b""
    if head is not None:
        yield (head, tail), length
    elif buf.strip():
        yield buf, len(buf)


class GitTransport(Transport):
    name = "git"

    def __init__(self, *, remote: str, stream: str, replica: str, state_dir: str,
                 source: str | None = None, timeout: float = 300.0) -> None:
        self.remote = remote
        self.source = source
        self.stream = stream
        self.replica = replica
        self.git_dir = os.path.join(state_dir, "sync.git")
        self.timeout = timeout
        self._fetched = False
        self._env = {
            **os.environ,
            "GIT_DIR": self.git_dir,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "nxs sync", "GIT_AUTHOR_EMAIL": f"nxs-{replica}@localhost",
            "GIT_COMMITTER_NAME": "nxs sync", "GIT_COMMITTER_EMAIL": f"nxs-{replica}@localhost",
        }
        for name in ("GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                     "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE"):
            self._env.pop(name, None)
        if not os.path.isfile(os.path.join(self.git_dir, "HEAD")):
            self._run("init", "--bare", "-q", self.git_dir)
            self._run("config", "gc.auto", "0")  # objects are few; no surprise gc mid-pass

    # -- plumbing --------------------------------------------------------------------

    def _run(self, *args: str, input: bytes | None = None, check: bool = True,
             remote_op: bool = False) -> subprocess.CompletedProcess[bytes]:
        try:
            proc = subprocess.run(["git", *args], input=input, capture_output=True,
                                  env=self._env, timeout=self.timeout)
        except FileNotFoundError as exc:
            raise SyncError("the git transport needs `git` on PATH") from exc
        except subprocess.TimeoutExpired as exc:
            raise SyncError(f"git {args[0]} against {self.describe()} took longer than "
                            f"{self.timeout:.0f}s") from exc
        if check and proc.returncode != 0:
            detail = proc.stderr.decode("utf-8", "replace").strip().replace(
                self.remote, self.describe())
            where = f" (remote {self.describe()})" if remote_op else ""
            verb = next((a for a in args if not a.startswith("-") and "=" not in a), args[0])
            raise SyncError(f"git {verb} failed{where}: {detail}")
        return proc

    def _out(self, *args: str, input: bytes | None = None) -> str:
        return self._run(*args, input=input).stdout.decode("utf-8").strip()

    def _rev(self, ref: str) -> str | None:
        proc = self._run("rev-parse", "--verify", "-q", ref + "^{commit}", check=False)
        if proc.returncode != 0:
            return None
        return proc.stdout.decode().strip() or None

    @property
    def own_ref(self) -> str:
        return f"refs/nxs/{self.stream}/{self.replica}"

    def _seen_ref(self, origin: str) -> str:
        return f"{LOCAL_PREFIX}/{self.stream}/{origin}"

    def describe(self) -> str:
        from nixx.sync.state import redact

        return redact(self.remote)

    def fetch(self) -> None:
        """Fetch every origin's ref of the stream into `refs/nxs-seen/<stream>/*`."""
        args = ["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--prune"]
        if self.remote.startswith(("/", "file://")):
            # a repository on this machine: its upload-pack is ours to configure, so skip
            # the delta search there too (over ssh/https the server packs as it likes)
            args.append("--upload-pack=git -c pack.window=0 upload-pack")
        self._run(*args, self.remote,
                  f"+refs/nxs/{self.stream}/*:{LOCAL_PREFIX}/{self.stream}/*", remote_op=True)
        self._fetched = True

    # -- push ------------------------------------------------------------------------

    def _chain(self, tip: str | None) -> tuple[set[str], set[str]]:
        """What the latest segments of the chain ending at `tip` hold: their blob ids and
        the ids of their ops (read from the top-level ``"id"`` of each line, which in the
        canonical form comes before any nested object)."""
        if tip is None:
            return set(), set()
        out = self._out("log", f"-{_RECENT}", "--format=%H %s", tip)
        commits, blobs = [], set()
        for line in out.splitlines():
            sha, _, subject = line.partition(" ")
            words = subject.split()
            if len(words) >= 3 and words[:2] == ["nxs", "segment"]:
                commits.append(sha)
                blobs.add(words[2])
        ids: set[str] = set()
        if commits:
            data = "".join(f"{c}:{SEGMENT}\n" for c in commits).encode()
            raw = self._run("cat-file", "--batch", input=data).stdout
            for row in raw.split(b"\n"):
                match = _ID_RE.search(row)
                if match:
                    ids.add(match.group(1).decode())
        return blobs, ids

    def _commit(self, parent: str | None, batches: Sequence[Sequence[Op]]) -> str | None:
        """Chain one commit per batch on `parent` (one `git fast-import`), leaving out ops
        the chain's latest segments already hold; returns the new tip (`parent` when
        everything was already there). The private repository's `own_ref` points at it."""
        recent, there = self._chain(parent)
        stream = bytearray()
        now = int(time.time())
        marks = 0
        for batch in batches:
            batch = [op for op in batch if op.id not in there]
            if not batch:
                continue
            data = "".join(encode_op(op) + "\n" for op in batch).encode("utf-8")
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            if blob in recent:
                continue
            recent.add(blob)
            seqs = [op.seq for op in batch if op.seq is not None]
            message = (f"nxs segment {blob} ops={len(batch)}\n\norigin: {self.replica}\n"
                       f"stream: {self.stream}\n")
            if self.source is not None:
                message += f"db: {self.source}\n"
            if seqs:
                message += f"seq: {min(seqs)}-{max(seqs)}\n"
            body = message.encode("utf-8")
            marks += 1
            stream += b"blob\nmark :%d\ndata %d\n%s\n" % (marks, len(data), data)
            stream += (f"commit {self.own_ref}\nmark :{marks + 1}\n"
                       f"committer nxs sync <nxs-{self.replica}@localhost> {now} +0000\n"
                       ).encode() + b"data %d\n%s\n" % (len(body), body)
            if marks == 1 and parent is not None:
                stream += f"from {parent}\n".encode()
            stream += b"deleteall\nM 100644 :%d %s\n\n" % (marks, SEGMENT.encode())
            marks += 1
        if not marks:
            return parent
        if parent is None:  # a root commit: the branch must start empty
            self._run("update-ref", "-d", self.own_ref, check=False)
        self._run("fast-import", "--quiet", "--force", "--done",
                  input=bytes(stream) + b"done\n")
        return self._rev(self.own_ref)

    def push(self, batches: Sequence[Sequence[Op]]) -> None:
        if not any(batches):
            return
        parent = self._rev(self.own_ref)
        for _attempt in range(_PUSH_ATTEMPTS):
            tip = self._commit(parent, batches)
            if tip is None:
                return
            # the local ref moved first: a crash before the push leaves a chain the next
            # push fast-forwards (its batches are recognised and not committed twice)
            # no delta search: segments are distinct ops that zlib already compresses;
            # searching for deltas between them cost 7x the push time (measured)
            proc = self._run("-c", "pack.window=0", "push", "-q", "--no-verify", self.remote,
                             f"{tip}:{self.own_ref}", check=False)
            if proc.returncode == 0:
                return
            detail = proc.stderr.decode("utf-8", "replace").replace(self.remote, self.describe())
            if "rejected" not in detail and "non-fast-forward" not in detail:
                raise SyncError(f"git push to {self.describe()} failed: {detail.strip()}")
            # non-fast-forward on our own ref: adopt the remote's chain and rebuild on it
            self.fetch()
            parent = self._rev(self._seen_ref(self.replica))
            self._run("update-ref", self.own_ref, parent or tip)
        raise SyncError(f"git push to {self.describe()} kept being rejected on {self.own_ref}: "
                        "another workspace is pushing with this replica prefix")

    # -- pull ------------------------------------------------------------------------

    def _origins(self) -> dict[str, str]:
        prefix = f"{LOCAL_PREFIX}/{self.stream}/"
        out = self._out("for-each-ref", "--format=%(refname) %(objectname)", prefix)
        tips = {}
        for line in out.splitlines():
            ref, _, sha = line.partition(" ")
            tips[ref[len(prefix):]] = sha
        return tips

    def _has(self, sha: str) -> bool:
        return self._run("cat-file", "-e", sha + "^{commit}", check=False).returncode == 0

    def _new_commits(self, tip: str, seen: str | None) -> list[tuple[str, int]]:
        """(commit, op count) past `seen` up to `tip`, oldest first."""
        args = ["log", "--reverse", "--format=%H %s", tip]
        if seen is not None and self._has(seen):
            args.append("^" + seen)
        out = self._out(*args)
        commits = []
        for line in out.splitlines():
            sha, _, subject = line.partition(" ")
            count = 1
            for word in subject.split():
                if word.startswith("ops=") and word[4:].isdigit():
                    count = max(1, int(word[4:]))
            commits.append((sha, count))
        return commits

    def _read_segments(self, commits: list[tuple[str, str]], max_op_bytes: int,
                       ) -> tuple[list[Op], list[str], int, list[Oversized]]:
        """The ops of `commits` ((commit, the origin whose ref holds it)), the origin each
        was read under, how many entries were not ops, and the entries longer than
        `max_op_bytes` (never held whole: `_lines` streams each segment)."""
        ops: list[Op] = []
        pushers: list[str] = []
        rejected = 0
        big: list[Oversized] = []
        try:
            proc = subprocess.Popen(["git", "cat-file", "--batch"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env=self._env)
        except FileNotFoundError as exc:
            raise SyncError("the git transport needs `git` on PATH") from exc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for commit, origin in commits:
                proc.stdin.write(f"{commit}:{SEGMENT}\n".encode())
                proc.stdin.flush()
                header = proc.stdout.readline().split()
                if len(header) < 3 or header[1] != b"blob":  # "<name> missing": no segment
                    rejected += 1
                    continue
                for line, size in _lines(proc.stdout, int(header[2]), max_op_bytes):
                    if isinstance(line, tuple):
                        big.append(oversized(line[0], line[1], size, origin))
                        continue
                    op = decode_op(line, verify=False)
                    if op is None:
                        rejected += 1
                    else:
                        ops.append(op)
                        pushers.append(origin)
                proc.stdout.read(1)  # the newline after each object
        finally:
            proc.stdin.close()
            proc.stdout.close()
            proc.wait(timeout=self.timeout)
        return ops, pushers, rejected, big

    def pull(self, cursor: str | None, limit: int, max_op_bytes: int) -> Pulled:
        """Segments of every origin past the cursor. Our own ref is read too until the
        first catch-up after a (re)bind (`cursor` None): a workspace restored from a
        backup gets back what it had pushed since; afterwards it is skipped."""
        if not self._fetched:
            self.fetch()
        seen: dict[str, str] = json.loads(cursor) if cursor else {_SELF: "reading"}
        read_self = seen.get(_SELF) == "reading"
        tips = self._origins()
        picked: list[tuple[str, str]] = []
        total = 0
        more = False
        new_seen = dict(seen)
        for origin in sorted(tips):
            if (origin == self.replica and not read_self) or tips[origin] == seen.get(origin):
                continue
            if total >= limit:
                more = True
                break
            for sha, count in self._new_commits(tips[origin], seen.get(origin)):
                if total >= limit:
                    more = True
                    break
                picked.append((sha, origin))
                total += count
                new_seen[origin] = sha
        if read_self and not more:
            new_seen[_SELF] = "done"
        new_cursor = json.dumps(new_seen, sort_keys=True)
        if not picked:
            return Pulled([], new_cursor if new_seen != seen or cursor is None else cursor,
                          False)
        ops, pushers, rejected, big = self._read_segments(picked, max_op_bytes)
        return Pulled(ops, new_cursor, more, rejected, pushers=pushers, oversized=big)
