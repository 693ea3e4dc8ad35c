"""Committed files name no directory of the machine they were written on."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from benchmarks._common import ROOT, portable_path

# an absolute path into a home, work or temporary directory, or into an installed environment
MACHINE_PATH = re.compile(
    r"(?<![\w:/.])/(?:home|Users|work|tmp|opt|root|var/folders)/[\w.+-]+"
    r"|(?<![\w:/.])/(?:[\w.+-]+/)+site-packages/"
)


def committed_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_committed_file_names_a_machine_path() -> None:
    offenders = []
    for path in committed_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        offenders += [
            f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
            for m in MACHINE_PATH.finditer(text)
        ]
    assert offenders == []


def test_benchmark_results_record_portable_paths() -> None:
    assert portable_path(ROOT / ".nox" / "bench" / "bin" / "python") == ".nox/bench/bin/python"
    elsewhere = Path("/", "srv", "env")  # built in pieces, so this file names no such path
    installed = elsewhere / "lib" / "python3.11" / "site-packages" / "lionagi" / "__init__.py"
    assert portable_path(installed) == "site-packages/lionagi/__init__.py"
    assert portable_path(elsewhere / "bin" / "python") == ".../env/bin/python"
