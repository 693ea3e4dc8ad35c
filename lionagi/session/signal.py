"""Signals: what observers are told about a Branch.

Lifecycle signals (:class:`RunStart`, :class:`RunEnd`, :class:`RunFailed`) carry the ``turn_id``
of the top-level turn they describe, and the ``op_id`` of the flow node that turn runs (None
outside a flow); :class:`MessageAdded` carries the ``turn_id`` when the message was recorded
inside a live turn. Flow signals (:class:`FlowStart`, :class:`NodeStart`, :class:`NodeEnd`,
:class:`NodeFailed`, :class:`NodeSkipped`, :class:`FlowEnd`) describe a
:meth:`~lionagi.session.session.Session.flow`. UUIDs serialize to their string form.

Signals are immutable, slotted dataclasses that pydantic validates and serializes: a signal you
build is validated (lax coercion, ``ValidationError`` naming the field, unknown keywords ignored
as a pydantic model ignores them), assigning to one raises pydantic's ``frozen_instance`` error,
and they keep the ``BaseModel`` methods code calls on them (``model_dump``,
``model_dump_json``, ``model_validate``, ``model_validate_json``, ``model_copy``,
``model_json_schema``) with the same output, but are not ``BaseModel`` instances. An observed
turn builds several signals and every handler reads them, so a signal is only its field slots,
read as plain attributes; the signals the library builds from values it already holds as the
field types skip validation (``_trusted``) and equal what validation would build. The
pydantic validator and serializer of a class are built the first time one is needed, so
importing the signals costs a few plain classes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated, Any, ClassVar, Literal, Self, TypeAlias, TypeVar
from uuid import UUID

from pydantic import ConfigDict, PlainSerializer, TypeAdapter

from lionagi._pydantic_methods import PydanticMethods, unbuilt
from lionagi.protocols.messages import Message, Usage, _refuse_assignment

__all__ = [
    "SIGNAL_SCHEMA_VERSION",
    "FlowEnd",
    "FlowSignal",
    "FlowStart",
    "MessageAdded",
    "ModelRetry",
    "NodeEnd",
    "NodeFailed",
    "NodeSignal",
    "NodeSkipped",
    "NodeStart",
    "RunEnd",
    "RunFailed",
    "RunSignal",
    "RunStart",
    "Signal",
    "ToolFailed",
    "build_run_end",
    "current_op_id",
]

#: Bumped only for incompatible changes; additive nullable fields (like ``turn_id``) keep it.
SIGNAL_SCHEMA_VERSION = 1

#: The flow node the current task runs, read by the turn driver when it builds lifecycle
#: signals. Set only by the flow executor, in the node's own task.
current_op_id: ContextVar[str | None] = ContextVar("lionagi_current_op_id", default=None)


def _error_text(error: BaseException | None) -> str | None:
    """An exception as ``"Type: message"`` for a signal's JSON form (no traceback)."""
    return None if error is None else f"{type(error).__name__}: {error}"


#: a signal's exception field: the exception itself, dumped as :func:`_error_text`
_Error: TypeAlias = Annotated[BaseException | None, PlainSerializer(_error_text)]

S = TypeVar("S", bound="Signal")
_set = object.__setattr__


# Every signal class is a dataclass for its slots and fields only (keyword-only); the validating
# __init__, equality, hash and repr are Signal's own, so declaring a class generates no code.


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class Signal(PydanticMethods):
    """Base of every signal: the Branch it concerns and when it was raised.

    ``kind`` is the signal's class name. Built from keyword arguments, validated by pydantic.
    Equal when of the same class with equal fields; hashable when every field is. A subclass of
    your own declares its fields as annotations with defaults, as for a pydantic model; it is
    made a dataclass when it is first used.
    """

    # read by pydantic when it builds a signal class's validator and serializer
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(arbitrary_types_allowed=True)
    kind: ClassVar[str] = "Signal"

    branch_id: UUID | None = None
    created_at: float = dataclasses.field(default_factory=time.time)

    def __init_subclass__(cls) -> None:
        # (no super(): a slotted dataclass's methods cannot use it)
        cls.kind = cls.__name__
        unbuilt(cls)

    def __init__(self, **data: Any) -> None:
        validated = self._validator.validate_python(data)
        for name in _field_names(type(self)):
            _set(self, name, getattr(validated, name))

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _field_names(type(self)))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _field_names(type(self)))
        return f"{type(self).__name__}({fields})"

    def __str__(self) -> str:
        return " ".join(f"{name}={getattr(self, name)!r}" for name in _field_names(type(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self._values())

    @classmethod
    def _pydantic_adapter(cls) -> TypeAdapter[Self]:
        return _adapter(cls)


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class RunSignal(Signal):
    """Base of the lifecycle signals of one top-level turn: the turn, the operation it runs,
    and the flow node it runs for (None outside a flow)."""

    turn_id: UUID | None = None
    operation: str | None = None
    op_id: str | None = None


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class RunStart(RunSignal):
    """A top-level turn acquired its Branch and is about to run."""


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class RunEnd(RunSignal):
    """A top-level turn finished: returned, ended its stream, or was closed by its consumer."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_cost_usd: float = 0.0
    num_turns: int = 0
    #: requests sent by the turn's model calls, retried attempts included
    attempts: int = 0
    duration_ms: float = 0.0


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class RunFailed(RunSignal):
    """A top-level turn ended with an exception or a cancellation (``data`` holds it)."""

    data: _Error = None
    duration_ms: float = 0.0


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class ToolFailed(Signal):
    """A tool call failed: refused, unknown tool, invalid arguments, the tool raised or timed
    out, or its output could not be serialized. ``data`` holds the exception (with its
    traceback); ``turn_id`` is the turn the call ran in, ``None`` for ``act`` outside a turn.
    Raised before the error :class:`~lionagi.protocols.messages.ActionResponse` is recorded."""

    turn_id: UUID | None = None
    request_id: UUID | None = None
    call_id: str = ""
    function: str = ""
    error_type: str = ""
    error_message: str = ""
    data: _Error = None


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class ModelRetry(Signal):
    """A model call failed with a retryable error and will be sent again after ``wait`` seconds.

    ``attempt`` is the failed attempt (1-based); ``error`` says what happened (its type and
    message; secrets were scrubbed by the provider). The turn's ``RunEnd.attempts`` counts every
    attempt its model calls made.
    """

    turn_id: UUID | None = None
    attempt: int
    wait: float
    error: str
    status: int | None = None
    provider: str | None = None
    model: str | None = None


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class MessageAdded(Signal):
    """A message was appended to the Branch history."""

    message: Message
    turn_id: UUID | None = None


def build_run_end(
    branch: Any, *, turn_id: UUID | None = None, duration_ms: float = 0.0, result: Any = None
) -> RunEnd:
    """The :class:`RunEnd` of a turn of ``branch`` that ended with ``result`` (ADR-0018 D5).

    The tokens and cost come from ``result.usage`` when ``result`` carries a
    :class:`~lionagi.protocols.messages.Usage` there, else they are zero. This is the
    signature the ADR names; the turn driver builds its own ``RunEnd`` with every field, and
    any other combination is ``RunEnd(...)`` with the fields by name.
    """
    usage = getattr(result, "usage", None)
    if not isinstance(usage, Usage):
        usage = Usage()
    return RunEnd(
        branch_id=getattr(branch, "id", None),
        turn_id=turn_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_cost_usd=usage.cost_usd or 0.0,
        duration_ms=duration_ms,
    )


# -- flow signals -------------------------------------------------------------------------------
@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class FlowSignal(Signal):
    """Base of the signals of one :meth:`~lionagi.session.session.Session.flow` run."""

    flow_id: UUID


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class FlowStart(FlowSignal):
    """A flow validated its graph and is about to start its first node."""

    node_count: int = 0


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class NodeSignal(FlowSignal):
    """Base of the signals about one node: ``op_id`` is the node id, ``name`` its reference."""

    op_id: str
    name: str | None = None


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class NodeStart(NodeSignal):
    """A node's dependencies are met and it is about to run its turn on ``branch_id``."""


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class NodeEnd(NodeSignal):
    """A node's turn returned; ``turn_id`` is that turn."""

    turn_id: UUID | None = None
    duration_ms: float = 0.0


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class NodeFailed(NodeSignal):
    """A node's turn raised or was cancelled (``data`` holds the exception)."""

    turn_id: UUID | None = None
    data: _Error = None
    duration_ms: float = 0.0


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class NodeSkipped(NodeSignal):
    """A node did not run: a dependency failed or was skipped, or no edge condition held."""

    reason: str = ""


@dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False, match_args=False)
class FlowEnd(FlowSignal):
    """A flow ended: every node it started has finished (``status`` says how the flow ended)."""

    status: Literal["completed", "failed", "cancelled"] = "completed"
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    cancelled: int = 0
    duration_ms: float = 0.0


_SIGNALS: tuple[type[Signal], ...] = (
    Signal,
    RunSignal,
    RunStart,
    RunEnd,
    RunFailed,
    ToolFailed,
    ModelRetry,
    MessageAdded,
    FlowSignal,
    FlowStart,
    NodeSignal,
    NodeStart,
    NodeEnd,
    NodeFailed,
    NodeSkipped,
    FlowEnd,
)

# Immutable as a frozen BaseModel is: assigning raises pydantic's frozen_instance error, as it
# does for messages.
for _class in _SIGNALS:
    _class.__setattr__ = _refuse_assignment  # type: ignore[method-assign]
    _class.__delattr__ = _refuse_assignment  # type: ignore[method-assign]
del _class


_MISSING: Any = object()


# per signal class, each made on first use
_FIELD_NAMES: dict[type[Signal], tuple[str, ...]] = {}
_ADAPTERS: dict[type[Signal], TypeAdapter[Any]] = {}


def _field_names(cls: type[Signal]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(field.name for field in _fields(cls))
    return names


def _fields(cls: type[Signal]) -> tuple[dataclasses.Field[Any], ...]:
    """``cls``'s fields; a subclass declared without the dataclass decorator (one of a user's)
    is made a dataclass, in place, with instance dicts."""
    if "__dataclass_fields__" not in cls.__dict__:
        dataclasses.dataclass(kw_only=True, init=False, repr=False, eq=False, match_args=False)(cls)
    return dataclasses.fields(cls)


def _adapter(cls: type[S]) -> TypeAdapter[S]:
    """``cls``'s pydantic validator and serializer."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        _fields(cls)
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def _rebuild(cls: type[S], values: tuple[Any, ...]) -> S:
    """Unpickle a signal (its field values, in order)."""
    signal: S = _trusted_values[cls](values)
    return signal


class _TrustedConstructors(dict[type[Signal], Callable[..., Any]]):
    """``_trusted[cls]`` is ``cls``'s constructor for the library's own signals: keyword
    arguments as ``cls``'s, values already of the field types, defaults as ``cls``'s; nothing
    is validated. ``_trusted_values[cls](values)`` is the same from one tuple of every field's
    value in ``cls``'s field order, with no defaults: a single build site that picks the class
    at run time (the terminal signal) passes its fields with no ``**`` call, whose dict costs
    more than the build itself, and unpickling passes the tuple it holds. Each is made on first
    use, then one dict lookup.

    A validated build costs more than the rest of delivering a signal to a handler, and the
    turn driver builds a handful per observed turn from values it holds as the field types (ids,
    counters, a message, an exception), so it builds them with these; anything a user builds is
    validated. The instance is filled through a mutable twin of ``cls`` with the same slots --
    plain slot writes -- and then given ``cls`` as its class (a signal refuses every
    assignment). The constructor is generated, once per class, as dataclasses generate their
    ``__init__``.
    """

    def __init__(self, make: Callable[[type[Signal]], Callable[..., Any]]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, cls: type[Signal]) -> Callable[..., Any]:
        build = self[cls] = self._make(cls)
        return build


def _generated(cls: type[S], signature: str, body: list[str], namespace: dict[str, Any]) -> Any:
    """``build(signature)``: ``body`` run on a new mutable twin of ``cls``, returned as a
    ``cls``."""
    layout = {"__slots__": cls.__slots__} if "__slots__" in cls.__dict__ else {}
    twin = type(
        cls.__name__,
        cls.__bases__,
        {
            **layout,
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
            "__module__": cls.__module__,
            "__qualname__": f"{cls.__qualname__}.<twin>",
        },
    )
    namespace.update(_new=object.__new__, _twin=twin, _cls=cls)
    source = "\n".join(
        [
            f"def build({signature}):",
            "    self = _new(_twin)",
            *body,
            "    self.__class__ = _cls",
            "    return self",
        ]
    )
    exec(source, namespace)
    build = namespace["build"]
    build.__qualname__ = f"{cls.__qualname__}.<trusted>"
    return build


def _keyword_constructor(cls: type[S]) -> Callable[..., S]:
    namespace: dict[str, Any] = {"_MISSING": _MISSING}
    params, body = [], []
    for field in _fields(cls):
        name = field.name
        if field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            params.append(f"{name}=_MISSING")
            body.append(f"    self.{name} = _factory_{name}() if {name} is _MISSING else {name}")
            continue
        if field.default is dataclasses.MISSING:
            params.append(name)
        else:
            namespace[f"_default_{name}"] = field.default
            params.append(f"{name}=_default_{name}")
        body.append(f"    self.{name} = {name}")
    build: Callable[..., S] = _generated(cls, f"*, {', '.join(params)}", body, namespace)
    return build


def _values_constructor(cls: type[S]) -> Callable[[tuple[Any, ...]], S]:
    targets = ", ".join(f"self.{name}" for name in _field_names(cls))
    build: Callable[[tuple[Any, ...]], S] = _generated(
        cls, "values", [f"    {targets}, = values"], {}
    )
    return build


_trusted = _TrustedConstructors(_keyword_constructor)
_trusted_values = _TrustedConstructors(_values_constructor)
