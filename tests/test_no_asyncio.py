"""The package is backend-neutral: no module under lionagi/ imports asyncio or trio directly
(DESIGN §3.1), except the one compat module that starts detached tasks."""

from __future__ import annotations

import ast
from pathlib import Path

import lionagi

PACKAGE = Path(lionagi.__file__).parent
ALLOWED = {"_compat.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_imports_asyncio_or_trio() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ALLOWED and _imports(path) & {"asyncio", "trio"}
    ]
    assert offenders == []


def test_the_scan_sees_the_whole_package() -> None:
    scanned = list(PACKAGE.rglob("*.py"))
    assert len(scanned) > 20
    assert {"asyncio", "trio"} <= _imports(PACKAGE / "_compat.py")
