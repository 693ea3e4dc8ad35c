"""Usage limits: caps on what one turn (one ``ReAct`` or ``run`` loop included) may spend.

A :class:`UsageLimits` is checked before each model call of a turn against what the turn's
calls have used so far; a call that would go past a limit is not sent, and
:class:`~lionagi.errors.UsageLimitExceeded` names the limit and the figures. The turn then ends
with one ``RunFailed``. Requests count every attempt sent (retries included); tokens are the
providers' reported usage.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lionagi.errors import UsageLimitExceeded
from lionagi.protocols.messages import Usage

__all__ = ["UsageLimits"]


class UsageLimits(BaseModel):
    """Limits per turn; ``None`` is no limit (pydantic-ai's names).

    ``request_limit`` caps the requests sent: a call is refused once that many were made.
    The token limits are checked against the tokens used so far: a call is refused once a
    total is already past its limit (a single reply can overshoot; the next call is stopped).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built when used

    request_limit: int | None = Field(default=None, ge=1)
    input_tokens_limit: int | None = Field(default=None, ge=0)
    output_tokens_limit: int | None = Field(default=None, ge=0)
    total_tokens_limit: int | None = Field(default=None, ge=0)

    def check_before_request(self, usage: Usage, requests: int) -> None:
        """Raise :class:`UsageLimitExceeded` if one more request would break a limit."""
        if self.request_limit is not None and requests >= self.request_limit:
            raise UsageLimitExceeded("request_limit", self.request_limit, requests + 1)
        for name, used in (
            ("input_tokens_limit", usage.input_tokens),
            ("output_tokens_limit", usage.output_tokens),
            ("total_tokens_limit", usage.total_tokens),
        ):
            limit = getattr(self, name)
            if limit is not None and used > limit:
                raise UsageLimitExceeded(name, limit, used)
