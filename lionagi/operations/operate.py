"""``operate``: one recorded turn that asks for a structured answer and may use tools.

Tools go to the model natively when its provider supports tool calling; otherwise the JSON
protocol is used: the requested schema gains ``action_requests`` and the tool schemas travel in
the instruction. Requested tools run through :func:`~lionagi.operations.act.act` inside the same
turn. The result is the caller's ``response_format`` (a derived subclass carrying ``reason``,
``action_requests`` and ``action_responses``) or an :class:`OperateResult`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, create_model

from lionagi.errors import OperationError, ParseError
from lionagi.operations._extract import validate_into
from lionagi.operations._prepare import build_instruction, invoke_model, model_for, schema_of
from lionagi.operations.act import act_batch
from lionagi.operations.chat import record_response
from lionagi.operations.fields import with_fields
from lionagi.operations.params import HandleValidation, ToolsArg
from lionagi.operations.parse import parse_in_scope
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import ActionRequest, ActionResponse, Instruction
from lionagi.protocols.tools import Tool

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


def _check_format(response_format: Any) -> None:
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
    _check_format(response_format)
    derived: type[BaseModel] = create_model(
        response_format.__name__,
        __base__=(response_format, OperateExtras),
        __module__=__name__,
    )
    derived.__doc__ = response_format.__doc__
    return derived


@functools.cache
def _reply_class(
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


def _tool_name(branch: Branch, tool: object) -> str:
    if isinstance(tool, str):
        return branch.tools.get(tool).name
    if isinstance(tool, Tool):
        if tool not in branch.tools:
            raise OperationError(
                f"tool {tool.name!r} is not registered on this Branch; register it with "
                "branch.register_tools(...) first"
            )
        return tool.name
    raise OperationError(
        f"tools must name registered tools (text or Tool objects), got {type(tool).__name__}; "
        "register callables with branch.register_tools(...) first"
    )


def offered_tools(branch: Branch, tools: ToolsArg, actions: bool) -> tuple[str, ...]:
    """Names of the tools a call offers: ``tools`` (True = all registered, names or Tools),
    or all registered tools when ``actions`` is set and ``tools`` is None."""
    wanted = actions or tools is True
    if tools is None or tools is False or tools is True:
        names: tuple[str, ...] = branch.tools.names if wanted else ()
    elif isinstance(tools, str | Tool):
        names = (_tool_name(branch, tools),)
        wanted = True
    elif isinstance(tools, Iterable):
        names = tuple(dict.fromkeys(_tool_name(branch, t) for t in tools))
    else:
        raise OperationError(
            f"tools must be True, a list of registered tool names, or None; got {tools!r}"
        )
    if wanted and not names:
        raise OperationError(
            f"tools were requested (actions=True or tools=...) but Branch "
            f"{branch.name or branch.id} has none to offer; register some with "
            "branch.register_tools(...)"
        )
    return names


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


def _record(branch: Branch, response: ModelResponse) -> list[ActionRequest]:
    """Record the reply; return the ActionRequests recorded for its tool calls."""
    record_response(branch, response)
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
    _check_format(response_format)
    tools, actions, invoke_actions = params.tools, params.actions, params.invoke_actions
    reason, images = params.reason, params.images
    chat_model, parse_model = params.chat_model, params.parse_model
    action_strategy, handle_validation = params.action_strategy, params.handle_validation
    max_parse_retries = params.max_parse_retries
    options = params.request_options
    instruction, guidance, context = params.instruction, params.guidance, params.context
    names = offered_tools(branch, tools, actions)
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
        reply_class = _reply_class(fmt, reason, bool(schemas) and not native)
        message = _with_request(base, reply_class, () if native else schemas)
        branch.msgs.add(message)
        response = await invoke_model(
            branch,
            scope,
            model,
            message,
            recorded=True,
            tools=schemas if native else (),
            response_format=reply_class,
            options=options,
        )
        requests = _record(branch, response)
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
            branch.msgs.add(follow)
            response = await invoke_model(
                branch,
                scope,
                model,
                follow,
                recorded=True,
                response_format=reply_class,
                options=options,
            )
            record_response(branch, response)
            text = response.text
            if reply_class is not None:
                parsed = await parse(scope, text, reply_class)
                if not isinstance(parsed, BaseModel) and fmt is not None:
                    return parsed
        return _result(fmt, parsed, text, requests, responses)

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


def _result(
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
