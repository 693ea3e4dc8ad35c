"""Tools: Python callables a model may ask to run, described by a JSON schema.

A :class:`Tool` reads its function's signature and docstring once and builds a pydantic model
of the arguments; that model gives both the OpenAI function schema shown to models and the
validation applied to every call, so what a model is told and what is enforced cannot drift.
A :class:`ToolRegistry` holds a conversation's tools by name.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import functools
import inspect
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Annotated, Any, get_args, get_origin

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaWarningKind
from pydantic_core import PydanticSerializationError, to_jsonable_python

from lionagi.errors import (
    DuplicateToolError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
)

__all__ = ["Tool", "ToolRegistry", "jsonable"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARGS_HEADER = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):$")
_SECTION_HEADER = re.compile(r"^[A-Z][A-Za-z ]*:$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


class Tool:
    """A callable a model may invoke, with its schema and argument validation.

    ``name`` defaults to the function's name and ``description`` to the first paragraph of its
    docstring; parameter descriptions come from a Google-style ``Args:`` section or reST
    ``:param x:`` lines, or from ``Annotated[..., Field(description=...)]``. ``timeout``
    (seconds) bounds each call. Sync functions run in a worker thread; a sync tool that times
    out cannot be stopped, so its thread is abandoned and its result discarded.
    """

    __slots__ = (
        "_arguments",
        "_fields",
        "_parameters",
        "_pass_always",
        "_positional",
        "description",
        "func",
        "is_async",
        "name",
        "timeout",
    )

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> None:
        if not callable(func):
            raise ToolError(f"a tool needs a callable, got {type(func).__name__}")
        target = func.func if isinstance(func, functools.partial) else func
        if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
            raise ToolError(
                f"{_qualname(func)} is a generator function; a tool must return its result"
            )
        tool_name = name if name is not None else _default_name(func)
        if not isinstance(tool_name, str) or not _NAME.match(tool_name):
            raise ToolError(
                f"invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' "
                "(pass name=... for lambdas and other unnamed callables)"
            )
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ToolError(
                f"tool {tool_name!r}: timeout must be a positive number of seconds or None, "
                f"got {timeout!r}"
            )
        summary, param_docs = _parse_docstring(inspect.getdoc(target) or "")
        self.func: Callable[..., Any] = func
        self.name: str = tool_name
        self.description: str = summary if description is None else description
        self.timeout: float | None = timeout
        self.is_async: bool = _is_async(func)
        model, fields, positional, always = _arguments_model(func, tool_name, param_docs)
        self._arguments: type[BaseModel] = model
        # internal pydantic field name -> parameter name (fields are aliased by parameter name)
        self._fields: dict[str, str] = fields
        self._positional: tuple[str, ...] = positional
        self._pass_always: frozenset[str] = always
        try:
            schema = model.model_json_schema(schema_generator=_ToolSchema)
        except Exception as exc:
            raise ToolError(f"tool {tool_name!r}: cannot describe its arguments: {exc}") from exc
        self._parameters: dict[str, Any] = _clean_schema(schema)

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> Tool:
        """Same as ``Tool(func, ...)``."""
        return cls(func, name=name, description=description, timeout=timeout)

    # -- schema --------------------------------------------------------------------------
    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments object (a fresh copy)."""
        return copy.deepcopy(self._parameters)

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema of this tool (a fresh copy)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    @property
    def arguments_model(self) -> type[BaseModel]:
        """The pydantic model that validates arguments (fields are aliased by parameter name)."""
        return self._arguments

    # -- calling -------------------------------------------------------------------------
    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``arguments`` and return what will be passed to the function, by name.

        Raises :class:`ToolArgumentError` naming the first failing field. Parameters the caller
        left out are omitted so the function's own defaults apply.
        """
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                self.name,
                "(arguments)",
                f"expected an object of named arguments, got {type(arguments).__name__}",
            )
        try:
            validated = self._arguments.model_validate(dict(arguments))
        except ValidationError as exc:
            field, message = self._describe(exc)
            raise ToolArgumentError(self.name, field, message) from exc
        given = validated.model_fields_set | self._pass_always
        return {
            param: getattr(validated, internal)
            for internal, param in self._fields.items()
            if internal in given
        }

    async def call(self, arguments: Mapping[str, Any]) -> Any:
        """Validate ``arguments``, run the function and return its result unchanged.

        Validation failures raise :class:`ToolArgumentError` before the function runs; an
        expired ``timeout`` raises :class:`ToolTimeoutError`; whatever the function raises
        propagates as is.
        """
        values = self.validate(arguments)
        if self.timeout is None:
            return await self._run(values)
        with anyio.move_on_after(self.timeout):
            return await self._run(values)
        raise ToolTimeoutError(f"tool {self.name!r} did not finish within {self.timeout:g}s")

    async def _run(self, values: dict[str, Any]) -> Any:
        args = [values.pop(p) for p in self._positional]
        if self.is_async:
            return await self.func(*args, **values)
        bound = functools.partial(self.func, *args, **values)
        return await anyio.to_thread.run_sync(bound, abandon_on_cancel=self.timeout is not None)

    def _describe(self, exc: ValidationError) -> tuple[str, str]:
        error = exc.errors(include_url=False)[0]
        loc = error.get("loc", ())
        field = ".".join(str(part) for part in loc) or "(arguments)"
        kind = error.get("type")
        if kind == "missing":
            return field, "a required value is missing"
        if kind == "extra_forbidden":
            allowed = ", ".join(self._fields.values()) or "none"
            return field, f"unexpected argument; this tool accepts: {allowed}"
        shown = repr(error.get("input"))
        shown = shown if len(shown) <= 80 else f"{shown[:77]}..."
        return field, f"{error.get('msg', 'invalid value')} (got {shown})"

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, is_async={self.is_async}, timeout={self.timeout!r})"


class ToolRegistry:
    """The tools of one conversation, by name, in registration order."""

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self.register_many(tools)

    def register(self, tool: Tool | Callable[..., Any], *, update: bool = False) -> Tool:
        """Add a tool (a callable is wrapped in :class:`Tool`); ``update=True`` replaces."""
        return self.register_many([tool], update=update)[0]

    def register_many(
        self, tools: Iterable[Tool | Callable[..., Any]], *, update: bool = False
    ) -> tuple[Tool, ...]:
        """Add several tools at once: all of them, or none if any is invalid or a duplicate."""
        built = tuple(t if isinstance(t, Tool) else Tool(t) for t in tools)
        seen: set[str] = set()
        for tool in built:
            if tool.name in seen or (not update and tool.name in self._tools):
                raise DuplicateToolError(
                    f"a tool named {tool.name!r} is already registered; pass update=True to "
                    "replace it or name=... to register it under another name"
                )
            seen.add(tool.name)
        for tool in built:
            self._tools[tool.name] = tool
        return built

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFoundError(
                f"no tool named {name!r}; registered tools: {self._listing()}"
            ) from None

    def remove(self, name: str) -> Tool:
        """Unregister and return the tool called ``name``."""
        tool = self.get(name)
        del self._tools[name]
        return tool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def schemas(self, names: Iterable[str] | None = None) -> tuple[dict[str, Any], ...]:
        """OpenAI function schemas of ``names`` (all tools when ``None``), in that order."""
        if names is None:
            return tuple(tool.schema for tool in self._tools.values())
        if isinstance(names, str):
            names = [names]
        return tuple(self.get(name).schema for name in names)

    def copy(self) -> ToolRegistry:
        """A registry with the same tools that can change independently."""
        other = ToolRegistry()
        other._tools = dict(self._tools)
        return other

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Tool):
            return self._tools.get(item.name) is item
        return isinstance(item, str) and item in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(tuple(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"

    def _listing(self) -> str:
        return ", ".join(repr(n) for n in self._tools) or "(none)"


def jsonable(value: Any) -> JsonValue:
    """Convert a tool's return value into JSON-safe data.

    Handles pydantic models, dataclasses, mappings, lists/tuples/sets (to lists), enums, and
    the scalar types pydantic knows (UUID, datetime, Decimal, Path, ...). Non-finite floats
    become ``None``. Anything else raises :class:`ToolError` naming its type.
    """
    return _jsonable(value, set())


def _jsonable(value: Any, active: set[int]) -> JsonValue:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return _jsonable(value.value, active)
    if isinstance(value, BaseModel):
        try:
            dumped: JsonValue = value.model_dump(mode="json")
        except PydanticSerializationError as exc:
            raise ToolError(f"cannot convert {type(value).__name__} to JSON: {exc}") from exc
        return dumped
    container = isinstance(value, Mapping | list | tuple | set | frozenset) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    )
    if not container:
        try:
            converted: JsonValue = to_jsonable_python(value)
        except PydanticSerializationError:
            raise ToolError(
                f"cannot convert a {type(value).__module__}.{type(value).__qualname__} to "
                "JSON; return dicts, lists, strings, numbers, booleans, None, dataclasses "
                "or pydantic models"
            ) from None
        return converted
    if id(value) in active:
        raise ToolError(f"cannot convert a {type(value).__name__} to JSON: circular reference")
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_json_key(k): _jsonable(v, active) for k, v in value.items()}
        if dataclasses.is_dataclass(value):
            return {
                f.name: _jsonable(getattr(value, f.name), active) for f in dataclasses.fields(value)
            }
        items = list(value)
        if isinstance(value, set | frozenset):
            with contextlib.suppress(TypeError):  # unorderable members keep iteration order
                items = sorted(items)
        return [_jsonable(item, active) for item in items]
    finally:
        active.discard(id(value))


def _json_key(key: Any) -> str:
    """Object keys as ``json.dumps`` writes them; other keys must convert to a string."""
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, int | float):
        return str(key)
    converted = _jsonable(key, set())
    if isinstance(converted, str):
        return converted
    raise ToolError(f"cannot use a {type(key).__name__} as a JSON object key")


# -- building the arguments model --------------------------------------------------------


def _arguments_model(
    func: Callable[..., Any], tool: str, docs: Mapping[str, str]
) -> tuple[type[BaseModel], dict[str, str], tuple[str, ...], frozenset[str]]:
    try:
        signature = inspect.signature(func, eval_str=True)
    except (NameError, SyntaxError, TypeError) as exc:
        raise ToolError(f"tool {tool!r}: cannot read the signature of the function: {exc}") from exc
    except ValueError as exc:
        raise ToolError(f"tool {tool!r}: the callable has no readable signature: {exc}") from exc
    definitions: dict[str, Any] = {}
    fields: dict[str, str] = {}
    positional: list[str] = []
    always: set[str] = set()
    for index, param in enumerate(signature.parameters.values()):
        if param.kind is param.VAR_POSITIONAL or param.kind is param.VAR_KEYWORD:
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolError(
                f"tool {tool!r}: parameter {star}{param.name} is not supported; a tool needs "
                "named parameters only, so models know every argument"
            )
        if index == 0 and param.name in ("self", "cls"):
            raise ToolError(
                f"tool {tool!r}: first parameter {param.name!r} looks like an unbound method; "
                "register the bound method (instance.method) instead"
            )
        internal = f"arg_{index}"
        fields[internal] = param.name
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(param.name)
        annotation = param.annotation
        default = param.default
        if annotation is inspect.Parameter.empty:
            # unannotated: a plain scalar default tells the type, otherwise anything goes
            annotation = type(default) if type(default) in (bool, int, float, str) else Any
        if param.kind is param.POSITIONAL_ONLY or isinstance(default, FieldInfo):
            # positional-only values are passed in place; a ``= Field(...)`` default is not
            # a usable Python default, so the validated value is always passed for both
            always.add(internal)
        extra: dict[str, Any] = {"alias": param.name}
        if param.name in docs and not _has_description(annotation, default):
            extra["description"] = docs[param.name]
        definitions[internal] = (
            Annotated[annotation, Field(**extra)],
            ... if default is inspect.Parameter.empty else default,
        )
    config = ConfigDict(extra="forbid")
    try:
        model: type[BaseModel] = create_model(f"{tool}_arguments", __config__=config, **definitions)
    except Exception as exc:
        raise ToolError(f"tool {tool!r}: cannot build an argument schema: {exc}") from exc
    return model, fields, tuple(positional), frozenset(always)


class _ToolSchema(GenerateJsonSchema):
    """Leaves out defaults that are not JSON (sentinels) quietly: the function applies them."""

    def emit_warning(self, kind: JsonSchemaWarningKind, detail: str) -> None:
        if kind != "non-serializable-default":
            super().emit_warning(kind, detail)


def _has_description(annotation: Any, default: Any) -> bool:
    if isinstance(default, FieldInfo) and default.description is not None:
        return True
    if get_origin(annotation) is not Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description is not None
        for meta in get_args(annotation)[1:]
    )


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the generated titles of the arguments object and its properties."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def _default_name(func: Callable[..., Any]) -> str:
    if isinstance(func, functools.partial):
        return _default_name(func.func)
    name = getattr(func, "__name__", None)
    if isinstance(name, str):
        return name
    return type(func).__name__


def _qualname(func: Callable[..., Any]) -> str:
    return str(getattr(func, "__qualname__", None) or _default_name(func))


def _is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    if isinstance(func, functools.partial):
        return _is_async(func.func)
    return not inspect.isroutine(func) and inspect.iscoroutinefunction(type(func).__call__)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """First paragraph, and parameter descriptions from ``Args:`` or ``:param x:`` lines."""
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        text = line.strip()
        if not text or _SECTION_HEADER.match(text) or text.startswith(":"):
            break
        summary.append(text)
    params: dict[str, str] = {}
    _google_params(lines, params)
    _rest_params(lines, params)
    return " ".join(summary), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_params(lines: list[str], params: dict[str, str]) -> None:
    i = 0
    while i < len(lines):
        if not _ARGS_HEADER.match(lines[i].strip()):
            i += 1
            continue
        header = _indent(lines[i])
        entry_indent: int | None = None
        current: str | None = None
        i += 1
        while i < len(lines):
            line = lines[i]
            if line.strip():
                indent = _indent(line)
                if indent <= header:
                    break
                if entry_indent is None:
                    entry_indent = indent
                match = _GOOGLE_ENTRY.match(line.strip()) if indent <= entry_indent else None
                if match:
                    current = match.group(1)
                    params[current] = match.group(2).strip()
                elif current is not None:
                    params[current] = f"{params[current]} {line.strip()}".strip()
            i += 1


def _rest_params(lines: list[str], params: dict[str, str]) -> None:
    current: str | None = None
    base = 0
    for line in lines:
        text = line.strip()
        match = _REST_PARAM.match(text)
        if match:
            current, base = match.group(1), _indent(line)
            params[current] = match.group(2).strip()
        elif current is not None and text and not text.startswith(":") and _indent(line) > base:
            params[current] = f"{params[current]} {text}"
        else:
            current = None
