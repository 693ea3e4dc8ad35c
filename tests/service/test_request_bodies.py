"""Request bodies checked against the official SDKs' own request types.

The ``openai`` and ``anthropic`` packages describe what their APIs accept as TypedDicts; every
TypedDict they reach is made to forbid unknown keys, so a misspelt or invented field fails here
rather than at a server. (Where the Anthropic SDK also accepts its pydantic response models in
place of a parameter, those alternatives keep their own lenient config.)
"""

from __future__ import annotations

import typing
from typing import Any, get_args

import pytest
from anthropic.types import message_create_params as anthropic_params
from openai.types.chat import completion_create_params as openai_params
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from typing_extensions import is_typeddict

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    Reasoning,
    System,
)
from lionagi.service.imodel import iModel
from lionagi.service.types import StructuredOutput

_STRICT = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def _forbid_extra(tp: Any, seen: set[int]) -> None:
    if id(tp) in seen:
        return
    seen.add(id(tp))
    if is_typeddict(tp):
        tp.__pydantic_config__ = _STRICT
        for hint in typing.get_type_hints(tp, include_extras=True).values():
            _forbid_extra(hint, seen)
        return
    for arg in get_args(tp):
        _forbid_extra(arg, seen)


def strict_adapter(tp: Any) -> TypeAdapter[Any]:
    _forbid_extra(tp, set())
    return TypeAdapter(tp)


OPENAI = strict_adapter(openai_params.CompletionCreateParamsNonStreaming)
OPENAI_STREAM = strict_adapter(openai_params.CompletionCreateParamsStreaming)
ANTHROPIC = strict_adapter(anthropic_params.MessageCreateParamsNonStreaming)
ANTHROPIC_STREAM = strict_adapter(anthropic_params.MessageCreateParamsStreaming)


def validate(adapter: TypeAdapter[Any], body: dict[str, Any]) -> None:
    """Validate ``body``, reading every lazily validated ``Iterable`` field too."""
    _materialize(adapter.validate_python(body))


def _materialize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [_materialize(v) for v in value]
    return value


class Answer(BaseModel):
    city: str
    celsius: float


def weather(city: str) -> str:
    return city


TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def tool_round() -> list[Message]:
    first = ActionRequest(call_id="c1", function="weather", arguments={"city": "Oslo"})
    alone = ActionRequest(call_id="c2", function="weather", arguments={"city": "Rome"})
    unanswered = ActionRequest(call_id="c3", function="weather", arguments={"city": "Lima"})
    return [
        System(content="Be brief."),
        Instruction(instruction="Weather?", images=("https://example.com/a.png",)),
        AssistantResponse(
            content="Checking.",
            reasoning=(
                Reasoning(
                    format="anthropic",
                    text="Look it up.",
                    block={"type": "thinking", "thinking": "Look it up.", "signature": "sig"},
                ),
            ),
        ),
        first,
        ActionResponse(request_id=first.id, call_id="c1", function="weather", output="sunny"),
        alone,
        ActionResponse(request_id=alone.id, call_id="c2", function="weather", output={"t": 3}),
        Instruction(instruction="And Lima?"),
        unanswered,
        Instruction(instruction="Summarize.", response_format=Answer.model_json_schema()),
    ]


REQUESTS: dict[str, dict[str, Any]] = {
    "plain": {"messages": [System(content="s"), Instruction(instruction="hi")]},
    "tool round with tools": {"messages": tool_round(), "tools": [TOOL]},
    "structured output": {"messages": tool_round(), "response_format": Answer},
    "options": {
        "messages": [Instruction(instruction="hi", guidance="short", context={"k": 1})],
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 50,
        "stop": ["END"],
    },
}


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "prompt"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", list(REQUESTS))
def test_openai_bodies_are_what_the_sdk_accepts(
    name: str, stream: bool, mode: StructuredOutput
) -> None:
    model = iModel("openai", "gpt-4o-mini", api_key="sk-x", structured_output=mode)
    params = dict(REQUESTS[name])
    request = model.request(params.pop("messages"), **params)

    body = model.provider.body(request, stream=stream)  # type: ignore[attr-defined]

    validate(OPENAI_STREAM if stream else OPENAI, body)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", list(REQUESTS))
def test_anthropic_bodies_are_what_the_sdk_accepts(name: str, stream: bool) -> None:
    model = iModel("anthropic", "claude-sonnet-4-5", api_key="sk-x")
    params = dict(REQUESTS[name])
    # this SDK's Messages API lists no sampling parameters; they pass through unchanged
    params.pop("temperature", None)
    params.pop("top_p", None)
    request = model.request(params.pop("messages"), **params)

    body = model.provider.body(request, stream=stream)  # type: ignore[attr-defined]

    validate(ANTHROPIC_STREAM if stream else ANTHROPIC, body)
    if name == "tool round with tools":
        assistant = body["messages"][1]
        assert assistant["content"][0]["type"] == "thinking"


def test_the_strict_types_reject_unknown_keys() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x", "bogus": 1}]}
    with pytest.raises(ValidationError):
        validate(OPENAI, body)
    with pytest.raises(ValidationError):
        validate(OPENAI, {"model": "m", "messages": [], "bogus": 1})
    with pytest.raises(ValidationError):
        validate(ANTHROPIC, {"model": "m", "max_tokens": 1, "messages": [], "bogus": 1})
    # the old shape of a tool-call message without text was accepted by the SDK, but not by
    # llama.cpp's server; the body now always carries a string
    model = iModel("openai", "m", api_key="sk-x")
    call = ActionRequest(call_id="c9", function="weather", arguments={})
    body = model.provider.body(  # type: ignore[attr-defined]
        model.request([Instruction(instruction="x"), call]), stream=False
    )
    assert body["messages"][1]["content"] == ""
