"""MkDocs hook: feed the Quality pages from result files that may or may not exist yet.

``docs/reliability.md`` is written by ``nox -s reliability`` and ``benchmarks/results/*.md`` by
``nox -s bench``. Neither is required for a build: when the report exists it is added to the
navigation and linked from the Reliability page, and the benchmark tables are embedded in the
Performance page; otherwise the pages say how to produce them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]
_REPORT = "reliability.md"
_RESULTS = _ROOT / "benchmarks" / "results"
_RELIABILITY_MARK = "<!-- results:reliability -->"
_BENCH_MARK = "<!-- results:benchmarks -->"
_HEADING = re.compile(r"^(#{1,4})(\s)", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~)", re.MULTILINE)


def _report_exists(config: Any) -> bool:
    return (Path(config["docs_dir"]) / _REPORT).is_file()


def on_config(config: Any, **kwargs: Any) -> Any:
    """Add the generated reliability report to the Quality section when it exists."""
    if not _report_exists(config) or not config["nav"]:
        return config
    for section in config["nav"]:
        if isinstance(section, dict) and "Quality" in section:
            section["Quality"].insert(1, {"Reliability report": _REPORT})
    return config


def _demote(text: str) -> str:
    """Headings two levels down, outside fenced code, so an embedded file nests under the
    ``## `benchmarks/results/<file>` `` heading this hook gives it."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        out.append(line if fenced else _HEADING.sub(r"##\1\2", line))
    return "\n".join(out)


def _benchmarks() -> str:
    files = sorted(_RESULTS.glob("*.md")) if _RESULTS.is_dir() else []
    if not files:
        return (
            '!!! note "No benchmark results recorded yet"\n'
            "    Run `nox -s bench` (and `nox -s bench_peers` for the peer comparison); the\n"
            "    results land in `benchmarks/results/` and appear on this page at the next build.\n"
        )
    return "\n".join(
        f"## `benchmarks/results/{path.name}`\n\n{_demote(path.read_text())}\n" for path in files
    )


def _reliability(config: Any) -> str:
    if _report_exists(config):
        return "The latest full-size run: **[the reliability report](../reliability.md)**.\n"
    return (
        '!!! note "No full-size report generated yet"\n'
        "    Run `nox -s reliability`; it writes `docs/reliability.md`, which is linked here and\n"
        "    added to the navigation at the next build.\n"
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    if _RELIABILITY_MARK in markdown:
        markdown = markdown.replace(_RELIABILITY_MARK, _reliability(config))
    if _BENCH_MARK in markdown:
        markdown = markdown.replace(_BENCH_MARK, _benchmarks())
    return markdown
