"""``ReAct`` and ``ReActStream``: reason-and-act rounds, then a final answer, as ONE turn.

Each round is a nested :func:`~lionagi.operations.operate.operate` (reasoning on, tools offered)
answering a :class:`ReActAnalysis`; the model asks for another round with ``extension_needed``,
up to ``max_extensions``. Loop control is polled between rounds. The final answer is a nested
``communicate`` with the caller's ``response_format`` (or text).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from lionagi.operations._prepare import build_instruction
from lionagi.operations.turn import TurnStream, control_point, run_in_turn, stream_in_turn

if TYPE_CHECKING:
    from lionagi.operations.params import ReActParams
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["PlannedAction", "ReAct", "ReActAnalysis", "ReActStream"]

logger = logging.getLogger("lionagi.react")

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


def _check(branch: Branch, params: ReActParams) -> None:
    """What the parameter types cannot say, checked before the turn starts."""
    branch.tools.offered(params.tools, True, owner=f"Branch {branch.name or branch.id}")
    build_instruction(params.instruction, guidance=params.guidance, context=params.context)


def _extension_prompt(remaining: int) -> str:
    return (
        "Continue the task: the results of the tools you called are in the conversation above. "
        f"After this round {remaining} more round{'' if remaining == 1 else 's'} may follow; "
        "set extension_needed to false when you are ready to answer."
    )


def _round_arguments(params: ReActParams) -> dict[str, Any]:
    """What every round passes to ``operate`` besides its instruction and model options."""
    return {
        "response_format": ReActAnalysis,
        "tools": params.tools,
        "actions": True,
        "reason": True,
        "chat_model": params.chat_model,
        "parse_model": params.parse_model,
        "action_strategy": params.action_strategy,
        "max_parse_retries": params.max_parse_retries,
    }


def next_round(params: ReActParams, analysis: ReActAnalysis, rounds: int) -> str | None:
    """The instruction of the round after ``rounds`` rounds, or None when the rounds are over:
    the analysis asks for no more, extensions are off, or ``max_extensions`` were taken."""
    extensions = rounds - 1
    limit = params.max_extensions
    if not (params.extension_allowed and analysis.extension_needed and extensions < limit):
        return None
    return _extension_prompt(limit - extensions - 1)


async def _rounds(branch: Branch, scope: TurnScope, params: ReActParams) -> AsyncIterator[Any]:
    """Yield each round's analysis, then the final answer (last). Holds no task group or
    cancel scope across a ``yield``."""
    common: dict[str, Any] = {**_round_arguments(params), **params.options}
    analysis: ReActAnalysis = await branch.operate(
        instruction=params.instruction,
        guidance=params.guidance,
        context=params.context,
        **common,
    )
    _report(params, analysis, 1)
    yield analysis
    rounds = 1
    while (prompt := next_round(params, analysis, rounds)) is not None:
        await control_point(scope)
        rounds += 1
        analysis = await branch.operate(instruction=prompt, **common)
        _report(params, analysis, rounds)
        yield analysis
    await control_point(scope)
    yield await branch.communicate(
        _FINAL,
        response_format=params.response_format,
        chat_model=params.chat_model,
        parse_model=params.parse_model,
        num_parse_retries=params.max_parse_retries,
        **params.options,
    )


def _report(params: ReActParams, analysis: ReActAnalysis, round_number: int) -> None:
    if params.verbose:
        logger.info("ReAct round %d: %s", round_number, analysis.analysis)


async def ReAct(branch: Branch, params: ReActParams) -> Any:
    """Reason and act in rounds, then answer; the whole run is one turn of ``branch``.

    Round 1 asks for a :class:`ReActAnalysis` with reasoning, offering ``tools`` (all registered
    ones by default) and running what the model requests. While the analysis says
    ``extension_needed`` (and ``extension_allowed``), up to ``max_extensions`` more rounds
    follow. The final answer follows ``response_format`` (or is text). Returns it, or
    ``(answer, analyses)`` with ``return_analysis=True``. ``action_strategy`` and
    ``max_parse_retries`` go to the rounds (the latter also to the final answer); model
    options go to every call. A BREAK directive between rounds raises :class:`LoopBreak`;
    CANCEL raises :class:`StopStream` (the turn ends cleanly).
    """
    _check(branch, params)

    async def body(scope: TurnScope) -> Any:
        items = [item async for item in _rounds(branch, scope, params)]
        answer, analyses = items[-1], items[:-1]
        return (answer, analyses) if params.return_analysis else answer

    return await run_in_turn(branch, model=params.chat_model, invoke=body, operation="ReAct")


def ReActStream(branch: Branch, params: ReActParams) -> TurnStream[Any]:
    """:func:`ReAct` as a stream: yields each round's :class:`ReActAnalysis`, then the final
    answer, as one stream turn (it starts at the first ``__anext__``).

    A CANCEL directive between rounds ends the stream cleanly (``RunEnd``); BREAK raises
    :class:`LoopBreak` (``RunFailed``). ``aclose()`` ends the turn with ``RunEnd``.
    Parameters are checked here, before anything runs.
    """
    _check(branch, params)

    def invoke(scope: TurnScope) -> AsyncIterator[Any]:
        return _rounds(branch, scope, params)

    return stream_in_turn(
        branch, model=params.chat_model, invoke=invoke, operation="ReActStream", nests=False
    )
