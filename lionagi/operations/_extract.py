"""Tolerant extraction of a JSON object from model text, and validation into a schema.

Models wrap JSON in code fences, add prose around it, or make small syntax errors;
``json_repair`` reads all of that (clean JSON is parsed by ``json.loads`` first). A text that
holds several values comes back as a list of them, and the first object that fits the schema
wins. Keys are matched to the schema's fields case- and style-insensitively.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["extract_json", "validate_into"]

M = TypeVar("M", bound=BaseModel)


def extract_json(text: str) -> Any:
    """The JSON found in ``text`` (a list when it holds several values), or None."""
    if not isinstance(text, str):
        raise TypeError(f"expected text, got {type(text).__name__}")
    import json_repair  # on first use: a turn without structured output never needs it

    found = json_repair.loads(text)
    return None if found in ("", None) else found


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _align_keys(data: Any, model: type[BaseModel]) -> Any:
    if not isinstance(data, dict):
        return data
    fields: dict[str, str] = {}
    for name, info in model.model_fields.items():
        fields[_norm(name)] = name
        if info.alias:
            fields[_norm(info.alias)] = info.alias
    aligned: dict[str, Any] = {}
    for key, value in data.items():
        target = str(key) if key in model.model_fields else fields.get(_norm(str(key)), str(key))
        aligned.setdefault(target, value)
    return aligned


def validate_into(text: str, model: type[M]) -> M:
    """Parse ``text`` into ``model``; raises ValueError (with the first reason) when it cannot.

    When the text holds several values, each object among them is tried in order, then the
    whole list.
    """
    data = extract_json(text)
    if data is None:
        raise ValueError("no JSON object found in the text")
    options = [data]
    if isinstance(data, list):
        options = [item for item in data if isinstance(item, dict)] + options
    errors: list[ValidationError] = []
    for option in options:
        try:
            return model.model_validate(_align_keys(option, model))
        except ValidationError as exc:
            errors.append(exc)
    raise ValueError(_first_error(errors[0])) from None


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "(root)"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"field {where!r}: {first.get('msg', 'invalid')}{more}"
