"""OpenTelemetry tracing: a span per turn, child spans per model call and tool call, correct
nesting and statuses on both backends, content only on opt-in, nothing when off."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from lionagi import Builder, Session, otel
from lionagi.protocols.messages import ActionResponse, Message, ToolCall
from lionagi.service.types import ModelResponse
from lionagi.session.branch import Branch
from lionagi.testing import FunctionModel, TestModel
from tests.helpers import observed_branch

SECRET_PROMPT = "the-prompt-text-7d1c"


class Total(BaseModel):
    total: int


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def lookup(key: str) -> str:
    """Has a bug."""
    return undefined_table[key]  # type: ignore[name-defined,no-any-return]  # noqa: F821


def adder() -> FunctionModel:
    """Calls ``add`` once when tools are offered, then answers with the total."""

    def fn(messages: Sequence[Message], **options: Any) -> Any:
        results = [m for m in messages if isinstance(m, ActionResponse)]
        if options.get("tools") and not results:
            return ModelResponse(
                text="",
                tool_calls=(ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3}),),
                finish_reason="tool_calls",
            )
        return json.dumps({"total": results[-1].output if results else 0})

    return FunctionModel(fn)


class Traced:
    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.provider = provider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        parent_id = parent.context.span_id
        found = [s for s in self.spans() if s.parent is not None and s.parent.span_id == parent_id]
        return sorted(found, key=lambda s: s.start_time or 0)


@pytest.fixture
def traced() -> Iterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(provider)
    try:
        yield Traced(exporter, provider)
    finally:
        otel.uninstrument()
        provider.shutdown()


async def test_operate_with_a_tool_is_a_turn_span_with_model_and_tool_children(
    traced: Traced,
) -> None:
    branch, recorder, _ = observed_branch(chat_model=adder(), tools=[add], name="calc")
    result = await branch.operate(instruction=SECRET_PROMPT, response_format=Total, actions=True)
    assert result.total == 5

    [turn] = traced.named("turn ")
    [start] = recorder.starts()
    assert turn.name == "turn operate"
    assert turn.parent is None
    assert turn.attributes is not None
    assert turn.attributes["lionagi.turn_id"] == str(start.turn_id)
    assert turn.attributes["lionagi.branch_id"] == str(branch.id)
    assert turn.attributes["lionagi.operation"] == "operate"
    assert turn.attributes["gen_ai.agent.name"] == "calc"
    assert "lionagi.op_id" not in turn.attributes
    assert turn.status.status_code is StatusCode.OK

    children = traced.children(turn)
    assert [s.name for s in children] == ["chat function", "execute_tool add", "chat function"]
    first_call, tool, _ = children
    assert first_call.kind is trace.SpanKind.CLIENT
    attrs = first_call.attributes
    assert attrs is not None
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.system"] == "function"
    assert attrs["gen_ai.request.model"] == "function"
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert isinstance(attrs["gen_ai.usage.input_tokens"], int)
    assert isinstance(attrs["gen_ai.usage.output_tokens"], int)
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.name"] == "add"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    # every span of the turn is in the turn's trace; no content without opt-in
    assert {s.context.trace_id for s in traced.spans()} == {turn.context.trace_id}
    for span in traced.spans():
        assert SECRET_PROMPT not in json.dumps(dict(span.attributes or {}), default=str)


async def test_content_is_recorded_only_on_opt_in(traced: Traced) -> None:
    otel.instrument(traced.provider, include_content=True)
    branch = Branch(chat_model=adder(), tools=[add])
    await branch.operate(instruction=SECRET_PROMPT, response_format=Total, actions=True)
    [first_call, tool, last_call] = traced.children(traced.named("turn ")[0])
    assert first_call.attributes is not None
    assert SECRET_PROMPT in str(first_call.attributes["gen_ai.input.messages"])
    assert "tool_calls" in str(first_call.attributes["gen_ai.output.messages"])
    assert tool.attributes is not None
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"a": 2, "b": 3}
    assert tool.attributes["gen_ai.tool.call.result"] == "5"
    assert last_call.attributes is not None
    assert '\\"total\\": 5' in str(last_call.attributes["gen_ai.output.messages"])


async def test_a_failing_tool_span_has_error_status_and_the_exception(traced: Traced) -> None:
    model = TestModel([ToolCall(id="c9", name="lookup", arguments={"key": "k"}), "{}"])
    branch = Branch(chat_model=model, tools=[lookup])
    await branch.operate(instruction="find", actions=True)
    [tool] = traced.named("execute_tool")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == "NameError"
    # the turn itself succeeded: the model got the error result
    [turn] = traced.named("turn ")
    assert turn.status.status_code is StatusCode.OK


async def test_react_rounds_nest_under_one_turn_span(traced: Traced) -> None:
    def analysis(text: str, more: bool) -> str:
        return json.dumps({"analysis": text, "extension_needed": more})

    model = TestModel(
        [
            ToolCall(id="c1", name="add", arguments={"a": 20, "b": 22}),
            analysis("added", more=True),
            analysis("checked", more=False),
            '{"total": 42}',
        ]
    )
    branch = Branch(chat_model=model, tools=[add])
    assert await branch.ReAct("add", response_format=Total) == Total(total=42)
    [turn] = traced.named("turn ")
    assert turn.name == "turn ReAct"
    names = [s.name for s in traced.children(turn)]
    assert names.count("execute_tool add") == 1
    assert names.count("chat test") == 4
    # nested operate calls are part of the turn, not turns of their own
    assert len(traced.spans()) == 1 + len(names)


async def test_a_cancelled_turn_ends_its_spans_with_cancellation_status(traced: Traced) -> None:
    entered = anyio.Event()

    async def hang(messages: Sequence[Message], **options: Any) -> str:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    branch = Branch(chat_model=FunctionModel(hang))
    async with anyio.create_task_group() as group:
        group.start_soon(branch.chat, "wait")
        await entered.wait()
        group.cancel_scope.cancel()

    [turn] = traced.named("turn ")
    [call] = traced.children(turn)
    for span in (turn, call):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "cancelled"
        assert span.attributes is not None
        assert span.attributes["error.type"] == "cancelled"


async def test_a_failed_turn_records_its_exception(traced: Traced) -> None:
    def broken(messages: Sequence[Message], **options: Any) -> str:
        raise RuntimeError("provider down")

    branch = Branch(chat_model=FunctionModel(broken))
    with pytest.raises(RuntimeError):
        await branch.chat("x")
    [turn] = traced.named("turn ")
    assert turn.status.status_code is StatusCode.ERROR
    assert [e.name for e in turn.events] == ["exception"]
    [call] = traced.children(turn)
    assert call.attributes is not None
    assert call.attributes["error.type"] == "RuntimeError"


async def test_concurrent_turns_under_a_caller_span_each_get_their_own_subtree(
    traced: Traced,
) -> None:
    """Three branches run concurrently in one task group (like the nodes of a flow) under a
    span of the caller: each turn is a child of that span and owns its own model calls."""
    tracer = traced.provider.get_tracer("test")
    branches = [Branch(chat_model=adder(), tools=[add], name=f"node{i}") for i in range(3)]
    with tracer.start_as_current_span("flow"):
        async with anyio.create_task_group() as group:
            for branch in branches:
                group.start_soon(
                    lambda b: b.operate(instruction="go", response_format=Total, actions=True),
                    branch,
                )
    [flow] = traced.named("flow")
    turns = traced.children(flow)
    assert sorted(t.name for t in turns) == ["turn operate"] * 3
    by_branch = {t.attributes["lionagi.branch_id"]: t for t in turns}  # type: ignore[index]
    assert set(by_branch) == {str(b.id) for b in branches}
    for turn in turns:
        assert [s.name for s in traced.children(turn)] == [
            "chat function",
            "execute_tool add",
            "chat function",
        ]
    assert len(traced.spans()) == 1 + 3 * 4


def three_nodes() -> tuple[Session, Builder, list[str]]:
    """first -> second -> third (operate with a tool) on one branch."""
    session = Session()
    session.new_branch(name="main", chat_model=adder(), tools=[add])
    builder = Builder()
    first = builder.add_operation("chat", node_id="first", instruction="one")
    second = builder.add_operation("chat", node_id="second", depends_on=[first], instruction="2")
    third = builder.add_operation(
        "operate", node_id="third", depends_on=[second], instruction="add", actions=True
    )
    return session, builder, [str(first), str(second), str(third)]


def assert_three_node_tree(traced: Traced, op_ids: list[str]) -> ReadableSpan:
    """request -> flow -> one turn per node (in order, with its op_id) -> its model and tool
    calls; returns the flow span."""
    [request] = traced.named("request")
    [flow] = traced.children(request)
    assert flow.name == "flow"
    assert flow.status.status_code is StatusCode.OK
    attributes = dict(flow.attributes or {})
    assert attributes["lionagi.flow.nodes"] == 3
    assert attributes["lionagi.flow.edges"] == 2
    assert attributes["lionagi.flow.status"] == "completed"
    assert attributes["lionagi.flow.completed"] == 3
    assert attributes["lionagi.flow.failed"] == 0
    turns = traced.children(flow)
    assert [t.attributes["lionagi.op_id"] for t in turns] == op_ids  # type: ignore[index]
    assert [t.name for t in turns] == ["turn chat", "turn chat", "turn operate"]
    assert [s.name for s in traced.children(turns[0])] == ["chat function"]
    assert [s.name for s in traced.children(turns[1])] == ["chat function"]
    assert [s.name for s in traced.children(turns[2])] == [
        "chat function",
        "execute_tool add",
        "chat function",
    ]
    assert len(traced.spans()) == 1 + 1 + 3 + 1 + 1 + 3
    return flow


@pytest.mark.parametrize("parallel", [True, False])
async def test_a_three_node_flow_is_a_flow_span_over_one_turn_span_per_node(
    traced: Traced, parallel: bool
) -> None:
    session, builder, op_ids = three_nodes()
    tracer = traced.provider.get_tracer("test")
    with tracer.start_as_current_span("request"):
        result = await session.flow(builder.get_graph(), parallel=parallel)
    assert result["failed_operations"] == {}
    flow = assert_three_node_tree(traced, op_ids)
    assert flow.attributes is not None
    assert flow.attributes["lionagi.flow.parallel"] is parallel


async def test_a_flow_streams_events_under_its_flow_span(traced: Traced) -> None:
    session, builder, op_ids = three_nodes()
    tracer = traced.provider.get_tracer("test")
    with tracer.start_as_current_span("request"):
        async with session.flow_stream(builder.get_graph()) as events:
            seen = [event.operation_id async for event in events]
    assert seen == op_ids
    assert_three_node_tree(traced, op_ids)


async def test_concurrent_nodes_each_get_their_own_turn_under_the_flow(traced: Traced) -> None:
    """Three independent nodes run at once on forks of one branch: each turn is a child of
    the flow span and owns its own model calls."""
    session = Session()
    session.new_branch(name="main", chat_model=adder(), tools=[add])
    builder = Builder()
    for name in ("a", "b", "c"):
        builder.add_operation("operate", node_id=name, instruction="add", actions=True)
    result = await session.flow(builder.get_graph())
    assert result["failed_operations"] == {}
    [flow] = traced.named("flow")
    assert flow.parent is None
    turns = traced.children(flow)
    assert len({t.attributes["lionagi.branch_id"] for t in turns}) == 3  # type: ignore[index]
    for turn in turns:
        assert [s.name for s in traced.children(turn)] == [
            "chat function",
            "execute_tool add",
            "chat function",
        ]


async def test_a_cancelled_flow_ends_its_span_and_its_running_turn_as_cancelled(
    traced: Traced,
) -> None:
    entered = anyio.Event()

    async def hang(messages: Sequence[Message], **options: Any) -> str:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    session = Session()
    session.new_branch(name="main", chat_model=FunctionModel(hang))
    builder = Builder()
    first = builder.add_operation("chat", node_id="first", instruction="wait")
    builder.add_operation("chat", node_id="second", depends_on=[first], instruction="never")
    async with anyio.create_task_group() as group:
        group.start_soon(session.flow, builder.get_graph())
        await entered.wait()
        group.cancel_scope.cancel()

    [flow] = traced.named("flow")
    [turn] = traced.children(flow)
    [call] = traced.children(turn)
    for span in (flow, turn, call):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "cancelled"
        assert span.attributes is not None
        assert span.attributes["error.type"] == "cancelled"
    assert flow.attributes is not None
    assert flow.attributes["lionagi.flow.status"] == "cancelled"
    assert flow.attributes["lionagi.flow.cancelled"] == 1


async def test_a_fail_fast_flow_records_the_failure_on_its_span(traced: Traced) -> None:
    def broken(messages: Sequence[Message], **options: Any) -> str:
        raise RuntimeError("provider down")

    session = Session()
    session.new_branch(name="main", chat_model=FunctionModel(broken))
    builder = Builder()
    builder.add_operation("chat", node_id="only", instruction="x")
    with pytest.raises(RuntimeError):
        await session.flow(builder.get_graph(), fail_fast=True)
    [flow] = traced.named("flow")
    assert flow.status.status_code is StatusCode.ERROR
    assert [e.name for e in flow.events] == ["exception"]
    assert flow.attributes is not None
    assert flow.attributes["lionagi.flow.status"] == "failed"
    assert flow.attributes["lionagi.flow.failed"] == 1
    [turn] = traced.children(flow)
    assert turn.status.status_code is StatusCode.ERROR


async def test_a_tools_own_spans_nest_under_its_tool_span(traced: Traced) -> None:
    tracer = traced.provider.get_tracer("test")

    def measured(a: int, b: int) -> int:
        """A sync tool (runs in a worker thread) that makes a span of its own."""
        with tracer.start_as_current_span("inside the tool"):
            return a + b

    model = TestModel([ToolCall(id="c1", name="measured", arguments={"a": 1, "b": 2}), "{}"])
    branch = Branch(chat_model=model, tools=[measured])
    await branch.operate(instruction="x", actions=True)
    [tool] = traced.named("execute_tool")
    assert [s.name for s in traced.children(tool)] == ["inside the tool"]


async def test_a_stream_turn_traces_its_streamed_model_calls(traced: Traced) -> None:
    model = TestModel(["streamed reply"])
    branch = Branch(chat_model=model)
    messages = [m async for m in branch.run("go")]
    assert messages
    [turn] = traced.named("turn ")
    assert turn.name == "turn run"
    [call] = traced.children(turn)
    assert call.attributes is not None
    assert call.attributes["lionagi.stream"] is True
    assert turn.status.status_code is StatusCode.OK


async def test_nothing_is_traced_after_uninstrument(traced: Traced) -> None:
    otel.uninstrument()
    assert not otel.is_instrumented()
    branch = Branch(chat_model=adder(), tools=[add])
    await branch.operate(instruction="x", response_format=Total, actions=True)
    assert traced.spans() == []


async def test_tracing_installed_between_turns_is_picked_up_by_the_next_turn() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    branch = Branch(chat_model=FunctionModel(lambda messages, **options: "ok"))
    try:
        await branch.chat_and_record("untraced")
        assert exporter.get_finished_spans() == ()
        otel.instrument(provider)
        await branch.chat_and_record("traced")
        turns = [s for s in exporter.get_finished_spans() if s.name.startswith("turn ")]
        [turn] = turns
        calls = [s for s in exporter.get_finished_spans() if s.parent is not None]
        assert [s.parent.span_id for s in calls if s.parent] == [turn.context.span_id]
        otel.uninstrument()
        await branch.chat_and_record("untraced again")
        assert len(exporter.get_finished_spans()) == 2
    finally:
        otel.uninstrument()
        provider.shutdown()
    assert [log.kind for log in branch.logs] == ["api_call"] * 3
    assert len({log.turn_id for log in branch.logs}) == 3
