"""Task evaluation: does a worker succeed? `agentlab eval tasks` runs each fixture (task_fixtures.py: small
repositories with a real bug their tests catch, Python and JavaScript, one for the frontend worker) end to end through
the bot's own machinery (`Runtime`: the crew starts the task, the executor runs worktree, worker, commit, the bot's
test run and corrections, in the sandbox), three runs each, and reports per fixture and overall: the first-try ✔ rate
(done with no correction), the ✔ rate, corrections used, worker steps (tool calls), tokens, estimated cost and time.

Only Telegram is left out: the chat's messages go to a notifier that drops them. With `--scripted` the model is
`ScriptedSolver`, which plays each fixture's known fix (so the eval's own wiring is tested without a key); otherwise
the configured model (ANTHROPIC_API_KEY, WORKER_MODEL) is used and the run costs tokens.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2 as httpx

from agents.core.models import Caller, TaskStatus, Usage
from agents.core.settings import Settings
from agents.evals.task_fixtures import FIXTURES, TaskFixture
from agents.llm.client import cost_usd, make_client

EVAL_CHAT_ID = 4343
ENDED = {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.BLOCKED, TaskStatus.UNVERIFIED, TaskStatus.CANCELLED}


@dataclass
class RunResult:
    fixture: str
    run: int
    status: str
    corrections: int
    steps: int
    usage: Usage
    seconds: float
    error: str = ""

    @property
    def first_try(self) -> bool:
        return self.status == TaskStatus.COMPLETED.value and self.corrections == 0


class DroppingNotifier:
    """The chat of an eval: every message is dropped (the outcome is read from the store)."""

    async def send(self, chat_id: int, markdown: str, **_: Any) -> int | None:
        return None

    async def edit(self, chat_id: int, message_id: int, markdown: str, **_: Any) -> None:
        return None

    async def send_document(self, chat_id: int, filename: str, data: bytes, caption: str = "", **_: Any) -> None:
        return None

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        return None

    async def send_album(self, chat_id: int, pictures: list[tuple[str, bytes]]) -> None:
        return None

    async def ask_owners(self, chat_id: int, markdown: str, **_: Any) -> list[tuple[int, int]]:
        return []

    async def buttons_settled(self) -> None:
        return None


def make_repository(folder: Path, files: dict[str, str]) -> None:
    """`folder` as a git repository with `files` committed (the fixture's starting point)."""
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(
            ["git", "-c", "user.name=eval", "-c", "user.email=eval@localhost", *argv],
            cwd=folder,
            check=True,
            capture_output=True,
        )


async def run_fixture(
    settings: Settings, fixture: TaskFixture, run: int, client: Any, timeout: float = 1800.0
) -> RunResult:
    """One fixture, one run, in a fresh data folder and workspace root; the result read from the bot's store."""
    from agents.runtime import (
        Runtime,
        bot_secrets,
    )  # the whole bot: imported when an eval runs, not when the CLI starts

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"agentlab-eval-{fixture.name}-") as tmp:
        root = Path(tmp) / "workspaces"
        make_repository(root / fixture.name, fixture.files)
        local = settings.model_copy(
            update={
                "workspace_path": root,
                "database_path": Path(tmp) / "data" / "agentlab.db",
                "worktrees_path": None,
                "bot_repository": None,
                "task_engine": "local",
                "github_token": None,
            }
        )
        runtime = await Runtime.start(local, DroppingNotifier(), bot_secrets(local), client=client, transcriber=None)
        try:
            await runtime.crew.starts.start_one(
                Caller(chat_id=EVAL_CHAT_ID), fixture.name, fixture.worker, fixture.request, background=True
            )
            store = runtime.store
            async with asyncio.timeout(timeout):
                while True:
                    tasks = await store.list_tasks(EVAL_CHAT_ID)
                    if tasks and tasks[0].status in ENDED:
                        task = tasks[0]
                        break
                    await asyncio.sleep(0.2)
            tests = [e for e in await store.task_events(task.stored_id) if e.kind == "tests"]
            usage = Usage()
            for record in await store.task_usage(task.stored_id):
                usage = usage + Usage(
                    input_tokens=record.input_tokens,
                    output_tokens=record.output_tokens,
                    cache_creation_input_tokens=record.cache_creation_input_tokens,
                    cache_read_input_tokens=record.cache_read_input_tokens,
                )
            return RunResult(
                fixture.name,
                run,
                task.status.value,
                max(0, len(tests) - 1),
                len(await store.tool_calls(task_id=task.stored_id)),
                usage,
                time.monotonic() - started,
                task.error or "",
            )
        finally:
            await runtime.close()  # its client too: each run is given its own


async def run_eval(
    settings: Settings,
    fixtures: Sequence[TaskFixture] = FIXTURES,
    runs: int = 3,
    client: Callable[[], Any] | None = None,  # a fresh model client per run (the configured API's by default)
    on_result: Callable[[RunResult], None] | None = None,
) -> list[RunResult]:
    """Every fixture `runs` times, one after another (a task's test runs are the machine's to use)."""
    results = []
    for fixture in fixtures:
        for run in range(1, runs + 1):
            try:
                result = await run_fixture(settings, fixture, run, client() if client else make_client(settings))
            except (anthropic.APIError, TimeoutError, OSError, subprocess.CalledProcessError) as err:
                result = RunResult(fixture.name, run, "error", 0, 0, Usage(), 0.0, f"{type(err).__name__}: {err}")
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def total(usage: Usage) -> int:
    return usage.input_tokens + usage.output_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens


def line(result: RunResult) -> str:
    """One run as a line: `✔ py-slug run 1: completed, 0 corrections, 2 steps, 4,100 tokens, 9 s`."""
    mark = "✔" if result.status == TaskStatus.COMPLETED.value else "✖"
    said = f" ({result.error[:120]})" if result.error else ""
    return (
        f"{mark} {result.fixture} run {result.run}: {result.status}, {result.corrections} corrections, "
        f"{result.steps} steps, {total(result.usage):,} tokens, {result.seconds:.0f} s{said}"
    )


def report(results: Sequence[RunResult], settings: Settings) -> str:
    """Per fixture and overall (per run): first-try ✔ rate, ✔ rate, corrections, steps, tokens, cost and time."""
    lines = []
    for name in [*dict.fromkeys(r.fixture for r in results), "all"]:
        rows = [r for r in results if name in ("all", r.fixture)]
        if not rows:
            continue
        n = len(rows)
        usage = Usage()
        for r in rows:
            usage = usage + r.usage
        done = sum(r.status == TaskStatus.COMPLETED.value for r in rows)
        lines.append(
            f"{name}: first try ✔ {sum(r.first_try for r in rows)}/{n} · ✔ {done}/{n}"
            f" · corrections {sum(r.corrections for r in rows) / n:.1f} · steps {sum(r.steps for r in rows) / n:.1f}"
            f" · tokens {total(usage) // n:,} · cost ${cost_usd(usage, settings) / n:.3f}"
            f" · time {sum(r.seconds for r in rows) / n:.0f} s (per run)"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the scripted model


class ScriptedSolver:
    """A deterministic model for `--scripted`: a worker of a fixture first applies the fixture's fix, then reports.
    The fixture is known by its request in the worker's first message; a request of any other kind fails."""

    def __init__(self, fixtures: Sequence[TaskFixture] = FIXTURES) -> None:
        self.fixtures = fixtures
        self.calls = 0

    def _answer(self, params: dict[str, Any]) -> anthropic.types.Message:
        self.calls += 1
        messages = params["messages"]
        first = json.dumps(messages[0]["content"], ensure_ascii=False)
        fixture = next((f for f in self.fixtures if json.dumps(f.request)[1:-1] in first), None)
        if fixture is None:
            raise anthropic.APIConnectionError(message="the scripted model knows no such task", request=_REQUEST)
        turns = sum(m["role"] == "assistant" for m in messages)
        path, old, new = fixture.fix
        content: list[dict[str, Any]]
        if turns == 0:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_eval_{self.calls}",
                    "name": "edit_file",
                    "input": {"path": path, "old": old, "new": new},
                }
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": f"Fixed {path}: the bug the request named."}], "end_turn"
        return anthropic.types.Message.model_validate(
            {
                "id": f"msg_eval_{self.calls}",
                "type": "message",
                "role": "assistant",
                "model": "scripted",
                "content": content,
                "stop_reason": stop,
                "usage": {"input_tokens": len(json.dumps(messages)) // 4, "output_tokens": 30},
            }
        )

    async def create(self, **params: Any) -> anthropic.types.Message:
        return self._answer(params)

    @asynccontextmanager
    async def stream(self, **params: Any) -> AsyncIterator[_FinishedStream]:
        yield _FinishedStream(self._answer(params))

    async def close(self) -> None:
        return None


class _FinishedStream:
    """The part of the SDK's message stream the tool loop reads: no text events, then the message."""

    def __init__(self, message: anthropic.types.Message) -> None:
        self.message = message

    def __aiter__(self) -> _FinishedStream:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration

    async def get_final_message(self) -> anthropic.types.Message:
        return self.message


_REQUEST = httpx.Request("POST", "http://scripted/v1/messages")  # what an APIConnectionError names


async def main(settings: Settings, *, scripted: bool = False, runs: int = 3, only: Sequence[str] = ()) -> int:
    """`agentlab eval tasks`: each run's line as it ends, then the report; exit 1 when a run could not be made."""
    fixtures = [f for f in FIXTURES if not only or f.name in only]
    if not fixtures:
        print(f"agentlab: no fixture named {', '.join(only)}; there are {', '.join(f.name for f in FIXTURES)}")
        return 2
    model = "the scripted model" if scripted else settings.workers.worker_model
    print(f"Task eval: {len(fixtures)} fixtures, {runs} runs each, {model}")
    results = await run_eval(
        settings, fixtures, runs, ScriptedSolver if scripted else None, on_result=lambda r: print(line(r), flush=True)
    )
    print(report(results, settings))
    return 1 if any(r.status == "error" for r in results) else 0
