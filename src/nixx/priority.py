"""Background threads yield the CPU to the threads that answer requests.

A turn waits for its request threads; nothing waits for a row's vector. On Linux a thread
can lower its own priority (`setpriority` on its thread id); at nice 19 the scheduler gives
it about 1/70 of a core that a nice-0 thread also wants, and all of an idle one. Measured on
bench/bench_turn.py --embed local (docs/performance.md): the turn's added time drops when
the row-vector queue runs at 19 rather than 5.
"""

from __future__ import annotations

import contextlib
import os
import threading

BACKGROUND_NICE = 19


def lower_thread_priority(nice: int = BACKGROUND_NICE) -> None:
    """Give the calling thread (only it) the nice value `nice`; nothing where threads have
    no priority of their own (not Linux) or lowering is refused."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
