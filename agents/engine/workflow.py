"""The task's workflow: one execution on whichever runner takes it, a takeover when that runner is lost, and the
chat's messages both ways while it runs.

- run: `EXECUTE` on the shared queue (a runner with a free slot takes it; heartbeats every few seconds). A runner that
  stops heartbeating is lost: the task is offered again (TEMPORAL_TAKEOVERS times; the next runner starts from the
  task branch as last pushed), then ends `interrupted`. No runner within TEMPORAL_CLAIM_SECONDS: `interrupted`.
- claimed (signal, from the runner): the runner's own queue, where pokes for this task go from then on.
- pushed (signal, from the runner): the task branch reached the shared remote; a takeover resumes on it.
- note / answer / cancel (signals, from the bot): a `POKE` activity on that runner's queue, which hands it to the
  running task in the runner's process (its inbox, its network question, its asyncio task).
- notify (update, from the runner): a `NOTIFY` activity on the bot's queue shows it in the chat; returns what was
  shown (the message id; the owners' copies of a question handed to them).
- file_part (update, from the runner): a `FETCH` activity on the bot's queue reads a part of a file handed to the task.
- usage (update, from the runner, as its task's model calls record their usage): a `USAGE` activity on the bot's
  queue stores the rows as the task's own at once. The workflow keeps the keys of the rows the bot stored, and the
  report it returns leaves those out (the report carries every row of its run; rows whose activity has not run when
  the report comes, the bot being away, are left to the report): each row is counted once, across a takeover (a lost
  runner's rows were stored as they came) and a bot restart (the keys live in the workflow).
- spending (update, from the runner, before each model call): a `SPENDING` activity on the bot's queue, once the rows
  under way are stored, answers with the day's budget and spend as the bot counts them (every runner's tasks).

Temporal re-imports this module in its workflow sandbox: it has no side effects, and only the payloads pass through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from agents.core.branch_names import is_task_branch
    from agents.engine.payloads import (
        EXECUTE,
        FETCH,
        NOTIFY,
        POKE,
        SPENDING,
        USAGE,
        WORKFLOW,
        Claim,
        DaySpending,
        FilePart,
        NotifyCall,
        Poke,
        Shown,
        TaskReport,
        TaskStart,
        UsageCall,
        without_stored,
    )

ONCE = RetryPolicy(maximum_attempts=1)
EDIT_SECONDS = 30  # a progress edit not shown within this is dropped (the bot is away; the next edit shows all)
USAGE_SECONDS = 600  # usage rows not stored within this (the bot is away) come home in the report instead
SPENDING_SECONDS = 10  # the bot's figure not given within this: the runner counts the offer's figure and its own
ABANDON = workflow.HandlerUnfinishedPolicy.ABANDON


@workflow.defn(name=WORKFLOW)
class AgentTask:
    def __init__(self) -> None:
        self.start: TaskStart | None = None
        self.claim: Claim | None = None
        self.cancelled = False
        self.ended = False
        self.branch: str | None = None  # the task branch as last pushed by a runner: where a takeover starts
        self.usage_sent: set[str] = set()  # keys of the usage rows handed to the bot (stored, or on their way)
        self.usage_stored: set[str] = set()  # … and of those it stored: the report leaves them out
        self.usage_calls: list[workflow.ActivityHandle[None]] = []  # USAGE activities not yet done

    @workflow.run
    async def run(self, start: TaskStart) -> TaskReport:
        self.start = start
        lost: list[str] = []
        while True:
            # started by name (the runner's activity is not imported here): the handle's type says what it returns
            execution: workflow.ActivityHandle[TaskReport] = workflow.start_activity(
                EXECUTE,
                args=[start, lost],
                task_queue=start.shared_queue,
                result_type=TaskReport,
                schedule_to_start_timeout=timedelta(seconds=start.claim_seconds),
                start_to_close_timeout=timedelta(seconds=start.run_seconds),
                heartbeat_timeout=timedelta(seconds=start.heartbeat_seconds),
                retry_policy=ONCE,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            await workflow.wait_condition(functools.partial(self._settled, execution))
            if not execution.done():  # cancelled before any runner took it
                execution.cancel()
            try:
                report: TaskReport = await execution
                # rows still on their way to the bot (it is away) come home in the report instead: their activities
                # are cancelled, and waited for (one the bot is running ends stored): never both, never neither
                for call in self.usage_calls:
                    call.cancel()
                await workflow.wait_condition(lambda: not self.usage_calls)
                self.ended = True
                return without_stored(report, self.usage_stored)
            except ActivityError as err:
                runner = self.claim.runner if self.claim else "no runner"
                self.claim = None
                if self.cancelled:
                    return self._end("cancelled")
                if isinstance(err.cause, TimeoutError) and err.cause.type is TimeoutType.SCHEDULE_TO_START:
                    return self._end("interrupted", f"no runner took the task within {start.claim_seconds:g} s")
                lost.append(f"{runner}: {err.cause or err}")
                if len(lost) > start.takeovers:
                    return self._end("interrupted", f"its runner was lost ({lost[-1]})", self.branch)
                start = dataclasses.replace(start, branch=self.branch or start.branch)

    def _settled(self, execution: workflow.ActivityHandle[TaskReport]) -> bool:
        """The run's activity is over, or the task was cancelled before any runner took it."""
        return execution.done() or (self.cancelled and self.claim is None)

    def _end(self, status: str, error: str | None = None, branch: str | None = None) -> TaskReport:
        self.ended = True
        assert self.start is not None
        return TaskReport(task_id=self.start.task_id, status=status, error=error, branch=branch, pushed=bool(branch))

    @workflow.query
    def runner(self) -> str:
        return self.claim.runner if self.claim else ""

    @workflow.query
    def last_push(self) -> str:
        """The task branch as a takeover would resume it ("" before the first push)."""
        return self.branch or ""

    @workflow.signal
    def claimed(self, claim: Claim) -> None:
        self.claim = claim

    @workflow.signal
    def pushed(self, branch: str) -> None:
        """The runner pushed the task branch (after a commit): a takeover resumes from it. Only the task's own branch
        (its resumed one, or a name the bot gives it) is taken: a runner runs many chats' tasks."""
        start = self.start
        if start is not None and is_task_branch(branch, start.task_id, start.branch):
            self.branch = branch
        else:
            workflow.logger.warning("a runner reported pushing %r, not this task's branch: ignored", branch)

    @workflow.signal(unfinished_policy=ABANDON)
    async def poke(self, poke: Poke) -> None:
        """A note, a network answer or a cancel: handed to the running task on its runner."""
        if poke.kind == "cancel":
            self.cancelled = True
        await workflow.wait_condition(lambda: self.claim is not None or self.ended or self.cancelled)
        if self.claim is None or self.ended:
            return
        await workflow.execute_activity(
            POKE,
            poke,
            task_queue=self.claim.queue,
            result_type=bool,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )

    @workflow.update(unfinished_policy=ABANDON)
    async def notify(self, call: NotifyCall) -> Shown:
        """Show something in the task's chat (through the bot); the message id, for later edits."""
        assert self.start is not None
        if call.method == "edit":
            try:
                return await self._notify(call)
            except ActivityError:  # dropped: see EDIT_SECONDS
                return Shown()
        return await self._notify(call)

    @workflow.update(unfinished_policy=ABANDON)
    async def file_part(self, part: FilePart) -> bytes:
        """A part of a file the user handed to the task, read by the bot (a runner has no copy of its own)."""
        assert self.start is not None
        data: bytes = await workflow.execute_activity(
            FETCH,
            part,
            task_queue=self.start.bot_queue,
            result_type=bytes,
            start_to_close_timeout=timedelta(seconds=60),
            schedule_to_close_timeout=timedelta(minutes=10),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5), maximum_attempts=5),
        )
        return data

    @workflow.update(unfinished_policy=ABANDON)
    async def usage(self, call: UsageCall) -> None:
        """Usage rows the task recorded on its runner, stored by the bot as the task's own now (a row already handed
        to it is not sent again); rows the bot could not store stay in the report."""
        assert self.start is not None
        rows = [row for row in call.rows if row.key and row.key not in self.usage_sent]
        if not rows:
            return
        keys = {row.key for row in rows}
        self.usage_sent |= keys
        storing: workflow.ActivityHandle[None] = workflow.start_activity(
            USAGE,
            dataclasses.replace(call, rows=rows),
            task_queue=self.start.bot_queue,
            start_to_close_timeout=timedelta(seconds=60),
            schedule_to_close_timeout=timedelta(seconds=USAGE_SECONDS),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        self.usage_calls.append(storing)
        try:
            await storing
            self.usage_stored |= keys
        except (ActivityError, asyncio.CancelledError):
            self.usage_sent -= keys  # not stored: the report carries them
        finally:
            self.usage_calls.remove(storing)

    @workflow.update(unfinished_policy=ABANDON)
    async def spending(self) -> DaySpending:
        """The day's budget and spend as the bot counts them, once the task's rows under way are stored."""
        assert self.start is not None
        await workflow.wait_condition(lambda: not self.usage_calls, timeout=timedelta(seconds=SPENDING_SECONDS))
        day: DaySpending = await workflow.execute_activity(
            SPENDING,
            task_queue=self.start.bot_queue,
            result_type=DaySpending,
            schedule_to_close_timeout=timedelta(seconds=SPENDING_SECONDS),
            retry_policy=ONCE,
        )
        return day

    @usage.validator
    def _usage_of_its_task(self, call: UsageCall) -> None:
        self._its_task(call.task_id, call.chat_id)

    @notify.validator
    def _notify_for_its_task(self, call: NotifyCall) -> None:
        self._its_task(call.task_id, call.chat_id)

    @file_part.validator
    def _file_of_its_task(self, part: FilePart) -> None:
        self._its_task(part.task_id)

    def _its_task(self, task_id: int, chat_id: int | None = None) -> None:
        """A runner speaks for the task this workflow follows, in its chat, and reads the files handed to it, only: a
        call naming another task or chat is refused before it reaches the bot (a runner runs many chats' tasks)."""
        start = self.start
        if start is None or task_id != start.task_id or (chat_id is not None and chat_id != start.chat_id):
            raise ValueError(
                f"this workflow follows task {start.task_id if start else '?'}: a call for another refused"
            )

    async def _notify(self, call: NotifyCall) -> Shown:
        assert self.start is not None
        edit = call.method == "edit"  # a progress edit is dropped when the bot is away: the next shows it all
        shown: Shown = await workflow.execute_activity(
            NOTIFY,
            call,
            task_queue=self.start.bot_queue,
            result_type=Shown,
            start_to_close_timeout=timedelta(seconds=60),
            schedule_to_close_timeout=timedelta(seconds=EDIT_SECONDS) if edit else timedelta(hours=2),
            # a bot that is down picks it up when it is back (attempts count only once it runs); a refusal is final
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5), maximum_attempts=5),
        )
        return shown
