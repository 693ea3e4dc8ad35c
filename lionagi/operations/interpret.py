"""``interpret``: rewrite a user's raw request into a clearer prompt (not recorded)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lionagi.operations._prepare import model_for
from lionagi.operations.turn import run_in_turn
from lionagi.protocols.messages import Instruction, System

if TYPE_CHECKING:
    from lionagi.operations.params import InterpretParams
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["interpret"]

_SYSTEM = (
    "You rewrite a user's request into a clear, specific and self-contained prompt for a "
    "language model. Keep the user's intent and every constraint; add structure, not facts. "
    "Answer with the rewritten prompt only."
)


async def interpret(branch: Branch, params: InterpretParams) -> str:
    """Return ``params.text`` rewritten as a better prompt, optionally for a ``domain`` and
    ``style``."""
    guidance = "; ".join(
        part
        for part in (
            f"domain: {params.domain}" if params.domain else "",
            f"style: {params.style}" if params.style else "",
        )
        if part
    )
    ask = Instruction(instruction=params.text, guidance=guidance or None)
    options = params.request_options

    async def body(scope: TurnScope) -> str:
        response = await scope.call_model(
            branch,
            model_for(scope, branch, params.interpret_model),
            messages=[System(content=_SYSTEM), ask],
            options=options,
        )
        return response.text.strip()

    return await run_in_turn(
        branch, model=params.interpret_model, invoke=body, operation="interpret"
    )
