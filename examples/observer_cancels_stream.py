"""An observer that stops a streamed turn from outside it, with a control directive.

A guardrail watches the messages of every turn. When the model asks for the ``delete_files``
tool, it addresses ``CANCEL`` to that turn (by its ``turn_id``); the stream stops at its next
control point -- before the tool runs -- and the turn ends cleanly with ``RunEnd``.
(To refuse single tool calls rather than whole turns, see ``Session(authorize=...)``.)
"""

from __future__ import annotations

from typing import Any

import anyio

from lionagi import (
    ActionRequest,
    LoopDirective,
    MessageAdded,
    ModelResponse,
    RunEnd,
    RunFailed,
    Session,
    Signal,
    iModel,
)
from lionagi.testing import TestModel

deleted: list[str] = []


def delete_files(pattern: str) -> str:
    """Delete files matching ``pattern`` (here: only pretends to)."""
    deleted.append(pattern)
    return f"deleted {pattern}"


def guardrail(signal: MessageAdded, session: Session) -> None:
    """Observer handler: cancel any turn whose model asks for ``delete_files``."""
    message = signal.message
    if isinstance(message, ActionRequest) and message.function == "delete_files":
        branch = session.get_branch(signal.branch_id)
        accepted = branch.control(
            LoopDirective.CANCEL, reason="delete_files is not allowed", turn_id=signal.turn_id
        )
        print(f"guardrail: CANCEL sent to turn {signal.turn_id} (accepted: {accepted})")


def offline_model() -> TestModel:
    call = TestModel.scripted_tool_call("delete_files", pattern="*")
    return TestModel([ModelResponse(text="I will clean up the workspace.", tool_calls=(call,))])


async def main(model: iModel | None = None) -> dict[str, Any]:
    deleted.clear()
    terminals: list[str] = []

    def record_terminal(signal: Signal, session: Session) -> None:
        terminals.append(signal.kind)

    session = Session()
    session.observe(MessageAdded, guardrail)
    session.observe(RunEnd, record_terminal)
    session.observe(RunFailed, record_terminal)

    branch = session.new_branch(chat_model=model or offline_model(), tools=[delete_files])
    seen = []
    async for message in branch.run("Tidy up my workspace."):
        print(f"stream: {message.kind}")
        seen.append(message.kind)
    # The loop ended without an error, the tool never ran, and the Branch is free again.
    print(f"terminal signals: {terminals}; files deleted: {deleted}")
    return {"seen": seen, "terminals": terminals, "deleted": list(deleted)}


if __name__ == "__main__":
    anyio.run(main)
