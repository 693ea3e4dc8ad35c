"""ReAct: the model reasons, calls tools, may ask for more rounds, then answers -- one turn.

Each round is an ``operate`` with reasoning and tools; the final answer follows the
``response_format``. However many rounds and tool calls it takes, observers see one
``RunStart`` and one ``RunEnd``.
"""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel

from lionagi import RunEnd, RunFailed, RunStart, Session, Signal, iModel
from lionagi.testing import TestModel

POPULATIONS = {"Oslo": 709_000, "Bergen": 291_000}
tools_run: list[str] = []


class CityFact(BaseModel):
    city: str
    population: int


async def population(city: str) -> int:
    """The population of a Norwegian city."""
    tools_run.append("population")
    return POPULATIONS[city]


def offline_model() -> TestModel:
    return TestModel(
        [
            # round 1: the model calls the tool...
            [TestModel.scripted_tool_call("population", city="Oslo")],
            # ...then, with the result in the history, writes its analysis
            '{"analysis": "The tool says Oslo has 709000 people.", "extension_needed": false,'
            ' "reason": {"content": "The tool answered directly.", "confidence_score": 0.9}}',
            # the final answer, in the requested format
            '{"city": "Oslo", "population": 709000}',
        ]
    )


async def main(model: iModel | None = None) -> dict[str, Any]:
    tools_run.clear()
    lifecycle: list[str] = []

    def record(signal: Signal, session: Session) -> None:
        lifecycle.append(signal.kind)

    session = Session()
    for kind in (RunStart, RunEnd, RunFailed):
        session.observe(kind, record)
    branch = session.new_branch(chat_model=model or offline_model(), tools=[population])

    answer, analyses = await branch.ReAct(
        "How many people live in Oslo?",
        response_format=CityFact,
        max_extensions=2,
        return_analysis=True,
    )
    for number, analysis in enumerate(analyses, 1):
        print(f"round {number}: {analysis.analysis}")
    print(repr(answer), lifecycle)
    return {
        "answer": answer,
        "rounds": len(analyses),
        "tools_run": list(tools_run),
        "lifecycle": lifecycle,
    }


if __name__ == "__main__":
    anyio.run(main)
