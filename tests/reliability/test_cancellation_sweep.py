"""Cancel each operation at every scheduling point of one call; the ADR's invariants must hold.

See :mod:`tests.reliability.harness` for the technique and the checks made after each attempt.
"""

from __future__ import annotations

import gc
import warnings
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi.operations.turn import run_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import Instruction, ToolCall
from lionagi.testing import FunctionModel
from tests.helpers import observed_branch
from tests.reliability.harness import Subject, backend, sweep, wire_violations
from tests.reliability.scenarios import (
    SUBJECTS,
    cli_run_subject,
    cli_subject,
    http_run_subject,
    http_subject,
    routing_server,
)
from tests.service.http_server import ScriptedServer

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", list(SUBJECTS))
async def test_cancel_at_every_scheduling_point(name: str) -> None:
    report = await sweep(name, SUBJECTS[name])
    assert report.violations == []
    assert report.points >= 1
    if backend() == "asyncio":  # trio's varying order can skip the narrowest windows here;
        assert report.cancelled_after_start >= 1  # tests_trio sweeps every step exactly


async def test_cancel_http_chat_at_sampled_points(server: ScriptedServer) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = await sweep("http", http_subject(server), geometric=True, limit=200_000, repeats=1)
        gc.collect()  # unfinished async generators warn when collected: collect them here
    assert report.violations == []
    assert report.cancelled_after_start >= 3
    assert [str(w.message) for w in caught] == []


async def test_cancel_http_streamed_run_with_tools_at_sampled_points() -> None:
    with routing_server() as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = await sweep(
            "http run", http_run_subject(server), geometric=True, limit=200_000, repeats=1
        )
        gc.collect()
    assert report.violations == []
    assert report.cancelled_after_start >= 3
    assert [str(w.message) for w in caught] == []


async def test_cancel_cli_streamed_run_at_sampled_points(processes: list[Any]) -> None:
    report = await sweep(
        "cli run", cli_run_subject(processes), geometric=True, limit=500_000, repeats=1
    )
    assert report.violations == []
    assert report.cancelled_after_start >= 3


async def test_cancel_cli_chat_at_sampled_points(processes: list[Any]) -> None:
    report = await sweep("cli", cli_subject(processes), geometric=True, limit=500_000, repeats=1)
    assert report.violations == []
    assert report.cancelled_after_start >= 3
    assert len(processes) >= report.cancelled_after_start


# -- the history stays one a strict provider accepts ----------------------------------------------


@pytest.mark.parametrize("name", ["operate+tools", "act_inside_a_turn", "run+tools"])
async def test_completed_tool_turns_render_requests_providers_accept(name: str) -> None:
    subject = await SUBJECTS[name]()
    await subject.call(subject.branch)
    assert wire_violations(subject.branch.msgs) == []


async def test_chat_and_record_of_a_tool_calling_reply_leaves_a_valid_history() -> None:
    subject = await SUBJECTS["chat_and_record+tool_calls"]()
    await subject.call(subject.branch)
    assert wire_violations(subject.branch.msgs) == []


@pytest.mark.parametrize("operation", ["operate", "run"])
async def test_turn_cancelled_while_a_tool_runs_leaves_a_valid_history(operation: str) -> None:
    started = anyio.Event()

    async def slow(a: int) -> int:
        """Never finishes."""
        started.set()
        await anyio.sleep_forever()
        return a

    def reply(messages: Any, **options: Any) -> Any:
        if options.get("tools") and type(messages[-1]).__name__ != "ActionResponse":
            return [ToolCall(id="c1", name="slow", arguments={"a": 1})]
        return "ok"

    branch, recorder, _ = observed_branch(chat_model=FunctionModel(reply), tools=[slow])

    async def call() -> None:
        if operation == "operate":
            await branch.operate(instruction="go", actions=True)
        else:
            async for _ in branch.run("go"):
                pass

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await started.wait()
        group.cancel_scope.cancel()
    assert [s.kind for s in recorder.terminals()] == ["RunFailed"]
    assert wire_violations(branch.msgs) == []


# -- the harness itself catches what it is meant to catch -----------------------------------------
async def _broken(make_body: Any) -> list[str]:
    async def make() -> Subject:
        branch, recorder, _ = observed_branch(chat_model=FunctionModel(lambda m, **o: "ok"))
        return Subject(branch, recorder, make_body)

    report = await sweep("broken", make, limit=20)
    return report.violations


async def test_harness_sees_a_message_recorded_outside_the_turn() -> None:
    async def body(branch: Any) -> str:
        branch.msgs.add(Instruction(instruction="outside"))
        for _ in range(3):
            await checkpoint()
        reply: str = await branch.chat("x")
        return reply

    violations = await _broken(body)
    assert any("another turn id" in v for v in violations)


async def test_harness_sees_a_task_left_behind() -> None:
    leftovers: list[anyio.Event] = []

    async def body(branch: Any) -> str:
        async def linger() -> None:
            event = anyio.Event()
            leftovers.append(event)
            await event.wait()

        # a task started where the turn cannot see it
        from lionagi._compat import spawn_detached

        spawn_detached(linger)
        await checkpoint()
        return "ok"

    violations = await _broken(body)
    for event in leftovers:
        event.set()
    await checkpoint()
    assert any("left behind" in v for v in violations)


async def test_harness_sees_a_cancellation_turned_into_an_error() -> None:
    async def body(branch: Any) -> str:
        async def swallow(scope: TurnScope) -> str:
            try:
                for _ in range(5):
                    await checkpoint()
            except anyio.get_cancelled_exc_class():
                raise RuntimeError("swallowed") from None
            return "ok"

        return await run_in_turn(branch, model=None, invoke=swallow)

    violations = await _broken(body)
    assert any("turned into" in v for v in violations)
