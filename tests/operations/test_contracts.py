"""Every operation's parameter contract: the bad-argument table, one error class per mistake,
and nothing unknown reaching a request body (checked on a loopback server's received bodies)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from lionagi import Branch, OperationError, UnknownParameterError, iModel
from lionagi.operations.params import MODEL_OPTION_NAMES, OPERATION_PARAMS
from lionagi.testing import TestModel
from tests.helpers import assert_idle, observed_branch
from tests.payloads import chunk, completion
from tests.service.http_server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio


class Answer(BaseModel):
    value: int


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


Call = Callable[..., Any]

# operation name -> a call of it with valid leading arguments, taking extra keyword arguments
CALLS: dict[str, Call] = {
    "chat": lambda b, **kw: b.chat("x", **kw),
    "chat_and_record": lambda b, **kw: b.chat_and_record("x", **kw),
    "communicate": lambda b, **kw: b.communicate("x", **kw),
    "parse": lambda b, **kw: b.parse("{}", **{"response_format": Answer, **kw}),
    "interpret": lambda b, **kw: b.interpret("x", **kw),
    "operate": lambda b, **kw: b.operate(instruction="x", **kw),
    "act": lambda b, **kw: b.act({"function": "add", "arguments": {"a": 1, "b": 2}}, **kw),
    "ReAct": lambda b, **kw: b.ReAct("x", **kw),
    "ReActStream": lambda b, **kw: b.ReActStream("x", **kw),
    "run": lambda b, **kw: b.run("x", **kw),
    "stream": lambda b, **kw: b.stream("x", **kw),
}
MODEL_OPS = [name for name in CALLS if name != "act"]
# the live-event forms, declared with their operations' parameters
LIVE_CALLS: dict[str, Call] = {
    "operate_stream": lambda b, **kw: b.operate_stream(instruction="x", **kw),
    "communicate_stream": lambda b, **kw: b.communicate_stream("x", **kw),
    "ReActEvents": lambda b, **kw: b.ReActEvents("x", **kw),
}

# (operation, keyword arguments, exception class, text the message must contain)
TABLE: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    # wrong type
    ("chat", {"guidance": 3}, OperationError, "guidance=3: expected text"),
    ("chat", {"images": "http://x/y.png"}, OperationError, "images="),
    ("chat", {"context": object()}, OperationError, "expected JSON data"),
    ("chat", {"response_format": int}, OperationError, "response_format="),
    ("chat", {"temperature": "hot"}, OperationError, "temperature='hot': expected a number"),
    ("chat_and_record", {"max_tokens": 1.5}, OperationError, "max_tokens=1.5: expected an int"),
    ("communicate", {"num_parse_retries": -1}, OperationError, "num_parse_retries=-1"),
    ("communicate", {"handle_validation": "ignore"}, OperationError, "'return_value'"),
    ("parse", {"max_retries": True}, OperationError, "max_retries=True: expected an int"),
    ("parse", {"response_format": dict}, OperationError, "pydantic model class"),
    ("interpret", {"domain": 1}, OperationError, "domain=1"),
    ("operate", {"action_strategy": "all"}, OperationError, "'concurrent' or 'sequential'"),
    ("operate", {"reason": "yes"}, OperationError, "reason='yes': expected True or False"),
    ("operate", {"max_parse_retries": -2}, OperationError, "greater than or equal to 0"),
    ("act", {"strategy": "parallel"}, OperationError, "strategy='parallel'"),
    ("act", {"suppress_errors": "yes"}, OperationError, "suppress_errors='yes'"),
    ("ReAct", {"max_extensions": -1}, OperationError, "max_extensions=-1"),
    ("ReAct", {"extension_allowed": 1}, OperationError, "extension_allowed=1"),
    ("ReActStream", {"max_extensions": 1.5}, OperationError, "max_extensions=1.5"),
    ("run", {"max_tool_rounds": True}, OperationError, "max_tool_rounds=True"),
    ("run", {"session_id": ""}, OperationError, "session_id=''"),
    ("run", {"extra_body": {"messages": []}}, OperationError, "extra_body keys ['messages']"),
    ("chat", {"temperature": 0.1, "extra_body": {"temperature": 1}}, OperationError, "once"),
    ("communicate", {"request_fields": "name"}, OperationError, "request_fields='name'"),
    ("operate", {"field_models": [1]}, OperationError, "field_models=1: expected"),
    ("operate", {"instruct": {"bogus": 1}}, OperationError, "instruct with a bad 'bogus'"),
    ("ReAct", {"instruct": 3}, OperationError, "expected an Instruct or a dict"),
    ("chat", {"return_ins_res_message": 1}, OperationError, "return_ins_res_message=1"),
    # unknown names: a typo is named with the likely intent
    ("chat", {"temprature": 0.2}, UnknownParameterError, "'temprature'; did you mean"),
    ("operate", {"invoke_action": False}, UnknownParameterError, "did you mean 'invoke_actions'"),
    ("run", {"frobnicate": 1}, UnknownParameterError, "extra_body={...}"),
    ("act", {"temperature": 0.1}, UnknownParameterError, "'temperature'"),
    # upstream-only names: what to use instead
    ("communicate", {"actions": True}, UnknownParameterError, "use operate(actions=True)"),
    ("communicate", {"skip_validation": True}, UnknownParameterError, "handle_validation="),
    ("communicate", {"clear_messages": True}, UnknownParameterError, "append-only"),
    ("chat", {"plain_content": "x"}, UnknownParameterError, "as the instruction"),
    ("chat", {"tools": True}, UnknownParameterError, "operate(tools=...)"),
    ("operate", {"num_parse_retries": 2}, UnknownParameterError, "use max_parse_retries="),
    ("communicate", {"max_retries": 2}, UnknownParameterError, "use num_parse_retries="),
    ("ReAct", {"reasoning_effort": "low"}, UnknownParameterError, "extra_body="),
    ("act", {"verbose_action": True}, UnknownParameterError, "MessageAdded"),
    ("run", {"stream": True}, UnknownParameterError, "'stream'"),
    ("stream", {"max_tool_rounds": -1}, OperationError, "stream() got max_tool_rounds=-1"),
    ("stream", {"temprature": 0.2}, UnknownParameterError, "stream() got an unexpected"),
    ("chat_and_record", {"return_ins_res_message": True}, OperationError, "returns the reply"),
    ("operate_stream", {"reason": "yes"}, OperationError, "reason='yes': expected True or False"),
    ("operate_stream", {"invoke_action": False}, UnknownParameterError, "'invoke_actions'"),
    ("communicate_stream", {"num_parse_retries": -1}, OperationError, "num_parse_retries=-1"),
    ("communicate_stream", {"actions": True}, UnknownParameterError, "use operate(actions=True)"),
    ("ReActEvents", {"max_extensions": -1}, OperationError, "max_extensions=-1"),
    ("ReActEvents", {"reasoning_effort": "low"}, UnknownParameterError, "extra_body="),
    ("ReActEvents", {"return_analysis": True}, OperationError, "belongs to ReAct()"),
]


async def _call(op: str, branch: Branch, kwargs: dict[str, Any]) -> Any:
    result = {**CALLS, **LIVE_CALLS}[op](branch, **kwargs)
    if hasattr(result, "__await__"):
        return await result
    return result  # a stream: its parameters are checked when it is created


@pytest.mark.parametrize(
    ("op", "kwargs", "error", "match"),
    TABLE,
    ids=[f"{op}-{'-'.join(kw)}" for op, kw, _, _ in TABLE],
)
async def test_bad_argument_table(
    op: str, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    model = TestModel(["x"])
    branch, rec, _ = observed_branch(chat_model=model, tools=[add])
    with pytest.raises(error) as caught:
        await _call(op, branch, kwargs)
    assert type(caught.value) is error
    assert match in str(caught.value)
    assert f"{op}()" in str(caught.value)
    assert model.calls == []
    assert rec.signals == []
    assert len(branch.msgs) == 0
    assert_idle(branch)


@pytest.mark.parametrize("op", MODEL_OPS)
async def test_a_model_that_is_not_an_imodel_is_the_same_error_everywhere(op: str) -> None:
    branch = Branch(chat_model=TestModel(["x"]), tools=[add])
    key = {"parse": "parse_model", "interpret": "interpret_model"}.get(op, "chat_model")
    with pytest.raises(OperationError, match=f"{key}='openai/gpt': expected iModel or None"):
        await _call(op, branch, {key: "openai/gpt"})


@pytest.mark.parametrize("op", list(CALLS))
async def test_an_unknown_keyword_is_a_type_error_everywhere(op: str) -> None:
    branch = Branch(chat_model=TestModel(["x"]), tools=[add])
    with pytest.raises(TypeError) as caught:
        await _call(op, branch, {"skip_validation": True})
    assert isinstance(caught.value, UnknownParameterError)
    assert caught.value.name == "skip_validation"
    assert caught.value.operation == op


def test_each_parameter_class_names_the_first_operation_it_serves() -> None:
    named = {params: params.operation for params in OPERATION_PARAMS.values()}
    assert named == {
        params: next(op for op, cls in OPERATION_PARAMS.items() if cls is params)
        for params in OPERATION_PARAMS.values()
    }
    assert OPERATION_PARAMS["chat_and_record"].operation == "chat"
    assert OPERATION_PARAMS["ReActStream"].operation == "ReAct"


async def test_imodel_is_an_alias_of_chat_model_and_not_both() -> None:
    default, chosen = TestModel(["default"]), TestModel(["chosen"])
    branch = Branch(chat_model=default)
    assert await branch.chat("x", imodel=chosen) == "chosen"
    assert default.calls == []
    with pytest.raises(OperationError, match="both chat_model= and its alias imodel="):
        await branch.communicate("x", chat_model=default, imodel=chosen)


# -- what reaches the wire ------------------------------------------------------------------
def _sse_reply(content: str) -> Reply:
    return Reply(events=[chunk({"content": content}, finish="stop"), "data: [DONE]\n\n"])


# the keys a chat-completions body may hold: what the library sets, plus the options given
_LIBRARY_KEYS = {"model", "messages", "tools", "response_format", "stream", "stream_options"}
_GIVEN: dict[str, Any] = {"temperature": 0.2, "seed": 7, "extra_body": {"reasoning_effort": "low"}}
_WIRE_OPTIONS = {"temperature": 0.2, "seed": 7, "reasoning_effort": "low"}
# every upstream-only or misspelt name the issue was reported with
_REJECTED: list[dict[str, Any]] = [
    {"actions": True},
    {"temprature": 0.2},
    {"skip_validation": True},
    {"clear_messages": True},
    {"plain_content": "x"},
    {"return_operative": True},
]


async def _drive(op: str, branch: Branch, kwargs: dict[str, Any]) -> None:
    result = await _call(op, branch, kwargs)
    if op in ("run", "stream", "ReActStream"):
        async for _ in result:
            pass


@pytest.mark.parametrize("op", MODEL_OPS)
async def test_only_known_options_reach_the_request_body(op: str, server: ScriptedServer) -> None:
    model = iModel("openai", "gpt-test", base_url=f"{server.url}/v1", api_key="sk-x", timeout=30)
    try:
        await _check_wire(op, server, model)
    finally:
        await model.aclose()


async def _check_wire(op: str, server: ScriptedServer, model: iModel) -> None:
    branch = Branch(chat_model=model, tools=[add])
    for rejected in _REJECTED:
        if op == "operate" and "actions" in rejected:
            continue  # operate's own parameter
        with pytest.raises(UnknownParameterError, match=next(iter(rejected))):
            await _drive(op, branch, {**_GIVEN, **rejected})
    assert server.requests == []
    final = '{"value": 1}' if op != "ReAct" and op != "ReActStream" else "done"
    analysis = '{"analysis": "a", "extension_needed": false}'
    replies = {"ReAct": [analysis, final], "ReActStream": [analysis, final]}.get(op, [final])
    for text in replies:
        reply = {"role": "assistant", "content": text}
        streamed = op in ("run", "stream")
        server.reply(_sse_reply(text) if streamed else Reply(json=completion(reply)))
    kwargs = dict(_GIVEN)
    if op == "parse":  # parse calls the model only for text it cannot read itself
        branch = Branch(chat_model=model)
        await branch.parse("no json here", response_format=Answer, max_retries=1, **kwargs)
    else:
        await _drive(op, branch, kwargs)
    assert len(server.requests) == len(replies)
    for received in server.requests:
        body = received.json
        assert set(body) - _LIBRARY_KEYS == set(_WIRE_OPTIONS)
        assert {k: body[k] for k in _WIRE_OPTIONS} == _WIRE_OPTIONS


@pytest.mark.parametrize(
    ("method", "source"),
    [
        ("stream", "run"),
        ("operate_stream", "operate"),
        ("communicate_stream", "communicate"),
        ("chat_and_record", "chat"),
        ("ReActStream", "ReAct"),
        ("ReActEvents", "ReAct"),
    ],
)
def test_a_variant_is_declared_with_its_operations_parameters(method: str, source: str) -> None:
    declared = inspect.signature(getattr(Branch, method))
    assert declared.parameters == inspect.signature(getattr(Branch, source)).parameters
    # at the call, before any coroutine, in the words the interpreter uses for the source method
    with pytest.raises(TypeError, match=r"positional arguments? but 5 were given") as caught:
        getattr(Branch(), method)("x", None, None, None)
    with pytest.raises(TypeError) as direct:
        getattr(Branch(), source)("x", None, None, None)
    assert str(caught.value) == str(direct.value)


def test_every_model_option_is_a_documented_name() -> None:
    assert {
        "temperature",
        "max_tokens",
        "top_p",
        "stop",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "extra_body",
    } == MODEL_OPTION_NAMES


@pytest.mark.parametrize(
    "kwargs",
    [
        {"instruction": "caf\udce9"},
        {"instruction": "ok", "guidance": "na\udcefve"},
        {"instruction": "ok", "context": "\ud83d"},
        {"instruction": "ok", "context": {"files": ["caf\udce9.txt"]}},
    ],
    ids=["instruction", "guidance", "context-text", "context-json"],
)
async def test_caller_text_with_a_lone_surrogate_is_refused_before_the_turn(
    kwargs: dict[str, Any],
) -> None:
    model = TestModel(["x"])
    branch, rec, _ = observed_branch(chat_model=model)
    with pytest.raises(OperationError, match="lone surrogate") as caught:
        await branch.chat_and_record(**kwargs)
    name = list(kwargs)[-1]
    assert str(caught.value).startswith(f"{name} holds a lone surrogate")
    assert model.calls == []
    assert rec.signals == []
    assert len(branch.msgs) == 0


async def test_caller_text_beyond_ascii_is_sent_unchanged() -> None:
    model = TestModel(["x"])
    branch = Branch(chat_model=model)
    await branch.chat_and_record("héllo ✓", guidance="naïve", context={"ville": "Zürich"})
    sent = branch.msgs[0]
    assert (sent.instruction, sent.guidance, sent.context) == (
        "héllo ✓",
        "naïve",
        {"ville": "Zürich"},
    )


@pytest.mark.parametrize("operation", ["run", "chat"])
def test_a_question_in_text_alone_is_built_without_the_general_builder(
    monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """The common question (text, no guidance, context, images or format) is made straight into
    its Instruction, the general builder left out; the message is the one it builds, sent by
    the Branch's user, and its text is still checked for a lone surrogate."""
    from lionagi.operations import _prepare

    branch = Branch(chat_model=TestModel(["a"]), user="ann")
    expected = _prepare.build_instruction("héllo", sender="ann")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the general builder ran")

    monkeypatch.setattr(_prepare, "build_instruction", refuse)
    params = ParamsOf[operation]("héllo")
    built = _prepare.instruction_for(branch, params)
    assert type(built) is type(expected)
    assert built.model_dump(exclude={"id", "created_at"}) == expected.model_dump(
        exclude={"id", "created_at"}
    )
    with pytest.raises(OperationError, match="instruction holds a lone surrogate"):
        _prepare.instruction_for(branch, ParamsOf[operation]("caf\udce9"))


def _run_params(instruction: str) -> Any:
    from lionagi.operations.params import RunParams

    return RunParams(
        instruction=instruction,
        guidance=None,
        context=None,
        chat_model=None,
        images=None,
        max_tool_rounds=8,
        session_id=None,
        options={},
    )


def _chat_params(instruction: str) -> Any:
    from lionagi.operations.params import ChatParams

    return ChatParams(
        instruction=instruction,
        guidance=None,
        context=None,
        chat_model=None,
        response_format=None,
        request_fields=None,
        images=None,
        return_ins_res_message=False,
        options={},
    )


ParamsOf: dict[str, Callable[[str], Any]] = {"run": _run_params, "chat": _chat_params}


# -- values stored as given -----------------------------------------------------------------
def _common_chat_arguments(model: TestModel) -> dict[str, Any]:
    """``Branch.chat``'s locals for ``chat("x", chat_model=model)``, as ``bind`` receives them."""
    return {
        "instruction": "x",
        "guidance": None,
        "context": None,
        "response_format": None,
        "request_fields": None,
        "chat_model": model,
        "images": None,
        "return_ins_res_message": False,
        "options": {},
    }


async def test_a_common_call_is_bound_without_running_the_validator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Text, ``None``, flags and a model are what strict validation returns unchanged, so the
    call is stored as given; a value validation would change (a dict, copied) still goes
    through the validator, and both objects equal what the validator builds."""
    from lionagi.operations.params import ChatParams, bind

    model = TestModel(["a", "b"])
    branch = Branch(chat_model=model)
    arguments = _common_chat_arguments(model)
    expected = ChatParams(**arguments)  # (builds the validator before it is watched)
    validated: list[dict[str, Any]] = []
    real_init = ChatParams.__init__

    def counting_init(self: ChatParams, **values: Any) -> None:
        validated.append(values)
        real_init(self, **values)

    monkeypatch.setattr(ChatParams, "__init__", counting_init)
    assert await branch.chat_and_record("x", chat_model=model, temperature=0.5) == "a"
    assert validated == []
    as_given = bind(ChatParams, arguments)
    assert type(as_given) is ChatParams
    assert as_given == expected
    assert validated == []
    with pytest.raises(Exception, match="frozen"):
        as_given.guidance = "y"  # type: ignore[misc]
    with_dict = bind(ChatParams, {**arguments, "context": {"k": [1]}})
    assert len(validated) == 1
    assert with_dict.context == {"k": [1]}
    assert await branch.chat("y", context={"k": 1}) == "b"
    assert len(validated) == 2


def test_a_parameter_class_with_a_validator_of_its_own_is_never_bound_as_given() -> None:
    """The fast path skips only pydantic's own checks; a class that adds a validator (here a
    subclass that rewrites ``instruction``) gets every call validated."""
    from pydantic import field_validator
    from pydantic.dataclasses import dataclass as pydantic_dataclass

    from lionagi.operations.params import _STRICT, ChatParams, bind

    @pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=_STRICT)
    class ShoutedChatParams(ChatParams):
        @field_validator("instruction")
        @classmethod
        def _shout(cls, value: Any) -> Any:
            return value.upper() if isinstance(value, str) else value

    model = TestModel(["a"])
    arguments = _common_chat_arguments(model)
    assert bind(ShoutedChatParams, arguments).instruction == "X"
    assert bind(ChatParams, arguments).instruction == "x"


def test_a_classs_first_call_bound_as_given_compiles_no_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The as-given path of a class is made from its fields without generating code: a
    process's first call of an operation pays no ``exec`` (it cost more than a whole turn).
    Fails with a checker compiled per class."""
    import builtins

    from lionagi.operations import params
    from lionagi.operations.params import ChatParams, bind

    model = TestModel(["a"])
    arguments = _common_chat_arguments(model)
    expected = ChatParams(**arguments)
    monkeypatch.delitem(params._AS_GIVEN, ChatParams, raising=False)  # as on a first call

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the as-given path compiled code")

    monkeypatch.setattr(builtins, "exec", refuse)
    monkeypatch.setattr(builtins, "compile", refuse)
    try:
        first = bind(ChatParams, arguments)
    finally:
        monkeypatch.undo()  # (a failure's report compiles code too)
    assert type(first) is ChatParams
    assert first == expected


async def test_stream_of_text_alone_refuses_a_lone_surrogate_at_the_call() -> None:
    model = TestModel(["x"])
    branch, rec, _ = observed_branch(chat_model=model)
    with pytest.raises(OperationError, match=r"^instruction holds a lone surrogate"):
        branch.stream("caf\udce9")
    assert model.calls == []
    assert rec.signals == []
    assert len(branch.msgs) == 0


class _Name(str):
    """A user name that is a str subclass: the instruction is built the general way."""


@pytest.mark.parametrize("user", ["ann", _Name("ann"), None])
async def test_stream_of_text_alone_records_what_the_general_way_records(
    user: str | None,
) -> None:
    """``branch.stream("...")`` alone (built without binding its parameters) and the same call
    bound the general way (a parameter given at its default) hand out the same events and
    record the same messages, sent by the Branch's user."""
    seen = []
    extras: list[dict[str, Any]] = [{}, {"max_tool_rounds": 8}]
    for extra in extras:
        branch = Branch(chat_model=TestModel(["one two"]), user=user)
        async with branch.stream("héllo", **extra) as events:
            kinds = [type(event).__name__ async for event in events]
        sent = branch.msgs[0]
        seen.append((kinds, [m.role for m in branch.msgs], sent.instruction, sent.sender))
    assert seen[0] == seen[1]
    assert seen[0][2:] == ("héllo", user)
