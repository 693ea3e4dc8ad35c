"""Several callers on one Branch, on trio: they queue, and each sees the turns before it.

Five tasks ask one Branch at once. Their turns run one after another in arrival order, so each
reply is computed from a history that holds every earlier exchange whole. A caller that gives
up while waiting leaves no trace. Another Branch is never held up: the first turn below cannot
even finish until the other Branch has answered. The same code runs on asyncio -- only the
last line picks trio.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from lionagi import Branch, Instruction, Message
from lionagi.testing import FunctionModel


def count_earlier(messages: Sequence[Message]) -> str:
    """Reply with the question and how many earlier questions the request carries."""
    questions = [m for m in messages if isinstance(m, Instruction)]
    return f"{questions[-1].instruction} saw {len(questions) - 1} earlier question(s)"


async def main() -> dict[str, Any]:
    busy = anyio.Event()  # a turn of `branch` is running
    other_answered = anyio.Event()

    async def model_fn(messages: Sequence[Message], **options: Any) -> str:
        busy.set()
        await other_answered.wait()  # a deadlock if branches serialized each other
        return count_earlier(messages)

    branch = Branch(system="Count the questions.", chat_model=FunctionModel(model_fn))
    other = Branch(chat_model=FunctionModel(lambda messages, **options: count_earlier(messages)))
    replies: list[str] = []

    async def caller(name: str) -> None:
        replies.append(await branch.communicate(name))

    async def impatient() -> None:
        await busy.wait()
        with anyio.move_on_after(0):  # gives up while queued: nothing is recorded
            await branch.communicate("impatient")

    async with anyio.create_task_group() as tg:
        for index in range(5):
            tg.start_soon(caller, f"caller-{index}")
        tg.start_soon(impatient)
        await busy.wait()
        other_reply = await other.communicate("other branch")
        other_answered.set()

    for reply in replies:
        print(reply)
    print(other_reply)
    history = [message.role for message in branch.msgs]
    print(f"history: {history}")
    return {"replies": replies, "history": history, "other": other_reply}


if __name__ == "__main__":
    anyio.run(main, backend="trio")
