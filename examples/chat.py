"""A first conversation: a Branch, two recorded turns, and the turn ids observers see.

Runs offline on a FunctionModel. To talk to a real model, pass one:
``anyio.run(main, iModel("openai/gpt-4o-mini"))`` (reads ``OPENAI_API_KEY``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import anyio

from lionagi import Instruction, Message, RunEnd, RunStart, Session, iModel
from lionagi.testing import FunctionModel


def reply(messages: Sequence[Message], **options: Any) -> str:
    """An offline 'model': answers the last question and says how much history it saw."""
    asked = [m for m in messages if isinstance(m, Instruction)]
    return f"answer {len(asked)}: you asked {asked[-1].instruction!r}"


async def main(model: iModel | None = None) -> dict[str, Any]:
    session = Session()
    lifecycle: list[tuple[str, UUID | None]] = []
    session.observe(RunStart, lambda signal, _: lifecycle.append(("start", signal.turn_id)))
    session.observe(RunEnd, lambda signal, _: lifecycle.append(("end", signal.turn_id)))

    branch = session.new_branch(
        system="You answer in one sentence.",
        chat_model=model or FunctionModel(reply),
    )
    first = await branch.communicate("What is a turn?")
    second = await branch.communicate("And a scope?")  # sees the first exchange as history
    for kind, turn_id in lifecycle:
        print(f"{kind:>5}  turn {turn_id}")
    print(first)
    print(second)
    return {
        "replies": [first, second],
        "history": [message.role for message in branch.msgs],
        "lifecycle": lifecycle,
    }


if __name__ == "__main__":
    anyio.run(main)
