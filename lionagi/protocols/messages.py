"""Typed conversation messages and the append-only history that holds them.

Messages are immutable, with an ``id`` and a ``created_at`` timestamp. A :class:`MessageManager`
keeps them in order; it only ever appends, and it tells synchronous ``on_added`` callbacks about
every message right after it is stored.

Messages and :class:`Usage` are slotted pydantic dataclasses: pydantic validates them when they
are built (user input is checked, errors are ``pydantic.ValidationError``) and serializes them,
but an instance is only its field slots -- no instance dict, no set of the fields it was built
with, no private-attribute dict. A conversation holds a message per turn side for as long as it
lives, and that is most of what it keeps, so each message is about a quarter of a
``BaseModel``'s size. They keep the ``BaseModel`` methods code calls on them
(``model_dump``, ``model_dump_json``, ``model_validate``,
``model_validate_json``, ``model_copy``, ``model_json_schema``), but are not ``BaseModel``
instances.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import chain, islice
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, cast
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from lionagi._ids import new_id_int, uuid_of
from lionagi._pydantic_methods import PydanticDataclassMethods as _PydanticMethods
from lionagi._pydantic_methods import filling_class
from lionagi.errors import HistoryError

__all__ = [
    "ActionRequest",
    "ActionResponse",
    "AssistantResponse",
    "Instruction",
    "Message",
    "MessageManager",
    "MessageUnion",
    "Reasoning",
    "System",
    "ToolCall",
    "Usage",
    "message_from_dict",
]


_set = object.__setattr__
_new = object.__new__


_CONFIG = ConfigDict(extra="forbid")
_DEFERRED = ConfigDict(extra="forbid", defer_build=True)  # built on the first tool call


@dataclass(frozen=True, slots=True, kw_only=True, config=_CONFIG)
class Usage(_PydanticMethods):
    """Token usage and cost reported by a provider for one response (immutable)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if self.cost_usd is None and not (
            self.input_tokens
            or self.output_tokens
            or self.cached_input_tokens
            or self.cache_write_tokens
        ):
            return other  # nothing to add (a turn's first call); usages are immutable
        cost: float | None
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=cost,
        )


class ToolCall(BaseModel):
    """One tool call requested by a model: provider call id, function name, parsed arguments.

    ``provider_fields`` are fields the provider attached to the call that must be sent back
    with it unchanged (Gemini's ``extra_content`` with its thought signature).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    provider_fields: dict[str, JsonValue] = Field(default_factory=dict)


class Reasoning(BaseModel):
    """A reasoning block of a reply (Anthropic ``thinking`` / ``redacted_thinking``).

    ``text`` is the readable part (empty when redacted); ``block`` the provider's block as it
    came, which ``format``'s provider requires back verbatim in later requests (Anthropic
    rejects a tool-use turn whose thinking is missing). Other providers ignore it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str
    text: str = ""
    block: dict[str, JsonValue] = Field(default_factory=dict)


# A new message's id: the number of a new version-4 UUID, which the id slot keeps (a default
# is not validated, so the number goes straight to the slot; reading ``id`` makes the UUID).
_new_id_number = cast("Callable[[], UUID]", new_id_int)


class _Cached(_PydanticMethods):
    __slots__ = ("_cache",)  # the render cache, made on first use
    _cache: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True, config=_CONFIG)
class Message(_Cached):
    """Base of every message: identity and creation time. Immutable once built.

    Equal when of the same class with equal fields; unhashable (some fields are dicts).
    """

    id: UUID = Field(default_factory=_new_id_number)  # kept as its number: see _CompactId
    created_at: float = Field(default_factory=time.time)

    if TYPE_CHECKING:

        @property
        def _key(self) -> int:
            """The id's number, read from the slot without making a UUID (set below)."""
            ...

    @property
    def _render_cache(self) -> dict[str, Any]:
        """Renderers memoize a message's wire form here (messages are immutable), so
        re-rendering a long history costs a lookup per message. Made on first use; never
        serialized, compared or copied."""
        try:
            cache: dict[str, Any] = self._cache
        except AttributeError:
            cache = {}
            _set(self, "_cache", cache)
        return cache

    @property
    def created_datetime(self) -> datetime:
        """``created_at`` as an aware UTC datetime (upstream lionagi's name)."""
        return datetime.fromtimestamp(self.created_at, UTC)

    @property
    def role(self) -> str:
        raise NotImplementedError

    @property
    def kind(self) -> str:
        """What kind of message it is (``"system"``, ``"instruction"``, ...): each concrete
        message declares it as the field :data:`MessageUnion` tells them apart by."""
        raise NotImplementedError

    @property
    def metadata(self) -> dict[str, Any]:
        """Upstream lionagi's per-message ``metadata`` dict, read from the message's own fields
        (a reply's holds the raw provider response under ``"model_response"``). A new dict
        each time: messages are immutable."""
        return {}


@dataclass(frozen=True, slots=True, kw_only=True, config=_CONFIG)
class System(Message):
    """The system prompt of a conversation."""

    kind: Literal["system"] = "system"
    content: str

    @property
    def role(self) -> str:
        return "system"


@dataclass(frozen=True, slots=True, kw_only=True, config=_CONFIG)
class Instruction(Message):
    """What the user asks, with optional guidance, context, tools, schema and images.

    ``tool_schemas`` are OpenAI-function schemas offered for this request; ``response_format``
    is the JSON schema the answer should follow; ``images`` are URLs or ``data:`` URLs.
    """

    kind: Literal["instruction"] = "instruction"
    instruction: str | None = None
    guidance: str | None = None
    context: JsonValue = None
    tool_schemas: tuple[dict[str, Any], ...] = ()
    response_format: dict[str, Any] | None = None
    images: tuple[str, ...] = ()
    sender: str | None = None

    @property
    def role(self) -> str:
        return "user"

    def render_text(self) -> str:
        """The user-visible text of this instruction: instruction, guidance and context."""
        from lionagi.protocols._render import instruction_text

        return instruction_text(self)


@dataclass(frozen=True, slots=True, kw_only=True, config=_CONFIG)
class AssistantResponse(Message):
    """A model's reply: its text, the raw provider payload and usage.

    Tool calls the model asked for are recorded as the :class:`ActionRequest` messages that
    follow this one; rendering folds them back into the assistant turn. ``refusal`` holds the
    model's refusal text when it declined (OpenAI ``refusal``); ``reasoning`` the reasoning
    blocks a provider needs sent back.
    """

    kind: Literal["assistant"] = "assistant"
    content: str = ""
    model: str | None = None
    usage: Usage | None = None
    raw: JsonValue = None
    refusal: str | None = None
    reasoning: tuple[Reasoning, ...] = ()

    @property
    def metadata(self) -> dict[str, Any]:
        return {"model_response": self.raw, "model": self.model}

    @property
    def role(self) -> str:
        return "assistant"


@dataclass(frozen=True, slots=True, kw_only=True, config=_DEFERRED)
class ActionRequest(Message):
    """A request to run one tool, by a model (``call_id`` from the provider) or a caller."""

    kind: Literal["action_request"] = "action_request"
    call_id: str
    function: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    provider_fields: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def role(self) -> str:
        return "assistant"


@dataclass(frozen=True, slots=True, kw_only=True, config=_DEFERRED)
class ActionResponse(Message):
    """The result of one :class:`ActionRequest`, linked by ``request_id`` and ``call_id``.

    A failed call has ``is_error`` set, the concise error the model sees in ``output``, and the
    exception's class name and message in ``error_type`` / ``error_message`` for the developer
    (the traceback goes to the ``lionagi.tools`` logger and the :class:`ToolFailed` signal).
    """

    kind: Literal["action_response"] = "action_response"
    request_id: UUID
    call_id: str
    function: str
    output: JsonValue = None
    is_error: bool = False
    error_type: str | None = None
    error_message: str | None = None

    @property
    def role(self) -> str:
        return "tool"


_ID_SLOT = Message.__dict__["id"]  # the id slot's own descriptor
_id_get = _ID_SLOT.__get__
_id_set = _ID_SLOT.__set__


class _CompactId:
    """``Message.id``: the slot keeps the id's 128-bit number, and each read makes the UUID.

    A ``UUID`` object is 56 bytes more than its number and tracked by the cyclic garbage
    collector; a conversation keeps one per message for as long as it lives, and reads few of
    them. Reading gives an equal, equally hashed UUID each time (not the same object). A value
    that is not a UUID (an unvalidated ``model_copy`` update) is kept and read back as given.
    The history looks messages up by :attr:`Message._key`, the number itself.
    """

    __slots__ = ()

    def __get__(self, message: object, owner: type | None = None) -> Any:
        if message is None:
            return self
        value = _id_get(message)
        return uuid_of(value) if type(value) is int else value

    def __set__(self, message: object, value: Any) -> None:
        _id_set(message, value.int if isinstance(value, UUID) else value)

    def __delete__(self, message: object) -> None:
        _refuse_assignment(message, "id")


type.__setattr__(Message, "id", _CompactId())  # replaces the slot's descriptor, kept above
#: the id's number (``message.id.int``) read straight from the slot: no UUID made
type.__setattr__(Message, "_key", property(_id_get))


def _refuse_assignment(self: object, name: str, value: Any = None) -> None:
    raise ValidationError.from_exception_data(
        type(self).__name__, [{"type": "frozen_instance", "loc": (name,), "input": value}]
    )


# Immutable as a frozen BaseModel is: assigning raises pydantic's frozen_instance error (a
# frozen dataclass's own __setattr__ raises FrozenInstanceError, an AttributeError). Messages
# stay unhashable, as their dict-valued fields are (a frozen dataclass would hash them); a usage
# hashes by its fields.
for _class in (
    Usage,
    Message,
    System,
    Instruction,
    AssistantResponse,
    ActionRequest,
    ActionResponse,
):
    _class.__setattr__ = _refuse_assignment  # type: ignore[method-assign]
    _class.__delattr__ = _refuse_assignment  # type: ignore[method-assign]
    if _class is not Usage:
        _class.__hash__ = None  # type: ignore[method-assign,assignment]
del _class


_clock = time.time


def _stamped(builder: type, kind: str) -> Any:
    """An unfilled message of a trusted builder's class holding what every message gets when
    it is made: a fresh id (the slot keeps the number), the creation time and its kind. Any:
    the caller sets the rest of a frozen class's fields, then gives it its class."""
    message: Any = _new(builder)
    message.id = new_id_int()
    message.created_at = _clock()
    message.kind = kind
    return message


# The classes the trusted builders below fill a message through (see filling_class), with the
# id's own slot: the number is stored, no UUID conversion.
_InstructionBuilder = filling_class(Instruction, id=_ID_SLOT)


def text_instruction(
    instruction: str | None,
    guidance: str | None,
    context: str | int | float | bool | None,
    sender: str | None,
) -> Instruction:
    """``Instruction(instruction=..., guidance=..., context=..., sender=...)`` for values the
    caller has checked are exactly text (or, for ``context``, a JSON scalar) or ``None``:
    validation would return each unchanged, so it is not run (it cost about as much as the
    rest of starting a turn). Anything else (containers, schemas, images) goes through
    ``Instruction(...)``."""
    message = _stamped(_InstructionBuilder, "instruction")
    message.instruction = instruction
    message.guidance = guidance
    message.context = context
    message.tool_schemas = ()
    message.response_format = None
    message.images = ()
    message.sender = sender
    message.__class__ = Instruction  # immutable from here on
    return message  # type: ignore[no-any-return]  # an Instruction now (cast() is a call)


_AssistantResponseBuilder = filling_class(AssistantResponse, id=_ID_SLOT)


def reply_message(
    content: str,
    model: str | None,
    usage: Usage | None,
    raw: JsonValue,
    refusal: str | None = None,
    reasoning: tuple[Reasoning, ...] = (),
) -> AssistantResponse:
    """The :class:`AssistantResponse` of a reply the library already holds validated (a
    ``ModelResponse``'s values): built without running the validator again.

    Validation would check the same values and build an equal message, at about four times
    the cost of the rest of recording a reply; it would also copy ``raw``, the provider's
    payload, which the message shares with the response instead (neither changes it). Values
    from anywhere else go through ``AssistantResponse(...)``, which validates them.
    """
    message = _stamped(_AssistantResponseBuilder, "assistant")
    message.content = content
    message.model = model
    message.usage = usage
    message.raw = raw
    message.refusal = refusal
    message.reasoning = reasoning
    message.__class__ = AssistantResponse  # immutable from here on
    return message  # type: ignore[no-any-return]  # an AssistantResponse now


MessageUnion: TypeAlias = Annotated[
    System | Instruction | AssistantResponse | ActionRequest | ActionResponse,
    Field(discriminator="kind"),
]


@functools.cache
def _message_adapter() -> TypeAdapter[MessageUnion]:
    return TypeAdapter(MessageUnion)  # built on first use, not at import


def message_from_dict(data: dict[str, Any]) -> Message:
    """Rebuild a message from ``model_dump`` output (``kind`` selects)."""
    return _message_adapter().validate_python(data)


OnAdded: TypeAlias = Callable[[Message], None]


#: below this many messages the history has no id index: a lookup scans (a one-turn
#: conversation's three messages cost less to scan than a dict costs to keep)
_INDEX_FROM = 8


class MessageManager(Sequence[Message]):
    """Ordered, append-only conversation history.

    ``on_added`` callbacks run synchronously right after a message is stored, in registration
    order; a callback that raises does not undo the append (the error propagates to the caller
    that appended, after every callback ran).
    """

    __slots__ = ("__weakref__", "_by_id", "_callbacks", "_messages")

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._messages: list[Message] = []
        # the id's number (``Message._key``) -> message, made once the history is long: an int
        # hashes and compares in C, a UUID through Python-level ``__hash__`` / ``__eq__``
        self._by_id: dict[int, Message] | None = None
        self._callbacks: tuple[OnAdded, ...] = ()
        batch = list(messages)
        self._check(batch)
        self._record(batch)  # no callbacks yet: stored silently

    # -- reading -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, index: Any) -> Any:
        return self._messages[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, Message) and self._find(item._key) is not None

    def get(self, message_id: UUID) -> Message | None:
        return self._find(message_id.int) if isinstance(message_id, UUID) else None

    def _find(self, key: int) -> Message | None:
        by_id = self._by_id
        if by_id is not None:
            return by_id.get(key)
        for message in self._messages:
            if message._key == key:
                return message
        return None

    def snapshot(self) -> list[Message]:
        """A copy of the history as it is now."""
        return list(self._messages)

    def request_copy(
        self, first: Message | None = None, pending: Sequence[Message] = ()
    ) -> RecordedCopy:
        """The history as it is now, for one model request (library use), without copying it:
        ``first`` replaces the first message in the request only (a system message with
        request-only context), ``pending`` follows it (the request's messages that are not
        recorded yet). It also says which history it shows, so a renderer that caches the
        encoded form of a history's beginning can trust that beginning without comparing it
        message by message."""
        return RecordedCopy(self, first, pending)

    @property
    def progression(self) -> tuple[UUID, ...]:
        """The message ids in history order (upstream lionagi's ``msgs.progression``)."""
        return tuple(message.id for message in self._messages)

    @property
    def system(self) -> System | None:
        first = self._messages[0] if self._messages else None
        return first if isinstance(first, System) else None

    # -- writing -------------------------------------------------------------------------
    def on_added(self, callback: OnAdded) -> Callable[[], None]:
        """Register ``callback(message)``; returns a function that unregisters it."""
        self._callbacks = (*self._callbacks, callback)

        def remove() -> None:
            callbacks = list(self._callbacks)
            if callback in callbacks:
                callbacks.remove(callback)
                self._callbacks = tuple(callbacks)

        return remove

    def add(self, message: Message) -> Message:
        """Append ``message`` and run the callbacks. A message can be added only once."""
        batch = (message,)
        self._check(batch)
        self._record(batch)
        return message

    def extend(self, messages: Sequence[Message]) -> None:
        """Append several messages: all of them, or (on a bad or duplicate one) none."""
        batch = list(messages)
        self._check(batch)
        self._record(batch)

    def _check(self, batch: Sequence[Message]) -> None:
        """Refuse (:class:`HistoryError`) a batch with a non-message, a message recorded already
        or one message twice; checks each message once."""
        by_id = self._by_id
        seen: set[int] = set()
        for message in batch:
            if not isinstance(message, Message):
                raise HistoryError(f"expected a Message, got {type(message).__name__}")
            key = message._key
            if key in seen or (key in by_id if by_id is not None else self._find(key) is not None):
                raise _duplicate(message)
            seen.add(key)

    def _record(self, batch: Sequence[Message]) -> None:
        """Store each checked message, then run the callbacks on it before storing the next;
        every callback runs, and the first error is raised once all are stored."""
        messages = self._messages
        errors: list[Exception] | None = None
        for message in batch:
            messages.append(message)
            by_id = self._by_id
            if by_id is not None:
                by_id[message._key] = message
            elif len(messages) >= _INDEX_FROM:
                self._by_id = {m._key: m for m in messages}
            for callback in self._callbacks:  # a tuple: a callback may (un)register others
                try:
                    callback(message)
                except Exception as exc:  # a failed callback leaves the message stored
                    if errors is None:
                        errors = []
                    errors.append(exc)
        if errors:
            raise errors[0]


def _duplicate(message: Message) -> HistoryError:
    return HistoryError(
        f"message {message.id} is already in this history; a message is recorded once"
    )


class RecordedCopy(Sequence[Message]):
    """A model request's messages: a :class:`MessageManager`'s history as it was when the
    request was made, then the request's own messages that are not recorded.

    It copies nothing: a history is append-only, so its first ``recorded`` messages stay what
    they were, and a request made from a history of thousands of messages costs no list copy
    (and no reference to each message). ``source`` is the history; items
    ``1 .. recorded - 1`` are its own messages, in its order (item 0 may be a request-only copy
    of the system message, and items from ``recorded`` on are the request's pending messages).
    A prefix of the history checked once stays the same for every later request made from it:
    a renderer keeping an encoded prefix keyed by ``source`` checks only the messages after
    it. Read-only, as every request's messages are; it compares equal to a list or tuple of
    the same messages, and a slice of it is a list.
    """

    __slots__ = ("_first", "_history", "_pending", "recorded", "source")

    def __init__(
        self, source: MessageManager, first: Message | None = None, pending: Sequence[Message] = ()
    ) -> None:
        self.source = source
        self._history = history = source._messages  # only appended to: items stay put
        self.recorded = len(history)
        self._first = first if history else None
        self._pending = tuple(pending)

    def __len__(self) -> int:
        return self.recorded + len(self._pending)

    def __getitem__(self, index: Any) -> Any:
        recorded = self.recorded
        if isinstance(index, slice):
            start, stop, step = index.indices(recorded + len(self._pending))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            items = self._history[start : max(start, min(stop, recorded))]
            if start == 0 and items and self._first is not None:
                items[0] = self._first
            if stop > recorded:
                items.extend(self._pending[max(start - recorded, 0) : stop - recorded])
            return items
        if index < 0:
            index += recorded + len(self._pending)
        if 0 <= index < recorded:
            if index == 0 and self._first is not None:
                return self._first
            return self._history[index]
        if index < 0:
            raise IndexError("request message index out of range")
        return self._pending[index - recorded]

    def __iter__(self) -> Iterator[Message]:
        history, recorded, first = self._history, self.recorded, self._first
        if first is None:
            head: Iterator[Message] = islice(history, recorded)
        else:
            head = chain((first,), islice(history, 1, recorded))
        return chain(head, self._pending) if self._pending else head

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordedCopy | list | tuple):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, as a list is

    def __repr__(self) -> str:
        return f"RecordedCopy({list(self)!r})"
