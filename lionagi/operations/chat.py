"""``chat`` (ask without recording) and ``chat_and_record`` (ask and record both sides)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, JsonValue

from lionagi.operations._prepare import (
    build_instruction,
    check_models,
    check_options,
    invoke_model,
    model_for,
)
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import ActionRequest, AssistantResponse, Instruction
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope
    from lionagi.service.types import ModelResponse
    from lionagi.session.branch import Branch

__all__ = ["chat", "chat_and_record", "record_response"]


def record_response(branch: Branch, response: ModelResponse) -> AssistantResponse:
    """Record a model reply: the assistant message, then one ActionRequest per tool call."""
    message = AssistantResponse(
        content=response.text,
        model=response.model,
        usage=response.usage,
        raw=response.raw,
    )
    if not response.tool_calls:  # the common case; extend() of one message is add()
        branch.msgs.add(message)
        return message
    requests = [
        ActionRequest(call_id=call.id, function=call.name, arguments=dict(call.arguments))
        for call in response.tool_calls
    ]
    branch.msgs.extend([message, *requests])
    return message


async def chat(
    branch: Branch,
    instruction: str | Instruction | None = None,
    *,
    guidance: str | None = None,
    context: JsonValue = None,
    response_format: type[BaseModel] | Mapping[str, Any] | None = None,
    imodel: iModel | None = None,
    images: Sequence[str] | None = None,
    record: bool = False,
    **options: Any,
) -> str:
    """Ask the model with the history as context; return its text. Records only if ``record``."""
    check_models(imodel=imodel)
    check_options("chat_and_record" if record else "chat", options)
    message = build_instruction(
        instruction,
        guidance=guidance,
        context=context,
        response_format=response_format,
        images=images,
        sender=branch.user,
    )

    async def body(scope: TurnScope) -> str:
        model = model_for(scope, branch, imodel)
        if record:
            branch.msgs.add(message)
        response = await invoke_model(
            branch,
            scope,
            model,
            message,
            recorded=record,
            # the schema build_instruction already made, not the class again
            response_format=None if response_format is None else message.response_format,
            options=options,
        )
        if record:
            record_response(branch, response)
        return response.text

    name = "chat_and_record" if record else "chat"
    return await run_in_turn(branch, model=imodel, invoke=body, operation=name)


async def chat_and_record(
    branch: Branch,
    instruction: str | Instruction | None = None,
    **kwargs: Any,
) -> str:
    """:func:`chat`, recording the instruction and the reply."""
    return await chat(branch, instruction, record=True, **kwargs)
