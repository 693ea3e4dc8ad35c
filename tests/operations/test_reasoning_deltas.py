"""Reasoning deltas through ``Branch.stream``: for each provider that streams reasoning, the
reasoning a reply commits is the concatenation of its ``ReasoningDeltaEvent``s, in order; a
stream closed or cancelled mid-reasoning commits nothing. Wire shapes follow the providers' API
references (OpenAI-compatible ``delta.reasoning_content`` / ``delta.reasoning``, Responses
``response.reasoning_text.delta`` / ``response.reasoning_summary_text.delta``, Anthropic
``thinking_delta`` with a whole ``signature_delta``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from lionagi import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    MessageCommitted,
    ReasoningDeltaEvent,
    StreamEvent,
)
from lionagi.service.imodel import iModel
from lionagi.service.types import FinalChunk, ReasoningDelta, ReasoningEvent
from tests.helpers import assert_idle, observed_branch
from tests.payloads import (
    DONE,
    USAGE_EVENT,
    anthropic_end,
    anthropic_start,
    anthropic_text_block,
    anthropic_tool_block,
    call_delta,
    chunk,
)
from tests.service.http_server import AWAIT_CLOSE, Reply, ScriptedServer, Step, sse
from tests.streams import (
    anthropic_model,
    check_deltas,
    close_at_every_event,
    committed,
    multiply,
    openai_model,
)

pytestmark = pytest.mark.anyio

THOUGHTS = ("The user asks ", "for 6 x 7; ", "use the tool.")


def check_reasoning(events: list[StreamEvent]) -> list[str]:
    """Each committed reply's reasoning text is the concatenation of the reasoning deltas
    since the previous committed message; the deltas, in order."""
    pieces: list[str] = []
    since: list[str] = []
    for event in events:
        match event:
            case ReasoningDeltaEvent(text=piece):
                assert piece
                pieces.append(piece)
                since.append(piece)
            case MessageCommitted(message=AssistantResponse(reasoning=reasoning)):
                assert "".join(r.text for r in reasoning) == "".join(since)
                since.clear()
            case MessageCommitted(message=ActionRequest() | ActionResponse()):
                assert not since, "reasoning deltas before a tool call that no reply holds"
    assert not since, "reasoning deltas that no committed reply holds"
    return pieces


def chat_reasoning(field: str, *pieces: str) -> list[str]:
    return [chunk({field: piece}) for piece in pieces]


def chat_tool_reply(field: str) -> Reply:
    return Reply(
        events=[
            chunk({"role": "assistant", "content": ""}),
            *chat_reasoning(field, *THOUGHTS),
            call_delta(0, id="call_a", name="multiply", arguments='{"a": 6, "b": 7}'),
            chunk({}, finish="tool_calls"),
            USAGE_EVENT,
            DONE,
        ]
    )


def chat_text_reply(field: str) -> Reply:
    return Reply(
        events=[
            *chat_reasoning(field, "It returned ", "42."),
            chunk({"content": "6 x 7 = "}),
            chunk({"content": "42."}),
            chunk({}, finish="stop"),
            DONE,
        ]
    )


def anthropic_thinking(index: int, *pieces: str) -> list[str]:
    def event(kind: str, **fields: Any) -> str:
        return sse({"type": kind, **fields}, event=kind)

    start = {"type": "thinking", "thinking": "", "signature": ""}
    return [
        event("content_block_start", index=index, content_block=start),
        *(
            event(
                "content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": p}
            )
            for p in pieces
        ),
        event(
            "content_block_delta",
            index=index,
            delta={"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"},
        ),
        event("content_block_stop", index=index),
    ]


def responses_event(kind: str, **data: Any) -> str:
    return sse({"type": kind, **data}, event=kind)


def responses_reasoning(
    item_id: str, index: int, parts: list[tuple[str, list[str]]]
) -> list[str | Step]:
    """A reasoning item streamed part by part: ``(kind, pieces)`` where kind is ``"summary"``
    (summary text deltas) or ``"content"`` (reasoning text deltas)."""
    events: list[str | Step] = [
        responses_event(
            "response.output_item.added",
            output_index=index,
            item={"type": "reasoning", "id": item_id, "summary": []},
        )
    ]
    for part, (kind, pieces) in enumerate(parts):
        name, field = (
            ("response.reasoning_summary_text.delta", "summary_index")
            if kind == "summary"
            else ("response.reasoning_text.delta", "content_index")
        )
        events.extend(
            responses_event(name, item_id=item_id, output_index=index, delta=p, **{field: part})
            for p in pieces
        )
    return events


def responses_item(item_id: str, parts: list[tuple[str, list[str]]]) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
    for kind, pieces in parts:
        entry = "".join(pieces)
        if kind == "summary":
            item["summary"].append({"type": "summary_text", "text": entry})
        else:
            item.setdefault("content", []).append({"type": "reasoning_text", "text": entry})
    return item


SUMMARY = [("summary", ["**Multiplying**", " with the tool"]), ("summary", ["Then answer."])]
OPEN_WEIGHTS = [("content", ["We need ", "6*7."])]


def responses_reply(
    reasoning: list[tuple[str, list[str]]], output: list[dict[str, Any]], *, text: str | None
) -> Reply:
    events = responses_reasoning("rs_1", 0, reasoning)
    if text is not None:
        events.append(responses_event("response.output_text.delta", output_index=1, delta=text))
    for index, item in enumerate(output, start=1):
        if item["type"] == "function_call":
            events.append(
                responses_event(
                    "response.output_item.added", output_index=index, item={**item, "arguments": ""}
                )
            )
            events.append(
                responses_event(
                    "response.function_call_arguments.delta",
                    output_index=index,
                    delta=item["arguments"],
                )
            )
    done = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "o4-mini",
        "output": [responses_item("rs_1", reasoning), *output],
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    events.append(responses_event("response.completed", response=done))
    return Reply(events=events)


CALL_ITEM = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_a",
    "name": "multiply",
    "arguments": json.dumps({"a": 6, "b": 7}),
    "status": "completed",
}
ANSWER_ITEM = {
    "type": "message",
    "id": "msg_2",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "42."}],
}


def responses_model(server: ScriptedServer) -> iModel:
    return iModel(
        "openai_responses", "o4-mini", base_url=f"{server.url}/v1", api_key="sk-t", timeout=30
    )


# provider -> (model, first reply (reasoning, then a tool call), second reply, the deltas)
CASES: dict[str, tuple[Callable[[ScriptedServer], iModel], Reply, Reply, list[str]]] = {
    "openai-reasoning_content": (
        openai_model,
        chat_tool_reply("reasoning_content"),
        chat_text_reply("reasoning_content"),
        [*THOUGHTS, "It returned ", "42."],
    ),
    "openai-reasoning": (
        openai_model,
        chat_tool_reply("reasoning"),
        chat_text_reply("reasoning"),
        [*THOUGHTS, "It returned ", "42."],
    ),
    "anthropic": (
        anthropic_model,
        Reply(
            events=[
                *anthropic_start(),
                *anthropic_thinking(0, *THOUGHTS),
                *anthropic_tool_block(1, "toolu_1", "multiply", '{"a": 6, "b": 7}'),
                *anthropic_end("tool_use"),
            ]
        ),
        Reply(
            events=[
                *anthropic_start(),
                *anthropic_thinking(0, "It returned ", "42."),
                *anthropic_text_block(1, "6 x 7 = 42."),
                *anthropic_end(),
            ]
        ),
        [*THOUGHTS, "It returned ", "42."],
    ),
    "openai_responses": (
        responses_model,
        responses_reply(SUMMARY, [CALL_ITEM], text=None),
        responses_reply(OPEN_WEIGHTS, [ANSWER_ITEM], text="42."),
        ["**Multiplying**", " with the tool", "\n\nThen answer.", "We need ", "6*7."],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_committed_reasoning_is_the_concatenation_of_its_deltas(
    server: ScriptedServer, case: str
) -> None:
    make_model, first, second, expected = CASES[case]
    server.reply(first, second)
    model = make_model(server)
    branch, _, _ = observed_branch(chat_model=model, tools=[multiply])
    async with branch.stream("What is 6 x 7?") as stream:
        events = [event async for event in stream]
    await model.aclose()

    assert check_reasoning(events) == expected
    check_deltas(events)
    replies = [m for m in committed(events) if isinstance(m, AssistantResponse)]
    assert [len(m.reasoning) for m in replies] == [1, 1]
    assert list(branch.msgs) == committed(events)
    # each reply's reasoning deltas come before it is committed, and after the previous reply
    positions = [i for i, e in enumerate(events) if isinstance(e, ReasoningDeltaEvent)]
    commits = [
        i
        for i, e in enumerate(events)
        if isinstance(e, MessageCommitted) and isinstance(e.message, AssistantResponse)
    ]
    assert max(positions[: len(expected) - 2]) < commits[0] < min(positions[-2:]) < commits[1]
    if case == "anthropic":  # the signature stays whole and goes back with the thinking
        assert replies[0].reasoning[0].block["signature"] == "EqQBCgIYAhIM1gbcDa9GJwZA"
        assert server.requests[1].json["messages"][1]["content"][0]["type"] == "thinking"
    assert_idle(branch)


async def test_model_stream_ends_each_reasoning_run_with_the_whole_block(
    server: ScriptedServer,
) -> None:
    """OpenAI-compatible servers: a run of reasoning deltas is followed by its whole block as
    soon as the reply goes on, and the final response holds the same block."""
    server.reply(chat_text_reply("reasoning_content"))
    model = openai_model(server)
    chunks = [c async for c in model.stream([Instruction(instruction="What is 6 x 7?")])]
    await model.aclose()
    kinds = [type(c).__name__ for c in chunks]
    assert kinds[:3] == ["ReasoningDelta", "ReasoningDelta", "ReasoningEvent"]
    pieces = [c.text for c in chunks if isinstance(c, ReasoningDelta)]
    [event] = [c for c in chunks if isinstance(c, ReasoningEvent)]
    assert event.reasoning.text == "".join(pieces) == "It returned 42."
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.reasoning == (event.reasoning,)
    assert final.response.text == "6 x 7 = 42."


async def test_invoked_replies_keep_their_reasoning(server: ScriptedServer) -> None:
    message = {"role": "assistant", "content": "42.", "reasoning_content": "6 x 7 is 42."}
    server.reply(
        Reply(json={"model": "m", "choices": [{"index": 0, "message": message}]}),
        Reply(
            json={
                "object": "response",
                "status": "completed",
                "output": [responses_item("rs_1", SUMMARY), ANSWER_ITEM],
            }
        ),
    )
    chat, responses = openai_model(server), responses_model(server)
    history = [Instruction(instruction="What is 6 x 7?")]
    chat_reply = await chat.invoke(history)
    responses_answer = await responses.invoke(history)
    await chat.aclose()
    await responses.aclose()
    assert [r.text for r in chat_reply.reasoning] == ["6 x 7 is 42."]
    assert [r.text for r in responses_answer.reasoning] == [
        "**Multiplying** with the tool\n\nThen answer."
    ]
    # OpenAI-compatible servers take no reasoning back
    assert "reasoning_content" not in json.dumps(server.requests[0].json)


# replies that stop mid-reasoning: the server waits for the client to hang up
HANGING = {
    "openai": (
        openai_model,
        Reply(events=[*chat_reasoning("reasoning_content", *THOUGHTS), AWAIT_CLOSE]),
    ),
    "anthropic": (
        anthropic_model,
        Reply(events=[*anthropic_start(), *anthropic_thinking(0, *THOUGHTS)[:-2], AWAIT_CLOSE]),
    ),
    "openai_responses": (
        responses_model,
        Reply(events=[*responses_reasoning("rs_1", 0, SUMMARY), AWAIT_CLOSE]),
    ),
}


@pytest.mark.parametrize("how", ["aclose", "cancel"])
@pytest.mark.parametrize("provider", list(HANGING))
async def test_closing_mid_reasoning_commits_nothing(provider: str, how: str) -> None:
    make_model, reply = HANGING[provider]
    count = 3  # every reasoning delta is a cut point
    await close_at_every_event(how, reply, make_model, count, whole_after=None)
