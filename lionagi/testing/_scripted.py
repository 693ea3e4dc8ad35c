"""``TestModel``: a deterministic offline model that answers from a script or a schema."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from anyio.lowlevel import checkpoint

from lionagi.errors import ConfigurationError, ScriptExhaustedError
from lionagi.protocols.messages import ActionResponse, Message, ToolCall
from lionagi.service.imodel import DEFAULT_TIMEOUT
from lionagi.service.types import ModelRequest, ModelResponse, StreamChunk
from lionagi.testing._offline import (
    OfflineModel,
    OfflineProvider,
    Reply,
    check_reply,
    stream_chunks,
)
from lionagi.testing._schema import schema_example
from lionagi.testing._usage import json_text

__all__ = ["ScriptExhaustedError", "ScriptedProvider", "TestModel"]


class ScriptedProvider(OfflineProvider):
    """Answers from a script, or from the request's schema; see :class:`TestModel`."""

    name = "test"

    def __init__(
        self,
        script: tuple[Reply, ...] | None,
        *,
        default: str = "ok",
        chunk_size: int | None = None,
        tool_calls: tuple[ToolCall, ...] = (),
        model: str = "test",
        position: int = 0,
    ) -> None:
        super().__init__(model=model, name="test")
        self.script = script
        self.position = position
        self.default = default
        self.chunk_size = chunk_size
        self.tool_calls = tool_calls

    def clone(self) -> ScriptedProvider:
        """Same script (continuing from the current position), a fresh, empty ``calls``."""
        return ScriptedProvider(
            self.script,
            default=self.default,
            chunk_size=self.chunk_size,
            tool_calls=self.tool_calls,
            model=self.model,
            position=self.position,
        )

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        await checkpoint()
        self.calls.append(request)
        return self._next(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        await checkpoint()
        self.calls.append(request)
        response = self._next(request)
        first = True
        for chunk in stream_chunks(response, self._split(response.text)):
            if first:
                first = False
            elif chunk.type == "text":
                await checkpoint()
            yield chunk

    def _next(self, request: ModelRequest) -> ModelResponse:
        if self.script is not None:
            if self.position >= len(self.script):
                count = len(self.script)
                raise ScriptExhaustedError(
                    f"TestModel script exhausted: {count} response"
                    f"{'' if count == 1 else 's'} scripted, and call {len(self.calls)} asked for "
                    "another; add responses to the script, or build TestModel() without one to "
                    "answer every call with `default` or schema-valid JSON"
                )
            reply = self.script[self.position]
            self.position += 1
            return self._response(reply, request)
        if self.tool_calls and request.tools and not _answers_tool(request.messages):
            return self._response(list(self.tool_calls), request)
        if request.response_format is not None:
            return self._response(json_text(schema_example(request.response_format)), request)
        return self._response(self.default, request)

    def _split(self, text: str) -> list[str]:
        if self.chunk_size is None:
            return _WORD_PIECE.findall(text)
        size = self.chunk_size
        return [text[i : i + size] for i in range(0, len(text), size)]


# A word with the whitespace before it; trailing whitespace forms the last piece.
_WORD_PIECE = re.compile(r"\s*\S+|\s+\Z")


def _answers_tool(messages: Sequence[Message]) -> bool:
    return bool(messages) and isinstance(messages[-1], ActionResponse)


class TestModel(OfflineModel):
    """A deterministic scripted model: each call takes the next scripted reply.

    ``responses`` holds ``str``, ``ModelResponse``, ``ToolCall`` or ``list[ToolCall]`` items;
    one call past the end raises :class:`ScriptExhaustedError`. Without a script the model
    answers a request that carries a ``response_format`` with JSON valid for that schema
    (strings ``"x"``, integers ``0``, numbers ``0.0``, booleans ``false``, first enum value,
    one-item arrays, optional fields filled, bounds and common string formats respected), and
    anything else with ``default``. ``tool_calls`` makes the unscripted model call those tools
    whenever the request offers tools and the last message is not a tool result.

    Streams split the reply text into ``chunk_size`` characters, or into words (each with the
    whitespace before it) when ``None``. ``copy()`` shares the script but keeps its own
    position, starting where this model is now, and starts with empty ``calls``.

    >>> import anyio
    >>> from lionagi.protocols.messages import Instruction
    >>> model = TestModel(["hello", TestModel.scripted_tool_call("add", a=1, b=2)])
    >>> ask = [Instruction(instruction="hi")]
    >>> anyio.run(model.invoke, ask).text
    'hello'
    >>> anyio.run(model.invoke, ask).tool_calls[0].arguments
    {'a': 1, 'b': 2}
    >>> model.remaining
    0
    """

    __test__ = False  # not a pytest test class, despite the name
    provider: ScriptedProvider

    def __init__(
        self,
        responses: Sequence[Reply] | None = None,
        *,
        default: str = "ok",
        chunk_size: int | None = None,
        tool_calls: ToolCall | Sequence[ToolCall] | None = None,
        model: str = "test",
        timeout: float | None = DEFAULT_TIMEOUT,
        concurrency_limit: int | None = None,
        **request_defaults: Any,
    ) -> None:
        script = _script(responses)
        if not isinstance(default, str):
            raise ConfigurationError(f"TestModel default must be a str, got {default!r}")
        chunk_size = _chunk_size(chunk_size)
        calls = _tool_calls(tool_calls)
        super().__init__(
            ScriptedProvider(
                script,
                default=default,
                chunk_size=chunk_size,
                tool_calls=calls,
                model=model,
            ),
            timeout=timeout,
            concurrency_limit=concurrency_limit,
            **request_defaults,
        )

    @property
    def remaining(self) -> int | None:
        """Scripted replies not yet used (``None`` without a script)."""
        script = self.provider.script
        return None if script is None else len(script) - self.provider.position

    @staticmethod
    def scripted_tool_call(name: str, /, **arguments: Any) -> ToolCall:
        """A ``ToolCall`` whose id is derived from ``name`` and ``arguments``.

        Equal calls get equal ids; build ``ToolCall(id=..., ...)`` yourself to choose one.
        """
        digest = hashlib.sha256(
            f"{name}\0{json.dumps(arguments, sort_keys=True, default=str)}".encode()
        ).hexdigest()
        return ToolCall(id=f"call_{digest[:16]}", name=name, arguments=arguments)


def _script(responses: Sequence[Reply] | None) -> tuple[Reply, ...] | None:
    if isinstance(responses, str):
        raise ConfigurationError(
            f"TestModel responses must be a list of replies, got the str {responses!r:.80}; "
            "write TestModel([...])"
        )
    if responses is None:
        return None
    return tuple(check_reply(r, f"TestModel responses[{i}]") for i, r in enumerate(responses))


def _chunk_size(chunk_size: int | None) -> int | None:
    if chunk_size is not None and (
        not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1
    ):
        raise ConfigurationError(
            f"TestModel chunk_size must be a positive int or None, got {chunk_size!r}"
        )
    return chunk_size


def _tool_calls(tool_calls: ToolCall | Sequence[ToolCall] | None) -> tuple[ToolCall, ...]:
    if tool_calls is None:
        return ()
    if isinstance(tool_calls, ToolCall):
        return (tool_calls,)
    calls = tuple(tool_calls)
    if not all(isinstance(c, ToolCall) for c in calls):
        raise ConfigurationError(
            f"TestModel tool_calls must be ToolCall objects, got {tool_calls!r:.80}"
        )
    return calls
