"""The stream id rule: every form of one repository's URL gives the same stream."""

from __future__ import annotations

import hashlib

import pytest

from nixx.errors import ValidationError
from nixx.sync.stream import (
    check_stream_id,
    new_stream_id,
    normalize_origin,
    origin_url,
    resolve_remote,
    stream_for_url,
    stream_id,
)

from .conftest import git

SAME_REPO = [
    "git@github.com:Owner/Repo.git",
    "git@github.com:owner/repo",
    "ssh://git@github.com/owner/repo.git",
    "ssh://git@github.com:22/Owner/Repo.git",
    "git+ssh://git@GitHub.com/owner/repo.git/",
    "https://github.com/owner/repo",
    "https://user:token@github.com:443/owner/repo.git",
    "http://github.com/OWNER/REPO/",
    "git://github.com/owner/repo.git",
]


@pytest.mark.parametrize("url", SAME_REPO)
def test_every_form_of_one_repository_normalises_the_same(url):
    assert normalize_origin(url) == "github.com/owner/repo"
    assert stream_for_url(url) == stream_for_url(SAME_REPO[0])


def test_the_stream_id_is_stream_dash_24_hex_of_sha256():
    expected = "stream-" + hashlib.sha256(b"github.com/owner/repo").hexdigest()[:24]
    assert stream_id("github.com/owner/repo") == expected
    assert stream_for_url("git@github.com:owner/repo.git") == expected
    assert check_stream_id(expected) == expected


def test_different_repositories_and_hosts_differ():
    ids = {stream_for_url(u) for u in (
        "git@github.com:owner/repo.git", "git@github.com:owner/other.git",
        "git@gitlab.com:owner/repo.git", "git@github.com:someone/repo.git")}
    assert len(ids) == 4


def test_deeper_paths_are_kept():
    assert normalize_origin("https://gitlab.com/Group/Sub/Repo.git") == "gitlab.com/group/sub/repo"
    assert normalize_origin("git@gitlab.com:group/sub/repo.git") == "gitlab.com/group/sub/repo"


def test_local_paths_and_file_urls_agree(tmp_path):
    bare = tmp_path / "Remote.git"
    expected = "file" + str(tmp_path / "remote").lower()
    assert normalize_origin(str(bare)) == expected
    assert normalize_origin(f"file://{bare}") == expected
    assert normalize_origin("../Remote.git", base=str(tmp_path / "clone")) == expected


@pytest.mark.parametrize("bad", ["", "   ", "https://github.com/", "git@host:"])
def test_an_url_without_a_repository_is_refused(bad):
    with pytest.raises(ValidationError):
        normalize_origin(bad)


@pytest.mark.parametrize("bad", ["stream-abc", "stream-" + "g" * 24, "x" * 31, "STREAM-" + "a" * 24])
def test_join_ids_are_checked(bad):
    with pytest.raises(ValidationError, match="stream id"):
        check_stream_id(bad)


def test_new_streams_are_random_and_well_formed():
    a, b = new_stream_id(), new_stream_id()
    assert a != b
    check_stream_id(a)


def test_origin_is_read_from_the_repository(tmp_path):
    repo = tmp_path / "repo"
    git("init", "-q", str(repo))
    assert origin_url(str(repo)) is None
    git("remote", "add", "origin", "git@example.org:Team/Proj.git", cwd=repo)
    assert origin_url(str(repo)) == "git@example.org:Team/Proj.git"
    (repo / "sub").mkdir()
    assert origin_url(str(repo / "sub")) == "git@example.org:Team/Proj.git"
    assert origin_url(str(tmp_path / "not-a-repo-at-all")) is None


def test_a_relative_local_remote_resolves_against_the_repository(tmp_path):
    assert resolve_remote("../remote.git", str(tmp_path / "a")) == str(tmp_path / "remote.git")
    assert resolve_remote("git@h:o/r.git", "/x") == "git@h:o/r.git"
    assert resolve_remote("postgresql://u@h/db", "/x") == "postgresql://u@h/db"


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgresql://u@h/db?password=s3cret&sslmode=require",
     "postgresql://u@h/db?password=***&sslmode=require"),
    ("https://ghp_s3cret@github.com/o/r.git", "https://***@github.com/o/r.git"),
    ("https://x-access-token:s3cret@github.com/o/r", "https://x-access-token:***@github.com/o/r"),
    ("git@github.com:o/r.git", "git@github.com:o/r.git"),
    ("/srv/git/r.git", "/srv/git/r.git"),
])
def test_remote_urls_are_shown_without_secrets(url, shown):
    from nixx.sync.state import redact

    assert redact(url) == shown
