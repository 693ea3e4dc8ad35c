"""chat, chat_and_record, parse, communicate, interpret on offline models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, JsonValue, ValidationError

from lionagi.errors import OperationError, ParseError
from lionagi.operations._extract import extract_json, validate_into
from lionagi.protocols.messages import (
    AssistantResponse,
    Instruction,
    Message,
    Reasoning,
    System,
    Usage,
)
from lionagi.service.types import ModelResponse
from lionagi.session.branch import Branch
from lionagi.session.signal import RunEnd, RunFailed
from lionagi.testing import FunctionModel, TestModel
from tests.helpers import assert_idle, assert_one_terminal_per_start, observed_branch


class Person(BaseModel):
    name: str
    age: int


def replying(text: str) -> FunctionModel:
    return FunctionModel(lambda messages, **options: text)


# -- chat ---------------------------------------------------------------------------------------
async def test_chat_sends_history_plus_instruction_and_records_nothing() -> None:
    model = replying("hello")
    branch, rec, _ = observed_branch(system="be brief", chat_model=model)
    assert await branch.chat("hi", guidance="short", context={"k": 1}) == "hello"
    assert len(branch.msgs) == 1  # only the system message
    [request] = model.calls
    assert isinstance(request.messages[0], System)
    last = request.messages[-1]
    assert isinstance(last, Instruction)
    assert last.instruction == "hi"
    assert last.guidance == "short"
    assert rec.kinds() == ["RunStart", "RunEnd"]


async def test_chat_and_record_records_instruction_and_reply_in_one_turn() -> None:
    branch, rec, _ = observed_branch(chat_model=replying("answer"))
    assert await branch.chat_and_record("question") == "answer"
    kinds = [type(m).__name__ for m in branch.msgs]
    assert kinds == ["Instruction", "AssistantResponse"]
    assert rec.kinds() == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    turn_id = rec.starts()[0].turn_id
    assert {m.turn_id for m in rec.messages()} == {turn_id}


async def test_a_recorded_reply_keeps_the_validated_responses_values_without_revalidating() -> None:
    # Fails when the reply message is validated again: validation copies the raw payload.
    raw: JsonValue = {"id": "r1", "choices": [{"message": {"content": "answer"}}]}
    sent: list[ModelResponse] = []

    def reply(messages: Sequence[Message], **options: Any) -> ModelResponse:
        sent.append(
            ModelResponse(
                text="answer",
                model="m1",
                usage=Usage(input_tokens=3, output_tokens=1),
                raw=raw,
                refusal="no",
                reasoning=(Reasoning(format="anthropic", text="why"),),
            )
        )
        return sent[-1]

    branch = Branch(chat_model=FunctionModel(reply))
    assert await branch.chat_and_record("question") == "answer"
    message = branch.msgs[-1]
    assert type(message) is AssistantResponse
    assert message.raw is sent[0].raw
    validated = AssistantResponse(
        id=message.id,
        created_at=message.created_at,
        content="answer",
        model="m1",
        usage=sent[0].usage,
        raw=raw,
        refusal="no",
        reasoning=sent[0].reasoning,
    )
    assert message == validated
    assert message.model_dump_json() == validated.model_dump_json()
    assert message in branch.msgs
    assert branch.msgs.get(message.id) is message
    with pytest.raises(ValidationError, match="frozen"):
        message.content = "changed"  # type: ignore[misc]


async def test_a_text_question_is_built_without_running_the_instruction_validator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Text and ``None`` are what validation returns unchanged, so the common question's
    Instruction is stored as given; a container still goes through the validator. Fails when
    every Instruction is validated."""
    branch = Branch(user="me", chat_model=replying("answer"))
    validated: list[dict[str, Any]] = []
    real_init = Instruction.__init__

    def counting_init(self: Instruction, **values: Any) -> None:
        validated.append(values)
        real_init(self, **values)

    monkeypatch.setattr(Instruction, "__init__", counting_init)
    assert await branch.chat_and_record("question", guidance="brief", context=3) == "answer"
    assert validated == []
    question = branch.msgs[0]
    assert type(question) is Instruction
    monkeypatch.undo()
    expected = Instruction(
        id=question.id,
        created_at=question.created_at,
        instruction="question",
        guidance="brief",
        context=3,
        sender="me",
    )
    assert question == expected
    assert question.model_dump_json() == expected.model_dump_json()
    with pytest.raises(ValidationError, match="frozen"):
        question.guidance = "changed"  # type: ignore[misc]
    monkeypatch.setattr(Instruction, "__init__", counting_init)
    assert await branch.chat_and_record("again", context={"k": [1]}) == "answer"
    assert len(validated) == 1
    assert branch.msgs[2].context == {"k": [1]}


async def test_run_end_carries_usage_of_the_turn() -> None:
    branch, rec, _ = observed_branch(chat_model=replying("one two three"))
    await branch.chat_and_record("count these words")
    [end] = rec.terminals()
    assert isinstance(end, RunEnd)
    assert end.output_tokens == 3
    assert end.input_tokens > 0
    assert end.num_turns == 1


async def test_imodel_override_is_used_once_and_never_assigned() -> None:
    configured = replying("configured")
    override = replying("override")
    branch, _, _ = observed_branch(chat_model=configured)
    assert await branch.chat("x", imodel=override) == "override"
    assert branch.chat_model is configured
    assert await branch.chat("x") == "configured"


async def test_failing_model_records_only_whole_messages_and_frees_the_branch() -> None:
    def broken(messages: Sequence[Message], **options: Any) -> str:
        raise ConnectionError("provider down")

    branch, rec, _ = observed_branch(chat_model=FunctionModel(broken))
    with pytest.raises(ConnectionError):
        await branch.chat_and_record("q")
    assert list(branch.msgs) == []  # no reply: the instruction is not committed either
    assert rec.messages() == []
    assert isinstance(rec.terminals()[0], RunFailed)
    assert_idle(branch)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"instruction": 42}, "instruction=42: expected text"),
        ({"instruction": None}, "nothing to ask"),
        ({"instruction": "x", "guidance": 3}, "guidance=3: expected text"),
        ({"instruction": "x", "images": "http://x/y.png"}, "a list of text"),
        ({"instruction": "x", "response_format": int}, "response_format"),
        ({"instruction": "x", "context": object()}, "expected JSON data"),
    ],
)
async def test_chat_rejects_bad_parameters_before_any_side_effect(
    kwargs: dict[str, Any], match: str
) -> None:
    model = replying("x")
    branch, rec, _ = observed_branch(chat_model=model)
    with pytest.raises(OperationError, match=match):
        await branch.chat(**kwargs)
    assert rec.signals == []
    assert model.calls == []


# -- context providers (ADR P1/D3) ----------------------------------------------------------------
async def test_queued_turns_each_see_only_their_own_provider_blocks() -> None:
    gate = anyio.Event()
    first_inside = anyio.Event()
    seen_systems: list[str] = []

    async def reply(messages: Sequence[Message], **options: Any) -> str:
        seen_systems.append(messages[0].content)  # type: ignore[attr-defined]
        first_inside.set()
        await gate.wait()
        return "ok"

    branch = Branch(system="base", chat_model=FunctionModel(reply))
    counter = 0

    async def numbered(branch: Any, instruction: Instruction) -> str:
        nonlocal counter
        counter += 1
        return f"block-{counter}-for-{instruction.instruction}"

    branch.providers.register(numbered, name="numbered")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: branch.chat("A"))
        await first_inside.wait()
        tg.start_soon(lambda: branch.chat("B"))
        while branch._turn_lock.tasks_waiting == 0:
            await anyio.lowlevel.checkpoint()
        gate.set()
    assert seen_systems == ["base\n\nblock-1-for-A", "base\n\nblock-2-for-B"]
    assert list(branch.msgs) == [
        System(content="base", id=branch.msgs[0].id, created_at=branch.msgs[0].created_at)
    ]  # blocks are never recorded
    report = branch.last_context_report
    assert report is not None
    assert report.blocks == ("block-2-for-B",)


async def test_providers_without_system_message_are_skipped() -> None:
    branch = Branch(chat_model=replying("ok"))
    called = []

    async def provider(branch: Any, instruction: Instruction) -> str:
        called.append(1)
        return "x"

    branch.providers.register(provider, name="p")
    await branch.chat("hi")
    assert called == []
    report = branch.last_context_report
    assert report is not None
    assert report.skipped == ("p",)


async def test_turn_without_providers_publishes_none() -> None:
    branch = Branch(system="s", chat_model=replying("ok"))

    async def provider(branch: Any, instruction: Instruction) -> str:
        return "x"

    branch.providers.register(provider, name="p")
    await branch.chat("hi")
    assert branch.last_context_report is not None
    branch.providers.unregister("p")
    await branch.chat("hi")
    assert branch.last_context_report is None


# -- parse --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Ada", "age": 36}',
        'Sure! ```json\n{"name": "Ada", "age": 36}\n``` Anything else?',
        "Here you go: {'name': 'Ada', 'age': 36,} -- done",
        '{"Name": "Ada", "AGE": "36"}',
        '[{"name": "Ada", "age": 36}]',
        'Draft: ```json\n{"name": "Ada"}\n``` Final: ```json\n{"name": "Ada", "age": 36}\n```',
        '{"name": "Ada", "age": 36} (fields as in {schema})',
    ],
)
def test_local_extraction_is_tolerant(text: str) -> None:
    assert validate_into(text, Person) == Person(name="Ada", age=36)


def test_extract_json_returns_none_without_json() -> None:
    assert extract_json("no structured data here") is None


async def test_parse_locally_makes_no_model_call() -> None:
    model = replying("unused")
    branch, rec, _ = observed_branch(chat_model=model)
    person = await branch.parse('{"name": "Ada", "age": 36}', response_format=Person)
    assert person == Person(name="Ada", age=36)
    assert model.calls == []
    assert rec.kinds() == ["RunStart", "RunEnd"]


async def test_parse_falls_back_to_the_parse_model() -> None:
    chat_model = replying("unused")
    parse_model = TestModel(['{"name": "Bo", "age": 7}'])
    branch, _, _ = observed_branch(chat_model=chat_model, parse_model=parse_model)
    assert await branch.parse("Bo is seven", response_format=Person) == Person(name="Bo", age=7)
    assert chat_model.calls == []
    assert len(parse_model.calls) == 1


async def test_parse_retries_then_raises_a_typed_error() -> None:
    parse_model = TestModel(["still not json", '{"name": "x"}', "nope"])
    branch, rec, _ = observed_branch(parse_model=parse_model)
    with pytest.raises(ParseError, match="Person") as caught:
        await branch.parse("garbage", response_format=Person, max_retries=3)
    assert caught.value.schema == "Person"
    assert len(parse_model.calls) == 3
    assert isinstance(rec.terminals()[0], RunFailed)


@pytest.mark.parametrize(("mode", "expected"), [("return_value", "garbage"), ("return_none", None)])
async def test_parse_handle_validation_modes(mode: Any, expected: Any) -> None:
    branch, _, _ = observed_branch(parse_model=TestModel(["no", "no"]))
    result = await branch.parse(
        "garbage", response_format=Person, max_retries=2, handle_validation=mode
    )
    assert result == expected


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"response_format": dict}, "pydantic model class"),
        ({"response_format": Person, "max_retries": -1}, "max_retries"),
        ({"response_format": Person, "handle_validation": "ignore"}, "handle_validation"),
    ],
)
async def test_parse_rejects_bad_parameters(kwargs: dict[str, Any], match: str) -> None:
    branch, rec, _ = observed_branch()
    with pytest.raises(OperationError, match=match):
        await branch.parse("x", **kwargs)
    assert rec.signals == []


# -- communicate --------------------------------------------------------------------------------
async def test_communicate_records_and_returns_text() -> None:
    branch, rec, _ = observed_branch(chat_model=replying("fine"))
    assert await branch.communicate("how are you") == "fine"
    assert [type(m).__name__ for m in branch.msgs] == ["Instruction", "AssistantResponse"]
    assert rec.lifecycle()[0][0] == "RunStart"
    assert len(rec.starts()) == 1


async def test_communicate_parses_with_nested_parse_in_the_same_turn() -> None:
    chat_model = replying("The person is Cy, 40 years old.")
    parse_model = TestModel(['{"name": "Cy", "age": 40}'])
    branch, rec, _ = observed_branch(chat_model=chat_model)
    result = await branch.communicate("who?", response_format=Person, parse_model=parse_model)
    assert result == Person(name="Cy", age=40)
    assert len(rec.starts()) == 1
    assert_one_terminal_per_start(rec)
    assert branch.parse_model is chat_model  # the override was not assigned
    instruction = branch.msgs[0]
    assert isinstance(instruction, Instruction)
    assert instruction.response_format == Person.model_json_schema()


async def test_communicate_with_test_model_answers_from_the_schema() -> None:
    branch, _, _ = observed_branch(chat_model=TestModel())
    result = await branch.communicate("make one", response_format=Person)
    assert isinstance(result, Person)
    assert isinstance(branch.msgs[-1], AssistantResponse)


# -- interpret ----------------------------------------------------------------------------------
async def test_interpret_rewrites_without_recording() -> None:
    model = FunctionModel(lambda messages, **options: "  Write a haiku about rain.  ")
    branch, rec, _ = observed_branch(chat_model=model)
    assert await branch.interpret("poem rain", domain="poetry", style="terse") == (
        "Write a haiku about rain."
    )
    assert len(branch.msgs) == 0
    ask = model.calls[0].messages[-1]
    assert isinstance(ask, Instruction)
    assert ask.guidance == "domain: poetry; style: terse"
    assert rec.kinds() == ["RunStart", "RunEnd"]


async def test_interpret_rejects_empty_text() -> None:
    branch, _, _ = observed_branch()
    with pytest.raises(OperationError):
        await branch.interpret("   ")


# -- concurrency ----------------------------------------------------------------------------------
async def test_concurrent_operations_leave_contiguous_turn_blocks() -> None:
    async def reply(messages: Sequence[Message], **options: Any) -> str:
        await anyio.lowlevel.checkpoint()
        return f"reply-to-{messages[-1].instruction}"  # type: ignore[attr-defined]

    branch, rec, _ = observed_branch(chat_model=FunctionModel(reply))
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(branch.chat_and_record, f"q{i}")
    history = list(branch.msgs)
    assert len(history) == 40
    for question, answer in zip(history[::2], history[1::2], strict=True):
        assert isinstance(question, Instruction)
        assert isinstance(answer, AssistantResponse)
        assert answer.content == f"reply-to-{question.instruction}"
    assert len(rec.starts()) == 20
    assert_one_terminal_per_start(rec)
