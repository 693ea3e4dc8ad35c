"""Agentic CLI provider: runs Google's Gemini CLI (``gemini --output-format stream-json``).

The CLI runs its own tool loop and prints one JSON event per line: ``init`` (session and
model), ``message`` (user and assistant text, assistant text in deltas), ``tool_use``,
``tool_result``, ``error`` and a closing ``result`` with statistics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from lionagi.protocols.messages import Usage
from lionagi.service.providers._cli import CLIProvider, CLIRun, int_or_zero, str_or
from lionagi.service.providers._cli_settings import GeminiCLISettings
from lionagi.service.types import (
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
)

__all__ = ["GeminiCLIProvider"]


class GeminiCLIProvider(CLIProvider):
    """Gemini CLI's headless mode as a model: one ``gemini`` run per request.

    The prompt is the last :class:`Instruction`'s text (passed as ``--prompt=<text>``); on a
    first turn the :class:`System` text goes before it. ``request.session_id`` resumes a
    session (``--resume``). An ``api_key`` reaches the child as ``GEMINI_API_KEY``.

    Settings: ``executable`` (default ``"gemini"``), ``cwd``, ``approval_mode``
    (``"default"``, ``"auto_edit"``, ``"yolo"`` or ``"plan"``), ``extra_args`` and ``env``.
    """

    name = "gemini_code"
    api_key_env = None
    default_executable = "gemini"
    child_key_env = "GEMINI_API_KEY"
    settings_model = GeminiCLISettings
    approval_mode: str | None

    def command(self, request: ModelRequest) -> list[str]:
        """The argument list of one run."""
        prompt = self.prompt_with_system(request)
        argv = [*self._resolve(), "--output-format", "stream-json"]
        if request.model and request.model != "default":
            argv += ["--model", request.model]
        if request.session_id:
            argv += ["--resume", request.session_id]
        if self.approval_mode is not None:
            argv += ["--approval-mode", self.approval_mode]
        argv += [*self.extra_args, f"--prompt={prompt}"]
        return argv

    def _translate(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        kind = event.get("type")
        if kind == "init":
            run.session_id = str_or(event.get("session_id") or event.get("sessionId"), None)
            run.model = str_or(event.get("model"), run.model)
        elif kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str) and content:
                run.texts.append(content)
                yield TextDelta(text=content, complete=not event.get("delta"))
        elif kind == "tool_use":
            yield self._tool_use(event, run)
        elif kind == "tool_result":
            yield _tool_result(event)
        elif kind == "result":
            run.result = event
            run.done = True

    def _tool_use(self, event: dict[str, Any], run: CLIRun) -> ToolCallDelta:
        run.texts.clear()  # the reply is the text after the last tool
        delta = ToolCallDelta(
            index=run.tool_index,
            id=str_or(event.get("tool_id"), None),
            name=str_or(event.get("tool_name"), None),
            arguments=json.dumps(event.get("parameters") or {}, ensure_ascii=False),
        )
        run.tool_index += 1
        return delta

    def _finish(self, run: CLIRun, returncode: int, stderr: IO[bytes]) -> ModelResponse:
        result = run.result
        if result is not None and result.get("status") not in (None, "success"):
            error = result.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            raise self._server(
                f"run failed ({result.get('status')}): {message or 'no error message'}",
                returncode,
                stderr,
                run.session_id,
            )
        result = self._ended(run, returncode, stderr, "result")
        stats = result.get("stats")
        stats = stats if isinstance(stats, dict) else {}
        return ModelResponse(
            text="".join(run.texts),
            usage=Usage(
                input_tokens=int_or_zero(stats.get("input_tokens")),
                output_tokens=int_or_zero(stats.get("output_tokens")),
                cached_input_tokens=int_or_zero(stats.get("cached")),
            ),
            model=run.model or self.model,
            provider=self.name,
            finish_reason="success",
            session_id=run.session_id,
            raw=result,
        )


def _tool_result(event: dict[str, Any]) -> ToolResultEvent:
    failed = event.get("status") == "error"
    error = event.get("error")
    output = error.get("message") if failed and isinstance(error, dict) else None
    return ToolResultEvent(
        call_id=str(event.get("tool_id", "")),
        output=output if output is not None else event.get("output"),
        is_error=failed,
    )
