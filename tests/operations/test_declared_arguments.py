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
