"""What ``operate`` returns and what it asks the model to fill in.

The result is the caller's ``response_format`` as a derived subclass carrying ``reason``,
``action_requests`` and ``action_responses`` (:class:`OperateExtras`), or an
:class:`OperateResult` when no format was given.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, create_model

from lionagi.errors import OperationError
from lionagi.protocols.messages import ActionRequest, ActionResponse

__all__ = [
    "ActionRequestModel",
    "ActionResponseModel",
    "OperateExtras",
    "OperateResult",
    "Reason",
    "build_result",
    "check_format",
    "reply_model",
    "result_class",
]


class Reason(BaseModel):
    """The model's reasoning for its answer and how sure it is (upstream lionagi's fields).

    ``text`` and ``confidence`` are read as ``content`` and ``confidence_score``.
    """

    model_config = ConfigDict(populate_by_name=True)

    title: str | None = Field(default=None, description="A short title for the reasoning.")
    content: str | None = Field(
        default=None,
        description="Why this answer: the reasoning behind it, briefly.",
        validation_alias=AliasChoices("content", "text"),
    )
    confidence_score: float | None = Field(
        default=None,
        description="How sure you are, from 0 (guessing) to 1 (certain).",
        validation_alias=AliasChoices("confidence_score", "confidence"),
    )


class ActionRequestModel(BaseModel):
    """A tool call: the tool's name and its arguments."""

    function: str = Field(description="The name of one of the tools offered.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The tool's arguments, by parameter name."
    )


class ActionResponseModel(BaseModel):
    """A tool call and what it returned (``is_error`` when it failed)."""

    function: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: JsonValue = None
    is_error: bool = False
    error_type: str | None = None
    error_message: str | None = None


class OperateExtras(BaseModel):
    """Fields ``operate`` adds to every result."""

    reason: Reason | None = None
    action_requests: list[ActionRequestModel] = Field(default_factory=list)
    action_responses: list[ActionResponseModel] = Field(default_factory=list)


class OperateResult(OperateExtras):
    """The result of ``operate`` without a ``response_format``: the reply text plus extras."""

    text: str = ""


class _TextReply(BaseModel):
    text: str = Field(default="", description="Your answer.")


_EXTRA_NAMES = frozenset(OperateExtras.model_fields)


def check_format(response_format: Any) -> None:
    if response_format is None:
        return
    if not (isinstance(response_format, type) and issubclass(response_format, BaseModel)):
        raise OperationError(
            f"operate needs response_format=<a pydantic model class> or None, got "
            f"{response_format!r}"
        )
    clash = sorted(_EXTRA_NAMES & set(response_format.model_fields))
    if clash:
        raise OperationError(
            f"response_format {response_format.__name__} defines {', '.join(clash)}, which "
            "operate adds to its result; rename those fields"
        )


@functools.cache
def result_class(response_format: type[BaseModel]) -> type[BaseModel]:
    """The subclass of ``response_format`` that ``operate`` returns (one per format)."""
    check_format(response_format)
    derived: type[BaseModel] = create_model(
        response_format.__name__,
        __base__=(response_format, OperateExtras),
        __module__=__name__,
    )
    derived.__doc__ = response_format.__doc__
    return derived


@functools.cache
def reply_model(
    response_format: type[BaseModel] | None, reason: bool, json_actions: bool
) -> type[BaseModel] | None:
    """What the model is asked to fill in: the format plus ``reason`` / ``action_requests``."""
    fields: dict[str, Any] = {}
    if reason:
        fields["reason"] = (
            Reason | None,
            Field(default=None, description="Your reasoning and confidence."),
        )
    if json_actions:
        fields["action_requests"] = (
            list[ActionRequestModel],
            Field(
                default_factory=list,
                description="Tools to call now, from those listed; an empty list for none.",
            ),
        )
    if not fields:
        return response_format
    base = _TextReply if response_format is None else response_format
    derived: type[BaseModel] = create_model(
        base.__name__, __base__=base, __module__=__name__, **fields
    )
    return derived


def build_result(
    fmt: type[BaseModel] | None,
    parsed: BaseModel | None,
    text: str,
    requests: list[ActionRequest],
    responses: list[ActionResponse],
) -> BaseModel:
    by_id = {r.id: r for r in requests}
    extras: dict[str, Any] = {
        "reason": getattr(parsed, "reason", None),
        "action_requests": [
            ActionRequestModel(function=r.function, arguments=r.arguments) for r in requests
        ],
        "action_responses": [
            ActionResponseModel(
                function=r.function,
                arguments=by_id[r.request_id].arguments if r.request_id in by_id else {},
                output=r.output,
                is_error=r.is_error,
                error_type=r.error_type,
                error_message=r.error_message,
            )
            for r in responses
        ],
    }
    if fmt is None:
        answer = text if parsed is None else str(getattr(parsed, "text", text))
        return OperateResult(text=answer, **extras)
    assert parsed is not None
    values = {name: getattr(parsed, name) for name in fmt.model_fields}
    values.update(parsed.model_extra or {})
    fields_set = (parsed.model_fields_set & set(fmt.model_fields)) | set(extras)
    return result_class(fmt).model_construct(_fields_set=fields_set, **values, **extras)
