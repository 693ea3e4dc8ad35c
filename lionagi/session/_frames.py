"""Branch and Session histories as pandas DataFrames (the ``lionagi[pandas]`` extra)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lionagi.errors import MissingDependencyError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)

if TYPE_CHECKING:
    from lionagi.session.branch import Branch

__all__ = ["COLUMNS", "message_text", "messages_frame"]

#: The columns of :func:`messages_frame`, in order.
COLUMNS = ("branch_id", "id", "kind", "role", "created_at", "content", "message")


def messages_frame(branches: Iterable[Branch]) -> Any:
    """One row per message of each branch, in history order: ``branch_id``, message ``id``,
    ``kind``, ``role``, ``created_at`` (a UTC timestamp), ``content`` (its text) and
    ``message`` (the whole message as JSON-safe data)."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingDependencyError(
            "to_df() needs pandas, which is not installed; install the extra: "
            "pip install 'lionagi[pandas]'"
        ) from None
    rows = [
        (
            str(branch.id),
            str(message.id),
            message.model_dump(include={"kind"})["kind"],
            message.role,
            message.created_at,
            message_text(message),
            message.model_dump(mode="json"),
        )
        for branch in branches
        for message in branch.msgs
    ]
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    frame["created_at"] = pd.to_datetime(frame["created_at"], unit="s", utc=True)
    return frame


def message_text(message: Message) -> str:
    """The text of a message: its content, rendered instruction, or tool call/result JSON."""
    if isinstance(message, System | AssistantResponse):
        return message.content
    if isinstance(message, Instruction):
        return message.render_text()
    if isinstance(message, ActionRequest):
        return json.dumps({"function": message.function, "arguments": message.arguments})
    if isinstance(message, ActionResponse):
        return json.dumps(message.output, default=str)
    return ""
