"""Every reliability test runs with DEBUG logging captured, and no log record may hold the key."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.reliability.harness import SECRET


@pytest.fixture(autouse=True)
def no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield
    assert SECRET not in caplog.text, "the API key reached a log record"
