"""Request bodies assembled from a conversation's encoded prefix for every network format
(OpenAI chat, Anthropic Messages, OpenAI Responses): the same JSON as encoding the whole body
while the history grows; a Branch's own history is trusted without comparing its prefix; the
prefix is read and extended under one lock."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic import JsonValue

from lionagi import Branch
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    MessageManager,
    RecordedCopy,
    System,
)
from lionagi.service._text import clean_json
from lionagi.service.imodel import iModel
from lionagi.service.providers import _encoded
from lionagi.service.providers._openai_render import openai_body, openai_wire_body
from lionagi.service.types import ModelRequest
from tests.service.histories import SCHEMA, grow, request

Provider = Any


def _provider(name: str) -> Provider:
    return iModel(name, "m", api_key="k").provider


class _OpenAI:
    """The OpenAI chat functions, shaped like a provider's body / wire_body."""

    def body(self, req: ModelRequest, *, stream: bool) -> dict[str, Any]:
        return openai_body(req, stream=stream, provider="openai")

    def wire_body(self, req: ModelRequest, *, stream: bool) -> bytes:
        return openai_wire_body(req, stream=stream, provider="openai")


PROVIDERS: dict[str, Callable[[], Provider]] = {
    "openai": _OpenAI,
    "anthropic": lambda: _provider("anthropic"),
    "openai_responses": lambda: _provider("openai_responses"),
}


def same_json(provider: Provider, req: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
    """The assembled bytes decode to exactly the body encoded whole (as httpx sends it)."""
    wire = json.loads(provider.wire_body(req, stream=stream))
    assert wire == clean_json(provider.body(req, stream=stream))
    result: dict[str, Any] = wire
    return result


def grow_more(rng: random.Random, history: list[Message], turn: int) -> None:
    """:func:`grow`, plus what merges or carries state in the other formats: a second
    instruction in a row (a turn that failed before its reply), an empty reply, a system
    message mid-history, and a Responses reply replayed with the calls it made."""
    roll = rng.random()
    if roll < 0.1:
        history.append(Instruction(instruction=f"unanswered {turn}"))
    elif roll < 0.15:
        history.append(System(content=f"mid-history note {turn}"))
    elif roll < 0.2:
        history.append(Instruction(instruction=f"empty reply follows {turn}"))
        history.append(AssistantResponse(content=""))
    elif roll < 0.3:
        history.append(Instruction(instruction=f"replayed {turn}"))
        call_id = f"r{turn}"
        raw: JsonValue = {
            "object": "response",
            "output": [
                {"type": "reasoning", "id": f"rs{turn}", "summary": []},
                {"type": "function_call", "call_id": call_id, "name": "add", "arguments": "{}"},
            ],
        }
        history.append(AssistantResponse(content="", raw=raw))
        call = ActionRequest(call_id=call_id, function="add", arguments={})
        history.append(call)
        history.append(
            ActionResponse(request_id=call.id, call_id=call_id, function="add", output=3)
        )
    grow(rng, history, turn)


@pytest.mark.parametrize("name", list(PROVIDERS))
@pytest.mark.parametrize("seed", range(6))
def test_an_assembled_body_is_the_whole_encoding(name: str, seed: int) -> None:
    provider = PROVIDERS[name]()
    rng = random.Random(seed)
    first: list[list[Message]] = [
        [System(content="Be brief.")],
        [],
        [AssistantResponse(content="Earlier.")],
    ]
    history: list[Message] = first[seed % 3]
    for turn in range(40):
        grow_more(rng, history, turn)
        schema = SCHEMA if rng.random() < 0.2 else None
        stream = rng.random() < 0.5
        same_json(provider, request(list(history), schema=schema), stream=stream)
        if rng.random() < 0.2:  # the same request again: the prefix is the whole of it
            same_json(provider, request(tuple(history), schema=schema))
        if rng.random() < 0.2 and isinstance(history[0], System):  # a copy with context
            copy = [history[0].model_copy(update={"content": f"with context {turn}"})]
            same_json(provider, request([*copy, *history[1:]]))


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_a_replaced_or_edited_message_rebuilds_the_prefix(name: str) -> None:
    provider = PROVIDERS[name]()
    history: list[Message] = [System(content="s")]
    for turn in range(8):
        grow_more(random.Random(turn), history, turn)
    same_json(provider, request(history))
    index = next(i for i, m in enumerate(history) if isinstance(m, AssistantResponse))
    edited = list(history)
    edited[index] = history[index].model_copy(update={"content": "edited"})
    assert b"edited" in provider.wire_body(request(edited), stream=False)
    same_json(provider, request(edited))
    replaced = list(history)
    replaced[1] = Instruction(instruction="another question")
    same_json(provider, request(replaced))
    same_json(provider, request(history[:3]))  # a history cut back
    same_json(provider, request(history))


def test_anthropic_keeps_merging_messages_of_one_role_across_requests() -> None:
    provider = _provider("anthropic")
    history: list[Message] = [System(content="s"), Instruction(instruction="one")]
    same_json(provider, request(history))
    history.append(Instruction(instruction="two"))  # no reply in between: one user message
    history.append(AssistantResponse(content="a"))
    history.append(Instruction(instruction="three"))
    same_json(provider, request(history))
    history.append(Instruction(instruction="four"))  # merges with "three" after the prefix
    body = same_json(provider, request(history))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    # another conversation sharing the first messages, whose next message has the role the
    # prefix ended with: the cached prefix does not end there for it, so it is rebuilt
    other = [*history[:3], Instruction(instruction="joins")]
    body = same_json(provider, request(other))
    assert [m["role"] for m in body["messages"]] == ["user"]


def _growing_branch_requests(
    provider: Provider, history: MessageManager, turns: int
) -> list[bytes]:
    bodies = []
    for turn in range(turns):
        history.add(Instruction(instruction=f"question {turn}"))
        req = request(history.request_copy())
        same_json(provider, req)
        bodies.append(provider.wire_body(req, stream=False))
        history.add(AssistantResponse(content=f"answer {turn}"))
    return bodies


class _CountingList(list[Message]):
    """A prefix's message list that records how many of its messages each check reads."""

    read: list[int] = []

    def __getitem__(self, index: Any) -> Any:
        got = list.__getitem__(self, index)
        if isinstance(index, slice):
            _CountingList.read.append(len(got))
        return got


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_a_copy_of_a_history_is_not_compared_with_its_prefix(name: str) -> None:
    provider = PROVIDERS[name]()
    history = MessageManager([System(content="s")])
    _growing_branch_requests(provider, history, 3)
    owner = history[1]  # the first message after the leading system message owns the prefix
    cache = owner._render_cache
    (prefix,) = [v for k, v in cache.items() if k.endswith("encoded-prefix")]
    prefix.rest = _CountingList(prefix.rest)
    _CountingList.read = []
    _growing_branch_requests(provider, history, 30)  # each request a copy of the history
    assert _CountingList.read
    assert max(_CountingList.read) <= 1  # at most the request's own message, never the history
    _CountingList.read = []
    covered = len(prefix.rest)
    same_json(provider, request(list(history)))  # a plain list is compared whole
    assert _CountingList.read == [covered]


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_two_histories_sharing_their_first_messages_each_get_their_own_body(name: str) -> None:
    provider = PROVIDERS[name]()
    original = MessageManager([System(content="s")])
    _growing_branch_requests(provider, original, 3)
    clone = MessageManager(original.snapshot())  # shares every message, and so the prefix
    for turn in range(4):
        for history, label in ((original, "original"), (clone, "clone")):
            history.add(Instruction(instruction=f"{label} {turn}"))
            body = json.dumps(same_json(provider, request(history.request_copy())))
            assert label in body
            assert ("clone" if label == "original" else "original") not in body
            history.add(AssistantResponse(content=f"{label} answer {turn}"))


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_the_prefix_is_read_extended_and_copied_under_the_lock(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = PROVIDERS[name]()
    held: list[bool] = []
    encode = _encoded.dumps

    def checking(value: Any) -> bytes:
        held.append(_encoded._LOCK.locked())
        return encode(value)

    monkeypatch.setattr(_encoded, "dumps", checking)
    history = MessageManager([System(content="s")])
    for turn in range(3):
        history.add(Instruction(instruction=f"q{turn}"))
        provider.wire_body(request(history.request_copy()), stream=False)
        history.add(AssistantResponse(content=f"a{turn}"))
    assert held
    assert all(held)


def test_threads_sending_one_conversation_each_get_a_whole_body() -> None:
    provider = _OpenAI()
    history: list[Message] = [System(content="s")]
    for turn in range(30):
        grow(random.Random(turn), history, turn)
    expected = clean_json(provider.body(request(history), stream=False))
    start = threading.Barrier(4)
    failures: list[str] = []

    def send(offset: int) -> None:
        start.wait()
        for length in range(2 + offset, len(history) + 1, 3):
            req = request(history[:length])
            got = json.loads(provider.wire_body(req, stream=False))
            if got != clean_json(provider.body(req, stream=False)):
                failures.append(f"thread {offset}, {length} messages")

    threads = [threading.Thread(target=send, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert json.loads(provider.wire_body(request(history), stream=False)) == expected


async def test_a_branch_request_is_a_copy_of_its_history() -> None:
    seen: list[Sequence[Message]] = []

    def reply(messages: Sequence[Message], **options: Any) -> str:
        seen.append(messages)
        return "ok"

    from lionagi.testing import FunctionModel

    branch = Branch(system="s", chat_model=FunctionModel(reply))
    await branch.chat_and_record("one")
    await branch.chat_and_record("two")
    for messages in seen:
        assert isinstance(messages, RecordedCopy)
        assert messages.source is branch.msgs
        assert list(messages)[: messages.recorded] == list(branch.msgs)[: messages.recorded]


def test_anthropic_prefix_ends_only_where_the_role_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A conversation in which every other turn fails before its reply (two user messages in
    a row): the prefix never ends after a message the next one may merge into, so it is never
    rebuilt and each request renders only the few messages after it."""
    from lionagi.service.providers import _anthropic_render

    counts: list[int] = []
    wire = _anthropic_render._anthropic_wire

    def counting(messages: Sequence[Message]) -> Any:
        counts.append(len(messages))
        return wire(messages)

    monkeypatch.setattr(_anthropic_render, "_anthropic_wire", counting)
    provider = _provider("anthropic")
    history = MessageManager([System(content="s")])
    for turn in range(60):
        history.add(Instruction(instruction=f"question {turn}"))
        provider.wire_body(request(history.request_copy()), stream=False)
        if turn % 2:
            history.add(AssistantResponse(content=f"answer {turn}"))
    # a few messages per request (the open end), never the whole history again
    assert len(counts) <= 2 * 60
    assert sum(counts) <= 5 * 60, counts
    assert max(counts) <= 5, counts
    same_json(provider, request(history.request_copy()))
