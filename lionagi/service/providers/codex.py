"""Agentic CLI provider: runs OpenAI's Codex CLI (``codex exec --json``) as a subprocess.

Codex runs its own agent loop (shell commands, file edits, MCP tools) and prints one JSON event
per line: ``thread.started``, ``turn.started``, ``item.started``/``item.completed`` for agent
messages, reasoning, commands and tool calls, then ``turn.completed`` with usage or
``turn.failed``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from lionagi.protocols.messages import Usage
from lionagi.service.providers._cli import CLIProvider, CLIRun, int_or_zero, str_or
from lionagi.service.providers._cli_settings import CodexSettings
from lionagi.service.types import (
    ModelRequest,
    ModelResponse,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    ToolResultEvent,
)

__all__ = ["CodexProvider"]

# item types that are Codex's own tool calls, and the name a consumer sees for each
_TOOL_ITEMS = {
    "command_execution": "shell",
    "file_change": "file_change",
    "mcp_tool_call": "mcp_tool",
    "web_search": "web_search",
}


class CodexProvider(CLIProvider):
    """Codex's non-interactive mode as a model: one ``codex exec`` run per request.

    The prompt is the last :class:`Instruction`'s text; on a first turn the :class:`System`
    text goes before it (Codex has no system-prompt flag). ``request.session_id`` resumes a
    thread (``codex exec resume <id>``); a reply's ``session_id`` is the thread id. An
    ``api_key`` reaches the child as ``CODEX_API_KEY``.

    Settings: ``executable`` (default ``"codex"``), ``cwd``, ``sandbox`` (``"read-only"``,
    ``"workspace-write"`` or ``"danger-full-access"``), ``skip_git_repo_check``, ``extra_args``
    (placed before the prompt) and ``env``.
    """

    name = "codex"
    api_key_env = None
    default_executable = "codex"
    child_key_env = "CODEX_API_KEY"
    settings_model = CodexSettings
    sandbox: str | None
    skip_git_repo_check: bool

    def command(self, request: ModelRequest) -> list[str]:
        """The argument list of one run (the prompt is last, after ``--``)."""
        prompt = self.prompt_with_system(request)
        argv = [*self._resolve(), "exec", "--json"]
        if request.model and request.model != "default":
            argv += ["--model", request.model]
        if self.sandbox is not None:
            argv += ["--sandbox", self.sandbox]
        if self.skip_git_repo_check:
            argv.append("--skip-git-repo-check")
        argv += self.extra_args
        if request.session_id:
            argv += ["resume", request.session_id]
        argv += ["--", prompt]
        return argv

    def _translate(self, event: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        kind = event.get("type")
        item = event.get("item")
        item = item if isinstance(item, dict) else {}
        if kind == "thread.started":
            run.session_id = str_or(event.get("thread_id"), run.session_id)
        elif kind == "item.started" and item.get("type") in _TOOL_ITEMS:
            yield self._tool_call(item, run)
        elif kind == "item.completed":
            yield from self._item_completed(item, run)
        elif kind in ("turn.completed", "turn.failed", "error"):
            run.result = event
            run.done = True

    def _item_completed(self, item: dict[str, Any], run: CLIRun) -> Iterator[StreamChunk]:
        item_type = item.get("type")
        if item_type == "agent_message" and isinstance(item.get("text"), str):
            run.texts.append(item["text"])
            yield TextDelta(text=item["text"], complete=True)
        elif item_type in _TOOL_ITEMS:
            if str(item.get("id")) not in run.extra:  # completed without a start event
                yield self._tool_call(item, run)
            yield _tool_result(item)

    def _tool_call(self, item: dict[str, Any], run: CLIRun) -> ToolCallDelta:
        item_id = str(item.get("id", f"item_{run.tool_index}"))
        run.extra[item_id] = True
        arguments = {
            k: v
            for k, v in item.items()
            if k in ("command", "changes", "server", "tool", "arguments", "query")
        }
        delta = ToolCallDelta(
            index=run.tool_index,
            id=item_id,
            name=_TOOL_ITEMS[str(item.get("type"))],
            arguments=json.dumps(arguments, ensure_ascii=False),
        )
        run.tool_index += 1
        return delta

    def _finish(self, run: CLIRun, returncode: int, stderr: IO[bytes]) -> ModelResponse:
        result = run.result
        if result is not None and result.get("type") != "turn.completed":
            error = result.get("error")
            message = error.get("message") if isinstance(error, dict) else result.get("message")
            raise self._server(
                f"run failed: {message or 'no error message'}", returncode, stderr, run.session_id
            )
        result = self._ended(run, returncode, stderr, "turn.completed")
        usage = result.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return ModelResponse(
            text=run.texts[-1] if run.texts else "",
            usage=Usage(
                input_tokens=int_or_zero(usage.get("input_tokens")),
                output_tokens=int_or_zero(usage.get("output_tokens")),
                cached_input_tokens=int_or_zero(usage.get("cached_input_tokens")),
            ),
            model=self.model,
            provider=self.name,
            finish_reason="completed",
            session_id=run.session_id,
            raw=result,
        )


def _tool_result(item: dict[str, Any]) -> ToolResultEvent:
    status = item.get("status")
    exit_code = item.get("exit_code")
    failed = status == "failed" or (isinstance(exit_code, int) and exit_code != 0)
    if item.get("type") == "command_execution":
        output: Any = item.get("aggregated_output", "")
    elif item.get("type") == "mcp_tool_call":
        output = item.get("error") if failed and item.get("error") else item.get("result")
    else:
        output = {k: v for k, v in item.items() if k not in ("id", "type")}
    return ToolResultEvent(call_id=str(item.get("id", "")), output=output, is_error=failed)
