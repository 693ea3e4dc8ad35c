"""Tolerant extraction of a JSON object from model text, and validation into a schema.

Models wrap JSON in code fences, add prose around it, or make small syntax errors. Candidates are
tried from the most to the least literal: each fenced block, the whole text, then the repaired
text (``json_repair``). Keys are matched to the schema's fields case- and style-insensitively.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

__all__ = ["extract_json", "validate_into"]

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:[A-Za-z0-9_+-]*)?\s*\n?(.*?)```", re.DOTALL)


def _candidates(text: str) -> list[str]:
    found = [block.strip() for block in _FENCE.findall(text)]
    found.append(text.strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        found.append(text[start : end + 1])
    return [c for c in found if c]


def extract_json(text: str) -> Any:
    """The first JSON value found in ``text`` (objects preferred), or None."""
    if not isinstance(text, str):
        raise TypeError(f"expected text, got {type(text).__name__}")
    candidates = _candidates(text)
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    for candidate in candidates:
        repaired = json_repair.loads(candidate)
        if repaired not in ("", None):
            return repaired
    return None


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
    """Parse ``text`` into ``model``; raises ValueError (with the last reason) when it cannot."""
    data = extract_json(text)
    if data is None:
        raise ValueError("no JSON object found in the text")
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]
    try:
        return model.model_validate(_align_keys(data, model))
    except ValidationError as exc:
        raise ValueError(_first_error(exc)) from None


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "(root)"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"field {where!r}: {first.get('msg', 'invalid')}{more}"
