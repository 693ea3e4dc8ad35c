"""Branch serialization: :meth:`Branch.to_dict` and the validated :meth:`Branch.from_dict`.

The dict holds the history, the model configurations (without secrets: API keys come back from
the environment) and the tool names; tool functions are code and are passed again on restore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lionagi._declared import unexpected_keywords
from lionagi.errors import ConfigurationError
from lionagi.protocols.messages import MessageUnion
from lionagi.protocols.tools import Tool
from lionagi.service.imodel import iModel

if TYPE_CHECKING:
    from lionagi.session.branch import Branch

__all__ = ["BranchData", "RestoreOptions", "branch_from_dict", "branch_to_dict"]

B = TypeVar("B", bound="Branch")


class BranchData(BaseModel):
    """The shape of :meth:`Branch.to_dict` output, used to validate ``from_dict`` input."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first to/from_dict

    id: UUID
    name: str | None = None
    user: str | None = None
    messages: list[MessageUnion] = Field(default_factory=list)
    chat_model: dict[str, Any] | None = None
    parse_model: dict[str, Any] | None = None
    tools: list[str] = Field(default_factory=list)


class RestoreOptions(TypedDict, total=False):
    """What :meth:`Branch.from_dict` (and ``ConversationStore.load``, which passes them on)
    takes besides the data: what the dict cannot hold."""

    #: the tool functions to attach again; every tool name the data lists must be among them
    #: (default: none, the Branch starts without tools)
    tools: Tool | Callable[..., Any] | Iterable[Tool | Callable[..., Any]] | None
    #: the chat model to use instead of the stored one, which is then not rebuilt (the offline
    #: models of :mod:`lionagi.testing` keep code, which is not stored)
    chat_model: iModel | None
    #: likewise for the parse model
    parse_model: iModel | None


_RESTORE_OPTIONS = RestoreOptions.__optional_keys__


def branch_to_dict(branch: Branch) -> dict[str, Any]:
    """What :meth:`Branch.to_dict` returns."""
    chat, parse = branch._chat_model, branch._parse_model  # parse: only when set apart
    return {
        "id": str(branch.id),
        "name": branch.name,
        "user": branch.user,
        "messages": [message.model_dump(mode="json") for message in branch._messages],
        "chat_model": None if chat is None else chat.to_dict(),
        "parse_model": None if parse is None else parse.to_dict(),
        "tools": list(branch.tools.names),
    }


def branch_from_dict(cls: type[B], data: Mapping[str, Any], restoring: RestoreOptions) -> B:
    """What :meth:`Branch.from_dict` does, building an instance of ``cls``."""
    if not _RESTORE_OPTIONS.issuperset(restoring):
        raise unexpected_keywords("Branch.from_dict", restoring, _RESTORE_OPTIONS)
    state = _validate(data)
    chat, parse = restoring.get("chat_model"), restoring.get("parse_model")
    tools = restoring.get("tools")
    branch = cls(
        chat_model=_model("chat_model", state.chat_model) if chat is None else chat,
        parse_model=_model("parse_model", state.parse_model) if parse is None else parse,
        messages=state.messages,
        name=state.name,
        user=state.user,
        id=state.id,
    )
    if tools is not None:
        branch.register_tools(tools)
        missing = [name for name in state.tools if name not in branch.tools]
        if missing:
            raise ConfigurationError(
                f"Branch.from_dict: tools {', '.join(map(repr, missing))} are listed in "
                "the data but were not supplied in tools=...; pass them, or pass "
                "tools=None to restore the branch without tools"
            )
    return branch


def _validate(data: Mapping[str, Any]) -> BranchData:
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"Branch.from_dict expects a mapping, got {type(data).__name__}")
    try:
        return BranchData.model_validate(dict(data))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "(data)"
        detail = error["msg"]
        if error["type"] == "extra_forbidden":
            detail = f"unknown key; expected keys: {', '.join(BranchData.model_fields)}"
        raise ConfigurationError(f"Branch.from_dict: bad value at {where!r}: {detail}") from exc


def _model(key: str, config: dict[str, Any] | None) -> iModel | None:
    try:
        return None if config is None else iModel.from_dict(config)
    except (ConfigurationError, TypeError, ValueError) as exc:
        raise ConfigurationError(f"Branch.from_dict: bad value at {key!r}: {exc}") from exc
