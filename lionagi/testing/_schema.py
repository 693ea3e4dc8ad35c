"""Deterministic JSON values valid for a JSON schema: what an unscripted ``TestModel`` answers."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lionagi.errors import ConfigurationError

__all__ = ["schema_example"]


class _Recursion(Exception):
    """A ``$ref`` cycle reached a place that must hold a value."""


_FORMATS: dict[str, str] = {
    "date-time": "2000-01-01T00:00:00Z",
    "date": "2000-01-01",
    "time": "00:00:00",
    "duration": "PT0S",
    "email": "x@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "hostname": "example.com",
}


def schema_example(schema: Mapping[str, Any]) -> Any:
    """A JSON value valid for ``schema``, the same every time (see :class:`TestModel`).

    Local ``$ref`` (``#/$defs/...``) are followed; a recursive reference ends in an empty
    array or an omitted optional field.
    """
    try:
        return _example(schema, schema, ())
    except _Recursion:
        raise ConfigurationError(
            "TestModel cannot build an example for a schema whose recursion is required at "
            "every level"
        ) from None


def _example(node: Any, root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    if node is True or not node:
        return "x"  # any value is valid
    if not isinstance(node, Mapping):
        raise ConfigurationError(f"TestModel cannot read JSON schema node {node!r:.80}")
    for keyword, by_keyword in _BY_KEYWORD:
        if keyword in node:
            return by_keyword(node[keyword], root, refs)
    build = _BY_TYPE.get(_kind(node))
    return "x" if build is None else build(node, root, refs)


def _from_ref(ref: str, root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    if ref in refs:
        raise _Recursion
    return _example(_resolve(root, ref), root, (*refs, ref))


def _kind(node: Mapping[str, Any]) -> str | None:
    kind = node.get("type")
    if isinstance(kind, list):
        return next((k for k in kind if k != "null"), "null")
    if kind is None:
        return "object" if "properties" in node else "array" if "items" in node else None
    return str(kind)


def _all_of(parts: Sequence[Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    values = [_example(part, root, refs) for part in parts]
    if all(isinstance(v, dict) for v in values):
        return {k: v for value in values for k, v in value.items()}
    return values[0]


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        raise ConfigurationError(
            f"TestModel follows only local $ref such as '#/$defs/Name', got {ref!r}"
        )
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            raise ConfigurationError(f"TestModel: $ref {ref!r} points nowhere in the schema")
        node = node[key]
    return node


def _is_null(option: Any) -> bool:
    return isinstance(option, Mapping) and option.get("type") == "null"


def _first_option(options: Sequence[Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    for option in options:
        if not _is_null(option):
            try:
                return _example(option, root, refs)
            except _Recursion:
                continue
    if any(_is_null(o) for o in options):
        return None
    raise _Recursion


def _object(node: Mapping[str, Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    required = set(node.get("required", ()))
    out: dict[str, Any] = {}
    for name, sub in (node.get("properties") or {}).items():
        try:
            out[name] = _example(sub, root, refs)
        except _Recursion:
            if name in required:
                raise
    return out


def _array(node: Mapping[str, Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    prefix = node.get("prefixItems")
    if prefix is not None:
        return [_example(item, root, refs) for item in prefix]
    low = node.get("minItems", 0)
    if node.get("maxItems", 1) < 1:
        return []
    try:
        item = _example(node.get("items", True), root, refs)
    except _Recursion:
        if low:
            raise
        return []
    return [item] * max(1, low)


def _string(node: Mapping[str, Any], *_unused: Any) -> str:
    fmt = node.get("format")
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    if node.get("maxLength", 1) < 1:
        return ""
    return "x" * max(1, int(node.get("minLength", 1)))


def _fits(value: float, node: Mapping[str, Any]) -> bool:
    step = node.get("multipleOf")
    return not (
        ("minimum" in node and value < node["minimum"])
        or ("exclusiveMinimum" in node and value <= node["exclusiveMinimum"])
        or ("maximum" in node and value > node["maximum"])
        or ("exclusiveMaximum" in node and value >= node["exclusiveMaximum"])
        or (step and value % step != 0)
    )


def _candidates(node: Mapping[str, Any]) -> tuple[float | None, float | None, list[float]]:
    lows = [node[k] for k in ("minimum", "exclusiveMinimum") if k in node]
    highs = [node[k] for k in ("maximum", "exclusiveMaximum") if k in node]
    low = max(lows) if lows else None
    high = min(highs) if highs else None
    extra = [] if low is None or high is None else [(low + high) / 2]
    return low, high, extra


def _integer(node: Mapping[str, Any], *_unused: Any) -> int:
    low, high, _ = _candidates(node)
    step = node.get("multipleOf") or 1
    options = [0]
    if low is not None:
        options += [math.ceil(low / step) * step, (math.floor(low / step) + 1) * step]
    if high is not None:
        options += [math.floor(high / step) * step, (math.ceil(high / step) - 1) * step]
    return next((int(v) for v in options if _fits(v, node)), 0)


def _number(node: Mapping[str, Any], *_unused: Any) -> float:
    low, high, middle = _candidates(node)
    options = [0.0, *middle]
    if low is not None:
        options[1:1] = [float(low), float(low) + 1.0]
    if high is not None:
        options[1:1] = [float(high), float(high) - 1.0]
    return next((v for v in options if _fits(v, node)), 0.0)


_Build = Callable[[Any, Mapping[str, Any], tuple[str, ...]], Any]
# the first of these keywords a node has decides its example; then its type does
_BY_KEYWORD: tuple[tuple[str, _Build], ...] = (
    ("$ref", _from_ref),
    ("const", lambda value, *_: value),
    ("enum", lambda values, *_: values[0] if values else "x"),
    ("anyOf", _first_option),
    ("oneOf", _first_option),
    ("allOf", _all_of),
)
_BY_TYPE: dict[
    str | None, Callable[[Mapping[str, Any], Mapping[str, Any], tuple[str, ...]], Any]
] = {
    "object": _object,
    "array": _array,
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": lambda *_: False,
    "null": lambda *_: None,
}
