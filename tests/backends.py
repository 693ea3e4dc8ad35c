"""The event loops the backend-parametrized tests run on.

``LIONAGI_TEST_BACKENDS=asyncio`` (or ``trio``) narrows the matrix; nox's per-backend sessions
use it.
"""

from __future__ import annotations

import os

__all__ = ["BACKENDS"]

BACKENDS = [
    name.strip()
    for name in os.environ.get("LIONAGI_TEST_BACKENDS", "asyncio,trio").split(",")
    if name.strip()
]
