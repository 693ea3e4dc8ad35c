"""Hosted services that speak the OpenAI chat-completions API: a base URL and a key variable.

Each preset is only settings for :class:`~lionagi.service.providers.openai.OpenAIChatProvider`;
``iModel("deepseek", "deepseek-chat")`` is ``iModel("openai", ..., base_url=...)`` with the key
read from the service's usual environment variable.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["OPENAI_COMPATIBLE", "Preset"]


class Preset(NamedTuple):
    base_url: str
    api_key_env: str | None
    #: what the service offers through this API (for the providers guide)
    supports: str
    #: how a ``response_format`` is asked for (see ``StructuredOutput``)
    structured_output: str = "json_schema"


OPENAI_COMPATIBLE: dict[str, Preset] = {
    "gemini": Preset(
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
        "chat, streaming, tools, structured output, embeddings",
    ),
    "deepseek": Preset(
        "https://api.deepseek.com/v1",
        "DEEPSEEK_API_KEY",
        "chat, streaming, tools, JSON output",
        "json_object",  # no JSON-schema mode
    ),
    "perplexity": Preset(
        "https://api.perplexity.ai",
        "PERPLEXITY_API_KEY",
        "chat with web search, streaming, structured output",
    ),
    "nvidia_nim": Preset(
        "https://integrate.api.nvidia.com/v1",
        "NVIDIA_API_KEY",
        "chat, streaming, tools (model-dependent), embeddings",
    ),
    "mistral": Preset(
        "https://api.mistral.ai/v1",
        "MISTRAL_API_KEY",
        "chat, streaming, tools, structured output, embeddings",
    ),
    "xai": Preset(
        "https://api.x.ai/v1",
        "XAI_API_KEY",
        "chat, streaming, tools, structured output",
    ),
    "together": Preset(
        "https://api.together.xyz/v1",
        "TOGETHER_API_KEY",
        "chat, streaming, tools (model-dependent), embeddings",
    ),
    "fireworks": Preset(
        "https://api.fireworks.ai/inference/v1",
        "FIREWORKS_API_KEY",
        "chat, streaming, tools (model-dependent), embeddings",
    ),
}
