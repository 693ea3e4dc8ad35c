"""``Branch.stream``: live deltas through a turn, against an OpenAI-compatible and an Anthropic
server on 127.0.0.1 and the fake agentic CLI; close and cancel at every event; backpressure and
memory for long replies."""

from __future__ import annotations

import os
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from anyio.abc import Process

from lionagi import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Branch,
    MessageCommitted,
    StreamEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolFinished,
    ToolStarted,
)
from lionagi.service.imodel import iModel
from lionagi.session.signal import RunEnd
from lionagi.testing import FunctionModel
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch
from tests.payloads import (
    TEXT_REPLY,
    TOOL_CALL_EVENTS,
    TOOL_REPLY,
    anthropic_end,
    anthropic_start,
    anthropic_text_block,
    anthropic_tool_block,
)
from tests.processes import assert_reaped, fake_model
from tests.service.http_server import AWAIT_CLOSE, Reply, ScriptedServer
from tests.streams import (
    anthropic_model,
    check_deltas,
    close_at_every_event,
    committed,
    kinds,
    multiply,
    openai_model,
)

pytestmark = pytest.mark.anyio


async def collect(branch: Branch, instruction: str) -> list[StreamEvent]:
    async with branch.stream(instruction) as stream:
        return [event async for event in stream]


# -- OpenAI-compatible server ----------------------------------------------------------------
async def test_openai_deltas_match_the_committed_messages(server: ScriptedServer) -> None:
    server.reply(TOOL_REPLY, TEXT_REPLY, TOOL_REPLY, TEXT_REPLY)
    model = openai_model(server)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    events = await collect(branch, "What is 6 x 7?")
    assert kinds(events) == [
        "TextDeltaEvent",
        "TextDeltaEvent",
        "ToolCallDeltaEvent",
        "Instruction",  # committed together with the first whole reply message
        "AssistantResponse",  # the text segment ends when the tool call begins
        "ToolCallDeltaEvent",
        "ToolCallDeltaEvent",
        "ActionRequest",
        "ToolStarted",
        "ActionResponse",
        "ToolFinished",
        "TextDeltaEvent",
        "TextDeltaEvent",
        "AssistantResponse",
    ]
    check_deltas(events)
    deltas = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert deltas == ["Let me ", "compute.", "6 x 7 = ", "42."]
    messages = committed(events)
    assert list(branch.msgs) == messages
    request, response = messages[2], messages[3]
    assert isinstance(request, ActionRequest)
    assert isinstance(response, ActionResponse)
    started = next(e for e in events if isinstance(e, ToolStarted))
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert (started.request, finished.response) == (request, response)
    assert response.output == 42

    # the message view of the same script is the committed messages, nothing else
    other = observed_branch(chat_model=model, tools=[multiply])[0]
    async with other.run("What is 6 x 7?") as stream:
        seen = [message async for message in stream]
    assert [(type(m), m.content) for m in seen if isinstance(m, AssistantResponse)] == [
        (type(m), m.content) for m in messages if isinstance(m, AssistantResponse)
    ]
    assert len(seen) == len(messages)
    await model.aclose()
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


# the tool reply cut after its call's arguments: the server then waits for the client to hang up
HANGING_REPLY = Reply(events=[*TOOL_CALL_EVENTS, AWAIT_CLOSE])
HANGING_EVENTS = 6  # 2 text deltas, call delta, Instruction, AssistantResponse, 1 more delta


@pytest.mark.parametrize("how", ["aclose", "cancel"])
async def test_openai_close_at_every_event_closes_the_connection(how: str) -> None:
    await close_at_every_event(how, HANGING_REPLY, openai_model, HANGING_EVENTS)


# -- Anthropic ------------------------------------------------------------------------------
async def test_anthropic_deltas_match_the_committed_messages(server: ScriptedServer) -> None:
    server.reply(
        Reply(
            events=[
                *anthropic_start(),
                *anthropic_text_block(0, "Checking ", "the product."),
                *anthropic_tool_block(1, "toolu_1", "multiply", '{"a": 6', ', "b": 7}'),
                *anthropic_end("tool_use"),
            ]
        ),
        Reply(
            events=[*anthropic_start(), *anthropic_text_block(0, "It is ", "42."), *anthropic_end()]
        ),
    )
    model = iModel("anthropic", "claude-test", base_url=server.url, api_key="sk-t", timeout=30)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    events = await collect(branch, "What is 6 x 7?")
    await model.aclose()
    check_deltas(events)
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)] == [
        "Checking ",
        "the product.",
        "It is ",
        "42.",
    ]
    args = [e.arguments for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert "".join(args) == '{"a": 6, "b": 7}'
    messages = committed(events)
    assert [type(m).__name__ for m in messages] == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "AssistantResponse",
    ]
    assert list(branch.msgs) == messages
    assert [type(e).__name__ for e in events if isinstance(e, ToolStarted | ToolFinished)] == [
        "ToolStarted",
        "ToolFinished",
    ]
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_idle(branch)


ANTHROPIC_HANGING = Reply(
    events=[
        *anthropic_start(),
        *anthropic_text_block(0, "Checking ", "the product."),
        *anthropic_tool_block(1, "toolu_1", "multiply", '{"a": 6', ', "b": 7}')[
            :-1
        ],  # the block never ends
        AWAIT_CLOSE,
    ]
)
# 2 text deltas, the call's first delta, Instruction, AssistantResponse, 2 argument deltas
ANTHROPIC_HANGING_EVENTS = 7


@pytest.mark.parametrize("how", ["aclose", "cancel"])
async def test_anthropic_close_at_every_event_closes_the_connection(how: str) -> None:
    await close_at_every_event(how, ANTHROPIC_HANGING, anthropic_model, ANTHROPIC_HANGING_EVENTS)


# -- the agentic CLI ------------------------------------------------------------------------
@pytest.fixture
def spawned(processes: list[Process]) -> list[Process]:
    return processes


async def test_cli_deltas_and_provider_run_tools(tmp_path: Path, spawned: list[Process]) -> None:
    branch, rec, _ = observed_branch(chat_model=fake_model("tools", tmp_path))
    events = await collect(branch, "Look at a.txt")
    check_deltas(events)
    messages = committed(events)
    assert list(branch.msgs) == messages
    requests = [m for m in messages if isinstance(m, ActionRequest)]
    responses = [m for m in messages if isinstance(m, ActionResponse)]
    assert [e.request for e in events if isinstance(e, ToolStarted)] == requests
    assert [e.response for e in events if isinstance(e, ToolFinished)] == responses
    assert [(r.function, r.arguments) for r in requests] == [
        ("Read", {"path": "a.txt"}),
        ("Bash", {"command": "false"}),
    ]
    # every tool event follows the commit of its message
    for index, event in enumerate(events):
        if isinstance(event, ToolStarted):
            assert events[index - 1] == MessageCommitted(event.request)
        if isinstance(event, ToolFinished):
            assert events[index - 1] == MessageCommitted(event.response)
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_reaped(spawned[0])
    assert_idle(branch)


@pytest.mark.parametrize("how", ["break", "cancel"])
async def test_cli_close_at_every_event_leaves_no_process(
    how: str, tmp_path: Path, spawned: list[Process]
) -> None:
    full = await collect(observed_branch(chat_model=fake_model("tools", tmp_path))[0], "go")
    for stop_after in range(1, len(full)):
        branch, rec, _ = observed_branch(chat_model=fake_model("tools", tmp_path))
        seen: list[StreamEvent] = []
        with anyio.CancelScope() as scope:
            async with branch.stream("go") as stream:
                async for event in stream:
                    seen.append(event)
                    if len(seen) == stop_after:
                        if how == "break":
                            break
                        scope.cancel()
                        await anyio.lowlevel.checkpoint()
        assert len(seen) == stop_after
        assert kinds(seen) == kinds(full[:stop_after])
        history = list(branch.msgs)
        # nothing committed past what was handed out, but the reply committed with the instruction
        seen_messages = committed(seen)
        assert history[: len(seen_messages)] == seen_messages
        assert len(history) - len(seen_messages) <= 1
        check_deltas(seen, finished=False)
        assert_reaped(spawned[-1])
        assert isinstance(rec.terminals()[0], RunEnd)
        assert_idle(branch)


# -- backpressure and memory ----------------------------------------------------------------
def counting_model(produced: list[int], pieces: int, piece: str = "x") -> FunctionModel:
    def stream(messages: Any, **options: Any) -> Iterator[str]:
        for _ in range(pieces):
            produced[0] += 1
            yield piece

    return FunctionModel(lambda messages, **options: "", stream=stream)


async def test_a_slow_consumer_slows_the_model() -> None:
    produced = [0]
    branch = Branch(chat_model=counting_model(produced, 50))
    consumed = 0
    async with branch.stream("go") as stream:
        async for event in stream:
            if isinstance(event, TextDeltaEvent):
                consumed += 1
                # the model is pulled one chunk per event: nothing runs ahead into a buffer
                assert produced[0] == consumed
                for _ in range(5):
                    await anyio.lowlevel.checkpoint()
                assert produced[0] == consumed
    assert consumed == 50
    [reply] = [m for m in branch.msgs if isinstance(m, AssistantResponse)]
    assert reply.content == "x" * 50


async def _peak(pieces: int) -> int:
    branch = Branch(chat_model=counting_model([0], pieces))
    tracemalloc.start()
    try:
        async with branch.stream("go") as stream:
            async for _ in stream:
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [reply] = [m for m in branch.msgs if isinstance(m, AssistantResponse)]
    assert len(reply.content) == pieces
    return peak


@pytest.mark.slow
async def test_a_long_reply_streams_in_flat_memory() -> None:
    await _peak(1_000)  # warm caches (schemas, imports, the event loop) outside the measurement
    small = await _peak(1_000)
    large = await _peak(TRACED)
    # the reply text itself (1 byte a chunk) is held a few times (model buffer, Branch buffer,
    # final strings); anything kept per chunk (an event, a list slot) costs 8+ bytes each
    assert large - small < 6 * (TRACED - 1_000), (small, large)


def fresh_pieces_model(pieces: int) -> FunctionModel:
    """A model whose every chunk is a new string object, as a provider's decoded chunks are."""

    def stream(messages: Any, **options: Any) -> Iterator[str]:
        for index in range(pieces):
            yield f"{index % 10}."

    return FunctionModel(lambda messages, **options: "", stream=stream)


@pytest.mark.slow
async def test_a_long_reply_keeps_no_object_per_chunk() -> None:
    """Python's count of allocated blocks, read while the reply streams, stays where it was
    after the first 1,000 chunks: nothing is kept per chunk (no piece, event or list slot
    object). Cheap enough for ``LONG`` chunks: no allocation tracing."""
    branch = Branch(chat_model=fresh_pieces_model(LONG))
    seen = 0
    at_1k = high = 0
    async with branch.stream("go") as stream:
        async for _ in stream:
            seen += 1
            if seen % 1_000 == 0:
                blocks = sys.getallocatedblocks()
                if seen == 1_000:
                    at_1k = high = blocks
                high = max(high, blocks)
    [reply] = [m for m in branch.msgs if isinstance(m, AssistantResponse)]
    assert len(reply.content) == 2 * LONG
    # one object kept per chunk would add LONG - 1,000 blocks; allow a tenth of that for
    # garbage not yet collected
    assert high - at_1k < (LONG - 1_000) // 10, (at_1k, high)


# chunks in the reply of the long-reply tests; every chunk is one turn step, so a longer reply
# costs time only. `nox -s stream_memory` runs both at 100,000; the suite at 20,000 and, for
# the traced one (tracemalloc makes each step several times slower), 5,000.
_SIZE = os.environ.get("LIONAGI_LONG_REPLY_CHUNKS")
LONG = 20_000 if _SIZE is None else int(_SIZE)
TRACED = 5_000 if _SIZE is None else LONG
