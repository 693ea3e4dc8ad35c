"""``Branch.operate_stream`` and ``ReActEvents``: live events of structured and
reason-act turns against an OpenAI-compatible and an Anthropic server on 127.0.0.1, checked
against the committed messages and against the plain operation given the same replies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from lionagi import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Branch,
    Instruction,
    PartialObjectEvent,
    ResultEvent,
    StreamEvent,
    TextDeltaEvent,
    ToolFinished,
    ToolStarted,
    TurnStream,
)
from lionagi.operations.react import ReActAnalysis
from lionagi.service.imodel import iModel
from lionagi.session.signal import RunEnd
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch
from tests.payloads import (
    DONE,
    USAGE_EVENT,
    anthropic_end,
    anthropic_start,
    anthropic_text_block,
    anthropic_tool_block,
    call_delta,
    chunk,
    completion,
)
from tests.service.http_server import AWAIT_CLOSE, Reply, ScriptedServer
from tests.streams import (
    check_deltas,
    close_at_every_event,
    committed,
    kinds,
    multiply,
    openai_model,
)

pytestmark = pytest.mark.anyio


class Answer(BaseModel):
    answer: str
    confidence: float = 0.0


def text_reply(*pieces: str) -> Reply:
    return Reply(
        events=[
            chunk({"role": "assistant", "content": ""}),
            *(chunk({"content": piece}) for piece in pieces),
            chunk({}, finish="stop"),
            USAGE_EVENT,
            DONE,
        ]
    )


CALL_ONLY = Reply(
    events=[
        chunk({"role": "assistant", "content": ""}),
        call_delta(0, id="call_a", name="multiply", arguments=""),
        call_delta(0, arguments='{"a": 6,'),
        call_delta(0, arguments=' "b": 7}'),
        chunk({}, finish="tool_calls"),
        USAGE_EVENT,
        DONE,
    ]
)
ANSWER_PIECES = ('{"answer": "for', "ty-", 'two", "confi', 'dence": 0.9}')
# the same replies, whole, for the plain (not streamed) operations
WHOLE_CALL = Reply(
    json=completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
                }
            ],
        },
        finish="tool_calls",
    )
)


def whole(*pieces: str) -> Reply:
    return Reply(json=completion({"role": "assistant", "content": "".join(pieces)}))


async def collect(stream: TurnStream[StreamEvent]) -> list[StreamEvent]:
    async with stream:
        return [event async for event in stream]


def without_ids(messages: list[Any]) -> list[tuple[str, Any]]:
    """What a message says, not which object it is (ids and times differ between runs)."""
    out: list[tuple[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantResponse):
            out.append(("reply", m.content))
        elif isinstance(m, ActionRequest):
            out.append(("call", (m.function, m.arguments)))
        elif isinstance(m, ActionResponse):
            out.append(("result", m.output))
        else:
            out.append((type(m).__name__, None))
    return out


def results(events: list[StreamEvent]) -> list[ResultEvent]:
    return [e for e in events if isinstance(e, ResultEvent)]


# -- operate_stream ------------------------------------------------------------------------
async def test_structured_reply_streams_partial_objects(server: ScriptedServer) -> None:
    server.reply(text_reply(*ANSWER_PIECES), whole(*ANSWER_PIECES))
    model = openai_model(server)
    branch, rec, _ = observed_branch(chat_model=model)
    events = await collect(branch.operate_stream(instruction="6 x 7?", response_format=Answer))
    assert kinds(events) == [
        "TextDeltaEvent",
        "PartialObjectEvent",
        "TextDeltaEvent",
        "PartialObjectEvent",
        "TextDeltaEvent",
        "PartialObjectEvent",
        "TextDeltaEvent",
        "PartialObjectEvent",
        "Instruction",
        "AssistantResponse",
        "ResultEvent",
    ]
    check_deltas(events)
    partial = [e for e in events if isinstance(e, PartialObjectEvent)]
    # the object as far as it has come, an unfinished string kept as far as it goes
    assert [e.data for e in partial] == [
        {"answer": "for"},
        {"answer": "forty-"},
        {"answer": "forty-two"},
        {"answer": "forty-two", "confidence": 0.9},
    ]
    # validated incrementally: each preview is already an Answer (its required field is there)
    previews = [p.parsed for p in partial if isinstance(p.parsed, Answer)]
    assert [(p.answer, p.confidence) for p in previews] == [
        ("for", 0.0),
        ("forty-", 0.0),
        ("forty-two", 0.0),
        ("forty-two", 0.9),
    ]
    [result] = results(events)
    assert result.final
    assert isinstance(result.value, Answer)
    assert (result.value.answer, result.value.confidence) == ("forty-two", 0.9)
    assert list(branch.msgs) == committed(events)

    # the plain operation, given the same reply, commits the same and returns the same
    plain = observed_branch(chat_model=model)[0]
    value = await plain.operate(instruction="6 x 7?", response_format=Answer)
    assert value.model_dump() == result.value.model_dump()
    assert without_ids(list(plain.msgs)) == without_ids(list(branch.msgs))
    await model.aclose()
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_a_preview_waits_for_required_fields_and_ignores_prose(
    server: ScriptedServer,
) -> None:
    class Person(BaseModel):
        name: str
        tags: list[str]

    pieces = ("Here:\n```json\n", '{"tags": ["a", "b', '"], "na', 'me": "Al', 'ice"}', "\n```")
    server.reply(text_reply(*pieces))
    model = openai_model(server)
    branch = Branch(chat_model=model)
    events = await collect(branch.operate_stream(instruction="who?", response_format=Person))
    await model.aclose()
    check_deltas(events)
    partial = [(e.data, e.parsed) for e in events if isinstance(e, PartialObjectEvent)]
    tags = ["a", "b"]
    # nothing before the object starts; no event for a piece that changes nothing; the closing
    # fence after the object is ignored
    assert partial == [
        ({"tags": tags}, None),  # not valid yet: "name" is required
        ({"tags": tags, "name": "Al"}, Person(name="Al", tags=tags)),
        ({"tags": tags, "name": "Alice"}, Person(name="Alice", tags=tags)),
    ]
    value = results(events)[0].value
    assert isinstance(value, Person)
    assert (value.name, value.tags) == ("Alice", tags)


async def test_operate_stream_with_a_native_tool_call(server: ScriptedServer) -> None:
    server.reply(CALL_ONLY, text_reply(*ANSWER_PIECES), WHOLE_CALL, whole(*ANSWER_PIECES))
    model = openai_model(server)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    events = await collect(
        branch.operate_stream(instruction="6 x 7?", response_format=Answer, actions=True)
    )
    assert [k for k in kinds(events) if k != "PartialObjectEvent"] == [
        "ToolCallDeltaEvent",
        "ToolCallDeltaEvent",
        "ToolCallDeltaEvent",
        "Instruction",
        "AssistantResponse",  # the empty text before the call
        "ActionRequest",
        "ToolStarted",
        "ActionResponse",
        "ToolFinished",
        "TextDeltaEvent",  # the follow-up call asks for the answer
        "TextDeltaEvent",
        "TextDeltaEvent",
        "TextDeltaEvent",
        "Instruction",
        "AssistantResponse",
        "ResultEvent",
    ]
    check_deltas(events)
    messages = committed(events)
    assert list(branch.msgs) == messages
    request = next(m for m in messages if isinstance(m, ActionRequest))
    response = next(m for m in messages if isinstance(m, ActionResponse))
    assert [e.request for e in events if isinstance(e, ToolStarted)] == [request]
    assert [e.response for e in events if isinstance(e, ToolFinished)] == [response]
    assert response.output == 42
    [result] = results(events)
    assert result.value.answer == "forty-two"
    assert [r.output for r in result.value.action_responses] == [42]

    plain = observed_branch(chat_model=model, tools=[multiply])[0]
    value = await plain.operate(instruction="6 x 7?", response_format=Answer, actions=True)
    assert value.model_dump() == result.value.model_dump()
    assert without_ids(list(plain.msgs)) == without_ids(messages)
    await model.aclose()
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_idle(branch)


async def test_operate_stream_on_anthropic(server: ScriptedServer) -> None:
    server.reply(
        Reply(
            events=[
                *anthropic_start(),
                *anthropic_text_block(0, "Checking."),
                *anthropic_tool_block(1, "toolu_1", "multiply", '{"a": 6', ', "b": 7}'),
                *anthropic_end("tool_use"),
            ]
        ),
        Reply(
            events=[*anthropic_start(), *anthropic_text_block(0, *ANSWER_PIECES), *anthropic_end()]
        ),
    )
    model = iModel("anthropic", "claude-test", base_url=server.url, api_key="sk-t", timeout=30)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    events = await collect(
        branch.operate_stream(instruction="6 x 7?", response_format=Answer, actions=True)
    )
    await model.aclose()
    check_deltas(events)
    messages = committed(events)
    assert list(branch.msgs) == messages
    assert [type(m).__name__ for m in messages] == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "Instruction",
        "AssistantResponse",
    ]
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)] == [
        "Checking.",
        *ANSWER_PIECES,
    ]
    # "Checking." is no JSON: previews start with the follow-up's object
    partial = [e for e in events if isinstance(e, PartialObjectEvent)]
    assert partial[-1].data == {"answer": "forty-two", "confidence": 0.9}
    [result] = results(events)
    assert result.value.answer == "forty-two"
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_idle(branch)


HANGING = Reply(
    events=[
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": ANSWER_PIECES[0]}),
        chunk({"content": ANSWER_PIECES[1]}),
        AWAIT_CLOSE,
    ]
)


@pytest.mark.parametrize("how", ["aclose", "cancel"])
async def test_operate_stream_closed_at_every_event_commits_nothing(how: str) -> None:
    # two text deltas, each with its preview; no half reply, and no instruction without one
    await close_at_every_event(
        how,
        HANGING,
        openai_model,
        4,
        open_stream=lambda b: b.operate_stream(instruction="go", response_format=Answer),
        whole_after=None,
    )


# -- ReActEvents ----------------------------------------------------------------------------
ANALYSIS = json.dumps({"analysis": "6 x 7 is 42", "extension_needed": False})


async def test_react_events_stream_rounds_tools_and_answer(server: ScriptedServer) -> None:
    server.reply(CALL_ONLY, text_reply(ANALYSIS[:20], ANALYSIS[20:]), text_reply("It is ", "42."))
    server.reply(WHOLE_CALL, whole(ANALYSIS), whole("It is 42."))
    model = openai_model(server)
    branch, rec, _ = observed_branch(chat_model=model, tools=[multiply])
    events = await collect(branch.ReActEvents("What is 6 x 7?"))
    check_deltas(events)
    messages = committed(events)
    assert list(branch.msgs) == messages
    assert [type(m).__name__ for m in messages] == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "Instruction",  # the round's follow-up asks for its analysis
        "AssistantResponse",
        "Instruction",  # the final answer
        "AssistantResponse",
    ]
    assert [type(e).__name__ for e in events if isinstance(e, ToolStarted | ToolFinished)] == [
        "ToolStarted",
        "ToolFinished",
    ]
    analysis, answer = results(events)
    assert not analysis.final
    assert answer.final
    assert isinstance(analysis.value, ReActAnalysis)
    assert analysis.value.analysis == "6 x 7 is 42"
    assert answer.value == "It is 42."
    assert isinstance(events[-1], ResultEvent)
    # the deltas of the last reply come right before it is committed
    tail = [e.text for e in events[-6:] if isinstance(e, TextDeltaEvent)]
    assert tail == ["It is ", "42."]

    # the plain ReActStream, given the same replies, hands out the same values
    plain = observed_branch(chat_model=model, tools=[multiply])[0]
    async with plain.ReActStream("What is 6 x 7?") as stream:
        values = [item async for item in stream]
    assert [v.model_dump() if isinstance(v, BaseModel) else v for v in values] == [
        analysis.value.model_dump(),
        answer.value,
    ]
    assert without_ids(list(plain.msgs)) == without_ids(messages)
    await model.aclose()
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_one_terminal_per_start(rec)
    assert_idle(branch)


async def test_react_events_instructions_are_the_plain_ones(server: ScriptedServer) -> None:
    server.reply(text_reply(ANALYSIS), text_reply("42."))
    model = openai_model(server)
    branch = Branch(chat_model=model, tools=[multiply])
    events = await collect(branch.ReActEvents("What is 6 x 7?"))
    await model.aclose()
    first, final = [m for m in committed(events) if isinstance(m, Instruction)]
    assert first.instruction == "What is 6 x 7?"
    assert first.response_format is not None
    assert "analysis" in first.response_format["properties"]
    assert final.response_format is None
    assert [r.value for r in results(events)][-1] == "42."


# -- communicate_stream ----------------------------------------------------------------------
async def test_communicate_stream_matches_communicate(server: ScriptedServer) -> None:
    server.reply(text_reply(*ANSWER_PIECES), whole(*ANSWER_PIECES))
    model = openai_model(server)
    branch, rec, _ = observed_branch(chat_model=model)
    events = await collect(branch.communicate_stream("6 x 7?", response_format=Answer))
    assert kinds(events) == [
        *["TextDeltaEvent", "PartialObjectEvent"] * len(ANSWER_PIECES),
        "Instruction",
        "AssistantResponse",
        "ResultEvent",
    ]
    check_deltas(events)
    assert list(branch.msgs) == committed(events)
    [result] = results(events)
    assert result.value == Answer(answer="forty-two", confidence=0.9)

    plain = observed_branch(chat_model=model)[0]
    assert await plain.communicate("6 x 7?", response_format=Answer) == result.value
    assert without_ids(list(plain.msgs)) == without_ids(list(branch.msgs))
    await model.aclose()
    assert isinstance(rec.terminals()[0], RunEnd)
    assert_idle(branch)


async def test_communicate_stream_of_text_and_of_request_fields(server: ScriptedServer) -> None:
    server.reply(text_reply("Six times seven ", "is 42."), text_reply(*ANSWER_PIECES))
    model = openai_model(server)
    branch = Branch(chat_model=model)
    text = await collect(branch.communicate_stream("6 x 7?"))
    assert not [e for e in text if isinstance(e, PartialObjectEvent)]  # no format, no previews
    assert results(text)[0].value == "Six times seven is 42."
    fields = await collect(
        branch.communicate_stream("6 x 7?", request_fields=["answer", "confidence"])
    )
    await model.aclose()
    check_deltas(fields)
    assert results(fields)[0].value == {"answer": "forty-two", "confidence": 0.9}
    assert list(branch.msgs) == committed(text) + committed(fields)
