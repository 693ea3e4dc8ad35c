"""A terminal chat on trio that shows a ReAct agent's work live: its thinking streams word by
word as the structured analysis fills in, each tool call appears as it arrives, the tool runs,
then the answer streams.

``branch.ReActEvents(...)`` hands out the whole reason-act run as typed events;
``match`` picks what to print. The model here is offline and scripted (think and call
``multiply``, think again, answer), so this runs anywhere; swap in ``iModel("openai", ...)`` for
a real one. The same code runs on asyncio -- only the last line picks trio.
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from lionagi import (
    Branch,
    ModelResponse,
    PartialObjectEvent,
    ResultEvent,
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
    """Thinks and calls ``multiply``, thinks about the result, then answers."""
    call = TestModel.scripted_tool_call("multiply", a=6, b=7)
    first = {"analysis": "I will multiply the two numbers.", "extension_needed": True}
    second = {"analysis": "The tool says the product is 42.", "extension_needed": False}
    return TestModel(
        [
            ModelResponse(text=json.dumps(first), tool_calls=(call,)),
            json.dumps(second),
            "6 times 7 is 42.",
        ]
    )


async def main() -> dict[str, Any]:
    branch = Branch(system="Use tools for arithmetic.", chat_model=agent_model(), tools=[multiply])
    shown: list[str] = []  # what the terminal printed, line by line
    line: list[str] = []  # the line being printed
    thought = ""  # the analysis printed so far in this round
    answering = False

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

    async with branch.ReActEvents("What is 6 x 7?") as stream:
        async for event in stream:
            match event:
                case PartialObjectEvent(data={"analysis": str(analysis)}):
                    write(analysis[len(thought) :])  # the thinking, as it fills in
                    thought = analysis
                case TextDeltaEvent(text=text) if answering:
                    write(text)  # the answer, as it arrives
                case ToolCallDeltaEvent(name=str(name)):  # a call's first delta names it
                    say(f"[calling {name}]")
                case ToolStarted(request=request):
                    say(f"[running {request.function}({request.arguments})]")
                case ToolFinished(response=response):
                    say(f"[result: {response.output}]")
                case ResultEvent(value=analysis, final=False):  # a round is done
                    end_line()
                    thought = ""
                    answering = not analysis.extension_needed
                case ResultEvent(final=True):
                    end_line()
    return {"shown": shown, "history": [type(m).__name__ for m in branch.msgs]}


if __name__ == "__main__":
    anyio.run(main, backend="trio")
