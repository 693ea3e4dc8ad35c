"""``iModel``: one configured model — provider, model name, options, limits.

It is the only object operations talk to for generation. It adds what every provider shares:
a per-model concurrency limit (``anyio.CapacityLimiter``), timeouts as cancel scopes, request
defaults, and a secret-free ``to_dict``. Its resilience policies — retries
(:mod:`~lionagi.service.retry`), rate limits (:mod:`~lionagi.service.ratelimit`) and fallback
models (:mod:`~lionagi.service.fallback`) — wrap each call, so one call is one reply however
many attempts it took.
"""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, Never, Self, TypeAlias, TypeVar, overload

import anyio
from pydantic import BaseModel, SecretStr

from lionagi import _instrument
from lionagi._compat import timeout_scope
from lionagi._declared import declared_as
from lionagi._interrupt import Interrupt, _Interrupted, guard
from lionagi._loopbound import LoopBound
from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import Message
from lionagi.protocols.tool_spec import ToolSpec
from lionagi.service.clock import ANYIO_CLOCK, Clock
from lionagi.service.embeddings import Embeddings
from lionagi.service.errors import ProviderTimeout
from lionagi.service.fallback import check_fallback, invoke_with_fallback
from lionagi.service.providers import DEFAULT_PROVIDER, provider_class
from lionagi.service.providers.base import Provider
from lionagi.service.ratelimit import (
    RateLimiter,
    RateLimitGrant,
    check_rate_settings,
    estimate_tokens,
)
from lionagi.service.retry import DEFAULT_RETRY, RetryHook, RetryPolicy, call_with_retry
from lionagi.service.types import (
    FinalChunk,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    StructuredOutput,
)

__all__ = ["DEFAULT_EMBED_BATCH", "DEFAULT_TIMEOUT", "iModel"]

DEFAULT_TIMEOUT = 300.0
_T = TypeVar("_T")
# an opened stream: its chunks, the first chunk, the concurrency slot's borrower, the rate-limit
# grant and the log record
_Opened: TypeAlias = tuple[
    AsyncIterator[StreamChunk],
    StreamChunk | None,
    object,
    RateLimitGrant | None,
    _instrument.StreamLog | None,
]
#: texts per embeddings request (within every OpenAI-compatible service's limit)
DEFAULT_EMBED_BATCH = 96
_EMBED_PARALLEL = 4  # embeddings requests of one embed() call in flight at once
# provider names of lionagi.testing models, which to_dict marks but from_dict cannot rebuild
_OFFLINE_PROVIDERS = frozenset({"function", "test"})


class _FromProvider(property, Generic[_T]):
    """A read-only attribute of an :class:`iModel` that is its provider's attribute ``name``.

    A ``property`` whose getter is ``operator.attrgetter("provider.<name>")``: one line per
    attribute, typed by its parameter, and a read runs no Python frame (the model name and the
    provider name are read on every request).
    """

    def __init__(self, name: str) -> None:
        super().__init__(attrgetter(f"provider.{name}"))
        self.__doc__ = f"The provider's ``{name}`` (read from ``iModel.provider``)."

    if TYPE_CHECKING:

        @overload
        def __get__(self, instance: None, owner: type | None = None, /) -> Self: ...
        @overload
        def __get__(self, instance: object, owner: type | None = None, /) -> _T: ...
        def __get__(self, instance: object, owner: type | None = None, /) -> Any: ...
        # read-only to the type checker too, as a ``@property`` without a setter is
        def __set__(self, instance: object, value: Never, /) -> None: ...


def _limiter_idle(limiter: anyio.CapacityLimiter) -> bool:
    stats = limiter.statistics()
    return stats.borrowed_tokens == 0 and stats.tasks_waiting == 0


class iModel:
    """A model you can call: ``await model.invoke(messages)`` or ``model.stream(messages)``.

    ``provider`` is a registered name (``"openai"``, ``"anthropic"``, ``"claude_code"``,
    ``"ollama"``, ...) or a :class:`Provider` instance; ``"provider/model"`` in either
    ``provider`` or ``model`` is split, and a bare ``model`` (``iModel(model="gpt-4o")``) uses
    ``"openai"``. Any other name with a ``base_url`` is an OpenAI-compatible server. The API
    key comes from ``api_key`` or the provider's usual environment variable and is held as
    ``SecretStr``. ``timeout`` (seconds, ``None`` for none) bounds a whole ``invoke`` and the
    wait for each chunk of a ``stream``.
    ``concurrency_limit`` caps calls in flight on this model object. ``structured_output``
    says how a ``response_format`` is asked for (``"json_schema"``, ``"json_object"`` or
    ``"prompt"``; by default what the provider preset supports: see
    :data:`~lionagi.service.types.StructuredOutput`). HTTP providers also take ``limits=``
    (``httpx.Limits``, default 100 connections) and ``http_client=`` (a function returning
    the ``httpx.AsyncClient`` to use in each event loop). Other keyword arguments are request
    defaults (``temperature=0.2``...), overridable per call.

    Resilience, per model object and so shared by every Branch that uses it:

    - ``retry``: a :class:`~lionagi.service.retry.RetryPolicy` (default: 3 attempts with
      exponential backoff and jitter, honouring ``Retry-After``); ``None`` or ``False`` for no
      retries. Attempts happen inside one ``invoke``; ``ModelResponse.attempts`` counts them.
    - ``limit_requests`` / ``limit_tokens`` per ``interval`` seconds (default 60), FIFO, with at
      most ``queue_capacity`` callers waiting (default: no bound) — upstream lionagi's names.
    - ``fallback``: models tried in order when this one fails for good with a retryable error
      (or one of ``fallback_on``); the reply's ``provider``/``model`` say which answered.
    - ``clock``: where retries and rate limits read time and sleep (anyio's by default).

    ``async with iModel(...) as model:`` closes the model's connections on exit (the same as
    ``await model.aclose()``).
    """

    def __init__(
        self,
        provider: str | Provider | None = None,
        model: str | None = None,
        *,
        api_key: str | SecretStr | None = None,
        base_url: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        concurrency_limit: int | None = None,
        retry: RetryPolicy | bool | None = True,
        limit_requests: int | None = None,
        limit_tokens: int | None = None,
        interval: float = 60.0,
        queue_capacity: int | None = None,
        fallback: Sequence[iModel] = (),
        fallback_on: tuple[type[BaseException], ...] = (),
        clock: Clock | None = None,
        structured_output: StructuredOutput | None = None,
        **request_defaults: Any,
    ) -> None:
        _check_call_settings(timeout, concurrency_limit, base_url)
        check_rate_settings(limit_requests, limit_tokens, interval, queue_capacity)
        _check_clock(clock)
        self.retry: RetryPolicy | None = _retry_policy(retry)
        self.limit_requests = limit_requests
        self.limit_tokens = limit_tokens
        self.interval = float(interval)
        self.queue_capacity = queue_capacity
        self.fallback: tuple[iModel, ...] = check_fallback(self, fallback, fallback_on)
        self.fallback_on = fallback_on
        self.clock: Clock = ANYIO_CLOCK if clock is None else clock
        self.timeout = timeout
        self.concurrency_limit = concurrency_limit
        self.request_defaults: dict[str, Any] = dict(request_defaults)
        self._provider_settings: dict[str, Any] = {}
        if isinstance(provider, Provider):
            if structured_output is not None:
                raise ConfigurationError(
                    "pass structured_output= to the Provider instance, not to iModel"
                )
            self.provider = provider
        else:
            self.provider = self._build_provider(
                provider, model, api_key, base_url, structured_output
            )
        self._limiter = _concurrency_limiter(concurrency_limit)
        self._rate: LoopBound[RateLimiter] | None = (
            None
            if limit_requests is None and limit_tokens is None
            else LoopBound(self._new_rate_limiter, RateLimiter.idle)
        )

    def _build_provider(
        self,
        provider: str | None,
        model: str | None,
        api_key: str | SecretStr | None,
        base_url: str | None,
        structured_output: StructuredOutput | None,
    ) -> Provider:
        """The provider named by ``provider``/``model``; its settings leave the request
        defaults for ``_provider_settings``."""
        name, model_name = _split_names(provider, model)
        name = _endpoint_provider(name, self.request_defaults.pop("endpoint", None))
        cls, presets = provider_class(name, base_url=base_url)
        if base_url is not None:
            presets["base_url"] = base_url
        defaults = self.request_defaults
        settings = {k: defaults.pop(k) for k in cls.setting_names if k in defaults}
        self._provider_settings = {**presets, **settings}
        if structured_output is not None:
            self._provider_settings["structured_output"] = structured_output
        return cls(
            model=model_name, api_key=api_key, timeout=self.timeout, **self._provider_settings
        )

    def _new_rate_limiter(self) -> RateLimiter:
        return RateLimiter(
            limit_requests=self.limit_requests,
            limit_tokens=self.limit_tokens,
            interval=self.interval,
            queue_capacity=self.queue_capacity,
            clock=self.clock,
        )

    @property
    def rate_limiter(self) -> RateLimiter | None:
        """This model's rate limiter in the running event loop (``None`` without limits)."""
        return None if self._rate is None else self._rate.get()

    # -- identity: the provider's, read through to it ------------------------------------
    provider_name = _FromProvider[str]("name")
    """The provider's registered name (``"openai"``, ``"anthropic"``, ...)."""
    model = _FromProvider[str]("model")
    """The model name sent with each request."""
    supports_native_tools = _FromProvider[bool]("supports_native_tools")
    """Whether requests carry tool schemas (function calling); ``False`` for agentic CLIs."""
    structured_output = _FromProvider[StructuredOutput]("structured_output")
    """How this model asks for a ``response_format`` (see ``StructuredOutput``)."""

    def __repr__(self) -> str:
        return f"iModel(provider={self.provider_name!r}, model={self.model!r})"

    # -- calls ---------------------------------------------------------------------------
    def request(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
        response_format: type[BaseModel] | Mapping[str, Any] | None = None,
        session_id: str | None = None,
        **options: Any,
    ) -> ModelRequest:
        """Build the :class:`ModelRequest` that ``invoke``/``stream`` would send."""
        schema: dict[str, Any] | None
        if response_format is None:
            schema = None
        elif isinstance(response_format, type) and issubclass(response_format, BaseModel):
            schema = response_format.model_json_schema()
        elif isinstance(response_format, Mapping):
            schema = dict(response_format)
        else:
            raise ConfigurationError(
                "response_format must be a pydantic model class or a JSON-schema dict, got "
                f"{response_format!r}"
            )
        merged = {**self.request_defaults, **options} if self.request_defaults else options
        return ModelRequest(
            model=self.model,
            messages=messages,
            tools=tuple(ToolSpec.of(t) for t in tools) if tools else (),
            response_format=schema,
            options=merged,
            session_id=session_id,
            structured_output=self.provider.structured_output,
        )

    async def invoke(
        self,
        /,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
        response_format: type[BaseModel] | Mapping[str, Any] | None = None,
        session_id: str | None = None,
        on_retry: RetryHook | None = None,
        **options: Any,
    ) -> ModelResponse:
        """Send ``messages`` and return the whole reply (typed errors on failure).

        The call follows the model's policies (see the class docstring): retried attempts,
        rate limits and fallback models all happen inside it. ``on_retry`` is told about each
        failed attempt before its backoff wait.

        Concurrency: checkpoints; cancel-safe — a cancellation (also during a backoff or a
        rate-limit wait) ends the call at once, takes no rate-limit place and is re-raised.
        """
        if self.fallback:
            return await invoke_with_fallback(
                self,
                messages,
                tools=tools,
                response_format=response_format,
                session_id=session_id,
                on_retry=on_retry,
                options=options,
            )
        request = self.request(
            messages,
            tools=tools,
            response_format=response_format,
            session_id=session_id,
            **options,
        )
        return await _instrument.invoke(self, request, on_retry)  # self.send, one frame less

    async def send(
        self, request: ModelRequest, *, on_retry: RetryHook | None = None
    ) -> ModelResponse:
        """Send a prepared ``request`` under this model's retry policy and limits (no fallback).

        Concurrency and cancellation as :meth:`invoke`. The call (all its attempts) is one
        record in the calling turn's logs and one span when tracing is on.
        """
        return await _instrument.invoke(self, request, on_retry)

    async def _retried(self, request: ModelRequest, on_retry: RetryHook | None) -> ModelResponse:
        if self.retry is None:
            return await self._attempt(request)
        response, attempts = await self._retrying(
            self.retry, lambda: self._attempt(request), on_retry
        )
        if attempts > 1:
            response = response.model_copy(update={"attempts": attempts})
        return response

    def _retrying(
        self,
        retry: RetryPolicy,
        attempt: Callable[[], Awaitable[_T]],
        on_retry: RetryHook | None,
        guarded_by: Interrupt | None = None,
    ) -> Coroutine[Any, Any, tuple[_T, int]]:
        """:func:`call_with_retry` of ``attempt`` under ``retry`` with this model's identity,
        idempotency and clock. It returns the loop's coroutine instead of awaiting it, so
        each caller awaits the loop from its own frame (no coroutine frame of its own)."""
        return call_with_retry(
            retry,
            attempt,
            idempotent=self.provider.idempotent,
            clock=self.clock,
            on_retry=on_retry,
            provider=self.provider_name,
            model=self.model,
            guarded_by=guarded_by,
        )

    async def _attempt(self, request: ModelRequest) -> ModelResponse:
        """One attempt: a rate-limit place, a concurrency slot, then the timed provider call."""
        if self._rate is None:
            return await self._limited(request)
        grant = await self._rate.get().acquire(estimate_tokens(request) if self.limit_tokens else 0)
        response = await self._limited(request)
        if self.limit_tokens:
            grant.settle(response.usage.input_tokens + response.usage.output_tokens)
        return response

    async def _limited(self, request: ModelRequest) -> ModelResponse:
        if self._limiter is None:
            return await self._invoke_timed(request)
        async with self._limiter.get():
            return await self._invoke_timed(request)

    async def _invoke_timed(self, request: ModelRequest) -> ModelResponse:
        if self.timeout is None:
            return await self.provider.invoke(request)
        with timeout_scope(self.timeout) as scope:  # its timer keeps no turn alive
            return await self.provider.invoke(request)
        assert scope.cancelled_caught
        raise ProviderTimeout(
            f"no reply within {self.timeout:g}s",
            provider=self.provider_name,
            model=self.model,
        )

    @declared_as(invoke)
    def stream(
        self, messages: Sequence[Message], *, on_retry: RetryHook | None = None, **asked: Any
    ) -> AsyncGenerator[StreamChunk, None]:
        """:meth:`invoke`'s call (its parameters), streamed: yield reply chunks; the last is a
        ``FinalChunk``. ``aclose()`` ends the call at once.

        The timeout bounds the wait for each chunk. No cancel scope spans a ``yield``. The retry
        policy and rate limits apply until the first chunk arrives: a stream that failed before
        yielding anything is opened again; once a chunk was yielded, a failure is raised.
        Nothing runs until the first chunk is asked for.
        """
        return self._chunks(messages, on_retry, asked, None)

    async def _chunks(
        self,
        messages: Sequence[Message],
        on_retry: RetryHook | None,
        asked: dict[str, Any],
        interrupt: Interrupt | None,
    ) -> AsyncGenerator[StreamChunk, None]:
        """:meth:`stream`; ``interrupt`` (a stream turn's) gets the scope of each wait: the
        rate limit, the concurrency slot, the retries' backoff and hook, and each chunk's (see
        :mod:`lionagi._interrupt`)."""
        request = self.request(messages, **asked)
        limiter = None if self._limiter is None else self._limiter.get()
        opened, attempts = await self._open_retried(request, limiter, on_retry, interrupt)
        chunks, chunk, borrower, grant, log = opened
        response: ModelResponse | None = None
        error: BaseException | None = None
        try:
            while chunk is not None:
                if isinstance(chunk, FinalChunk):
                    response = chunk.response
                    if grant is not None:
                        usage = response.usage
                        grant.settle(usage.input_tokens + usage.output_tokens)
                    if attempts > 1:
                        update = {"attempts": attempts}
                        chunk = FinalChunk(response=response.model_copy(update=update))
                yield chunk
                chunk = await self._next_chunk(chunks, interrupt)
        except GeneratorExit:  # closed by its consumer: not an error of the call
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            try:
                await self._close_stream(chunks, limiter, borrower)
            finally:
                if log is not None:
                    log.done(response, error)
                error = None  # no exception -> traceback -> this frame -> exception cycle

    async def _open_retried(
        self,
        request: ModelRequest,
        limiter: anyio.CapacityLimiter | None,
        on_retry: RetryHook | None,
        interrupt: Interrupt | None,
    ) -> tuple[_Opened, int]:
        """:meth:`_open_stream` under the retry policy, and the attempts it took. With an
        ``interrupt`` the backoff waits and the retry hook are guarded waits, as are the waits
        of each attempt (:meth:`_open_stream`)."""
        if self.retry is None:
            return await self._open_stream(request, limiter, interrupt), 1
        return await self._retrying(
            self.retry, lambda: self._open_stream(request, limiter, interrupt), on_retry, interrupt
        )

    async def _open_stream(
        self,
        request: ModelRequest,
        limiter: anyio.CapacityLimiter | None,
        interrupt: Interrupt | None = None,
    ) -> _Opened:
        """One attempt at a stream: a rate-limit place, a slot, the stream, its first chunk and
        its log record (in a turn; each attempt is one).

        On failure (or cancellation) the stream is closed, the slot given back and the failed
        attempt logged.
        """
        grant = None
        if self._rate is not None:
            tokens = estimate_tokens(request) if self.limit_tokens else 0
            with guard(interrupt):
                grant = await self._rate.get().acquire(tokens)
        borrower = object()
        if limiter is not None:
            with guard(interrupt):
                await limiter.acquire_on_behalf_of(borrower)
        log = _instrument.stream_log(self, request)
        chunks = _instrument.stream(self, request, self.provider.stream(request))
        try:
            first = await self._next_chunk(chunks, interrupt)
        except BaseException as exc:
            try:
                await self._close_stream(chunks, limiter, borrower)
            finally:
                if log is not None:
                    log.done(None, exc)
            raise
        return chunks, first, borrower, grant, log

    async def _next_chunk(
        self, chunks: AsyncIterator[StreamChunk], interrupt: Interrupt | None = None
    ) -> StreamChunk | None:
        """The next chunk (``None`` at the end), waiting at most ``timeout`` for it. Its wait's
        cancel scope is registered with ``interrupt`` when that takes it (one is opened for
        that without a timeout)."""
        wait = self.timeout
        guarded = interrupt is not None and interrupt.takes()
        if wait is None and not guarded:  # no deadline: no cancel scope per chunk either
            try:
                return await chunks.__anext__()
            except StopAsyncIteration:
                return None
        with anyio.CancelScope() if wait is None else anyio.move_on_after(wait) as scope:
            if guarded:
                interrupt.scope = scope  # type: ignore[union-attr]  # guarded: not None
            try:
                return await chunks.__anext__()
            except StopAsyncIteration:
                return None
            finally:
                if guarded:
                    interrupt.scope = None  # type: ignore[union-attr]
        if guarded and interrupt.requested:  # type: ignore[union-attr]
            raise _Interrupted
        assert scope.cancelled_caught
        raise ProviderTimeout(
            f"no stream data within {wait:g}s",
            provider=self.provider_name,
            model=self.model,
        )

    @staticmethod
    async def _close_stream(
        chunks: AsyncIterator[StreamChunk],
        limiter: anyio.CapacityLimiter | None,
        borrower: object,
    ) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await _aclose(chunks)
        finally:
            if limiter is not None:
                limiter.release_on_behalf_of(borrower)

    async def embed(
        self,
        texts: str | Sequence[str],
        *,
        batch_size: int = DEFAULT_EMBED_BATCH,
        **options: Any,
    ) -> Embeddings:
        """Embed ``texts`` (one string or a list) and return their vectors in input order.

        Long lists go out in batches of ``batch_size`` texts, up to four batches at once, each
        under the model's retry policy, rate limit and ``concurrency_limit``; ``options``
        (``dimensions=256``...) join every request. The ``timeout`` bounds the whole call.
        Cancel-safe: cancellation or a failing batch cancels the batches in flight, and
        nothing partial is returned.
        """
        items = _embed_inputs(texts, batch_size)
        if not items:
            return Embeddings(model=self.model, provider=self.provider_name)
        batches = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
        results: list[Embeddings | None] = [None] * len(batches)
        parallel = anyio.CapacityLimiter(_EMBED_PARALLEL)
        merged = {**self.request_defaults, **options}

        async def one(index: int) -> None:
            async with parallel:
                results[index] = await self._embed_batch(batches[index], merged)

        async def run_all() -> None:
            async with anyio.create_task_group() as tg:
                for index in range(len(batches)):
                    tg.start_soon(one, index)

        try:
            await self._embed_timed(run_all)
        except ExceptionGroup as group:  # one batch failed: raise what it raised
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return Embeddings.join([r for r in results if r is not None])

    async def _embed_timed(self, run_all: Callable[[], Awaitable[None]]) -> None:
        """``run_all()`` within the model's timeout."""
        if self.timeout is None:
            await run_all()
            return
        with anyio.move_on_after(self.timeout) as scope:
            await run_all()
        if scope.cancelled_caught:
            raise ProviderTimeout(
                f"no embeddings within {self.timeout:g}s",
                provider=self.provider_name,
                model=self.model,
            )

    async def _embed_batch(self, texts: list[str], options: Mapping[str, Any]) -> Embeddings:
        """One batch under the retry policy, the rate limit and the concurrency limit."""

        async def attempt() -> Embeddings:
            grant = None
            if self._rate is not None:
                estimate = sum(len(t) for t in texts) // 4 if self.limit_tokens else 0
                grant = await self._rate.get().acquire(estimate)
            if self._limiter is None:
                result = await self.provider.embed(texts, model=self.model, options=options)
            else:
                async with self._limiter.get():
                    result = await self.provider.embed(texts, model=self.model, options=options)
            if grant is not None and self.limit_tokens:
                grant.settle(result.usage.input_tokens)
            return result

        if self.retry is None:
            return await attempt()
        result, _ = await call_with_retry(
            self.retry,
            attempt,
            idempotent=True,  # embedding the same texts again has no side effect
            clock=self.clock,
            provider=self.provider_name,
            model=self.model,
        )
        return result

    # -- copies and serialization --------------------------------------------------------
    def copy(self) -> iModel:
        """A new iModel with the same configuration that shares nothing mutable."""
        return iModel(
            self.provider.clone(),
            timeout=self.timeout,
            concurrency_limit=self.concurrency_limit,
            **self.policy_settings(),
            **self.request_defaults,
        )

    def policy_settings(self) -> dict[str, Any]:
        """The resilience constructor arguments of this model, for building a copy
        (fallback models are copied too; limiters are never shared with the copy)."""
        return {
            "retry": self.retry,
            "limit_requests": self.limit_requests,
            "limit_tokens": self.limit_tokens,
            "interval": self.interval,
            "queue_capacity": self.queue_capacity,
            "fallback": tuple(model.copy() for model in self.fallback),
            "fallback_on": self.fallback_on,
            "clock": self.clock,
        }

    def to_dict(self) -> dict[str, Any]:
        """Configuration without secrets; ``from_dict`` reads the key from the environment."""
        return {
            "provider": self.provider_name,
            "model": self.model,
            "timeout": self.timeout,
            "concurrency_limit": self.concurrency_limit,
            "provider_settings": dict(self.provider.config()),
            "request_defaults": dict(self.request_defaults),
            **self._policy_dict(),
        }

    def _policy_dict(self) -> dict[str, Any]:
        """The resilience settings that differ from the defaults."""
        data: dict[str, Any] = {}
        if self.retry is not DEFAULT_RETRY:
            data["retry"] = None if self.retry is None else self.retry.to_dict()
        for name in ("limit_requests", "limit_tokens", "queue_capacity"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.interval != 60.0:
            data["interval"] = self.interval
        if self.fallback:
            data["fallback"] = [model.to_dict() for model in self.fallback]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> iModel:
        provider, model = _saved_names(data)
        settings = dict(data.get("provider_settings") or {})
        defaults = dict(data.get("request_defaults") or {})
        base_url = settings.pop("base_url", None)
        structured_output = settings.pop("structured_output", None)
        name = _check_saved_settings(provider, settings, base_url)
        return cls(
            name,
            model,
            base_url=base_url,
            timeout=data.get("timeout", DEFAULT_TIMEOUT),
            concurrency_limit=data.get("concurrency_limit"),
            retry=_retry_from_dict(data.get("retry", True)),
            limit_requests=data.get("limit_requests"),
            limit_tokens=data.get("limit_tokens"),
            interval=data.get("interval", 60.0),
            queue_capacity=data.get("queue_capacity"),
            fallback=[cls.from_dict(item) for item in data.get("fallback") or ()],
            structured_output=structured_output,
            **settings,
            **defaults,
        )

    async def aclose(self) -> None:
        """Close the provider's connections in this event loop. Safe to call more than once.

        Shielded: a cancelled caller still closes (closing is brief and local)."""
        with anyio.CancelScope(shield=True):
            await self.provider.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _embed_inputs(texts: str | Sequence[str], batch_size: object) -> list[str]:
    items = [texts] if isinstance(texts, str) else list(texts)
    bad = next((t for t in items if not isinstance(t, str)), None)
    if bad is not None:
        raise ConfigurationError(
            f"embed takes a string or a list of strings, got an item {bad!r:.80}"
        )
    if not _positive_int(batch_size):
        raise ConfigurationError(f"batch_size must be a positive int, got {batch_size!r}")
    return items


def _check_call_settings(timeout: object, concurrency_limit: object, base_url: str | None) -> None:
    if timeout is not None and not _positive_number(timeout):
        raise ConfigurationError(f"timeout must be a positive number or None, got {timeout!r}")
    if concurrency_limit is not None and not _positive_int(concurrency_limit):
        raise ConfigurationError(
            f"concurrency_limit must be a positive int or None, got {concurrency_limit!r}"
        )
    if base_url is not None:
        _check_base_url(base_url)


def _check_clock(clock: object) -> None:
    if clock is not None and not isinstance(clock, Clock):
        raise ConfigurationError(
            f"clock must have now() and async sleep(seconds), got {type(clock).__name__}"
        )


def _positive_number(value: object) -> bool:
    # `not value > 0` also rejects NaN
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _concurrency_limiter(limit: int | None) -> LoopBound[anyio.CapacityLimiter] | None:
    if limit is None:
        return None
    return LoopBound(lambda: anyio.CapacityLimiter(limit), _limiter_idle)


def _retry_policy(retry: object) -> RetryPolicy | None:
    if retry is True:
        return DEFAULT_RETRY
    if retry is None or retry is False:
        return None
    if isinstance(retry, RetryPolicy):
        return retry
    raise ConfigurationError(
        f"retry must be a RetryPolicy, True (the default policy) or None/False (no retries), "
        f"got {retry!r}; for a number of attempts use RetryPolicy(attempts={retry!r})"
    )


def _saved_names(data: Mapping[str, Any]) -> tuple[Any, Any]:
    """The provider name and model of a saved iModel."""
    try:
        provider = data["provider"]
        model = data["model"]
    except KeyError as exc:
        raise ConfigurationError(f"iModel.from_dict: missing key {exc.args[0]!r}") from None
    if data.get("offline") or provider in _OFFLINE_PROVIDERS:
        raise ConfigurationError(
            f"iModel.from_dict: {provider!r} is an offline model from lionagi.testing; its "
            "function or script is not serialized, so rebuild it in code "
            "(FunctionModel(fn) or TestModel([...]))"
        )
    return provider, model


def _check_saved_settings(provider: object, settings: Mapping[str, Any], base_url: Any) -> str:
    """The saved provider name, once it and its settings are known to fit."""
    if not isinstance(provider, str):
        raise ConfigurationError(f"iModel.from_dict: provider must be a name, got {provider!r}")
    known = provider_class(provider, base_url=base_url)[0].setting_names
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ConfigurationError(
            f"iModel.from_dict: provider_settings {unknown} are not settings of provider "
            f"{provider!r} (known: {sorted(known) or 'none'}); request options belong in "
            "request_defaults"
        )
    return provider


def _retry_from_dict(data: object) -> RetryPolicy | bool | None:
    if data is None or isinstance(data, bool):
        return data
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"iModel.from_dict: retry must be a mapping, got {data!r}")
    return RetryPolicy.from_dict(data)


def _split_names(provider: str | None, model: str | None) -> tuple[str, str]:
    if provider is not None and not isinstance(provider, str):
        raise ConfigurationError(
            f"provider must be a name or a Provider instance, got {type(provider).__name__}"
        )
    provider, model = _unjoin(provider, model)
    if provider is None and model:
        provider = DEFAULT_PROVIDER
    if not provider:
        raise ConfigurationError(
            "iModel needs a provider: iModel('openai', 'gpt-4o-mini') or "
            "iModel(model='openai/gpt-4o-mini')"
        )
    if not model:
        raise ConfigurationError(f"iModel({provider!r}) needs a model name")
    return provider, model


def _unjoin(provider: str | None, model: str | None) -> tuple[str | None, str | None]:
    """``"provider/model"`` given alone, as either argument, names both."""
    joined = provider if model is None else model if provider is None else None
    if joined and "/" in joined:
        provider, model = joined.split("/", 1)
    return provider, model


_CHAT_ENDPOINTS = (None, "chat", "chat/completions", "embed", "embeddings")
_RESPONSE_ENDPOINTS = ("response", "responses")


def _endpoint_provider(name: str, endpoint: Any) -> str:
    """Upstream's ``endpoint=``: ``"response"`` picks OpenAI's Responses API; chat and
    embeddings need no switch (``embed()`` is its own call)."""
    if endpoint in _CHAT_ENDPOINTS:
        return name
    if endpoint in _RESPONSE_ENDPOINTS and name in ("openai", "openai_responses"):
        return "openai_responses"
    raise ConfigurationError(
        f"endpoint={endpoint!r} is not available for provider {name!r}; use 'chat' (the "
        "default), 'embed' (then call embed()), or 'response' with provider 'openai'"
    )


def _check_base_url(base_url: str) -> None:
    import httpx

    try:
        url = httpx.URL(base_url)
    except Exception as exc:
        raise ConfigurationError(f"malformed base_url {base_url!r}: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(
            f"base_url must be an absolute http(s) URL such as "
            f"'http://127.0.0.1:8000/v1', got {base_url!r}"
        )


async def _aclose(chunks: AsyncIterator[StreamChunk]) -> None:
    close = getattr(chunks, "aclose", None)
    if close is not None:
        await close()
