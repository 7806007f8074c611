"""The virtual clock the proxy's timed tests run on (virtual_time.py) keeps asyncio's meaning of time."""

from __future__ import annotations

import asyncio
import time
import types

from virtual_time import loop_time, run_in_virtual_time


def test_timers_fire_in_order_at_their_time_and_work_between_them_takes_none():
    async def scenario():
        started, fired = loop_time(), []

        async def after(seconds: float, name: str):
            await asyncio.sleep(seconds)
            fired.append((name, loop_time() - started))

        real = time.monotonic()
        await asyncio.gather(after(30.0, "late"), after(0.1, "early"), asyncio.wait_for(after(0.2, "in time"), 0.3))
        busy_from = loop_time()
        sum(range(2_000_000))  # CPU work between two readings: the clock moves only while every task waits
        timed_out = None
        try:
            await asyncio.wait_for(asyncio.sleep(1.0), 0.5)
        except TimeoutError:
            timed_out = loop_time() - busy_from
        thread_answer = await asyncio.to_thread(lambda: 42)  # a thread's answer still wakes the loop
        return fired, loop_time() - busy_from, timed_out, time.monotonic() - real, thread_answer

    fired, _, timed_out, real_s, thread_answer = run_in_virtual_time(scenario())
    assert [name for name, _ in fired] == ["early", "in time", "late"]
    assert [round(at, 6) for _, at in fired] == [0.1, 0.2, 30.0]
    assert round(timed_out, 6) == 0.5 and thread_answer == 42
    assert real_s < 20  # 30 s of the scenario's time did not pass on the real clock


def test_a_clocked_module_reads_the_loops_time_and_gets_its_own_back():
    module = types.SimpleNamespace(time=time)

    async def scenario():
        before = module.time.monotonic()
        await asyncio.sleep(5.0)
        return module.time.monotonic() - before, module.time.perf_counter is time.perf_counter

    waited, others_real = run_in_virtual_time(scenario(), clocked=[module])
    assert round(waited, 6) == 5.0 and others_real and module.time is time
