"""Out-of-band loop control: directives an observer addresses to the active turn of a Branch."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING
from uuid import UUID

from lionagi.errors import LoopBreak, StopStream

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
