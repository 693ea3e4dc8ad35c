"""Session.flow_stream: one event per node, inside ``async with``; early exit cancels."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from lionagi import Branch, Builder, FlowEnd, FlowEvent, NodeFailed, RunFailed, Session, Signal
from lionagi.errors import FlowError
from lionagi.testing import FunctionModel
from tests.helpers import Recorder, assert_idle, assert_one_terminal_per_start


def stream_session() -> tuple[Session, Recorder]:
    session = Session()
    recorder = Recorder()
    session.observe(Signal, recorder)
    session.new_branch(chat_model=FunctionModel(lambda messages, **o: "done"))
    return session, recorder


async def test_one_event_per_node_as_it_finishes() -> None:
    session, _ = stream_session()
    builder = Builder()

    async def boom(branch: Branch) -> None:
        raise ValueError("no")

    a = builder.add_operation("chat", node_id="a", instruction="x")
    bad = builder.add_operation(boom, node_id="bad")
    skip = builder.add_operation("chat", node_id="skip", depends_on=[bad])
    async with session.flow_stream(builder.get_graph()) as stream:
        events: list[FlowEvent] = [event async for event in stream]
    by_name = {e.name: e for e in events}
    assert len(events) == 3
    assert by_name["a"].status == "completed"
    assert by_name["a"].result == "done"
    assert by_name["a"].operation_id == str(a)
    assert by_name["a"].ok
    assert by_name["a"].turn_id is not None
    assert by_name["bad"].status == "failed"
    assert isinstance(by_name["bad"].error, ValueError)
    assert by_name["skip"].status == "skipped"
    assert by_name["skip"].reason is not None
    assert events.index(by_name["skip"]) > events.index(by_name["bad"])
    assert stream.result is not None
    assert stream.result["skipped_operations"] == [skip]


async def test_leaving_the_block_early_cancels_the_flow() -> None:
    session, recorder = stream_session()
    builder = Builder()

    async def forever(branch: Branch) -> None:
        await anyio.sleep_forever()

    builder.add_operation("chat", node_id="quick", instruction="x")
    hang = builder.add_operation(forever, node_id="hang")
    builder.add_operation("chat", node_id="never", depends_on=[hang])
    before = len(anyio.get_running_tasks())
    async with session.flow_stream(builder.get_graph()) as stream:
        async for event in stream:
            assert event.name == "quick"
            break
    assert len(anyio.get_running_tasks()) == before
    [failed] = [s for s in recorder.signals if isinstance(s, NodeFailed)]
    assert failed.op_id == str(hang)
    assert isinstance(failed.data, anyio.get_cancelled_exc_class())
    assert [type(s) for s in recorder.terminals()].count(RunFailed) == 1
    [end] = [s for s in recorder.signals if isinstance(s, FlowEnd)]
    assert end.status == "cancelled"
    assert stream.result is None
    assert_one_terminal_per_start(recorder)
    for branch in session:
        assert_idle(branch)


async def test_the_block_own_exception_propagates_unwrapped() -> None:
    session, _ = stream_session()
    builder = Builder()
    builder.add_operation("chat", instruction="x")

    async def consume() -> None:
        async with session.flow_stream(builder.get_graph()) as stream:
            async for _ in stream:
                raise LookupError("mine")

    with pytest.raises(LookupError, match="mine"):
        await consume()


async def test_fail_fast_failure_is_raised_after_the_events_before_it() -> None:
    session, _ = stream_session()
    builder = Builder()

    async def boom(branch: Branch, after: Any = None, context: Any = None) -> None:
        raise ArithmeticError("stop")

    first = builder.add_operation("chat", node_id="first", instruction="x")
    builder.add_operation(boom, node_id="boom", depends_on=[first])
    seen: list[str] = []

    async def consume() -> None:
        async with session.flow_stream(builder.get_graph(), fail_fast=True) as stream:
            async for event in stream:  # the list fills before the failure is raised
                seen.append(f"{event.name}:{event.status}")  # noqa: PERF401

    with pytest.raises(ArithmeticError, match="stop"):
        await consume()
    assert seen == ["first:completed", "boom:failed"]


async def test_bare_async_for_is_a_clear_error() -> None:
    session, recorder = stream_session()
    builder = Builder()
    builder.add_operation("chat", instruction="x")
    with pytest.raises(FlowError, match=r"async with session\.flow_stream"):
        async for _ in session.flow_stream(builder.get_graph()):
            pass
    assert recorder.signals == []  # nothing ran
    stream = session.flow_stream(builder.get_graph())
    async with stream:
        pass
    with pytest.raises(FlowError, match="entered once"):
        async with stream:
            pass
