"""OpenAI request bodies assembled from a conversation's encoded prefix (randomized histories
for every format are in test_encoded_formats.py): the same JSON as
encoding the whole body, each message rendered once while the history grows, and the prefix
rebuilt when a message in it is replaced or edited."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from lionagi import Branch
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionagi.service._text import clean_json
from lionagi.service.imodel import iModel
from lionagi.service.providers import _openai_render
from lionagi.service.providers._openai_render import openai_body, openai_wire_body
from lionagi.service.types import ModelRequest
from tests.payloads import TEXT_REPLY, TOOL_REPLY
from tests.service.histories import SCHEMA, grow, request
from tests.service.http_server import ScriptedServer
from tests.streams import multiply

pytestmark = pytest.mark.anyio


def same_json(req: ModelRequest, *, stream: bool = False) -> None:
    """The assembled bytes decode to exactly the body encoded whole."""
    wire = json.loads(openai_wire_body(req, stream=stream, provider="openai"))
    whole = clean_json(openai_body(req, stream=stream, provider="openai"))  # as httpx sends it
    assert wire.pop("messages") == whole.pop("messages")
    assert wire == whole


def test_a_replaced_or_edited_message_rebuilds_the_prefix() -> None:
    history: list[Message] = [System(content="s")]
    for turn in range(6):
        grow(random.Random(turn), history, turn)
    same_json(request(history))
    index = next(i for i, m in enumerate(history) if isinstance(m, AssistantResponse))
    edited = list(history)
    edited[index] = history[index].model_copy(update={"content": "edited"})
    same_json(request(edited))
    assert b"edited" in openai_wire_body(request(edited), stream=False, provider="openai")
    replaced = list(history)
    replaced[1] = Instruction(instruction="another question")
    same_json(request(replaced))
    shorter = history[:3]  # a history cut back
    same_json(request(shorter))
    same_json(request(history))


def test_a_late_result_for_a_call_left_unanswered_is_sent() -> None:
    call = ActionRequest(call_id="late", function="add", arguments={})
    history: list[Message] = [System(content="s"), Instruction(instruction="go"), call]
    history.append(Instruction(instruction="next"))  # the call got an error result
    same_json(request(history))
    history.append(ActionResponse(request_id=call.id, call_id="late", function="add", output=2))
    same_json(request(history))
    body = json.loads(openai_wire_body(request(history), stream=False, provider="openai"))
    results = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in results] == ["2"]


def test_rare_shapes_are_encoded_whole() -> None:
    history: list[Message] = [System(content="s"), Instruction(instruction="go")]
    same_json(request(history, schema=SCHEMA, mode="prompt"))
    same_json(request(history, schema=SCHEMA, mode="json_object"))
    same_json(request(history, extra_body={"messages": [{"role": "user", "content": "x"}]}))
    same_json(request([]))


def rendered_counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counts: list[int] = []
    render = _openai_render.to_openai_messages

    def counting(messages: Sequence[Message], **kw: Any) -> list[dict[str, Any]]:
        counts.append(len(messages))
        return render(messages, **kw)

    monkeypatch.setattr(_openai_render, "to_openai_messages", counting)
    return counts


@pytest.mark.parametrize("fresh_system", [False, True], ids=["same_system", "system_copy"])
def test_each_message_of_a_growing_history_is_rendered_once(
    monkeypatch: pytest.MonkeyPatch, fresh_system: bool
) -> None:
    """As a Branch sends it: the history plus the new instruction, then after a tool round
    the history with the round's results; each message is rendered on its first request only.
    With context providers each request sends a copy of the system message (its own render)."""
    counts = rendered_counts(monkeypatch)
    system = System(content="s")
    history: list[Message] = [system]

    def send() -> None:
        sent = list(history)
        if fresh_system:
            sent[0] = system.model_copy(update={"content": f"s + context {len(counts)}"})
        openai_wire_body(request(sent), stream=False, provider="openai")

    for turn in range(60):
        history.append(Instruction(instruction=f"question {turn}"))
        send()
        if turn % 3:
            history.append(AssistantResponse(content=f"answer {turn}"))
            continue
        call = ActionRequest(call_id=f"c{turn}", function="add", arguments={"a": turn})
        result = ActionResponse(request_id=call.id, call_id=call.call_id, function="add", output=1)
        history += [AssistantResponse(content="adding"), call, result]
        send()
        history.append(AssistantResponse(content=f"answer {turn}"))
    requests = 80
    systems = requests if fresh_system else 1  # the system message, or each request's copy
    assert sum(counts) == len(history) - 2 + systems  # nor the last reply, never sent
    assert len(counts) == requests + systems  # one render of the new messages per request


def test_a_system_copy_with_new_context_is_sent() -> None:
    system = System(content="s")
    history: list[Message] = [system, Instruction(instruction="go")]
    same_json(request(history))
    copy = [system.model_copy(update={"content": "s + context"}), *history[1:]]
    same_json(request(copy))
    body = json.loads(openai_wire_body(request(copy), stream=False, provider="openai"))
    assert body["messages"][0] == {"role": "system", "content": "s + context"}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


async def test_a_branch_sends_the_whole_conversation(server: ScriptedServer) -> None:
    for _ in range(3):
        server.reply(TOOL_REPLY, TEXT_REPLY)
    model = iModel("openai", "m", base_url=f"{server.url}/v1", api_key="k", timeout=20, retry=None)
    branch = Branch(system="Be brief.", chat_model=model, tools=[multiply])
    for turn in range(3):
        async with branch.run(f"6 x 7, take {turn}?") as stream:
            async for _ in stream:
                pass
    await model.aclose()
    bodies = [received.json for received in server.requests]
    assert len(bodies) == 6
    # every request carries the whole conversation so far, rendered as a whole render would
    messages = list(branch.msgs)
    final = openai_body(
        ModelRequest(model="m", messages=messages), stream=False, provider="openai"
    )["messages"]
    for body in bodies:
        assert body["messages"] == final[: len(body["messages"])]
    assert len(bodies[-1]["messages"]) == len(final) - 1  # all but the last reply
