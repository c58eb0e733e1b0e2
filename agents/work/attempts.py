"""Attempts: "try three ways". N ordinary tasks race on the same request; the tests judge; one summary names the pick.

Each attempt IS a task (its own worktree, branch, verdict, corrections, limits and usage), started together from
the same request and stored with its group (`Store.attempts`) in one transaction. The group adds:
- "attempt K of N" in each worker's first turn (`attempt_brief`), so each may try its own first hypothesis;
- one progress message for the group, drawn here from the store (the attempts' own `QuietProgress` send none);
- the follower (`Races.follow`): it waits on the engine for every attempt to end, stops the rest early when the
  daily budget is spent or (optionally) at the first ✔, then sends the one summary through the outbox, with the
  pick ranked by the tests (attempt_ranking.py) and, where two ✔ remain that the tests cannot tell apart, one call
  to the orchestrator's model comparing their diffs, its answer kept on the group (asked once);
- Merge / Discard / Cancel / notes for the group as a whole (attempt_decisions.py).
A restart mid-race resumes the attempts it interrupted and follows the group again; the summary is sent once (the
group's state moves `racing` → `summarised` by compare-and-set).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time

from agents.core.errors import ToolError
from agents.core.models import AttemptGroup, AttemptState, Caller, Task, TaskStatus, WorkerKind, utcnow
from agents.core.protocols import MessageModel, Notifier, Outbox, TaskEngine
from agents.core.settings import Settings
from agents.git.command import GitError, git_text
from agents.llm import prompts
from agents.llm.client import cost_usd, usage_record
from agents.llm.usage import budget_exceeded, total
from agents.store.database import Store
from agents.store.shown import TASK, remember_shown, shown_as
from agents.work.access import Access
from agents.work.attempt_progress import group_text
from agents.work.attempt_ranking import (
    AttemptFacts,
    needs_comparison,
    pick_by_tests,
    render_summary,
    summary_buttons,
)
from agents.work.progress import cancel_button
from agents.work.pull_requests import PullRequests
from agents.work.task_outcome import pull_request_buttons
from agents.work.work_starts import WorkStarts, new_task, title_of
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 4
TESTS_EVENT = "tests"  # an attempt's end: {"fixed": n, "broken": m} (task_finish.py records it for every change task)
DIFF_CHARS = 12_000  # of each diff the comparison sees


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


def tests_event(fixed: int, broken: int) -> str:
    return json.dumps({"fixed": fixed, "broken": broken})


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
        model: MessageModel | None = None,
        pull_requests: PullRequests | None = None,
    ) -> None:
        self.settings, self.store, self.engine, self.notifier = settings, store, engine, notifier
        self.pull_requests = pull_requests  # GitHub: Open PR opens the pick
        self.deliveries, self.access, self.starts, self.workspaces = deliveries, access, starts, workspaces
        self.model = model  # the orchestrator's model: the comparison of two ✔ diffs (None: by size alone)
        self._following: dict[int, asyncio.Task[None]] = {}

    # ---- starting ---------------------------------------------------------------------------------------------
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
        tasks = [
            new_task(caller, ws.name, kind, f"attempt {k}/{size}: {title_of(instructions, 60)}", instructions)
            for k in range(1, size + 1)
        ]
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
        costs = [
            cost_usd(total(await self.store.usage_since(utcnow(), task_id=t.stored_id)), self.settings) for t in ended
        ]
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
        runner = asyncio.create_task(self._follow(group_id), name=f"attempts-{group_id}")
        self._following[group_id] = runner
        runner.add_done_callback(lambda _: self._following.pop(group_id, None))

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
        for runner in list(self._following.values()):
            runner.cancel()

    async def _follow(self, group_id: int) -> None:
        try:
            await self._race(group_id)
            await self.summarise(group_id)
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
        shown, last_edit = "", 0.0
        while True:
            members = await self.store.attempts.members(group_id)
            if all(t.status.is_final for t in members):
                break
            group = await self._stop_early(group, members)
            text = group_text(group, members, await self._last_steps(members), started)
            body = text.split("\n", 3)[-1]  # without the elapsed time: edit when a line changed, or to refresh it
            if message_id is not None and (
                body != shown or time.monotonic() - last_edit >= self.settings.progress_refresh_seconds
            ):
                shown, last_edit = body, time.monotonic()
                with contextlib.suppress(Exception):
                    await self.notifier.edit(
                        group.chat_id, message_id, text, buttons=cancel_button(members[0].stored_id)
                    )
            await self._wait_for_an_end(members, waited)
        if message_id is not None:
            final = group_text(group, members, {}, started).replace("⏳", "🏁", 1)
            with contextlib.suppress(Exception):
                await self.notifier.edit(
                    group.chat_id, message_id, final + "\nAll attempts ended: the summary follows."
                )

    async def _wait_for_an_end(self, members: list[Task], waited: set[int]) -> None:
        """Until an attempt ends (the engine says so) or the progress interval is up."""
        interval = self.settings.progress_interval_seconds
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

    async def _last_steps(self, members: list[Task]) -> dict[int, str]:
        steps = {}
        for task in members:
            if task.status is TaskStatus.IN_PROGRESS:
                events = [e.detail for e in await self.store.task_events(task.stored_id) if e.kind == "step"]
                if events:
                    steps[task.stored_id] = events[-1]
        return steps

    async def _stop_early(self, group: AttemptGroup, members: list[Task]) -> AttemptGroup:
        """The rest cancelled when the daily budget is spent, or at the first ✔ when the owner asked for that."""
        if group.stopped:
            return group
        reason = None
        winner = next((t for t in members if t.status is TaskStatus.COMPLETED), None)
        if group.first_pass_wins and winner is not None:
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

    # ---- the one summary ------------------------------------------------------------------------------------
    async def summarise(self, group_id: int) -> None:
        """Every attempt has ended: rank them, send the one summary (once: `racing` → `summarised`)."""
        group = await self.store.attempts.get(group_id)
        if group is None or group.state is not AttemptState.RACING:
            return
        members = await self.store.attempts.members(group_id)
        facts = [await self.facts(t) for t in members]
        if group.why is None:  # kept on the group: a restart before the summary does not ask the model again
            pick, why = pick_by_tests(facts)
            pair = needs_comparison(facts)
            if pair is not None:
                pick, why = await self.compare(members, pair, fallback=(pick, why))
            await self.store.attempts.update(group_id, pick_task_id=pick.task_id if pick else None, why=why)
            group = group.model_copy(update={"pick_task_id": pick.task_id if pick else None, "why": why})
        workspace = members[0].workspace if members else ""
        summary = render_summary(group, workspace, facts, group.pick_task_id)
        buttons = summary_buttons(group_id, facts, group.pick_task_id)
        pick = next((t for t in members if t.id == group.pick_task_id), None)
        if pick is not None and self.pull_requests is not None and await self.pull_requests.offered_for(pick):
            buttons.append(pull_request_buttons(pick.stored_id)[0])
        if not await self.store.attempts.move(
            group_id, AttemptState.RACING, AttemptState.SUMMARISED, summarised_at=utcnow()
        ):
            return  # discarded meanwhile, or summarised by another follower
        about = group.pick_task_id or (members[0].stored_id if members else 0)
        record = await remember_shown(self.store, group.chat_id, TASK, about, summary, self.settings.shown_turn_chars)
        reply_to = members[0].reply_to_message_id if members else None
        sent = await self.deliveries.deliver(
            group.chat_id, summary, buttons=buttons, reply_to=reply_to, kind="summary", task_id=about
        )
        await shown_as(self.store, record, sent)

    async def facts(self, task: Task) -> AttemptFacts:
        """An attempt's line: its verdict's counts (recorded at its end), its change, its tokens and its time."""
        fixed = broken = 0
        for event in await self.store.task_events(task.stored_id):
            if event.kind == TESTS_EVENT:
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    counts = json.loads(event.detail)
                    fixed, broken = int(counts.get("fixed", 0)), int(counts.get("broken", 0))
        files = added = removed = 0
        committed = bool(task.commit_sha and task.branch and task.base_commit)
        if committed:
            try:
                numstat = await self._git(task, "diff", "--numstat", f"{task.base_commit}..{task.branch}")
            except (GitError, OSError) as err:
                log.warning("attempt #%s: no diffstat: %s", task.id, err)
                numstat = ""
            for line in numstat.splitlines():
                plus, minus, _ = (line.split("\t", 2) + ["", ""])[:3]
                files += 1
                added += int(plus) if plus.isdigit() else 0
                removed += int(minus) if minus.isdigit() else 0
            committed = files > 0
        usage = total(await self.store.usage_since(utcnow(), task_id=task.stored_id))
        tokens = (
            usage.input_tokens + usage.output_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        )
        seconds = (task.finished_at - task.started_at).total_seconds() if task.finished_at and task.started_at else None
        return AttemptFacts(
            task_id=task.stored_id,
            number=task.attempt or 0,
            status=task.status,
            fixed=fixed,
            broken=broken,
            files=files,
            added=added,
            removed=removed,
            tokens=tokens,
            seconds=seconds,
            committed=committed,
        )

    async def _git(self, task: Task, *args: str) -> str:
        return await git_text(*args, cwd=self.workspaces.resolve(task.workspace).path)

    async def compare(
        self,
        members: list[Task],
        pair: tuple[AttemptFacts, AttemptFacts],
        fallback: tuple[AttemptFacts | None, str],
    ) -> tuple[AttemptFacts | None, str]:
        """Two ✔ attempts the tests cannot tell apart: the orchestrator's model reads both diffs and picks one, in a
        line; any failure keeps the pick by size (`fallback`)."""
        if self.model is None:
            return fallback
        by_id = {t.stored_id: t for t in members}
        first, second = pair
        try:
            diffs = [
                (
                    await self._git(
                        by_id[a.task_id], "diff", f"{by_id[a.task_id].base_commit}..{by_id[a.task_id].branch}"
                    )
                )[:DIFF_CHARS]
                for a in pair
            ]
            request = (
                f"Task: {members[0].instructions[:2000]}\n\nBoth attempts pass the tests, fixing as many and breaking "
                f'none more than the other.\n\n<diff_a attempt="{first.number}">\n{diffs[0]}\n</diff_a>\n\n'
                f'<diff_b attempt="{second.number}">\n{diffs[1]}\n</diff_b>'
            )
            response = await self.model.create(
                model=self.settings.orchestrator_model,
                max_tokens=300,
                system=[{"type": "text", "text": prompts.ATTEMPT_JUDGE, "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": request}],
            )
        except Exception as err:  # the comparison is a nicety: the tests' pick stands without it
            log.warning("attempts: comparison failed: %s", err)
            return fallback
        await self.store.record_usage(usage_record(response, "judge", members[0].chat_id, first.task_id))
        text = "".join(getattr(block, "text", "") for block in response.content).strip()
        choice, _, why = text.partition("\n")
        letter = choice.strip().strip("*").upper()[:1]
        if letter not in ("A", "B") or not why.strip():
            return fallback
        chosen = first if letter == "A" else second
        reason = " ".join(why.split())[:200].rstrip(".")
        return chosen, f"both pass; compared by the orchestrator: {reason}"
