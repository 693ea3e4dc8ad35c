"""A terminal chat on trio that shows an agent's work live: its thinking streams word by word,
each tool call appears as its arguments arrive, the tool runs, then the answer streams.

``branch.stream(...)`` hands out the turn as typed events; ``match`` picks what to print. The
model here is offline and scripted (think, call ``multiply``, answer), so this runs anywhere;
swap in ``iModel("openai", ...)`` for a real one. The same code runs on asyncio -- only the last
line picks trio.
"""

from __future__ import annotations

from typing import Any

import anyio

from lionagi import (
    AssistantResponse,
    Branch,
    MessageCommitted,
    ModelResponse,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolFinished,
    ToolStarted,
)
from lionagi.testing import TestModel


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def agent_model() -> TestModel:
    """Thinks aloud and calls ``multiply``, then answers from the tool's result."""
    call = TestModel.scripted_tool_call("multiply", a=6, b=7)
    think_and_call = ModelResponse(text="I will multiply them.", tool_calls=(call,))
    return TestModel([think_and_call, "6 times 7 is 42."])


async def main() -> dict[str, Any]:
    branch = Branch(system="Use tools for arithmetic.", chat_model=agent_model(), tools=[multiply])
    shown: list[str] = []  # what the terminal printed, line by line
    line: list[str] = []  # the line being printed

    def write(text: str) -> None:
        print(text, end="", flush=True)
        line.append(text)

    def end_line() -> None:
        if line:
            print()
            shown.append("".join(line))
            line.clear()

    def say(text: str) -> None:
        end_line()
        write(text)
        end_line()

    async with branch.stream("What is 6 x 7?") as stream:
        async for event in stream:
            match event:
                case TextDeltaEvent(text=text):
                    write(text)  # as it arrives
                case ToolCallDeltaEvent(name=str(name)):  # a call's first delta names it
                    say(f"[calling {name}]")
                case ToolStarted(request=request):
                    say(f"[running {request.function}({request.arguments})]")
                case ToolFinished(response=response):
                    say(f"[result: {response.output}]")
                case MessageCommitted(message=AssistantResponse()):
                    end_line()  # the reply is whole and recorded
    return {"shown": shown, "history": [type(m).__name__ for m in branch.msgs]}


if __name__ == "__main__":
    anyio.run(main, backend="trio")
