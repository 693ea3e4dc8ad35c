"""Griffe extension: render reST roles of the package's docstrings as Markdown code.

The docstrings use Sphinx roles (``:class:`~lionagi.x.Y```); mkdocstrings renders Markdown, where
those roles would show up literally. A role becomes inline code of its target, shortened to the
last component when the target starts with ``~`` (as Sphinx does).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring to inline code."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
