"""Fallback models: when a model fails for good, the next one in line answers instead.

``iModel(..., fallback=[other, ...])`` tries itself first (with its own retries and limits),
then each fallback model in order (with theirs), moving on only for failures worth another try
— the ones its retry policy would retry — or those listed in ``fallback_on``. Anything else
(a bad request, an authentication failure, a cancellation) is raised at once. The reply's
``provider`` and ``model`` name the model that answered. When every model fails, the last
failure is raised with a note per earlier failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lionagi.errors import ConfigurationError
from lionagi.protocols.tool_spec import ToolSpec
from lionagi.service.retry import DEFAULT_RETRY, RetryHook

if TYPE_CHECKING:
    from pydantic import BaseModel

    from lionagi.protocols.messages import Message
    from lionagi.service.imodel import iModel
    from lionagi.service.types import ModelResponse

__all__ = ["check_fallback", "invoke_with_fallback"]


def check_fallback(
    primary: iModel, fallback: Sequence[iModel], fallback_on: tuple[type[BaseException], ...]
) -> tuple[iModel, ...]:
    """The fallback models as a tuple, after checking what they are."""
    from lionagi.service.imodel import iModel

    if isinstance(fallback, iModel) or not isinstance(fallback, Sequence):
        raise ConfigurationError(
            f"fallback must be a list of iModel objects, got {type(fallback).__name__}"
        )
    for model in fallback:
        if not isinstance(model, iModel):
            raise ConfigurationError(
                f"fallback models must be iModel objects, got {type(model).__name__}: {model!r:.80}"
            )
        if model is primary:
            raise ConfigurationError(f"{primary!r} cannot be its own fallback model")
    if not isinstance(fallback_on, tuple) or not all(
        isinstance(t, type) and issubclass(t, Exception) for t in fallback_on
    ):
        raise ConfigurationError(
            f"fallback_on must be a tuple of exception classes, got {fallback_on!r}"
        )
    return tuple(fallback)


def _falls_back(primary: iModel, model: iModel, error: Exception) -> bool:
    if primary.fallback_on and isinstance(error, primary.fallback_on):
        return True
    policy = model.retry or DEFAULT_RETRY
    return policy.retryable(error, idempotent=model.provider.idempotent)


async def invoke_with_fallback(
    primary: iModel,
    messages: Sequence[Message],
    *,
    tools: Sequence[ToolSpec | Mapping[str, Any]],
    response_format: type[BaseModel] | Mapping[str, Any] | None,
    session_id: str | None,
    on_retry: RetryHook | None,
    options: Mapping[str, Any],
) -> ModelResponse:
    """Invoke ``primary``, then its fallback models in order; see the module docstring.

    Concurrency: as :meth:`iModel.invoke`; a cancellation is never a reason to fall back.
    """
    failures: list[tuple[iModel, Exception]] = []
    models = (primary, *primary.fallback)
    for index, model in enumerate(models):
        request = model.request(
            messages,
            tools=tools,
            response_format=response_format,
            session_id=session_id,
            **options,
        )
        try:
            response = await model.send(request, on_retry=on_retry)
        except Exception as error:
            if index == len(models) - 1 or not _falls_back(primary, model, error):
                for earlier, earlier_error in failures:
                    error.add_note(
                        f"fallback: {earlier!r} failed first with "
                        f"{type(earlier_error).__name__}: {earlier_error}"
                    )
                raise
            failures.append((model, error))
            continue
        if response.provider is None or response.model is None:
            response = response.model_copy(
                update={
                    "provider": response.provider or model.provider_name,
                    "model": response.model or model.model,
                }
            )
        return response
    raise AssertionError("unreachable: the last model either answers or raises")
