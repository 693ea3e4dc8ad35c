"""A streamed turn: ``run`` hands out each message as it is committed to the history.

The model answers with text and a tool call; the tool runs and the model is streamed again
with its result -- all inside one turn. A second run is closed early by its consumer
(``async with`` + ``break``): that ends the turn cleanly (``RunEnd``), closes the model's stream
at once and frees the Branch for the next turn.
"""

from __future__ import annotations

from typing import Any

import anyio

from lionagi import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    ModelResponse,
    RunEnd,
    RunFailed,
    Session,
    Signal,
    iModel,
)
from lionagi.testing import TestModel


def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def offline_model() -> TestModel:
    call = TestModel.scripted_tool_call("word_count", text="to be or not to be")
    return TestModel(
        [
            ModelResponse(text="Let me count.", tool_calls=(call,)),
            "The line has 6 words.",
            "Once upon a time...",
        ]
    )


def describe(message: Message) -> str:
    if isinstance(message, Instruction):
        return f"instruction: {message.instruction}"
    if isinstance(message, AssistantResponse):
        return f"assistant: {message.content}"
    if isinstance(message, ActionRequest):
        return f"tool call: {message.function}({message.arguments})"
    if isinstance(message, ActionResponse):
        return f"tool result: {message.output}"
    return message.kind


async def main(model: iModel | None = None) -> dict[str, Any]:
    session = Session()
    terminals: list[str] = []

    def record_terminal(signal: Signal, session: Session) -> None:
        terminals.append(signal.kind)

    session.observe(RunEnd, record_terminal)
    session.observe(RunFailed, record_terminal)
    branch = session.new_branch(chat_model=model or offline_model(), tools=[word_count])

    streamed = []
    async for message in branch.run("How many words in 'to be or not to be'?"):
        print(describe(message))
        streamed.append(message.kind)

    # Stop reading early: leaving the block closes the stream on break or error. The first
    # message is the instruction, handed out once committed together with the model's first
    # reply; the turn ends here and the Branch is free for the next caller.
    async with branch.run("Tell me a long story.") as stream:
        async for message in stream:
            print(f"first and only: {describe(message)}")
            break

    print(f"terminal signals: {terminals}")
    return {
        "streamed": streamed,
        "terminals": terminals,
        "history": [message.kind for message in branch.msgs],
    }


if __name__ == "__main__":
    anyio.run(main)
