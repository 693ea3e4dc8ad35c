"""A model request's messages made from a history: the history as it was, read in place."""

from __future__ import annotations

import random
import sys

import pytest

from lionagi.protocols.messages import (
    AssistantResponse,
    Instruction,
    Message,
    MessageManager,
    RecordedCopy,
    System,
)


def _history(turns: int) -> MessageManager:
    history = MessageManager([System(content="s")])
    for turn in range(turns):
        history.add(Instruction(instruction=f"q{turn}"))
        history.add(AssistantResponse(content=f"a{turn}"))
    return history


def test_a_request_copy_holds_no_reference_to_each_message() -> None:
    history = _history(200)
    before = [sys.getrefcount(message) for message in history]
    messages = history.request_copy()
    after = [sys.getrefcount(message) for message in history]
    assert after == before  # a list copy holds one more reference to every message
    assert len(messages) == len(history) == 401
    assert messages == list(history)


def test_a_request_copy_stays_the_history_as_it_was_while_the_history_grows() -> None:
    history = _history(3)
    was = list(history)
    messages = history.request_copy()
    history.add(Instruction(instruction="later"))
    history.add(AssistantResponse(content="later"))
    assert len(messages) == messages.recorded == len(was)
    assert list(messages) == was
    assert messages[-1] is was[-1]
    assert messages[len(was) - 1 :] == [was[-1]]
    with pytest.raises(IndexError):
        messages[len(was)]
    assert messages.source is history


def test_a_request_copy_with_a_first_message_and_pending_ones_reads_like_that_list() -> None:
    history = _history(4)
    first = System(content="s with context")
    pending = [Instruction(instruction="now"), Instruction(instruction="and now")]
    messages = history.request_copy(first, pending)
    expected: list[Message] = [first, *list(history)[1:], *pending]
    assert messages.recorded == len(history)
    assert len(messages) == len(expected)
    assert list(messages) == expected
    assert list(reversed(messages)) == expected[::-1]
    assert messages == expected
    assert expected == messages
    assert messages == tuple(expected)
    assert messages != expected[:-1]
    rng = random.Random(0)
    size = len(expected)
    for _ in range(300):
        start, stop = rng.randint(-size - 2, size + 2), rng.randint(-size - 2, size + 2)
        step = rng.choice([1, 1, 2, 3, -1, -2])
        assert messages[start:stop:step] == expected[start:stop:step], (start, stop, step)
        index = rng.randint(-size, size - 1)
        assert messages[index] is expected[index]
    for index in (size, -size - 1):
        with pytest.raises(IndexError):
            messages[index]
    assert messages.index(pending[0]) == size - 2
    assert first in messages
    assert history[0] not in messages


def test_a_request_copy_of_an_empty_history_is_its_pending_messages() -> None:
    pending = [Instruction(instruction="hi")]
    messages = MessageManager().request_copy(System(content="ignored"), pending)
    assert list(messages) == pending
    assert messages.recorded == 0
    assert messages[0] is pending[0]
    assert isinstance(messages, RecordedCopy)


def test_a_request_copy_is_read_only_and_unhashable() -> None:
    messages = _history(1).request_copy()
    with pytest.raises(TypeError):
        messages[0] = System(content="x")  # type: ignore[index]
    with pytest.raises(TypeError):
        hash(messages)
