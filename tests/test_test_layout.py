"""The test suite's own shape: a test module imports shared code from helper modules
(``tests/helpers.py``, ``tests/payloads.py``, ``tests/streams.py`` and the like), never from
another test module or a ``conftest.py``, so moving or deleting one test file breaks no other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = ("tests", "tests_trio")


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _is_test_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] in SUITES and (parts[-1].startswith("test_") or parts[-1] == "conftest")


def test_no_test_module_imports_another_test_module_or_a_conftest() -> None:
    files = [p for suite in SUITES for p in sorted((ROOT / suite).rglob("*.py"))]
    assert len(files) > 50  # the walk found the suites
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in _imported_modules(path)
        if _is_test_module(name)
    ]
    assert offenders == []
