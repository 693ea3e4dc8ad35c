"""DeferredModule: the module is imported at the first read of one of its names, once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lionagi._deferred import DeferredModule


def test_a_deferred_module_is_imported_at_the_first_read_and_keeps_what_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "deferred_probe.py").write_text(
        "loads = []\nloads.append(1)\n\ndef f():\n    return 42\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "deferred_probe", raising=False)
    probe = DeferredModule("deferred_probe")
    assert "deferred_probe" not in sys.modules  # nothing imported yet
    assert probe.f() == 42
    module = sys.modules["deferred_probe"]
    assert probe.f is module.f
    assert vars(probe)["f"] is module.f  # kept: the next read is a plain attribute lookup
    assert probe.loads == [1]  # imported once
    assert "deferred_probe" in repr(probe)


def test_a_name_the_module_lacks_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        DeferredModule("lionagi._deferred").no_such_name  # noqa: B018
