"""MkDocs hook: serve Mermaid from the built site, so diagrams render offline.

Material for MkDocs loads Mermaid from a CDN unless a global ``mermaid`` already exists. This
hook adds ``assets/javascripts/mermaid.min.js`` (listed in ``extra_javascript``) to the build:
the pinned release of the ``mermaid`` npm package, fetched once with ``npm pack`` into
``.cache/mermaid/`` and checked against its SHA-256. Pages then load it from the site itself.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

MERMAID_VERSION = "11.17.2"  # the major version Material for MkDocs 9.x drives
MERMAID_SHA256 = "581ed7d74bd9048d0e3a91363927d72ef22942d7722546b27f7cc29e35390eb8"
SCRIPT = "assets/javascripts/mermaid.min.js"

_ROOT = Path(__file__).resolve().parents[2]
_CACHE = _ROOT / ".cache" / "mermaid" / f"mermaid-{MERMAID_VERSION}.min.js"


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    """Add the bundled Mermaid script to the site."""
    files.append(File.generated(config, SCRIPT, abs_src_path=str(mermaid_script())))
    return files


def mermaid_script() -> Path:
    """The pinned ``mermaid.min.js``, fetched into the cache on first use."""
    if not _CACHE.is_file() or _digest(_CACHE.read_bytes()) != MERMAID_SHA256:
        _CACHE.parent.mkdir(parents=True, exist_ok=True)
        data = _fetch()
        if _digest(data) != MERMAID_SHA256:
            raise PluginError(
                f"mermaid {MERMAID_VERSION}: dist/mermaid.min.js has SHA-256 {_digest(data)}, "
                f"expected {MERMAID_SHA256}; update MERMAID_SHA256 in docs/_hooks/mermaid.py "
                "only after checking the release"
            )
        _CACHE.write_bytes(data)
    return _CACHE


def _fetch() -> bytes:
    npm = shutil.which("npm")
    if npm is None:
        raise PluginError(
            f"the docs bundle mermaid {MERMAID_VERSION} from the npm package: install npm, or "
            f"put that release's dist/mermaid.min.js at {_CACHE.relative_to(_ROOT)}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run(
                [npm, "pack", f"mermaid@{MERMAID_VERSION}", "--silent", "--pack-destination", tmp],
                check=True,
                capture_output=True,
                timeout=300,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise PluginError(f"npm pack mermaid@{MERMAID_VERSION} failed: {exc}") from exc
        [tarball] = Path(tmp).glob("mermaid-*.tgz")
        with tarfile.open(tarball) as archive:
            member = archive.extractfile("package/dist/mermaid.min.js")
            if member is None:
                raise PluginError(f"mermaid {MERMAID_VERSION} has no dist/mermaid.min.js")
            return member.read()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
