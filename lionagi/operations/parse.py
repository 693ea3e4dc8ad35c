"""``parse``: text into a pydantic model -- locally if possible, else the parse model reformats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel

from lionagi.errors import OperationError, ParseError
from lionagi.operations._extract import validate_into
from lionagi.operations._model_call import check_usage_limits, retry_hook
from lionagi.operations._prepare import check_models, model_for
from lionagi.operations.turn import control_point, run_in_turn
from lionagi.protocols.messages import Instruction, System
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["HandleValidation", "parse", "parse_in_scope"]

M = TypeVar("M", bound=BaseModel)
HandleValidation = Literal["raise", "return_value", "return_none"]

_REFORMAT_SYSTEM = (
    "You convert text into one JSON object that follows a given JSON schema. Answer with the "
    "JSON object only, no prose, no code fence."
)


def _check(response_format: Any, max_retries: Any, handle_validation: Any) -> None:
    if not (isinstance(response_format, type) and issubclass(response_format, BaseModel)):
        raise OperationError(
            f"parse needs response_format=<a pydantic model class>, got {response_format!r}"
        )
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise OperationError(f"max_retries must be an int >= 0, got {max_retries!r}")
    if handle_validation not in ("raise", "return_value", "return_none"):
        raise OperationError(
            "handle_validation must be 'raise', 'return_value' or 'return_none', got "
            f"{handle_validation!r}"
        )


async def parse_in_scope(
    branch: Branch,
    scope: TurnScope,
    text: str,
    response_format: type[M],
    *,
    max_retries: int = 3,
    handle_validation: HandleValidation = "raise",
    parse_model: iModel | None = None,
) -> M | str | None:
    """The body of ``parse`` for use inside a turn (nested parse of composed operations)."""
    try:
        return validate_into(text, response_format)
    except ValueError as exc:
        reason = str(exc)
    model = None
    schema = response_format.model_json_schema()
    attempt_text = text
    for _ in range(max_retries):
        await control_point(scope)
        model = model or model_for(scope, branch, parse_model, "parse")
        ask = Instruction(
            instruction=(
                "Rewrite the text below as one JSON object for the schema. "
                f"The last attempt failed because: {reason}"
            ),
            context={"text": attempt_text},
            response_format=schema,
        )
        check_usage_limits(branch, scope)
        response = await model.invoke(
            [System(content=_REFORMAT_SYSTEM), ask],
            response_format=schema,
            on_retry=retry_hook(branch, scope),
        )
        scope.context.record_usage(response.usage, response.attempts)
        attempt_text = response.text
        try:
            return validate_into(attempt_text, response_format)
        except ValueError as exc:
            reason = str(exc)
    if handle_validation == "return_value":
        return text
    if handle_validation == "return_none":
        return None
    raise ParseError(response_format.__name__, reason, text)


async def parse(
    branch: Branch,
    text: str,
    *,
    response_format: type[M],
    max_retries: int = 3,
    handle_validation: HandleValidation = "raise",
    parse_model: iModel | None = None,
) -> M | str | None:
    """Parse ``text`` into ``response_format`` as one turn; nothing is recorded.

    Local, tolerant extraction first (code fences, surrounding prose, small syntax errors); then
    up to ``max_retries`` reformatting calls to the parse model. When all fail:
    ``handle_validation="raise"`` raises :class:`ParseError` naming the schema and the last
    validation error, ``"return_value"`` returns the text, ``"return_none"`` returns None.
    """
    if not isinstance(text, str):
        raise OperationError(f"parse needs text, got {type(text).__name__}")
    _check(response_format, max_retries, handle_validation)
    check_models(parse_model=parse_model)

    async def body(scope: TurnScope) -> M | str | None:
        return await parse_in_scope(
            branch,
            scope,
            text,
            response_format,
            max_retries=max_retries,
            handle_validation=handle_validation,
            parse_model=parse_model,
        )

    return await run_in_turn(
        branch, model=parse_model, invoke=body, role="parse", operation="parse"
    )
