"""The Session API upstream users expect: branches, default branch, split, observe."""

from __future__ import annotations

import inspect

import anyio
import pytest

from lionagi import Branch, RunEnd, Session, System
from lionagi.errors import BranchNotFoundError, ConfigurationError
from lionagi.testing import FunctionModel


def _model() -> FunctionModel:
    return FunctionModel(lambda messages, **options: "ok")


def test_new_branch_takes_upstream_keywords() -> None:
    session = Session()

    def tool(x: int) -> int:
        return x

    branch = session.new_branch(
        system="be kind",
        name="writer",
        user="ann",
        chat_model=_model(),
        tools=[tool],
        messages=None,
    )
    assert branch.session is session
    assert isinstance(branch.msgs[0], System)
    assert (branch.name, branch.user) == ("writer", "ann")
    assert "tool" in branch.tools
    assert session.default_branch is branch  # the first branch is the default
    other = session.new_branch(name="critic", as_default_branch=True)
    assert session.default_branch is other


def test_flow_stream_is_declared_with_flows_parameters() -> None:
    declared = inspect.signature(Session.flow_stream)
    assert declared.parameters == inspect.signature(Session.flow).parameters
    with pytest.raises(TypeError, match="unexpected keyword argument 'paralel'"):
        Session().flow_stream(None, paralel=False)  # type: ignore[call-arg]


def test_default_branch_is_created_on_first_use_and_can_change() -> None:
    session = Session()
    assert len(session) == 0
    default = session.default_branch
    assert list(session) == [default]
    second = session.new_branch(name="second")
    session.change_default_branch("second")
    assert session.default_branch is second
    session.change_default_branch(default.id)
    assert session.default_branch is default
    with pytest.raises(BranchNotFoundError, match="nope"):
        session.change_default_branch("nope")
    given = Branch(name="given")
    assert Session(default_branch=given).default_branch is given


def test_get_branch_by_branch_id_string_or_name_with_default() -> None:
    session = Session()
    branch = session.new_branch(name="alpha")
    assert session.get_branch(branch) is branch
    assert session.get_branch(branch.id) is branch
    assert session.get_branch(str(branch.id)) is branch
    assert session.get_branch("alpha") is branch
    assert session.get_branch("beta", None) is None
    assert branch in session
    stranger = Branch()
    assert stranger not in session
    with pytest.raises(BranchNotFoundError) as caught:
        session.get_branch(stranger)
    assert isinstance(caught.value, KeyError)
    assert str(stranger.id) in str(caught.value)


def test_remove_branch_moves_the_default_and_detaches() -> None:
    session = Session()
    first = session.new_branch(name="first")
    second = session.new_branch(name="second")
    session.remove_branch("first", delete=True)
    assert first.session is None
    assert session.default_branch is second
    assert list(session) == [second]
    with pytest.raises(BranchNotFoundError):
        session.remove_branch(first)


async def test_split_and_asplit_fork_a_branch_into_the_session() -> None:
    session = Session()
    branch = session.new_branch(system="s", name="base", chat_model=_model())
    await branch.chat_and_record("hi")
    clone = session.split(branch)
    assert clone.id != branch.id
    assert clone.session is session
    assert [m.id for m in clone.msgs] == [m.id for m in branch.msgs]
    other = await session.asplit("base")
    assert other in session
    assert len(session) == 3
    await clone.chat_and_record("only in the clone")
    assert len(branch.msgs) == 3
    assert len(clone.msgs) == 5


async def test_concat_messages_lists_each_message_once() -> None:
    session = Session()
    base = session.new_branch(system="s", chat_model=_model())
    await base.chat_and_record("one")
    fork = session.split(base)
    await fork.chat_and_record("two")
    messages = session.concat_messages()
    assert [m.id for m in messages] == [m.id for m in fork.msgs]
    assert len(session.concat_messages([base])) == 3


async def test_observe_works_as_a_decorator() -> None:
    session = Session()
    branch = session.new_branch(chat_model=_model())
    ends: list[RunEnd] = []

    @session.observe(RunEnd)
    async def on_end(signal: RunEnd, _: Session) -> None:
        await anyio.lowlevel.checkpoint()
        ends.append(signal)

    assert callable(on_end)  # the decorator returns the function itself
    unsubscribe = session.observe(RunEnd, lambda signal, _: ends.append(signal))
    await branch.chat("hi")
    assert len(ends) == 2
    unsubscribe()
    await branch.chat("again")
    assert len(ends) == 3
    with pytest.raises(ConfigurationError, match="Signal subclass"):
        session.observe(int)  # type: ignore[arg-type]
