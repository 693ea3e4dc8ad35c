"""Shared test helpers: a signal recorder and branch/turn invariants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from lionagi.operations.turn import _active_turn_var
from lionagi.session.branch import Branch
from lionagi.session.session import Session
from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal
from lionagi.testing import FunctionModel


@dataclass
class Recorder:
    """Records every signal of a session, in delivery order."""

    signals: list[Signal] = field(default_factory=list)

    def __call__(self, signal: Signal, session: Any) -> None:
        self.signals.append(signal)

    def kinds(self) -> list[str]:
        return [s.kind for s in self.signals]

    def lifecycle(self) -> list[tuple[str, UUID | None]]:
        return [
            (s.kind, getattr(s, "turn_id", None))
            for s in self.signals
            if isinstance(s, RunStart | RunEnd | RunFailed)
        ]

    def terminals(self) -> list[RunEnd | RunFailed]:
        return [s for s in self.signals if isinstance(s, RunEnd | RunFailed)]

    def starts(self) -> list[RunStart]:
        return [s for s in self.signals if isinstance(s, RunStart)]

    def messages(self) -> list[MessageAdded]:
        return [s for s in self.signals if isinstance(s, MessageAdded)]


def echo_model() -> FunctionModel:
    return FunctionModel(lambda messages, **options: "ok")


def observed_branch(**kwargs: Any) -> tuple[Branch, Recorder, Session]:
    """A Branch in a Session whose every signal is recorded."""
    session = Session()
    recorder = Recorder()
    session.observe(Signal, recorder)
    kwargs.setdefault("chat_model", echo_model())
    branch = session.new_branch(**kwargs)
    return branch, recorder, session


def assert_idle(branch: Branch) -> None:
    """No turn is active, the lock is free and this task has no binding."""
    assert branch._active_turn_context is None
    lock = branch._turn_lock.current
    if lock is not None:
        assert lock.value == 1
        assert lock.statistics().tasks_waiting == 0
    assert _active_turn_var.get() is None


def assert_one_terminal_per_start(recorder: Recorder) -> None:
    """Every RunStart has exactly one terminal with its turn id, after all its messages."""
    starts = recorder.starts()
    terminals = recorder.terminals()
    assert len({s.turn_id for s in starts}) == len(starts)
    assert sorted(str(s.turn_id) for s in starts) == sorted(str(t.turn_id) for t in terminals)
    position = {id(s): i for i, s in enumerate(recorder.signals)}
    for terminal in terminals:
        for message in recorder.messages():
            if message.turn_id == terminal.turn_id:
                assert position[id(message)] < position[id(terminal)]
