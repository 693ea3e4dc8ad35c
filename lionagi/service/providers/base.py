"""The provider interface every transport implements."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import SecretStr

from lionagi.errors import ConfigurationError
from lionagi.service.types import (
    STRUCTURED_OUTPUT_MODES,
    ModelRequest,
    ModelResponse,
    StreamChunk,
    StructuredOutput,
)

if TYPE_CHECKING:
    from lionagi.service.embeddings import Embeddings

__all__ = ["Provider"]


class Provider(ABC):
    """One way of reaching models: a wire format plus a transport.

    Subclasses implement :meth:`invoke` and :meth:`stream` and translate every transport
    failure into :mod:`lionagi.service.errors` at one place. ``stream`` returns an async
    iterator whose ``aclose()`` releases the connection or process at once.
    Instances are cheap; :class:`~lionagi.service.imodel.iModel` makes a fresh one per copy.
    """

    name: ClassVar[str] = "provider"
    default_base_url: ClassVar[str | None] = None
    api_key_env: ClassVar[str | None] = None
    supports_native_tools: ClassVar[bool] = True
    #: whether later requests send a recorded reply back as its raw payload
    #: (``AssistantResponse.raw``); a streamed reply is then recorded whole at its end,
    #: like an invoked one, since the payload arrives only with the final chunk
    replays_raw_replies: ClassVar[bool] = False
    #: whether sending the same request again is harmless (no side effects beyond the reply);
    #: retry policies retry server errors and timeouts only for idempotent providers
    idempotent: ClassVar[bool] = True
    #: how this provider asks for a ``response_format`` unless told otherwise
    default_structured_output: ClassVar[StructuredOutput] = "prompt"
    #: constructor keywords of this provider that ``iModel(**kwargs)`` routes here
    #: instead of into the request defaults
    setting_names: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *,
        model: str,
        api_key: SecretStr | str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        name: str | None = None,
        api_key_env: str | None = "",
        structured_output: StructuredOutput | None = None,
        **settings: Any,
    ) -> None:
        _check_structured_output(structured_output)
        self._init_kwargs: dict[str, Any] = {
            "base_url": base_url,
            "timeout": timeout,
            "name": name,
            "api_key_env": api_key_env,
            "structured_output": structured_output,
            **settings,
        }
        self.structured_output: StructuredOutput = (
            structured_output or self.default_structured_output
        )
        self.model = model
        if name is not None:
            self.name = name  # type: ignore[misc]  # preset instances rename themselves
        self.key_env: str | None = self.api_key_env if api_key_env == "" else api_key_env
        self.api_key: SecretStr | None = _secret_key(api_key, self.key_env)
        self.base_url = (base_url or self.default_base_url or "").rstrip("/") or None
        self.timeout = timeout
        self.settings: dict[str, Any] = dict(settings)

    @abstractmethod
    async def invoke(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the whole reply."""

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Send ``request`` and yield chunks; the last one is a ``FinalChunk``."""

    async def embed(
        self, texts: Sequence[str], *, model: str, options: Mapping[str, Any]
    ) -> Embeddings:
        """Vectors for one batch of ``texts``. Providers without embeddings keep this."""
        raise ConfigurationError(
            f"provider {self.name!r} does not offer embeddings; use an OpenAI-compatible "
            "provider (openai, ollama, vllm, gemini, mistral, ...) with an embedding model"
        )

    async def aclose(self) -> None:  # noqa: B027  # optional hook
        """Release pooled connections. Safe to call more than once."""

    def clone(self) -> Provider:
        """A fresh provider with the same configuration and no shared connections."""
        return type(self)(model=self.model, api_key=self.api_key, **self._init_kwargs)

    def config(self) -> dict[str, Any]:
        """Settings needed to rebuild this provider, without secrets."""
        config: dict[str, Any] = {"base_url": self.base_url}
        if self.structured_output != self.default_structured_output:
            config["structured_output"] = self.structured_output
        return {**config, **self.settings}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r})"


def _check_structured_output(mode: object) -> None:
    if mode is not None and mode not in STRUCTURED_OUTPUT_MODES:
        raise ConfigurationError(
            f"structured_output must be one of {', '.join(STRUCTURED_OUTPUT_MODES)}, got {mode!r}"
        )


def _secret_key(api_key: SecretStr | str | None, env: str | None) -> SecretStr | None:
    """The key given, else the one in the environment variable ``env``, held as a secret."""
    if api_key is None and env:
        api_key = os.environ.get(env) or None
    if api_key is None or isinstance(api_key, SecretStr):
        return api_key
    return SecretStr(api_key)
