"""From a Python callable to a validating pydantic model and the JSON schema shown to models.

The signature gives the fields (types from annotations, or from plain scalar defaults) and the
docstring gives the summary and parameter descriptions (Google, reST/Sphinx or NumPy style, read
by ``docstring-parser``); one model serves both the schema and the validation of every call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaWarningKind

from lionagi.errors import ToolError

__all__ = ["Arguments", "arguments_of", "read_docstring"]


@dataclass(frozen=True, slots=True)
class Arguments:
    """The arguments model of one tool and how validated values map back to parameters."""

    model: type[BaseModel]
    fields: dict[str, str]
    """internal pydantic field name -> parameter name (fields are aliased by parameter name)"""
    positional: tuple[str, ...]
    """positional-only parameter names, passed in place"""
    pass_always: frozenset[str]
    """internal names whose validated value is passed even when the caller left them out"""
    parameters: dict[str, Any]
    """JSON schema of the arguments object, without generated titles"""


def read_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and each documented parameter's description, whitespace folded."""
    import docstring_parser  # only when a tool is made from a documented function

    parsed = docstring_parser.parse(doc)
    summary = parsed.short_description or ""
    if parsed.long_description and not parsed.blank_after_short_description:
        summary = f"{summary} {parsed.long_description.split(chr(10) * 2, 1)[0]}"
    params = {p.arg_name: " ".join(p.description.split()) for p in parsed.params if p.description}
    return " ".join(summary.split()), params


def arguments_of(func: Callable[..., Any], tool: str, docs: Mapping[str, str]) -> Arguments:
    """Build the arguments model of ``func`` for the tool called ``tool``; :class:`ToolError`
    names the parameter or the reason when the signature cannot become a schema."""
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
        _check_parameter(param, index, tool)
        internal = f"arg_{index}"
        fields[internal] = param.name
        definitions[internal] = _field(param, docs.get(param.name))
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(param.name)
        if param.kind is param.POSITIONAL_ONLY or isinstance(param.default, FieldInfo):
            # positional-only values are passed in place; a ``= Field(...)`` default is not
            # a usable Python default, so the validated value is always passed for both
            always.add(internal)
    config = ConfigDict(extra="forbid")
    try:
        model: type[BaseModel] = create_model(f"{tool}_arguments", __config__=config, **definitions)
    except Exception as exc:
        raise ToolError(f"tool {tool!r}: cannot build an argument schema: {exc}") from exc
    try:
        schema = model.model_json_schema(schema_generator=_ToolSchema)
    except Exception as exc:
        raise ToolError(f"tool {tool!r}: cannot describe its arguments: {exc}") from exc
    return Arguments(model, fields, tuple(positional), frozenset(always), _clean_schema(schema))


def _check_parameter(param: inspect.Parameter, index: int, tool: str) -> None:
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


def _field(param: inspect.Parameter, doc: str | None) -> tuple[Any, Any]:
    annotation = param.annotation
    default = param.default
    if annotation is inspect.Parameter.empty:
        # unannotated: a plain scalar default tells the type, otherwise anything goes
        annotation = type(default) if type(default) in (bool, int, float, str) else Any
    extra: dict[str, Any] = {"alias": param.name}
    if doc is not None and not _has_description(annotation, default):
        extra["description"] = doc
    return (
        Annotated[annotation, Field(**extra)],
        ... if default is inspect.Parameter.empty else default,
    )


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
