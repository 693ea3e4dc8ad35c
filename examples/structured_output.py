"""Structured output: replies parsed into pydantic models, tolerantly.

``communicate(response_format=...)`` records the exchange and parses the reply; ``parse`` turns
any text into the model, repairing fenced or slightly broken JSON locally and asking the parse
model to reformat only when that fails; ``operate`` adds the model's reasoning on request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import anyio
from pydantic import BaseModel

from lionagi import Branch, Instruction, Message, iModel
from lionagi.testing import FunctionModel, TestModel


class Person(BaseModel):
    name: str
    born: int


def reformat(messages: Sequence[Message], **options: Any) -> str:
    """An offline parse model: finds a name and a year in the text it was asked to rewrite."""
    ask = messages[-1]
    if not (isinstance(ask, Instruction) and isinstance(ask.context, dict)):
        raise TypeError("expected the parse request: an Instruction with the text as context")
    text = str(ask.context["text"])
    found = re.search(r"([A-Z]\w+ [A-Z]\w+)\D*(\d{4})", text)
    name, year = found.groups() if found else ("unknown", "0")
    return json.dumps({"name": name, "born": int(year)})


def offline_model() -> TestModel:
    return TestModel(
        [
            # chatty, fenced JSON: extracted locally
            "Sure! Here it is:\n"
            '```json\n{"name": "Ada Lovelace", "born": 1815}\n```\n'
            "Anything else?",
            # what operate(reason=True) asks for: the fields plus a reason
            '{"name": "Alan Turing", "born": 1912, '
            '"reason": {"content": "Born in London in 1912.", "confidence_score": 0.95}}',
        ]
    )


async def main(model: iModel | None = None) -> dict[str, Any]:
    parse_model = FunctionModel(reformat)
    branch = Branch(chat_model=model or offline_model(), parse_model=parse_model)

    ada = await branch.communicate("Who wrote the first program?", response_format=Person)
    print(repr(ada))

    # Python-style quotes and a trailing comma: repaired locally, no model call.
    grace = await branch.parse("{'name': 'Grace Hopper', 'born': 1906,}", response_format=Person)
    local_calls = len(parse_model.calls)
    # No JSON at all: the parse model reformats it.
    grace_again = await branch.parse("Grace Hopper was born in 1906.", response_format=Person)
    print(repr(grace), repr(grace_again), f"parse-model calls: {len(parse_model.calls)}")

    alan = await branch.operate(
        instruction="Who broke Enigma?", response_format=Person, reason=True
    )
    print(repr(alan), alan.reason)
    return {
        "ada": ada,
        "grace": grace,
        "grace_again": grace_again,
        "parse_calls": (local_calls, len(parse_model.calls)),
        "alan": alan,
    }


if __name__ == "__main__":
    anyio.run(main)
