"""Attempts: "try three ways". N ordinary tasks race on the same request; the tests judge; one summary names the pick.

Each attempt IS a task (its own worktree, branch, verdict, corrections, limits and usage), started together from
the same request and stored with its group (`Store.attempts`) in one transaction. The group adds:
- "attempt K of N" in each worker's first turn (`attempt_brief`), so each may try its own first hypothesis;
- one progress message for the group, drawn here from the store (the attempts' own `QuietProgress` send none);
- the follower (`Races.follow`): it waits on the engine for every attempt to end, stops the rest early when the
  daily budget is spent or (optionally) at the first ✔, then sends the one summary (attempt_summary.py: the pick
  ranked by the tests, attempt_ranking.py, and where two ✔ remain that the tests cannot tell apart, one call to the
  orchestrator's model comparing their diffs, its answer kept on the group);
- Merge / Discard / Cancel / notes for the group as a whole (attempt_decisions.py).
`Races.start_task` is the orchestrator's start_task tool: one attempt is an ordinary task, several race here.
A restart mid-race resumes the attempts it interrupted and follows the group again; the summary is sent once (the
group's state moves `racing` → `summarised` by compare-and-set).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Annotated

from agents.core.errors import ToolError
from agents.core.models import AttemptGroup, AttemptState, Caller, Task, TaskStatus, WorkerKind
from agents.core.protocols import MessageModel, Notifier, Outbox, TaskEngine
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.work_tools import Arg, Attachments, DefaultWorkspace, WorkerName, work_tool
from agents.git.command import GitError
from agents.git.repository import rev_parse
from agents.llm.client import cost_usd
from agents.llm.usage import budget_exceeded, total
from agents.store.database import Store
from agents.work.access import Access
from agents.work.attempt_progress import group_text
from agents.work.attempt_summary import AttemptSummary
from agents.work.progress import cancel_button
from agents.work.pull_requests import PullRequests
from agents.work.work_starts import WorkStarts, new_task, title_of
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 4


def attempt_count(value: object) -> int:
    """The `attempts` argument as a number from 1 to MAX_ATTEMPTS; anything else is one sentence for the model."""
    if value is None:
        return 1
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None:
        raise ToolError(
            f"attempts must be a whole number from 1 to {MAX_ATTEMPTS} (got {value!r}); nothing was started"
        )
    if not 1 <= number <= MAX_ATTEMPTS:
        raise ToolError(f"attempts must be from 1 to {MAX_ATTEMPTS} (got {number}); nothing was started")
    return number


def attempt_brief(task: Task) -> str:
    """The line that opens an attempt's first turn (nothing for an ordinary task)."""
    if task.attempt is None or task.attempt_of is None:
        return ""
    return (
        f"This is attempt {task.attempt} of {task.attempt_of}: {task.attempt_of} workers try this same task at once, "
        "each on its own branch from the same base commit, and the bot keeps the one its tests judge best. Work on "
        "your own; where the cause is uncertain, you may follow a different first hypothesis than the most obvious "
        "one (e.g. the next most likely, by your number).\n\n"
    )


class Races:
    """Starts groups of attempts and follows each to its one summary."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        engine: TaskEngine,
        notifier: Notifier,
        deliveries: Outbox,
        access: Access,
        starts: WorkStarts,
        workspaces: Workspaces,
        secrets: SecretsFilter,
        model: MessageModel | None = None,
        pull_requests: PullRequests | None = None,
    ) -> None:
        self.settings, self.store, self.engine, self.notifier = settings, store, engine, notifier
        self.summary = AttemptSummary(settings, store, deliveries, workspaces, secrets, model, pull_requests)
        self.access, self.starts = access, starts
        self._following: dict[int, asyncio.Task[None]] = {}

    # ---- starting ---------------------------------------------------------------------------------------------
    @work_tool
    async def start_task(
        self,
        caller: Caller,
        workspace: DefaultWorkspace,
        worker: Annotated[WorkerName, Arg("code, frontend or test")],
        instructions: Annotated[str, Arg("complete, self-contained instructions for the worker")],
        background: Annotated[bool, Arg("true: run in the background and notify when done; false: wait for it")],
        acceptance_criteria: Annotated[
            list[str] | None,
            Arg("2-5 checkable statements that define done (written from the request); the worker verifies each"),
        ] = None,
        attachments: Attachments = None,
        save_attachments: Annotated[
            bool,
            Arg(
                "also save those files in the worker's checkout (under .agentlab/attachments/, ignored by git), for "
                "work that needs the file itself, e.g. an image to put on a page (default false)"
            ),
        ] = False,
        attempts: Annotated[
            int | None,
            Arg(
                '1-4 (default 1): how many workers try the same task at once, each on its own branch ("try three '
                'ways", "give me 2 versions"); the bot ranks them by their tests and sends one summary with the pick'
            ),
        ] = None,
        first_pass_wins: Annotated[
            bool,
            Arg("with attempts > 1: the first attempt whose tests pass wins and the others are cancelled"),
        ] = False,
    ) -> str:
        """Start a worker that changes code in a workspace (on its own git branch) and reports back."""
        self.access.hands_nothing_of_the_chat(caller, attachments=attachments)
        # one attempt is an ordinary task (WorkStarts); several race here
        size = attempt_count(attempts)  # 0, 5 or "three": one sentence, nothing started
        if size > 1 or (attempts is not None and str(worker).strip().lower() == "research"):
            return await self.start(
                caller,
                workspace,
                worker,
                instructions,
                size,
                acceptance_criteria,
                attachments,
                save_attachments,
                first_pass_wins,
            )
        return await self.starts.start_one(
            caller, workspace, worker, instructions, background, acceptance_criteria, attachments, save_attachments
        )

    async def start(
        self,
        caller: Caller,
        workspace: str,
        worker: str,
        instructions: str,
        size: int,
        criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
        first_pass_wins: bool = False,
    ) -> str:
        """N attempts of a code, frontend or test task, in the background; the answer says what they may cost."""
        try:
            kind = WorkerKind(str(worker).strip().lower())
        except ValueError:
            kind = None
        if kind is WorkerKind.RESEARCH:
            raise ToolError(
                "attempts are for code, frontend and test tasks; a research request runs once (start_research), "
                "so nothing was started"
            )
        if kind is None:
            raise ToolError(f"worker must be one of code, frontend, test (got {worker!r})")
        await self.access.check_budget()
        ws = await self.access.workspace_for(caller, workspace, instructions)
        group = AttemptGroup(
            chat_id=caller.chat_id, size=size, title=title_of(instructions), first_pass_wins=bool(first_pass_wins)
        )
        base = await _head(ws.path)  # every attempt starts here, however long it waits for a slot
        tasks = [
            new_task(caller, ws.name, kind, f"attempt {k}/{size}: {title_of(instructions, 60)}", instructions)
            for k in range(1, size + 1)
        ]
        for task in tasks:
            task.base_commit = base
        tasks = await self.starts.submit_attempts(group, tasks, criteria, attachments, save_attachments)
        self.follow(group.stored_id)
        numbers = ", ".join(f"#{t.id}" for t in tasks)
        wins = " The first to pass its tests wins; the others are then cancelled." if first_pass_wins else ""
        return (
            f"Attempts #{group.id} started: {size} {kind.value} workers race on workspace {ws.name} (tasks {numbers}), "
            f"each on its own branch, in the background.{wins} The user sees one progress message and gets one "
            f"summary with the pick when all have ended. {await self.estimate(size)}"
        )

    async def estimate(self, size: int) -> str:
        """What N attempts may cost, from the recent change tasks' usage (each attempt counts toward the budget)."""
        ended = [
            t
            for t in await self.store.list_tasks(statuses=[TaskStatus.COMPLETED, TaskStatus.UNVERIFIED], limit=20)
            if t.worker is not WorkerKind.RESEARCH
        ][:10]
        costs = [cost_usd(total(await self.store.task_usage(t.stored_id)), self.settings) for t in ended]
        costs = [c for c in costs if c > 0]
        if not costs:
            return f"Estimated cost: {size} times one task's (no finished task yet to estimate from)."
        each = sum(costs) / len(costs)
        return f"Estimated cost: about ${each * size:.2f} ({size} × ${each:.2f}, the recent tasks' average)."

    # ---- following a race -------------------------------------------------------------------------------------
    def follow(self, group_id: int) -> None:
        """Follow the group to its summary (once per group in this process)."""
        if group_id in self._following:
            return
        follower = asyncio.create_task(self._follow(group_id), name=f"attempts-{group_id}")
        self._following[group_id] = follower
        follower.add_done_callback(lambda _: self._following.pop(group_id, None))

    async def resume(self, followed: set[int]) -> None:
        """At start-up: every group still racing goes on; the attempts a restart interrupted start again on their
        branches (those `followed` still run elsewhere, TASK_ENGINE=temporal)."""
        for group in await self.store.attempts.racing():
            woke = False
            for task in await self.store.attempts.members(group.stored_id):
                if task.status is TaskStatus.INTERRUPTED and task.stored_id not in followed:
                    steps = [e.detail for e in await self.store.task_events(task.stored_id) if e.kind == "step"][-15:]
                    notes = "steps done before the interruption: " + "; ".join(steps) if steps else "no steps recorded"
                    await self.store.update_task(task.stored_id, status=TaskStatus.PENDING, result=notes)
                    woke = True
            if woke:
                self.engine.wake()
            self.follow(group.stored_id)

    def close(self) -> None:
        """The bot stops: stop following (a restart follows the groups still racing again)."""
        for follower in list(self._following.values()):
            follower.cancel()

    async def _follow(self, group_id: int) -> None:
        try:
            await self._race(group_id)
            await self.summary.send(group_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # the group stays `racing`: a restart follows it again
            log.exception("attempts #%s: following failed", group_id)

    async def _race(self, group_id: int) -> None:
        """Until every attempt has ended: the one progress message kept current, early stops applied."""
        group = await self.store.attempts.get(group_id)
        if group is None or group.state is not AttemptState.RACING:
            return
        started = time.monotonic()
        members = await self.store.attempts.members(group_id)
        message_id = group.progress_message_id
        if message_id is None and members:
            with contextlib.suppress(Exception):  # no progress message is no reason to lose the race
                message_id = await self.notifier.send(
                    group.chat_id,
                    group_text(group, members, {}, started),
                    buttons=cancel_button(members[0].stored_id),
                    reply_to=members[0].reply_to_message_id,
                )
        await self.store.attempts.set_progress_message(group_id, message_id)
        waited: set[int] = set()  # attempts whose end the engine already announced here
        not_passes: set[int] = set()  # attempts that ended short of a pass (their facts do not change any more)
        shown, last_edit = "", 0.0
        while True:
            members = await self.store.attempts.members(group_id)
            if all(t.status.is_final for t in members):
                break
            group = await self._stop_early(group, members, not_passes)
            text = group_text(group, members, await self.store.attempts.last_steps(group_id), started)
            body = text.split("\n", 3)[-1]  # without the elapsed time: edit when a line changed, or to refresh it
            if message_id is not None and (
                body != shown or time.monotonic() - last_edit >= self.settings.tasks.progress_refresh_seconds
            ):
                shown, last_edit = body, time.monotonic()
                with contextlib.suppress(Exception):
                    await self.notifier.edit(
                        group.chat_id, message_id, text, buttons=cancel_button(members[0].stored_id)
                    )
            await self._wait_for_an_end(members, waited)
        group = await self._ended_by_the_budget(group, members)
        if message_id is not None:
            final = group_text(group, members, {}, started).replace("⏳", "🏁", 1)
            now = await self.store.attempts.get(group_id)
            ending = "the summary follows" if now is None or now.state is AttemptState.RACING else now.state.value
            with contextlib.suppress(Exception):
                await self.notifier.edit(group.chat_id, message_id, f"{final}\nAll attempts ended: {ending}.")

    async def _wait_for_an_end(self, members: list[Task], waited: set[int]) -> None:
        """Until an attempt ends (the engine says so) or the progress interval is up."""
        interval = self.settings.tasks.progress_interval_seconds
        waits = {
            asyncio.ensure_future(self.engine.wait(t.stored_id)): t.stored_id
            for t in members
            if t.status.is_active and t.stored_id not in waited
        }
        if not waits:
            await asyncio.sleep(interval)
            return
        try:
            done, _ = await asyncio.wait(waits, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
        waited.update(waits[w] for w in done)

    async def _stop_early(self, group: AttemptGroup, members: list[Task], not_passes: set[int]) -> AttemptGroup:
        """The rest cancelled when the daily budget is spent, or at the first ✔ when the owner asked for that.
        `not_passes`: the ended attempts judged short of a pass already (each is judged once)."""
        if group.stopped:
            return group
        reason = None
        winner = None
        if group.first_pass_wins:  # a pass the bot saw: done is not enough (no change, its own tests changed, …)
            for task in (t for t in members if t.status is TaskStatus.COMPLETED and t.stored_id not in not_passes):
                if (await self.summary.facts(task)).passed:
                    winner = task
                    break
                not_passes.add(task.stored_id)
        if winner is not None:
            reason = f"attempt {winner.attempt} passed first, so the others were cancelled"
        elif (refusal := await budget_exceeded(self.store, self.settings)) is not None:
            reason = f"the daily budget was reached mid-race, so the attempts still running were cancelled ({refusal})"
        if reason is None:
            return group
        await self.store.attempts.update(group.stored_id, stopped=reason)
        for task in members:
            if task.status.is_cancellable:
                await self.engine.cancel(task.stored_id)
        return group.model_copy(update={"stopped": reason})

    async def _ended_by_the_budget(self, group: AttemptGroup, members: list[Task]) -> AttemptGroup:
        """All attempts ended before the race saw the budget spent (the ones not yet started were refused at their
        start, the others stopped themselves before their next call): the summary says why all the same."""
        if group.stopped or not any("daily budget" in (t.error or "") for t in members):
            return group
        refusal = await budget_exceeded(self.store, self.settings)
        reason = "the daily budget was reached mid-race, so the attempts not done by then were stopped" + (
            f" ({refusal})" if refusal else ""
        )
        await self.store.attempts.update(group.stored_id, stopped=reason)
        return group.model_copy(update={"stopped": reason})


async def _head(repository: Path) -> str | None:
    """The commit a race starts from: the workspace's HEAD now (None where it is no repository with commits yet)."""
    try:
        return await rev_parse(repository, "HEAD")
    except GitError:
        return None
