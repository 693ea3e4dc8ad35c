"""The Branch aggregate: construction, accessors, clone, to_dict/from_dict, secrets."""

from __future__ import annotations

import json
from typing import Any, cast
from uuid import UUID, uuid4

import anyio
import pytest

from lionagi.errors import ConfigurationError, DuplicateToolError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    MessageManager,
    System,
    Usage,
)
from lionagi.protocols.tools import Tool, ToolRegistry
from lionagi.service.imodel import iModel
from lionagi.session.branch import Branch
from lionagi.session.session import Session
from lionagi.testing import FunctionModel, TestModel

SECRET = "sk-secret-123"


@pytest.fixture(autouse=True)
def no_env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def shout(text: str) -> str:
    """Upper-case text."""
    return text.upper()


def conversation() -> list[Message]:
    request = ActionRequest(call_id="c1", function="add", arguments={"a": 1, "b": 2})
    return [
        Instruction(instruction="What is 1 + 2?", context={"hint": [1, 2]}, sender="u"),
        AssistantResponse(content="", model="gpt-4o-mini", usage=Usage(input_tokens=5)),
        request,
        ActionResponse(request_id=request.id, call_id="c1", function="add", output=3),
        AssistantResponse(content="3", raw={"id": "r2"}),
    ]


def secret_model() -> iModel:
    return iModel("openai", "gpt-4o-mini", api_key=SECRET)


# -- construction ------------------------------------------------------------------------


def test_defaults() -> None:
    branch = Branch()
    assert isinstance(branch.id, UUID)
    assert branch.id.version == 4
    assert branch.id != Branch().id
    assert branch.name is None
    assert branch.user is None
    assert branch.system is None
    assert len(branch.msgs) == 0
    assert isinstance(branch.msgs, MessageManager)
    assert branch.messages is branch.msgs
    assert isinstance(branch.tools, ToolRegistry)
    assert len(branch.tools) == 0
    assert branch.chat_model is None
    assert branch.parse_model is None


def test_identity_arguments() -> None:
    fixed = uuid4()
    branch = Branch(id=fixed, name="research", user="alice")
    assert (branch.id, branch.name, branch.user) == (fixed, "research", "alice")
    with pytest.raises(ConfigurationError, match="UUID"):
        Branch(id="not-a-uuid")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="name"):
        Branch(name=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="user"):
        Branch(user=b"bob")  # type: ignore[arg-type]


def test_system_then_messages() -> None:
    history = conversation()
    branch = Branch(system="Be brief.", messages=history)
    assert isinstance(branch.system, System)
    assert branch.system.content == "Be brief."
    assert list(branch.msgs) == [branch.system, *history]

    system = System(content="Given")
    assert Branch(system=system).system is system
    from_messages = Branch(messages=[system, *history])
    assert from_messages.system is system
    assert len(from_messages.msgs) == 6


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"system": "x", "messages": [System(content="y")]}, "system= was given too"),
        ({"messages": [Instruction(), System(content="late")]}, "messages[1]"),
        ({"messages": [Instruction(), {"kind": "system"}]}, "messages[1] is a dict"),
        ({"system": 42}, "system must be"),
    ],
    ids=["two-systems", "late-system", "not-a-message", "bad-system"],
)
def test_invalid_history(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Branch(**kwargs)
    assert fragment in str(info.value)


def test_duplicate_message_is_a_configuration_error() -> None:
    message = Instruction(instruction="once")
    with pytest.raises(ConfigurationError, match=str(message.id)):
        Branch(messages=[message, message])


def test_added_messages_reach_the_signal_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    import lionagi.session.branch as branch_module

    seen: list[tuple[Branch, Message]] = []
    monkeypatch.setattr(
        branch_module, "schedule_message_signal", lambda b, message: seen.append((b, message))
    )
    branch = Branch(system="s", messages=[Instruction()])
    branch.msgs.add(Instruction(instruction="unobserved"))
    assert seen == []  # initial history is not "added"; outside a Session nobody is told
    session = Session()
    session.include_branches(branch)
    message = Instruction(instruction="new")
    branch.msgs.add(message)
    assert seen == [(branch, message)]
    session.remove_branch(branch)
    branch.msgs.add(Instruction(instruction="removed"))
    assert seen == [(branch, message)]


def test_a_dropped_branch_is_freed_without_the_cycle_collector() -> None:
    import gc
    import weakref

    gc.disable()
    try:
        branch = Branch(system="s", messages=[Instruction(instruction="x")])
        ref = weakref.ref(branch)
        del branch
        assert ref() is None
    finally:
        gc.enable()


# -- models ------------------------------------------------------------------------------


def test_models_from_strings_and_objects() -> None:
    branch = Branch(chat_model="openai/gpt-4o-mini")
    assert isinstance(branch.chat_model, iModel)
    assert (branch.chat_model.provider_name, branch.chat_model.model) == (
        "openai",
        "gpt-4o-mini",
    )
    assert branch.parse_model is branch.chat_model

    parser = iModel("openai", "gpt-4o")
    branch.parse_model = parser
    assert branch.parse_model is parser
    branch.chat_model = "openai/gpt-4.1"
    chat = branch.chat_model
    assert chat is not None
    assert chat.model == "gpt-4.1"
    assert branch.parse_model is parser
    branch.parse_model = None
    assert branch.parse_model is branch.chat_model
    branch.chat_model = None
    assert branch.chat_model is None
    assert branch.parse_model is None


def test_bad_models_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="chat_model must be"):
        Branch(chat_model=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="parse_model must be"):
        Branch(parse_model=object())  # type: ignore[arg-type]
    branch = Branch()
    with pytest.raises(ConfigurationError):
        branch.chat_model = ["openai/gpt-4o"]  # type: ignore[assignment]
    with pytest.raises(ConfigurationError):
        Branch(chat_model="")
    # a bare model name is an openai model
    model = Branch(chat_model="gpt-4o").chat_model
    assert model is not None
    assert model.provider_name == "openai"


# -- tools -------------------------------------------------------------------------------


def test_tools_in_every_form() -> None:
    assert Branch(tools=add).tools.names == ("add",)
    assert Branch(tools=Tool(add, name="plus")).tools.names == ("plus",)
    branch = Branch(tools=[add, Tool(shout)])
    assert branch.tools.names == ("add", "shout")
    assert branch.tools.get("shout").is_async

    registered = branch.register_tools(Tool(add, name="sum"))
    assert [t.name for t in registered] == ["sum"]
    with pytest.raises(DuplicateToolError):
        branch.register_tools([add])
    replacement = Tool(shout, name="add")
    branch.register_tools(replacement, update=True)
    assert branch.tools.get("add") is replacement


async def test_registered_tool_runs() -> None:
    branch = Branch(tools=[add, shout])
    assert await branch.tools.get("add").call({"a": 2, "b": 3}) == 5
    assert await branch.tools.get("shout").call({"text": "hi"}) == "HI"


# -- turn fields -------------------------------------------------------------------------


def test_turn_fields_start_empty() -> None:
    branch = Branch()
    assert branch._active_turn_context is None
    assert branch._last_context_report is None
    assert branch._providers is None
    assert branch._observer is None
    assert branch._session is None
    assert not branch._turn_lock.locked()
    assert not branch._turn_lock.contended


async def test_the_turn_lock_makes_a_waiting_room_only_while_a_turn_waits() -> None:
    seen: list[tuple[bool, bool]] = []
    gate = anyio.Event()

    async def reply(messages: Any, **options: Any) -> str:
        lock = branch._turn_lock
        seen.append((lock.locked(), lock.contended))
        if len(seen) == 2:
            await gate.wait()
        return "ok"

    branch = Branch(chat_model=FunctionModel(reply))
    await branch.chat_and_record("alone")
    assert seen == [(True, False)]
    async with anyio.create_task_group() as group:
        group.start_soon(branch.chat_and_record, "first")
        while len(seen) < 2:
            await anyio.lowlevel.checkpoint()
        group.start_soon(branch.chat_and_record, "second")
        while branch._turn_lock.tasks_waiting == 0:
            await anyio.lowlevel.checkpoint()
        assert branch._turn_lock.contended
        gate.set()
    assert seen[2] == (True, True)  # handed over; the room goes when that turn ends
    assert not branch._turn_lock.locked()
    assert not branch._turn_lock.contended


def test_turn_lock_follows_the_branch_across_backends() -> None:
    branch = Branch(chat_model=FunctionModel(lambda messages, **options: "ok"))

    async def use() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(2):  # two turns at once: the second waits
                group.start_soon(branch.chat_and_record, "q")
        assert not branch._turn_lock.contended

    anyio.run(use, backend="asyncio")
    anyio.run(use, backend="trio")
    anyio.run(use, backend="asyncio")
    assert len(branch.msgs) == 12


# -- clone -------------------------------------------------------------------------------


def test_clone_is_independent() -> None:
    chat = iModel("openai", "gpt-4o-mini", temperature=0.1)
    original = Branch(
        system="sys",
        messages=conversation(),
        chat_model=chat,
        tools=[add],
        name="n",
        user="u",
    )
    original._active_turn_context = cast(Any, object())  # any non-None: a turn in progress
    clone = original.clone()

    assert clone.id != original.id
    assert (clone.name, clone.user) == ("n", "u")
    assert clone.system is original.system
    assert list(clone.msgs) == list(original.msgs)
    assert clone.msgs is not original.msgs

    clone.msgs.add(Instruction(instruction="only in the clone"))
    assert len(clone.msgs) == len(original.msgs) + 1

    assert clone.tools is not original.tools
    assert clone.tools.get("add") is original.tools.get("add")
    clone.register_tools(shout)
    assert "shout" not in original.tools

    assert clone.chat_model is not None
    assert clone.chat_model is not chat
    assert clone.chat_model.to_dict() == chat.to_dict()
    assert clone.parse_model is clone.chat_model

    assert clone._active_turn_context is None
    assert clone._turn_lock is not original._turn_lock


def test_clone_copies_a_separate_parse_model() -> None:
    parser = iModel("openai", "gpt-4o")
    original = Branch(chat_model="openai/gpt-4o-mini", parse_model=parser)
    clone = original.clone()
    assert clone.parse_model is not parser
    assert clone.parse_model is not clone.chat_model
    assert clone.parse_model is not None
    assert clone.parse_model.to_dict() == parser.to_dict()


# -- serialization -----------------------------------------------------------------------


def test_to_dict_is_json_safe() -> None:
    branch = Branch(
        system="sys",
        messages=conversation(),
        chat_model="openai/gpt-4o-mini",
        tools=[add, shout],
        name="n",
        user="u",
    )
    data = json.loads(json.dumps(branch.to_dict()))
    assert data["id"] == str(branch.id)
    assert (data["name"], data["user"]) == ("n", "u")
    assert [m["kind"] for m in data["messages"]] == [
        "system",
        "instruction",
        "assistant",
        "action_request",
        "action_response",
        "assistant",
    ]
    assert data["chat_model"]["model"] == "gpt-4o-mini"
    assert data["parse_model"] is None
    assert data["tools"] == ["add", "shout"]


def test_round_trip() -> None:
    original = Branch(
        system="sys",
        messages=conversation(),
        chat_model=iModel("openai", "gpt-4o-mini", temperature=0.2),
        parse_model="openai/gpt-4o",
        tools=[add, shout],
        name="n",
        user="u",
    )
    data = json.loads(json.dumps(original.to_dict()))
    restored = Branch.from_dict(data, tools=[add, shout])

    assert restored.id == original.id
    assert (restored.name, restored.user) == ("n", "u")
    assert list(restored.msgs) == list(original.msgs)
    assert [type(m) for m in restored.msgs] == [type(m) for m in original.msgs]
    assert restored.system == original.system
    assert restored.tools.names == ("add", "shout")
    assert restored.to_dict() == original.to_dict()
    assert restored.chat_model is not None
    assert restored.chat_model.request_defaults == {"temperature": 0.2}


def test_from_dict_uses_the_given_models_instead_of_the_stored_ones() -> None:
    data = Branch(chat_model=TestModel(["stored"]), parse_model=TestModel(["parse"])).to_dict()
    with pytest.raises(ConfigurationError, match="offline model"):
        Branch.from_dict(data)  # a testing model's script is code: it is not in the dict
    chat, parse = TestModel(["given"]), TestModel(["given parse"])
    restored = Branch.from_dict(data, chat_model=chat, parse_model=parse)
    assert restored.chat_model is chat
    assert restored.parse_model is parse
    with pytest.raises(TypeError, match="unexpected keyword argument 'chat' "):
        Branch.from_dict(data, chat=chat)  # type: ignore[call-arg]


def test_from_dict_without_tools_skips_them() -> None:
    data = Branch(tools=[add]).to_dict()
    restored = Branch.from_dict(data)
    assert len(restored.tools) == 0


def test_from_dict_names_missing_tools() -> None:
    data = Branch(tools=[add, shout]).to_dict()
    with pytest.raises(ConfigurationError, match="'shout'") as info:
        Branch.from_dict(data, tools=[add])
    assert "'add'" not in str(info.value)
    extra = Branch.from_dict(data, tools=[add, shout, Tool(add, name="more")])
    assert extra.tools.names == ("add", "shout", "more")


def corrupt(**changes: Any) -> dict[str, Any]:
    data = Branch(system="s", messages=conversation()).to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({k: v for k, v in corrupt().items() if k != "id"}, "'id'"),
        (corrupt(id="zzz"), "'id'"),
        (corrupt(messages="hello"), "'messages'"),
        (corrupt(messages=[{"kind": "shout", "content": "x"}]), "'messages.0'"),
        (corrupt(messages=[{"kind": "system"}]), "'messages.0.system.content'"),
        (corrupt(tools=[1]), "'tools.0'"),
        (corrupt(colour="red"), "'colour'"),
        (corrupt(chat_model={"model": "x"}), "'chat_model'"),
        (corrupt(chat_model={"provider": "nowhere", "model": "x"}), "'chat_model'"),
        (corrupt(parse_model=5), "'parse_model'"),
    ],
    ids=[
        "missing-id",
        "bad-id",
        "messages-not-list",
        "unknown-kind",
        "missing-content",
        "tool-name",
        "unknown-key",
        "model-missing-provider",
        "model-unknown-provider",
        "model-not-mapping",
    ],
)
def test_corrupted_data_names_the_key(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Branch.from_dict(data)
    assert fragment in str(info.value)


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(ConfigurationError, match="mapping"):
        Branch.from_dict([("id", "x")])  # type: ignore[arg-type]


def test_duplicate_messages_in_data() -> None:
    data = corrupt()
    data["messages"].append(data["messages"][1])
    with pytest.raises(ConfigurationError, match="twice"):
        Branch.from_dict(data)


# -- secrets and repr --------------------------------------------------------------------


def test_secrets_never_serialized() -> None:
    branch = Branch(
        chat_model=secret_model(),
        parse_model=secret_model(),
        messages=conversation(),
        name="secretive",
    )
    assert branch.chat_model is not None
    assert branch.chat_model.provider.api_key is not None
    assert branch.chat_model.provider.api_key.get_secret_value() == SECRET
    for candidate in (branch, branch.clone()):
        assert SECRET not in json.dumps(candidate.to_dict())
        assert SECRET not in repr(candidate)
        assert SECRET not in repr(candidate.chat_model)
    clone = branch.clone()
    assert clone.chat_model is not None
    assert clone.chat_model.provider.api_key is not None
    assert clone.chat_model.provider.api_key.get_secret_value() == SECRET


def test_repr() -> None:
    branch = Branch(system="s", messages=[Instruction()], name="main")
    assert repr(branch) == f"Branch(id={branch.id}, name='main', messages=2)"
