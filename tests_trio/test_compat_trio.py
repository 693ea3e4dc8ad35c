"""What lionagi._compat reads off a trio run, before and after the run has made its token."""

from __future__ import annotations

import trio

from lionagi._compat import running


def test_running_gives_the_run_token_before_and_after_the_run_made_it() -> None:
    """The first look in a new run finds no token on the runner yet (trio makes it on first
    request); every look, that one included, gives the run's one token and the task."""
    seen: list[tuple[object, object, bool]] = []

    async def main() -> tuple[object, object]:
        seen.append(running())  # before anything asked trio for its token
        seen.append(running())
        with trio.CancelScope() as scope:
            scope.cancel()
            seen.append(running())
        return trio.lowlevel.current_trio_token(), trio.lowlevel.current_task()

    token, task = trio.run(main)
    assert [(loop is token, found is task, cancelled) for loop, found, cancelled in seen] == [
        (True, True, False),
        (True, True, False),
        (True, True, True),
    ]
    assert trio.run(main)[0] is not token  # another run, another token
