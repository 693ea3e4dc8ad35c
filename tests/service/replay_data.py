"""Reading the recorded answers in ``replay/`` and serving them from the scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.service.http_server import Reply, Step, sse

__all__ = ["REPLAY", "load", "reply_of"]

REPLAY = Path(__file__).with_name("replay")


def load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return case


def reply_of(reply: dict[str, Any]) -> Reply:
    """The recorded answer as the scripted server sends it."""
    status = reply.get("status", 200)
    headers = reply.get("headers", {})
    if "events" not in reply:
        return Reply(status=status, json=reply["json"], headers=headers)
    events: list[str | Step] = []
    for item in reply["events"]:
        if isinstance(item, str) and item.startswith(":"):
            events.append(item)  # a comment line, sent as recorded
        elif isinstance(item, dict) and set(item) == {"event", "data"}:
            events.append(sse(item["data"], event=item["event"]))
        else:
            events.append(sse(item))
    return Reply(status=status, events=events, headers=headers)
