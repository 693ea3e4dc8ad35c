"""Typed conversation messages and the append-only history that holds them.

Messages are immutable pydantic models with an ``id`` and a ``created_at`` timestamp. A
:class:`MessageManager` keeps them in order; it only ever appends, and it tells synchronous
``on_added`` callbacks about every message right after it is stored.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, Self, TypeAlias
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

from lionagi._ids import new_id
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


class Usage(BaseModel):
    """Token usage and cost reported by a provider for one response."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


class Message(BaseModel):
    """Base of every message: identity and creation time. Immutable once built."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: UUID = Field(default_factory=new_id)
    created_at: float = Field(default_factory=time.time)

    def model_post_init(self, context: Any, /) -> None:
        # A fresh render cache, set directly: declared as a pydantic PrivateAttr, its generic
        # initialisation ran twice per message (once more for every subclass level) and cost
        # about a third of building one.
        object.__setattr__(self, "__pydantic_private__", {"_render_cache": {}})

    @property
    def _render_cache(self) -> dict[str, Any]:
        """Renderers memoize a message's wire form here (messages are immutable), so
        re-rendering a long history costs a lookup per message. Never serialized."""
        cache: dict[str, Any] = self.__pydantic_private__["_render_cache"]  # type: ignore[index]
        return cache

    @property
    def role(self) -> str:
        raise NotImplementedError

    @property
    def metadata(self) -> dict[str, Any]:
        """Upstream lionagi's per-message ``metadata`` dict, read from the message's own fields
        (a reply's holds the raw provider response under ``"model_response"``). A new dict
        each time: messages are immutable."""
        return {}

    def __eq__(self, other: object) -> bool:
        # Field equality only: the render cache is not part of a message's value.
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # dict-valued fields make messages unhashable

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (with ``update`` applied) that does not share the render cache."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__pydantic_private__ = {"_render_cache": {}}
        return copied


class System(Message):
    """The system prompt of a conversation."""

    kind: Literal["system"] = "system"
    content: str

    @property
    def role(self) -> str:
        return "system"


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


class ActionRequest(Message):
    """A request to run one tool, by a model (``call_id`` from the provider) or a caller."""

    model_config = ConfigDict(defer_build=True)  # built on the first tool call
    kind: Literal["action_request"] = "action_request"
    call_id: str
    function: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    provider_fields: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def role(self) -> str:
        return "assistant"


class ActionResponse(Message):
    """The result of one :class:`ActionRequest`, linked by ``request_id`` and ``call_id``.

    A failed call has ``is_error`` set, the concise error the model sees in ``output``, and the
    exception's class name and message in ``error_type`` / ``error_message`` for the developer
    (the traceback goes to the ``lionagi.tools`` logger and the :class:`ToolFailed` signal).
    """

    model_config = ConfigDict(defer_build=True)  # built on the first tool call
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


MessageUnion: TypeAlias = Annotated[
    System | Instruction | AssistantResponse | ActionRequest | ActionResponse,
    Field(discriminator="kind"),
]


@functools.cache
def _message_adapter() -> TypeAdapter[MessageUnion]:
    return TypeAdapter(MessageUnion)  # built on first use, not at import


def message_from_dict(data: dict[str, Any]) -> Message:
    """Rebuild a message from :meth:`pydantic.BaseModel.model_dump` output (``kind`` selects)."""
    return _message_adapter().validate_python(data)


OnAdded: TypeAlias = Callable[[Message], None]


class MessageManager(Sequence[Message]):
    """Ordered, append-only conversation history.

    ``on_added`` callbacks run synchronously right after a message is stored, in registration
    order; a callback that raises does not undo the append (the error propagates to the caller
    that appended, after every callback ran).
    """

    __slots__ = ("_by_id", "_callbacks", "_messages")

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._messages: list[Message] = []
        self._by_id: dict[UUID, Message] = {}
        self._callbacks: list[OnAdded] = []
        for message in messages:
            self._store(message)

    # -- reading -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, index: Any) -> Any:
        return self._messages[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, Message) and item.id in self._by_id

    def get(self, message_id: UUID) -> Message | None:
        return self._by_id.get(message_id)

    def snapshot(self) -> list[Message]:
        """A copy of the history as it is now."""
        return list(self._messages)

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
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove

    def add(self, message: Message) -> Message:
        """Append ``message`` and run the callbacks. A message can be added only once."""
        self._store(message)
        errors: list[Exception] = []
        for callback in tuple(self._callbacks):
            try:
                callback(message)
            except Exception as exc:  # every callback runs; the first error is raised after
                errors.append(exc)
        if errors:
            raise errors[0]
        return message

    def extend(self, messages: Sequence[Message]) -> None:
        """Append several messages: all of them, or (on a bad or duplicate one) none."""
        batch = list(messages)
        seen: set[UUID] = set()
        for message in batch:
            if not isinstance(message, Message):
                raise HistoryError(f"expected a Message, got {type(message).__name__}")
            if message.id in self._by_id or message.id in seen:
                raise HistoryError(
                    f"message {message.id} is already in this history; a message is recorded once"
                )
            seen.add(message.id)
        errors: list[Exception] = []
        for message in batch:
            try:
                self.add(message)
            except Exception as exc:  # a callback failed; the message is stored, go on
                errors.append(exc)
        if errors:
            raise errors[0]

    def _store(self, message: Message) -> None:
        if not isinstance(message, Message):
            raise HistoryError(f"expected a Message, got {type(message).__name__}")
        if message.id in self._by_id:
            raise HistoryError(
                f"message {message.id} is already in this history; a message is recorded once"
            )
        self._messages.append(message)
        self._by_id[message.id] = message
