"""``interpret``: rewrite a user's raw request into a clearer prompt (not recorded)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lionagi.errors import OperationError
from lionagi.operations._model_call import check_usage_limits, retry_hook
from lionagi.operations._prepare import check_models, check_options, model_for
from lionagi.operations.turn import control_point, run_in_turn
from lionagi.protocols.messages import Instruction, System
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.operations.types import TurnScope
    from lionagi.session.branch import Branch

__all__ = ["interpret"]

_SYSTEM = (
    "You rewrite a user's request into a clear, specific and self-contained prompt for a "
    "language model. Keep the user's intent and every constraint; add structure, not facts. "
    "Answer with the rewritten prompt only."
)


async def interpret(
    branch: Branch,
    text: str,
    *,
    domain: str | None = None,
    style: str | None = None,
    interpret_model: iModel | None = None,
    **options: Any,
) -> str:
    """Return ``text`` rewritten as a better prompt, optionally for a ``domain`` and ``style``."""
    if not isinstance(text, str) or not text.strip():
        raise OperationError(f"interpret needs non-empty text, got {text!r}")
    for label, value in (("domain", domain), ("style", style)):
        if value is not None and not isinstance(value, str):
            raise OperationError(f"{label} must be text or None, got {type(value).__name__}")
    check_models(interpret_model=interpret_model)
    check_options("interpret", options)
    guidance = "; ".join(
        part
        for part in (
            f"domain: {domain}" if domain else "",
            f"style: {style}" if style else "",
        )
        if part
    )

    async def body(scope: TurnScope) -> str:
        await control_point(scope)
        model = model_for(scope, branch, interpret_model)
        ask = Instruction(instruction=text, guidance=guidance or None)
        check_usage_limits(branch, scope)
        response = await model.invoke(
            [System(content=_SYSTEM), ask], on_retry=retry_hook(branch, scope), **options
        )
        scope.context.record_usage(response.usage, response.attempts)
        return response.text.strip()

    return await run_in_turn(branch, model=interpret_model, invoke=body, operation="interpret")
