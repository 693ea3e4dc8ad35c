"""Tools: Python callables a model may ask to run, described by a JSON schema.

A :class:`Tool` reads its function's signature and docstring once and builds a pydantic model
of the arguments; that model gives both the OpenAI function schema shown to models and the
validation applied to every call, so what a model is told and what is enforced cannot drift.
A :class:`ToolRegistry` holds a conversation's tools by name.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias

import anyio
import anyio.to_thread
from pydantic import BaseModel, JsonValue, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from lionagi._declared import same_parameters
from lionagi.errors import (
    DuplicateToolError,
    OperationError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from lionagi.protocols._signature import arguments_of, read_docstring
from lionagi.protocols.tool_spec import ToolSpec

__all__ = ["OfferedTools", "Tool", "ToolRegistry", "jsonable"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Tool:
    """A callable a model may invoke, with its schema and argument validation.

    ``name`` defaults to the function's name and ``description`` to the first paragraph of its
    docstring; parameter descriptions come from the docstring (Google ``Args:``, reST
    ``:param x:`` or NumPy ``Parameters`` sections) or from
    ``Annotated[..., Field(description=...)]``. ``timeout``
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
        target = _target(func)
        tool_name = _tool_name(func, name)
        _check_timeout(timeout, tool_name)
        summary, param_docs = read_docstring(inspect.getdoc(target) or "")
        arguments = arguments_of(func, tool_name, param_docs)
        self.func: Callable[..., Any] = func
        self.name: str = tool_name
        self.description: str = summary if description is None else description
        self.timeout: float | None = timeout
        self.is_async: bool = _is_async(func)
        self._arguments: type[BaseModel] = arguments.model
        # internal pydantic field name -> parameter name (fields are aliased by parameter name)
        self._fields: dict[str, str] = arguments.fields
        self._positional: tuple[str, ...] = arguments.positional
        self._pass_always: frozenset[str] = arguments.pass_always
        self._parameters: dict[str, Any] = arguments.parameters

    @classmethod
    @same_parameters(__init__)
    def from_function(cls, arguments: dict[str, Any]) -> Tool:
        """Same as ``Tool(func, ...)`` (its parameters)."""
        del arguments["self"]
        return cls(**arguments)

    # -- schema --------------------------------------------------------------------------
    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments object (a fresh copy)."""
        return copy.deepcopy(self._parameters)

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema of this tool (a fresh copy)."""
        return ToolSpec(self.name, self.description, self.parameters).function_schema()

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


#: which registered tools a call offers: True (all), names or Tools, or None
OfferedTools: TypeAlias = bool | str | Tool | Sequence[str | Tool] | None


_NO_TOOLS: Mapping[str, Tool] = MappingProxyType({})


class ToolRegistry:
    """The tools of one conversation, by name, in registration order.

    Reads like a mapping of name -> :class:`Tool` (``registry["add"]``, ``"add" in registry``,
    iteration over names, ``keys()``/``values()``/``items()``), as upstream lionagi's
    ``branch.tools`` dict did; ``get(name)`` raises :class:`ToolNotFoundError` for an unknown
    name rather than returning None."""

    __slots__ = ("__weakref__", "_tools")

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        # most conversations register no tool: they share one empty mapping until they do
        self._tools: Mapping[str, Tool] = _NO_TOOLS
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
        if built:
            registered = self._writable()
            for tool in built:
                registered[tool.name] = tool
        return built

    def _writable(self) -> dict[str, Tool]:
        tools = self._tools
        if not isinstance(tools, dict):
            tools = self._tools = dict(tools)
        return tools

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
        del self._writable()[name]
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

    def offered(self, tools: OfferedTools, actions: bool, *, owner: str) -> tuple[str, ...]:
        """Names of the tools a call offers: ``tools`` (True = all registered, names or Tools),
        or all registered tools when ``actions`` is set and ``tools`` is None. ``owner`` names
        the registry's Branch in errors."""
        if tools is None or isinstance(tools, bool):
            wanted = actions or tools is True
            names: tuple[str, ...] = self.names if wanted else ()
        else:
            wanted = actions or isinstance(tools, str | Tool)
            names = self._offered_names(tools)
        if wanted and not names:
            raise OperationError(
                f"tools were requested (actions=True or tools=...) but {owner} has none to "
                "offer; register some with branch.register_tools(...)"
            )
        return names

    def _offered_names(self, tools: str | Tool | Sequence[str | Tool]) -> tuple[str, ...]:
        if isinstance(tools, str | Tool):
            return (self._offered_name(tools),)
        if isinstance(tools, Iterable):
            return tuple(dict.fromkeys(self._offered_name(t) for t in tools))
        raise OperationError(
            f"tools must be True, a list of registered tool names, or None; got {tools!r}"
        )

    def _offered_name(self, tool: object) -> str:
        if isinstance(tool, str):
            return self.get(tool).name
        if isinstance(tool, Tool):
            if tool not in self:
                raise OperationError(
                    f"tool {tool.name!r} is not registered on this Branch; register it with "
                    "branch.register_tools(...) first"
                )
            return tool.name
        raise OperationError(
            f"tools must name registered tools (text or Tool objects), got "
            f"{type(tool).__name__}; register callables with branch.register_tools(...) first"
        )

    def copy(self) -> ToolRegistry:
        """A registry with the same tools that can change independently."""
        other = ToolRegistry()
        other._tools = dict(self._tools) if self._tools else _NO_TOOLS
        return other

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Tool):
            return self._tools.get(item.name) is item
        return isinstance(item, str) and item in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    # Read as a mapping of name -> Tool, as upstream lionagi's ``branch.tools`` dict is.
    def __getitem__(self, name: str) -> Tool:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        """The tool names, in registration order (like iterating a dict)."""
        return iter(tuple(self._tools))

    def keys(self) -> tuple[str, ...]:
        return self.names

    def values(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    def items(self) -> tuple[tuple[str, Tool], ...]:
        return tuple(self._tools.items())

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"

    def _listing(self) -> str:
        return ", ".join(repr(n) for n in self._tools) or "(none)"


def jsonable(value: Any) -> JsonValue:
    """Convert a tool's return value into JSON-safe data, with pydantic's serializer.

    Pydantic models, dataclasses, mappings, sequences and sets (to lists), enums and the
    scalar types pydantic knows (UUID, datetime, Decimal, Path, ...) convert; non-finite floats
    become ``None``; object keys become strings. Anything else, and circular references, raise
    :class:`ToolError` naming the problem.
    """
    try:
        converted: JsonValue = to_jsonable_python(value, inf_nan_mode="null")
    except PydanticSerializationError as exc:
        raise ToolError(
            f"cannot convert a tool result to JSON ({exc}); return dicts, lists, strings, "
            "numbers, booleans, None, dataclasses or pydantic models"
        ) from None
    except ValueError as exc:  # pydantic reports a circular reference as a ValueError
        raise ToolError(
            f"cannot convert a tool result to JSON: it holds a circular reference ({exc}); "
            "return a tree of values"
        ) from None
    return converted


# -- callables --------------------------------------------------------------------------


def _target(func: Callable[..., Any]) -> Callable[..., Any]:
    """The function behind ``func`` (a ``partial`` unwrapped), checked to be usable as a tool."""
    if not callable(func):
        raise ToolError(f"a tool needs a callable, got {type(func).__name__}")
    target = func.func if isinstance(func, functools.partial) else func
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise ToolError(f"{_qualname(func)} is a generator function; a tool must return its result")
    return target


def _tool_name(func: Callable[..., Any], name: str | None) -> str:
    tool_name = name if name is not None else _default_name(func)
    if not isinstance(tool_name, str) or not _NAME.match(tool_name):
        raise ToolError(
            f"invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' "
            "(pass name=... for lambdas and other unnamed callables)"
        )
    return tool_name


def _check_timeout(timeout: object, tool_name: str) -> None:
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise ToolError(
            f"tool {tool_name!r}: timeout must be a positive number of seconds or None, "
            f"got {timeout!r}"
        )


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
