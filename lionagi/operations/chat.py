"""``chat`` (ask without recording) and ``chat_and_record`` (ask and record both sides)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lionagi.operations._prepare import answer_format, build_instruction, invoke_model, model_for
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import ActionRequest, AssistantResponse, Instruction, Message

if TYPE_CHECKING:
    from lionagi.operations.params import ChatParams
    from lionagi.operations.types import TurnScope
    from lionagi.service.types import ModelResponse
    from lionagi.session.branch import Branch

__all__ = ["chat", "record_response"]


def _reply_message(response: ModelResponse) -> AssistantResponse:
    extras: dict[str, Any] = {}  # only what the reply has: it keeps messages small
    if response.refusal is not None:
        extras["refusal"] = response.refusal
    if response.reasoning:
        extras["reasoning"] = response.reasoning
    return AssistantResponse(
        content=response.text,
        model=response.model,
        usage=response.usage,
        raw=response.raw,
        **extras,
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
            **({"provider_fields": dict(call.provider_fields)} if call.provider_fields else {}),
        )
        for call in response.tool_calls
    ]
    branch.msgs.extend([*head, message, *requests])
    return message


async def chat(branch: Branch, params: ChatParams, *, record: bool = False) -> Any:
    """Ask the model with the history as context; return its text (or, with
    ``return_ins_res_message``, the instruction and reply messages). Records only if
    ``record``."""
    message = build_instruction(
        params.instruction,
        guidance=params.guidance,
        context=params.context,
        response_format=answer_format(params, "chat_and_record" if record else "chat"),
        images=params.images,
        sender=branch.user,
    )
    options = params.request_options

    async def body(scope: TurnScope) -> Any:
        model = model_for(scope, branch, params.chat_model)
        response = await invoke_model(
            branch,
            scope,
            model,
            message,
            recorded=False,
            # the schema build_instruction already made, not the class again
            response_format=message.response_format,
            options=options,
        )
        if record:  # the instruction with its reply: nothing is committed without a reply
            record_response(branch, response, message)
        if params.return_ins_res_message:
            return message, _reply_message(response)
        return response.text

    name = "chat_and_record" if record else "chat"
    return await run_in_turn(branch, model=params.chat_model, invoke=body, operation=name)
