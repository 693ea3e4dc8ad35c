"""The ``BaseModel`` methods for the library's dataclasses that pydantic validates.

Messages, usages and signals are slotted dataclasses, not ``BaseModel`` instances: an instance
is only its field slots. Code still calls the ``BaseModel`` methods on them
(``model_validate``, ``model_validate_json``, ``model_json_schema``, ``model_dump``,
``model_dump_json``, ``model_copy``), so :class:`PydanticMethods` gives them, written once
against two class attributes: ``_validator`` and ``_serializer``, the class's own pydantic
validator and serializer. A class gives its ``TypeAdapter`` through the hook
``_pydantic_adapter``, and its validator and serializer are the adapter's unless the class
says otherwise (``_pydantic_parts``); they are fetched the first time one is read and then
stored on that class, so a dump reads a plain class attribute.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic_core import SchemaSerializer, SchemaValidator

__all__ = ["PydanticDataclassMethods", "PydanticMethods", "filling_class", "unbuilt"]

_set = object.__setattr__
_new = object.__new__


class _FirstUse:
    """A class's ``_validator`` or ``_serializer`` before either was read: the first read
    fetches both (``_pydantic_parts``) and stores them on the class, in place of this."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type[PydanticMethods]) -> Any:
        owner._validator, owner._serializer = owner._pydantic_parts()
        return owner.__dict__[self.name]


def unbuilt(cls: type[PydanticMethods]) -> None:
    """Give ``cls`` validator and serializer slots of its own, made on first use (a subclass
    must not read its parent's). Called for every subclass of :class:`PydanticMethods`."""
    cls._validator = _FirstUse("_validator")  # type: ignore[assignment]
    cls._serializer = _FirstUse("_serializer")  # type: ignore[assignment]


def filling_class(cls: type, **namespace: Any) -> type[Any]:
    """A subclass of the frozen slotted ``cls`` to fill a new instance through, for values
    already checked: Python's own ``__setattr__`` (plain slot stores, where ``cls``'s refuses
    assignment; setting and deleting share one C slot, so both), plus ``namespace``. The filled
    object is then made a ``cls`` by assigning its ``__class__`` (same slots, same layout),
    immutable from there on."""
    body = {"__slots__": (), "__setattr__": object.__setattr__, "__delattr__": object.__delattr__}
    return type(f"_{cls.__name__}Builder", (cls,), body | namespace)


@functools.cache
def _field_names(cls: Any) -> tuple[str, ...]:
    """``cls``'s dataclass field names, in order (its ``ClassVar`` declarations left out)."""
    return tuple(field.name for field in dataclasses.fields(cls))


class PydanticMethods:
    """The ``BaseModel`` methods code calls, for a dataclass that pydantic validates.

    A subclass implements ``_pydantic_adapter`` (its ``TypeAdapter``) and, where the adapter's
    validator and serializer are not the class's own, ``_pydantic_parts``. A subclass that
    defines its own ``__init_subclass__`` calls :func:`unbuilt` from it.
    """

    __slots__ = ()
    _validator: ClassVar[SchemaValidator]
    _serializer: ClassVar[SchemaSerializer]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unbuilt(cls)

    @classmethod
    def _pydantic_adapter(cls) -> TypeAdapter[Self]:
        """This class's ``TypeAdapter`` (read by :meth:`model_json_schema`)."""
        raise NotImplementedError

    @classmethod
    def _pydantic_parts(cls) -> tuple[SchemaValidator, SchemaSerializer]:
        """This class's pydantic validator and serializer (fetched once per class)."""
        adapter = cls._pydantic_adapter()
        return adapter.validator, adapter.serializer  # type: ignore[return-value]

    @classmethod
    def model_validate(cls, obj: Any, *, strict: bool | None = None) -> Self:
        """Validate ``obj`` (an instance, or a mapping of field values) into this class."""
        value: Self = cls._validator.validate_python(obj, strict=strict)
        return value

    @classmethod
    def model_validate_json(cls, data: str | bytes, *, strict: bool | None = None) -> Self:
        """Validate a JSON document into this class."""
        value: Self = cls._validator.validate_json(data, strict=strict)
        return value

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        """The JSON schema of this class (validation mode)."""
        return cls._pydantic_adapter().json_schema()

    def model_dump(self, *, mode: Literal["python", "json"] = "python", **options: Any) -> Any:
        """The field values as a dict (``mode="json"``: JSON-compatible values). Options as
        pydantic's ``model_dump`` (``include``, ``exclude``, ``exclude_none``, ...)."""
        return self._serializer.to_python(self, mode=mode, **options)

    def model_dump_json(self, *, indent: int | None = None, **options: Any) -> str:
        """The field values as a JSON document. Options as pydantic's ``model_dump_json``."""
        return self._serializer.to_json(self, indent=indent, **options).decode()

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` applied. As with pydantic's ``model_copy``, the update is
        not validated; a name that is not a field is refused."""
        names = _field_names(type(self))  # type: ignore[arg-type] # (a class is hashable)
        values = {name: getattr(self, name) for name in names}
        if deep:
            values = copy.deepcopy(values)
        if update:
            unknown = [name for name in update if name not in values]
            if unknown:
                raise TypeError(
                    f"{type(self).__name__}.model_copy() got unknown fields {unknown}; "
                    f"fields are {', '.join(names)}"
                )
            values.update(update)
        copied = _new(type(self))
        for name, value in values.items():
            _set(copied, name, value)
        return copied


class PydanticDataclassMethods(PydanticMethods):
    """The ``BaseModel`` methods for a pydantic dataclass: validation and serialization go
    through the dataclass's own validator and serializer, exactly as a model's would (messages,
    usages and the operations' parameter objects)."""

    __slots__ = ()
    __pydantic_validator__: ClassVar[SchemaValidator]
    __pydantic_serializer__: ClassVar[SchemaSerializer]

    @classmethod
    def _pydantic_adapter(cls) -> TypeAdapter[Self]:
        from pydantic import TypeAdapter

        return TypeAdapter(cls)

    @classmethod
    def _pydantic_parts(cls) -> tuple[SchemaValidator, SchemaSerializer]:
        from pydantic.dataclasses import rebuild_dataclass

        rebuild_dataclass(cls)  # type: ignore[arg-type] # a deferred class is built now
        return cls.__pydantic_validator__, cls.__pydantic_serializer__
