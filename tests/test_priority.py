"""`nixx.priority.Foreground`: background work waits for a quiet moment of the requests'
CPU-heavy sections, and never longer than its bound."""

from __future__ import annotations

import threading

from nixx.priority import Foreground


def test_nothing_busy_is_quiet_at_once() -> None:
    assert Foreground().wait_quiet(quiet=0.0, max_wait=0.0) is True


def test_a_busy_section_holds_the_wait_until_its_bound() -> None:
    fg = Foreground()
    with fg.busy():
        assert fg.wait_quiet(quiet=0.0, max_wait=0.05) is False


def test_a_waiter_goes_on_once_the_section_ended_and_it_stayed_quiet() -> None:
    fg = Foreground()
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def request() -> None:
        with fg.busy():
            entered.set()
            release.wait(30)
            order.append("request done")

    worker = threading.Thread(target=request)
    worker.start()
    assert entered.wait(30)
    got: list[bool] = []
    waiter = threading.Thread(
        target=lambda: (got.append(fg.wait_quiet(quiet=0.01, max_wait=60)), order.append("went"))
    )
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # still waiting: the section is open
    release.set()
    worker.join(30)
    waiter.join(30)
    assert got == [True] and order == ["request done", "went"]


def test_sections_nest_across_threads() -> None:
    fg = Foreground()
    with fg.busy():
        with fg.busy():
            pass
        assert fg.wait_quiet(quiet=0.0, max_wait=0.0) is False  # the outer one is open
    assert fg.wait_quiet(quiet=0.0, max_wait=0.0) is True


def test_an_exclusive_section_waits_for_busy_ones_and_holds_new_ones() -> None:
    fg = Foreground()
    order: list[str] = []
    in_request, release_request = threading.Event(), threading.Event()
    in_switch, release_switch = threading.Event(), threading.Event()

    def request() -> None:
        with fg.busy():
            in_request.set()
            release_request.wait(30)
            order.append("first request done")

    def switch() -> None:
        with fg.exclusive():
            order.append("switch runs")
            in_switch.set()
            release_switch.wait(30)
            order.append("switch done")

    def late_request() -> None:
        with fg.busy():
            order.append("late request runs")

    first = threading.Thread(target=request)
    first.start()
    assert in_request.wait(30)
    exclusive = threading.Thread(target=switch)
    exclusive.start()
    exclusive.join(0.1)
    assert order == []  # the switch waits for the request in flight
    release_request.set()
    assert in_switch.wait(30)
    late = threading.Thread(target=late_request)
    late.start()
    late.join(0.1)
    assert order == ["first request done", "switch runs"]  # the new request waits
    release_switch.set()
    for t in (first, exclusive, late):
        t.join(30)
    assert order == ["first request done", "switch runs", "switch done", "late request runs"]
