"""Answer fields built from a description: upstream lionagi's ``FieldModel`` and
``request_fields``.

``operate(field_models=[FieldModel(...)])`` adds fields to the answer (or builds the answer from
them alone); ``communicate(request_fields=[...])`` asks for a JSON object with those keys and
returns it as a dict. Both become an ordinary pydantic model, so the schema the model is shown
and the validation applied to its reply are the same thing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, JsonValue, create_model
from pydantic_core import PydanticUndefined

from lionagi.errors import OperationError

__all__ = ["FieldModel", "RequestFields", "request_fields_model", "with_fields"]


@dataclass(frozen=True, slots=True)
class FieldModel:
    """One answer field: its ``name``, type (``annotation``), ``default`` (required when not
    given) and a ``description`` the model is shown."""

    name: str
    annotation: Any = Any
    default: Any = PydanticUndefined
    description: str | None = None

    def definition(self) -> tuple[Any, Any]:
        """The ``(annotation, FieldInfo)`` pair :func:`pydantic.create_model` takes."""
        return (self.annotation, Field(default=self.default, description=self.description))


#: what ``request_fields=`` takes: field names, or names with descriptions
RequestFields = Sequence[str] | Mapping[str, str]


def with_fields(
    base: type[BaseModel] | None, field_models: Sequence[FieldModel], operation: str
) -> type[BaseModel]:
    """``base`` (or a bare model) extended by ``field_models``."""
    items = tuple(field_models)
    for item in items:
        if not isinstance(item, FieldModel) or not item.name.isidentifier():
            raise OperationError(
                f"{operation}() got field_models item {item!r:.80}: expected a FieldModel with "
                "a valid Python name"
            )
    try:
        return _cached_with_fields(base, items)
    except TypeError:  # an unhashable default: build it uncached
        return _build(base, items)


@functools.lru_cache(maxsize=256)
def _cached_with_fields(
    base: type[BaseModel] | None, items: tuple[FieldModel, ...]
) -> type[BaseModel]:
    return _build(base, items)


def _build(base: type[BaseModel] | None, items: tuple[FieldModel, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {item.name: item.definition() for item in items}
    root: type[BaseModel] = BaseModel if base is None else base
    built: type[BaseModel] = create_model(
        "Answer" if base is None else base.__name__,
        __base__=root,
        __module__=__name__,
        **fields,
    )
    return built


def request_fields_model(request_fields: RequestFields, operation: str) -> type[BaseModel]:
    """A model with one JSON field per requested name (its description, if given)."""
    if isinstance(request_fields, str):
        raise OperationError(
            f"{operation}() got request_fields={request_fields!r}: expected a list of names or a "
            "dict of name -> description, not one string"
        )
    described = (
        dict(request_fields)
        if isinstance(request_fields, Mapping)
        else dict.fromkeys(request_fields, "")
    )
    items = tuple(
        FieldModel(name=str(key), annotation=JsonValue, description=text or None)
        for key, text in described.items()
    )
    if not items:
        raise OperationError(f"{operation}() got request_fields with no names")
    return with_fields(None, items, operation)
