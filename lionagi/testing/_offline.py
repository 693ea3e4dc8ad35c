"""What the in-process models share: replies, their check, and the provider and model bases.

Both offline models are real :class:`~lionagi.service.imodel.iModel` objects whose providers
answer in process, so every call goes through the same limiter, timeout and streaming machinery
as a network model. They are deterministic, record every request in ``.calls`` and cost little
per call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar, Self, TypeAlias

from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import ToolCall, Usage
from lionagi.service.imodel import iModel
from lionagi.service.providers.base import Provider
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)
from lionagi.testing._usage import InputWords, json_text, tool_call_words

__all__ = ["OfflineModel", "OfflineProvider", "Reply", "check_reply", "stream_chunks"]

Reply: TypeAlias = str | ModelResponse | ToolCall | list[ToolCall]
"""What a model function returns or a script holds: text, a whole response, or tool calls."""


def check_reply(reply: object, where: str) -> Reply:
    if isinstance(reply, str | ModelResponse | ToolCall):
        return reply
    if isinstance(reply, list | tuple) and all(isinstance(c, ToolCall) for c in reply):
        return list(reply)
    raise ConfigurationError(
        f"{where} must be a str, ModelResponse, ToolCall or list of ToolCall, got "
        f"{type(reply).__name__}: {reply!r:.80}"
    )


def stream_chunks(response: ModelResponse, pieces: Iterable[str]) -> Iterator[StreamChunk]:
    for piece in pieces:
        yield TextDelta(text=piece)
    for index, call in enumerate(response.tool_calls):
        yield ToolCallDelta(
            index=index, id=call.id, name=call.name, arguments=json_text(call.arguments)
        )
    yield FinalChunk(response=response)


class OfflineProvider(Provider):
    """Shared parts of the in-process providers: ``calls`` and turning replies into responses."""

    api_key_env: ClassVar[str | None] = None

    def __init__(self, *, model: str, name: str) -> None:
        super().__init__(model=model, name=name, api_key_env=None)
        self.calls: list[ModelRequest] = []
        self._input_words = InputWords()

    def config(self) -> dict[str, Any]:
        return {}  # functions and scripts are not serializable; see iModel.from_dict

    def _response(self, reply: object, request: ModelRequest) -> ModelResponse:
        if type(reply) is str:
            return ModelResponse(
                text=reply,
                usage=Usage(
                    input_tokens=self._input_words.count(request.messages),
                    output_tokens=len(reply.split()),
                ),
                model=request.model,
                provider=self.name,
                finish_reason="stop",
                session_id=request.session_id,
            )
        checked = check_reply(reply, f"the reply of {self.name!r} model")
        if isinstance(checked, ModelResponse):
            return checked
        if isinstance(checked, str):  # a str subclass
            return self._response(str(checked), request)
        calls = (checked,) if isinstance(checked, ToolCall) else tuple(checked)
        return ModelResponse(
            tool_calls=calls,
            usage=Usage(
                input_tokens=self._input_words.count(request.messages),
                output_tokens=tool_call_words(calls),
            ),
            model=request.model,
            provider=self.name,
            finish_reason="tool_calls",
            session_id=request.session_id,
        )


class OfflineModel(iModel):
    provider: OfflineProvider

    @property
    def calls(self) -> list[ModelRequest]:
        """Every request this model received, oldest first (a live list; clear it freely)."""
        return self.provider.calls

    def copy(self) -> Self:
        """An independent model with the same behaviour and an empty ``calls``."""
        clone = type(self).__new__(type(self))
        iModel.__init__(
            clone,
            self.provider.clone(),
            timeout=self.timeout,
            concurrency_limit=self.concurrency_limit,
            **self.policy_settings(),
            **self.request_defaults,
        )
        return clone

    def to_dict(self) -> dict[str, Any]:
        """The configuration without the function or script (``offline: True`` marks it)."""
        return {**super().to_dict(), "offline": True}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Always raises: an offline model holds code or a script, so rebuild it in code."""
        raise ConfigurationError(
            f"{cls.__name__}.from_dict: offline models cannot be rebuilt from a dict; "
            f"construct {cls.__name__}(...) in code"
        )
