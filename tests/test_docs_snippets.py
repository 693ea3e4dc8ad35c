"""Every Python block in docs/ runs, or is an included example, or says why it cannot.

- A block whose lines are ``--8<-- "examples/<name>.py"`` includes an example; it must name
  an example that tests/test_examples.py runs.
- A block preceded by ``<!-- no-test: <reason> -->`` is illustration only (real-provider
  snippets that need a key or a server); the reason is required.
- Every other block is executed as a script. Its ``anyio.run(main)`` runs on each backend of
  the test matrix; a block that only names its backend (``backend="trio"``, ``trio.run``) runs
  once, as written.

References in the docs to tests (``tests/x.py::test_name``) and to code
(``lionagi.module.name``) must exist, so the ADR status page cannot drift from the code.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.backends import BACKENDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,})\s*(?P<lang>[\w+-]*)")
_NO_TEST = re.compile(r"^\s*<!--\s*no-test:\s*(?P<reason>\S.*?)\s*-->\s*$")
_INCLUDE = re.compile(r"""^\s*--8<--\s+["']?(?P<path>[^"'\s]+)["']?\s*$""")
_TEST_REF = re.compile(r"(tests(?:_trio)?/[\w/]+\.py)::(\w+)")
_CODE_REF = re.compile(r"`(lionagi(?:\.\w+)+)`")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    no_test: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


#: pages written by tools (``nox -s reliability``), not by hand: not checked here
GENERATED = {DOCS / "reliability.md"}


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts and p not in GENERATED)


def _blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opened = _FENCE_OPEN.match(lines[index])
        if not opened:
            index += 1
            continue
        indent, ticks, lang = opened["indent"], opened["ticks"], opened["lang"]
        end = index + 1
        while end < len(lines) and lines[end].strip() != ticks:
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line
            for line in lines[index + 1 : end]
        ]
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = _NO_TEST.match(previous)
        found.append(
            Block(
                page=str(page.relative_to(ROOT)),
                line=index + 1,
                lang=lang,
                code="\n".join(body) + "\n",
                no_test=marker["reason"] if marker else None,
            )
        )
        index = end + 1
    return found


ALL_BLOCKS = [block for page in _pages() for block in _blocks(page)]
PYTHON = [b for b in ALL_BLOCKS if b.lang in ("python", "py")]
INCLUDES = [b for b in PYTHON if _INCLUDE.match(b.code.strip().splitlines()[0])]
RUNNABLE = [b for b in PYTHON if b not in INCLUDES and b.no_test is None]


def _backends(block: Block) -> list[str]:
    """The matrix for a block that calls ``anyio.run(main)``; the backend a block names
    itself (``anyio.run(main, backend="trio")``, ``trio.run``) otherwise."""
    code = re.sub(r"#.*", "", block.code)
    calls = re.findall(r"\banyio\.run\(([^)]*)\)", code)
    if any("backend" not in args for args in calls) or not (calls or "trio.run(" in code):
        return BACKENDS
    named = set(re.findall(r"""backend\s*=\s*["'](\w+)["']""", code))
    if "trio.run(" in code:
        named.add("trio")
    return sorted(named)


def test_there_are_blocks_to_check() -> None:
    assert len(RUNNABLE) >= 20
    assert INCLUDES


def test_no_test_blocks_are_rare_and_explained() -> None:
    skipped = [b for b in PYTHON if b.no_test is not None]
    assert len(skipped) <= len(RUNNABLE) // 3, [b.id for b in skipped]
    for page in _pages():
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if "no-test" in line and line.strip().startswith("<!--"):
                assert _NO_TEST.match(line), f"{page}:{number}: write <!-- no-test: <reason> -->"


@pytest.mark.parametrize("block", INCLUDES, ids=lambda b: b.id)
def test_included_code_is_a_tested_example(block: Block) -> None:
    for line in block.code.strip().splitlines():
        included = _INCLUDE.match(line)
        assert included, f"{block.id}: mix no code with --8<-- includes"
        path = Path(included["path"])
        assert path.parent == Path("examples"), f"{block.id}: include only examples/*.py"
        assert (ROOT / path).is_file()  # tests/test_examples.py runs every examples/*.py


@pytest.mark.parametrize(
    ("block", "backend"),
    [
        pytest.param(b, backend, id=f"{b.id}-{backend}")
        for b in RUNNABLE
        for backend in _backends(b)
    ],
)
def test_block_runs(block: Block, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real_run = anyio.run
    calls: list[str] = []

    def run(func: Callable[..., Any], *args: Any, backend: str = backend, **kwargs: Any) -> Any:
        calls.append(backend)
        return real_run(func, *args, backend=backend, **kwargs)

    monkeypatch.setattr(anyio, "run", run)
    code = compile(block.code, block.id, "exec")
    exec(code, {"__name__": "__main__"})
    if re.search(r"^async def main\(", block.code, re.MULTILINE) and "trio.run(" not in block.code:
        assert calls, f"{block.id} defines main() but never runs it"


def test_doc_references_to_tests_exist() -> None:
    refs = {(path, name) for page in _pages() for path, name in _TEST_REF.findall(page.read_text())}
    assert refs
    for path, name in sorted(refs):
        source = ROOT / path
        assert source.is_file(), f"docs name {path}, which does not exist"
        pattern = rf"^(async )?def {name}\("
        assert re.search(pattern, source.read_text(), re.MULTILINE), f"no {name} in {path}"


def test_doc_references_to_code_exist() -> None:
    refs = {ref for page in _pages() for ref in _CODE_REF.findall(page.read_text())}
    assert refs
    for ref in sorted(refs):
        parts = ref.split(".")
        for split in range(len(parts), 0, -1):
            try:
                target: Any = importlib.import_module(".".join(parts[:split]))
            except ModuleNotFoundError:
                continue
            for attribute in parts[split:]:
                assert hasattr(target, attribute), f"docs name {ref}, which does not exist"
                target = getattr(target, attribute)
            break
        else:
            raise AssertionError(f"docs name {ref}, which does not exist")
