"""``ModelResponse``: a frozen slotted pydantic dataclass with the model methods code calls."""

from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

from lionagi.protocols.messages import ToolCall, Usage
from lionagi.service.types import FinalChunk, ModelResponse


def test_a_reply_is_slotted_immutable_validated_and_serializes_like_a_model() -> None:
    reply = ModelResponse(  # type: ignore[call-arg] # (the unknown keyword)
        text="hi",
        tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 1})],  # type: ignore[arg-type]
        usage=Usage(input_tokens=3, output_tokens=1),
        model="m",
        raw={"id": "r-1"},
        unknown="ignored, as a BaseModel's default config does",
    )
    assert not hasattr(reply, "__dict__")  # only its field slots: a log record keeps it whole
    assert isinstance(reply.tool_calls, tuple)
    with pytest.raises(ValidationError, match="frozen"):
        reply.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        del reply.text
    with pytest.raises(ValidationError, match="valid string"):
        ModelResponse(text=3)  # type: ignore[arg-type]
    dumped = reply.model_dump(mode="json")
    assert dumped["usage"]["input_tokens"] == 3
    assert "unknown" not in dumped
    assert ModelResponse.model_validate(dumped) == reply
    assert ModelResponse.model_validate_json(reply.model_dump_json()) == reply
    assert reply.model_copy(update={"attempts": 2}).attempts == 2
    assert reply.model_copy(update={"attempts": 2}) != reply
    assert pickle.loads(pickle.dumps(reply)) == reply
    assert hash(ModelResponse(text="a")) == hash(ModelResponse(text="a"))
    assert FinalChunk(response=reply).response is reply  # a field of its type takes it as is
