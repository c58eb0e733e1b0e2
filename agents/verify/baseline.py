"""The tests at a task's base commit: run once per workspace, commit and command in a clean room of that commit
(agents/verify/clean_room.py), and kept on disk so consecutive tasks on one commit pay once (tasks on the same
commit at the same time share one run). The red tests' traces (what each runs) are learned there too, once per base
and set of tests: code the worker cannot change. A run or trace lasts only while a task waits for it: the last of
its tasks to end or be cancelled cancels it (its processes killed), so nothing of a task's outlives it."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agents.sandbox.shell import DRAIN_GRACE_SECONDS, KILL_WAIT_SECONDS, TERM_GRACE_SECONDS
from agents.verify.clean_room import clean_room
from agents.verify.suite_env import TestEnvironment
from agents.verify.suite_run import TestOutcome, TestStatus, run_tests

if TYPE_CHECKING:
    from agents.verify.base_run_cache import KeptBaseRuns

log = logging.getLogger(__name__)

T = TypeVar("T")

# bumped when a kept outcome would mean something else now (3: runs without NO_COLOR, ava read whole; 4: only runs
# in a clean room of their own, never in the task's network namespace, are kept)
RESULTS_FORMAT = "4"
# how long a shutdown waits for the runs it stopped: a cancelled command's whole reaping (SIGTERM's grace, SIGKILL's
# wait, the pipe's drain), and a second for the rest of the run
CLOSE_SECONDS = TERM_GRACE_SECONDS + KILL_WAIT_SECONDS + DRAIN_GRACE_SECONDS + 1.0


class BaselineRuns:
    """Base-commit test outcomes, cached under `directory` as one JSON file per (workspace, commit, command), or
    with `kept` in the store, keyed by the environment's identity too (agents/verify/base_run_cache.py)."""

    def __init__(self, directory: Path, kept: KeptBaseRuns | None = None) -> None:
        self.directory = Path(directory)
        self.kept = kept
        self._running: dict[str, asyncio.Task[TestOutcome]] = {}
        self._waiters: dict[asyncio.Task[Any], int] = {}  # per shared run or trace: the tasks waiting for it now
        self._live: set[asyncio.Task[Any]] = set()  # every run and trace not done yet, one reaping included
        self._traces: dict[str, asyncio.Task[dict[str, list[str]]]] = {}  # per base and set of red tests

    def key(self, repo: Path, commit: str, env: TestEnvironment) -> str:
        # RESULTS_FORMAT: outcomes kept before runs said how far they got (RunState) or had root-relative ids are not
        # reused; the steps are part of the key because how a script is run decides what it shows
        steps = [f"{s.framework or s.kind}:{s.command}" for s in env.script]
        parts = [RESULTS_FORMAT, str(Path(repo).resolve()), commit, env.command, env.kind, env.junit or "", *steps]
        text = "\0".join(parts)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def cached(self, repo: Path, commit: str, env: TestEnvironment) -> TestOutcome | None:
        path = self.directory / f"{self.key(repo, commit, env)}.json"
        try:
            return TestOutcome.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    async def outcome(
        self, repo: Path, commit: str, env: TestEnvironment, timeout: float, **run_options: Any
    ) -> TestOutcome:
        """The outcome at `commit`: from the cache, from a run under way for another task, or from a new run."""
        identity: dict[str, str] | None = None
        if self.kept is not None:
            key, identity = await self.kept.key(self.key(repo, commit, env), repo, env)
            if (kept := await self.kept.find(repo, key)) is not None:
                return kept
        elif (found := await asyncio.to_thread(self.cached, repo, commit, env)) is not None:
            return found
        else:
            key = self.key(repo, commit, env)
        running = self._running.get(key)
        if running is None or running.cancelling():  # one its last task cancelled is reaping: never joined
            running = self._start(
                self._run(key, repo, commit, env, timeout, identity, **run_options), "baseline", commit
            )
            self._running[key] = running
            running.add_done_callback(lambda done: self._running.pop(key) if self._running.get(key) is done else None)
        return await self._shared(running)

    def _start(self, run: Coroutine[Any, Any, T], kind: str, commit: str) -> asyncio.Task[T]:
        """`run` started as an asyncio task of its own, known to `close` until it is done."""
        task = asyncio.create_task(run, name=f"{kind}-{commit[:8]}")
        self._live.add(task)
        task.add_done_callback(self._live.discard)
        return task

    async def _shared(self, running: asyncio.Task[T]) -> T:
        """`running`'s result, for one of the tasks sharing it: counted while it waits. When the last of them ends
        or is cancelled before the run has, the run is cancelled (its test processes killed and reaped in its own
        asyncio task): nothing of a task's goes on once no task waits for it."""
        self._waiters[running] = self._waiters.get(running, 0) + 1
        try:
            return await asyncio.shield(running)
        finally:
            self._waiters[running] -= 1
            if not self._waiters[running]:
                del self._waiters[running]
                if not running.done():  # the last task waiting for it is gone (cancelled): stop the run
                    running.cancel()

    async def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Stop the runs and traces still under way and wait for them (at most `timeout` seconds). A base run or
        trace whose tasks have all gone is cancelled by the last of them and reaps its test processes in its own
        asyncio task: at shutdown nothing else waits for it, and the bot's event loop could close before its
        processes were reaped. One cancelled already is reaping: it is waited for, not cancelled again."""
        pending = [t for t in self._live if not t.done()]  # one a newer run or trace took the place of too
        for task in pending:
            if not task.cancelling():
                task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def _run(
        self,
        key: str,
        repo: Path,
        commit: str,
        env: TestEnvironment,
        timeout: float,
        identity: dict[str, str] | None,
        **run_options: Any,
    ) -> TestOutcome:
        outcome = await self.rerun(repo, commit, env, timeout, None, **run_options)
        if outcome.status is not TestStatus.error or outcome.timed_out:  # a hiccup is not kept; a slow suite is
            if self.kept is not None and identity is not None:
                await self.kept.keep(repo, key, commit, env, identity, outcome)
            else:
                with contextlib.suppress(OSError):
                    (self.directory / f"{key}.json").write_text(outcome.model_dump_json(), encoding="utf-8")
        return outcome

    async def rerun(
        self, repo: Path, commit: str, env: TestEnvironment, timeout: float, ids: list[str] | None, **run_options: Any
    ) -> TestOutcome:
        """One run at `commit` (only `ids` when given) in a clean room of its own; nothing kept."""
        async with clean_room(repo, commit, env, self.directory) as tree:
            return await run_tests(tree, timeout, environment=env, ids=ids, **run_options)

    async def traces(
        self, repo: Path, commit: str, env: TestEnvironment, timeout: float, ids: list[str], **run_options: Any
    ) -> dict[str, list[str]]:
        """Test id -> the `file::function` entries it runs at `commit` (agents/verify/tracer.py), for `ids` (red
        tests there): one traced run in a clean room of the base, shared by every task asking for the same ids while
        it runs, and kept for the next once it has answered. A test missing from the answer could not be traced. Like
        a base run, a trace is cancelled when the last task waiting for it ends or is cancelled (`_shared`): the
        owner's slow suite does not go on for a task that is gone."""
        key = hashlib.sha256("\0".join([self.key(repo, commit, env), *sorted(ids)]).encode()).hexdigest()[:32]
        running = self._traces.get(key)
        if (
            running is None
            or running.cancelling()  # its last task cancelled it: reaping, never joined
            or (running.done() and (running.cancelled() or running.exception() is not None))
        ):
            running = self._start(self._trace(repo, commit, env, timeout, ids, **run_options), "base-trace", commit)
            self._traces[key] = running
            while len(self._traces) > 64:  # the oldest first: a bot's bases move on
                self._traces.pop(next(iter(self._traces)))
        return dict(await self._shared(running))

    async def _trace(
        self, repo: Path, commit: str, env: TestEnvironment, timeout: float, ids: list[str], **run_options: Any
    ) -> dict[str, list[str]]:
        run = await self.rerun(repo, commit, env, timeout, ids, trace=True, **run_options)
        return {t: run.traced[t] for t in ids if run.traced.get(t)}
