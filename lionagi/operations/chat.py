"""``chat`` (ask without recording) and ``chat_and_record`` (ask and record both sides)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lionagi.errors import OperationError

# Every turn's model call runs it: loaded with the operation, not inside the first turn.
from lionagi.operations import _model_call  # noqa: F401
from lionagi.operations._prepare import answer_format, instruction_for, model_for
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import (
    ActionRequest,
    AssistantResponse,
    Instruction,
    Message,
    reply_message,
)

if TYPE_CHECKING:
    from lionagi.operations.params import ChatParams
    from lionagi.operations.types import TurnScope
    from lionagi.service.imodel import iModel
    from lionagi.service.types import ModelResponse
    from lionagi.session.branch import Branch

__all__ = ["ask", "chat", "record_response"]


def _reply_message(response: ModelResponse) -> AssistantResponse:
    """The reply as a message; the response's values were validated when it was built, so
    they are stored as they are (see :func:`reply_message`)."""
    return reply_message(
        response.text,
        response.model,
        response.usage,
        response.raw,
        response.refusal,
        response.reasoning,
    )


def record_response(
    branch: Branch, response: ModelResponse, instruction: Instruction | None = None
) -> AssistantResponse:
    """Record a model reply: the assistant message, then one ActionRequest per tool call.

    ``instruction`` is the request's instruction when it is not in the history yet: a turn
    commits its instruction together with the first reply (in one ``extend``), so a call that
    got no reply leaves no instruction behind for a retry to repeat.
    """
    message = _reply_message(response)
    head: list[Message] = [] if instruction is None else [instruction]
    if not response.tool_calls and not head:  # the common case; extend() of one is add()
        branch.msgs.add(message)
        return message
    requests = [
        ActionRequest(
            call_id=call.id,
            function=call.name,
            arguments=dict(call.arguments),
            provider_fields=dict(call.provider_fields),
        )
        for call in response.tool_calls
    ]
    branch.msgs.extend([*head, message, *requests])
    return message


async def chat(branch: Branch, params: ChatParams, *, record: bool = False) -> Any:
    """Ask the model with the history as context; return its text (or, with
    ``return_ins_res_message``, the instruction and reply messages). Records only if
    ``record``."""
    name = "chat_and_record" if record else "chat"
    if record and params.return_ins_res_message:
        raise OperationError(
            "chat_and_record() returns the reply text; for the instruction and reply "
            "messages use chat(return_ins_res_message=True)"
        )
    message = instruction_for(branch, params, answer_format(params, name))
    options = params.request_options

    async def body(scope: TurnScope) -> Any:
        response = await ask(scope, branch, params.chat_model, message, options)
        if record:  # the instruction with its reply: nothing is committed without a reply
            record_response(branch, response, message)
        if params.return_ins_res_message:
            return message, _reply_message(response)
        return response.text

    return await run_in_turn(
        branch, model=params.chat_model, invoke=body, operation=name, nests=False
    )


async def ask(
    scope: TurnScope,
    branch: Branch,
    chat_model: iModel | None,
    message: Instruction,
    options: Mapping[str, Any],
) -> ModelResponse:
    """The conversation with ``message`` (not recorded yet) asked of the call's chat model,
    for the schema ``message`` carries."""
    return await scope.call_model(
        branch,
        model_for(scope, branch, chat_model),
        ask=message,
        pending=(message,),
        response_format=message.response_format,
        options=options,
    )
