"""``operate``: one recorded turn that asks for a structured answer and may use tools.

Tools go to the model natively when its provider supports tool calling; otherwise the JSON
protocol is used: the requested schema gains ``action_requests`` and the tool schemas travel in
the instruction. Requested tools run through :func:`~lionagi.operations.act.act` inside the same
turn. The result is the caller's ``response_format`` (a derived subclass carrying ``reason``,
``action_requests`` and ``action_responses``) or an :class:`OperateResult`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from pydantic import BaseModel

from lionagi.errors import ParseError
from lionagi.operations._extract import validate_into
from lionagi.operations._prepare import instruction_for, model_for, schema_of
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
    from lionagi.service.imodel import iModel
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
    turn = _OperateTurn.of(branch, params, "operate")
    return await run_in_turn(branch, model=params.chat_model, invoke=turn.run, operation="operate")


@dataclass(slots=True)
class _Reply:
    """One answer of the model in an operate turn, recorded with its instruction."""

    reply_class: type[BaseModel] | None
    text: str
    requests: list[ActionRequest]


@dataclass(frozen=True, slots=True)
class _Settled:
    """The turn's result, chosen by ``handle_validation`` when the answer did not parse."""

    value: Any


@dataclass(frozen=True, slots=True)
class _OperateTurn:
    """The steps of one operate turn: ask, read the answer, run the tools, ask again once."""

    branch: Branch
    params: OperateParams
    fmt: type[BaseModel] | None
    names: tuple[str, ...]
    base: Instruction

    @classmethod
    def of(cls, branch: Branch, params: OperateParams, operation: str) -> _OperateTurn:
        """The turn for ``params``, checked before it starts: the answer's format (with
        ``field_models``), the tools offered and the instruction."""
        fmt = params.response_format
        if params.field_models:
            fmt = with_fields(fmt, params.field_models, operation)
        check_format(fmt)
        names = branch.tools.offered(
            params.tools, params.actions, owner=f"Branch {branch.name or branch.id}"
        )
        return cls(branch, params, fmt, names, instruction_for(branch, params))

    async def run(self, scope: TurnScope) -> Any:
        model = model_for(scope, self.branch, self.params.chat_model)
        reply = await self.ask(scope, model)
        invoked = bool(reply.requests) and self.params.invoke_actions
        parsed = await self.read(scope, reply, invoked)
        if isinstance(parsed, _Settled):
            return parsed.value
        if isinstance(parsed, BaseModel):
            reply.requests += _json_requests(
                self.branch, parsed, record=not self.params.invoke_actions
            )
        responses = await self.run_tools(reply.requests)
        missing = parsed is None if reply.reply_class is not None else not reply.text.strip()
        if missing and invoked:  # the tool results are recorded: ask for the answer once
            parsed = await self.answer_after_tools(scope, model, reply)
            if isinstance(parsed, _Settled):
                return parsed.value
        return build_result(self.fmt, parsed, reply.text, reply.requests, responses)

    async def read(self, scope: TurnScope, reply: _Reply, invoked: bool) -> Any:
        """The reply's answer: parsed as it is, else reformatted (unless tools ran, after
        which the model is asked again); :class:`_Settled` when ``handle_validation`` chose
        the result."""
        if reply.reply_class is None:
            return None
        parsed = _try_parse(reply.text, reply.reply_class)
        if parsed is not None or invoked:
            return parsed
        return self.settle(await self.reformat(scope, reply))

    async def answer_after_tools(self, scope: TurnScope, model: iModel, reply: _Reply) -> Any:
        """Ask once more, without tools, for the answer the recorded tool results should now
        allow; the reply's text becomes that answer's."""
        follow = _with_request(
            Instruction(instruction=_FOLLOW_UP, sender=self.branch.user), reply.reply_class, ()
        )
        response = await scope.call_model(
            self.branch,
            model,
            ask=follow,
            pending=(follow,),
            response_format=reply.reply_class,
            options=self.params.request_options,
        )
        record_response(self.branch, response, follow)
        reply.text = response.text
        if reply.reply_class is None:
            return None
        return self.settle(await self.parse(scope, response.text, reply.reply_class))

    async def ask(self, scope: TurnScope, model: iModel) -> _Reply:
        """The first call: the tools offered natively, or as the JSON protocol's schema."""
        native = model.supports_native_tools
        schemas = self.branch.tools.schemas(self.names) if self.names else ()
        reply_class = reply_model(self.fmt, self.params.reason, bool(schemas) and not native)
        message = _with_request(self.base, reply_class, () if native else schemas)
        response = await scope.call_model(
            self.branch,
            model,
            ask=message,
            pending=(message,),
            tools=schemas if native else (),
            response_format=reply_class,
            options=self.params.request_options,
        )
        requests = _record(self.branch, response, message)
        return _Reply(reply_class, response.text, requests)

    async def reformat(self, scope: TurnScope, reply: _Reply) -> Any:
        """The answer of a reply that did not parse: refused when only tool calls came back
        for a structured answer, else reformatted by the parse model."""
        assert reply.reply_class is not None
        if reply.requests and not reply.text.strip() and self.fmt is not None:
            return _missing_answer(self.fmt, self.params.handle_validation, reply.text)
        return await self.parse(scope, reply.text, reply.reply_class)

    async def parse(self, scope: TurnScope, text: str, reply_class: type[BaseModel]) -> Any:
        if self.fmt is None:  # the caller asked for text: a reply without JSON is the answer
            return _try_parse(text, reply_class)
        return await parse_in_scope(
            self.branch,
            scope,
            text,
            reply_class,
            max_retries=self.params.max_parse_retries,
            handle_validation=self.params.handle_validation,
            parse_model=self.params.parse_model,
        )

    async def run_tools(self, requests: list[ActionRequest]) -> list[ActionResponse]:
        if not requests or not self.params.invoke_actions:
            return []
        return await act_batch(self.branch, requests, strategy=self.params.action_strategy)

    def settle(self, parsed: Any) -> Any:
        """``parsed``, or :class:`_Settled` when it is not a model but a structured answer was
        asked for (``handle_validation`` chose the text or None)."""
        if self.fmt is not None and not isinstance(parsed, BaseModel):
            return _Settled(parsed)
        return parsed


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
