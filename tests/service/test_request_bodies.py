"""Request bodies checked against the official SDKs' own request types.

The ``openai`` and ``anthropic`` packages describe what their APIs accept as TypedDicts; every
TypedDict they reach is rebuilt to forbid unknown keys, so a misspelt or invented field fails
here rather than at a server. Where a union also accepts the SDK's pydantic response models
(Anthropic takes its response blocks in place of block parameters), those alternatives are left
out: their own config allows unknown keys, so a block with an invented key would pass as one.
"""

from __future__ import annotations

import types
import typing
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    cast,
    get_args,
    get_origin,
)

import pytest
from anthropic.types import message_create_params as anthropic_params
from anthropic.types.beta import message_create_params as beta_params
from openai.types.chat import completion_create_params as openai_params
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict, is_typeddict

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
from lionagi.service.providers._anthropic_render import continued_body
from lionagi.service.types import StructuredOutput
from tests.service.replay_data import REPLAY, load

_STRICT = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def strict_type(tp: Any, memo: dict[int, Any]) -> Any:
    """``tp`` with every TypedDict it reaches rebuilt to forbid unknown keys, and the pydantic
    model alternatives of its unions left out (the SDK's types are not changed)."""
    if id(tp) in memo:
        return memo[id(tp)]
    if is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        fields = {name: _field(tp, name, hint, memo) for name, hint in hints.items()}
        strict = cast(Any, TypedDict)(tp.__name__, fields)
        strict.__pydantic_config__ = _STRICT
        memo[id(tp)] = strict
        return strict
    args, origin = get_args(tp), get_origin(tp)
    if not args or origin is Literal:
        return tp
    if origin is Annotated:
        return Annotated[strict_type(args[0], memo), *tp.__metadata__]
    if origin is Union or origin is types.UnionType:
        kept = tuple(strict_type(a, memo) for a in args if not _models_only(a))
        return Union[kept]  # noqa: UP007
    rebuilt = tuple(strict_type(a, memo) for a in args)
    if isinstance(tp, types.GenericAlias):
        return types.GenericAlias(origin, rebuilt)
    return tp.copy_with(rebuilt)


def _field(owner: Any, name: str, hint: Any, memo: dict[int, Any]) -> Any:
    """One key of a rebuilt TypedDict, marked required or not as the SDK's type has it."""
    wrapper = get_origin(hint)
    if wrapper is Required or wrapper is NotRequired:
        hint = get_args(hint)[0]
    else:
        wrapper = Required if name in owner.__required_keys__ else NotRequired
    return wrapper[strict_type(hint, memo)]


def _models_only(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic model or a union (annotated or not) of nothing else."""
    if isinstance(tp, type):
        return issubclass(tp, BaseModel)
    if get_origin(tp) is Annotated:
        return _models_only(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType):
        return all(_models_only(a) for a in get_args(tp))
    return False


def strict_adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(strict_type(tp, {}))


OPENAI = strict_adapter(openai_params.CompletionCreateParamsNonStreaming)
OPENAI_STREAM = strict_adapter(openai_params.CompletionCreateParamsStreaming)
ANTHROPIC = strict_adapter(anthropic_params.MessageCreateParamsNonStreaming)
ANTHROPIC_STREAM = strict_adapter(anthropic_params.MessageCreateParamsStreaming)
BETA = strict_adapter(beta_params.MessageCreateParamsNonStreaming)
BETA_STREAM = strict_adapter(beta_params.MessageCreateParamsStreaming)


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


def test_an_unknown_key_inside_an_anthropic_content_block_is_rejected() -> None:
    def body(block: dict[str, Any]) -> dict[str, Any]:
        return {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [block]}]}

    bogus = {"type": "text", "text": "x", "bogus": 1}
    # the SDK's own union takes the block as its lenient pydantic TextBlock...
    validate(TypeAdapter(anthropic_params.MessageCreateParamsNonStreaming), body(bogus))
    # ...the strict types do not, in either kind of message or nested in a tool result
    with pytest.raises(ValidationError, match="bogus"):
        validate(ANTHROPIC, body(bogus))
    with pytest.raises(ValidationError, match="bogus"):
        validate(
            ANTHROPIC_STREAM,
            {
                **body(bogus),
                "messages": [{"role": "assistant", "content": [bogus]}],
                "stream": True,
            },
        )
    result = {"type": "tool_result", "tool_use_id": "t", "content": [bogus]}
    with pytest.raises(ValidationError, match="bogus"):
        validate(ANTHROPIC, body(result))
    validate(ANTHROPIC, body({"type": "text", "text": "x"}))  # the same block without it


@pytest.mark.parametrize(
    "case", ["anthropic_server_tools_pause_turn", "anthropic_server_tools_pause_turn_stream"]
)
def test_a_pause_turn_continuation_is_what_the_sdk_accepts(case: str) -> None:
    recorded = load(REPLAY / f"{case}.json")
    continued = recorded["expect"]["continued"][0]
    model = iModel("anthropic", "claude-sonnet-4-5", api_key="sk-x")
    stream = recorded["stream"]
    first = model.provider.body(  # type: ignore[attr-defined]
        model.request(REQUESTS["plain"]["messages"]), stream=stream
    )

    body = continued_body(first, continued["content"], continued.get("container"))

    # the MCP connector's blocks are in the beta Messages API only
    beta = any(block["type"].startswith("mcp_") for block in continued["content"])
    if beta:
        validate(BETA_STREAM if stream else BETA, body)
    else:
        validate(ANTHROPIC_STREAM if stream else ANTHROPIC, body)
