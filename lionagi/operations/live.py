"""Live forms of ``operate`` and ``ReAct``: the same turns, handed out as events as they happen.

:func:`operate_stream` is :func:`~lionagi.operations.operate.operate`'s turn and
:func:`react_events` is :func:`~lionagi.operations.react.ReActStream`'s, each streaming its
model calls: reply text and tool-call deltas as they arrive, the structured reply so far as a
:class:`~lionagi.operations.events.PartialObjectEvent` after each text delta that changed it,
tools started and finished, every message as it is committed, and what the operation returns
as a :class:`~lionagi.operations.events.ResultEvent`. The committed messages and the result are
those of the plain operation given the same replies.

Each event is one step of a stream turn: the model stream is pulled one chunk per event, so a
slow consumer slows the model; closing the stream closes the model's transport at once and
commits no part of an unfinished reply.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json

from lionagi.operations._model_call import close_stream
from lionagi.operations._prepare import (
    answer_format,
    build_instruction,
    instruction_for,
    model_for,
)
from lionagi.operations.chat import record_response
from lionagi.operations.events import (
    MessageCommitted,
    PartialObjectEvent,
    ReasoningDeltaEvent,
    ResultEvent,
    StreamEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolFinished,
    ToolStarted,
)
from lionagi.operations.operate import (
    _FOLLOW_UP,
    _json_requests,
    _OperateTurn,
    _Reply,
    _Settled,
    _with_request,
)
from lionagi.operations.params import (
    CommunicateParams,
    HandleValidation,
    OperateParams,
    bind,
)
from lionagi.operations.parse import parse_in_scope
from lionagi.operations.react import (
    _FINAL,
    _check,
    _report,
    _round_arguments,
    next_round,
)
from lionagi.operations.results import build_result, reply_model
from lionagi.operations.turn import TurnStream, control_point, guard_wait, stream_in_turn
from lionagi.protocols.messages import ActionRequest, ActionResponse, Instruction, Usage
from lionagi.service.errors import ProtocolError
from lionagi.service.types import (
    FinalChunk,
    ModelResponse,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)

if TYPE_CHECKING:
    from lionagi.operations.params import ReActParams
    from lionagi.operations.types import TurnScope
    from lionagi.service.imodel import iModel
    from lionagi.session.branch import Branch

__all__ = ["communicate_stream", "operate_stream", "react_events"]


# -- one streamed model call ----------------------------------------------------------------
@functools.lru_cache(maxsize=128)
def _adapter(model: type[BaseModel]) -> TypeAdapter[BaseModel]:
    return TypeAdapter(model)


class _PartialReply:
    """The reply text so far, parsed as partial JSON after each piece (None: no change)."""

    __slots__ = ("_last", "_model", "_pieces")

    def __init__(self, model: type[BaseModel]) -> None:
        self._model = model
        self._pieces: list[str] = []
        self._last: dict[str, Any] | None = None

    def add(self, piece: str) -> PartialObjectEvent | None:
        self._pieces.append(piece)
        text = "".join(self._pieces)
        start = text.find("{")  # after a code fence or a word of prose, if any
        if start < 0:
            return None
        text = text[start:]
        try:
            data = from_json(text, allow_partial="trailing-strings")
        except ValueError:  # prose after the object, a closing fence: the object is whole
            return None
        if not isinstance(data, dict) or data == self._last:
            return None
        self._last = data
        try:
            parsed = _adapter(self._model).validate_json(
                text, experimental_allow_partial="trailing-strings"
            )
        except ValidationError:
            parsed = None
        return PartialObjectEvent(data, parsed)


class _LiveReply:
    """One streamed model call's chunks as live events, and what they told so far: the final
    reply, the usage, whether any text came (previews of ``reply_class`` follow each piece)."""

    __slots__ = ("final", "preview", "texted", "usage")

    def __init__(self, reply_class: type[BaseModel] | None) -> None:
        self.preview = None if reply_class is None else _PartialReply(reply_class)
        self.final: ModelResponse | None = None
        self.usage: Usage | None = None
        self.texted = False

    def events(self, chunk: StreamChunk) -> Iterator[StreamEvent]:
        if isinstance(chunk, TextDelta):
            yield from self._text(chunk.text)
        elif isinstance(chunk, FinalChunk):
            self.final, self.usage = chunk.response, chunk.response.usage
            if not self.texted:  # a provider that sent no text deltas: its text as one
                yield from self._text(self.final.text)
        elif isinstance(chunk, ReasoningDelta):
            yield ReasoningDeltaEvent(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            yield ToolCallDeltaEvent(chunk.index, chunk.id, chunk.name, chunk.arguments)
        elif isinstance(chunk, UsageChunk):
            self.usage = chunk.usage

    def _text(self, text: str) -> Iterator[StreamEvent]:
        if text:
            self.texted = True
            yield TextDeltaEvent(text)
            if self.preview is not None and (update := self.preview.add(text)) is not None:
                yield update


def _committed(branch: Branch, since: int) -> list[StreamEvent]:
    """Events for the messages committed since the history held ``since``: each one, and for a
    tool result its :class:`ToolFinished` after it."""
    out: list[StreamEvent] = []
    for message in branch.msgs[since:]:
        out.append(MessageCommitted(message))
        if isinstance(message, ActionResponse):
            out.append(ToolFinished(message))
    return out


async def _ask(
    branch: Branch,
    scope: TurnScope,
    model: iModel,
    instruction: Instruction,
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    reply_class: type[BaseModel] | None,
    options: Mapping[str, Any],
    response: list[ModelResponse],
) -> AsyncGenerator[StreamEvent, None]:
    """One model call of a live turn, streamed: its deltas (and previews of ``reply_class``)
    as they arrive, then the instruction committed with the whole reply, which goes into
    ``response``. A call that stops early commits nothing."""
    chunks = await scope.stream_model(
        branch,
        model,
        ask=instruction,
        pending=(instruction,),
        tools=tools,
        response_format=reply_class,
        options=options,
    )
    reply = _LiveReply(reply_class)
    try:
        async for chunk in chunks:
            for event in reply.events(chunk):
                yield event
            await control_point(scope)
    finally:
        with anyio.CancelScope(shield=True):
            await close_stream(chunks)
        final = reply.final
        scope.context.record_usage(reply.usage, 1 if final is None else final.attempts)
    if final is None:
        raise ProtocolError(
            "the model stream ended without its final reply",
            provider=model.provider_name,
            model=model.model,
        )
    since = len(branch.msgs)
    record_response(branch, final, instruction)  # committed together with its reply
    for event in _committed(branch, since):
        yield event
    response.append(final)


def _live_turn(
    branch: Branch,
    model: iModel | None,
    operation: str,
    invoke: Callable[[TurnScope], AsyncIterator[StreamEvent]],
) -> TurnStream[StreamEvent]:
    """A live operation's stream turn: its body starts no nested work and guards every wait
    (the model streams guard theirs; the tool batch and the parse model's calls are in
    ``guard_wait``), so its steps open no cancel scope."""
    return stream_in_turn(
        branch, model=model, invoke=invoke, operation=operation, nests=False, guarded=True
    )


# -- operate ----------------------------------------------------------------------------------
def operate_stream(branch: Branch, params: OperateParams) -> TurnStream[StreamEvent]:
    """:func:`~lionagi.operations.operate.operate` as live events, one stream turn.

    Events come in this order: the reply's text and tool-call deltas, with a
    :class:`PartialObjectEvent` after each text delta that changed the structured reply; the
    instruction and the reply committed (with its tool calls); the tools the model asked for,
    each as :class:`ToolStarted`, then, as the batch ends, each result committed and its
    :class:`ToolFinished`; the follow-up call (when native tool calls left the answer missing)
    streamed the same way; last, :class:`ResultEvent` holding what ``operate`` returns.

    Differences from ``operate``: tool calls of the JSON protocol (a model without native tools)
    are committed as soon as the reply is parsed, so they are in the history when they start.
    Reformatting by the parse model is not streamed. Same lifetime contract as
    :meth:`Branch.run`: read it in ``async with``; closing it mid-reply closes the provider
    stream at once and commits nothing of that reply.
    """
    turn = _OperateTurn.of(branch, params, "operate_stream")

    def invoke(scope: TurnScope) -> AsyncIterator[StreamEvent]:
        return _operate_events(turn, scope)

    return _live_turn(branch, params.chat_model, "operate_stream", invoke)


async def _operate_events(
    turn: _OperateTurn, scope: TurnScope
) -> AsyncGenerator[StreamEvent, None]:
    """The body of :func:`operate_stream` (and of a ReAct round): ``operate``'s steps
    (:class:`~lionagi.operations.operate._OperateTurn`) with each model call streamed and each
    commit handed out; last, the result as a :class:`ResultEvent`."""
    live = _LiveOperate(turn, scope)
    for step in (live.first_call, live.tools, live.follow_up):
        async with aclosing(step()) as events:
            async for event in events:
                yield event
        if live.done:
            yield ResultEvent(live.result)
            return


class _LiveOperate:
    """The state of one streamed operate turn between its steps."""

    __slots__ = (
        "done",
        "invoked",
        "model",
        "parsed",
        "reply",
        "responses",
        "result",
        "scope",
        "turn",
    )

    def __init__(self, turn: _OperateTurn, scope: TurnScope) -> None:
        self.turn = turn
        self.scope = scope
        self.model = model_for(scope, turn.branch, turn.params.chat_model)
        self.reply = _Reply(None, "", [])
        self.invoked = False
        self.parsed: Any = None
        self.responses: list[ActionResponse] = []
        self.done = False
        self.result: Any = None

    def finish(self, result: Any) -> None:
        self.done, self.result = True, result

    def ask(
        self,
        message: Instruction,
        reply_class: type[BaseModel] | None,
        replies: list[ModelResponse],
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> AsyncGenerator[StreamEvent, None]:
        return _ask(
            self.turn.branch,
            self.scope,
            self.model,
            message,
            tools=tools,
            reply_class=reply_class,
            options=self.turn.params.request_options,
            response=replies,
        )

    async def first_call(self) -> AsyncGenerator[StreamEvent, None]:
        """The first call, streamed, and its answer read (``handle_validation`` may end the
        turn here)."""
        turn, branch, params = self.turn, self.turn.branch, self.turn.params
        native = self.model.supports_native_tools
        schemas = branch.tools.schemas(turn.names) if turn.names else ()
        reply_class = reply_model(turn.fmt, params.reason, bool(schemas) and not native)
        message = _with_request(turn.base, reply_class, () if native else schemas)
        replies: list[ModelResponse] = []
        tools = schemas if native else ()
        async with aclosing(self.ask(message, reply_class, replies, tools)) as events:
            async for event in events:
                yield event
        self.reply = _Reply(reply_class, replies[0].text, _tool_requests(branch, replies[0]))
        self.invoked = bool(self.reply.requests) and params.invoke_actions
        with guard_wait(self.scope):  # a reformatting call of the parse model
            self.parsed = await turn.read(self.scope, self.reply, self.invoked)
        if isinstance(self.parsed, _Settled):
            self.finish(self.parsed.value)

    async def tools(self) -> AsyncGenerator[StreamEvent, None]:
        """The JSON protocol's tool calls committed (in history when they start), then the
        tools run as one batch: each started, then each result committed and finished."""
        branch, reply = self.turn.branch, self.reply
        if isinstance(self.parsed, BaseModel):
            since = len(branch.msgs)
            reply.requests += _json_requests(branch, self.parsed, record=True)
            for event in _committed(branch, since):
                yield event
        if not reply.requests or not self.turn.params.invoke_actions:
            return
        await control_point(self.scope)
        for request in reply.requests:
            yield ToolStarted(request)
        since = len(branch.msgs)
        with guard_wait(self.scope):
            self.responses = await self.turn.run_tools(reply.requests)
        for event in _committed(branch, since):
            yield event

    async def follow_up(self) -> AsyncGenerator[StreamEvent, None]:
        """When tools ran and the answer is still missing, ask once more (streamed); then the
        result."""
        turn, reply, parsed = self.turn, self.reply, self.parsed
        missing = parsed is None if reply.reply_class is not None else not reply.text.strip()
        if missing and self.invoked:  # the tool results are recorded: ask for the answer once
            follow = _with_request(
                Instruction(instruction=_FOLLOW_UP, sender=turn.branch.user), reply.reply_class, ()
            )
            replies: list[ModelResponse] = []
            async with aclosing(self.ask(follow, reply.reply_class, replies)) as events:
                async for event in events:
                    yield event
            reply.text = replies[-1].text
            if reply.reply_class is not None:
                with guard_wait(self.scope):
                    parsed = await turn.parse(self.scope, reply.text, reply.reply_class)
                parsed = turn.settle(parsed)
                if isinstance(parsed, _Settled):
                    self.finish(parsed.value)
                    return
        self.finish(build_result(turn.fmt, parsed, reply.text, reply.requests, self.responses))


def _tool_requests(branch: Branch, response: ModelResponse) -> list[ActionRequest]:
    """The ActionRequests just recorded for ``response``'s tool calls."""
    count = len(response.tool_calls)
    recorded = branch.msgs[len(branch.msgs) - count :] if count else []
    return [m for m in recorded if isinstance(m, ActionRequest)]


# -- ReAct ------------------------------------------------------------------------------------
def react_events(branch: Branch, params: ReActParams) -> TurnStream[StreamEvent]:
    """:func:`~lionagi.operations.react.ReActStream` as live events, one stream turn.

    Each round is a streamed ``operate`` (see :func:`operate_stream`) whose analysis comes as a
    :class:`ResultEvent` with ``final=False``; the final answer is streamed the same way and
    comes last as a ``final`` :class:`ResultEvent`. Control, limits and lifetime as
    ``ReActStream``.
    """
    _check(branch, params)

    def invoke(scope: TurnScope) -> AsyncIterator[StreamEvent]:
        return _react_rounds(branch, scope, params)

    return _live_turn(branch, params.chat_model, "ReActStream", invoke)


def _operate_defaults(branch: Branch) -> Mapping[str, Any]:
    """``Branch.operate``'s defaults (its one declared signature), without ``options``."""
    return _declared_defaults(type(branch).operate)


@functools.cache
def _declared_defaults(operate: Callable[..., Any]) -> Mapping[str, Any]:
    """The defaults of an ``operate`` method's signature, read once per method (per Branch
    class): ``inspect.signature`` costs more than the rest of a ReAct round's preparation.
    Read-only: every round spreads it into its own arguments."""
    parameters = inspect.signature(operate).parameters
    return MappingProxyType(
        {name: p.default for name, p in parameters.items() if name not in ("self", "options")}
    )


def _round_params(branch: Branch, params: ReActParams, **given: Any) -> OperateParams:
    """A ReAct round's ``operate`` parameters, as ``ReAct`` passes them to ``branch.operate``."""
    arguments = {
        **_operate_defaults(branch),
        **_round_arguments(params),
        "options": dict(params.options),
        **given,
    }
    return bind(OperateParams, arguments, operation="ReActStream")


async def _round(
    branch: Branch, scope: TurnScope, react: ReActParams, params: OperateParams, number: int
) -> AsyncGenerator[StreamEvent, None]:
    """One ReAct round; its analysis comes as a ResultEvent that is not final."""
    turn = _OperateTurn.of(branch, params, "ReActStream")
    async with aclosing(_operate_events(turn, scope)) as events:
        async for event in events:
            if isinstance(event, ResultEvent):
                _report(react, event.value, number)
                yield ResultEvent(event.value, final=False)
            else:
                yield event


async def _react_rounds(
    branch: Branch, scope: TurnScope, params: ReActParams
) -> AsyncGenerator[StreamEvent, None]:
    first = _round_params(
        branch,
        params,
        instruction=params.instruction,
        guidance=params.guidance,
        context=params.context,
    )
    analysis: Any = None
    async with aclosing(_round(branch, scope, params, first, 1)) as events:
        async for event in events:
            if isinstance(event, ResultEvent):
                analysis = event.value
            yield event
    rounds = 1
    while (prompt := next_round(params, analysis, rounds)) is not None:
        await control_point(scope)
        rounds += 1
        again = _round_params(branch, params, instruction=prompt)
        async with aclosing(_round(branch, scope, params, again, rounds)) as events:
            async for event in events:
                if isinstance(event, ResultEvent):
                    analysis = event.value
                yield event
    await control_point(scope)
    async with aclosing(_final_answer(branch, scope, params)) as events:
        async for event in events:
            yield event


async def _final_answer(
    branch: Branch, scope: TurnScope, params: ReActParams
) -> AsyncGenerator[StreamEvent, None]:
    """The final answer, as ``ReAct`` asks it with ``communicate``."""
    fmt = params.response_format
    async with aclosing(
        _communicate_events(
            branch,
            scope,
            build_instruction(_FINAL, response_format=fmt, sender=branch.user),
            fmt,
            chat_model=params.chat_model,
            parse_model=params.parse_model,
            max_retries=params.max_parse_retries,
            handle_validation="raise",
            as_dict=False,
            options=params.request_options,
        )
    ) as events:
        async for event in events:
            yield event


# -- communicate ------------------------------------------------------------------------------
def communicate_stream(branch: Branch, params: CommunicateParams) -> TurnStream[StreamEvent]:
    """:func:`~lionagi.operations.communicate.communicate` as live events, one stream turn:
    the reply's text deltas (with a :class:`PartialObjectEvent` after each one that changed a
    ``response_format`` reply), the instruction and the reply committed, then a
    :class:`ResultEvent` holding what ``communicate`` returns (reformatting by the parse model
    is not streamed). Lifetime as :func:`operate_stream`."""
    fmt = answer_format(params, "communicate_stream")
    response_format = fmt if isinstance(fmt, type) else None  # communicate takes classes only
    message = instruction_for(branch, params, response_format)

    def invoke(scope: TurnScope) -> AsyncIterator[StreamEvent]:
        return _communicate_events(
            branch,
            scope,
            message,
            response_format,
            chat_model=params.chat_model,
            parse_model=params.parse_model,
            max_retries=params.num_parse_retries,
            handle_validation=params.handle_validation,
            as_dict=params.request_fields is not None,
            options=params.request_options,
        )

    return _live_turn(branch, params.chat_model, "communicate_stream", invoke)


async def _communicate_events(
    branch: Branch,
    scope: TurnScope,
    message: Instruction,
    fmt: type[BaseModel] | None,
    *,
    chat_model: iModel | None,
    parse_model: iModel | None,
    max_retries: int,
    handle_validation: HandleValidation,
    as_dict: bool,
    options: Mapping[str, Any],
) -> AsyncGenerator[StreamEvent, None]:
    """``communicate``'s steps with the model call streamed."""
    model = model_for(scope, branch, chat_model)
    replies: list[ModelResponse] = []
    async with aclosing(
        _ask(branch, scope, model, message, reply_class=fmt, options=options, response=replies)
    ) as events:
        async for event in events:
            yield event
    text = replies[0].text
    if fmt is None:
        yield ResultEvent(text)
        return
    with guard_wait(scope):
        parsed = await parse_in_scope(
            branch,
            scope,
            text,
            fmt,
            max_retries=max_retries,
            handle_validation=handle_validation,
            parse_model=parse_model,
        )
    yield ResultEvent(parsed.model_dump() if as_dict and isinstance(parsed, BaseModel) else parsed)
