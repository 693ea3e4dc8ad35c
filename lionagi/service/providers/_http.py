"""Shared HTTP plumbing for providers: a client per event loop, error translation, SSE.

Every httpx failure and every non-2xx answer is translated into
:mod:`lionagi.service.errors` here and nowhere else. Headers are built per request, so the API
key lives only in the provider's ``SecretStr`` and in the outgoing request; error messages are
scrubbed of it (whole or in part) before they are cut short, in case a server echoes it back.
Server-sent events are decoded by ``httpx-sse``. Text that enters from a server passes
:func:`clean_json`, so a lone surrogate never reaches the history.
"""

from __future__ import annotations

import functools
import json
import math
import ssl
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import anyio
import httpx
from httpx_sse import EventSource, ServerSentEvent, SSEError

from lionagi._compat import current_loop
from lionagi._loopbound import LoopBound
from lionagi.errors import ConfigurationError
from lionagi.service._scrub import Scrubber
from lionagi.service._text import clean_json
from lionagi.service.errors import (
    AuthenticationError,
    BadRequestError,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from lionagi.service.providers._usage import as_int
from lionagi.service.providers.base import Provider
from lionagi.service.types import ModelResponse

__all__ = [
    "DEFAULT_LIMITS",
    "HTTPProvider",
    "SSEEvent",
    "as_int",
    "error_for_status",
    "preview",
    "server_message_from",
    "shared_ssl_context",
    "status_of_error",
]

_BAD_REQUEST = frozenset({400, 404, 409, 413, 422})
_MAX_DETAIL = 500

#: connection limits of each model's client unless ``limits=`` says otherwise (httpx's own)
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)

# error "type" of an OpenAI- or Anthropic-style error payload -> the HTTP status it stands for
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "overloaded_error": 529,
}


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One verifying SSL context for the whole process (building one costs tens of ms).

    httpx would otherwise build a fresh context for every client, so for every event loop a
    model is used in, even for ``http://`` URLs.
    """
    return httpx.create_ssl_context()


def status_of_error(error: Any, default: int = 500) -> int:
    """The HTTP status an in-body error payload stands for: its ``status_code`` or ``status``
    (Groq), a numeric ``code`` (OpenRouter), else its ``type`` (OpenAI, Anthropic)."""
    if isinstance(error, dict):
        for key in ("status_code", "status", "code"):
            value = error.get(key)
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
                return value
        kind = error.get("type")
        if isinstance(kind, str) and kind in _ERROR_TYPE_STATUS:
            return _ERROR_TYPE_STATUS[kind]
    return default


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event: its ``event`` name (``"message"`` by default) and data text."""

    event: str
    data: str


def error_for_status(
    status: int,
    detail: str,
    *,
    provider: str,
    model: str | None,
    retry_after: float | None = None,
    key_hint: str | None = None,
) -> ProviderError:
    """The typed error for an HTTP ``status`` with the server's ``detail`` message."""
    if status in (401, 403):
        hint = f"; check the API key ({key_hint})" if key_hint else "; check the API key"
        return AuthenticationError(detail + hint, provider=provider, model=model, status=status)
    if status == 429:
        wait = "" if retry_after is None else f"; retry after {retry_after:g}s"
        return RateLimitError(
            detail + wait, provider=provider, model=model, status=status, retry_after=retry_after
        )
    if status in _BAD_REQUEST:
        return BadRequestError(detail, provider=provider, model=model, status=status)
    if status >= 500:
        return ServerError(detail, provider=provider, model=model, status=status)
    return ProviderError(detail, provider=provider, model=model, status=status)


def _server_message(response: httpx.Response, scrub: Callable[[str], str]) -> str:
    """The server's own error message from a JSON body, else the start of the body text;
    scrubbed of the key before it is cut short."""
    try:
        body = clean_json(response.json())
    except (ValueError, RecursionError):
        text = scrub(clean_json(response.text).strip())
        return text[:_MAX_DETAIL] if text else (response.reason_phrase or "no error message")
    message = server_message_from(body) or json.dumps(body, ensure_ascii=False)
    return scrub(message)[:_MAX_DETAIL]


def server_message_from(body: Any) -> str | None:
    """The message of an error payload: ``{"error": {"message"}}``, ``{"message"}``, ..."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(error, str) and error:
        return error
    for key in ("message", "detail"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _retry_after(headers: httpx.Headers) -> float | None:
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


ClientFactory = Callable[[], httpx.AsyncClient]
"""Makes the ``httpx.AsyncClient`` a model uses in one event loop (called once per loop)."""


class HTTPProvider(Provider):
    """A provider that speaks JSON over HTTP, with SSE streams.

    Holds one ``httpx.AsyncClient`` per event loop (created on first use with the provider's
    timeout and the process's one SSL context), so a provider moves between ``anyio.run`` calls
    and backends. Pooled connections belong to their loop: close the model (``async with
    iModel(...)`` or :meth:`aclose`) before a loop ends, otherwise its client is only dropped
    and the garbage collector reclaims its sockets (with a ``ResourceWarning``).

    Settings: ``limits`` (an ``httpx.Limits``; default :data:`DEFAULT_LIMITS`, at most 100
    connections per model) and ``http_client`` (a function returning the
    ``httpx.AsyncClient`` to use, called once per event loop: for proxies, custom transports,
    certificates; the provider still sets each request's URL and headers, the client's own
    timeouts and limits apply, and the model's ``timeout`` still bounds every call).
    Subclasses supply :meth:`_headers` and the wire format.
    """

    setting_names: ClassVar[tuple[str, ...]] = ("limits", "http_client")

    def __init__(self, **kwargs: Any) -> None:
        limits = kwargs.get("limits")
        factory = kwargs.get("http_client")
        if limits is not None and not isinstance(limits, httpx.Limits):
            raise ConfigurationError(
                f"limits must be an httpx.Limits, got {type(limits).__name__}: {limits!r:.80}"
            )
        if factory is not None and not callable(factory):
            raise ConfigurationError(
                "http_client must be a function returning an httpx.AsyncClient, got "
                f"{type(factory).__name__}"
            )
        super().__init__(**kwargs)
        self.limits: httpx.Limits = limits or DEFAULT_LIMITS
        self.http_client: ClientFactory | None = factory
        self._clients: LoopBound[httpx.AsyncClient] = LoopBound(self._make_client, _always)
        self._client_loop: object = None
        self._scrubber = Scrubber(None if self.api_key is None else self.api_key.get_secret_value())

    def config(self) -> dict[str, Any]:
        """Settings needed to rebuild this provider, without secrets or live objects."""
        return {k: v for k, v in super().config().items() if k not in ("limits", "http_client")}

    # -- wiring ------------------------------------------------------------------------
    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """Request headers, credentials included; built per request, never stored."""

    def _key_hint(self) -> str | None:
        if self.key_env:
            return f"set {self.key_env} or pass api_key="
        return "pass api_key="

    def _make_client(self) -> httpx.AsyncClient:
        self._client_loop = current_loop()
        if self.http_client is not None:
            client = self.http_client()
            if not isinstance(client, httpx.AsyncClient):
                raise ConfigurationError(
                    f"{self.name}: http_client() must return an httpx.AsyncClient, got "
                    f"{type(client).__name__}"
                )
            return client
        return httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout),
            follow_redirects=False,
            verify=shared_ssl_context(),
            limits=self.limits,
        )

    def _client(self) -> httpx.AsyncClient:
        client = self._clients.get()
        if client.is_closed:  # closed by aclose() in this loop: start afresh
            self._clients = LoopBound(self._make_client, _always)
            client = self._clients.get()
        return client

    def _url(self, path: str) -> str:
        if not self.base_url:
            raise ConfigurationError(
                f"{self.name}: no base_url configured; pass base_url='https://...'"
            )
        return f"{self.base_url}{path}"

    async def aclose(self) -> None:
        """Close this event loop's client. A client of a finished loop is only dropped."""
        client = self._clients.current
        if client is None or client.is_closed:
            return
        if self._client_loop is current_loop():
            await client.aclose()

    # -- error translation -------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        return self._scrubber(text)

    def _error(self, exc: BaseException) -> ProviderError:
        """Translate an httpx exception into a typed provider error."""
        detail = self._scrub(str(exc) or type(exc).__name__)
        if isinstance(exc, SSEError):  # an httpx.TransportError, but the answer's shape
            return ProtocolError(
                f"the stream is not server-sent events ({detail}); does this server stream?",
                provider=self.name,
                model=self.model,
            )
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(
                f"timed out ({type(exc).__name__}): {detail}", provider=self.name, model=self.model
            )
        if isinstance(exc, httpx.ConnectError):
            return ProviderConnectionError(
                f"cannot connect to {self.base_url}: {detail}; is the server running and "
                "base_url right?",
                provider=self.name,
                model=self.model,
            )
        if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
            return ProviderConnectionError(
                f"the connection was reset, closed or broke off ({type(exc).__name__}): {detail}",
                provider=self.name,
                model=self.model,
            )
        return ProtocolError(
            f"the HTTP exchange failed ({type(exc).__name__}): {detail}",
            provider=self.name,
            model=self.model,
        )

    def _status_error(self, response: httpx.Response) -> ProviderError:
        detail = _server_message(response, self._scrub)
        if response.status_code == 404:
            detail += f"; check base_url ({self.base_url}) and the model name"
        return error_for_status(
            response.status_code,
            detail,
            provider=self.name,
            model=self.model,
            retry_after=_retry_after(response.headers),
            key_hint=self._key_hint(),
        )

    def protocol_error(self, detail: str) -> ProtocolError:
        """A ProtocolError for an answer whose shape we cannot read."""
        return ProtocolError(self._scrub(detail), provider=self.name, model=self.model)

    def preview(self, value: Any) -> str:
        """A short rendering of ``value`` for an error message, scrubbed before it is cut."""
        return preview(value, self._scrub)

    # -- reading replies -----------------------------------------------------------------
    def optional_str(self, value: Any, where: str) -> str | None:
        """``value`` if it is a string or null, else a ProtocolError naming ``where``."""
        if value is None or isinstance(value, str):
            return value
        raise self.protocol_error(f"{where} must be a string, got {self.preview(value)}")

    def tool_name(self, value: Any, where: str) -> str:
        """A tool call's name: a non-empty string, else a ProtocolError naming ``where``."""
        if not isinstance(value, str) or not value:
            raise self.protocol_error(
                f"{where} must be a non-empty string, got {self.preview(value)}"
            )
        return value

    def call_id(self, value: Any, index: int, where: str) -> str:
        """A tool call's id: ``call_<index>`` when missing or empty (Gemini sends ``""``), a
        number as text, else a ProtocolError naming ``where``."""
        if value is None or value == "":
            return f"call_{index}"
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise self.protocol_error(f"{where} must be a string, got {self.preview(value)}")
        return value

    def response(self, *, model: str | None, **fields: Any) -> ModelResponse:
        """The reply, or a ProtocolError when a field cannot be held (pydantic's check)."""
        try:
            return ModelResponse(model=model or self.model, provider=self.name, **fields)
        except (ValueError, RecursionError) as exc:
            raise self.protocol_error(f"the answer cannot be recorded: {exc}") from None

    def event_json(self, data: str) -> dict[str, Any]:
        """Decode the data of one stream event, which must be a JSON object."""
        try:
            decoded = json.loads(data)
        except RecursionError:
            raise self.protocol_error("a stream event is JSON nested too deeply to read") from None
        except ValueError:
            raise self.protocol_error(f"malformed stream event: {self.preview(data)}") from None
        if not isinstance(decoded, dict):
            raise self.protocol_error(f"malformed stream event: {self.preview(data)}")
        return clean_json(decoded)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except httpx.HTTPError as exc:
            raise self._error(exc) from exc
        except BaseExceptionGroup as group:
            # trio's connection set-up runs in a nursery: a cancellation during connect arrives
            # wrapped in a group. Hand on the cancellation itself, as asyncio does.
            cancelled = _only_cancellation(group)
            if cancelled is None:
                raise
            raise cancelled from None

    # -- requests ----------------------------------------------------------------------
    async def post_json(self, path: str, body: dict[str, Any] | bytes) -> Any:
        """POST ``body`` (a JSON object, or its encoded bytes) and return the decoded JSON
        answer."""
        client = self._client()
        request = _json_request(client, self._url(path), body, self._headers())
        with self._translated():
            response = await client.send(request)
        if not response.is_success:
            raise self._status_error(response)
        try:
            return clean_json(response.json())
        except RecursionError:
            raise self.protocol_error("the answer is JSON nested too deeply to read") from None
        except ValueError:
            raise self.protocol_error(
                f"answer is not JSON: {self.preview(response.text)}"
            ) from None

    async def post_sse(
        self, path: str, body: dict[str, Any] | bytes
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST ``body`` (a JSON object, or its encoded bytes) and yield the server-sent events
        of the answer.

        The response is closed when the iterator ends, fails, is cancelled or is closed with
        ``aclose()``, so the connection never outlives its consumer.
        """
        client = self._client()
        request = _json_request(
            client, self._url(path), body, {**self._headers(), "accept": "text/event-stream"}
        )
        with self._translated():
            response = await client.send(request, stream=True)
        events: AsyncGenerator[ServerSentEvent, None] | None = None
        try:
            if not response.is_success:
                with self._translated():
                    await response.aread()
                raise self._status_error(response)
            events = EventSource(response).aiter_sse()
            while True:
                with self._translated():
                    try:
                        event = await events.__anext__()
                    except StopAsyncIteration:
                        break
                if event.data:  # an "id:" or "retry:" alone dispatches an event with no data
                    yield SSEEvent(event.event or "message", event.data)
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
                if events is not None:
                    await _finish(events)


def _only_cancellation(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The first cancellation in ``group`` if it holds nothing else, else None."""
    matched, rest = group.split(anyio.get_cancelled_exc_class())
    if matched is None or rest is not None:
        return None
    leaf: BaseException = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


class _OneChunk:
    """Yields one body chunk. A plain iterator, not an async generator: a send cancelled
    half-way leaves nothing suspended behind (trio reports a suspended async generator that is
    garbage collected as a ResourceWarning, and httpx's own body stream is one)."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _OneChunk:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data


class _JSONBody(httpx.AsyncByteStream):
    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _OneChunk(self._data)


def _json_request(
    client: httpx.AsyncClient, url: str, body: dict[str, Any] | bytes, headers: dict[str, str]
) -> httpx.Request:
    if isinstance(body, bytes):  # encoded already
        headers = {**headers, "content-type": "application/json"}
        request = client.build_request("POST", url, content=body, headers=headers)
    else:
        try:
            request = client.build_request("POST", url, json=body, headers=headers)
        except UnicodeEncodeError:  # a lone surrogate that entered by another door: escape it
            request = client.build_request("POST", url, json=clean_json(body), headers=headers)
    request.stream = _JSONBody(request.read())  # same bytes and Content-Length
    return request


async def _finish(lines: AsyncIterator[Any]) -> None:
    """Run httpx's chain of body iterators to its end after the response was closed.

    Every read now fails at once, so the chain finishes instead of being left suspended;
    trio reports a suspended async generator that is garbage collected as a ResourceWarning.
    """
    try:
        async for _ in lines:
            pass
    except Exception:  # the expected read error on the closed response
        pass


def _always(_client: httpx.AsyncClient) -> bool:
    return True


def preview(value: Any, scrub: Callable[[str], str] | None = None) -> str:
    """A short JSON rendering of ``value`` for error messages (``scrub`` runs before the cut)."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    if scrub is not None:
        text = scrub(text)
    return text[:200]
