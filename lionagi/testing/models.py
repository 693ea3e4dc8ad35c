"""Offline models for tests, demos and benchmarks: :class:`FunctionModel` and :class:`TestModel`.

Both are real :class:`~lionagi.service.imodel.iModel` objects whose providers answer in process,
so every call goes through the same limiter, timeout and streaming machinery as a network model.
They are deterministic, record every request in ``.calls`` and cost little per call.

Usage they report is counted in whitespace-separated words (one word = one token) of the text
fields of the request's messages (input) and of the reply (output; a tool call counts the words
of its name and JSON arguments) -- cheap, deterministic and enough for budget tests.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Self, TypeAlias, cast

from anyio.lowlevel import checkpoint

from lionagi.errors import ConfigurationError, LionError
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
    ToolCall,
    Usage,
)
from lionagi.service.imodel import DEFAULT_TIMEOUT, iModel
from lionagi.service.providers.base import Provider
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)

__all__ = [
    "FunctionModel",
    "FunctionProvider",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "TestModel",
    "schema_example",
]

Reply: TypeAlias = str | ModelResponse | ToolCall | list[ToolCall]
"""What a model function returns or a script holds: text, a whole response, or tool calls."""

ModelFunction: TypeAlias = Callable[..., Any]
"""``fn(messages, **options) -> Reply`` (or an awaitable of one)."""

StreamFunction: TypeAlias = Callable[..., Iterable[str] | AsyncIterator[str]]
"""``stream(messages, **options)``: a sync or async generator of text chunks."""


class ScriptExhaustedError(LionError):
    """A :class:`TestModel` was called more times than it has scripted responses."""


# -- usage ----------------------------------------------------------------------------------
_WORDS = "testing.words"


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def _message_text(message: Message) -> str:
    if isinstance(message, System | AssistantResponse):
        return message.content
    if isinstance(message, Instruction):
        parts = [p for p in (message.instruction, message.guidance) if p]
        if message.context is not None:
            parts.append(_json(message.context))
        return " ".join(parts)
    if isinstance(message, ActionRequest):
        return f"{message.function} {_json(message.arguments)}"
    if isinstance(message, ActionResponse):
        out = message.output
        return out if isinstance(out, str) else _json(out)
    return ""


def _message_words(message: Message) -> int:
    # Messages are immutable, so each one's count is memoized on it.
    cache = (message.__pydantic_private__ or {}).get("_render_cache")
    count = None if cache is None else cache.get(_WORDS)
    if count is None:
        count = len(_message_text(message).split())
        if cache is not None:
            cache[_WORDS] = count
    return count


class _InputWords:
    """Input-word totals of one provider's successive requests, each message counted once.

    A conversation's requests grow by appending, so the previous request (apart from an
    unrecorded instruction at its end, and a request-only copy of the system message at its
    start) is a prefix of the next one. That prefix is recognised with C-level tuple
    comparisons (identity first) rather than a Python loop over the history, which keeps the
    cost of a call flat as a conversation grows. Any other sequence is counted in full.
    """

    __slots__ = ("_rest", "_totals")

    def __init__(self) -> None:
        self._rest: tuple[Message, ...] = ()  # the last request without its first message
        self._totals: list[int] = [0]  # _totals[i]: the words of _rest[:i]

    def count(self, messages: Sequence[Message]) -> int:
        if not messages:
            return 0
        rest = tuple(messages[1:]) if isinstance(messages, list | tuple) else tuple(messages)[1:]
        known, totals = self._rest, self._totals
        shared = min(len(rest), len(known))
        if rest[:shared] != known[:shared]:
            shared -= 1  # the last request ended with a message this one does not repeat
            if shared < 0 or rest[:shared] != known[:shared]:
                pairs = enumerate(zip(rest, known, strict=False))
                shared = next((i for i, (a, b) in pairs if a != b), shared)
        shared = min(shared, len(totals) - 1)
        del totals[shared + 1 :]
        running = totals[shared]
        for message in rest[shared:]:
            running += _message_words(message)
            totals.append(running)
        self._rest = rest
        return _message_words(messages[0]) + running


def _tool_call_words(calls: Sequence[ToolCall]) -> int:
    return sum(len(call.name.split()) + len(_json(call.arguments).split()) for call in calls)


# -- replies --------------------------------------------------------------------------------
def _check_reply(reply: object, where: str) -> Reply:
    if isinstance(reply, str | ModelResponse | ToolCall):
        return reply
    if isinstance(reply, list | tuple) and all(isinstance(c, ToolCall) for c in reply):
        return list(reply)
    raise ConfigurationError(
        f"{where} must be a str, ModelResponse, ToolCall or list of ToolCall, got "
        f"{type(reply).__name__}: {reply!r:.80}"
    )


def _fn_options(request: ModelRequest) -> Mapping[str, Any]:
    if not request.tools and request.response_format is None:
        return request.options
    options = dict(request.options)
    if request.tools:
        options["tools"] = request.tools
    if request.response_format is not None:
        options["response_format"] = request.response_format
    return options


def _stream_chunks(response: ModelResponse, pieces: Iterable[str]) -> Iterator[StreamChunk]:
    for piece in pieces:
        yield TextDelta(text=piece)
    for index, call in enumerate(response.tool_calls):
        yield ToolCallDelta(
            index=index, id=call.id, name=call.name, arguments=_json(call.arguments)
        )
    yield FinalChunk(response=response)


class _OfflineProvider(Provider):
    """Shared parts of the in-process providers: ``calls`` and turning replies into responses."""

    api_key_env: ClassVar[str | None] = None

    def __init__(self, *, model: str, name: str) -> None:
        super().__init__(model=model, name=name, api_key_env=None)
        self.calls: list[ModelRequest] = []
        self._input_words = _InputWords()

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
        checked = _check_reply(reply, f"the reply of {self.name!r} model")
        if isinstance(checked, ModelResponse):
            return checked
        if isinstance(checked, str):  # a str subclass
            return self._response(str(checked), request)
        calls = (checked,) if isinstance(checked, ToolCall) else tuple(checked)
        return ModelResponse(
            tool_calls=calls,
            usage=Usage(
                input_tokens=self._input_words.count(request.messages),
                output_tokens=_tool_call_words(calls),
            ),
            model=request.model,
            provider=self.name,
            finish_reason="tool_calls",
            session_id=request.session_id,
        )


class FunctionProvider(_OfflineProvider):
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

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        if self.stream_fn is None:
            response = await self.invoke(request)
            for chunk in _stream_chunks(response, (response.text,) if response.text else ()):
                yield chunk
            return
        if not self._stream_is_async:
            await checkpoint()
        self.calls.append(request)
        source = self.stream_fn(request.messages, **_fn_options(request))
        parts: list[str] = []
        if hasattr(source, "__anext__"):
            pieces = cast(AsyncIterator[str], source)
            try:
                async for piece in pieces:
                    if piece := self._piece(piece):
                        parts.append(piece)
                        yield TextDelta(text=piece)
            finally:
                close = getattr(pieces, "aclose", None)
                if close is not None:
                    await close()
        else:
            iterator = iter(source)
            try:
                for piece in iterator:
                    if piece := self._piece(piece):
                        parts.append(piece)
                        await checkpoint()
                        yield TextDelta(text=piece)
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
        yield FinalChunk(response=self._response("".join(parts), request))

    def _piece(self, piece: object) -> str:
        if not isinstance(piece, str):
            raise ConfigurationError(
                f"the stream function of {self.name!r} model must yield str chunks, got "
                f"{type(piece).__name__}: {piece!r:.80}"
            )
        return piece


class ScriptedProvider(_OfflineProvider):
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
        for chunk in _stream_chunks(response, self._split(response.text)):
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
            return self._response(_json(schema_example(request.response_format)), request)
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


# -- models ---------------------------------------------------------------------------------
class _OfflineModel(iModel):
    provider: _OfflineProvider

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


class FunctionModel(_OfflineModel):
    """A model that answers by calling your function -- for tests, fakes and fault injection.

    ``fn(messages, **options)`` (sync or async) receives the request's messages and options
    (call options over the model's request defaults, plus ``tools=`` and ``response_format=``
    only when the request has them) and returns a ``str``, a ``ModelResponse``, a ``ToolCall``
    or a list of them. Exceptions from ``fn`` propagate unchanged. A sync ``fn`` runs on the
    event loop after one checkpoint, so calls stay cancellable.

    ``stream(messages, **options)``, a sync or async generator of text chunks, powers
    ``stream()``; without it a stream yields the ``fn`` reply as one ``TextDelta`` (or
    ``ToolCallDelta``s) and the ``FinalChunk``. ``timeout``, ``concurrency_limit`` and request
    defaults work as on any :class:`iModel`. Every request is appended to ``calls``.
    ``copy()`` shares the functions and starts with empty ``calls``.

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
        name: str = "function",
        model: str = "function",
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


class TestModel(_OfflineModel):
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
        if isinstance(responses, str):
            raise ConfigurationError(
                f"TestModel responses must be a list of replies, got the str {responses!r:.80}; "
                "write TestModel([...])"
            )
        script = (
            None
            if responses is None
            else tuple(
                _check_reply(r, f"TestModel responses[{i}]") for i, r in enumerate(responses)
            )
        )
        if not isinstance(default, str):
            raise ConfigurationError(f"TestModel default must be a str, got {default!r}")
        if chunk_size is not None and (
            not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1
        ):
            raise ConfigurationError(
                f"TestModel chunk_size must be a positive int or None, got {chunk_size!r}"
            )
        calls: tuple[ToolCall, ...]
        if tool_calls is None:
            calls = ()
        elif isinstance(tool_calls, ToolCall):
            calls = (tool_calls,)
        else:
            calls = tuple(tool_calls)
            if not all(isinstance(c, ToolCall) for c in calls):
                raise ConfigurationError(
                    f"TestModel tool_calls must be ToolCall objects, got {tool_calls!r:.80}"
                )
        super().__init__(
            ScriptedProvider(
                script, default=default, chunk_size=chunk_size, tool_calls=calls, model=model
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


# -- JSON from a schema ---------------------------------------------------------------------
class _Recursion(Exception):
    """A ``$ref`` cycle reached a place that must hold a value."""


_FORMATS: dict[str, str] = {
    "date-time": "2000-01-01T00:00:00Z",
    "date": "2000-01-01",
    "time": "00:00:00",
    "duration": "PT0S",
    "email": "x@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "hostname": "example.com",
}


def schema_example(schema: Mapping[str, Any]) -> Any:
    """A JSON value valid for ``schema``, the same every time (see :class:`TestModel`).

    Local ``$ref`` (``#/$defs/...``) are followed; a recursive reference ends in an empty
    array or an omitted optional field.
    """
    try:
        return _example(schema, schema, ())
    except _Recursion:
        raise ConfigurationError(
            "TestModel cannot build an example for a schema whose recursion is required at "
            "every level"
        ) from None


def _example(node: Any, root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    if node is True or not node:
        return "x"  # any value is valid
    if not isinstance(node, Mapping):
        raise ConfigurationError(f"TestModel cannot read JSON schema node {node!r:.80}")
    ref = node.get("$ref")
    if ref is not None:
        if ref in refs:
            raise _Recursion
        return _example(_resolve(root, ref), root, (*refs, ref))
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in node:
            return _first_option(node[key], root, refs)
    if "allOf" in node:
        values = [_example(part, root, refs) for part in node["allOf"]]
        if all(isinstance(v, dict) for v in values):
            return {k: v for value in values for k, v in value.items()}
        return values[0]
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in node else "array" if "items" in node else None
    if kind == "object":
        return _object(node, root, refs)
    if kind == "array":
        return _array(node, root, refs)
    if kind == "string":
        return _string(node)
    if kind == "integer":
        return _integer(node)
    if kind == "number":
        return _number(node)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "x"


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        raise ConfigurationError(
            f"TestModel follows only local $ref such as '#/$defs/Name', got {ref!r}"
        )
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            raise ConfigurationError(f"TestModel: $ref {ref!r} points nowhere in the schema")
        node = node[key]
    return node


def _is_null(option: Any) -> bool:
    return isinstance(option, Mapping) and option.get("type") == "null"


def _first_option(options: Sequence[Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    for option in options:
        if not _is_null(option):
            try:
                return _example(option, root, refs)
            except _Recursion:
                continue
    if any(_is_null(o) for o in options):
        return None
    raise _Recursion


def _object(node: Mapping[str, Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    required = set(node.get("required", ()))
    out: dict[str, Any] = {}
    for name, sub in (node.get("properties") or {}).items():
        try:
            out[name] = _example(sub, root, refs)
        except _Recursion:
            if name in required:
                raise
    return out


def _array(node: Mapping[str, Any], root: Mapping[str, Any], refs: tuple[str, ...]) -> Any:
    prefix = node.get("prefixItems")
    if prefix is not None:
        return [_example(item, root, refs) for item in prefix]
    low = node.get("minItems", 0)
    if node.get("maxItems", 1) < 1:
        return []
    try:
        item = _example(node.get("items", True), root, refs)
    except _Recursion:
        if low:
            raise
        return []
    return [item] * max(1, low)


def _string(node: Mapping[str, Any]) -> str:
    fmt = node.get("format")
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    if node.get("maxLength", 1) < 1:
        return ""
    return "x" * max(1, int(node.get("minLength", 1)))


def _fits(value: float, node: Mapping[str, Any]) -> bool:
    step = node.get("multipleOf")
    return not (
        ("minimum" in node and value < node["minimum"])
        or ("exclusiveMinimum" in node and value <= node["exclusiveMinimum"])
        or ("maximum" in node and value > node["maximum"])
        or ("exclusiveMaximum" in node and value >= node["exclusiveMaximum"])
        or (step and value % step != 0)
    )


def _candidates(node: Mapping[str, Any]) -> tuple[float | None, float | None, list[float]]:
    lows = [node[k] for k in ("minimum", "exclusiveMinimum") if k in node]
    highs = [node[k] for k in ("maximum", "exclusiveMaximum") if k in node]
    low = max(lows) if lows else None
    high = min(highs) if highs else None
    extra = [] if low is None or high is None else [(low + high) / 2]
    return low, high, extra


def _integer(node: Mapping[str, Any]) -> int:
    low, high, _ = _candidates(node)
    step = node.get("multipleOf") or 1
    options = [0]
    if low is not None:
        options += [math.ceil(low / step) * step, (math.floor(low / step) + 1) * step]
    if high is not None:
        options += [math.floor(high / step) * step, (math.ceil(high / step) - 1) * step]
    return next((int(v) for v in options if _fits(v, node)), 0)


def _number(node: Mapping[str, Any]) -> float:
    low, high, middle = _candidates(node)
    options = [0.0, *middle]
    if low is not None:
        options[1:1] = [float(low), float(low) + 1.0]
    if high is not None:
        options[1:1] = [float(high), float(high) - 1.0]
    return next((v for v in options if _fits(v, node)), 0.0)
