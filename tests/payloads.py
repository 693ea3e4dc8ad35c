"""Builders of provider wire payloads that tests script a :class:`ScriptedServer` with."""

from __future__ import annotations

from typing import Any

from tests.service.http_server import Reply, sse

__all__ = [
    "ANTHROPIC_USAGE",
    "DONE",
    "TEXT_REPLY",
    "TOOL_CALL_EVENTS",
    "TOOL_REPLY",
    "USAGE_EVENT",
    "anthropic_end",
    "anthropic_event",
    "anthropic_message",
    "anthropic_start",
    "anthropic_text_block",
    "anthropic_tool_block",
    "call_delta",
    "chunk",
    "completion",
]

DONE = "data: [DONE]\n\n"
"""The SSE event that ends an OpenAI chat-completions stream."""

USAGE_EVENT = sse(
    {
        "id": "chatcmpl-1",
        "model": "gpt-test-0001",
        "choices": [],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 16},
        },
    }
)
"""An OpenAI stream event carrying only usage (what ``stream_options.include_usage`` adds)."""

ANTHROPIC_USAGE = {
    "input_tokens": 10,
    "output_tokens": 4,
    "cache_read_input_tokens": 100,
    "cache_creation_input_tokens": 20,
}
"""The usage block of :func:`anthropic_message`."""


def completion(message: dict[str, Any], *, finish: str = "stop", **extra: Any) -> dict[str, Any]:
    """An OpenAI chat-completions response body with one choice holding ``message``."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test-0001",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 8},
        },
        **extra,
    }


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    """One OpenAI chat-completions stream event carrying ``delta``."""
    return sse(
        {
            "id": "chatcmpl-1",
            "model": "gpt-test-0001",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def anthropic_message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    """An Anthropic Messages response body holding ``content`` blocks."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20250101",
        "content": content,
        "stop_reason": stop,
        "usage": ANTHROPIC_USAGE,
    }


def call_delta(index: int, **fields: Any) -> str:
    """An OpenAI stream event with one tool-call delta at ``index``: ``id`` starts the call,
    ``name`` and ``arguments`` are its function's fields."""
    entry: dict[str, Any] = {"index": index}
    if "id" in fields:
        entry.update(id=fields["id"], type="function")
    entry["function"] = {k: v for k, v in fields.items() if k in ("name", "arguments")}
    return chunk({"tool_calls": [entry]})


TOOL_CALL_EVENTS = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Let me "}),
    chunk({"content": "compute."}),
    call_delta(0, id="call_a", name="multiply", arguments=""),
    call_delta(0, arguments='{"a": 6,'),
    call_delta(0, arguments=' "b": 7}'),
]
"""An OpenAI stream up to the end of its call's arguments: a little text, then one call of
``multiply(a=6, b=7)`` whose arguments arrive in two deltas."""

TOOL_REPLY = Reply(events=[*TOOL_CALL_EVENTS, chunk({}, finish="tool_calls"), USAGE_EVENT, DONE])
""":data:`TOOL_CALL_EVENTS`, then the call's finish, usage and the end of the stream."""

TEXT_REPLY = Reply(
    events=[
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "6 x 7 = "}),
        chunk({"content": "42."}),
        chunk({}, finish="stop"),
        USAGE_EVENT,
        DONE,
    ]
)
"""An OpenAI stream answering with text only."""


def anthropic_event(kind: str, **fields: Any) -> str:
    """One Anthropic Messages stream event of type ``kind``."""
    return sse({"type": kind, **fields}, event=kind)


def anthropic_start() -> list[str | Any]:
    """The events that open an Anthropic stream: ``message_start`` and a ``ping``."""
    started = anthropic_message([], stop="")
    started.update(stop_reason=None, usage={**ANTHROPIC_USAGE, "output_tokens": 1})
    return [anthropic_event("message_start", message=started), anthropic_event("ping")]


def anthropic_text_block(index: int, *pieces: str) -> list[str | Any]:
    """A text content block at ``index`` whose text arrives as ``pieces``."""
    return [
        anthropic_event(
            "content_block_start", index=index, content_block={"type": "text", "text": ""}
        ),
        *(
            anthropic_event(
                "content_block_delta", index=index, delta={"type": "text_delta", "text": p}
            )
            for p in pieces
        ),
        anthropic_event("content_block_stop", index=index),
    ]


def anthropic_tool_block(index: int, call_id: str, name: str, *pieces: str) -> list[str | Any]:
    """A ``tool_use`` block at ``index`` whose input JSON arrives as ``pieces``."""
    start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return [
        anthropic_event("content_block_start", index=index, content_block=start),
        *(
            anthropic_event(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": p},
            )
            for p in pieces
        ),
        anthropic_event("content_block_stop", index=index),
    ]


def anthropic_end(stop: str = "end_turn") -> list[str | Any]:
    """The events that end an Anthropic stream with ``stop`` as its stop reason."""
    return [
        anthropic_event("message_delta", delta={"stop_reason": stop}, usage={"output_tokens": 9}),
        anthropic_event("message_stop"),
    ]
