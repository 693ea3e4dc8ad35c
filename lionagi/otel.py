"""OpenTelemetry tracing for lionagi (the ``lionagi[otel]`` extra: ``opentelemetry-api``).

:func:`instrument` installs a tracer; from then on every top-level turn is a span, with a child
span per model call (GenAI semantic-convention attributes) and per tool call::

    turn operate              lionagi.turn_id, lionagi.branch_id, lionagi.operation, op_id
    ├── chat gpt-4o-mini      gen_ai.system, gen_ai.request.model, gen_ai.usage.*, ...
    ├── execute_tool add      gen_ai.tool.name, gen_ai.tool.call.id
    └── chat gpt-4o-mini

A run of ``Session.flow`` / ``flow_stream`` is a ``flow`` span (``lionagi.flow_id``, node and
edge counts, and at its end the number of nodes per outcome) with each node's turn under it.

The turn's span is the current span while each step of the turn runs, so spans made inside it
(a tool's own, a flow node's turns, an HTTP client's) nest under it, on asyncio and trio alike;
a turn started under a span of yours nests under that one. A failed turn or call ends with
status ERROR and its exception recorded; a cancelled one with status ERROR, description
``"cancelled"`` and ``error.type = "cancelled"``.

Message content (prompts, replies, tool arguments and results) is recorded only with
``include_content=True``: it may hold personal data. API keys are never recorded.

Bring your own SDK and exporter (``opentelemetry-sdk``); without a tracer provider argument the
global one is used. :func:`uninstrument` turns tracing off again; with no tracer installed,
lionagi's hook points cost one global read each.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from lionagi import _instrument
from lionagi.errors import MissingDependencyError
from lionagi.session.signal import current_op_id

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the package
    raise MissingDependencyError(
        "lionagi.otel needs opentelemetry-api, which is not installed; install the extra: "
        "pip install 'lionagi[otel]' (and an SDK/exporter, e.g. opentelemetry-sdk)"
    ) from exc

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from lionagi.operations.types import TurnExecutionContext
    from lionagi.protocols.messages import ActionRequest, ActionResponse, Message
    from lionagi.service.imodel import iModel
    from lionagi.service.types import ModelRequest, ModelResponse, StreamChunk
    from lionagi.session.branch import Branch
    from lionagi.session.flow import _Flow

__all__ = ["LionagiTracer", "instrument", "is_instrumented", "uninstrument"]

OutcomeT = TypeVar("OutcomeT")

_SCOPE = "lionagi"
# request options mapped onto gen_ai.request.* attributes
_REQUEST_OPTIONS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}


def instrument(
    tracer_provider: trace.TracerProvider | None = None, *, include_content: bool = False
) -> LionagiTracer:
    """Trace every turn, model call and tool call from now on (replacing an earlier call's
    tracer); returns the installed tracer. ``include_content`` also records messages, replies,
    tool arguments and results as span attributes."""
    if not isinstance(include_content, bool):
        raise TypeError(f"include_content must be True or False, got {include_content!r}")
    from lionagi import __version__

    tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
    installed = LionagiTracer(tracer, include_content=include_content)
    _instrument.install(installed)
    return installed


def uninstrument() -> None:
    """Stop tracing. Turns already running finish their spans."""
    _instrument.install(None)


def is_instrumented() -> bool:
    return isinstance(_instrument.tracer, LionagiTracer)


# -- the tracer -----------------------------------------------------------------------------------
class _TurnSpan:
    """The span of one turn (kept on ``TurnExecutionContext.trace``)."""

    __slots__ = ("ended", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.ended = False

    def close(self) -> None:
        if not self.ended:
            self.ended = True
            self.span.end()


class _Step:
    """One step of a turn with its span made current; ``done`` restores the context."""

    __slots__ = ("token", "turn")

    def __init__(self, turn: _TurnSpan) -> None:
        self.turn = turn
        self.token = otel_context.attach(trace.set_span_in_context(turn.span))

    def done(self, error: BaseException | None, final: bool) -> None:
        otel_context.detach(self.token)
        if error is not None and not _is_clean_end(error):
            _fail(self.turn.span, error)
        elif final:
            self.turn.span.set_status(Status(StatusCode.OK))


class _FlowSpan:
    """The span of one flow run, current in the flow's task (and so in every node's task,
    which starts from it) until ``done``."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.token = otel_context.attach(trace.set_span_in_context(span))

    def done(self, status: str, error: BaseException | None, counts: Mapping[str, int]) -> None:
        otel_context.detach(self.token)
        span = self.span
        span.set_attribute("lionagi.flow.status", status)
        for outcome, count in counts.items():
            span.set_attribute(f"lionagi.flow.{outcome}", count)
        if error is not None:
            _fail(span, error)
        else:
            span.set_status(Status(StatusCode.OK))
        span.end()


class LionagiTracer:
    """The OpenTelemetry implementation of lionagi's instrumentation interface."""

    def __init__(self, tracer: Tracer, *, include_content: bool = False) -> None:
        self.tracer = tracer
        self.include_content = include_content

    # -- turns ---------------------------------------------------------------------------------
    def turn_step(self, branch: Branch, context: TurnExecutionContext) -> _Step:
        turn = context.trace
        if not isinstance(turn, _TurnSpan):
            attributes: dict[str, Any] = {
                "lionagi.turn_id": str(context.turn_id),
                "lionagi.branch_id": str(branch.id),
                "gen_ai.operation.name": "invoke_agent",
            }
            if context.operation is not None:
                attributes["lionagi.operation"] = context.operation
            op_id = current_op_id.get()
            if op_id is not None:
                attributes["lionagi.op_id"] = str(op_id)
            if branch.name is not None:
                attributes["gen_ai.agent.name"] = branch.name
            span = self.tracer.start_span(
                f"turn {context.operation or 'turn'}", kind=SpanKind.INTERNAL, attributes=attributes
            )
            turn = context.trace = _TurnSpan(span)
        return _Step(turn)

    # -- flows ---------------------------------------------------------------------------------
    def flow(self, flow: _Flow) -> _FlowSpan:
        graph = flow.graph
        attributes: dict[str, Any] = {
            "lionagi.flow_id": str(flow.flow_id),
            "lionagi.flow.nodes": len(graph),
            "lionagi.flow.edges": len(graph.edges),
            "lionagi.flow.parallel": not flow.sequential,
        }
        if flow.max_concurrent is not None:
            attributes["lionagi.flow.max_concurrent"] = flow.max_concurrent
        if graph.name:
            attributes["lionagi.flow.graph"] = graph.name
        span = self.tracer.start_span("flow", kind=SpanKind.INTERNAL, attributes=attributes)
        return _FlowSpan(span)

    # -- model calls -----------------------------------------------------------------------------
    def _model_span(self, model: iModel, request: ModelRequest, streaming: bool) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": model.provider_name,
            "gen_ai.provider.name": model.provider_name,
            "gen_ai.request.model": request.model,
            "lionagi.stream": streaming,
        }
        for option, key in _REQUEST_OPTIONS.items():
            value = request.options.get(option)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[key] = value
        if request.tools:
            attributes["lionagi.request.tools"] = len(request.tools)
        if self.include_content:
            attributes["gen_ai.input.messages"] = _messages_json(request.messages)
        return self.tracer.start_span(
            f"chat {request.model}", kind=SpanKind.CLIENT, attributes=attributes
        )

    def _model_done(self, span: Span, response: ModelResponse) -> None:
        usage = response.usage
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        if response.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
        if usage.cost_usd is not None:
            span.set_attribute("lionagi.usage.cost_usd", usage.cost_usd)
        if self.include_content:
            span.set_attribute("gen_ai.output.messages", _reply_json(response))

    async def model_call(
        self,
        model: iModel,
        request: ModelRequest,
        send: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        span = self._model_span(model, request, streaming=False)
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                response = await send(request)
        except BaseException as exc:
            _fail(span, exc)
            raise
        else:
            self._model_done(span, response)
            return response
        finally:
            span.end()

    def model_stream(
        self, model: iModel, request: ModelRequest, chunks: AsyncIterator[StreamChunk]
    ) -> AsyncIterator[StreamChunk]:
        # The span is started now (parent: the current span) and never made current, since a
        # context attached across a yield would leak into the consumer.
        return self._stream(self._model_span(model, request, streaming=True), chunks)

    async def _stream(
        self, span: Span, chunks: AsyncIterator[StreamChunk]
    ) -> AsyncIterator[StreamChunk]:
        from lionagi.service.types import FinalChunk

        try:
            async for chunk in chunks:
                if isinstance(chunk, FinalChunk):
                    self._model_done(span, chunk.response)
                yield chunk
        except GeneratorExit:
            span.set_attribute("lionagi.stream.closed_early", True)
            raise
        except BaseException as exc:
            _fail(span, exc)
            raise
        finally:
            try:
                close = getattr(chunks, "aclose", None)
                if close is not None:
                    await close()
            finally:
                span.end()

    # -- tool calls ------------------------------------------------------------------------------
    async def tool_call(
        self,
        request: ActionRequest,
        call: Callable[[], Awaitable[OutcomeT]],
        response_of: Callable[[OutcomeT], ActionResponse],
    ) -> OutcomeT:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": request.function,
            "gen_ai.tool.call.id": request.call_id,
            "gen_ai.tool.type": "function",
        }
        if self.include_content:
            attributes["gen_ai.tool.call.arguments"] = _json(request.arguments)
        span = self.tracer.start_span(
            f"execute_tool {request.function}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                outcome = await call()
        except BaseException as exc:
            _fail(span, exc)
            raise
        else:
            response = response_of(outcome)
            if self.include_content:
                span.set_attribute("gen_ai.tool.call.result", _json(response.output))
            if response.is_error:
                span.set_attribute("error.type", response.error_type or "error")
                span.set_status(Status(StatusCode.ERROR, response.error_message or None))
            return outcome
        finally:
            span.end()


# -- helpers --------------------------------------------------------------------------------
def _is_clean_end(error: BaseException) -> bool:
    from lionagi.session.control import StopStream

    return isinstance(error, StopAsyncIteration | StopStream | GeneratorExit)


def _fail(span: Span, error: BaseException) -> None:
    if isinstance(error, anyio.get_cancelled_exc_class()):
        span.set_attribute("error.type", "cancelled")
        span.set_status(Status(StatusCode.ERROR, "cancelled"))
        return
    span.set_attribute("error.type", type(error).__qualname__)
    if isinstance(error, Exception):
        span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _messages_json(messages: Any) -> str:
    return _json([_message_part(m) for m in messages])


def _message_part(message: Message) -> dict[str, Any]:
    from lionagi.session._frames import message_text

    return {
        "role": message.role,
        "kind": getattr(message, "kind", None),
        "content": message_text(message),
    }


def _reply_json(response: ModelResponse) -> str:
    part: dict[str, Any] = {"role": "assistant", "content": response.text}
    if response.tool_calls:
        part["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
        ]
    if response.finish_reason:
        part["finish_reason"] = response.finish_reason
    return _json([part])
