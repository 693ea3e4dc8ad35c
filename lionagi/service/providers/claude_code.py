"""Agentic CLI provider: runs Claude Code (``claude -p``) as a subprocess and reads its events.

The CLI runs its own tool loop; we only send the prompt and translate its
``--output-format stream-json`` lines (one JSON object per line) into stream chunks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeAlias

from lionagi.protocols.messages import System
from lionagi.service.providers._cli import CLIProvider, CLIRun, str_or
from lionagi.service.providers._cli_settings import ClaudeCodeSettings
from lionagi.service.providers._usage import anthropic_usage
from lionagi.service.types import (
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
)

__all__ = ["ClaudeCodeProvider"]


class ClaudeCodeProvider(CLIProvider):
    """Claude Code's non-interactive mode as a model: one CLI run per request.

    The prompt is the text of the last :class:`Instruction`; ``request.session_id`` resumes a
    CLI session (``--resume``), which is how a conversation continues. Without a session the
    CLI sees only that prompt, not earlier turns. A :class:`System` message is passed as
    ``--append-system-prompt`` (keeping the CLI's own agent prompt) unless resuming; the
    ``system_prompt`` setting replaces the CLI's prompt (``--system-prompt``) on every run.
    An ``api_key``, when given, reaches the child as ``ANTHROPIC_API_KEY``.

    Settings: ``executable`` (name or argument list, default ``"claude"``, looked up on
    ``PATH`` when a call starts), ``cwd``, ``permission_mode``, ``allowed_tools``,
    ``disallowed_tools``, ``system_prompt``, ``max_turns``, ``extra_args`` (placed before the
    prompt) and ``env`` (merged over ``os.environ``; left out of :meth:`config` since it may
    hold secrets). Request options such as ``temperature`` do not apply and are ignored.
    """

    name = "claude_code"
    api_key_env = None
    default_executable = "claude"
    child_key_env = "ANTHROPIC_API_KEY"
    settings_model = ClaudeCodeSettings
    permission_mode: str | None
    allowed_tools: tuple[str, ...]
    disallowed_tools: tuple[str, ...]
    system_prompt: str | None
    max_turns: int | None

    # -- building the command ------------------------------------------------------------
    def command(self, request: ModelRequest) -> list[str]:
        """The argument list one run of ``request`` uses (the prompt is last, after ``--``)."""
        prompt = self.prompt(request)
        argv = [*self._resolve(), "-p", "--output-format", "stream-json", "--verbose"]
        if request.model and request.model != "default":
            argv += ["--model", request.model]
        argv += self._session_args(request)
        argv += self._setting_args()
        argv += [*self.extra_args, "--", prompt]
        return argv

    def _session_args(self, request: ModelRequest) -> list[str]:
        """``--resume`` a session, or on a first turn the system text appended."""
        if request.session_id:
            return ["--resume", request.session_id]
        system = "\n\n".join(m.content for m in request.messages if isinstance(m, System))
        return ["--append-system-prompt", system] if system else []

    def _setting_args(self) -> list[str]:
        lists = (
            ("--allowedTools", self.allowed_tools),
            ("--disallowedTools", self.disallowed_tools),
        )
        single = (
            ("--system-prompt", self.system_prompt),
            ("--permission-mode", self.permission_mode),
        )
        argv = [arg for flag, value in single if value is not None for arg in (flag, value)]
        argv += [arg for flag, names in lists if names for arg in (flag, ",".join(names))]
        if self.max_turns is not None:
            argv += ["--max-turns", str(self.max_turns)]
        return argv

    # -- reading events ------------------------------------------------------------------
    def _translate(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        read = _EVENTS.get(event.get("type"))
        return iter(()) if read is None else read(self, event, run)

    def _on_system(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        if event.get("subtype") == "init":
            run.session_id = str_or(event.get("session_id"), run.session_id)
            run.model = str_or(event.get("model"), run.model)
        return iter(())

    def _on_assistant(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        for block in _content(event):
            if block.get("type") == "text" and block.get("text"):
                yield TextDelta(text=str(block["text"]), complete=True)
            elif block.get("type") == "tool_use":
                yield ToolCallDelta(
                    index=run.tool_index,
                    id=str_or(block.get("id"), None),
                    name=str_or(block.get("name"), None),
                    arguments=json.dumps(block.get("input") or {}, ensure_ascii=False),
                )
                run.tool_index += 1

    def _on_user(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        for block in _content(event):
            if block.get("type") == "tool_result":
                yield ToolResultEvent(
                    call_id=str(block.get("tool_use_id", "")),
                    output=_tool_output(block.get("content")),
                    is_error=bool(block.get("is_error", False)),
                )

    def _on_result(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        run.session_id = str_or(event.get("session_id"), run.session_id)
        run.result = event
        run.done = True
        return iter(())

    def _finish(self, run: CLIRun, returncode: int, stderr: IO[bytes]) -> ModelResponse:
        result = run.result
        if result is not None and (result.get("is_error") or result.get("subtype") != "success"):
            kind = str_or(result.get("subtype"), None) or "error"
            kind = "error" if kind == "success" else kind
            detail = result.get("result") or "no result text"
            raise self._server(
                f"run failed ({kind}): {detail}",
                returncode,
                stderr,
                run.session_id,
            )
        if returncode != 0:
            raise self._server(f"exited with code {returncode}", returncode, stderr, None)
        if result is None:
            raise self._protocol("the CLI exited without a result event" + self._tail(stderr))
        return self._response(result, run)

    def _response(self, result: dict[str, Any], run: CLIRun) -> ModelResponse:
        # Claude Code reports Anthropic's counts: uncached input apart from cache reads and
        # writes. The shared convention counts the whole prompt in input_tokens.
        usage = anthropic_usage(result.get("usage"))
        cost = result.get("total_cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            usage = usage.model_copy(update={"cost_usd": float(cost)})
        return ModelResponse(
            text=str(result.get("result") or ""),
            usage=usage,
            model=run.model or self.model,
            provider=self.name,
            finish_reason=str_or(result.get("subtype"), None),
            session_id=run.session_id,
            raw=result,
        )


_EventReader: TypeAlias = Callable[
    [ClaudeCodeProvider, dict[str, Any], CLIRun], Iterator[StreamChunk]
]
#: how each stream-json event type is read
_EVENTS: dict[Any, _EventReader] = {
    "system": ClaudeCodeProvider._on_system,
    "assistant": ClaudeCodeProvider._on_assistant,
    "user": ClaudeCodeProvider._on_user,
    "result": ClaudeCodeProvider._on_result,
}


def _content(event: dict[str, Any]) -> list[dict[str, Any]]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _tool_output(content: Any) -> Any:
    """A tool result's text; a list holding anything other than text blocks is kept as is."""
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    ):
        return "\n".join(str(b.get("text", "")) for b in content)
    return content
