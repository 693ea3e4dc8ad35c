"""The docs site serves its own Mermaid script: diagrams render without reaching a CDN."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import material
import pytest

ROOT = Path(__file__).resolve().parents[1]


def mermaid_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_mermaid_hook", ROOT / "docs/_hooks/mermaid.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_loads_the_bundled_script() -> None:
    hook = mermaid_hook()
    config = (ROOT / "mkdocs.yml").read_text()
    assert "  - docs/_hooks/mermaid.py\n" in config
    listed = re.search(r"^extra_javascript:\n((?:  - .*\n)+)", config, re.MULTILINE)
    assert listed is not None
    assert f"  - {hook.SCRIPT}\n" in listed[1]


def test_the_bundled_release_is_the_one_the_theme_drives() -> None:
    # Material fetches this major version from a CDN unless a global ``mermaid`` exists.
    bundles = (Path(material.__file__).parent / "templates/assets/javascripts").glob("bundle.*.js")
    wanted = {m for b in bundles for m in re.findall(r"mermaid@(\d+)/", b.read_text())}
    assert wanted == {mermaid_hook().MERMAID_VERSION.split(".")[0]}


def test_a_cached_script_is_used_only_when_its_digest_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = mermaid_hook()
    cached = tmp_path / "mermaid.min.js"
    cached.write_bytes(b"not mermaid")
    monkeypatch.setattr(hook, "_CACHE", cached)
    fetched: list[bool] = []

    def fetch() -> bytes:
        fetched.append(True)
        return b"pinned"

    monkeypatch.setattr(hook, "MERMAID_SHA256", hashlib.sha256(b"pinned").hexdigest())
    monkeypatch.setattr(hook, "_fetch", fetch)
    assert hook.mermaid_script() == cached
    assert cached.read_bytes() == b"pinned"
    assert fetched == [True]
    assert hook.mermaid_script() == cached  # now cached: no second fetch
    assert fetched == [True]
