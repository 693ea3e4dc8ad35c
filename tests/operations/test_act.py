"""act: tool calls run concurrently or in order, recorded in request order, errors contained."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from lionagi.errors import (
    ActionError,
    OperationError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    UnauthorizedActionError,
)
from lionagi.operations.act import ActionStrategy
from lionagi.operations.turn import run_in_turn
from lionagi.operations.types import TurnScope
from lionagi.protocols.messages import ActionRequest, ActionResponse, ToolCall
from lionagi.protocols.tools import Tool
from lionagi.session.branch import Branch
from lionagi.session.control import LoopBreak, LoopDirective
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart
from tests.helpers import Recorder, assert_idle, assert_one_terminal_per_start, observed_branch


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers (a sync tool: runs in a worker thread)."""
    return a * b


def request(function: str, **arguments: Any) -> ActionRequest:
    return ActionRequest(call_id=f"call_{function}", function=function, arguments=arguments)


def kinds(branch: Branch) -> list[str]:
    return [type(m).__name__ for m in branch.msgs]


def responses(branch: Branch) -> list[ActionResponse]:
    return [m for m in branch.msgs if isinstance(m, ActionResponse)]


# -- inputs and outputs -------------------------------------------------------------------------
async def test_one_request_gives_one_response_linked_to_it() -> None:
    branch = Branch(tools=[add])
    ask = request("add", a=2, b=3)
    response = await branch.act(ask)
    assert isinstance(response, ActionResponse)
    assert response.output == 5
    assert not response.is_error
    assert response.request_id == ask.id
    assert response.call_id == ask.call_id == "call_add"
    assert list(branch.msgs) == [ask, response]


async def test_tool_calls_and_dicts_are_accepted_and_a_list_gives_a_list() -> None:
    branch = Branch(tools=[add, multiply])
    result = await branch.act(
        [
            ToolCall(id="c1", name="add", arguments={"a": 1, "b": 1}),
            {"function": "multiply", "arguments": {"a": 3, "b": 4}},
            {"name": "add", "arguments": '{"a": 10, "b": 5}', "call_id": "c3"},
        ]
    )
    assert isinstance(result, list)
    assert [r.output for r in result] == [2, 12, 15]
    assert (result[0].call_id, result[2].call_id) == ("c1", "c3")
    assert kinds(branch) == ["ActionRequest"] * 3 + ["ActionResponse"] * 3
    requests = [m for m in branch.msgs if isinstance(m, ActionRequest)]
    assert [r.request_id for r in result] == [r.id for r in requests]


@pytest.mark.parametrize(
    "bad",
    [
        42,
        {"arguments": {}},
        {"function": "add", "arguments": [1, 2]},
        {"function": "add", "arguments": "not json"},
        {"function": "add", "surprise": 1},
        {"function": "", "arguments": {}},
    ],
)
async def test_bad_input_shape_is_an_operation_error_before_anything_happens(bad: Any) -> None:
    branch = Branch(tools=[add])
    with pytest.raises(OperationError):
        await branch.act([request("add", a=1, b=2), bad])
    assert len(branch.msgs) == 0


async def test_bad_options_are_operation_errors() -> None:
    branch = Branch(tools=[add])
    with pytest.raises(OperationError, match="strategy"):
        await branch.act(request("add", a=1, b=2), strategy="parallel")  # type: ignore[call-overload]
    with pytest.raises(OperationError, match="suppress_errors"):
        await branch.act(request("add", a=1, b=2), suppress_errors="yes")  # type: ignore[call-overload]
    assert len(branch.msgs) == 0


async def test_a_request_already_in_history_is_not_recorded_again() -> None:
    branch = Branch(tools=[add])
    ask = request("add", a=1, b=2)
    branch.msgs.add(ask)
    await branch.act(ask)
    assert kinds(branch) == ["ActionRequest", "ActionResponse"]


async def test_record_false_records_nothing() -> None:
    branch = Branch(tools=[add])
    response = await branch.act(request("add", a=1, b=2), record=False)
    assert response.output == 3
    assert len(branch.msgs) == 0


async def test_output_is_made_json_safe() -> None:
    def listing() -> set[int]:
        return {3, 1, 2}

    branch = Branch(tools=[listing])
    response = await branch.act(request("listing"))
    assert response.output == [1, 2, 3]


# -- strategies -----------------------------------------------------------------------------------
async def test_concurrent_calls_run_at_the_same_time_and_record_in_request_order() -> None:
    ping_ready, pong_ready = anyio.Event(), anyio.Event()

    async def ping() -> str:
        ping_ready.set()
        await pong_ready.wait()  # deadlocks unless pong runs at the same time
        return "ping"

    async def pong() -> str:
        pong_ready.set()
        await ping_ready.wait()
        for _ in range(5):  # finish well after ping
            await checkpoint()
        return "pong"

    branch = Branch(tools=[ping, pong, multiply])
    result = await branch.act([request("pong"), request("ping"), request("multiply", a=2, b=3)])
    assert [r.output for r in result] == ["pong", "ping", 6]
    assert [r.function for r in responses(branch)] == ["pong", "ping", "multiply"]


async def test_sequential_calls_run_one_after_another() -> None:
    log: list[str] = []

    async def first() -> int:
        log.append("first start")
        for _ in range(3):
            await checkpoint()
        log.append("first end")
        return 1

    async def second() -> int:
        log.append("second start")
        await checkpoint()
        log.append("second end")
        return 2

    branch = Branch(tools=[first, second])
    result = await branch.act([request("first"), request("second")], strategy="sequential")
    assert [r.output for r in result] == [1, 2]
    assert log == ["first start", "first end", "second start", "second end"]


# -- errors ---------------------------------------------------------------------------------------
def _error_tools() -> list[Any]:
    never = anyio.Event()

    async def boom() -> None:
        raise ValueError("kaput")

    async def slow() -> None:
        await never.wait()

    def opaque() -> object:
        return object()

    return [boom, Tool(slow, timeout=0.01), opaque, add]


async def test_each_failure_kind_becomes_an_error_response() -> None:
    branch = Branch(tools=_error_tools())
    result = await branch.act(
        [
            request("nope"),
            request("add", a="x", b=1),
            request("boom"),
            request("slow"),
            request("opaque"),
            request("add", a=1, b=1),
        ]
    )
    assert [r.is_error for r in result] == [True, True, True, True, True, False]
    errors = [str(r.output["error"]) for r in result[:5]]  # type: ignore[index,call-overload]
    assert errors[0].startswith("ToolNotFoundError: no tool named 'nope'")
    assert errors[1].startswith("ToolArgumentError: tool 'add': argument 'a'")
    assert errors[2] == "ValueError: kaput"
    assert errors[3].startswith("ToolTimeoutError:")
    assert errors[4].startswith("ToolError: cannot convert")
    assert result[5].output == 2
    assert kinds(branch) == ["ActionRequest"] * 6 + ["ActionResponse"] * 6


async def test_suppress_errors_false_wraps_tool_exceptions_after_recording() -> None:
    branch = Branch(tools=_error_tools())
    with pytest.raises(ActionError, match="kaput") as caught:
        await branch.act([request("add", a=1, b=1), request("boom")], suppress_errors=False)
    assert isinstance(caught.value.__cause__, ValueError)
    # both calls finished: the history holds each request with its response
    assert [r.is_error for r in responses(branch)] == [False, True]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (request("nope"), ToolNotFoundError),
        (request("add", a="x", b=1), ToolArgumentError),
        (request("slow"), TimeoutError),
        (request("opaque"), ToolError),
    ],
)
async def test_suppress_errors_false_keeps_typed_errors(
    call: ActionRequest, error: type[Exception]
) -> None:
    branch = Branch(tools=_error_tools())
    with pytest.raises(error) as caught:
        await branch.act(call, suppress_errors=False)
    assert not isinstance(caught.value, ActionError)


async def test_first_error_in_request_order_is_raised() -> None:
    branch = Branch(tools=_error_tools())
    with pytest.raises(ToolNotFoundError):
        await branch.act([request("nope"), request("boom")], suppress_errors=False)
    assert len(responses(branch)) == 2


async def test_sequential_batch_stops_at_the_first_error() -> None:
    calls: list[int] = []

    async def count(n: int) -> int:
        calls.append(n)
        return n

    branch = Branch(tools=[*_error_tools(), count])
    with pytest.raises(ActionError):
        await branch.act(
            [request("count", n=1), request("boom"), request("count", n=3)],
            strategy="sequential",
            suppress_errors=False,
        )
    assert calls == [1]
    assert [r.function for r in responses(branch)] == ["count", "boom"]


# -- the authorize gate ---------------------------------------------------------------------------
async def test_authorize_gate_refusal_becomes_an_error_response_and_the_tool_never_runs() -> None:
    ran: list[str] = []

    async def secret() -> str:
        ran.append("secret")
        return "classified"

    seen: list[tuple[Branch, str]] = []

    async def gate(branch: Branch, ask: ActionRequest) -> bool:
        seen.append((branch, ask.function))
        return ask.function != "secret"

    session = Session(authorize=gate)
    branch = session.new_branch(tools=[secret, add])
    result = await branch.act([request("secret"), request("add", a=1, b=2)])
    assert result[0].is_error
    assert "not authorized" in str(result[0].output)
    assert "UnauthorizedActionError" in str(result[0].output)
    assert result[1].output == 3
    assert ran == []
    # concurrent calls pass the gate in no particular order (trio randomizes scheduling)
    assert sorted(name for _, name in seen) == ["add", "secret"]
    assert all(b is branch for b, _ in seen)

    with pytest.raises(UnauthorizedActionError, match="not authorized"):
        await branch.act(request("secret"), suppress_errors=False)
    assert ran == []


async def test_a_failing_authorize_gate_refuses() -> None:
    def gate(branch: Branch, ask: ActionRequest) -> bool:
        raise RuntimeError("gate down")

    session = Session(authorize=gate)
    branch = session.new_branch(tools=[add])
    response = await branch.act(request("add", a=1, b=2))
    assert response.is_error
    assert "gate down" in str(response.output)


# -- turns ----------------------------------------------------------------------------------------
async def test_act_alone_takes_no_lock_and_emits_no_lifecycle_signal() -> None:
    session = Session()
    rec = Recorder()
    for kind in (RunStart, RunEnd, RunFailed):
        session.observe(kind, rec)
    branch = session.new_branch(tools=[])
    observed: list[bool] = []

    async def probe() -> str:
        observed.append(not branch._turn_lock.locked())
        observed.append(branch._active_turn_context is None)
        return "seen"

    branch.register_tools(probe)
    assert (await branch.act(request("probe"))).output == "seen"
    assert observed == [True, True]
    assert rec.signals == []
    assert_idle(branch)


async def test_act_inside_a_turn_joins_it() -> None:
    branch, rec, _ = observed_branch(tools=[add])

    async def body(scope: TurnScope) -> ActionResponse:
        return await branch.act(request("add", a=2, b=2))

    response = await run_in_turn(branch, model=None, invoke=body, operation="tools")
    assert response.output == 4
    assert rec.kinds() == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    turn_id = rec.starts()[0].turn_id
    assert all(isinstance(s, MessageAdded) and s.turn_id == turn_id for s in rec.signals[1:3])
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_act_in_a_turn_polls_control_before_the_batch() -> None:
    branch, rec, _ = observed_branch(tools=[add])

    async def body(scope: TurnScope) -> ActionResponse:
        assert branch.control(LoopDirective.BREAK, reason="stop tools")
        return await branch.act(request("add", a=2, b=2))

    with pytest.raises(LoopBreak, match="stop tools"):
        await run_in_turn(branch, model=None, invoke=body)
    assert len(branch.msgs) == 0
    assert rec.kinds() == ["RunStart", "RunFailed"]
    assert_idle(branch)


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
async def test_cancellation_mid_batch_records_no_partial_responses(
    strategy: ActionStrategy,
) -> None:
    never = anyio.Event()
    slow_started = anyio.Event()
    quick_done = anyio.Event()

    async def quick() -> str:
        quick_done.set()
        return "done"

    async def slow() -> None:
        slow_started.set()
        await never.wait()

    async def cancelled_after_started() -> None:
        await slow_started.wait()
        await quick_done.wait()

    branch = Branch(tools=[quick, slow])
    caught: list[BaseException] = []

    async def run() -> None:
        try:
            await branch.act([request("quick"), request("slow")], strategy=strategy)
        except BaseException as exc:
            caught.append(exc)
            raise

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await cancelled_after_started()
        group.cancel_scope.cancel()
    assert len(caught) == 1
    assert isinstance(caught[0], anyio.get_cancelled_exc_class())
    # both requests, and a response only for the call that finished
    assert kinds(branch) == ["ActionRequest", "ActionRequest", "ActionResponse"]
    [finished] = responses(branch)
    assert finished.function == "quick"
    assert finished.output == "done"
