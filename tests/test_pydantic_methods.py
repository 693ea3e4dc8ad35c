"""The one base that gives messages, usages and signals their ``BaseModel`` methods: each class
validates and serializes with its own pydantic validator and serializer, fetched once, even when
a parent class was used first or the class's pydantic build was deferred."""

from __future__ import annotations

from uuid import UUID

from pydantic import TypeAdapter
from pydantic_core import SchemaSerializer, SchemaValidator

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
    Usage,
)
from lionagi.session.signal import RunEnd, RunSignal, Signal

B = UUID(int=1)


def test_a_subclass_dumps_its_own_fields_after_its_parent_was_dumped_first() -> None:
    class Release(Signal):
        version: str = ""

    class Hotfix(Release):
        ticket: int = 0

    # the parents are serialized first: their serializers must not serve the subclasses
    assert RunSignal(branch_id=B, created_at=1.0).model_dump()["turn_id"] is None
    assert Release(version="1", created_at=1.0).model_dump() == {
        "branch_id": None,
        "created_at": 1.0,
        "version": "1",
    }
    assert RunEnd(created_at=1.0, input_tokens=3).model_dump()["input_tokens"] == 3
    hotfix = Hotfix.model_validate({"version": "1.1", "ticket": "7", "created_at": 2})
    assert hotfix.model_dump(mode="json") == {
        "branch_id": None,
        "created_at": 2.0,
        "version": "1.1",
        "ticket": 7,
    }
    assert Hotfix.model_validate_json(hotfix.model_dump_json()) == hotfix
    assert Hotfix._serializer is not Release._serializer


def test_messages_use_their_pydantic_dataclass_parts_including_the_deferred_ones() -> None:
    request = ActionRequest(call_id="c1", function="f", arguments={"x": 1})
    assert request.model_dump(mode="json")["arguments"] == {"x": 1}
    for cls in (Usage, System, Instruction, AssistantResponse, ActionRequest, ActionResponse):
        validator, serializer = cls._validator, cls._serializer
        # the class's own, fully built (a deferred class's pydantic build is not a stand-in)
        assert isinstance(validator, SchemaValidator)
        assert isinstance(serializer, SchemaSerializer)
        assert validator is cls.__pydantic_validator__
        assert serializer is cls.__pydantic_serializer__


def test_json_schema_and_copy_are_shared_by_messages_and_signals() -> None:
    assert Instruction.model_json_schema() == TypeAdapter(Instruction).json_schema()
    assert RunEnd.model_json_schema() == TypeAdapter(RunEnd).json_schema()
    end = RunEnd(branch_id=B, created_at=1.0, input_tokens=3)
    copied = end.model_copy(update={"output_tokens": 4})
    assert (type(copied), copied.input_tokens, copied.output_tokens) == (RunEnd, 3, 4)
    message: Message = System(content="be brief", created_at=1.0)
    assert message.model_copy(update={"content": "be long"}).model_dump()["content"] == "be long"
