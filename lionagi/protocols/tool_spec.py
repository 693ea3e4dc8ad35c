"""The neutral description of a tool offered to a model: name, description, JSON schema.

Tools reach the library in several spellings: a :class:`~lionagi.protocols.tools.Tool`'s
schema (``{"type": "function", "function": {...}}``), a bare function schema
(``{"name", "description", "parameters"}``), or a :class:`ToolSpec`. :meth:`ToolSpec.of` reads
all of them once, where a request is built; providers render the spec into their own wire
format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lionagi.errors import ConfigurationError

__all__ = ["ToolSpec"]

_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool a model may call. ``parameters`` is the JSON schema of its argument object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_EMPTY_OBJECT))

    @classmethod
    def of(cls, value: ToolSpec | Mapping[str, Any]) -> ToolSpec:
        """``value`` as a spec: a spec, or a function schema wrapped in ``{"function": ...}``
        or bare. Raises :class:`~lionagi.errors.ConfigurationError` naming what is wrong."""
        if isinstance(value, ToolSpec):
            return value
        if not isinstance(value, Mapping):
            raise ConfigurationError(
                f"a tool must be a ToolSpec or a function schema dict, got "
                f"{type(value).__name__}: {value!r:.80}"
            )
        function = value.get("function", value)
        if not isinstance(function, Mapping):
            raise ConfigurationError(f"tool schema 'function' must be a dict, got {value!r:.120}")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"tool schema without a function name: {value!r:.120}")
        description = function.get("description") or ""
        if not isinstance(description, str):
            raise ConfigurationError(
                f"tool {name!r}: description must be text, got {description!r:.80}"
            )
        parameters = function.get("parameters") or _EMPTY_OBJECT
        if not isinstance(parameters, Mapping):
            raise ConfigurationError(
                f"tool {name!r}: parameters must be a JSON-schema dict, got {parameters!r:.80}"
            )
        return cls(name=name, description=description, parameters=dict(parameters))

    def function_schema(self) -> dict[str, Any]:
        """The ``{"type": "function", "function": {...}}`` form :class:`Tool` schemas use."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }
