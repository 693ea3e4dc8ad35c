"""Reliability on trio's own terms: an exact step-by-step cancellation sweep, and faults in
virtual time.

The sweep here uses a trio instrument that counts every step of the call's task tree and cancels
after the k-th one, for every k (see :func:`tests.reliability.harness.sweep`), so no scheduling
point is skipped. Timeouts and slow handlers run on the ``autojump_clock``: the waits are
virtual, the order they impose is real.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Sequence
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from lionagi.protocols.messages import Instruction, Message
from lionagi.service.errors import ProviderTimeout
from lionagi.session.signal import RunEnd, RunFailed, RunStart
from lionagi.testing import FunctionModel
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch
from tests.reliability.harness import run_attempt, sweep
from tests.reliability.scenarios import (
    SUBJECTS,
    cli_run_subject,
    cli_subject,
    http_run_subject,
    http_subject,
    routing_server,
)
from tests.service.http_server import ScriptedServer


# -- exact sweeps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SUBJECTS))
async def test_cancel_after_every_step(name: str) -> None:
    report = await sweep(name, SUBJECTS[name], steps=True, repeats=1)
    assert report.violations == []
    assert report.points >= 1
    assert report.cancelled_after_start >= 1


async def test_cancel_http_chat_after_every_step(server: ScriptedServer) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = await sweep("http", http_subject(server), steps=True, repeats=1)
        gc.collect()
    assert report.violations == []
    assert report.cancelled_after_start >= 5
    assert [str(w.message) for w in caught] == []


async def test_cancel_http_streamed_run_after_every_step() -> None:
    with routing_server() as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = await sweep("http run", http_run_subject(server), steps=True, repeats=1)
        gc.collect()
    assert report.violations == []
    assert report.cancelled_after_start >= 5
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("operation", ["chat_and_record", "run"])
async def test_cancel_cli_after_every_step(processes: list[Any], operation: str) -> None:
    make = cli_subject(processes) if operation == "chat_and_record" else cli_run_subject(processes)
    report = await sweep(f"cli {operation}", make, steps=True, repeats=1)
    assert report.violations == []
    assert report.cancelled_after_start >= 5
    assert processes


async def test_cancelled_http_connect_reports_the_cancellation_itself(
    server: ScriptedServer,
) -> None:
    """trio's connect runs in a nursery that wraps a cancellation in a group; the turn's
    RunFailed must still carry the cancellation itself, as on asyncio."""
    make = http_subject(server)
    carried: list[BaseException | None] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(1, 12):
            attempt, _ = await run_attempt(make, step, steps=True)
            if isinstance(attempt.terminal, RunFailed):
                carried.append(attempt.terminal.data)
        gc.collect()
    assert carried
    assert all(isinstance(data, trio.Cancelled) for data in carried), carried
    assert [str(w.message) for w in caught] == []


async def test_cancelled_http_request_leaves_no_unfinished_generator(
    server: ScriptedServer,
) -> None:
    """A send cancelled half-way leaves no suspended async generator behind (trio would warn
    when collecting it)."""
    make = http_subject(server)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(1, 30):
            await run_attempt(make, step, steps=True)
            gc.collect()
            await trio.lowlevel.checkpoint()
    assert [str(w.message) for w in caught] == []


# -- faults in virtual time -----------------------------------------------------------------------
async def test_hung_model_times_out_and_frees_the_branch(autojump_clock: MockClock) -> None:
    async def hang(messages: Sequence[Message], **options: Any) -> str:
        if isinstance(messages[-1], Instruction) and messages[-1].instruction == "hang":
            await trio.sleep_forever()
        return "ok"

    # retry=None: the timeout itself is under test (retries: test_retry_trio.py)
    branch, recorder, _ = observed_branch(chat_model=FunctionModel(hang, timeout=30, retry=None))
    start = trio.current_time()
    with pytest.raises(ProviderTimeout, match="30s"):
        await branch.chat_and_record("hang")
    assert trio.current_time() - start == pytest.approx(30)
    [failed] = recorder.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, ProviderTimeout)
    assert list(branch.msgs) == []  # no reply: the instruction is not committed either
    assert_idle(branch)
    assert await branch.chat_and_record("next") == "ok"


async def test_slow_terminal_handler_holds_the_next_turn_until_it_returns(
    autojump_clock: MockClock,
) -> None:
    branch, recorder, session = observed_branch()
    times: dict[str, float] = {}

    async def slow_end(signal: RunEnd, _: Any) -> None:
        if "first_end" not in times:
            await trio.sleep(10)
            times["first_end"] = trio.current_time()

    def on_start(signal: RunStart, _: Any) -> None:
        times.setdefault("first_start", trio.current_time())
        times["last_start"] = trio.current_time()

    session.observe(RunEnd, slow_end)
    session.observe(RunStart, on_start)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(branch.chat_and_record, "first")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(branch.chat_and_record, "second")
    assert times["last_start"] >= times["first_end"] == times["first_start"] + 10
    assert_one_terminal_per_start(recorder)
    texts = [m.instruction for m in branch.msgs if isinstance(m, Instruction)]
    assert texts == ["first", "second"]
    assert_idle(branch)


async def test_slow_context_provider_is_cut_off_by_the_callers_deadline(
    autojump_clock: MockClock,
) -> None:
    branch, recorder, _ = observed_branch(system="s")

    async def slow(branch: Any, instruction: Instruction) -> str:
        await trio.sleep(3600)
        return "late"

    branch.providers.register(slow)
    with trio.move_on_after(5) as deadline:
        await branch.chat_and_record("q")
    assert deadline.cancelled_caught
    [failed] = recorder.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, trio.Cancelled)
    assert_idle(branch)
    branch.providers.unregister("slow")
    assert await branch.chat_and_record("again") == "ok"
