"""Typed provider errors. Each transport translates its failures into these at one boundary."""

from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass

from lionagi.errors import LionError

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "ProtocolError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "RateLimitQueueFull",
    "ServerError",
    "UnknownProviderError",
]


@dataclass(eq=False, repr=False)  # compared, hashed and shown as exceptions are
class ProviderError(LionError):
    """A model provider failed. ``provider``, ``model`` and ``status`` say where and how.

    Raised as ``ProviderError(message, provider=..., model=..., status=...)``; the text of the
    error names all three. A subclass declares only the fields it adds or the defaults it
    changes (as :class:`RateLimitError` does)."""

    message: InitVar[str]
    _: KW_ONLY
    provider: str
    model: str | None = None
    status: int | None = None

    def __post_init__(self, message: str) -> None:
        where = self.provider if self.model is None else f"{self.provider}/{self.model}"
        code = "" if self.status is None else f" (status {self.status})"
        super().__init__(f"{where}{code}: {message}")


class AuthenticationError(ProviderError):
    """The provider rejected the credentials (HTTP 401/403). Check the API key."""


@dataclass(eq=False, repr=False, kw_only=True)
class RateLimitError(ProviderError):
    """The provider is rate limiting (HTTP 429). ``retry_after`` is in seconds when known."""

    status: int | None = 429
    retry_after: float | None = None


class BadRequestError(ProviderError):
    """The provider rejected the request as malformed (HTTP 400/404/422)."""


class ServerError(ProviderError):
    """The provider failed on its side (HTTP 5xx), or a CLI exited with an error."""


class ProtocolError(ProviderError):
    """The provider answered in a shape we cannot read: malformed SSE or JSON, a field of the
    wrong type, a stream that ends early. The message names the field."""


class ProviderConnectionError(ProviderError):
    """The provider could not be reached, or the connection broke off: refused, reset, closed
    early, DNS failure. The request got no (complete) answer; retry policies retry it. Not a
    :class:`ProtocolError`: nothing malformed was answered, the server was not there."""


class ProviderTimeout(ProviderError, TimeoutError):
    """The provider did not answer within the model's ``timeout``."""


class RateLimitQueueFull(LionError):
    """Too many calls already wait for a model's own rate limit (its ``queue_capacity``)."""


class UnknownProviderError(LionError, ValueError):
    """A provider name is not registered. The message lists the known names."""
