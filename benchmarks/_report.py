"""Writing a run's results: one JSON file and one markdown file under ``benchmarks/results/``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, Config, environment, now


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).replace("|", "\\|")


def _table(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return lines


def _verdict(entry: dict[str, Any]) -> str:
    if entry["met"] is None:
        return "not measured"
    if entry["met"]:
        return "met"
    by = entry.get("by")
    return f"**missed** (by {by}x)" if by else "**missed**"


def markdown(document: dict[str, Any]) -> str:
    env = document["environment"]
    machine = env["machine"]
    lines = [
        "# lionagi benchmark results",
        "",
        f"Command: `{env['command']}`"
        + (" (quick: smoke sizes, not results)" if document["quick"] else ""),
        "",
        f"- Machine: {machine['platform']}, {machine['processor']}, {machine['cpu_count']} CPUs; "
        f"load average {document['load_average']['start']} at start, "
        f"{document['load_average']['end']} at end",
        f"- Python {env['python']['version']} ({env['python']['implementation']})",
        "- Packages: " + ", ".join(f"{k} {v}" for k, v in env["packages"].items() if v),
        f"- Started {env['started']}, took {document['duration_s']} s",
        "",
        "Medians throughout; ratios are taken pair by pair from runs that alternate in the same "
        "process, so they hold up on a busy machine better than the absolute times do.",
        "",
    ]
    targets = [t for s in document["scenarios"].values() for t in s.get("targets", [])]
    if targets:
        lines += ["## Targets", ""]
        lines += _table(
            ["target", "value", "limit", "verdict", "note"],
            [
                {
                    "target": t["target"],
                    "value": f"{t['value']}{t['unit'] if t['unit'] == 'x' else ''}",
                    "limit": f"{t['limit']}{t['unit'] if t['unit'] == 'x' else ''}",
                    "verdict": _verdict(t),
                    "note": t.get("note", ""),
                }
                for t in targets
            ],
        )
        lines.append("")
    for name, scenario in document["scenarios"].items():
        lines += [f"## {scenario.get('title', name)} (`{name}`)", ""]
        if "skipped" in scenario:
            lines += [f"Skipped: {scenario['skipped']}", ""]
            continue
        if scenario.get("description"):
            lines += [scenario["description"], ""]
        lines += _table(scenario["columns"], scenario["rows"])
        lines.append("")
        for key, value in scenario.items():
            if key in ("title", "description", "columns", "rows", "targets"):
                continue
            if key == "areas":
                for backend, areas in value.items():
                    lines += [f"Own time by area, {backend}:", ""]
                    lines += _table(
                        ["area", "share_pct"],
                        [{"area": a, "share_pct": v} for a, v in areas.items()],
                    )
                    lines.append("")
            elif key == "tables":  # further tables: {title: {"columns": [...], "rows": [...]}}
                for title, table in value.items():
                    lines += [f"{title}:", ""]
                    lines += _table(table["columns"], table["rows"])
                    lines.append("")
            else:
                lines += [f"- {key}: `{json.dumps(value)}`"]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_results(
    module: str,
    argv: Sequence[str],
    scenarios: dict[str, dict[str, Any]],
    config: Config,
    out: Path | None,
    elapsed_ns: int,
    *,
    stem: str | None = None,
    load_start: tuple[float, ...] | None = None,
) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` into ``out`` (default ``benchmarks/results``)."""
    directory = RESULTS if out is None else out
    directory.mkdir(parents=True, exist_ok=True)
    if stem is None:
        stem = module.rsplit(".", 1)[-1] if module != "benchmarks" else "bench"
        if config.quick:
            stem += "-quick"
    load_end = tuple(round(x, 2) for x in os.getloadavg())
    document = {
        "environment": environment(module, argv),
        "quick": config.quick,
        "duration_s": round(elapsed_ns / 1e9, 1),
        "load_average": {
            "start": list(load_start or load_end),
            "end": list(load_end),
        },
        "scenarios": scenarios,
    }
    json_path = directory / f"{stem}.json"
    md_path = directory / f"{stem}.md"
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    md_path.write_text(markdown(document))
    return json_path, md_path


def run_and_write(
    module: str,
    scenario: str,
    argv: Sequence[str],
    config: Config,
    out: Path | None,
    run: Callable[[], dict[str, Any]],
) -> int:
    """Run one scenario module's ``run()`` and write its result as ``scenario`` (what the
    ``main()`` of a stand-alone benchmark module does once its arguments are parsed); 0."""
    load_start = tuple(round(x, 2) for x in os.getloadavg())
    started = now()
    result = run()
    write_results(
        module, argv, {scenario: result}, config, out, now() - started, load_start=load_start
    )
    return 0
