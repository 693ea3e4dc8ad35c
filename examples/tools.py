"""Tools: plain Python functions a model may call, validated, run concurrently, recorded.

``operate(actions=True)`` offers the Branch's tools to the model; the calls of one reply run
concurrently (a sync function in a worker thread), their results are recorded in request order,
and the model is asked once more for the answer. ``act`` runs a tool call directly. Bad
arguments become an error result the model can read, not a crashed turn.
"""

from __future__ import annotations

from typing import Any

import anyio

from lionagi import Branch, iModel
from lionagi.testing import TestModel


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


async def weather(city: str) -> str:
    """Today's weather in a city."""
    await anyio.sleep(0.01)  # pretend to ask a weather service
    return f"sunny in {city}"


def offline_model() -> TestModel:
    call = TestModel.scripted_tool_call
    return TestModel(
        [
            [call("add", a=2, b=3), call("weather", city="Oslo")],  # two calls in one reply
            "2 + 3 = 5, and it is sunny in Oslo.",  # the answer, after the results
        ]
    )


async def main(model: iModel | None = None) -> dict[str, Any]:
    branch = Branch(chat_model=model or offline_model(), tools=[add, weather])
    print(branch.tools.get("add").schema["function"]["parameters"])

    result = await branch.operate(
        instruction="What is 2 + 3, and what is the weather in Oslo?", actions=True
    )
    for response in result.action_responses:
        print(f"{response.function}({response.arguments}) -> {response.output}")
    print(result.text)

    # Run a tool call yourself (no model, no turn); arguments are validated first.
    direct = await branch.act({"function": "add", "arguments": {"a": 40, "b": 2}})
    refused = await branch.act({"function": "add", "arguments": {"a": "forty", "b": 2}})
    print(direct.output, refused.is_error, refused.output)
    return {
        "answer": result.text,
        "outputs": [r.output for r in result.action_responses],
        "direct": direct.output,
        "refused": refused.is_error,
        "history": [message.kind for message in branch.msgs],
    }


if __name__ == "__main__":
    anyio.run(main)
