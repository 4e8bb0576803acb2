"""ci_evals._util.quiet: background work starts once the event loop has gone quiet."""

from __future__ import annotations

import asyncio
import time

from ci_evals._util.quiet import TICK_S, thread_when_quiet, when_quiet


def busy_for(loop: asyncio.AbstractEventLoop, turns: int, each_s: float, done: list[float]) -> None:
    """``turns`` loop iterations that each keep the loop busy ``each_s`` (a wave of requests
    being written), then the time they ended in ``done``."""

    def turn(left: int) -> None:
        end = time.perf_counter() + each_s
        while time.perf_counter() < end:
            pass
        if left > 1:
            loop.call_soon(turn, left - 1)
        else:
            done.append(time.perf_counter())

    loop.call_soon(turn, turns)


def test_starts_only_after_the_busy_iterations_and_soon_after():
    async def main() -> tuple[float, float]:
        done: list[float] = []
        started: list[float] = []
        busy_for(asyncio.get_running_loop(), 8, 0.01, done)
        await when_quiet(lambda: started.append(time.perf_counter()))
        return done[0], started[0]

    busy_end, started = asyncio.run(main())
    assert started >= busy_end
    assert started - busy_end < 0.05  # a few ticks of 2 ms, on a shared machine


def test_an_idle_loop_starts_at_the_first_tick():
    async def main() -> float:
        t0 = time.perf_counter()
        await when_quiet(lambda: None)
        return time.perf_counter() - t0

    assert asyncio.run(main()) < 0.05
    assert TICK_S == 0.002


def test_a_loop_never_quiet_starts_it_at_the_latest():
    async def main() -> tuple[float, bool]:
        done: list[float] = []
        loop = asyncio.get_running_loop()
        busy_for(loop, 100, 0.005, done)  # 0.5 s, never quiet
        t0 = time.perf_counter()
        await when_quiet(lambda: None, latest=0.1)
        return time.perf_counter() - t0, bool(done)

    waited, busy_over = asyncio.run(main())
    assert 0.1 <= waited < 0.3
    assert not busy_over  # started while the loop was still busy


def test_a_cancelled_task_never_starts_the_thread():
    ran: list[bool] = []

    async def main() -> None:
        busy_for(asyncio.get_running_loop(), 20, 0.005, [])
        task = thread_when_quiet(lambda: ran.append(True), "t")
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0.2)

    asyncio.run(main())
    assert ran == []


def test_the_thread_runs_the_work_under_its_name():
    import threading

    names: list[str] = []
    finished = threading.Event()

    async def main() -> None:
        await thread_when_quiet(
            lambda: (names.append(threading.current_thread().name), finished.set()), "ci-evals-x"
        )

    asyncio.run(main())
    assert finished.wait(5)
    assert names == ["ci-evals-x"]


def _fresh_prices(monkeypatch) -> list[str]:
    """ci_evals.llm.prices with no warm-up done yet, whose loading records the thread it ran on."""
    import threading

    from ci_evals.llm import prices

    ran: list[str] = []
    monkeypatch.setattr(prices, "_warm_thread", None)
    monkeypatch.setattr(prices, "_warm_task", None)
    monkeypatch.setattr(prices, "loaded_paths", list)  # other tests may have loaded user files
    monkeypatch.setattr(
        prices, "_warm_quietly", lambda: ran.append(threading.current_thread().name)
    )
    return ran


def test_the_price_list_waits_for_a_quiet_loop(monkeypatch):
    from ci_evals.llm import prices

    ran = _fresh_prices(monkeypatch)

    async def main() -> None:
        done: list[float] = []
        busy_for(asyncio.get_running_loop(), 8, 0.01, done)
        prices.warm()
        thread = prices._warm_thread
        assert thread is not None and thread.ident is None  # not beside the busy turns
        assert prices._warm_task is not None
        await prices._warm_task
        assert done  # started once they were over
        assert thread.ident is not None
        thread.join()

    asyncio.run(main())
    assert ran == ["ci-evals-prices"]


def test_warmed_starts_a_waiting_price_list_once(monkeypatch):
    """The end's thread asks for the list first: it starts it and waits; the quiet task, firing
    later, starts nothing twice."""
    from ci_evals.llm import prices

    ran = _fresh_prices(monkeypatch)

    async def main() -> None:
        prices.warm()
        prices.warmed()
        assert ran == ["ci-evals-prices"]
        assert prices._warm_task is not None
        await prices._warm_task

    asyncio.run(main())
    assert ran == ["ci-evals-prices"]


def test_outside_an_event_loop_the_price_list_starts_at_once(monkeypatch):
    from ci_evals.llm import prices

    ran = _fresh_prices(monkeypatch)
    prices.warm()
    thread = prices._warm_thread
    assert thread is not None and thread.ident is not None
    assert prices._warm_task is None
    thread.join()
    assert ran == ["ci-evals-prices"]
