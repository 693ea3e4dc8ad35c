"""The Branch: one conversation — its history, tools and models.

This module holds the aggregate itself: construction, accessors, cloning and serialization.
Turns (model calls) are run by :mod:`lionagi.operations.turn`, which uses the private turn
fields created here; the Branch holds no other turn state. Operations use only its public
members (``tests/operations/test_branch_interface.py`` reads their source to check).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, overload
from uuid import UUID

import anyio
from anyio.lowlevel import checkpoint
from pydantic import BaseModel, JsonValue

from lionagi._deferred import DeferredModule
from lionagi._ids import new_id
from lionagi._lazylock import LazyFifoLock
from lionagi.errors import ConfigurationError, OperationError
from lionagi.operations import chat as _chat
from lionagi.operations.fields import FieldModel, RequestFields
from lionagi.operations.params import (
    ActionStrategy,
    ActParams,
    ChatParams,
    CommunicateParams,
    HandleValidation,
    Instruct,
    InterpretParams,
    ModelOptions,
    NoOptions,
    OperateParams,
    ParseParams,
    ReActParams,
    RunParams,
    bind,
    bound_parameters,
    same_parameters,
)
from lionagi.operations.params import ToolsArg as OfferedTools
from lionagi.operations.turn import TurnStream, current_scope, schedule_message_signal
from lionagi.protocols.context_providers import ContextProviderRegistry, ProviderReport
from lionagi.protocols.messages import (
    Instruction,
    Message,
    MessageManager,
    System,
)
from lionagi.protocols.tools import Tool, ToolRegistry
from lionagi.service.imodel import iModel
from lionagi.service.usage_limits import UsageLimits
from lionagi.session._frames import messages_frame
from lionagi.session._serialization import RestoreOptions, branch_from_dict, branch_to_dict
from lionagi.session.control import LoopControl, LoopDirective
from lionagi.session.logs import LogManager

if TYPE_CHECKING:
    from lionagi.mcp import McpServer, ToolLoading
    from lionagi.operations import act as _act
    from lionagi.operations import communicate as _communicate
    from lionagi.operations import interpret as _interpret
    from lionagi.operations import live as _live
    from lionagi.operations import operate as _operate
    from lionagi.operations import parse as _parse
    from lionagi.operations import react as _react
    from lionagi.operations import run as _run
    from lionagi.operations.act import ActionInput
    from lionagi.operations.events import StreamEvent
    from lionagi.operations.types import TurnExecutionContext
    from lionagi.protocols.messages import ActionResponse
    from lionagi.session.observer import Observer
    from lionagi.session.session import Session
    from lionagi.session.signal import Signal
else:
    # The operation bodies other than chat are imported when a method first runs one: a
    # program loads only the operations it uses, and no call pays for an import statement.
    _act = DeferredModule("lionagi.operations.act")
    _communicate = DeferredModule("lionagi.operations.communicate")
    _interpret = DeferredModule("lionagi.operations.interpret")
    _live = DeferredModule("lionagi.operations.live")
    _operate = DeferredModule("lionagi.operations.operate")
    _parse = DeferredModule("lionagi.operations.parse")
    _react = DeferredModule("lionagi.operations.react")
    _run = DeferredModule("lionagi.operations.run")

__all__ = ["Branch", "RestoreOptions"]

M = TypeVar("M", bound=BaseModel)

ToolsArg = Tool | Callable[..., Any] | Iterable[Tool | Callable[..., Any]]


class _SignalThrough(weakref.ref["Branch"]):
    """The history's on-added callback: a weak reference to its Branch that, called with a
    message, schedules the message signal. Weak, so a dropped Branch is freed at once by
    reference counting rather than later by the cycle collector; one object, so it costs a
    kept conversation no closure, cell or separate reference."""

    __slots__ = ()

    def __call__(self, message: Message) -> None:  # type: ignore[override]
        branch = _referent(self)
        if branch is not None and branch._observer is not None:  # else nobody to tell
            schedule_message_signal(branch, message)


_referent = weakref.ref.__call__


class Branch:
    """One conversation: an ordered, append-only history plus the tools and models it uses.

    ``system`` (text or a :class:`System`) becomes the first message, followed by
    ``messages``. Models are :class:`iModel` objects or ``"provider/model"`` strings;
    ``parse_model`` falls back to ``chat_model``. ``tools`` are :class:`Tool` objects or
    plain callables. ``usage_limits`` (a :class:`~lionagi.service.usage_limits.UsageLimits`)
    caps what each turn on this Branch may spend; it can be changed between turns.
    ``imodel`` is an alias of ``chat_model`` (upstream lionagi's name).
    """

    # Slotted: a program may keep thousands of conversations, and an instance dict would be a
    # large part of each one's own memory.
    __slots__ = (
        "__weakref__",
        "_active_turn_context",
        "_chat_model",
        "_last_context_report",
        "_logs",
        "_messages",
        "_observer",
        "_parse_model",
        "_providers",
        "_resume_ids",
        "_session",
        "_tools",
        "_turn_lock",
        "_usage_limits",
        "id",
        "name",
        "user",
    )

    def __init__(
        self,
        *,
        system: str | System | None = None,
        chat_model: iModel | str | None = None,
        parse_model: iModel | str | None = None,
        tools: ToolsArg | None = None,
        messages: Iterable[Message] | None = None,
        name: str | None = None,
        user: str | None = None,
        id: UUID | None = None,
        usage_limits: UsageLimits | None = None,
        imodel: iModel | str | None = None,
        logs: LogManager | None = None,
    ) -> None:
        if imodel is not None:  # upstream's name for the chat model
            if chat_model is not None:
                raise ConfigurationError("Branch got both chat_model= and its alias imodel=")
            chat_model = imodel
        _check_identity(id, name, user)
        self.id: UUID = new_id() if id is None else id
        self.name: str | None = name
        self.user: str | None = user
        self._chat_model: iModel | None = _coerce_model(chat_model, "chat_model")
        self._parse_model: iModel | None = _coerce_model(parse_model, "parse_model")
        self._tools: ToolRegistry | None = None  # made on first use: most Branches have none
        if tools is not None:
            self.register_tools(tools)
        self._messages = MessageManager(_initial_history(system, messages))
        self._messages.on_added(_SignalThrough(self))
        self._logs: LogManager = _logs_of(logs)

        # Turn fields (ADR-0018 D1): the lock that serializes top-level turns and the pointer to
        # the one active context, for out-of-band control. Only lionagi.operations.turn writes
        # them; all other turn state lives in the TurnExecutionContext.
        self._turn_lock = LazyFifoLock()
        self._active_turn_context: TurnExecutionContext | None = None
        self._last_context_report: ProviderReport | None = None
        self._providers: ContextProviderRegistry | None = None
        self._observer: Observer | None = None
        self._session: Session | None = None
        self._resume_ids: dict[str, str] | None = None  # made by the first run() that needs it
        self.usage_limits = usage_limits

    @property
    def usage_limits(self) -> UsageLimits | None:
        """Limits each turn's model calls are checked against (``None``: no limits)."""
        return self._usage_limits

    @usage_limits.setter
    def usage_limits(self, value: UsageLimits | None) -> None:
        if value is not None and not isinstance(value, UsageLimits):
            raise ConfigurationError(
                f"usage_limits must be a UsageLimits or None, got {type(value).__name__}"
            )
        self._usage_limits = value

    # -- turns: control, report, providers, signals ----------------------------------------
    def control(
        self,
        directive: LoopDirective | str,
        *,
        reason: str | None = None,
        turn_id: UUID | None = None,
    ) -> bool:
        """Address a directive to the active turn (ADR-0018 D3).

        Returns False and stores nothing when no turn is active (including while one is
        finalizing) or ``turn_id`` names another turn. Directives are never queued for a later
        turn; several before a poll keep the last.
        """
        context = self._active_turn_context
        if context is None or context.phase != "active":
            return False
        if turn_id is not None and turn_id != context.turn_id:
            return False
        context.control = LoopControl(LoopDirective(directive), context.turn_id, reason)
        return True

    def poll_control(self, *, turn_id: UUID | None = None) -> LoopControl | None:
        """Take the active turn's pending directive, if any (and if ``turn_id`` matches)."""
        context = self._active_turn_context
        if context is None or context.phase != "active":
            return None
        if turn_id is not None and turn_id != context.turn_id:
            return None
        control = context.control
        context.control = None
        return control

    @property
    def active_turn_id(self) -> UUID | None:
        """The id of the turn running on this Branch, if one is active."""
        context = self._active_turn_context
        return None if context is None or context.phase != "active" else context.turn_id

    @property
    def last_context_report(self) -> ProviderReport | None:
        """The context-provider report of the last top-level turn that ended (ADR-0018 D5).

        Includes failed, cancelled and abandoned turns; ``None`` after a turn that had no
        providers. A running turn never publishes a partial report here.
        """
        return self._last_context_report

    @property
    def providers(self) -> ContextProviderRegistry:
        """This Branch's context providers (created on first use)."""
        if self._providers is None:
            self._providers = ContextProviderRegistry()
        return self._providers

    @property
    def context_providers(self) -> ContextProviderRegistry | None:
        """The registered context providers, or ``None`` when there are none (unlike
        :attr:`providers`, reading this never creates the registry)."""
        registry = self._providers
        return registry if registry else None

    @property
    def observer(self) -> Observer | None:
        """The observer of this Branch's Session (signals, the authorize gate); ``None``
        outside a Session."""
        return self._observer

    @property
    def resume_ids(self) -> dict[str, str]:
        """The agentic CLI session id per provider name that the next :meth:`run` resumes
        (kept from the last streamed reply that named one)."""
        ids = self._resume_ids
        if ids is None:
            ids = self._resume_ids = {}
        return ids

    def resume_id(self, provider: str) -> str | None:
        """The CLI session id of ``provider`` that the next :meth:`run` resumes, if any (read
        without making the :attr:`resume_ids` mapping, which a Branch that never resumed a
        session does not keep)."""
        ids = self._resume_ids
        return None if ids is None else ids.get(provider)

    @property
    def session(self) -> Session | None:
        return self._session

    async def drain_signals(self) -> None:
        """Kept for upstream lionagi code; nothing is left to wait for.

        A turn delivers its message signals before its terminal signal, so once an operation
        has returned its signals are delivered; signals of messages added outside a turn are
        delivered on their own, best-effort. Returns after one checkpoint, idle or not.
        """
        await checkpoint()

    async def emit(self, signal: Signal) -> None:
        """Deliver ``signal`` to this Branch's observers now (nothing without a Session)."""
        if self._observer is not None:
            await self._observer.emit(signal)

    # -- history -------------------------------------------------------------------------
    @property
    def system(self) -> System | None:
        return self._messages.system

    @property
    def msgs(self) -> MessageManager:
        """The history (append-only; read it as a sequence)."""
        return self._messages

    @property
    def messages(self) -> MessageManager:
        """Same object as :attr:`msgs`."""
        return self._messages

    # -- tools ---------------------------------------------------------------------------
    @property
    def tools(self) -> ToolRegistry:
        """The Branch's tool registry (the same object on every read; made on the first)."""
        registry = self._tools
        if registry is None:
            registry = self._tools = ToolRegistry()
        return registry

    @property
    def has_tools(self) -> bool:
        """Whether a tool is registered; unlike ``len(branch.tools)``, makes no registry."""
        registry = self._tools
        return registry is not None and len(registry) > 0

    def register_tools(self, tools: ToolsArg, *, update: bool = False) -> tuple[Tool, ...]:
        """Register one tool or callable, or several (all or none); returns the Tools."""
        if isinstance(tools, Tool) or callable(tools):
            return self.tools.register_many([tools], update=update)
        return self.tools.register_many(tools, update=update)

    async def load_mcp_tools(
        self, server: McpServer, **loading: Unpack[ToolLoading]
    ) -> tuple[Tool, ...]:
        """List a connected MCP server's tools and register them (all or none).

        ``loading`` is :meth:`lionagi.mcp.McpServer.load_tools`' options
        (:class:`lionagi.mcp.ToolLoading`): ``names`` keeps only some tools (a mapping renames
        them, ``{remote: local}``) and ``prefix`` goes before every name. The tools call the
        server only while its ``async with`` block is open; with ``follow_changes`` (the
        default) the Branch's tools follow the server's when it says they changed.
        Checkpoints; cancel-safe (a cancelled listing registers nothing)."""
        return await server.load_tools(self.tools, **loading)

    # -- models --------------------------------------------------------------------------
    @property
    def chat_model(self) -> iModel | None:
        return self._chat_model

    @chat_model.setter
    def chat_model(self, value: iModel | str | None) -> None:
        self._chat_model = _coerce_model(value, "chat_model")

    @property
    def parse_model(self) -> iModel | None:
        """The model that reformats unparseable replies; ``chat_model`` unless set."""
        return self._parse_model if self._parse_model is not None else self._chat_model

    @parse_model.setter
    def parse_model(self, value: iModel | str | None) -> None:
        self._parse_model = _coerce_model(value, "parse_model")

    # -- operations (each model-invoking one is one turn; see lionagi.operations) ----------
    # Each method is its operation's one declared signature: the body binds its arguments
    # (``locals()``, taken first) into the typed parameters and hands them to the operation.
    async def chat(
        self,
        instruction: str | Instruction | None = None,
        guidance: str | None = None,
        context: JsonValue = None,
        *,
        response_format: type[BaseModel] | Mapping[str, Any] | None = None,
        request_fields: RequestFields | None = None,
        chat_model: iModel | None = None,
        imodel: iModel | None = None,
        images: Sequence[str] | None = None,
        return_ins_res_message: bool = False,
        **options: Unpack[ModelOptions],
    ) -> Any:
        """Ask the chat model, with the history as context; nothing is recorded.

        Returns the reply text (a ``str``), or with ``return_ins_res_message=True`` (upstream's
        shape) the unrecorded ``(Instruction, AssistantResponse)`` pair; hence ``Any``.
        ``imodel`` is an alias of ``chat_model``; ``options`` are :class:`ModelOptions`.
        """
        return await _chat.chat(self, bind(ChatParams, locals()))

    @bound_parameters(chat, ChatParams, "chat_and_record")
    async def chat_and_record(self, params: ChatParams) -> str:
        """Like :meth:`chat` (its parameters), recording the instruction and the reply; returns
        the reply text (``return_ins_res_message`` belongs to :meth:`chat`)."""
        text: str = await _chat.chat(self, params, record=True)
        return text

    async def parse(
        self,
        text: str,
        handle_validation: HandleValidation = "raise",
        max_retries: int = 3,
        *,
        response_format: type[M],
        parse_model: iModel | None = None,
        **options: Unpack[ModelOptions],
    ) -> M | str | None:
        """Parse ``text`` into ``response_format`` (see :func:`lionagi.operations.parse.parse`)."""
        params = bind(ParseParams, locals())
        result: M | str | None = await _parse.parse(self, params)
        return result

    async def communicate(
        self,
        instruction: str | Instruction | None = None,
        guidance: str | None = None,
        context: JsonValue = None,
        *,
        instruct: Instruct | Mapping[str, Any] | None = None,
        response_format: type[BaseModel] | None = None,
        request_fields: RequestFields | None = None,
        chat_model: iModel | None = None,
        imodel: iModel | None = None,
        parse_model: iModel | None = None,
        images: Sequence[str] | None = None,
        num_parse_retries: int = 3,
        handle_validation: HandleValidation = "raise",
        **options: Unpack[ModelOptions],
    ) -> Any:
        """Record an exchange; return the reply text or the reply parsed into
        ``response_format``."""
        params = bind(CommunicateParams, locals())
        return await _communicate.communicate(self, params)

    @bound_parameters(communicate, CommunicateParams, "communicate_stream")
    def communicate_stream(self, params: CommunicateParams) -> TurnStream[StreamEvent]:
        """:meth:`communicate` as live events, one stream turn; same parameters. Text deltas,
        the structured reply so far, the committed messages, and last a
        :class:`~lionagi.operations.events.ResultEvent` holding what ``communicate`` returns
        (see :func:`lionagi.operations.live.communicate_stream`)."""
        return _live.communicate_stream(self, params)

    async def interpret(
        self,
        text: str,
        domain: str | None = None,
        style: str | None = None,
        *,
        interpret_model: iModel | None = None,
        **options: Unpack[ModelOptions],
    ) -> str:
        """Rewrite a raw request into a clearer prompt (nothing is recorded)."""
        params = bind(InterpretParams, locals())
        return await _interpret.interpret(self, params)

    async def operate(
        self,
        *,
        instruct: Instruct | Mapping[str, Any] | None = None,
        instruction: str | Instruction | None = None,
        guidance: str | None = None,
        context: JsonValue = None,
        response_format: type[BaseModel] | None = None,
        field_models: Sequence[FieldModel] | None = None,
        tools: OfferedTools = None,
        actions: bool = False,
        invoke_actions: bool = True,
        reason: bool = False,
        chat_model: iModel | None = None,
        imodel: iModel | None = None,
        parse_model: iModel | None = None,
        images: Sequence[str] | None = None,
        action_strategy: ActionStrategy = "concurrent",
        handle_validation: HandleValidation = "raise",
        max_parse_retries: int = 3,
        **options: Unpack[ModelOptions],
    ) -> Any:
        """Structured output plus tool use, as one turn (see
        :func:`lionagi.operations.operate.operate`)."""
        params = bind(OperateParams, locals())
        return await _operate.operate(self, params)

    @bound_parameters(operate, OperateParams, "operate_stream")
    def operate_stream(self, params: OperateParams) -> TurnStream[StreamEvent]:
        """:meth:`operate` as live events, one stream turn; same parameters. Deltas, the
        structured reply so far, tools started and finished, each committed message, and last a
        :class:`~lionagi.operations.events.ResultEvent` holding what ``operate`` returns (see
        :func:`lionagi.operations.live.operate_stream`)."""
        return _live.operate_stream(self, params)

    @overload
    async def act(
        self,
        action_request: ActionInput,
        *,
        strategy: ActionStrategy = ...,
        suppress_errors: bool = ...,
        record: bool = ...,
    ) -> ActionResponse: ...

    @overload
    async def act(
        self,
        action_request: Sequence[ActionInput],
        *,
        strategy: ActionStrategy = ...,
        suppress_errors: bool = ...,
        record: bool = ...,
    ) -> list[ActionResponse]: ...

    async def act(
        self,
        action_request: ActionInput | Sequence[ActionInput],
        *,
        strategy: ActionStrategy = "concurrent",
        suppress_errors: bool = True,
        record: bool = True,
        **options: Unpack[NoOptions],
    ) -> ActionResponse | list[ActionResponse]:
        """Run tool calls and record them (see :func:`lionagi.operations.act.act`).

        Not a model turn: it joins the calling turn when there is one and takes no lock alone.
        """
        params = bind(ActParams, {k: v for k, v in locals().items() if k != "action_request"})
        return await _act.act(self, action_request, params)

    async def ReAct(
        self,
        instruction: str | Instruction | Instruct | Mapping[str, Any] | None = None,
        *,
        instruct: Instruct | Mapping[str, Any] | None = None,
        guidance: str | None = None,
        context: JsonValue = None,
        tools: OfferedTools = None,
        response_format: type[BaseModel] | None = None,
        max_extensions: int = 3,
        extension_allowed: bool = True,
        chat_model: iModel | None = None,
        imodel: iModel | None = None,
        parse_model: iModel | None = None,
        action_strategy: ActionStrategy = "concurrent",
        max_parse_retries: int = 3,
        return_analysis: bool = False,
        verbose: bool = False,
        **options: Unpack[ModelOptions],
    ) -> Any:
        """Reason-act rounds then a final answer, as one turn (see
        :func:`lionagi.operations.react.ReAct`). Upstream's ``ReAct(instruct)`` works too:
        an :class:`Instruct` or dict as the first argument or as ``instruct=``; ``verbose``
        logs each round's analysis on the ``lionagi.react`` logger."""
        params = bind(ReActParams, locals())
        return await _react.ReAct(self, params)

    @same_parameters(ReAct)
    def ReActStream(self, arguments: dict[str, Any]) -> TurnStream[Any]:
        """Like :meth:`ReAct` (its parameters), yielding each round's analysis then the final
        answer, as one stream turn (see :func:`lionagi.operations.react.ReActStream`). The
        analyses are always yielded, so ``return_analysis`` belongs to :meth:`ReAct`."""
        return _react.ReActStream(self, _stream_react_params(arguments, "ReActStream"))

    @same_parameters(ReAct)
    def ReActEvents(self, arguments: dict[str, Any]) -> TurnStream[StreamEvent]:
        """:meth:`ReAct` (its parameters) as live events, one stream turn: every model call
        streamed, tools started and finished, each committed message, and each round's analysis
        and last the answer as a :class:`~lionagi.operations.events.ResultEvent` (see
        :func:`lionagi.operations.live.react_events`). ``return_analysis`` belongs to
        :meth:`ReAct`: the analyses arrive as events."""
        return _live.react_events(self, _stream_react_params(arguments, "ReActEvents"))

    def run(
        self,
        instruction: str | Instruction,
        guidance: str | None = None,
        context: JsonValue = None,
        *,
        chat_model: iModel | None = None,
        imodel: iModel | None = None,
        images: Sequence[str] | None = None,
        max_tool_rounds: int = 8,
        session_id: str | None = None,
        **options: Unpack[ModelOptions],
    ) -> TurnStream[Message]:
        """Stream a turn as the messages it commits, each recorded before it is yielded (see
        :func:`lionagi.operations.run.run`)."""
        params = bind(RunParams, locals())
        return _run.run(self, params)

    # -- logs, frames, closing ------------------------------------------------------------
    @property
    def logs(self) -> LogManager:
        """This Branch's API-call and tool-call records (see :class:`LogManager`)."""
        return self._logs

    def dump_logs(self, *, clear: bool = True, persist_path: str | Path | None = None) -> Path:
        """Write the logs as JSON lines (no secrets) and return the file's path; ``clear``
        empties them. Blocking file I/O: from async code use :meth:`adump_logs`."""
        return self._logs.dump(persist_path, clear=clear, name=f"branch-{self.id}")

    async def adump_logs(
        self, *, clear: bool = True, persist_path: str | Path | None = None
    ) -> Path:
        """:meth:`dump_logs` in a worker thread (checkpoints once; cancelled mid-write, the
        file may hold part of the lines and the logs are not cleared)."""
        return await self._logs.adump(persist_path, clear=clear, name=f"branch-{self.id}")

    def to_df(self) -> Any:
        """The history as a pandas DataFrame, one row per message (columns
        ``branch_id, id, kind, role, created_at, content, message``). Needs the
        ``lionagi[pandas]`` extra; :class:`~lionagi.errors.MissingDependencyError` without it."""
        return messages_frame([self])

    async def aclose(self) -> None:
        """Close this Branch's models (their HTTP clients or subprocesses). Shielded from
        cancellation, so a cancelled caller still releases them; the Branch stays usable
        (models reopen their transports on the next call)."""
        models = [self._chat_model]
        if self._parse_model is not None and self._parse_model is not self._chat_model:
            models.append(self._parse_model)
        with anyio.CancelScope(shield=True):
            for model in models:
                if model is not None:
                    await model.aclose()

    async def __aenter__(self) -> Branch:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Leaving ``async with Branch(...)``: dump the logs if they were created with
        ``dump_on_exit`` (and hold any), then close the models. Shielded from cancellation."""
        with anyio.CancelScope(shield=True):
            try:
                if self._logs.dump_on_exit and self._logs:
                    await self.adump_logs()
            finally:
                await self.aclose()

    @bound_parameters(run, RunParams, "stream", _run.stream_text)
    def stream(self, params: RunParams) -> TurnStream[StreamEvent]:
        """Stream a :meth:`run` turn (its parameters) as live events: text and tool-call deltas
        as they arrive, tool starts and finishes, and each committed message (see
        :func:`lionagi.operations.run.stream`)."""
        return _run.stream(self, params)

    # -- copies and serialization --------------------------------------------------------
    async def aclone(self) -> Branch:
        """:meth:`clone` once the turns running or queued on this Branch have ended, so the
        copy never holds half of a turn. Called from inside this Branch's own turn, it copies
        at once (waiting would deadlock). Cancel-safe: cancelled while waiting, nothing
        happened."""
        if current_scope(self) is not None:
            return self.clone()
        async with self._turn_lock:
            return self.clone()

    def clone(self) -> Branch:
        """A new branch (new id) with the same history, a copy of the tool registry and
        copies of the models; the copy shares no mutable state and has no turn in progress."""
        chat = None if self._chat_model is None else self._chat_model.copy()
        if self._parse_model is None:
            parse = None
        elif self._parse_model is self._chat_model:
            parse = chat
        else:
            parse = self._parse_model.copy()
        other = Branch(
            chat_model=chat,
            parse_model=parse,
            messages=self._messages.snapshot(),
            name=self.name,
            user=self.user,
        )
        other._tools = None if self._tools is None else self._tools.copy()
        return other

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state without secrets: history, model configuration and tool names.

        Tool functions are not serializable; :meth:`from_dict` takes them again.
        """
        return branch_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **restoring: Unpack[RestoreOptions]) -> Branch:
        """Rebuild a branch from :meth:`to_dict` output.

        ``restoring`` (:class:`~lionagi.session.branch.RestoreOptions`) gives what the
        dict cannot hold: pass ``tools`` to re-attach functions, then every tool name the data
        lists must be among them (without ``tools`` the branch starts with none);
        ``chat_model`` / ``parse_model`` replace the stored models. API keys come from the
        environment, as for :meth:`iModel.from_dict`.
        """
        return branch_from_dict(cls, data, restoring)

    def __repr__(self) -> str:
        return f"Branch(id={self.id}, name={self.name!r}, messages={len(self._messages)})"


def _check_identity(id: UUID | None, name: str | None, user: str | None) -> None:
    if id is not None and not isinstance(id, UUID):
        raise ConfigurationError(f"Branch id must be a UUID, got {id!r}")
    for label, value in (("name", name), ("user", user)):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"Branch {label} must be a string or None, got {value!r}")


def _stream_react_params(arguments: dict[str, Any], operation: str) -> ReActParams:
    if arguments.get("return_analysis"):
        raise OperationError(
            f"{operation}() yields each round's analysis already; return_analysis= belongs to "
            "ReAct()"
        )
    return bind(ReActParams, arguments, operation=operation)


def _logs_of(logs: LogManager | None) -> LogManager:
    if logs is None:
        return LogManager()
    if not isinstance(logs, LogManager):
        raise ConfigurationError(
            f"logs must be a LogManager (capacity, persist_path, dump_on_exit) or None, got "
            f"{type(logs).__name__}"
        )
    return logs


def _coerce_model(value: iModel | str | None, label: str) -> iModel | None:
    if value is None or isinstance(value, iModel):
        return value
    if isinstance(value, str):
        return iModel(model=value)
    raise ConfigurationError(
        f"{label} must be an iModel, a 'provider/model' string or None, got {type(value).__name__}"
    )


def _initial_history(
    system: str | System | None, messages: Iterable[Message] | None
) -> list[Message]:
    history = _system_messages(system)
    given = [] if messages is None else list(messages)
    for index, message in enumerate(given):
        _check_given(index, message, system_given=bool(history))
    if not given:
        return history  # a system message alone (or nothing): no id can repeat
    history.extend(given)
    seen: set[UUID] = set()
    for message in history:
        if message.id in seen:
            raise ConfigurationError(f"message {message.id} appears twice in the history")
        seen.add(message.id)
    return history


def _system_messages(system: str | System | None) -> list[Message]:
    if isinstance(system, str):
        return [System(content=system)]
    if isinstance(system, System):
        return [system]
    if system is not None:
        raise ConfigurationError(
            f"system must be a string, a System message or None, got {type(system).__name__}"
        )
    return []


def _check_given(index: int, message: object, *, system_given: bool) -> None:
    if not isinstance(message, Message):
        raise ConfigurationError(f"messages[{index}] is a {type(message).__name__}, not a Message")
    if isinstance(message, System) and index > 0:
        raise ConfigurationError(
            f"messages[{index}] is a System message; only the first message may be one"
        )
    if isinstance(message, System) and system_given:
        raise ConfigurationError(
            "messages[0] is a System message and system= was given too; pass the system prompt once"
        )
