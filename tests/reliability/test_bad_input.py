"""Bad input for every public operation parameter, models, URLs and serialized data.

Each must raise a clear, typed error (a ``LionError``) before any side effect: no signal, no
recorded message, no model call, and the Branch left idle.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from lionagi.errors import (
    ConfigurationError,
    LionError,
    OperationError,
    ToolError,
    UnknownParameterError,
)
from lionagi.protocols.messages import Instruction
from lionagi.service.errors import UnknownProviderError
from lionagi.service.imodel import iModel
from lionagi.session.branch import Branch
from lionagi.testing import FunctionModel
from tests.helpers import observed_branch
from tests.reliability.harness import branch_violations
from tests.reliability.scenarios import Person, add

pytestmark = pytest.mark.anyio


class _Opaque:
    pass


class Unschemable(BaseModel):
    """A model class pydantic cannot describe as JSON schema."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    value: _Opaque


class Clashing(BaseModel):
    """Defines a field operate adds to its result."""

    reason: str


Call = Callable[[Branch], Any]


def case(name: str, call: Call, error: type[Exception] = LionError, *marks: Any) -> Any:
    return pytest.param(call, error, id=name, marks=marks)


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


BAD_CALLS = [
    # chat / chat_and_record
    case("chat instruction int", lambda b: b.chat(42), OperationError),
    case("chat instruction bytes", lambda b: b.chat(b"hi"), OperationError),
    case("chat nothing to ask", lambda b: b.chat(), OperationError),
    case("chat guidance int", lambda b: b.chat("x", guidance=3), OperationError),
    case("chat context not JSON", lambda b: b.chat("x", context={"k": object()}), OperationError),
    case("chat images str", lambda b: b.chat("x", images="http://x/y.png"), OperationError),
    case("chat images ints", lambda b: b.chat("x", images=[1, 2]), OperationError),
    case("chat response_format int", lambda b: b.chat("x", response_format=int), OperationError),
    case("chat response_format str", lambda b: b.chat("x", response_format="json"), OperationError),
    case(
        "chat response_format instance",
        lambda b: b.chat("x", response_format=Person(name="a", age=1)),
        OperationError,
    ),
    case(
        "chat response_format unschemable",
        lambda b: b.chat("x", response_format=Unschemable),
        LionError,
    ),
    case(
        "chat Instruction plus guidance",
        lambda b: b.chat(Instruction(instruction="x"), guidance="g"),
        OperationError,
    ),
    case(
        "chat imodel str",
        lambda b: b.chat("x", imodel="openai/gpt-4o"),
        OperationError,
    ),
    case(
        "chat imodel int",
        lambda b: b.chat("x", imodel=42),
        OperationError,
    ),
    case(
        "chat option tools=",
        lambda b: b.chat("x", tools=[{"type": "function"}]),
        UnknownParameterError,
    ),
    case(
        "chat option messages=",
        lambda b: b.chat("x", messages=[]),
        UnknownParameterError,
    ),
    case("chat_and_record instruction list", lambda b: b.chat_and_record(["x"]), OperationError),
    case(
        "chat_and_record imodel str",
        lambda b: b.chat_and_record("x", imodel="m"),
        OperationError,
    ),
    # parse
    case("parse text None", lambda b: b.parse(None, response_format=Person), OperationError),
    case("parse text int", lambda b: b.parse(42, response_format=Person), OperationError),
    case(
        "parse response_format dict",
        lambda b: b.parse("x", response_format={"type": "object"}),
        OperationError,
    ),
    case(
        "parse response_format None", lambda b: b.parse("x", response_format=None), OperationError
    ),
    case(
        "parse max_retries -1",
        lambda b: b.parse("x", response_format=Person, max_retries=-1),
        OperationError,
    ),
    case(
        "parse max_retries bool",
        lambda b: b.parse("x", response_format=Person, max_retries=True),
        OperationError,
    ),
    case(
        "parse max_retries str",
        lambda b: b.parse("x", response_format=Person, max_retries="3"),
        OperationError,
    ),
    case(
        "parse handle_validation",
        lambda b: b.parse("x", response_format=Person, handle_validation="ignore"),
        OperationError,
    ),
    case(
        "parse parse_model str",
        lambda b: b.parse("x", response_format=Person, parse_model="openai/gpt-4o"),
        OperationError,
    ),
    # communicate
    case(
        "communicate response_format dict",
        lambda b: b.communicate("x", response_format={"type": "object"}),
        OperationError,
    ),
    case(
        "communicate response_format int",
        lambda b: b.communicate("x", response_format=int),
        OperationError,
    ),
    case(
        "communicate num_parse_retries -1",
        lambda b: b.communicate("x", response_format=Person, num_parse_retries=-1),
        OperationError,
    ),
    case(
        "communicate handle_validation",
        lambda b: b.communicate("x", response_format=Person, handle_validation="skip"),
        OperationError,
    ),
    case("communicate instruction int", lambda b: b.communicate(3.5), OperationError),
    case("communicate images str", lambda b: b.communicate("x", images="img.png"), OperationError),
    case(
        "communicate chat_model str",
        lambda b: b.communicate("x", chat_model="m"),
        OperationError,
    ),
    case(
        "communicate parse_model int",
        lambda b: b.communicate("x", response_format=Person, parse_model=1),
        OperationError,
    ),
    case(
        "communicate option tools=",
        lambda b: b.communicate("x", tools=[]),
        UnknownParameterError,
    ),
    # interpret
    case("interpret empty text", lambda b: b.interpret("   "), OperationError),
    case("interpret text int", lambda b: b.interpret(42), OperationError),
    case(
        "interpret domain int",
        lambda b: b.interpret("x", domain=3),
        OperationError,
    ),
    case(
        "interpret style list",
        lambda b: b.interpret("x", style=["terse"]),
        OperationError,
    ),
    case(
        "interpret interpret_model str",
        lambda b: b.interpret("x", interpret_model="m"),
        OperationError,
    ),
    # operate
    case(
        "operate response_format int",
        lambda b: b.operate(instruction="x", response_format=int),
        OperationError,
    ),
    case(
        "operate response_format clashing field",
        lambda b: b.operate(instruction="x", response_format=Clashing),
        OperationError,
    ),
    case(
        "operate tools unknown name",
        lambda b: b.operate(instruction="x", tools=["nope"]),
        ToolError,
    ),
    case("operate tools int", lambda b: b.operate(instruction="x", tools=42), OperationError),
    case(
        "operate tools callable",
        lambda b: b.operate(instruction="x", tools=[print]),
        OperationError,
    ),
    case(
        "operate actions str", lambda b: b.operate(instruction="x", actions="yes"), OperationError
    ),
    case(
        "operate invoke_actions int",
        lambda b: b.operate(instruction="x", invoke_actions=1),
        OperationError,
    ),
    case("operate reason str", lambda b: b.operate(instruction="x", reason="y"), OperationError),
    case(
        "operate action_strategy",
        lambda b: b.operate(instruction="x", action_strategy="all"),
        OperationError,
    ),
    case(
        "operate handle_validation",
        lambda b: b.operate(instruction="x", handle_validation=0),
        OperationError,
    ),
    case(
        "operate max_parse_retries -1",
        lambda b: b.operate(instruction="x", max_parse_retries=-1),
        OperationError,
    ),
    case(
        "operate images str", lambda b: b.operate(instruction="x", images="a.png"), OperationError
    ),
    case("operate instruction int", lambda b: b.operate(instruction=7), OperationError),
    case(
        "operate chat_model str",
        lambda b: b.operate(instruction="x", chat_model="m"),
        OperationError,
    ),
    case(
        "operate parse_model int",
        lambda b: b.operate(instruction="x", parse_model=1),
        OperationError,
    ),
    case(
        "operate option messages=",
        lambda b: b.operate(instruction="x", messages=[]),
        UnknownParameterError,
    ),
    # act
    case("act int", lambda b: b.act(42), OperationError),
    case("act dict without function", lambda b: b.act({"arguments": {}}), OperationError),
    case("act dict unknown key", lambda b: b.act({"function": "add", "bogus": 1}), OperationError),
    case(
        "act arguments not JSON",
        lambda b: b.act({"function": "add", "arguments": "{nope"}),
        OperationError,
    ),
    case(
        "act arguments list", lambda b: b.act({"function": "add", "arguments": [1]}), OperationError
    ),
    case("act empty call_id", lambda b: b.act({"function": "add", "call_id": ""}), OperationError),
    case(
        "act one bad item of two",
        lambda b: b.act([{"function": "add", "arguments": {"a": 1, "b": 2}}, 3]),
        OperationError,
    ),
    case("act strategy", lambda b: b.act({"function": "add"}, strategy="parallel"), OperationError),
    case(
        "act suppress_errors str",
        lambda b: b.act({"function": "add"}, suppress_errors="no"),
        OperationError,
    ),
    case("act record None", lambda b: b.act({"function": "add"}, record=None), OperationError),
    # ReAct / ReActStream
    case("ReAct instruction int", lambda b: b.ReAct(42), OperationError),
    case("ReAct max_extensions -1", lambda b: b.ReAct("x", max_extensions=-1), OperationError),
    case("ReAct max_extensions str", lambda b: b.ReAct("x", max_extensions="2"), OperationError),
    case(
        "ReAct extension_allowed str", lambda b: b.ReAct("x", extension_allowed="y"), OperationError
    ),
    case("ReAct response_format int", lambda b: b.ReAct("x", response_format=int), OperationError),
    case("ReAct chat_model str", lambda b: b.ReAct("x", chat_model="m"), OperationError),
    case("ReAct parse_model int", lambda b: b.ReAct("x", parse_model=1), OperationError),
    case("ReAct return_analysis int", lambda b: b.ReAct("x", return_analysis=1), OperationError),
    case("ReAct tools unknown", lambda b: b.ReAct("x", tools=["nope"]), ToolError),
    case(
        "ReActStream max_extensions -1",
        lambda b: _drain(b.ReActStream("x", max_extensions=-1)),
        OperationError,
    ),
    case(
        "ReActStream chat_model str",
        lambda b: _drain(b.ReActStream("x", chat_model="m")),
        OperationError,
    ),
    # run
    case("run instruction int", lambda b: _drain(b.run(42)), OperationError),
    case("run chat_model str", lambda b: _drain(b.run("x", chat_model="m")), OperationError),
    case(
        "run max_tool_rounds -1", lambda b: _drain(b.run("x", max_tool_rounds=-1)), OperationError
    ),
    case("run session_id empty", lambda b: _drain(b.run("x", session_id="")), OperationError),
    case("run session_id int", lambda b: _drain(b.run("x", session_id=5)), OperationError),
    case("run option tools=", lambda b: _drain(b.run("x", tools=[])), UnknownParameterError),
    case(
        "run option response_format=",
        lambda b: _drain(b.run("x", response_format=Person)),
        UnknownParameterError,
    ),
    case("run images str", lambda b: _drain(b.run("x", images="a.png")), OperationError),
]


@pytest.mark.parametrize(("call", "error"), BAD_CALLS)
async def test_bad_operation_input_fails_before_any_side_effect(
    call: Call, error: type[Exception]
) -> None:
    model = FunctionModel(lambda messages, **options: "ok")
    branch, recorder, _ = observed_branch(chat_model=model, tools=[add])
    with pytest.raises(error) as caught:
        await call(branch)
    assert isinstance(caught.value, LionError)
    assert str(caught.value)
    assert recorder.signals == []
    assert list(branch.msgs) == []
    assert model.calls == []
    assert branch_violations(branch) == []


# -- models, providers and URLs -------------------------------------------------------------------
BAD_MODELS = [
    pytest.param(lambda: iModel("no-such-provider", "m"), UnknownProviderError, id="unknown"),
    pytest.param(
        lambda: iModel(model="no-such-provider/m"), UnknownProviderError, id="unknown in model"
    ),
    pytest.param(
        lambda: Branch(chat_model="no-such-provider/m"),
        UnknownProviderError,
        id="unknown via Branch",
    ),
    pytest.param(lambda: iModel(), ConfigurationError, id="no provider"),
    pytest.param(lambda: iModel("openai"), ConfigurationError, id="no model"),
    pytest.param(lambda: iModel(42, "m"), ConfigurationError, id="provider int"),
    pytest.param(
        lambda: iModel("openai", "m", base_url="not a url"), ConfigurationError, id="base_url words"
    ),
    pytest.param(
        lambda: iModel("openai", "m", base_url="ftp://host/v1"),
        ConfigurationError,
        id="base_url ftp",
    ),
    pytest.param(
        lambda: iModel("openai", "m", base_url="http://"), ConfigurationError, id="base_url no host"
    ),
    pytest.param(
        lambda: iModel("openai", "m", base_url="://x"), ConfigurationError, id="base_url no scheme"
    ),
    pytest.param(
        lambda: iModel("openai", "m", base_url="http://[::1"),
        ConfigurationError,
        id="base_url broken ipv6",
    ),
    pytest.param(lambda: iModel("openai", "m", timeout=0), ConfigurationError, id="timeout 0"),
    pytest.param(
        lambda: iModel("openai", "m", timeout=float("nan")), ConfigurationError, id="timeout nan"
    ),
    pytest.param(lambda: iModel("openai", "m", timeout="30"), ConfigurationError, id="timeout str"),
    pytest.param(
        lambda: iModel("openai", "m", concurrency_limit=0), ConfigurationError, id="concurrency 0"
    ),
    pytest.param(
        lambda: iModel("openai", "m", concurrency_limit=True),
        ConfigurationError,
        id="concurrency bool",
    ),
    pytest.param(
        lambda: iModel("claude_code", "sonnet", max_turns=0),
        ConfigurationError,
        id="cli max_turns 0",
    ),
    pytest.param(
        lambda: iModel("claude_code", "sonnet", executable=[]),
        ConfigurationError,
        id="cli executable empty",
    ),
    pytest.param(
        lambda: iModel("claude_code", "sonnet", env={"A": 1}),
        ConfigurationError,
        id="cli env values",
    ),
    pytest.param(lambda: Branch(chat_model=42), ConfigurationError, id="Branch chat_model int"),
    pytest.param(lambda: Branch(system=42), ConfigurationError, id="Branch system int"),
    pytest.param(lambda: Branch(name=42), ConfigurationError, id="Branch name int"),
    pytest.param(lambda: Branch(id="not-a-uuid"), ConfigurationError, id="Branch id str"),
    pytest.param(lambda: Branch(messages=[42]), ConfigurationError, id="Branch messages int"),
    pytest.param(lambda: Branch(tools=[lambda x: x]), ToolError, id="Branch unnamed lambda"),
    pytest.param(lambda: Branch(tools=[add, add]), ToolError, id="Branch duplicate tool"),
    pytest.param(lambda: FunctionModel(42), ConfigurationError, id="FunctionModel not callable"),
]


@pytest.mark.parametrize(("build", "error"), BAD_MODELS)
def test_bad_model_or_branch_configuration_is_a_typed_error(
    build: Callable[[], Any], error: type[Exception]
) -> None:
    with pytest.raises(error) as caught:
        build()
    assert isinstance(caught.value, LionError)
    assert str(caught.value)


# -- from_dict of corrupted data ------------------------------------------------------------------
def _valid_data() -> dict[str, Any]:
    branch = Branch(
        system="sys",
        chat_model=iModel("openai", "gpt-test", base_url="http://127.0.0.1:9/v1", api_key="k"),
        tools=[add],
        name="n",
    )
    branch.msgs.add(Instruction(instruction="q"))
    data: dict[str, Any] = json.loads(json.dumps(branch.to_dict()))
    return data


def _corrupt(path: list[Any], value: Any) -> dict[str, Any]:
    data = _valid_data()
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


_DELETE = object()

CORRUPTED = [
    pytest.param(["id"], "not-a-uuid", id="id not uuid"),
    pytest.param(["id"], _DELETE, id="id missing"),
    pytest.param(["name"], 42, id="name int"),
    pytest.param(["messages"], "nope", id="messages str"),
    pytest.param(["messages", 0], 42, id="message int"),
    pytest.param(["messages", 0, "kind"], "alien", id="message kind unknown"),
    pytest.param(["messages", 0, "kind"], _DELETE, id="message kind missing"),
    pytest.param(["messages", 1, "instruction"], ["x"], id="instruction list"),
    pytest.param(["messages", 1, "id"], "zzz", id="message id bad"),
    pytest.param(["messages", 1, "extra"], 1, id="message extra key"),
    pytest.param(["messages", 1, "id"], None, id="message id None"),
    pytest.param(["chat_model"], "openai/gpt", id="chat_model str"),
    # (an unknown name is fine here: with the saved base_url it is an OpenAI-compatible server)
    pytest.param(["chat_model", "provider"], 42, id="chat_model provider"),
    pytest.param(["chat_model", "model"], _DELETE, id="chat_model model missing"),
    pytest.param(["chat_model", "timeout"], -5, id="chat_model timeout"),
    pytest.param(["chat_model", "concurrency_limit"], "many", id="chat_model concurrency"),
    pytest.param(["chat_model", "provider_settings", "base_url"], "nope", id="chat_model base_url"),
    pytest.param(
        ["chat_model", "provider_settings", "bogus"],
        1,
        id="chat_model unknown setting",
    ),
    pytest.param(["tools"], "add", id="tools str"),
    pytest.param(["unexpected"], 1, id="extra key"),
]


@pytest.mark.parametrize(("path", "value"), CORRUPTED)
def test_from_dict_of_corrupted_data_is_a_configuration_error(path: list[Any], value: Any) -> None:
    data = _corrupt(path, value)
    with pytest.raises(ConfigurationError) as caught:
        Branch.from_dict(data)
    assert "from_dict" in str(caught.value)


def test_from_dict_with_a_duplicated_message_is_a_configuration_error() -> None:
    data = _valid_data()
    data["messages"].append(copy.deepcopy(data["messages"][1]))
    with pytest.raises(ConfigurationError, match="appears twice"):
        Branch.from_dict(data)


def test_from_dict_with_tools_missing_from_the_call_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="'add'"):
        Branch.from_dict(_valid_data(), tools=[])


def test_from_dict_of_non_mappings_is_a_configuration_error() -> None:
    for bad in (None, 42, "{}", [("id", "x")]):
        with pytest.raises(ConfigurationError):
            Branch.from_dict(bad)


_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)


def _json_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # A named function, not a lambda: hypothesis reads the extend function's source to check
    # that it recurses, and a multi-line lambda's source is not always recoverable.
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)


_json_value = st.recursive(_json_leaf, _json_containers, max_leaves=8)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            out += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            out += _paths(inner, (*prefix, index))
    return out


_PATHS = _paths(_valid_data())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _json_value | st.just(_DELETE)), max_size=3))
def test_from_dict_of_randomly_corrupted_data_succeeds_or_raises_configuration_error(
    edits: list[tuple[tuple[Any, ...], Any]],
) -> None:
    data = _valid_data()
    for path, value in edits:
        target: Any = data
        try:
            for key in path[:-1]:
                target = target[key]
            if value is _DELETE:
                del target[path[-1]]
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced this place
    try:
        restored = Branch.from_dict(data, tools=[add])
    except ConfigurationError as exc:
        message = str(exc)
    else:
        message = ""
        assert isinstance(restored, Branch)
        assert json.loads(json.dumps(restored.to_dict()))["id"] == str(restored.id)
    assert message == "" or message.startswith("Branch.from_dict")
