"""A module imported when one of its names is first read (:class:`DeferredModule`).

``import lionagi`` loads only what a first chat turn needs, so the Branch's methods for the
other operations import their modules when first called. An import statement inside the
method would do that at a price per call: on CPython 3.11 ``from package.module import name``
of a module already loaded costs about 8k instructions (the import system looks the module up
and checks for a ``__path__`` it does not have, building and dropping an AttributeError), as
much as a short operation's own setup. A :class:`DeferredModule` pays the import once; each
later read is an attribute lookup.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DeferredModule"]


class DeferredModule:
    """Stands for the module ``name``, not imported until one of its attributes is read.

    Reading an attribute imports the module (once) and keeps the value on this object, so the
    next read of that name is a plain instance attribute lookup. Declare it as the module for
    type checkers::

        if TYPE_CHECKING:
            from lionagi.operations import run as _run
        else:
            _run = DeferredModule("lionagi.operations.run")
    """

    def __init__(self, name: str) -> None:
        self._deferred_name = name

    def __getattr__(self, attr: str) -> Any:
        # only called for a name not kept yet
        if attr == "_deferred_name":  # an instance made without __init__ (a copy)
            raise AttributeError(attr)
        value = getattr(importlib.import_module(self._deferred_name), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<DeferredModule {self._deferred_name!r}>"
