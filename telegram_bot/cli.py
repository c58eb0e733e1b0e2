"""The `agentlab` command: `agentlab run` (default) starts the bot; `agentlab --help` lists the subcommands."""

from __future__ import annotations

import argparse
import logging
import sys

from agents.settings import SettingsError, load_settings


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpx2", "httpcore", "telegram.ext.ExtBot"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def cmd_run(args: argparse.Namespace) -> int:
    """Start the bot in long-polling mode."""
    settings = load_settings()
    _configure_logging(settings.log_level)
    from telegram_bot.app import run_polling

    run_polling(settings)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentlab", description="A crew of Claude agents in your Telegram chat.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="start the bot (long polling); the default")
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", cmd_run)
    try:
        return func(args)
    except SettingsError as err:
        print(f"agentlab: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
