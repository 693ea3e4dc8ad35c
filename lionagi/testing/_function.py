"""``FunctionModel``: an offline model that answers by calling your function."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeAlias, cast

from anyio.lowlevel import checkpoint

from lionagi._textbuffer import TextBuffer
from lionagi.errors import ConfigurationError
from lionagi.service.imodel import DEFAULT_TIMEOUT
from lionagi.service.types import FinalChunk, ModelRequest, ModelResponse, StreamChunk, TextDelta
from lionagi.testing._offline import OfflineModel, OfflineProvider, stream_chunks

__all__ = ["FunctionModel", "FunctionProvider", "ModelFunction", "StreamFunction"]

ModelFunction: TypeAlias = Callable[..., Any]
"""``fn(messages, **options) -> Reply`` (or an awaitable of one)."""

StreamFunction: TypeAlias = Callable[..., Iterable[str] | AsyncIterator[str]]
"""``stream(messages, **options)``: a sync or async generator of text chunks."""


def _fn_options(request: ModelRequest) -> Mapping[str, Any]:
    if not request.tools and request.response_format is None:
        return request.options
    options = dict(request.options)
    if request.tools:
        options["tools"] = tuple(spec.function_schema() for spec in request.tools)
    if request.response_format is not None:
        options["response_format"] = request.response_format
    return options


class FunctionProvider(OfflineProvider):
    """Answers each request by calling ``fn(messages, **options)``; see :class:`FunctionModel`."""

    name = "function"

    def __init__(
        self,
        fn: ModelFunction,
        stream: StreamFunction | None = None,
        *,
        model: str = "function",
        name: str = "function",
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(f"FunctionModel needs a callable, got {fn!r}")
        if stream is not None and not callable(stream):
            raise ConfigurationError(f"FunctionModel stream= needs a callable, got {stream!r}")
        super().__init__(model=model, name=name)
        self.fn = fn
        self.stream_fn = stream
        self._fn_is_async = inspect.iscoroutinefunction(fn)
        self._stream_is_async = stream is not None and inspect.isasyncgenfunction(stream)

    def clone(self) -> FunctionProvider:
        """Same functions, name and model; a fresh, empty ``calls``."""
        return FunctionProvider(self.fn, self.stream_fn, model=self.model, name=self.name)

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        if not self._fn_is_async:
            await checkpoint()  # a sync fn never yields; this makes each call cancellable
        self.calls.append(request)
        reply = self.fn(request.messages, **_fn_options(request))
        if self._fn_is_async or (type(reply) is not str and inspect.isawaitable(reply)):
            reply = await reply
        return self._response(reply, request)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        if self.stream_fn is None:
            return self._stream_reply(request)
        return self._stream_fn(self.stream_fn, request)

    async def _stream_reply(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        response = await self.invoke(request)
        for chunk in stream_chunks(response, (response.text,) if response.text else ()):
            yield chunk

    async def _stream_fn(
        self, stream_fn: StreamFunction, request: ModelRequest
    ) -> AsyncIterator[StreamChunk]:
        if not self._stream_is_async:
            await checkpoint()
        self.calls.append(request)
        source = stream_fn(request.messages, **_fn_options(request))
        parts = TextBuffer()  # one growing buffer: nothing kept per chunk
        if hasattr(source, "__anext__"):
            pieces = cast(AsyncIterator[str], source)
            try:
                async for piece in pieces:
                    if piece := self._piece(piece):
                        parts.write(piece)
                        yield TextDelta(text=piece)
            finally:
                await _aclose(pieces)
        else:
            iterator = iter(source)
            try:
                for piece in iterator:
                    if piece := self._piece(piece):
                        parts.write(piece)
                        await checkpoint()
                        yield TextDelta(text=piece)
            finally:
                _close(iterator)
        yield FinalChunk(response=self._response(parts.getvalue(), request))

    def _piece(self, piece: object) -> str:
        if not isinstance(piece, str):
            raise ConfigurationError(
                f"the stream function of {self.name!r} model must yield str chunks, got "
                f"{type(piece).__name__}: {piece!r:.80}"
            )
        return piece


async def _aclose(pieces: AsyncIterator[str]) -> None:
    close = getattr(pieces, "aclose", None)
    if close is not None:
        await close()


def _close(pieces: Iterator[str]) -> None:
    close = getattr(pieces, "close", None)
    if close is not None:
        close()


class FunctionModel(OfflineModel):
    """A model that answers by calling your function -- for tests, fakes and fault injection.

    ``fn(messages, **options)`` (sync or async) receives the request's messages and options
    (call options over the model's request defaults, plus ``tools=`` and ``response_format=``
    only when the request has them) and returns a ``str``, a ``ModelResponse``, a ``ToolCall``
    or a list of them. Exceptions from ``fn`` propagate unchanged. A sync ``fn`` runs on the
    event loop after one checkpoint, so calls stay cancellable.

    ``stream(messages, **options)``, a sync or async generator of text chunks, powers
    ``stream()``; without it a stream yields the ``fn`` reply as one ``TextDelta`` (or
    ``ToolCallDelta``s) and the ``FinalChunk``. ``timeout``, ``concurrency_limit`` and request
    defaults work as on any :class:`iModel`. ``name`` and ``model`` default to the provider's
    name, ``"function"``. Every request is appended to ``calls``. ``copy()`` shares the
    functions and starts with empty ``calls``.

    >>> import anyio
    >>> from lionagi.protocols.messages import Instruction
    >>> def shout(messages, **options):
    ...     return messages[-1].instruction.upper()
    >>> model = FunctionModel(shout)
    >>> anyio.run(model.invoke, [Instruction(instruction="hi there")]).text
    'HI THERE'
    >>> len(model.calls)
    1
    """

    provider: FunctionProvider

    def __init__(
        self,
        fn: ModelFunction,
        *,
        stream: StreamFunction | None = None,
        name: str = FunctionProvider.name,
        model: str = FunctionProvider.name,
        timeout: float | None = DEFAULT_TIMEOUT,
        concurrency_limit: int | None = None,
        **request_defaults: Any,
    ) -> None:
        super().__init__(
            FunctionProvider(fn, stream, model=model, name=name),
            timeout=timeout,
            concurrency_limit=concurrency_limit,
            **request_defaults,
        )
