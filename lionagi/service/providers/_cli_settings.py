"""The settings of the agentic CLI providers, as pydantic models.

Each CLI provider declares one model; its fields are the provider's setting names, and a bad
value is a :class:`~lionagi.errors.ConfigurationError` naming the setting, what it must be and
the value given (never the value of ``env``, which may hold secrets).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from lionagi.errors import ConfigurationError

__all__ = ["CLISettings", "ClaudeCodeSettings", "CodexSettings", "GeminiCLISettings"]


def _one_or_list(value: Any) -> Any:
    """A program name alone stands for a one-item argument list."""
    return (value,) if isinstance(value, str) else _sequence(value)


def _sequence(value: Any) -> Any:
    """Only lists and tuples (or other sequences) of strings, never a set or a mapping."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError("not a list")  # noqa: TRY004  # pydantic reports ValueError only
    return tuple(value)


def _tool_names(value: Any) -> Any:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else _sequence(value)


def _program(parts: tuple[str, ...]) -> tuple[str, ...]:
    if not parts or not parts[0]:
        raise ValueError("no program")
    return parts


def _path(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _mapping(value: Any) -> Any:
    if not value:  # None or empty: no variables
        return {}
    if not isinstance(value, Mapping):
        raise ValueError("not a mapping")  # noqa: TRY004  # as above
    return dict(value)


Strings = Annotated[tuple[StrictStr, ...], BeforeValidator(_sequence)]
ToolNames = Annotated[tuple[StrictStr, ...], BeforeValidator(_tool_names)]


class CLISettings(BaseModel):
    """The settings every CLI provider takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: settings whose values an error message must not show
    hidden: ClassVar[frozenset[str]] = frozenset({"env"})

    executable: Annotated[
        tuple[StrictStr, ...], BeforeValidator(_one_or_list), AfterValidator(_program)
    ] = Field(description="a program name or a non-empty argument list")
    cwd: Annotated[StrictStr | None, BeforeValidator(_path)] = Field(
        None, description="a path or None"
    )
    extra_args: Strings = Field((), description="a list of strings")
    env: Annotated[dict[StrictStr, StrictStr], BeforeValidator(_mapping)] = Field(
        default_factory=dict, description="a mapping of str to str"
    )

    @classmethod
    def read(cls, settings: Mapping[str, Any]) -> Self:
        """The checked settings, or a ConfigurationError naming the first bad one."""
        try:
            return cls.model_validate(settings)
        except ValidationError as exc:
            raise cls._error(exc, settings) from None

    @classmethod
    def _error(cls, exc: ValidationError, settings: Mapping[str, Any]) -> ConfigurationError:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else ""
        field = cls.model_fields.get(name)
        expected = field.description if field is not None else None
        if name in cls.hidden:
            return ConfigurationError(f"{name} must be {expected}")
        return ConfigurationError(f"{name} must be {expected}, got {settings.get(name)!r}")


class ClaudeCodeSettings(CLISettings):
    """Claude Code's settings (see
    :class:`~lionagi.service.providers.claude_code.ClaudeCodeProvider`)."""

    permission_mode: StrictStr | None = Field(None, description="a string or None")
    allowed_tools: ToolNames = Field((), description="a tool name or a list of tool names")
    disallowed_tools: ToolNames = Field((), description="a tool name or a list of tool names")
    system_prompt: StrictStr | None = Field(None, description="a string or None")
    max_turns: Annotated[StrictInt, Field(ge=1)] | None = Field(
        None, description="a positive int or None"
    )


class CodexSettings(CLISettings):
    """Codex's settings (see :class:`~lionagi.service.providers.codex.CodexProvider`)."""

    sandbox: Literal["read-only", "workspace-write", "danger-full-access"] | None = Field(
        None, description="one of read-only, workspace-write, danger-full-access or None"
    )
    skip_git_repo_check: StrictBool = Field(False, description="a bool")


class GeminiCLISettings(CLISettings):
    """Gemini CLI's settings (see
    :class:`~lionagi.service.providers.gemini_cli.GeminiCLIProvider`)."""

    approval_mode: Literal["default", "auto_edit", "yolo", "plan"] | None = Field(
        None, description="one of default, auto_edit, yolo, plan or None"
    )
