"""Run the server under uvicorn, refusing unsafe binds."""

from __future__ import annotations

import os
import sys

from nixx.config import Settings
from nixx.errors import ConfigError


def check_bind(settings: Settings) -> None:
    if not settings.is_loopback and not settings.api_key:
        raise ConfigError(
            f"refusing to bind {settings.host}: a non-loopback address needs NIXX_API_KEY "
            "(set it, or bind 127.0.0.1)"
        )


#: BLAS thread pools limited to one thread for the server process (an explicit value in
#: the environment wins).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads() -> bool:
    """Make every BLAS call of this process single-threaded, from the start.

    The server embeds one short text per turn (the query) from a worker thread.
    OpenBLAS's threaded GEMM then waits on its second thread, which on a busy machine
    stalled one turn in four by 100-800 ms; limiting it per call with threadpoolctl
    did not reliably take hold (it depends on which thread first used BLAS). Set before
    numpy is first imported, the limit holds for every thread: measured in
    docs/performance.md ("Local embedder stalls"). Bulk embedding is unaffected: the
    local embedder runs one single-threaded BLAS per core in its own threads anyway.
    Returns False when numpy was imported already (too late to take effect)."""
    if "numpy" in sys.modules:
        return False
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    return True


def serve(settings: Settings) -> None:
    limit_blas_threads()
    import uvicorn

    from nixx.server.app import create_app

    check_bind(settings)
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level)
