"""Session.flow over operation graphs: results, contexts, failures, limits, order, signals."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import anyio
import pytest

from lionagi import (
    Branch,
    Builder,
    FlowEnd,
    FlowStart,
    NodeEnd,
    NodeFailed,
    NodeSkipped,
    NodeStart,
    RunEnd,
    RunFailed,
    RunStart,
    Session,
    Signal,
)
from lionagi.errors import FlowError
from lionagi.testing import FunctionModel
from tests.helpers import Recorder, assert_idle, assert_one_terminal_per_start


def _reply(messages: Any, **options: Any) -> str:
    last = messages[-1]
    return f"re:{last.instruction}"


def flow_session(**kwargs: Any) -> tuple[Session, Recorder]:
    session = Session()
    recorder = Recorder()
    session.observe(Signal, recorder)
    kwargs.setdefault("chat_model", FunctionModel(_reply))
    session.new_branch(system="be brief", name="main", **kwargs)
    return session, recorder


def of(recorder: Recorder, kind: type[Signal]) -> list[Any]:
    return [s for s in recorder.signals if isinstance(s, kind)]


async def test_fan_out_and_aggregation_carry_results_and_context() -> None:
    session, _ = flow_session()
    builder = Builder()
    a = builder.add_operation("communicate", node_id="a", instruction="topic A")
    b = builder.add_operation("communicate", node_id="b", instruction="topic B")
    agg = builder.add_aggregation("communicate", node_id="summary", instruction="merge")
    seen: dict[str, Any] = {}

    async def report(branch: Branch, context: Any = None) -> dict[str, Any]:
        seen.update(context)
        return {"context": {"reported": True}}

    builder.add_operation(report, node_id="report", depends_on=[agg])
    result = await session.flow(builder.get_graph(), context={"audience": "kids"})

    assert set(result) >= {
        "completed_operations",
        "operation_results",
        "final_context",
        "skipped_operations",
        "failed_operations",
    }
    assert result["operation_results"][a] == "re:topic A"
    assert result["operation_results"][b] == "re:topic B"
    assert result["operation_results"][agg] == "re:merge"
    assert result["completed_operations"][-1] == builder.graph.resolve("report")
    assert len(result["completed_operations"]) == 4
    # the aggregation saw both sources' results and the seed context
    summary_branch = session.get_branch("summary")
    instruction = summary_branch.msgs[-2]
    assert instruction.context == {
        "audience": "kids",
        "a_result": "re:topic A",
        "b_result": "re:topic B",
    }
    # a dependent sees its dependency's result and the seed
    assert seen == {"audience": "kids", "summary_result": "re:merge"}
    final = result["final_context"]
    assert final["audience"] == "kids"
    assert final["a_result"] == "re:topic A"
    assert final["summary_result"] == "re:merge"
    assert final["reported"] is True
    assert result["skipped_operations"] == []
    assert result["failed_operations"] == {}


async def test_failure_is_isolated_and_dependents_skip_with_reason() -> None:
    session, recorder = flow_session()
    builder = Builder()

    async def boom(branch: Branch) -> None:
        raise ValueError("bad input")

    bad = builder.add_operation(boom, node_id="bad")
    child = builder.add_operation("chat", node_id="child", depends_on=[bad], instruction="x")
    grandchild = builder.add_operation("chat", node_id="grand", depends_on=[child])
    other = builder.add_operation("chat", node_id="other", instruction="y")

    result = await session.flow(builder.get_graph())

    assert isinstance(result["failed_operations"][bad], ValueError)
    assert result["operation_results"][bad] == {"error": "ValueError: bad input"}
    assert result["completed_operations"] == [other]
    assert result["skipped_operations"] == [child, grandchild]
    assert result["skip_reasons"][child] == "dependency bad failed: ValueError: bad input"
    assert result["skip_reasons"][grandchild].startswith("dependency child was skipped: ")
    failed = of(recorder, NodeFailed)
    assert [s.op_id for s in failed] == [str(bad)]
    assert isinstance(failed[0].data, ValueError)
    assert sorted(s.op_id for s in of(recorder, NodeSkipped)) == sorted(
        [str(child), str(grandchild)]
    )
    # skipped nodes never started a node or a turn
    assert {s.op_id for s in of(recorder, NodeStart)} == {str(bad), str(other)}
    assert {s.op_id for s in of(recorder, RunStart)} == {str(bad), str(other)}
    [end] = of(recorder, FlowEnd)
    assert (end.status, end.completed, end.failed, end.skipped) == ("completed", 1, 1, 2)


async def test_fail_fast_raises_the_failure_itself_and_cancels_the_rest() -> None:
    session, recorder = flow_session()
    builder = Builder()
    slow_started = anyio.Event()

    async def slow(branch: Branch) -> None:
        slow_started.set()
        await anyio.sleep_forever()

    async def bad(branch: Branch) -> None:
        await slow_started.wait()
        raise KeyError("missing")

    slow_id = builder.add_operation(slow, node_id="slow")
    bad_id = builder.add_operation(bad, node_id="bad")
    after = builder.add_operation("chat", node_id="after", depends_on=[slow_id])
    before = len(anyio.get_running_tasks())

    with pytest.raises(KeyError) as caught:
        await session.flow(builder.get_graph(), fail_fast=True)

    assert caught.value.args == ("missing",)
    assert len(anyio.get_running_tasks()) == before
    terminals = {s.op_id: s for s in recorder.terminals()}
    slow_end, bad_end = terminals[str(slow_id)], terminals[str(bad_id)]
    assert isinstance(slow_end, RunFailed)
    assert isinstance(slow_end.data, anyio.get_cancelled_exc_class())
    assert isinstance(bad_end, RunFailed)
    assert isinstance(bad_end.data, KeyError)
    assert str(after) not in {s.op_id for s in of(recorder, NodeStart)}
    [end] = of(recorder, FlowEnd)
    assert (end.status, end.failed, end.cancelled) == ("failed", 1, 1)
    assert_one_terminal_per_start(recorder)


async def test_cancelling_the_caller_cancels_running_nodes() -> None:
    session, recorder = flow_session()
    builder = Builder()
    running = anyio.Event()

    async def wait(branch: Branch) -> None:
        running.set()
        await anyio.sleep_forever()

    first = builder.add_operation(wait, node_id="wait")
    builder.add_operation("chat", node_id="never", depends_on=[first])
    before = len(anyio.get_running_tasks())
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(session.flow, builder.get_graph())
            await running.wait()
            scope.cancel()
    assert len(anyio.get_running_tasks()) == before
    assert [s.kind for s in recorder.terminals()] == ["RunFailed"]
    assert [s.op_id for s in of(recorder, NodeFailed)] == [str(first)]
    assert len(of(recorder, NodeStart)) == 1
    [end] = of(recorder, FlowEnd)
    assert (end.status, end.cancelled) == ("cancelled", 1)
    for branch in session:
        assert_idle(branch)


async def test_max_concurrent_bounds_nodes_in_flight() -> None:
    session, _ = flow_session()
    in_flight = 0
    peak = 0
    full = anyio.Event()
    limit = 3

    async def work(branch: Branch, index: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == limit:
            full.set()
        await full.wait()  # hold the slot until the limit is reached
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        in_flight -= 1
        return index

    builder = Builder()
    for i in range(20):
        builder.add_operation(work, index=i)
    result = await session.flow(builder.get_graph(), max_concurrent=limit)
    assert peak == limit
    assert sorted(result["operation_results"].values()) == list(range(20))

    peak, limit, full = 0, 20, anyio.Event()
    await session.flow(builder.get_graph(), max_concurrent=None)
    assert peak == 20


async def test_parallel_false_runs_one_at_a_time_in_insertion_topological_order() -> None:
    session, _ = flow_session()
    order: list[str] = []
    in_flight = 0

    async def step(branch: Branch, label: str) -> str:
        nonlocal in_flight
        in_flight += 1
        assert in_flight == 1
        order.append(label)
        await anyio.lowlevel.checkpoint()
        in_flight -= 1
        return label

    builder = Builder()
    late = builder.add_operation(step, node_id="late", label="late")
    builder.add_operation(step, node_id="x", label="x")
    root = builder.add_operation(step, node_id="root", label="root")
    builder.add_operation(step, node_id="y", depends_on=[root], label="y")
    builder.add_edge(root, late)  # "late" now waits for "root", inserted after it
    await session.flow(builder.get_graph(), parallel=False)
    assert order == ["x", "root", "late", "y"]


async def test_nodes_on_one_branch_queue_fifo_and_forks_leave_the_default_alone() -> None:
    session, recorder = flow_session()

    async def slow_handler(signal: NodeStart, _: Session) -> None:
        # earlier nodes take longer to get past NodeStart, yet reach the branch first
        name = signal.name or ""
        for _step in range(10 - int(name[1:]) if name.startswith("q") else 0):
            await anyio.lowlevel.checkpoint()

    session.observe(NodeStart, slow_handler)
    default = session.default_branch
    shared = session.new_branch(name="shared", chat_model=FunctionModel(_reply))
    builder = Builder()
    pinned = [
        builder.add_operation("chat_and_record", f"q{i}", branch=shared, instruction=f"q{i}")
        for i in range(4)
    ]
    forked = builder.add_operation("chat_and_record", node_id="forked", instruction="alone")
    await session.flow(builder.get_graph(), max_concurrent=None)

    lifecycle = [
        (s.kind, s.op_id)
        for s in recorder.signals
        if isinstance(s, RunStart | RunEnd) and s.branch_id == shared.id
    ]
    expected: list[tuple[str, str | None]] = []
    for node_id in pinned:
        expected += [("RunStart", str(node_id)), ("RunEnd", str(node_id))]
    assert lifecycle == expected
    assert [m.instruction for m in shared.msgs if hasattr(m, "instruction")] == [
        "q0",
        "q1",
        "q2",
        "q3",
    ]
    fork = session.get_branch("forked")
    assert fork is not default
    assert fork.msgs[0] == default.msgs[0]  # the default's history (its system prompt)
    assert fork.chat_model is default.chat_model
    assert len(default.msgs) == 1  # nothing ran on the default branch itself
    [start] = [s for s in of(recorder, RunStart) if s.op_id == str(forked)]
    assert start.branch_id == fork.id


async def test_inherit_context_continues_the_dependency_conversation() -> None:
    session, _ = flow_session()
    builder = Builder()
    first = builder.add_operation("communicate", node_id="first", instruction="hello")
    follow = builder.add_operation(
        "communicate",
        node_id="follow",
        depends_on=[first],
        inherit_context=True,
        instruction="more",
    )
    fresh = builder.add_operation("communicate", node_id="fresh", depends_on=[first])
    result = await session.flow(builder.get_graph())
    assert result["operation_results"][follow] == "re:more"
    branch = session.get_branch("first")
    texts = [getattr(m, "instruction", None) or getattr(m, "content", None) for m in branch.msgs]
    assert texts == ["be brief", "hello", "re:hello", "more", "re:more"]
    fresh_branch = session.get_branch("fresh")
    assert fresh_branch is not branch
    assert len(fresh_branch.msgs) == 3  # system, its instruction, its reply
    assert fresh in result["completed_operations"]


async def test_each_node_is_one_turn_whose_signals_carry_its_op_id() -> None:
    session, recorder = flow_session()
    builder = Builder()

    async def two_calls(branch: Branch) -> list[str]:
        return [await branch.chat("one"), await branch.communicate("two")]

    node = builder.add_operation(two_calls, node_id="two")
    plain = builder.add_operation("chat", node_id="plain", instruction="hi")
    result = await session.flow(builder.get_graph())
    assert result["operation_results"][node] == ["re:one", "re:two"]
    starts = of(recorder, RunStart)
    assert sorted(s.op_id for s in starts) == sorted([str(node), str(plain)])
    assert {s.operation for s in starts} == {"two_calls", "chat"}
    ends = {s.op_id: s for s in of(recorder, RunEnd)}
    node_ends = {s.op_id: s for s in of(recorder, NodeEnd)}
    for op_id in (str(node), str(plain)):
        assert node_ends[op_id].turn_id == ends[op_id].turn_id is not None
    assert ends[str(node)].num_turns == 2  # both model calls belong to the node's one turn
    assert_one_terminal_per_start(recorder)
    # outside a flow a turn has no op_id
    await session.default_branch.chat("solo")
    assert recorder.starts()[-1].op_id is None


async def test_flow_signals_each_exactly_once() -> None:
    session, recorder = flow_session()
    builder = Builder()

    async def boom(branch: Branch) -> None:
        raise RuntimeError("x")

    ok = builder.add_operation("chat", instruction="a")
    bad = builder.add_operation(boom)
    skip = builder.add_operation("chat", depends_on=[bad])
    await session.flow(builder.get_graph())
    flow_signals = [
        s for s in recorder.signals if isinstance(s, FlowStart | NodeStart | NodeEnd | FlowEnd)
    ]
    flow_signals += of(recorder, NodeFailed) + of(recorder, NodeSkipped)
    assert len(of(recorder, FlowStart)) == 1
    assert len(of(recorder, FlowEnd)) == 1
    assert recorder.signals.index(of(recorder, FlowStart)[0]) < min(
        recorder.signals.index(s) for s in of(recorder, NodeStart)
    )
    assert recorder.signals[-1] == of(recorder, FlowEnd)[0]
    assert len({s.flow_id for s in flow_signals}) == 1
    node_terminals = [
        s for s in recorder.signals if isinstance(s, NodeEnd | NodeFailed | NodeSkipped)
    ]
    assert {s.op_id: s.kind for s in node_terminals} == {
        str(ok): "NodeEnd",
        str(bad): "NodeFailed",
        str(skip): "NodeSkipped",
    }
    assert len(node_terminals) == 3


async def test_conditional_branch_runs_one_side_and_skips_the_other() -> None:
    session, _ = flow_session()
    builder = Builder()

    async def check(branch: Branch) -> dict[str, bool]:
        return {"approved": False}

    ids = builder.add_conditional_branch(
        check,
        "communicate",
        "communicate",
        condition_key="approved",
        condition_value=True,
        true_params={"instruction": "ship it"},
        false_params={"instruction": "revise"},
    )
    result = await session.flow(builder.get_graph())
    assert result["operation_results"][ids["false"]] == "re:revise"
    assert result["skipped_operations"] == [ids["true"]]
    assert "condition" in result["skip_reasons"][ids["true"]]

    async def is_long(result: Any) -> bool:  # an async edge condition
        return len(result) > 3

    builder = Builder()
    root = builder.add_operation("chat", node_id="root", instruction="abcdef")
    gated = builder.add_operation("chat", depends_on=[root], condition=is_long)
    result = await session.flow(builder.get_graph())
    assert gated in result["completed_operations"]


async def test_on_progress_hears_every_node() -> None:
    session, _ = flow_session()
    builder = Builder()
    a = builder.add_operation("chat", node_id="a", instruction="x")
    calls: list[tuple[str, str]] = []

    async def progress(op_id: str, branch_name: str, status: str, elapsed: float) -> None:
        assert elapsed >= 0
        calls.append((op_id, status))
        assert branch_name == "a"

    await session.flow(builder.get_graph(), on_progress=progress)
    assert calls == [(str(a), "started"), (str(a), "completed")]


async def test_unknown_pinned_branch_fails_before_anything_runs() -> None:
    session, recorder = flow_session()
    builder = Builder()
    builder.add_operation("chat", branch="no-such-branch", instruction="x")
    with pytest.raises(FlowError, match="no-such-branch"):
        await session.flow(builder.get_graph())
    assert recorder.signals == []


async def test_one_graph_runs_twice_independently() -> None:
    session, _ = flow_session()
    builder = Builder()
    node = builder.add_operation("chat", instruction="again")
    graph = builder.get_graph()
    first = await session.flow(graph)
    second = await session.flow(graph)
    assert first["operation_results"][node] == second["operation_results"][node] == "re:again"
    assert isinstance(node, UUID)


async def test_sequential_fail_fast_stops_at_the_failure() -> None:
    session, recorder = flow_session()
    builder = Builder()
    ran: list[str] = []

    async def step(branch: Branch, label: str) -> None:
        ran.append(label)
        if label == "b":
            raise ConnectionError("down")

    for label in "abc":
        builder.add_operation(step, node_id=label, label=label)
    with pytest.raises(ConnectionError, match="down"):
        await session.flow(builder.get_graph(), parallel=False, fail_fast=True)
    assert ran == ["a", "b"]
    [end] = of(recorder, FlowEnd)
    assert (end.status, end.completed, end.failed) == ("failed", 1, 1)


async def test_a_branch_outside_the_session_is_taken_in() -> None:
    session, _ = flow_session()
    outside = Branch(name="outside", chat_model=FunctionModel(_reply))
    builder = Builder()
    builder.add_operation("chat_and_record", branch=outside, instruction="hi")
    await session.flow(builder.get_graph())
    assert outside.session is session
    assert len(outside.msgs) == 2
