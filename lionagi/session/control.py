"""Out-of-band loop control: directives an observer addresses to the active turn of a Branch."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING
from uuid import UUID

from lionagi.errors import LionError

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope

__all__ = ["LoopBreak", "LoopControl", "LoopDirective", "StopStream", "check_control"]


class LoopDirective(StrEnum):
    """What a running turn should do at its next control point."""

    CONTINUE = "continue"
    BREAK = "break"
    CANCEL = "cancel"


@dataclass(frozen=True, slots=True)
class LoopControl:
    """One directive, attributed to the turn it was issued for."""

    directive: LoopDirective
    turn_id: UUID
    reason: str | None = None


class LoopBreak(LionError):
    """A BREAK directive stopped the turn. The turn ends with ``RunFailed``."""

    def __init__(self, control: LoopControl) -> None:
        why = f": {control.reason}" if control.reason else ""
        super().__init__(f"turn {control.turn_id} stopped by a BREAK directive{why}")
        self.control = control


class StopStream(LionError):
    """A CANCEL directive ended the turn cleanly. The turn ends with ``RunEnd``; a stream
    simply stops, a coroutine operation re-raises this so its caller knows there is no result."""

    def __init__(self, control: LoopControl | None = None, reason: str | None = None) -> None:
        why = reason or (control.reason if control else None)
        super().__init__("stream stopped" + (f": {why}" if why else ""))
        self.control = control


def check_control(scope: TurnScope) -> None:
    """Consume the turn's pending directive: CONTINUE/none is a no-op, BREAK raises
    :class:`LoopBreak`, CANCEL raises :class:`StopStream`."""
    context = scope.context
    control = context.control
    if control is None:
        return
    context.control = None
    if control.directive is LoopDirective.BREAK:
        raise LoopBreak(control)
    if control.directive is LoopDirective.CANCEL:
        raise StopStream(control)
