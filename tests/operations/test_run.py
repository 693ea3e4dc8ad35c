"""``run``: one streamed turn handed out as committed messages, on offline models."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pytest

from lionagi.errors import OperationError, UnknownParameterError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
    ToolCall,
    Usage,
)
from lionagi.service.errors import ProtocolError, ServerError
from lionagi.service.imodel import iModel
from lionagi.service.providers.base import Provider
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
    UsageChunk,
)
from lionagi.session.branch import Branch
from lionagi.session.control import LoopBreak
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart
from lionagi.testing import FunctionModel, TestModel
from tests.helpers import (
    assert_idle,
    assert_one_terminal_per_start,
    echo_model,
    observed_branch,
)


# -- a provider that streams exactly the chunks a test scripts -----------------------------
class _Fail:
    def __init__(self, error: Exception) -> None:
        self.error = error


class ChunkProvider(Provider):
    """Streams scripted chunks, one script per call; counts opened and closed streams.

    Like the agentic CLI it runs its own tools (no native tool calls); ``NativeChunkProvider``
    is the same with native tool calls.
    """

    name = "chunks"
    supports_native_tools: ClassVar[bool] = False

    def __init__(self, *scripts: Sequence[StreamChunk | _Fail]) -> None:
        super().__init__(model="chunky", api_key_env=None)
        self.scripts = deque(scripts)
        self.requests: list[ModelRequest] = []
        self.opened = 0
        self.closed = 0

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        script = self.scripts.popleft()
        self.opened += 1
        try:
            for item in script:
                await anyio.lowlevel.checkpoint()
                if isinstance(item, _Fail):
                    raise item.error
                yield item
        finally:
            self.closed += 1


class NativeChunkProvider(ChunkProvider):
    supports_native_tools: ClassVar[bool] = True


def chunk_model(*scripts: Sequence[StreamChunk | _Fail]) -> tuple[iModel, ChunkProvider]:
    provider = ChunkProvider(*scripts)
    return iModel(provider), provider


def final(text: str = "", **kwargs: Any) -> FinalChunk:
    return FinalChunk(response=ModelResponse(text=text, **kwargs))


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def kinds(messages: Sequence[Message]) -> list[str]:
    return [type(m).__name__ for m in messages]


async def collect(stream: AsyncIterator[Message]) -> list[Message]:
    return [message async for message in stream]


async def drain(stream: AsyncIterator[Message], seen: list[Message]) -> None:
    """Append each message to ``seen`` as it arrives (kept when the stream raises)."""
    while True:
        try:
            message = await anext(stream)
        except StopAsyncIteration:
            return
        seen.append(message)


def text_of(message: Message) -> str:
    assert isinstance(message, AssistantResponse)
    return message.content


def tool_then_answer() -> FunctionModel:
    """Asks for multiply(6, 7), then answers with the tool's output."""

    def reply(messages: Sequence[Message], **options: Any) -> Any:
        last = messages[-1]
        if isinstance(last, ActionResponse):
            return f"the product is {last.output}"
        return ToolCall(id="call_1", name="multiply", arguments={"a": 6, "b": 7})

    return FunctionModel(reply)


# -- order, recording and signals ----------------------------------------------------------
async def test_each_message_is_recorded_and_signalled_before_it_is_yielded() -> None:
    model = TestModel(["Hello there, world"])
    branch, rec, _ = observed_branch(system="be brief", chat_model=model)
    seen: list[Message] = []
    async for message in branch.run("hi", guidance="short"):
        assert any(m is message for m in branch.msgs)  # committed before it is yielded
        assert message.id in {s.message.id for s in rec.messages()}
        seen.append(message)
    assert kinds(seen) == ["Instruction", "AssistantResponse"]
    instruction = seen[0]
    assert isinstance(instruction, Instruction)
    assert (instruction.instruction, instruction.guidance) == ("hi", "short")
    assert text_of(seen[1]) == "Hello there, world"
    assert list(branch.msgs)[1:] == seen
    assert len(model.calls) == 1
    [start] = rec.starts()
    assert start.operation == "run"
    assert rec.kinds() == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    assert {m.turn_id for m in rec.messages()} == {start.turn_id}
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_text_segments_end_at_complete_blocks_tool_calls_and_the_final_chunk() -> None:
    model, provider = chunk_model(
        [
            TextDelta(text="Hel"),
            TextDelta(text="lo", complete=True),
            TextDelta(text="Look "),
            TextDelta(text="here"),
            ToolCallDelta(index=0, id="t1", name="Read", arguments='{"pa'),
            ToolCallDelta(index=0, arguments='th": "a.txt"}'),
            ToolCallDelta(index=1, id="t2", name="Bash"),
            ToolResultEvent(call_id="t1", output="contents"),
            ToolResultEvent(call_id="t2", output="boom", is_error=True),
            TextDelta(text="Done"),
            UsageChunk(usage=Usage(input_tokens=1, output_tokens=1)),
            final("Done", usage=Usage(input_tokens=3, output_tokens=4), model="chunky-1"),
        ]
    )
    branch, rec, _ = observed_branch(chat_model=model)
    seen = await collect(branch.run("look at a.txt"))
    assert kinds(seen) == [
        "Instruction",
        "AssistantResponse",
        "AssistantResponse",
        "ActionRequest",
        "ActionRequest",
        "ActionResponse",
        "ActionResponse",
        "AssistantResponse",
    ]
    _, hello, look, read, bash, read_out, bash_out, done = seen
    assert [text_of(m) for m in (hello, look, done)] == ["Hello", "Look here", "Done"]
    assert isinstance(read, ActionRequest)
    assert isinstance(bash, ActionRequest)
    assert (read.call_id, read.function, read.arguments) == ("t1", "Read", {"path": "a.txt"})
    assert (bash.call_id, bash.function, bash.arguments) == ("t2", "Bash", {})
    assert isinstance(read_out, ActionResponse)
    assert isinstance(bash_out, ActionResponse)
    assert (read_out.request_id, read_out.output, read_out.is_error) == (read.id, "contents", False)
    assert (bash_out.request_id, bash_out.output, bash_out.is_error) == (bash.id, "boom", True)
    assert isinstance(done, AssistantResponse)
    assert done.usage == Usage(input_tokens=3, output_tokens=4)
    assert done.model == "chunky-1"
    assert provider.requests[0].tools == ()  # a provider running its own tools gets none
    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    assert (end.input_tokens, end.output_tokens, end.num_turns) == (3, 4, 1)
    assert provider.opened == provider.closed == 1


async def test_a_reply_without_deltas_is_committed_from_the_final_chunk() -> None:
    call = ToolCall(id="t9", name="Grep", arguments={"pattern": "x"})
    model, _ = chunk_model([final("whole reply", tool_calls=(call,))])
    branch = Branch(chat_model=model)
    seen = await collect(branch.run("go"))
    assert kinds(seen) == ["Instruction", "AssistantResponse", "ActionRequest"]
    assert text_of(seen[1]) == "whole reply"
    request = seen[2]
    assert isinstance(request, ActionRequest)
    assert (request.call_id, request.function) == ("t9", "Grep")
    assert request.arguments == {"pattern": "x"}


# -- the tool loop -------------------------------------------------------------------------
async def test_native_tool_calls_run_with_act_then_the_model_answers() -> None:
    model = tool_then_answer()
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    seen = await collect(branch.run("what is 6 x 7?"))
    assert kinds(seen) == ["Instruction", "ActionRequest", "ActionResponse", "AssistantResponse"]
    request, response = seen[1], seen[2]
    assert isinstance(request, ActionRequest)
    assert isinstance(response, ActionResponse)
    assert (request.function, request.arguments) == ("multiply", {"a": 6, "b": 7})
    assert (response.request_id, response.output, response.is_error) == (request.id, 42, False)
    assert text_of(seen[3]) == "the product is 42"
    assert list(branch.msgs) == seen
    first, second = model.calls
    assert [t.name for t in first.tools] == ["multiply"]
    assert second.messages[-2:] == [request, response]
    [start] = rec.starts()
    assert [m.message for m in rec.messages()] == seen
    assert {m.turn_id for m in rec.messages()} == {start.turn_id}
    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    assert end.num_turns == 2
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_a_branch_without_tools_offers_none_and_makes_no_registry() -> None:
    model = echo_model()
    branch = Branch(chat_model=model)
    assert model.supports_native_tools
    await collect(branch.run("hi"))
    [request] = model.calls
    assert request.tools == ()
    assert not branch.has_tools
    assert branch._tools is None  # reading has_tools, like the turn, made no registry
    branch.register_tools(multiply)
    assert branch.has_tools


async def test_several_tool_calls_of_one_reply_are_answered_in_request_order() -> None:
    def reply(messages: Sequence[Message], **options: Any) -> Any:
        if isinstance(messages[-1], ActionResponse):
            return "done"
        return [
            ToolCall(id="a", name="multiply", arguments={"a": 2, "b": 3}),
            ToolCall(id="b", name="multiply", arguments={"a": 4, "b": 5}),
        ]

    branch = Branch(chat_model=FunctionModel(reply), tools=[multiply])
    seen = await collect(branch.run("two products"))
    assert kinds(seen) == [
        "Instruction",
        "ActionRequest",
        "ActionRequest",
        "ActionResponse",
        "ActionResponse",
        "AssistantResponse",
    ]
    outputs = [(m.call_id, m.output) for m in seen if isinstance(m, ActionResponse)]
    assert outputs == [("a", 6), ("b", 20)]


@pytest.mark.parametrize("limit", [0, 2])
async def test_requests_past_max_tool_rounds_are_answered_but_not_run(limit: int) -> None:
    ran: list[int] = []

    def counted(a: int, b: int) -> int:
        ran.append(a)
        return a * b

    def reply(messages: Sequence[Message], **options: Any) -> Any:
        n = sum(isinstance(m, ActionRequest) for m in messages)
        return ToolCall(id=f"call_{n}", name="counted", arguments={"a": n, "b": 1})

    model = FunctionModel(reply)
    branch = Branch(chat_model=model, tools=[counted])
    seen = await collect(branch.run("loop", max_tool_rounds=limit))
    assert kinds(seen) == ["Instruction"] + ["ActionRequest", "ActionResponse"] * (limit + 1)
    assert ran == list(range(limit))
    assert len(model.calls) == limit + 1
    last = seen[-1]
    assert isinstance(last, ActionResponse)
    assert last.is_error
    assert isinstance(last.output, str)
    assert "max_tool_rounds" in last.output
    assert list(branch.msgs) == seen


async def test_an_unknown_tool_becomes_an_error_response_not_a_failed_turn() -> None:
    def reply(messages: Sequence[Message], **options: Any) -> Any:
        if isinstance(messages[-1], ActionResponse):
            return "sorry"
        return ToolCall(id="x", name="no_such_tool", arguments={})

    branch, rec, _ = observed_branch(chat_model=FunctionModel(reply), tools=[multiply])
    seen = await collect(branch.run("try"))
    response = seen[2]
    assert isinstance(response, ActionResponse)
    assert response.is_error
    assert text_of(seen[-1]) == "sorry"
    assert isinstance(rec.terminals()[0], RunEnd)


# -- control ---------------------------------------------------------------------------------
def three_segments() -> list[StreamChunk]:
    return [
        TextDelta(text="one", complete=True),
        TextDelta(text="two", complete=True),
        TextDelta(text="three", complete=True),
        final("three"),
    ]


async def test_cancel_from_an_observer_ends_the_stream_cleanly() -> None:
    model, provider = chunk_model(three_segments())
    branch, rec, session = observed_branch(chat_model=model)
    accepted: list[bool] = []

    def on_message(signal: MessageAdded, _: Any) -> None:
        if isinstance(signal.message, AssistantResponse):
            accepted.append(branch.control("cancel", turn_id=signal.turn_id, reason="enough"))

    session.observe(MessageAdded, on_message)
    seen = await collect(branch.run("count"))
    assert kinds(seen) == ["Instruction", "AssistantResponse"]
    assert text_of(seen[1]) == "one"
    assert accepted == [True]
    assert list(branch.msgs) == seen
    assert provider.opened == provider.closed == 1
    assert rec.kinds()[-1] == "RunEnd"
    assert_one_terminal_per_start(rec)
    assert_idle(branch)
    turn_id = rec.starts()[0].turn_id
    assert branch.control("cancel", turn_id=turn_id) is False  # stale: the turn has ended


async def test_cancel_between_streamed_events_drops_uncommitted_text() -> None:
    entered = anyio.Event()
    release = anyio.Event()
    closed: list[bool] = []

    async def pieces(messages: Sequence[Message], **options: Any) -> AsyncIterator[str]:
        try:
            yield "partial "
            entered.set()
            await release.wait()
            yield "text"
            yield "never"
        finally:
            closed.append(True)

    model = FunctionModel(lambda messages, **options: "unused", stream=pieces)
    branch, rec, _ = observed_branch(chat_model=model)
    seen: list[Message] = []

    async def consume() -> None:
        seen.extend(await collect(branch.run("stream")))

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await entered.wait()
        assert branch.control("cancel") is True
        release.set()
    # the half-streamed reply was never committed, so neither was its instruction
    assert seen == []
    assert list(branch.msgs) == []
    assert closed == [True]
    assert rec.kinds() == ["RunStart", "RunEnd"]
    assert_idle(branch)


async def test_break_from_an_observer_raises_loop_break_and_fails_the_turn() -> None:
    model, provider = chunk_model(three_segments())
    branch, rec, session = observed_branch(chat_model=model)

    def on_message(signal: MessageAdded, _: Any) -> None:
        if isinstance(signal.message, AssistantResponse):
            branch.control("break", reason="stop here")

    session.observe(MessageAdded, on_message)
    seen: list[Message] = []
    with pytest.raises(LoopBreak, match="stop here"):
        await drain(branch.run("count"), seen)
    assert kinds(seen) == ["Instruction", "AssistantResponse"]
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, LoopBreak)
    assert provider.opened == provider.closed == 1
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


# -- closing and cancellation --------------------------------------------------------------
async def test_early_aclose_closes_the_provider_stream_and_frees_the_branch() -> None:
    model, provider = chunk_model(three_segments())
    branch, rec, _ = observed_branch(chat_model=model)
    stream = branch.run("count")
    assert isinstance(await anext(stream), Instruction)
    assert text_of(await anext(stream)) == "one"
    assert provider.opened == 1
    assert provider.closed == 0
    await stream.aclose()
    assert provider.closed == 1
    assert kinds(branch.msgs) == ["Instruction", "AssistantResponse"]
    assert rec.lifecycle()[-1][0] == "RunEnd"
    assert_one_terminal_per_start(rec)
    assert_idle(branch)
    assert await branch.chat("again?", imodel=echo_model()) == "ok"  # the lock was released


async def test_cancelling_the_consumer_closes_the_function_model_stream() -> None:
    entered = anyio.Event()
    closed: list[bool] = []

    async def pieces(messages: Sequence[Message], **options: Any) -> AsyncIterator[str]:
        try:
            yield "partial"
            entered.set()
            await anyio.sleep_forever()
            yield "unreachable"
        finally:
            closed.append(True)

    model = FunctionModel(lambda messages, **options: "unused", stream=pieces)
    branch, rec, _ = observed_branch(chat_model=model)

    async def consume() -> None:
        async for _ in branch.run("stream"):
            pass

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await entered.wait()
        group.cancel_scope.cancel()
    assert closed == [True]
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert isinstance(failed.data, anyio.get_cancelled_exc_class())
    assert list(branch.msgs) == []  # cancelled before any reply: nothing committed
    assert_idle(branch)


async def test_a_provider_error_fails_the_turn_and_keeps_what_was_committed() -> None:
    error = ServerError("overloaded", provider="chunks", model="chunky")
    model, provider = chunk_model([TextDelta(text="one", complete=True), _Fail(error)])
    branch, rec, _ = observed_branch(chat_model=model)
    seen: list[Message] = []
    with pytest.raises(ServerError, match="overloaded"):
        await drain(branch.run("go"), seen)
    assert kinds(seen) == ["Instruction", "AssistantResponse"]
    assert list(branch.msgs) == seen
    [failed] = rec.terminals()
    assert isinstance(failed, RunFailed)
    assert failed.data is error
    assert provider.closed == 1
    assert_idle(branch)


async def test_a_tool_result_without_its_call_is_a_protocol_error() -> None:
    model, _ = chunk_model([ToolResultEvent(call_id="ghost", output="?"), final()])
    branch, rec, _ = observed_branch(chat_model=model)
    with pytest.raises(ProtocolError, match="ghost"):
        await collect(branch.run("go"))
    assert isinstance(rec.terminals()[0], RunFailed)
    assert_idle(branch)


async def test_a_run_that_is_never_iterated_does_nothing() -> None:
    model = TestModel(["never"])
    branch, rec, _ = observed_branch(system="sys", chat_model=model)
    stream = branch.run("hi")
    await anyio.lowlevel.checkpoint()
    assert model.calls == []
    assert kinds(branch.msgs) == ["System"]
    assert rec.signals == []
    assert_idle(branch)
    await stream.aclose()
    assert rec.signals == []
    assert model.calls == []
    assert_idle(branch)


# -- models and turns ------------------------------------------------------------------------
async def test_a_call_specific_model_is_used_for_that_turn_only() -> None:
    default = TestModel(["from the default"])
    special = TestModel(["from the special one"])
    branch = Branch(chat_model=default)
    seen = await collect(branch.run("hi", chat_model=special))
    assert text_of(seen[-1]) == "from the special one"
    assert branch.chat_model is default
    assert default.calls == []
    seen = await collect(branch.run("again"))
    assert text_of(seen[-1]) == "from the default"
    assert len(special.calls) == 1


async def test_one_start_and_one_end_per_run() -> None:
    branch, rec, _ = observed_branch(chat_model=tool_then_answer(), tools=[multiply])
    for question in ("first", "second"):
        await collect(branch.run(question))
    starts = rec.starts()
    assert [s.operation for s in starts] == ["run", "run"]
    assert [kind for kind, _ in rec.lifecycle()] == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
    assert_one_terminal_per_start(rec)


async def test_another_turn_waits_until_the_stream_is_closed() -> None:
    branch, rec, _ = observed_branch(chat_model=TestModel(["streamed", "chatted"]))
    stream = branch.run("stream first")
    await anext(stream)
    done = anyio.Event()

    async def chat() -> None:
        await branch.chat_and_record("then chat")
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(chat)
        await anyio.wait_all_tasks_blocked()
        assert not done.is_set()
        # the instruction was yielded once committed, together with the first reply
        assert kinds(branch.msgs) == ["Instruction", "AssistantResponse"]
        rest = [message async for message in stream]
        assert text_of(rest[0]) == "streamed"
    assert [type(s) for s in rec.signals if isinstance(s, RunStart | RunEnd)] == [
        RunStart,
        RunEnd,
        RunStart,
        RunEnd,
    ]
    assert text_of(branch.msgs[-1]) == "chatted"
    assert_one_terminal_per_start(rec)


async def test_session_id_of_a_reply_is_resumed_by_the_next_run_with_that_provider() -> None:
    def reply(messages: Sequence[Message], **options: Any) -> Any:
        return ModelResponse(text="hi", session_id="sess-1")

    model = FunctionModel(reply)
    branch = Branch(chat_model=model)
    await collect(branch.run("one"))
    await collect(branch.run("two"))
    await collect(branch.run("three", session_id="explicit"))
    assert [r.session_id for r in model.calls] == [None, "sess-1", "explicit"]
    other = TestModel(["x"])
    await collect(branch.run("four", chat_model=other))
    assert other.calls[0].session_id is None  # another provider does not get it
    assert branch.clone().resume_ids == {}


async def test_resume_id_reads_the_kept_session_without_making_the_mapping() -> None:
    branch = Branch(chat_model=TestModel(["x"]))
    await collect(branch.run("no session named"))
    assert branch.resume_id("test") is None
    assert branch._resume_ids is None  # a Branch that never resumed keeps no mapping
    branch.resume_ids["claude_code"] = "sess-9"
    assert branch.resume_id("claude_code") == "sess-9"
    assert branch.resume_id("codex") is None


async def test_bad_parameters_raise_before_anything_runs() -> None:
    model = TestModel(["x"])
    branch, rec, _ = observed_branch(chat_model=model)
    with pytest.raises(OperationError, match="max_tool_rounds"):
        branch.run("x", max_tool_rounds=-1)
    with pytest.raises(OperationError, match="max_tool_rounds"):
        branch.run("x", max_tool_rounds=True)
    with pytest.raises(UnknownParameterError, match="'tools'"):
        branch.run("x", tools=[multiply])  # type: ignore[call-arg]
    with pytest.raises(OperationError, match="session_id"):
        branch.run("x", session_id="")
    with pytest.raises(OperationError, match="chat_model"):
        branch.run("x", chat_model="openai/gpt")  # type: ignore[arg-type]
    with pytest.raises(OperationError, match="instruction"):
        branch.run(3)  # type: ignore[arg-type]
    await anyio.lowlevel.checkpoint()
    assert model.calls == []
    assert rec.signals == []
    assert_idle(branch)


async def test_options_reach_the_model_and_history_is_sent() -> None:
    model = TestModel(["first", "second"])
    branch = Branch(system=System(content="sys"), chat_model=model)
    await collect(branch.run("one"))
    await collect(branch.run("two", temperature=0.5))
    request = model.calls[1]
    assert request.options == {"temperature": 0.5}
    assert kinds(request.messages) == [
        "System",
        "Instruction",
        "AssistantResponse",
        "Instruction",
    ]
