"""``Recorder`` and ``assert_one_terminal_per_start``: check the signals your code caused.

Subscribe a :class:`Recorder` to a session and every signal is kept in delivery order;
:func:`assert_one_terminal_per_start` then checks the turn protocol: each started turn ended
exactly once, after all of its messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from lionagi.session.signal import MessageAdded, RunEnd, RunFailed, RunStart, Signal

__all__ = ["Recorder", "assert_one_terminal_per_start"]


@dataclass
class Recorder:
    """An observer handler that records every signal it is given, in delivery order.

    >>> from lionagi import Session
    >>> from lionagi.session.signal import Signal
    >>> recorder = Recorder()
    >>> unsubscribe = Session().observe(Signal, recorder)
    """

    signals: list[Signal] = field(default_factory=list)

    def __call__(self, signal: Signal, session: Any) -> None:
        self.signals.append(signal)

    def kinds(self) -> list[str]:
        """The ``kind`` of every signal, in order."""
        return [s.kind for s in self.signals]

    def lifecycle(self) -> list[tuple[str, UUID | None]]:
        """``(kind, turn_id)`` of every RunStart, RunEnd and RunFailed, in order."""
        return [
            (s.kind, getattr(s, "turn_id", None))
            for s in self.signals
            if isinstance(s, RunStart | RunEnd | RunFailed)
        ]

    def terminals(self) -> list[RunEnd | RunFailed]:
        """The RunEnd and RunFailed signals, in order."""
        return [s for s in self.signals if isinstance(s, RunEnd | RunFailed)]

    def starts(self) -> list[RunStart]:
        """The RunStart signals, in order."""
        return [s for s in self.signals if isinstance(s, RunStart)]

    def messages(self) -> list[MessageAdded]:
        """The MessageAdded signals, in order."""
        return [s for s in self.signals if isinstance(s, MessageAdded)]


def assert_one_terminal_per_start(recorder: Recorder) -> None:
    """Every RunStart has exactly one terminal with its turn id, after all of its messages.

    Raises ``AssertionError`` naming the first turn that breaks the rule.
    """
    _check_pairs([s.turn_id for s in recorder.starts()], [t.turn_id for t in recorder.terminals()])
    position = {id(s): i for i, s in enumerate(recorder.signals)}
    terminal_at = {t.turn_id: position[id(t)] for t in recorder.terminals()}
    late = [
        m
        for m in recorder.messages()
        if m.turn_id is not None and position[id(m)] > terminal_at.get(m.turn_id, len(position))
    ]
    if late:
        raise AssertionError(
            f"turn {late[0].turn_id}: a MessageAdded was delivered after its terminal signal"
        )


def _check_pairs(started: list[UUID | None], ended: list[UUID | None]) -> None:
    if len(set(started)) != len(started):
        raise AssertionError(f"a turn id started twice: {started}")
    for turn_id in set(started) | set(ended):
        if started.count(turn_id) != 1 or ended.count(turn_id) != 1:
            raise AssertionError(
                f"turn {turn_id}: {started.count(turn_id)} RunStart and "
                f"{ended.count(turn_id)} terminal signals; expected one of each"
            )
