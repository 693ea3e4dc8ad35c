"""Opt-in tests against a real OpenAI-compatible server on 127.0.0.1 (``nox -s integration``).

They run only when ``LIONAGI_INTEGRATION_BASE_URL`` names a running server (the nox session
starts one); otherwise every test here is skipped with the reason.
"""

from __future__ import annotations

import os

import pytest

BASE_URL = os.environ.get("LIONAGI_INTEGRATION_BASE_URL", "")
MODEL = os.environ.get("LIONAGI_INTEGRATION_MODEL", "local")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if BASE_URL:
        return
    skip = pytest.mark.skip(
        reason="no integration server: run `nox -s integration`, or set "
        "LIONAGI_INTEGRATION_BASE_URL to a running OpenAI-compatible server"
    )
    for item in items:
        item.add_marker(skip)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend
