"""``communicate``: a recorded exchange whose reply is returned as text or parsed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from lionagi.operations._prepare import answer_format, instruction_for
from lionagi.operations.chat import ask, record_response
from lionagi.operations.parse import parse_in_scope
from lionagi.operations.turn import run_in_turn

if TYPE_CHECKING:
    from lionagi.operations.params import CommunicateParams
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["communicate"]


async def communicate(branch: Branch, params: CommunicateParams) -> Any:
    """Record the instruction and the reply; return the text, or the reply parsed into
    ``response_format`` (parse failures follow ``handle_validation``)."""
    fmt = answer_format(params, "communicate")
    response_format = fmt if isinstance(fmt, type) else None  # communicate takes classes only
    as_dict = params.request_fields is not None
    message = instruction_for(branch, params, response_format)
    options = params.request_options

    async def body(scope: TurnScope) -> Any:
        response = await ask(scope, branch, params.chat_model, message, options)
        record_response(branch, response, message)  # committed together with its reply
        if response_format is None:
            return response.text
        parsed = await parse_in_scope(
            branch,
            scope,
            response.text,
            response_format,
            max_retries=params.num_parse_retries,
            handle_validation=params.handle_validation,
            parse_model=params.parse_model,
        )
        return parsed.model_dump() if as_dict and isinstance(parsed, BaseModel) else parsed

    return await run_in_turn(
        branch, model=params.chat_model, invoke=body, operation="communicate", nests=False
    )
