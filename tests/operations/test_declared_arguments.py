"""A Branch method declared with another's parameters (``same_parameters``) binds a call the way
``inspect.Signature.bind`` with defaults applied does, and refuses the same calls."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from lionagi import Branch
from lionagi._declared import _Arguments
from lionagi.errors import OperationError
from lionagi.operations import params as params_module
from lionagi.operations.params import (
    ChatParams,
    CommunicateParams,
    OperateParams,
    RunParams,
    bind,
    bound_parameters,
)
from lionagi.testing import TestModel

CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    (("hi",), {}),
    (("hi", "be brief"), {}),
    ((), {"instruction": "hi", "guidance": "g"}),
    (("hi",), {"instruction": "again"}),  # the same argument twice
    (("hi",), {"temperature": 0.2, "extra_body": {"a": 1}}),
    (("hi",), {"temprature": 0.2}),  # an unknown name goes to **options, checked later
    (("hi",), {"self": 1}),
    (tuple(range(40)), {}),  # too many positional arguments
]

METHODS: list[Callable[..., Any]] = [Branch.chat, Branch.communicate, Branch.operate, Branch.run]


def _reference(
    fn: Callable[..., Any], owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    try:
        bound = inspect.signature(fn).bind(owner, *args, **kwargs)
    except TypeError:
        return TypeError
    bound.apply_defaults()
    return dict(bound.arguments)


def _ours(fn: Callable[..., Any], owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return _Arguments(inspect.signature(fn), fn.__qualname__)(owner, args, dict(kwargs))
    except TypeError:
        return TypeError


@pytest.mark.parametrize("fn", METHODS, ids=lambda fn: fn.__name__)
@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_binds_like_signature_bind(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    owner = object()
    assert _ours(fn, owner, args, kwargs) == _reference(fn, owner, args, kwargs)


def test_the_declared_variants_keep_their_operations_signatures() -> None:
    assert (
        inspect.signature(Branch.chat_and_record).parameters
        == inspect.signature(Branch.chat).parameters
    )
    assert inspect.signature(Branch.stream).parameters == inspect.signature(Branch.run).parameters
    for stream in (Branch.ReActStream, Branch.ReActEvents):
        assert inspect.signature(stream).parameters == inspect.signature(Branch.ReAct).parameters


async def test_a_declared_variant_refuses_a_call_that_does_not_fit() -> None:
    branch = Branch()
    with pytest.raises(TypeError, match="multiple values for argument 'instruction'"):
        await branch.chat_and_record("hi", instruction="again")  # type: ignore[misc]


@pytest.mark.parametrize("method", ["ReActStream", "ReActEvents"])
def test_the_react_streams_refuse_return_analysis(method: str) -> None:
    with pytest.raises(OperationError, match=rf"{method}\(\) yields each round's analysis"):
        getattr(Branch(), method)("x", return_analysis=True)


# -- a declared variant bound straight into its parameters ----------------------------------
# (the variant, the method it is declared with, its parameter class, a valid leading call)
BOUND: list[tuple[str, str, type[Any]]] = [
    ("stream", "run", RunParams),
    ("chat_and_record", "chat", ChatParams),
    ("communicate_stream", "communicate", CommunicateParams),
    ("operate_stream", "operate", OperateParams),
]

MODEL = TestModel(["x"])
BOUND_CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    *CALLS,
    (("hi", None, "ctx"), {}),
    (("hi",), {"chat_model": MODEL}),
    (("hi",), {"imodel": MODEL}),  # an alias: the declared way
    (("hi",), {"imodel": None}),
    (("hi",), {"chat_model": MODEL, "imodel": MODEL}),
    (("hi",), {"context": {"k": [1]}}),  # a value validation copies
    (("hi",), {"guidance": 3}),  # a bad value
    (("hi",), {"images": ["http://x/y.png"]}),
    (("hi",), {"max_tool_rounds": 2, "session_id": "s"}),
    (("hi",), {"max_tool_rounds": -1}),
    (("hi",), {"session_id": ""}),
    (("hi",), {"instruct": {"instruction": "x"}}),
    (("hi",), {"options": {"temperature": 1.0}}),
    (("hi",), {"temperature": "hot"}),
    (("hi",), {"temperature": 0.5, "guidance": 3}),  # the first error of the declared way
    (("hi",), {"max_tokens": 5, "instruction": "again"}),
    (("hi",), {"return_ins_res_message": True}),
    ((), {"instruction": "hi"}),
    ((), {"guidance": "only"}),
    ((None,), {}),
]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # the class and the words are the contract
        return type(exc), str(exc)


def _declared_way(owner: Any, source: str, cls: type[Any], operation: str) -> Any:
    binder = _Arguments(inspect.signature(getattr(Branch, source)), f"Branch.{source}").bind
    return lambda *args, **kwargs: bind(cls, binder(owner, *args, **kwargs), operation=operation)


@pytest.mark.parametrize(("variant", "source", "cls"), BOUND, ids=[b[0] for b in BOUND])
@pytest.mark.parametrize(("args", "kwargs"), BOUND_CALLS)
def test_a_bound_variant_binds_and_refuses_as_the_declared_way(
    variant: str, source: str, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Whichever way a call is bound, the parameters (or the error, its class and words) are
    those of the source method's signature followed by ``bind``."""
    owner = Branch()
    method = bound_parameters(getattr(Branch, source), cls, variant)(lambda self, params: params)
    ours = _outcome(lambda: method(owner, *args, **kwargs))
    reference = _outcome(lambda: _declared_way(owner, source, cls, variant)(*args, **kwargs))
    assert ours == reference
    if isinstance(ours, cls):
        assert type(ours) is cls
        with pytest.raises(Exception, match="frozen"):
            ours.guidance = "y"


@pytest.mark.parametrize(("variant", "source", "cls"), BOUND, ids=[b[0] for b in BOUND])
def test_a_bound_variants_common_call_builds_no_argument_dict(
    monkeypatch: pytest.MonkeyPatch, variant: str, source: str, cls: type[Any]
) -> None:
    """``branch.stream("hi")`` (and the other variants' common calls, options included) is bound
    from its arguments: neither the signature's ``locals()`` dict nor ``bind`` nor the
    validator runs, and the parameters equal what that way builds."""
    from lionagi.session import branch as branch_module

    owner = Branch()
    args: tuple[Any, ...] = () if variant == "operate_stream" else ("hi",)
    kwargs: dict[str, Any] = {"chat_model": MODEL, "temperature": 0.5}
    if variant == "operate_stream":
        kwargs["instruction"] = "hi"
    expected = _declared_way(owner, source, cls, variant)(*args, **kwargs)
    captured: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("bound the declared way")

    monkeypatch.setattr(params_module, "bind", refuse)
    monkeypatch.setattr(branch_module, "bind", refuse)
    monkeypatch.setattr(cls, "__init__", refuse)
    module, name = {
        "stream": ("_run", "stream"),
        "chat_and_record": ("_chat", "chat"),
        "communicate_stream": ("_live", "communicate_stream"),
        "operate_stream": ("_live", "operate_stream"),
    }[variant]

    def capture(branch: Branch, params: Any, **options: Any) -> Any:
        captured.append(params)
        return _done() if variant == "chat_and_record" else None

    monkeypatch.setattr(getattr(branch_module, module), name, capture)
    result = getattr(owner, variant)(*args, **kwargs)
    if inspect.iscoroutine(result):  # chat_and_record's, which awaits the operation
        with pytest.raises(StopIteration):
            result.send(None)
    monkeypatch.undo()
    [params] = captured
    assert params == expected
    assert type(params) is cls


async def _done() -> str:
    return "done"


def test_the_instruction_text_alone_goes_to_text_with_every_default() -> None:
    """``bound_parameters``' ``text=`` gets a call of the instruction text alone, with the
    parameters of every default (what the declared way binds for ``""``); any other call, and
    a call ``text=`` declines (``None``), are bound the other ways."""
    seen: list[tuple[str, Any]] = []

    def text(owner: Any, value: str, defaults: Any) -> Any:
        seen.append((value, defaults))
        return None if value == "decline" else "by text"

    method: Any = bound_parameters(Branch.run, RunParams, "stream", text)(
        lambda self, params: params
    )
    owner = Branch()
    declared = _declared_way(owner, "run", RunParams, "stream")
    assert method(owner, "hi") == "by text"
    [(value, defaults)] = seen
    assert value == "hi"
    assert defaults == declared("")
    assert type(defaults) is RunParams
    assert method(owner, "decline") == declared("decline")
    assert method(owner, "hi", max_tool_rounds=2) == declared("hi", max_tool_rounds=2)
    assert method(owner, "hi", None) == declared("hi", None)
    assert method(owner, instruction="hi") == declared(instruction="hi")
    assert [value for value, _ in seen] == ["hi", "decline"]
    assert seen[1][1] is defaults  # built once
