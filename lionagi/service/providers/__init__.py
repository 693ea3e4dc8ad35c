"""Provider registry: names map to provider classes, imported on first use."""

from __future__ import annotations

import importlib
from typing import Any

from lionagi.service.errors import UnknownProviderError
from lionagi.service.providers._presets import OPENAI_COMPATIBLE
from lionagi.service.providers.base import Provider

__all__ = ["DEFAULT_PROVIDER", "PROVIDERS", "Provider", "known_providers", "provider_class"]

# name -> (module, class, preset settings). OpenAI-compatible servers differ only in presets.
PROVIDERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "openai": ("lionagi.service.providers.openai", "OpenAIChatProvider", {}),
    "ollama": (
        "lionagi.service.providers.openai",
        "OpenAIChatProvider",
        {"base_url": "http://localhost:11434/v1", "api_key_env": None, "name": "ollama"},
    ),
    "vllm": (
        "lionagi.service.providers.openai",
        "OpenAIChatProvider",
        {"base_url": "http://localhost:8000/v1", "api_key_env": None, "name": "vllm"},
    ),
    "openrouter": (
        "lionagi.service.providers.openai",
        "OpenAIChatProvider",
        {
            "base_url": "https://openrouter.ai/api/v1",
            "api_key_env": "OPENROUTER_API_KEY",
            "name": "openrouter",
        },
    ),
    "groq": (
        "lionagi.service.providers.openai",
        "OpenAIChatProvider",
        {
            "base_url": "https://api.groq.com/openai/v1",
            "api_key_env": "GROQ_API_KEY",
            "name": "groq",
            # json_schema only on some Groq models; a JSON object on all of them
            "structured_output": "json_object",
        },
    ),
    "openai_responses": (
        "lionagi.service.providers.openai_responses",
        "OpenAIResponsesProvider",
        {},
    ),
    "anthropic": ("lionagi.service.providers.anthropic", "AnthropicProvider", {}),
    "claude_code": ("lionagi.service.providers.claude_code", "ClaudeCodeProvider", {}),
    "codex": ("lionagi.service.providers.codex", "CodexProvider", {}),
    "gemini_code": ("lionagi.service.providers.gemini_cli", "GeminiCLIProvider", {}),
}
PROVIDERS.update(
    (
        name,
        (
            "lionagi.service.providers.openai",
            "OpenAIChatProvider",
            {
                "base_url": p.base_url,
                "api_key_env": p.api_key_env,
                "name": name,
                "structured_output": p.structured_output,
            },
        ),
    )
    for name, p in OPENAI_COMPATIBLE.items()
)
#: provider used when ``iModel(model=...)`` names no provider
DEFAULT_PROVIDER = "openai"


def known_providers() -> list[str]:
    return sorted(PROVIDERS)


def provider_class(
    name: str, *, base_url: str | None = None
) -> tuple[type[Provider], dict[str, Any]]:
    """The provider class registered as ``name`` and its preset settings.

    An unregistered name with a ``base_url`` is an OpenAI-compatible server of that name
    (no API-key variable: pass ``api_key``)."""
    try:
        module_name, class_name, presets = PROVIDERS[name]
    except KeyError:
        if base_url is None:
            raise UnknownProviderError(
                f"unknown provider {name!r}; known providers: {', '.join(known_providers())}; "
                "for another OpenAI-compatible server pass its base_url"
            ) from None
        module_name, class_name = PROVIDERS["openai"][:2]
        presets = {"api_key_env": None, "name": name}
    cls: type[Provider] = getattr(importlib.import_module(module_name), class_name)
    return cls, dict(presets)
