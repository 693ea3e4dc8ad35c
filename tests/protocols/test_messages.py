"""Messages (identity, immutability, round trips) and the append-only MessageManager."""

from __future__ import annotations

import copy
import gc
import json
import pickle
import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from pydantic import ValidationError

from lionagi.errors import HistoryError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    MessageManager,
    System,
    ToolCall,
    Usage,
    message_from_dict,
)


def every_kind() -> list[Message]:
    request = ActionRequest(call_id="call_1", function="add", arguments={"a": 1, "b": [2, 3]})
    return [
        System(content="Be brief."),
        Instruction(
            instruction="Add numbers",
            guidance="Use the tool",
            context={"numbers": [1, 2], "nested": {"ok": True}},
            tool_schemas=({"type": "function", "function": {"name": "add"}},),
            response_format={"type": "object", "properties": {}},
            images=("data:image/png;base64,AAAA",),
            sender="alice",
        ),
        AssistantResponse(
            content="Calling add.",
            model="m-1",
            usage=Usage(input_tokens=10, output_tokens=4, cost_usd=0.5),
            raw={"id": "resp_1", "choices": [{"index": 0}]},
        ),
        request,
        ActionResponse(
            request_id=request.id,
            call_id="call_1",
            function="add",
            output={"sum": 6},
            is_error=False,
        ),
    ]


# -- messages ----------------------------------------------------------------------------


def test_ids_and_timestamps() -> None:
    before = time.time()
    first = System(content="a")
    second = System(content="a")
    after = time.time()
    assert isinstance(first.id, UUID)
    assert first.id != second.id
    assert before <= first.created_at <= second.created_at <= after
    fixed = uuid4()
    assert Instruction(id=fixed, created_at=1.0).id == fixed


def test_roles() -> None:
    roles = [m.role for m in every_kind()]
    assert roles == ["system", "user", "assistant", "assistant", "tool"]
    with pytest.raises(NotImplementedError):
        _ = Message().role


def test_every_message_has_a_kind_and_the_base_declares_it() -> None:
    kinds = [m.kind for m in every_kind()]
    assert kinds == ["system", "instruction", "assistant", "action_request", "action_response"]
    assert [message_from_dict(m.model_dump()).kind for m in every_kind()] == kinds
    with pytest.raises(NotImplementedError):
        _ = Message().kind


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: type(m).__name__)
def test_messages_are_immutable(message: Message) -> None:
    with pytest.raises(ValidationError):
        message.id = uuid4()  # type: ignore[misc]
    with pytest.raises(ValidationError):
        message.created_at = 0.0  # type: ignore[misc]


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="colour"):
        System(content="x", colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ToolCall(id="1", name="f", extra=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: type(m).__name__)
def test_round_trip_through_json(message: Message) -> None:
    data = message.model_dump(mode="json")
    restored = message_from_dict(json.loads(json.dumps(data)))
    assert type(restored) is type(message)
    assert restored == message
    assert restored.model_dump(mode="json") == data


def test_message_from_dict_selects_by_kind_and_rejects_bad_data() -> None:
    restored = message_from_dict({"kind": "system", "content": "x"})
    assert isinstance(restored, System)
    with pytest.raises(ValidationError):
        message_from_dict({"kind": "nope", "content": "x"})
    with pytest.raises(ValidationError):
        message_from_dict({"content": "x"})
    with pytest.raises(ValidationError):
        message_from_dict({"kind": "action_response", "call_id": "c", "function": "f"})


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: type(m).__name__)
def test_a_message_is_only_its_field_slots(message: Message) -> None:
    # No instance dict, no fields-set, no private-attribute dict: one object for the GC.
    assert not hasattr(message, "__dict__")
    assert not hasattr(message, "__pydantic_fields_set__")
    # the id is kept as its number (``id`` makes the UUID when read)
    referents = [r for r in gc.get_referents(message) if r is not type(message)]
    values = [getattr(message, name) for name in type(message).__dataclass_fields__ if name != "id"]
    assert sorted(map(id, referents)) == sorted(map(id, [*values, message._key]))
    assert message._key == message.id.int


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: type(m).__name__)
def test_round_trip_through_the_model_methods_pickle_and_copy(message: Message) -> None:
    kind = type(message)
    assert kind.model_validate(message.model_dump()) == message
    assert kind.model_validate_json(message.model_dump_json()) == message
    assert json.loads(message.model_dump_json()) == message.model_dump(mode="json")
    assert message.model_dump(include={"kind"}) == {"kind": message.model_dump()["kind"]}
    assert "id" not in message.model_dump(exclude={"id"})
    assert pickle.loads(pickle.dumps(message)) == message
    assert copy.deepcopy(message) == message
    assert copy.copy(message) == message
    assert kind.model_json_schema()["properties"]["kind"]["const"] == message.model_dump()["kind"]


def test_equality_is_by_class_and_fields() -> None:
    message = Instruction(instruction="x", context={"a": [1]})
    same = Instruction.model_validate(message.model_dump())
    assert same == message
    assert same is not message
    assert message != message.model_copy(update={"instruction": "y"})
    other: Message = System(id=message.id, created_at=message.created_at, content="x")
    assert other != message
    with pytest.raises(TypeError):
        hash(message)


def test_validation_errors_stay_pydantic_errors_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="created_at"):
        System(content="x", created_at="soon")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="context"):
        Instruction(instruction="x", context={"f": object()})  # type: ignore[dict-item]
    with pytest.raises(ValidationError, match="input_tokens"):
        Usage(input_tokens="many")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="tokens_in"):
        Usage(tokens_in=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="usage"):
        AssistantResponse.model_validate({"content": "x", "usage": {"input_tokens": -0.5}})
    assert Usage(input_tokens="3").input_tokens == 3  # type: ignore[arg-type]  # lax, as before


def test_model_copy_applies_the_update_refuses_unknown_fields_and_shares_no_render_cache() -> None:
    message = Instruction(instruction="x")
    message._render_cache["openai"] = {"role": "user", "content": "x"}
    copied = message.model_copy(update={"guidance": "g"})
    assert (copied.id, copied.instruction, copied.guidance) == (message.id, "x", "g")
    assert copied._render_cache == {}
    assert copy.deepcopy(message)._render_cache == {}
    deep = Instruction(instruction="x", context={"a": [1]}).model_copy(deep=True)
    assert deep.context == {"a": [1]}
    with pytest.raises(TypeError, match="colour"):
        message.model_copy(update={"colour": "red"})


def test_the_render_cache_is_made_on_first_use_and_never_serialized() -> None:
    message = System(content="x")
    fields = len(type(message).__dataclass_fields__)
    assert len(gc.get_referents(message)) == fields + 1  # its fields and its class, no cache
    cache = message._render_cache
    assert len(gc.get_referents(message)) == fields + 2
    assert cache == {}
    assert message._render_cache is cache
    cache["text"] = "x"
    assert "text" not in json.dumps(message.model_dump(mode="json"))
    assert message == System(id=message.id, created_at=message.created_at, content="x")


def test_created_datetime_is_created_at_in_utc() -> None:
    message = System(content="x", created_at=0.0)
    assert message.created_datetime == datetime(1970, 1, 1, tzinfo=UTC)


def test_usage_is_slotted_immutable_hashable_and_serializes_like_a_model() -> None:
    usage = Usage(input_tokens=9, output_tokens=2, cost_usd=0.5)
    assert not hasattr(usage, "__dict__")
    with pytest.raises(ValidationError, match="frozen"):
        usage.input_tokens = 1  # type: ignore[misc]
    assert hash(usage) == hash(Usage(input_tokens=9, output_tokens=2, cost_usd=0.5))
    assert usage.model_dump() == {
        "input_tokens": 9,
        "output_tokens": 2,
        "cached_input_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": 0.5,
    }
    assert Usage.model_validate(usage.model_dump()) == usage
    assert usage.model_copy(update={"cost_usd": 1.0}).cost_usd == 1.0
    reply = AssistantResponse.model_validate({"content": "x", "usage": {"output_tokens": 2}})
    assert reply.usage == Usage(output_tokens=2)


def test_usage_addition() -> None:
    a = Usage(input_tokens=1, output_tokens=2, cached_input_tokens=3, cache_write_tokens=4)
    b = Usage(input_tokens=10, output_tokens=20, cost_usd=0.25)
    total = a + b
    assert total == Usage(
        input_tokens=11,
        output_tokens=22,
        cached_input_tokens=3,
        cache_write_tokens=4,
        cost_usd=0.25,
    )
    assert total.total_tokens == 33
    assert (a + a).cost_usd is None


# -- MessageManager ----------------------------------------------------------------------


def test_manager_keeps_order_and_reads_like_a_sequence() -> None:
    messages = every_kind()
    manager = MessageManager(messages[:2])
    manager.add(messages[2])
    manager.extend(messages[3:])
    assert list(manager) == messages
    assert len(manager) == 5
    assert manager[0] is messages[0]
    assert manager[-1] is messages[-1]
    assert manager[1:3] == messages[1:3]
    assert manager.system is messages[0]
    assert manager.get(messages[3].id) is messages[3]
    assert manager.get(uuid4()) is None
    assert messages[2] in manager
    assert System(content="Be brief.") not in manager
    assert "text" not in manager  # type: ignore[comparison-overlap]


def test_snapshot_is_a_copy() -> None:
    manager = MessageManager([System(content="s")])
    snapshot = manager.snapshot()
    manager.add(Instruction(instruction="later"))
    assert len(snapshot) == 1
    assert len(manager) == 2


def test_system_only_when_first() -> None:
    assert MessageManager().system is None
    assert MessageManager([Instruction(instruction="hi")]).system is None


def test_duplicates_and_non_messages_are_rejected() -> None:
    message = Instruction(instruction="once")
    with pytest.raises(HistoryError, match=str(message.id)):
        MessageManager([message, message])
    manager = MessageManager([message])
    with pytest.raises(HistoryError, match="already"):
        manager.add(message)
    copy_with_same_id = message.model_copy(update={"instruction": "twice"})
    with pytest.raises(HistoryError, match="already"):
        manager.add(copy_with_same_id)
    with pytest.raises(HistoryError, match="dict"):
        manager.add({"kind": "system"})  # type: ignore[arg-type]
    assert list(manager) == [message]


@pytest.mark.parametrize("length", [3, 7, 8, 20])
def test_lookups_and_duplicates_on_short_and_indexed_histories(length: int) -> None:
    # Short histories keep no id index (a lookup scans); longer ones build it: same answers.
    messages = [Instruction(instruction=str(i)) for i in range(length)]
    manager = MessageManager(messages[:-1])
    manager.add(messages[-1])
    assert all(manager.get(m.id) is m and m in manager for m in messages)
    assert manager.get(uuid4()) is None
    assert Instruction(instruction="other") not in manager
    for message in (messages[0], messages[-1]):
        with pytest.raises(HistoryError, match="already"):
            manager.add(message.model_copy(update={"instruction": "again"}))
    with pytest.raises(HistoryError, match="already"):
        manager.extend([Instruction(instruction="new"), messages[length // 2]])
    assert manager.progression == tuple(m.id for m in messages)


def test_callbacks_run_in_order_after_storing() -> None:
    manager = MessageManager()
    seen: list[tuple[str, UUID, int]] = []
    manager.on_added(lambda m: seen.append(("first", m.id, len(manager))))
    manager.on_added(lambda m: seen.append(("second", m.id, len(manager))))
    message = Instruction(instruction="hi")
    assert manager.add(message) is message
    assert seen == [("first", message.id, 1), ("second", message.id, 1)]


def test_initial_messages_do_not_trigger_callbacks() -> None:
    seen: list[Message] = []
    manager = MessageManager([System(content="s")])
    manager.on_added(seen.append)
    assert seen == []


def test_every_callback_runs_and_the_first_error_is_raised() -> None:
    manager = MessageManager()
    calls: list[str] = []

    def fail_a(message: Message) -> None:
        calls.append("a")
        raise RuntimeError("a failed")

    def fail_b(message: Message) -> None:
        calls.append("b")
        raise KeyError("b failed")

    manager.on_added(fail_a)
    manager.on_added(fail_b)
    manager.on_added(lambda m: calls.append("c"))
    message = Instruction(instruction="hi")
    with pytest.raises(RuntimeError, match="a failed"):
        manager.add(message)
    assert calls == ["a", "b", "c"]
    assert list(manager) == [message]


def test_unregister() -> None:
    manager = MessageManager()
    seen: list[str] = []
    remove_first = manager.on_added(lambda m: seen.append("first"))
    manager.on_added(lambda m: seen.append("second"))
    manager.add(Instruction())
    remove_first()
    remove_first()  # a second call is harmless
    manager.add(Instruction())
    assert seen == ["first", "second", "second"]


def test_extend_notifies_each_message() -> None:
    manager = MessageManager()
    seen: list[Any] = []
    manager.on_added(lambda m: seen.append(m.id))
    batch = every_kind()
    manager.extend(batch)
    assert seen == [m.id for m in batch]


@pytest.mark.parametrize("length", [0, 20])
def test_extend_stores_all_or_none_and_tells_each_message_once_stored(length: int) -> None:
    # A batch with a message twice, or one already recorded, stores nothing and tells nobody;
    # a good batch tells each message right after storing it, before the next is stored.
    manager = MessageManager([Instruction(instruction=str(i)) for i in range(length)])
    seen: list[tuple[UUID, int]] = []
    manager.on_added(lambda m: seen.append((m.id, len(manager))))
    a, b = Instruction(instruction="a"), Instruction(instruction="b")
    with pytest.raises(HistoryError, match=str(a.id)):
        manager.extend([a, b, a.model_copy(update={"instruction": "a again"})])
    assert len(manager) == length
    assert seen == []
    manager.extend([a, b])
    assert seen == [(a.id, length + 1), (b.id, length + 2)]
    assert manager.get(b.id) is b
    assert manager.get(str(b.id)) is None  # type: ignore[arg-type]
