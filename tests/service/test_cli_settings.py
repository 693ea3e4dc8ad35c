"""The agentic CLI providers' settings: each bad value is a ConfigurationError naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lionagi.errors import ConfigurationError
from lionagi.service.imodel import iModel


@pytest.mark.parametrize(
    ("provider", "settings", "message"),
    [
        ("claude_code", {"max_turns": 0}, "max_turns must be a positive int or None, got 0"),
        ("claude_code", {"max_turns": True}, "max_turns must be a positive int or None, got True"),
        ("claude_code", {"permission_mode": 3}, "permission_mode must be a string or None, got 3"),
        ("claude_code", {"system_prompt": ["x"]}, "system_prompt must be a string or None"),
        ("claude_code", {"allowed_tools": {"Read"}}, "allowed_tools must be a tool name or a list"),
        ("claude_code", {"disallowed_tools": ["Bash", 1]}, "disallowed_tools must be a tool name"),
        ("claude_code", {"executable": []}, "executable must be a program name or a non-empty"),
        ("codex", {"executable": [""]}, "executable must be a program name or a non-empty"),
        ("codex", {"extra_args": "--fast"}, "extra_args must be a list of strings, got '--fast'"),
        ("codex", {"sandbox": "open"}, "sandbox must be one of read-only, workspace-write, "),
        ("codex", {"skip_git_repo_check": 1}, "skip_git_repo_check must be a bool, got 1"),
        ("gemini_code", {"approval_mode": "all"}, "approval_mode must be one of default, "),
        ("gemini_code", {"cwd": 3}, "cwd must be a path or None, got 3"),
    ],
)
def test_a_bad_setting_is_named_with_its_value(
    provider: str, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        iModel(provider, "m", **settings)
    assert str(caught.value).startswith(message)


def test_env_values_are_never_shown() -> None:
    with pytest.raises(ConfigurationError) as caught:
        iModel("claude_code", "m", env={"TOKEN": "hunter2", "N": 1})
    assert str(caught.value) == "env must be a mapping of str to str"


def test_good_settings_are_normalized(tmp_path: Path) -> None:
    model = iModel(
        "claude_code", "m", executable="claude", cwd=tmp_path, allowed_tools="Read", max_turns=2
    )
    provider: Any = model.provider
    assert provider.executable == ("claude",)
    assert provider.cwd == str(tmp_path)
    assert provider.allowed_tools == ("Read",)
    assert provider.disallowed_tools == ()
    assert provider.max_turns == 2
    assert model.to_dict()["provider_settings"]["cwd"] == str(tmp_path)  # JSON-friendly
