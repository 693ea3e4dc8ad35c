"""``communicate``: a recorded exchange whose reply is returned as text or parsed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, JsonValue

from lionagi.operations._prepare import (
    build_instruction,
    check_models,
    check_options,
    invoke_model,
    model_for,
)
from lionagi.operations.chat import record_response
from lionagi.operations.parse import HandleValidation, _check, parse_in_scope
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import Instruction
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["communicate"]


async def communicate(
    branch: Branch,
    instruction: str | Instruction | None = None,
    *,
    guidance: str | None = None,
    context: JsonValue = None,
    response_format: type[BaseModel] | None = None,
    chat_model: iModel | None = None,
    parse_model: iModel | None = None,
    images: Sequence[str] | None = None,
    num_parse_retries: int = 3,
    handle_validation: HandleValidation = "raise",
    **options: Any,
) -> Any:
    """Record the instruction and the reply; return the text, or the reply parsed into
    ``response_format`` (parse failures follow ``handle_validation``)."""
    check_models(chat_model=chat_model, parse_model=parse_model)
    check_options("communicate", options)
    if response_format is not None:
        _check(response_format, num_parse_retries, handle_validation)
    message = build_instruction(
        instruction,
        guidance=guidance,
        context=context,
        response_format=response_format,
        images=images,
        sender=branch.user,
    )

    async def body(scope: TurnScope) -> Any:
        model = model_for(scope, branch, chat_model)
        branch.msgs.add(message)
        response = await invoke_model(
            branch,
            scope,
            model,
            message,
            recorded=True,
            # the schema build_instruction already made, not the class again
            response_format=None if response_format is None else message.response_format,
            options=options,
        )
        record_response(branch, response)
        if response_format is None:
            return response.text
        return await parse_in_scope(
            branch,
            scope,
            response.text,
            response_format,
            max_retries=num_parse_retries,
            handle_validation=handle_validation,
            parse_model=parse_model,
        )

    return await run_in_turn(branch, model=chat_model, invoke=body, operation="communicate")
