"""``operate``: one recorded turn that asks for a structured answer and may use tools.

Tools go to the model natively when its provider supports tool calling; otherwise the JSON
protocol is used: the requested schema gains ``action_requests`` and the tool schemas travel in
the instruction. Requested tools run through :func:`~lionagi.operations.act.act` inside the same
turn. The result is the caller's ``response_format`` (a derived subclass carrying ``reason``,
``action_requests`` and ``action_responses``) or an :class:`OperateResult`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from pydantic import BaseModel

from lionagi.errors import ParseError
from lionagi.operations._extract import validate_into
from lionagi.operations._prepare import build_instruction, invoke_model, model_for, schema_of
from lionagi.operations.act import act_batch
from lionagi.operations.chat import record_response
from lionagi.operations.fields import with_fields
from lionagi.operations.params import HandleValidation, ToolsArg
from lionagi.operations.parse import parse_in_scope
from lionagi.operations.results import (
    ActionRequestModel,
    ActionResponseModel,
    OperateExtras,
    OperateResult,
    Reason,
    build_result,
    check_format,
    reply_model,
    result_class,
)
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import ActionRequest, ActionResponse, Instruction

if TYPE_CHECKING:
    from lionagi.operations.params import OperateParams
    from lionagi.operations.types import TurnScope
    from lionagi.service.types import ModelResponse
    from lionagi.session.branch import Branch

__all__ = [
    "ActionRequestModel",
    "ActionResponseModel",
    "OperateExtras",
    "OperateResult",
    "Reason",
    "ToolsArg",
    "operate",
    "result_class",
]

_FOLLOW_UP = (
    "The results of the tools you called are in the conversation above. Now give your final answer."
)


def _with_request(
    base: Instruction,
    reply_class: type[BaseModel] | None,
    tool_schemas: Sequence[Mapping[str, Any]],
) -> Instruction:
    """``base`` asking for ``reply_class`` and listing ``tool_schemas`` (a copy if changed)."""
    if reply_class is None and not tool_schemas:
        return base
    return base.model_copy(
        update={
            "id": uuid4(),
            "response_format": schema_of(reply_class),
            "tool_schemas": tuple(dict(s) for s in tool_schemas),
        }
    )


def _record(
    branch: Branch, response: ModelResponse, instruction: Instruction
) -> list[ActionRequest]:
    """Record the instruction with its reply; return the ActionRequests of its tool calls."""
    record_response(branch, response, instruction)
    count = len(response.tool_calls)
    recorded = branch.msgs[len(branch.msgs) - count :] if count else []
    return [m for m in recorded if isinstance(m, ActionRequest)]


def _try_parse(text: str, reply_class: type[BaseModel]) -> BaseModel | None:
    try:
        return validate_into(text, reply_class)
    except ValueError:
        return None


async def operate(branch: Branch, params: OperateParams) -> Any:
    """Ask for a structured answer, offering tools; record everything; one turn.

    ``tools``: True (all registered), registered names or Tools, or None (all registered when
    ``actions=True``). Requested tools run when ``invoke_actions`` (``action_strategy``; tool
    failures become error responses). ``reason=True`` asks for a :class:`Reason`. When native
    tool calls left the answer missing, one follow-up call (no tools) asks for it. A reply that
    does not parse is reformatted by the parse model (``max_parse_retries``); if that fails,
    ``handle_validation`` decides (raise :class:`ParseError`, return the text, or None).
    ``chat_model`` / ``parse_model`` apply to this call only; model options go to every call.

    Returns an instance of a subclass of ``response_format`` with ``reason``,
    ``action_requests`` and ``action_responses``, or an :class:`OperateResult`.
    """
    response_format = params.response_format
    if params.field_models:
        response_format = with_fields(response_format, params.field_models, "operate")
    check_format(response_format)
    tools, actions, invoke_actions = params.tools, params.actions, params.invoke_actions
    reason, images = params.reason, params.images
    chat_model, parse_model = params.chat_model, params.parse_model
    action_strategy, handle_validation = params.action_strategy, params.handle_validation
    max_parse_retries = params.max_parse_retries
    options = params.request_options
    instruction, guidance, context = params.instruction, params.guidance, params.context
    names = branch.tools.offered(tools, actions, owner=f"Branch {branch.name or branch.id}")
    base = build_instruction(
        instruction, guidance=guidance, context=context, images=images, sender=branch.user
    )
    fmt = response_format

    async def parse(scope: TurnScope, text: str, reply_class: type[BaseModel]) -> Any:
        if fmt is None:  # the caller asked for text: a reply without JSON is the answer
            return _try_parse(text, reply_class)
        return await parse_in_scope(
            branch,
            scope,
            text,
            reply_class,
            max_retries=max_parse_retries,
            handle_validation=handle_validation,
            parse_model=parse_model,
        )

    async def body(scope: TurnScope) -> Any:
        model = model_for(scope, branch, chat_model)
        native = model.supports_native_tools
        schemas = branch.tools.schemas(names) if names else ()
        reply_class = reply_model(fmt, reason, bool(schemas) and not native)
        message = _with_request(base, reply_class, () if native else schemas)
        response = await invoke_model(
            branch,
            scope,
            model,
            message,
            recorded=False,
            tools=schemas if native else (),
            response_format=reply_class,
            options=options,
        )
        requests = _record(branch, response, message)
        text = response.text
        invoked = bool(requests) and invoke_actions
        parsed: Any = None if reply_class is None else _try_parse(text, reply_class)
        if parsed is None and reply_class is not None and not invoked:
            if requests and not text.strip() and fmt is not None:
                return _missing_answer(fmt, handle_validation, text)
            parsed = await parse(scope, text, reply_class)
            if not isinstance(parsed, BaseModel) and fmt is not None:
                return parsed  # handle_validation chose the text or None
        if isinstance(parsed, BaseModel):
            requests += _json_requests(branch, parsed, record=not invoke_actions)
        responses: list[ActionResponse] = []
        if requests and invoke_actions:
            responses = await act_batch(branch, requests, strategy=action_strategy)
        missing = parsed is None if reply_class is not None else not text.strip()
        if missing and invoked:  # the tool results are recorded: ask for the answer once
            follow = _with_request(
                Instruction(instruction=_FOLLOW_UP, sender=branch.user), reply_class, ()
            )
            response = await invoke_model(
                branch,
                scope,
                model,
                follow,
                recorded=False,
                response_format=reply_class,
                options=options,
            )
            record_response(branch, response, follow)
            text = response.text
            if reply_class is not None:
                parsed = await parse(scope, text, reply_class)
                if not isinstance(parsed, BaseModel) and fmt is not None:
                    return parsed
        return build_result(fmt, parsed, text, requests, responses)

    return await run_in_turn(branch, model=chat_model, invoke=body, operation="operate")


def _missing_answer(fmt: type[BaseModel], handle_validation: HandleValidation, text: str) -> Any:
    if handle_validation == "return_value":
        return text
    if handle_validation == "return_none":
        return None
    raise ParseError(
        fmt.__name__,
        "the model asked for tools and gave no answer; pass invoke_actions=True to run the "
        "tools and get the answer",
        text,
    )


def _json_requests(branch: Branch, parsed: BaseModel, *, record: bool) -> list[ActionRequest]:
    """The JSON protocol's ``action_requests`` as ActionRequest messages (recorded here only
    when they will not run; ``act`` records what it runs)."""
    asked = getattr(parsed, "action_requests", None) or []
    requests = [
        ActionRequest(
            call_id=f"call_{uuid4().hex[:24]}", function=a.function, arguments=dict(a.arguments)
        )
        for a in asked
        if isinstance(a, ActionRequestModel)
    ]
    if record and requests:
        branch.msgs.extend(requests)
    return requests
