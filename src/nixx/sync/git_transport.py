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

Objects are made with plain git plumbing (`hash-object`, `mktree`, `commit-tree`,
`update-ref`, `push`/`fetch` with explicit refspecs) in a private bare repository under
the workspace's `.nxs/sync.git`, so the user's own repository, index and refs are never
touched. Credentials are whatever git uses for that URL (ssh keys, credential helpers of
the user's global config).

Crash safety:
- A segment's blob is a pure function of its ops, and the commit subject names the blob,
  so a batch re-pushed after a crash (pushed, but the watermark not yet advanced) is
  recognised among the ref's recent commits and not written twice.
- A push rejected as non-fast-forward (the local ref lost track of the remote one: a
  deleted `.nxs/sync.git`, a restored workspace, two workspaces sharing a replica prefix)
  fetches the remote ref and rebuilds the new segments on top of it; nothing is lost, and
  readers deduplicate by op id anyway.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence

from nixx.errors import SyncError
from nixx.log.op import Op
from nixx.sync.transport import Pulled, Transport, decode_op, encode_op

SEGMENT = "segment.jsonl"
LOCAL_PREFIX = "refs/nxs-seen"  # where fetched refs land in the private repository
_RECENT = 64  # how many of a ref's latest segments a push checks for a repeated batch
_PUSH_ATTEMPTS = 3


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
            raise SyncError(f"git {args[0]} against {self.remote} took longer than "
                            f"{self.timeout:.0f}s") from exc
        if check and proc.returncode != 0:
            detail = proc.stderr.decode("utf-8", "replace").strip()
            where = f" (remote {self.remote})" if remote_op else ""
            raise SyncError(f"git {args[0]} failed{where}: {detail}")
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
        return self.remote

    def fetch(self) -> None:
        """Fetch every origin's ref of the stream into `refs/nxs-seen/<stream>/*`."""
        self._run("fetch", "-q", "--no-tags", "--no-write-fetch-head", "--prune", self.remote,
                  f"+refs/nxs/{self.stream}/*:{LOCAL_PREFIX}/{self.stream}/*", remote_op=True)
        self._fetched = True

    # -- push ------------------------------------------------------------------------

    def _recent_blobs(self, tip: str | None) -> set[str]:
        if tip is None:
            return set()
        out = self._out("log", f"-{_RECENT}", "--format=%s", tip)
        return {line.split()[2] for line in out.splitlines()
                if line.startswith("nxs segment ") and len(line.split()) >= 3}

    def _pushed_up_to(self, tip: str | None) -> int | None:
        """The highest local seq already on our chain, when its tip was written from this
        very log file (`source`); else None (nothing can be skipped by seq)."""
        if tip is None or self.source is None:
            return None
        body = self._out("log", "-1", "--format=%B", tip)
        fields = dict(line.split(": ", 1) for line in body.splitlines() if ": " in line)
        if fields.get("db") != self.source or "-" not in fields.get("seq", ""):
            return None
        hi = fields["seq"].rpartition("-")[2]
        return int(hi) if hi.isdigit() else None

    def _commit(self, parent: str | None, batches: Sequence[Sequence[Op]]) -> str | None:
        """Chain one commit per batch on `parent`, leaving out ops the chain already holds
        (by seq, for a chain this log wrote; and whole batches seen among its recent
        segments); returns the new tip (`parent` when everything was already there)."""
        recent = self._recent_blobs(parent)
        done = self._pushed_up_to(parent)
        tip = parent
        for batch in batches:
            if done is not None:
                batch = [op for op in batch if op.seq is None or op.seq > done]
            if not batch:
                continue
            data = "".join(encode_op(op) + "\n" for op in batch).encode("utf-8")
            blob = self._out("hash-object", "-w", "--stdin", input=data)
            if blob in recent:
                continue
            tree = self._out("mktree", input=f"100644 blob {blob}\t{SEGMENT}\n".encode())
            seqs = [op.seq for op in batch if op.seq is not None]
            message = (f"nxs segment {blob} ops={len(batch)}\n\norigin: {self.replica}\n"
                       f"stream: {self.stream}\n")
            if self.source is not None:
                message += f"db: {self.source}\n"
            if seqs:
                message += f"seq: {min(seqs)}-{max(seqs)}\n"
            args = ["commit-tree", tree, "-m", message]
            if tip is not None:
                args[2:2] = ["-p", tip]
            tip = self._out(*args)
            recent.add(blob)
        return tip

    def push(self, batches: Sequence[Sequence[Op]]) -> None:
        if not any(batches):
            return
        parent = self._rev(self.own_ref)
        for _attempt in range(_PUSH_ATTEMPTS):
            tip = self._commit(parent, batches)
            if tip is None:
                return
            # the local ref first: a crash before the push leaves a chain the next push
            # fast-forwards (its batches are recognised and not committed twice)
            self._run("update-ref", self.own_ref, tip)
            proc = self._run("push", "-q", "--no-verify", self.remote,
                             f"{tip}:{self.own_ref}", check=False)
            if proc.returncode == 0:
                return
            detail = proc.stderr.decode("utf-8", "replace")
            if "rejected" not in detail and "non-fast-forward" not in detail:
                raise SyncError(f"git push to {self.remote} failed: {detail.strip()}")
            # non-fast-forward on our own ref: adopt the remote's chain and rebuild on it
            self.fetch()
            parent = self._rev(self._seen_ref(self.replica))
            self._run("update-ref", self.own_ref, parent or tip)
        raise SyncError(f"git push to {self.remote} kept being rejected on {self.own_ref}: "
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

    def _read_segments(self, commits: list[str]) -> tuple[list[Op], int]:
        data = "".join(f"{c}:{SEGMENT}\n" for c in commits).encode()
        out = self._run("cat-file", "--batch", input=data).stdout
        ops: list[Op] = []
        rejected = 0
        pos = 0
        for _ in commits:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if len(header) < 3 or header[1] != b"blob":  # "<name> missing": not a segment
                rejected += 1
                continue
            size = int(header[2])
            body = out[pos:pos + size]
            pos += size + 1
            for line in body.splitlines():
                if not line.strip():
                    continue
                op = decode_op(line)
                if op is None:
                    rejected += 1
                else:
                    ops.append(op)
        return ops, rejected

    def pull(self, cursor: str | None, limit: int) -> Pulled:
        if not self._fetched:
            self.fetch()
        seen: dict[str, str] = json.loads(cursor) if cursor else {}
        tips = self._origins()
        picked: list[str] = []
        total = 0
        more = False
        new_seen = dict(seen)
        for origin in sorted(tips):
            if origin == self.replica or tips[origin] == seen.get(origin):
                continue
            if total >= limit:
                more = True
                break
            for sha, count in self._new_commits(tips[origin], seen.get(origin)):
                if total >= limit:
                    more = True
                    break
                picked.append(sha)
                total += count
                new_seen[origin] = sha
        if not picked:
            return Pulled([], cursor, False)
        ops, rejected = self._read_segments(picked)
        return Pulled(ops, json.dumps(new_seen, sort_keys=True), more, rejected)
