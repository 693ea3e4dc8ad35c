"""``parse``: text into a pydantic model -- locally if possible, else the parse model reformats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from lionagi.errors import ParseError
from lionagi.operations._extract import validate_into
from lionagi.operations._prepare import model_for
from lionagi.operations.params import HandleValidation
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import Instruction, System
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.operations.params import ParseParams
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["HandleValidation", "parse", "parse_in_scope"]

M = TypeVar("M", bound=BaseModel)

_REFORMAT_SYSTEM = (
    "You convert text into one JSON object that follows a given JSON schema. Answer with the "
    "JSON object only, no prose, no code fence."
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
    options: Mapping[str, Any] | None = None,
) -> M | str | None:
    """The body of ``parse`` for use inside a turn (nested parse of composed operations);
    ``options`` are request options for the reformatting calls."""
    try:
        return validate_into(text, response_format)
    except ValueError as exc:
        reason = str(exc)
    model = None
    schema = response_format.model_json_schema()
    attempt_text = text
    for _ in range(max_retries):
        model = model or model_for(scope, branch, parse_model, "parse")
        ask = Instruction(
            instruction=(
                "Rewrite the text below as one JSON object for the schema. "
                f"The last attempt failed because: {reason}"
            ),
            context={"text": attempt_text},
            response_format=schema,
        )
        response = await scope.call_model(
            branch,
            model,
            messages=[System(content=_REFORMAT_SYSTEM), ask],
            response_format=schema,
            options=options,
        )
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


async def parse(branch: Branch, params: ParseParams) -> Any:
    """Parse ``params.text`` into ``params.response_format`` as one turn; nothing is recorded.

    Local, tolerant extraction first (code fences, surrounding prose, small syntax errors); then
    up to ``max_retries`` reformatting calls to the parse model. When all fail:
    ``handle_validation="raise"`` raises :class:`ParseError` naming the schema and the last
    validation error, ``"return_value"`` returns the text, ``"return_none"`` returns None.
    """

    async def body(scope: TurnScope) -> Any:
        return await parse_in_scope(
            branch,
            scope,
            params.text,
            params.response_format,
            max_retries=params.max_retries,
            handle_validation=params.handle_validation,
            parse_model=params.parse_model,
            options=params.request_options,
        )

    return await run_in_turn(
        branch, model=params.parse_model, invoke=body, role="parse", operation="parse"
    )
