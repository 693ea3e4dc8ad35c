"""Command line: ``lionagi demo [--backend asyncio|trio]`` (or ``python -m lionagi ...``).

The demo runs offline on a scripted model by default. ``--provider``/``--model``/``--base-url``
(or ``LIONAGI_DEMO_PROVIDER``, ``LIONAGI_DEMO_MODEL``, ``LIONAGI_DEMO_BASE_URL``) point it at a
real model; the provider reads its API key from its usual environment variable.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lionagi.errors import LionError

__all__ = ["main"]

BACKENDS = ("asyncio", "trio")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lionagi",
        description="lionagi: LLM conversations as turns on anyio. "
        "`python -m lionagi` runs the same command.",
    )
    parser.add_argument(
        "--version", action="version", version=f"lionagi {importlib.metadata.version('lionagi')}"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="show turns on one Branch as a timeline (offline by default)",
        description=(
            "Several callers queue on one Branch, a tool call runs inside a turn, a streamed "
            "run hands out committed messages, and an observer cancels a stream."
        ),
    )
    demo.add_argument("--backend", choices=BACKENDS, default="asyncio", help="event loop")
    demo.add_argument(
        "--provider",
        default=os.environ.get("LIONAGI_DEMO_PROVIDER"),
        help="talk to a real model of this provider (openai, anthropic, ollama, claude_code, ...)",
    )
    demo.add_argument(
        "--model", default=os.environ.get("LIONAGI_DEMO_MODEL"), help="model name for --provider"
    )
    demo.add_argument(
        "--base-url",
        default=os.environ.get("LIONAGI_DEMO_BASE_URL"),
        help="base URL of an OpenAI-compatible server",
    )
    demo.add_argument("--no-color", action="store_true", help="plain output")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "demo":
        parser.print_help()
        return 2
    return _demo(parser, args)


def _check_demo_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exits with a usage error (code 2) when the model options do not go together."""
    if (args.model or args.base_url) and not args.provider:
        parser.error("--model/--base-url need --provider (or LIONAGI_DEMO_PROVIDER)")
    if args.provider and not args.model:
        parser.error(f"--provider {args.provider} needs --model (or LIONAGI_DEMO_MODEL)")


def _demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _check_demo_args(parser, args)
    if args.backend == "trio" and importlib.util.find_spec("trio") is None:
        print("the trio backend needs trio: pip install 'lionagi[trio]'", file=sys.stderr)
        return 2

    from lionagi._demo import DemoConfig, run_demo
    from lionagi.errors import LionError

    config = DemoConfig(
        backend=args.backend,
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        color=not args.no_color and sys.stdout.isatty() and "NO_COLOR" not in os.environ,
    )
    try:
        return run_demo(config)
    except (LionError, BaseExceptionGroup) as exc:
        error = _only_library_errors(exc)
        if error is None:
            raise  # a bug, not a provider or configuration problem: keep the traceback
        print(f"demo failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def _only_library_errors(exc: BaseException) -> LionError | None:
    """The first library error in ``exc`` (an exception group's leaves included), provided
    every leaf is one; concurrent callers fail together, and one line says why."""
    from lionagi.errors import LionError

    if isinstance(exc, LionError):
        return exc
    if not isinstance(exc, BaseExceptionGroup):
        return None
    matched, rest = exc.split(LionError)
    leaf: BaseException | None = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if rest is None and isinstance(leaf, LionError) else None


if __name__ == "__main__":
    sys.exit(main())
