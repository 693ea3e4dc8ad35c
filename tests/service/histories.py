"""Random append-only conversations and the requests made from them, for the tests of request
bodies assembled from an encoded prefix."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
)
from lionagi.protocols.tool_spec import ToolSpec
from lionagi.service.types import ModelRequest, StructuredOutput

SCHEMA = {"title": "Answer", "type": "object", "properties": {"n": {"type": "integer"}}}
TOOL = ToolSpec(name="add", description="Add.", parameters={"type": "object"})


def request(
    messages: Sequence[Message],
    *,
    schema: dict[str, Any] | None = None,
    mode: StructuredOutput = "json_schema",
    **options: Any,
) -> ModelRequest:
    return ModelRequest(
        model="m",
        messages=messages,
        tools=(TOOL,),
        response_format=schema,
        options=options,
        structured_output=mode,
    )


def grow(rng: random.Random, history: list[Message], turn: int) -> None:
    """Append one turn's messages: text replies, tool rounds (some calls never answered, some
    parallel), instructions with and without a schema or images."""
    history.append(
        Instruction(
            instruction=f"question {turn} \ud800" if turn == 7 else f"question {turn}",
            response_format=SCHEMA if rng.random() < 0.2 else None,
            images=("https://example.com/a.png",) if rng.random() < 0.1 else (),
        )
    )
    shape = rng.choice(["text", "tools", "calls_only", "unanswered", "parallel"])
    if shape != "calls_only":
        history.append(AssistantResponse(content=f"answer {turn}"))
    if shape == "text":
        return
    calls = [
        ActionRequest(call_id=f"c{turn}_{i}", function="add", arguments={"a": i})
        for i in range(2 if shape == "parallel" else 1)
    ]
    history.extend(calls)
    if shape != "unanswered":
        history.extend(
            ActionResponse(request_id=c.id, call_id=c.call_id, function="add", output=1)
            for c in calls
        )
