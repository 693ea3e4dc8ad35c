"""Operations use only a Branch's public members.

Read from the source: every ``branch.<name>`` (or ``self.branch.<name>``) in an operation module
is a public member of :class:`~lionagi.session.branch.Branch`, never a private field. The turn
module is the one exception: it owns the Branch's turn fields (ADR-0018), and touches no other
private field.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lionagi.operations
from lionagi import Branch
from lionagi.testing import FunctionModel

_PACKAGE = Path(lionagi.operations.__file__).parent
_TURN_MODULE = "turn.py"


def _branch_attributes(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each attribute read or written on something called ``branch``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == "branch") or (
            isinstance(owner, ast.Attribute) and owner.attr == "branch"
        ):
            found.append((node.lineno, node.attr))
    return found


def _operation_modules() -> list[Path]:
    return sorted(p for p in _PACKAGE.glob("*.py") if p.name != _TURN_MODULE)


def _used_members() -> set[str]:
    return {
        name
        for module in _operation_modules()
        for _, name in _branch_attributes(module.read_text(encoding="utf-8"))
    }


@pytest.mark.parametrize("module", _operation_modules(), ids=lambda p: p.name)
def test_operation_modules_use_only_public_branch_members(module: Path) -> None:
    used = _branch_attributes(module.read_text(encoding="utf-8"))
    outside = [
        f"{module.name}:{line} branch.{name}"
        for line, name in used
        if name.startswith("_") or not hasattr(Branch, name)
    ]
    assert outside == []


#: the Branch's turn fields (ADR-0018), which only the turn module touches
_TURN_FIELDS = frozenset({"_turn_lock", "_active_turn_context", "_last_context_report"})


def test_the_turn_module_touches_only_the_turn_fields() -> None:
    used = _branch_attributes((_PACKAGE / _TURN_MODULE).read_text(encoding="utf-8"))
    private = {name for _, name in used if name.startswith("_")}
    assert private == _TURN_FIELDS


def test_the_check_sees_a_private_field() -> None:
    source = "def f(branch):\n    return branch._observer, self.branch._providers\n"
    assert _branch_attributes(source) == [(2, "_observer"), (2, "_providers")]


async def _note(branch: object, instruction: object) -> str:
    return "a note"


def test_the_members_operations_read_exist_and_reading_them_creates_nothing() -> None:
    branch = Branch(chat_model=FunctionModel(lambda messages, **options: "ok"))
    used = _used_members()
    assert {"msgs", "tools", "logs", "context_providers", "observer"} <= used
    for name in used:
        getattr(branch, name)
    assert branch.context_providers is None  # reading it creates no registry
    assert branch.observer is None
    branch.providers.register(_note)
    assert branch.context_providers is branch.providers
