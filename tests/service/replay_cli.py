"""Replays a recorded agentic-CLI transcript: prints the JSON lines of ``REPLAY_FILE``."""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    with open(os.environ["REPLAY_FILE"], encoding="utf-8") as file:
        lines = json.load(file)["reply"]["lines"]
    for line in lines:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
