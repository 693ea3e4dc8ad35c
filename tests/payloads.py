"""Builders of provider wire payloads that tests script a :class:`ScriptedServer` with."""

from __future__ import annotations

from typing import Any

from tests.service.http_server import sse

__all__ = [
    "ANTHROPIC_USAGE",
    "DONE",
    "USAGE_EVENT",
    "anthropic_message",
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
