"""lionagi.testing: FunctionModel and TestModel behave like real models, offline and exactly."""

from __future__ import annotations

import datetime
import doctest
import enum
import json
import types
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import anyio
import pytest
from pydantic import BaseModel, Field

import lionagi.testing._function as function_module
import lionagi.testing._scripted as scripted_module
from lionagi.errors import ConfigurationError, LionError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
    ToolCall,
    Usage,
)
from lionagi.service.errors import ProviderTimeout
from lionagi.service.imodel import iModel
from lionagi.service.types import (
    FinalChunk,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)
from lionagi.testing import FunctionModel, ScriptExhaustedError, TestModel, schema_example

ASK = [Instruction(instruction="hello model")]
# in the normalized form tools reach a function model: wrapped, with a description
TOOL = {
    "type": "function",
    "function": {"name": "add", "description": "", "parameters": {"type": "object"}},
}


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def texts(chunks: list[StreamChunk]) -> list[str]:
    return [c.text for c in chunks if isinstance(c, TextDelta)]


def final(chunks: list[StreamChunk]) -> ModelResponse:
    last = chunks[-1]
    assert isinstance(last, FinalChunk)
    return last.response


# -- FunctionModel --------------------------------------------------------------------------
async def test_function_model_sync_fn_gets_messages_and_options() -> None:
    seen: list[tuple[list[Message], dict[str, Any]]] = []

    def fn(messages: list[Message], **options: Any) -> str:
        seen.append((list(messages), options))
        return "two words"

    model = FunctionModel(fn, temperature=0.1)
    response = await model.invoke(ASK, top_p=0.5)
    assert response.text == "two words"
    assert response.provider == "function"
    assert response.model == "function"
    assert response.finish_reason == "stop"
    assert seen == [(ASK, {"temperature": 0.1, "top_p": 0.5})]
    assert [c.messages for c in model.calls] == [ASK]


async def test_function_model_passes_tools_and_schema_only_when_present() -> None:
    seen: list[dict[str, Any]] = []

    async def fn(messages: list[Message], **options: Any) -> str:
        seen.append(options)
        return "ok"

    class Answer(BaseModel):
        value: int

    model = FunctionModel(fn)
    await model.invoke(ASK)
    await model.invoke(ASK, tools=[TOOL], response_format=Answer)
    assert seen[0] == {}
    assert seen[1]["tools"] == (TOOL,)
    assert seen[1]["response_format"] == Answer.model_json_schema()
    assert set(seen[1]) == {"tools", "response_format"}


async def test_function_model_return_types() -> None:
    call = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})
    other = ToolCall(id="c2", name="sub", arguments={})
    given = ModelResponse(text="as is", usage=Usage(input_tokens=7, output_tokens=9))
    replies: list[Any] = [given, call, [call, other]]

    model = FunctionModel(lambda messages, **_: replies.pop(0))
    assert await model.invoke(ASK) is given
    single = await model.invoke(ASK)
    assert single.tool_calls == (call,)
    assert single.finish_reason == "tool_calls"
    assert single.text == ""
    both = await model.invoke(ASK)
    assert both.tool_calls == (call, other)


async def test_function_model_rejects_bad_reply_type() -> None:
    model = FunctionModel(lambda messages, **_: 42)
    with pytest.raises(ConfigurationError, match="int"):
        await model.invoke(ASK)


def test_function_model_rejects_non_callables() -> None:
    with pytest.raises(ConfigurationError, match="callable"):
        FunctionModel("not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="stream"):
        FunctionModel(lambda m, **o: "x", stream=3)  # type: ignore[arg-type]


async def test_function_model_exceptions_propagate_unchanged() -> None:
    boom = RuntimeError("injected fault")

    async def fn(messages: list[Message], **options: Any) -> str:
        raise boom

    model = FunctionModel(fn)
    with pytest.raises(RuntimeError) as info:
        await model.invoke(ASK)
    assert info.value is boom
    with pytest.raises(RuntimeError) as info:
        await collect(model.stream(ASK))
    assert info.value is boom
    assert len(model.calls) == 2


async def test_usage_counts_words() -> None:
    history: list[Message] = [
        System(content="be brief"),  # 2
        Instruction(instruction="add these", guidance="use tools", context={"a": 1}),  # 6
        AssistantResponse(content="calling add"),  # 2
        ActionRequest(call_id="c", function="add", arguments={"a": 1, "b": 2}),  # 5
        ActionResponse(request_id=uuid.uuid4(), call_id="c", function="add", output=3),  # 1
    ]
    model = FunctionModel(lambda messages, **_: "it is three")
    response = await model.invoke(history)
    assert response.usage == Usage(input_tokens=16, output_tokens=3)
    # Counts are memoized per message and stay the same on the next call.
    assert (await model.invoke(history)).usage == response.usage

    tool = FunctionModel(lambda messages, **_: ToolCall(id="c", name="add", arguments={"a": 1}))
    assert (await tool.invoke(ASK)).usage == Usage(input_tokens=2, output_tokens=3)


async def test_function_model_stream_from_sync_generator() -> None:
    closed: list[bool] = []

    def words(messages: list[Message], **options: Any) -> Iterator[str]:
        try:
            yield "one "
            yield ""
            yield "two"
        finally:
            closed.append(True)

    model = FunctionModel(lambda m, **o: "unused", stream=words)
    chunks = await collect(model.stream(ASK))
    assert texts(chunks) == ["one ", "two"]
    response = final(chunks)
    assert response.text == "one two"
    assert response.usage == Usage(input_tokens=2, output_tokens=2)
    assert closed == [True]
    assert len(model.calls) == 1


async def test_function_model_stream_from_async_generator_sees_options() -> None:
    seen: list[dict[str, Any]] = []

    async def letters(messages: list[Message], **options: Any) -> AsyncIterator[str]:
        seen.append(options)
        for letter in "abc":
            await anyio.lowlevel.checkpoint()
            yield letter

    model = FunctionModel(lambda m, **o: "unused", stream=letters, temperature=0)
    chunks = await collect(model.stream(ASK, tools=[TOOL]))
    assert texts(chunks) == ["a", "b", "c"]
    assert final(chunks).text == "abc"
    assert seen == [{"temperature": 0, "tools": (TOOL,)}]


async def test_function_model_stream_rejects_non_str_chunks() -> None:
    def bad(messages: list[Message], **options: Any) -> Iterator[Any]:
        yield 1

    model = FunctionModel(lambda m, **o: "unused", stream=bad)
    with pytest.raises(ConfigurationError, match="str chunks"):
        await collect(model.stream(ASK))


async def test_function_model_stream_without_stream_fn_replays_invoke() -> None:
    model = FunctionModel(lambda m, **o: "whole reply")
    chunks = await collect(model.stream(ASK))
    assert [type(c) for c in chunks] == [TextDelta, FinalChunk]
    assert texts(chunks) == ["whole reply"]
    assert final(chunks).text == "whole reply"

    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    tools = FunctionModel(lambda m, **o: [call, call.model_copy(update={"id": "c2"})])
    chunks = await collect(tools.stream(ASK))
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas] == [(0, "c1", "add"), (1, "c2", "add")]
    assert json.loads(deltas[0].arguments) == {"a": 1}
    assert final(chunks).tool_calls[0] == call
    assert texts(chunks) == []


async def test_function_model_async_stream_aclose_runs_generator_finally() -> None:
    closed = anyio.Event()

    async def endless(messages: list[Message], **options: Any) -> AsyncIterator[str]:
        try:
            while True:
                yield "tick"
        finally:
            closed.set()

    model = FunctionModel(lambda m, **o: "unused", stream=endless, concurrency_limit=1)
    stream = model.stream(ASK)
    assert await stream.__anext__() == TextDelta(text="tick")
    await stream.aclose()
    assert closed.is_set()
    assert (await model.invoke(ASK)).text == "unused"


async def test_sync_fn_call_is_a_checkpoint() -> None:
    model = FunctionModel(lambda m, **o: "never")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await model.invoke(ASK)
    assert scope.cancelled_caught
    assert model.calls == []  # fn was never reached


async def test_function_model_timeout_is_imodel_timeout() -> None:
    async def hang(messages: list[Message], **options: Any) -> str:
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    model = FunctionModel(hang, name="hanger", model="m1", timeout=0.05)
    with pytest.raises(ProviderTimeout) as info:
        await model.invoke(ASK)
    assert (info.value.provider, info.value.model) == ("hanger", "m1")


async def test_function_model_copy_shares_fn_not_calls() -> None:
    model = FunctionModel(lambda m, **o: "hi", name="fake", model="m", timeout=9, top_k=3)
    await model.invoke(ASK)
    twin = model.copy()
    assert type(twin) is FunctionModel
    assert twin.provider is not model.provider
    assert twin.provider.fn is model.provider.fn
    assert (twin.provider_name, twin.model, twin.timeout) == ("fake", "m", 9)
    assert twin.calls == []
    await twin.invoke(ASK)
    assert len(model.calls) == 1
    assert twin.calls[0].options == {"top_k": 3}
    twin.request_defaults["top_k"] = 4
    assert model.request_defaults == {"top_k": 3}


def test_offline_models_serialize_without_code_and_refuse_from_dict() -> None:
    def secret_function(messages: list[Message], **options: Any) -> str:
        return "x"

    for model, provider in (
        (FunctionModel(secret_function, temperature=0.5), "function"),
        (TestModel(["a"]), "test"),
        (FunctionModel(secret_function, name="echo"), "echo"),
    ):
        data = model.to_dict()
        assert data["provider"] == provider
        assert data["offline"] is True
        assert "secret_function" not in repr(data)
        json.dumps(data)
        for loader in (iModel.from_dict, type(model).from_dict):
            with pytest.raises(ConfigurationError, match="rebuil"):
                loader(data)
    assert FunctionModel(secret_function, temperature=0.5).to_dict()["request_defaults"] == {
        "temperature": 0.5
    }


def test_from_dict_by_name_explains_offline_models() -> None:
    with pytest.raises(ConfigurationError, match=r"lionagi\.testing"):
        iModel.from_dict({"provider": "test", "model": "test"})


# -- TestModel ------------------------------------------------------------------------------
async def test_script_is_followed_in_order_then_exhausts() -> None:
    call = TestModel.scripted_tool_call("add", a=1)
    given = ModelResponse(text="given")
    model = TestModel(["first", call, [call, call], given])
    assert model.remaining == 4
    assert (await model.invoke(ASK)).text == "first"
    assert (await model.invoke(ASK)).tool_calls == (call,)
    assert (await model.invoke(ASK)).tool_calls == (call, call)
    assert await model.invoke(ASK) is given
    assert model.remaining == 0
    with pytest.raises(ScriptExhaustedError, match="4 responses scripted") as info:
        await model.invoke(ASK)
    assert isinstance(info.value, LionError)
    assert len(model.calls) == 5


async def test_exhausted_stream_raises_too() -> None:
    model = TestModel(["only"])
    await collect(model.stream(ASK))
    with pytest.raises(ScriptExhaustedError, match="1 response scripted"):
        await collect(model.stream(ASK))


def test_script_items_are_checked_early() -> None:
    with pytest.raises(ConfigurationError, match=r"responses\[1\]"):
        TestModel(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="list of replies"):
        TestModel("ok")
    with pytest.raises(ConfigurationError, match="chunk_size"):
        TestModel(chunk_size=0)
    with pytest.raises(ConfigurationError, match="default"):
        TestModel(default=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tool_calls"):
        TestModel(tool_calls=["add"])  # type: ignore[list-item]


async def test_unscripted_answers_default() -> None:
    model = TestModel(default="fine thanks")
    assert model.remaining is None
    for _ in range(3):
        response = await model.invoke(ASK)
        assert response.text == "fine thanks"
        assert response.provider == "test"
        assert response.usage == Usage(input_tokens=2, output_tokens=2)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Node(BaseModel):
    name: str
    children: list[Node] = []
    parent: Node | None = None


class Report(BaseModel):
    title: str
    count: int
    ratio: float
    done: bool
    color: Color
    mode: Literal["fast", "slow"]
    note: str | None
    tags: list[str]
    pair: tuple[int, str]
    scores: dict[str, int]
    tree: Node
    when: datetime.datetime
    day: datetime.date
    ident: uuid.UUID
    bounded: int = Field(ge=3, le=10, multiple_of=4)
    narrow: float = Field(gt=1.5, lt=1.7)
    code: str = Field(min_length=3, max_length=5)
    many: list[int] = Field(min_length=2)
    negative: int = Field(lt=0)


async def test_unscripted_answers_schema_valid_json() -> None:
    model = TestModel()
    response = await model.invoke(ASK, response_format=Report)
    report = Report.model_validate_json(response.text)
    assert (report.title, report.count, report.ratio, report.done) == ("x", 0, 0.0, False)
    assert (report.color, report.mode, report.note) == (Color.RED, "fast", "x")
    assert report.tags == ["x"]
    assert report.tree.name == "x"
    # Deterministic: the same schema gives the same text.
    assert (await model.invoke(ASK, response_format=Report)).text == response.text


async def test_schema_dict_with_refs_any_of_and_nullable_types() -> None:
    schema = {
        "title": "Order",
        "type": "object",
        "properties": {
            "item": {"$ref": "#/$defs/Item"},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
            "nullable": {"type": ["null", "boolean"]},
            "either": {"oneOf": [{"type": "string", "format": "email"}, {"type": "integer"}]},
            "fixed": {"const": 7},
            "anything": {},
            "merged": {
                "allOf": [{"$ref": "#/$defs/Item"}, {"properties": {"n": {"type": "integer"}}}]
            },
        },
        "required": ["item"],
        "$defs": {"Item": {"type": "object", "properties": {"sku": {"enum": ["A1", "B2"]}}}},
    }
    text = (await TestModel().invoke(ASK, response_format=schema)).text
    assert json.loads(text) == {
        "item": {"sku": "A1"},
        "maybe": 0,
        "nullable": False,
        "either": "x@example.com",
        "fixed": 7,
        "anything": "x",
        "merged": {"sku": "A1", "n": 0},
    }


def test_schema_example_rejects_unusable_schemas() -> None:
    with pytest.raises(ConfigurationError, match="local"):
        schema_example({"$ref": "https://example.com/schema.json"})
    with pytest.raises(ConfigurationError, match="points nowhere"):
        schema_example({"$ref": "#/$defs/Missing"})
    required_self = {"properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}
    loop = {"$ref": "#/$defs/A", "$defs": {"A": required_self}}
    with pytest.raises(ConfigurationError, match="recursion"):
        schema_example(loop)


async def test_script_wins_over_schema() -> None:
    model = TestModel(['{"value": 1}'])
    assert (await model.invoke(ASK, response_format=Report)).text == '{"value": 1}'


async def test_unscripted_tool_calls_until_a_tool_result_arrives() -> None:
    call = TestModel.scripted_tool_call("add", a=1, b=2)
    model = TestModel(tool_calls=call, default="three")
    assert (await model.invoke(ASK)).text == "three"  # no tools offered
    first = await model.invoke(ASK, tools=[TOOL])
    assert first.tool_calls == (call,)
    result = ActionResponse(request_id=uuid.uuid4(), call_id=call.id, function="add", output=3)
    second = await model.invoke([*ASK, result], tools=[TOOL])
    assert (second.text, second.tool_calls) == ("three", ())


def test_scripted_tool_call_ids_are_deterministic() -> None:
    first = TestModel.scripted_tool_call("add", a=1, b=2)
    again = TestModel.scripted_tool_call("add", b=2, a=1)
    assert first == again
    assert first.id.startswith("call_")
    assert TestModel.scripted_tool_call("add", a=2).id != first.id
    named = TestModel.scripted_tool_call("rename", name="n")
    assert named.arguments == {"name": "n"}


async def test_stream_splits_words_and_characters() -> None:
    text = "  the quick  brown fox\n"
    by_word = await collect(TestModel([text]).stream(ASK))
    assert texts(by_word) == ["  the", " quick", "  brown", " fox", "\n"]
    assert final(by_word).text == text

    by_chars = await collect(TestModel(["abcdefg"], chunk_size=3).stream(ASK))
    assert texts(by_chars) == ["abc", "def", "g"]
    assert final(by_chars).text == "abcdefg"


async def test_stream_of_scripted_tool_calls_and_response() -> None:
    call = TestModel.scripted_tool_call("add", a=1)
    mixed = ModelResponse(text="let me add", tool_calls=(call,))
    chunks = await collect(TestModel([mixed]).stream(ASK))
    assert texts(chunks) == ["let", " me", " add"]
    delta = chunks[3]
    assert isinstance(delta, ToolCallDelta)
    assert (delta.id, delta.name, json.loads(delta.arguments)) == (call.id, "add", {"a": 1})
    assert final(chunks) is mixed


async def test_stream_aclose_midway_releases_the_model() -> None:
    model = TestModel(["a b c d", "after"], concurrency_limit=1)
    stream = model.stream(ASK)
    assert await stream.__anext__() == TextDelta(text="a")
    await stream.aclose()
    assert (await model.invoke(ASK)).text == "after"


async def test_copy_continues_script_independently() -> None:
    model = TestModel(["one", "two", "three"], chunk_size=2, timeout=5)
    await model.invoke(ASK)
    twin = model.copy()
    assert type(twin) is TestModel
    assert twin.calls == []
    assert twin.remaining == 2
    assert (await twin.invoke(ASK)).text == "two"
    assert (await twin.invoke(ASK)).text == "three"
    assert (await model.invoke(ASK)).text == "two"
    assert model.remaining == 1
    assert twin.remaining == 0
    assert texts(await collect(model.copy().stream(ASK))) == ["th", "re", "e"]
    assert len(model.calls) == 2


def test_pytest_does_not_collect_test_model() -> None:
    assert TestModel.__test__ is False


@pytest.mark.parametrize("module", [function_module, scripted_module], ids=lambda m: m.__name__)
def test_docstring_examples_run(module: types.ModuleType) -> None:
    failures, attempted = doctest.testmod(module, raise_on_error=False)
    assert attempted > 0
    assert failures == 0


def test_offline_models_work_on_both_backends_in_turn() -> None:
    model = TestModel(default="same", concurrency_limit=1)

    async def use() -> str:
        chunks = await collect(model.stream(ASK))
        return (await model.invoke(ASK)).text + final(chunks).text

    assert anyio.run(use, backend="asyncio") == "samesame"
    assert anyio.run(use, backend="trio") == "samesame"
