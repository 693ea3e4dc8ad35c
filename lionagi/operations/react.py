"""``ReAct`` and ``ReActStream``: reason-and-act rounds, then a final answer, as ONE turn.

Each round is a nested :func:`~lionagi.operations.operate.operate` (reasoning on, tools offered)
answering a :class:`ReActAnalysis`; the model asks for another round with ``extension_needed``,
up to ``max_extensions``. Loop control is polled between rounds. The final answer is a nested
``communicate`` with the caller's ``response_format`` (or text).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, JsonValue

from lionagi.errors import OperationError
from lionagi.operations._prepare import build_instruction
from lionagi.operations.communicate import communicate
from lionagi.operations.operate import ToolsArg, offered_tools, operate
from lionagi.operations.turn import control_point, run_in_turn, stream_in_turn
from lionagi.protocols.messages import Instruction
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["PlannedAction", "ReAct", "ReActAnalysis", "ReActStream"]

# operate parameters ReAct passes to its rounds (other keyword arguments are model options)
_ROUND_KEYS = ("action_strategy", "max_parse_retries")

_FINAL = (
    "Give your final answer to the original request now, using your analysis and the tool "
    "results in the conversation above."
)


class PlannedAction(BaseModel):
    """A step the model intends to take in a later round."""

    action_type: str = Field(description="The kind of step, e.g. the tool to use.")
    description: str = Field(default="", description="What the step should achieve.")


class ReActAnalysis(BaseModel):
    """One reasoning round: the analysis so far, planned next steps, and whether another round
    is needed. ``operate`` returns it with ``reason``, ``action_requests`` and
    ``action_responses`` added."""

    analysis: str = Field(description="What you know so far and what is still missing.")
    planned_actions: list[PlannedAction] = Field(
        default_factory=list, description="Steps you plan for the next round, if any."
    )
    extension_needed: bool = Field(
        default=False,
        description="true to take another round (e.g. to use tool results); false when ready "
        "to give the final answer.",
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    instruction: str | Instruction
    guidance: str | None
    context: JsonValue
    tools: ToolsArg
    response_format: type[BaseModel] | None
    max_extensions: int
    extension_allowed: bool
    chat_model: iModel | None
    parse_model: iModel | None
    options: dict[str, Any]  # model options, for every call
    round_options: dict[str, Any]  # operate parameters of the rounds
    final_options: dict[str, Any]  # communicate parameters of the final answer


def _plan(
    branch: Branch,
    instruction: str | Instruction,
    guidance: str | None,
    context: JsonValue,
    tools: ToolsArg,
    response_format: type[BaseModel] | None,
    max_extensions: int,
    extension_allowed: bool,
    chat_model: iModel | None,
    parse_model: iModel | None,
    options: dict[str, Any],
) -> _Plan:
    """Check every parameter before the turn starts."""
    if (
        not isinstance(max_extensions, int)
        or isinstance(max_extensions, bool)
        or max_extensions < 0
    ):
        raise OperationError(f"max_extensions must be an int >= 0, got {max_extensions!r}")
    if not isinstance(extension_allowed, bool):
        raise OperationError(f"extension_allowed must be True or False, got {extension_allowed!r}")
    if response_format is not None and not (
        isinstance(response_format, type) and issubclass(response_format, BaseModel)
    ):
        raise OperationError(
            f"response_format must be a pydantic model class or None, got {response_format!r}"
        )
    for label, model in (("chat_model", chat_model), ("parse_model", parse_model)):
        if model is not None and not isinstance(model, iModel):
            raise OperationError(f"{label} must be an iModel or None, got {model!r}")
    offered_tools(branch, tools, True)
    build_instruction(instruction, guidance=guidance, context=context)
    model_options = dict(options)
    round_options = {k: model_options.pop(k) for k in _ROUND_KEYS if k in model_options}
    final_options: dict[str, Any] = {}
    if "max_parse_retries" in round_options:
        final_options["num_parse_retries"] = round_options["max_parse_retries"]
    return _Plan(
        instruction,
        guidance,
        context,
        tools,
        response_format,
        max_extensions,
        extension_allowed,
        chat_model,
        parse_model,
        model_options,
        round_options,
        final_options,
    )


def _extension_prompt(remaining: int) -> str:
    return (
        "Continue the task: the results of the tools you called are in the conversation above. "
        f"After this round {remaining} more round{'' if remaining == 1 else 's'} may follow; "
        "set extension_needed to false when you are ready to answer."
    )


async def _rounds(branch: Branch, scope: TurnScope, plan: _Plan) -> AsyncIterator[Any]:
    """Yield each round's analysis, then the final answer (last). Holds no task group or
    cancel scope across a ``yield``."""
    common: dict[str, Any] = {
        "response_format": ReActAnalysis,
        "tools": plan.tools,
        "actions": True,
        "reason": True,
        "chat_model": plan.chat_model,
        "parse_model": plan.parse_model,
        **plan.round_options,
        **plan.options,
    }
    analysis: ReActAnalysis = await operate(
        branch,
        instruction=plan.instruction,
        guidance=plan.guidance,
        context=plan.context,
        **common,
    )
    yield analysis
    extensions = 0
    while plan.extension_allowed and analysis.extension_needed and extensions < plan.max_extensions:
        await control_point(scope)
        extensions += 1
        analysis = await operate(
            branch,
            instruction=_extension_prompt(plan.max_extensions - extensions),
            **common,
        )
        yield analysis
    await control_point(scope)
    yield await communicate(
        branch,
        _FINAL,
        response_format=plan.response_format,
        chat_model=plan.chat_model,
        parse_model=plan.parse_model,
        **plan.final_options,
        **plan.options,
    )


async def ReAct(
    branch: Branch,
    instruction: str | Instruction,
    *,
    guidance: str | None = None,
    context: JsonValue = None,
    tools: ToolsArg = None,
    response_format: type[BaseModel] | None = None,
    max_extensions: int = 3,
    extension_allowed: bool = True,
    chat_model: iModel | None = None,
    parse_model: iModel | None = None,
    return_analysis: bool = False,
    **options: Any,
) -> Any:
    """Reason and act in rounds, then answer; the whole run is one turn of ``branch``.

    Round 1 asks for a :class:`ReActAnalysis` with reasoning, offering ``tools`` (all registered
    ones by default) and running what the model requests. While the analysis says
    ``extension_needed`` (and ``extension_allowed``), up to ``max_extensions`` more rounds
    follow. The final answer follows ``response_format`` (or is text). Returns it, or
    ``(answer, analyses)`` with ``return_analysis=True``. ``action_strategy`` and
    ``max_parse_retries`` go to the rounds (the latter also to the final answer); other
    keyword arguments are model options for every call. A BREAK directive between rounds
    raises :class:`LoopBreak`; CANCEL raises :class:`StopStream` (the turn ends cleanly).
    """
    if not isinstance(return_analysis, bool):
        raise OperationError(f"return_analysis must be True or False, got {return_analysis!r}")
    plan = _plan(
        branch,
        instruction,
        guidance,
        context,
        tools,
        response_format,
        max_extensions,
        extension_allowed,
        chat_model,
        parse_model,
        options,
    )

    async def body(scope: TurnScope) -> Any:
        items = [item async for item in _rounds(branch, scope, plan)]
        answer, analyses = items[-1], items[:-1]
        return (answer, analyses) if return_analysis else answer

    return await run_in_turn(branch, model=chat_model, invoke=body, operation="ReAct")


def ReActStream(
    branch: Branch,
    instruction: str | Instruction,
    *,
    guidance: str | None = None,
    context: JsonValue = None,
    tools: ToolsArg = None,
    response_format: type[BaseModel] | None = None,
    max_extensions: int = 3,
    extension_allowed: bool = True,
    chat_model: iModel | None = None,
    parse_model: iModel | None = None,
    **options: Any,
) -> AsyncGenerator[Any, None]:
    """:func:`ReAct` as a stream: yields each round's :class:`ReActAnalysis`, then the final
    answer, as one stream turn (it starts at the first ``__anext__``).

    A CANCEL directive between rounds ends the stream cleanly (``RunEnd``); BREAK raises
    :class:`LoopBreak` (``RunFailed``). ``aclose()`` ends the turn with ``RunEnd``.
    Parameters are checked here, before anything runs.
    """
    plan = _plan(
        branch,
        instruction,
        guidance,
        context,
        tools,
        response_format,
        max_extensions,
        extension_allowed,
        chat_model,
        parse_model,
        options,
    )

    def invoke(scope: TurnScope) -> AsyncIterator[Any]:
        return _rounds(branch, scope, plan)

    return stream_in_turn(branch, model=chat_model, invoke=invoke, operation="ReActStream")
