"""Shared HTTP plumbing for providers: a client per event loop, error translation, SSE.

Every httpx failure and every non-2xx answer is translated into
:mod:`lionagi.service.errors` here and nowhere else. Headers are built per request, so the API
key lives only in the provider's ``SecretStr`` and in the outgoing request; error messages are
scrubbed of it in case a server echoes it back.
"""

from __future__ import annotations

import json
import math
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import anyio
import httpx
from anyio.lowlevel import current_token

from lionagi._loopbound import LoopBound
from lionagi.errors import ConfigurationError
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
from lionagi.service.providers.base import Provider

__all__ = [
    "HTTPProvider",
    "SSEDecoder",
    "SSEEvent",
    "as_int",
    "error_for_status",
    "preview",
    "server_message_from",
]

_BAD_REQUEST = frozenset({400, 404, 409, 413, 422})
_MAX_DETAIL = 500


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event: its ``event`` name (``"message"`` by default) and data text."""

    event: str
    data: str


class SSEDecoder:
    """Incremental server-sent-events parser fed one line at a time (line ends removed).

    Follows the EventSource rules that matter for model APIs: ``data:`` lines accumulate
    (joined by newlines), ``event:`` names the event, lines starting with ``:`` are comments,
    a blank line dispatches, events without data are dropped.
    """

    __slots__ = ("_data", "_event")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data))
            self._event = ""
            self._data = []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        return None  # "id", "retry" and unknown fields do not matter here


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


def _server_message(response: httpx.Response) -> str:
    """The server's own error message from a JSON body, else the start of the body text."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:_MAX_DETAIL] if text else (response.reason_phrase or "no error message")
    return server_message_from(body) or json.dumps(body, ensure_ascii=False)[:_MAX_DETAIL]


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


def _new_client(timeout: float | None) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout), follow_redirects=False)


class HTTPProvider(Provider):
    """A provider that speaks JSON over HTTP, with SSE streams.

    Holds one ``httpx.AsyncClient`` per event loop (created on first use with the provider's
    timeout), so a provider moves between ``anyio.run`` calls and backends. Pooled connections
    belong to their loop: call :meth:`aclose` before a loop ends, otherwise its client is only
    dropped and the garbage collector reclaims its sockets (with a ``ResourceWarning``).
    Subclasses supply :meth:`_headers` and the wire format.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._clients: LoopBound[httpx.AsyncClient] = LoopBound(self._make_client, _always)
        self._client_loop: object = None

    # -- wiring ------------------------------------------------------------------------
    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """Request headers, credentials included; built per request, never stored."""

    def _key_hint(self) -> str | None:
        if self.key_env:
            return f"set {self.key_env} or pass api_key="
        return "pass api_key="

    def _make_client(self) -> httpx.AsyncClient:
        self._client_loop = current_token().native_token
        return _new_client(self.timeout)

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
        if self._client_loop is current_token().native_token:
            await client.aclose()

    # -- error translation -------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        if self.api_key is not None:
            secret = self.api_key.get_secret_value()
            if secret:
                text = text.replace(secret, "**********")
        return text

    def _error(self, exc: BaseException) -> ProviderError:
        """Translate an httpx exception into a typed provider error."""
        detail = self._scrub(str(exc) or type(exc).__name__)
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
                f"the connection was reset or closed ({type(exc).__name__}): {detail}",
                provider=self.name,
                model=self.model,
            )
        return ProtocolError(
            f"the connection failed or broke off ({type(exc).__name__}): {detail}",
            provider=self.name,
            model=self.model,
        )

    def _status_error(self, response: httpx.Response) -> ProviderError:
        detail = self._scrub(_server_message(response))
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

    def event_json(self, data: str) -> dict[str, Any]:
        """Decode the data of one stream event, which must be a JSON object."""
        try:
            decoded = json.loads(data)
        except ValueError:
            raise self.protocol_error(f"malformed stream event: {data[:200]!r}") from None
        if not isinstance(decoded, dict):
            raise self.protocol_error(f"malformed stream event: {data[:200]!r}")
        return decoded

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
    async def post_json(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` and return the decoded JSON answer."""
        client = self._client()
        request = _json_request(client, self._url(path), body, self._headers())
        with self._translated():
            response = await client.send(request)
        if not response.is_success:
            raise self._status_error(response)
        try:
            return response.json()
        except ValueError:
            raise self.protocol_error(f"answer is not JSON: {response.text[:200]!r}") from None

    async def post_sse(self, path: str, body: dict[str, Any]) -> AsyncGenerator[SSEEvent, None]:
        """POST ``body`` and yield the server-sent events of the answer.

        The response is closed when the iterator ends, fails, is cancelled or is closed with
        ``aclose()``, so the connection never outlives its consumer.
        """
        client = self._client()
        request = _json_request(
            client, self._url(path), body, {**self._headers(), "accept": "text/event-stream"}
        )
        with self._translated():
            response = await client.send(request, stream=True)
        lines: AsyncIterator[str] | None = None
        try:
            if not response.is_success:
                with self._translated():
                    await response.aread()
                raise self._status_error(response)
            decoder = SSEDecoder()
            lines = response.aiter_lines()
            while True:
                with self._translated():
                    try:
                        line = await lines.__anext__()
                    except StopAsyncIteration:
                        break
                event = decoder.feed(line)
                if event is not None:
                    yield event
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
                if lines is not None:
                    await _finish(lines)


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
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> httpx.Request:
    request = client.build_request("POST", url, json=body, headers=headers)
    request.stream = _JSONBody(request.read())  # same bytes and Content-Length
    return request


async def _finish(lines: AsyncIterator[str]) -> None:
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


def preview(value: Any) -> str:
    """A short JSON rendering of ``value`` for error messages."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text[:200]


def as_int(value: Any) -> int:
    """``value`` if it is a (non-bool) int, else 0: token counts from loosely typed JSON."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
