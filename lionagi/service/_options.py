"""Request options: the common names every provider understands, mapped to each wire format.

Callers pass options by their common (OpenAI-style) names — ``temperature``, ``top_p``,
``max_tokens``, ``stop``, ``seed``... A provider renames what it spells differently (Anthropic:
``stop`` becomes ``stop_sequences``) and refuses what it cannot take, with a
:class:`~lionagi.errors.ConfigurationError` naming the option and what to do, rather than
letting the server answer 400. Names a provider does not know are passed on unchanged (new API
parameters keep working); ``extra_body`` is merged into the body last, as is.

Settings about tool use (``tool_choice``...) are dropped from a body that sends no tools: a
model's default ``tool_choice`` would otherwise go out on every plain call, which OpenAI and
Anthropic answer with 400.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lionagi.errors import ConfigurationError

__all__ = ["apply_options", "drop_tool_settings"]

Rename = tuple[str, Callable[[Any], Any]]


def apply_options(
    body: dict[str, Any],
    options: Mapping[str, Any],
    *,
    provider: str,
    renames: Mapping[str, Rename],
    refused: Mapping[str, str],
) -> None:
    """Add ``options`` to ``body``: ``renames`` maps a common name to the provider's name and
    a value conversion; ``refused`` maps a name the provider cannot take to the reason."""
    extra: Any = None
    for key, value in options.items():
        if key == "extra_body":
            extra = value
            continue
        if key in refused:
            raise ConfigurationError(
                f"{provider} does not take the option {key!r} ({refused[key]}); remove it, or "
                "pass the provider's own parameter in extra_body={...}"
            )
        if key in renames:
            name, convert = renames[key]
            body[name] = convert(value)
        else:
            body[key] = value
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise ConfigurationError(
                f"extra_body must be a dict of body fields, got {type(extra).__name__}"
            )
        body.update(extra)


def drop_tool_settings(body: dict[str, Any], names: tuple[str, ...]) -> None:
    """Remove the tool-use settings ``names`` from ``body`` when it sends no ``tools``.

    They are commonly set as a model's defaults (``iModel(..., tool_choice="auto")``) and then
    reach calls without tools, which the APIs reject ("tool_choice is only allowed when tools
    are specified"); without tools they mean nothing, so leaving them out changes no reply.
    """
    if not body.get("tools"):
        for name in names:
            body.pop(name, None)
