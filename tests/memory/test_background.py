"""Background jobs: one run of a kind at a time, re-run once when asked meanwhile."""

from __future__ import annotations

import asyncio

from nixx.memory.background import BackgroundJobs


def test_one_at_a_time_and_coalesced() -> None:
    async def go() -> tuple[int, int, dict[str, str]]:
        jobs = BackgroundJobs()
        state = {"running": 0, "max": 0, "runs": 0}
        gate = asyncio.Event()

        async def job() -> None:
            state["running"] += 1
            state["max"] = max(state["max"], state["running"])
            await gate.wait()
            state["runs"] += 1
            state["running"] -= 1

        jobs.schedule("summary", job)
        await asyncio.sleep(0)  # the run has started
        assert jobs.running("summary") and state["running"] == 1
        for _ in range(4):
            jobs.schedule("summary", job)
        gate.set()
        await jobs.wait_idle()

        async def boom() -> None:
            raise RuntimeError("kaput")

        jobs.schedule("intent", boom)
        await jobs.wait_idle()
        await jobs.close()
        return state["max"], state["runs"], jobs.last_error

    most, runs, errors = asyncio.run(go())
    assert most == 1  # never two at once
    assert runs == 2  # the first run, then one more for all the requests made meanwhile
    assert errors == {"intent": "RuntimeError: kaput"}
