"""Schedules: work that starts by itself. The records are in the store (`Store.schedules`); APScheduler fires them.

A schedule belongs to the conversation it was made in and acts as its maker: each run starts the task (or research)
through the crew exactly as if that user had just asked, so the maker's role bounds it at every run, and the run
reports in that conversation. The scheduler (APScheduler's AsyncIOScheduler, on the bot's event loop, in TIMEZONE)
holds one job per active schedule; the store keeps each schedule's next slot, so after a restart a slot missed while
the bot was down fires once at start (APScheduler coalesces the missed slots into one run) and the next ones follow.

What a run does not do, and says so in the conversation in one message:
- the previous run's task is still active: this run is skipped;
- the workspace is gone, the maker is no longer an allowed user, or a schedule on `self` whose maker is no longer
  an owner: the schedule is paused;
- the crew refuses (a budget spent, MAX_WAITING_TASKS reached): nothing starts, the reason is the last result.

A run and a cancel, pause or resume of the same schedule take turns, so a cancel answered during a run never comes
before the task that run starts (it names that task instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, tzinfo
from typing import Annotated, Literal, Protocol

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agents.core.actions import Action, button
from agents.core.errors import ToolError
from agents.core.keyed_locks import KeyedLocks
from agents.core.models import Caller, Schedule, ScheduleStatus, Task, TaskStatus, WorkerKind, utcnow
from agents.core.protocols import Notifier
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.core.work_tools import Arg, DefaultWorkspace, ScheduleId, work_tool
from agents.store.database import Store
from agents.work.own_words import (
    CANCEL_SCHEDULE,
    PAUSE,
    RESUME,
    SCHEDULE,
    decided_by_own_words,
    unless_a_question_waits,
)
from agents.work.schedule_timing import cadence, first_run, parse_when, trigger_of, when_text
from agents.workspaces.folders import OwnersOnly, Workspace, Workspaces

log = logging.getLogger(__name__)

_MARKS = {
    TaskStatus.COMPLETED: "✔",
    TaskStatus.UNVERIFIED: "⚠",
    TaskStatus.BLOCKED: "✗",
    TaskStatus.FAILED: "✗",
    TaskStatus.CANCELLED: "✖ cancelled",
    TaskStatus.INTERRUPTED: "⚠ interrupted",
    TaskStatus.PENDING: "⏳ waiting",
    TaskStatus.IN_PROGRESS: "⏳ running",
}


class Starter(Protocol):
    """What a schedule needs from the crew: roles, the maker's workspace, and a run started as the maker."""

    def is_owner(self, caller: Caller) -> bool: ...

    async def schedule_workspace(self, caller: Caller, workspace: str, request: str) -> Workspace: ...

    async def start_scheduled(self, caller: Caller, schedule: Schedule) -> Task: ...


def job_id(schedule_id: int) -> str:
    return f"schedule-{schedule_id}"


def maker_of(schedule: Schedule) -> Caller:
    """The user a schedule acts as, in its conversation (no request message: a run replies to nothing)."""
    return Caller(chat_id=schedule.chat_id, user_id=schedule.user_id, user_name=schedule.user_name)


def short(text: str, limit: int = 60) -> str:
    first = " ".join(text.split())
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


class Firing(Protocol):
    """What fires the schedules' runs: APScheduler in the bot's process (`LocalFiring`), or Temporal Schedules
    (agents/engine/temporal_schedules.py, TASK_ENGINE=temporal). `fire(schedule_id)` is the run."""

    async def start(self, schedules: list[Schedule], fire: Fire) -> None:
        """Begin firing; `schedules` are the live ones the store has (made before this start): the active ones fire,
        the paused ones do not."""
        ...

    async def arm(self, schedule: Schedule) -> None:
        """Fire this schedule from now on: a new one, or one resumed (from its next slot)."""
        ...

    async def pause(self, schedule_id: int) -> None: ...

    async def remove(self, schedule_id: int) -> None: ...

    async def next_run(self, schedule_id: int) -> datetime | None:
        """The next slot it fires at (None: none, or not known)."""
        ...

    def close(self) -> None: ...

    async def stopped(self, timeout: float) -> bool:
        """`close`, then wait (at most `timeout` seconds) until nothing of it runs any more; whether that came."""
        ...


Fire = Callable[[int], Awaitable[None]]


class LocalFiring:
    """APScheduler's AsyncIOScheduler on the bot's loop, in TIMEZONE: one job per active schedule, armed at the slot
    the store keeps, so a slot missed while the bot was down fires once at start (missed slots coalesce into one
    run, however late) and the trigger's next slot follows."""

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone
        self.scheduler = AsyncIOScheduler(
            timezone=zone, job_defaults={"coalesce": True, "misfire_grace_time": None, "max_instances": 1}
        )
        self._fire: Fire | None = None

    async def start(self, schedules: list[Schedule], fire: Fire) -> None:
        self._fire = fire
        self.scheduler.start()
        for schedule in (s for s in schedules if s.status is ScheduleStatus.ACTIVE):
            try:
                await self.arm(schedule)
            except Exception as err:  # one broken record never stops the others
                log.warning("schedule #%s could not be restored: %s", schedule.id, err)

    async def arm(self, schedule: Schedule) -> None:
        when = {"next_run_time": schedule.next_run_at} if schedule.next_run_at is not None else {}
        self.scheduler.add_job(
            self._fire,
            trigger_of(schedule, self.zone),
            args=[schedule.id],
            id=job_id(schedule.stored_id),
            replace_existing=True,
            **when,
        )

    async def pause(self, schedule_id: int) -> None:
        await self.remove(schedule_id)  # resuming arms it again from its next slot

    async def remove(self, schedule_id: int) -> None:
        with contextlib.suppress(JobLookupError):
            self.scheduler.remove_job(job_id(schedule_id))

    async def next_run(self, schedule_id: int) -> datetime | None:
        job = self.scheduler.get_job(job_id(schedule_id))  # moved past a slot before that slot's run starts
        return job.next_run_time if job is not None else None

    def close(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def stopped(self, timeout: float) -> bool:
        self.close()  # a run it started is the task engine's from then on
        return True


class ScheduleBook:
    """The schedules of every conversation: made, listed, paused, resumed and cancelled here; fired by `firing`."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        workspaces: Workspaces,
        crew: Starter,
        notifier: Notifier,
        firing: Firing | None = None,
    ) -> None:
        self.settings, self.store, self.workspaces, self.crew, self.notifier = (
            settings,
            store,
            workspaces,
            crew,
            notifier,
        )
        self.zone = settings.schedules.zone
        self.firing = firing or LocalFiring(self.zone)
        self.unclear = unless_a_question_waits(store)  # a bare "yes" while a worker's question waits may answer it
        # a schedule's run and its cancel, pause or resume take turns: a cancel during a run (its checks done, its
        # task not yet stored) would say "it will not run again" and the run would start its task after it
        self._turns: KeyedLocks[int] = KeyedLocks()

    def _turn_of(self, schedule_id: int) -> asyncio.Lock:
        return self._turns.of(int(schedule_id))

    # ---- life ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start firing every active schedule."""
        await self.firing.start(await self.store.schedules.live(), self._fire)

    def close(self) -> None:
        self.firing.close()

    async def stopped(self, timeout: float) -> bool:
        return await self.firing.stopped(timeout)

    async def next_run(self, schedule_id: int) -> datetime | None:
        return await self.firing.next_run(schedule_id)

    # ---- the tools ----------------------------------------------------------------------------
    @work_tool(name="schedule_task")
    async def make(
        self,
        caller: Caller,
        workspace: DefaultWorkspace,
        worker: Annotated[Literal["code", "frontend", "test", "research"], Arg("code, frontend, test or research")],
        instructions: Annotated[
            str, Arg("complete, self-contained instructions for each run (research: what to study and propose)")
        ],
        cron: Annotated[
            str | None,
            Arg(
                "5-field cron expression in the owner's time zone: minute hour day-of-month month weekday "
                "(0 = Sunday), e.g. '0 9 * * 1-5' for weekdays at 09:00"
            ),
        ] = None,
        at: Annotated[
            str | None,
            Arg("ISO 8601 time of a single run, e.g. '2026-03-02T07:00' (without an offset: the owner's time zone)"),
        ] = None,
        every_minutes: Annotated[int | None, Arg("run every this many minutes (at least 1)")] = None,
    ) -> str:
        """Make a schedule: the task (or research) starts by itself at the times given, as if this user had just
        asked, and reports in this conversation ("every weekday at 9 run the tests in calc", "tomorrow at 7", "in 2
        hours"). Give exactly one of cron, at and every_minutes. Confirm in one sentence with the next run the tool
        returns."""
        try:
            kind = WorkerKind(str(worker).strip().lower())
        except ValueError:
            raise ToolError(f"worker must be one of code, frontend, test, research (got {worker!r})") from None
        instructions = str(instructions or "").strip()
        if not instructions:
            raise ToolError("the instructions are empty: say what each run should do")
        now = utcnow()
        when = parse_when(cron, at, every_minutes, self.zone, now)
        ws = await self.crew.schedule_workspace(caller, workspace, f"a schedule: {instructions}")
        shown = outside_text(short(instructions), one_line=True)
        await decided_by_own_words(
            self.notifier, caller, SCHEDULE, f"a schedule ({kind.value} in {ws.name}: {shown})", unclear=self.unclear
        )
        live = await self.store.schedules.live(caller.chat_id)
        if len(live) >= self.settings.schedules.schedules_max:
            raise ToolError(
                f"this conversation already has {len(live)} schedules, the most allowed (SCHEDULES_MAX); "
                "cancel one first"
            )
        schedule = Schedule(
            chat_id=caller.chat_id,
            user_id=caller.user_id,
            user_name=caller.user_name,
            workspace=ws.name,
            worker=kind,
            instructions=instructions,
            cron=when.cron,
            at=when.at,
            every_minutes=when.every_minutes,
            created_at=now,
        )
        schedule.next_run_at = first_run(schedule, self.zone, now)
        if schedule.next_run_at is None:
            raise ToolError("that schedule would never run")
        await self.store.schedules.add(schedule)
        try:
            await self.firing.arm(schedule)
        except Exception:  # not firing: not kept either
            await self.store.schedules.update(schedule.stored_id, status=ScheduleStatus.CANCELLED, next_run_at=None)
            raise
        return (
            f"Schedule #{schedule.id} made ({cadence(schedule, self.zone)}): {kind.value} in {ws.name}, "
            f"«{short(instructions)}». Next run: {when_text(schedule.next_run_at, self.zone)}. Tell the user in one "
            "sentence, with that next run."
        )

    async def listing(self, caller: Caller) -> list[tuple[Schedule, str]]:
        """This conversation's live schedules, each with its line for the chat."""
        return [(s, await self.line(s)) for s in await self.store.schedules.live(caller.chat_id)]

    @work_tool(name="list_schedules")
    async def list_text(self, caller: Caller) -> str:
        """List this conversation's schedules: when, what, the next run and the last result."""
        lines = [line for _, line in await self.listing(caller)]
        return "\n".join(lines) if lines else "No schedules in this conversation."

    async def line(self, schedule: Schedule) -> str:
        """'#3 [active] cron `0 9 * * 1-5` · code in calc · by mia · next Mon 02 Mar 09:00 CET · last ✔ task #12: …'"""
        by = f" · by {outside_text(schedule.user_name)}" if schedule.user_name else ""
        if schedule.status is ScheduleStatus.ACTIVE:
            upcoming = f"next {when_text(await self.next_run(schedule.stored_id) or schedule.next_run_at, self.zone)}"
        else:
            upcoming = "paused" + (f" ({schedule.note})" if schedule.note else "")
        return (
            f"#{schedule.id} [{schedule.status.value}] {cadence(schedule, self.zone)} · {schedule.worker.value} in "
            f"{schedule.workspace}{by} · {upcoming} · last {await self.last_result(schedule)} · "
            f"{outside_text(short(schedule.instructions), one_line=True)}"
        )

    async def last_result(self, schedule: Schedule) -> str:
        """The last run's mark (✔ ✗ ⚠) and task number, or what the last run did instead of starting one."""
        if schedule.note and schedule.status is ScheduleStatus.ACTIVE:
            return schedule.note
        if schedule.last_task_id is None:
            return "none yet"
        task = await self.store.get_task(schedule.last_task_id)
        if task is None:
            return f"task #{schedule.last_task_id}"
        return f"{_MARKS.get(task.status, task.status.value)} task #{task.id}"

    async def _mine(self, caller: Caller, schedule_id: int, doing: str) -> Schedule:
        """A live schedule of this conversation that the caller may change: members their own, owners every one."""
        schedule = await self.store.schedules.get(schedule_id)
        if schedule is None or schedule.chat_id != caller.chat_id or not schedule.status.is_live:
            raise ToolError(f"there is no schedule #{schedule_id} in this conversation (list_schedules shows them)")
        if not self.crew.is_owner(caller) and schedule.user_id != caller.user_id:
            whose = f"{schedule.user_name}'s" if schedule.user_name else "not yours"
            raise ToolError(
                f"schedule #{schedule.id} is {whose}: only the member who made it or an owner can {doing} it"
            )
        return schedule

    @work_tool(name="cancel_schedule")
    async def cancel(self, caller: Caller, schedule_id: ScheduleId) -> str:
        """Cancel a schedule for good ("stop the nightly run"); a task it started goes on."""
        async with self._turn_of(schedule_id):
            schedule = await self._mine(caller, schedule_id, "cancel")
            buttons = [[button(f"✖ Cancel #{schedule.id}", Action.CANCEL_SCHEDULE, schedule.stored_id)]]
            await decided_by_own_words(
                self.notifier, caller, CANCEL_SCHEDULE, f"**schedule #{schedule.id}**", buttons, self.unclear
            )
            live = [s for s in ScheduleStatus if s.is_live]
            if not await self.store.schedules.move(
                schedule.stored_id, live, ScheduleStatus.CANCELLED, next_run_at=None
            ):
                raise ToolError(f"schedule #{schedule.id} was already cancelled")
            await self.firing.remove(schedule.stored_id)
            running = await self._active_task(schedule)
            goes_on = f" Task #{running.id} of its last run goes on." if running else ""
            return f"Schedule #{schedule.id} cancelled: it will not run again.{goes_on}"

    @work_tool(name="pause_schedule")
    async def pause(self, caller: Caller, schedule_id: ScheduleId) -> str:
        """Pause a schedule: it does not run until resumed."""
        async with self._turn_of(schedule_id):
            schedule = await self._mine(caller, schedule_id, "pause")
            if schedule.status is ScheduleStatus.PAUSED:
                return f"Schedule #{schedule.id} is already paused."
            subject = f"**schedule #{schedule.id}**"
            await decided_by_own_words(self.notifier, caller, PAUSE, subject, unclear=self.unclear)
            await self._pause(schedule, None)
            return f"Schedule #{schedule.id} paused; resume_schedule starts it again."

    @work_tool(name="resume_schedule")
    async def resume(self, caller: Caller, schedule_id: ScheduleId) -> str:
        """Resume a paused schedule from its next slot (missed slots are not made up)."""
        async with self._turn_of(schedule_id):
            schedule = await self._mine(caller, schedule_id, "resume")
            if schedule.status is ScheduleStatus.ACTIVE:
                upcoming = when_text(await self.next_run(schedule.stored_id), self.zone)
                return f"Schedule #{schedule.id} is not paused; next run: {upcoming}."
            subject = f"**schedule #{schedule.id}**"
            await decided_by_own_words(self.notifier, caller, RESUME, subject, unclear=self.unclear)
            if schedule.workspace not in {w.name for w in self.workspaces.all()}:
                raise ToolError(f"the workspace {schedule.workspace} of schedule #{schedule.id} still does not exist")
            if schedule.user_id is None or schedule.user_id not in self.settings.users.allowed_user_ids:
                # a run acts as its maker, who acts as nobody now: resumed, it would only pause again at its next run
                raise ToolError(
                    f"schedule #{schedule.id} acts as {schedule.user_name or 'its maker'}, who is no longer an allowed "
                    "user: it stays paused (make a new one)"
                )
            if self.workspaces.is_self(schedule.workspace) and not self.crew.is_owner(maker_of(schedule)):
                # a run acts as its maker, and members reach none of `self`: resumed, it would only pause again
                raise OwnersOnly(
                    f"schedule #{schedule.id} works on the bot's own code and its maker is not an owner: it stays "
                    "paused (an owner can make a new one)"
                )
            now = utcnow()
            next_slot = first_run(schedule, self.zone, now)  # the slots missed while paused are not made up
            if next_slot is None:
                raise ToolError(f"schedule #{schedule.id} has no run left (its time has passed): make a new one")
            if not await self.store.schedules.move(
                schedule.stored_id, [ScheduleStatus.PAUSED], ScheduleStatus.ACTIVE, next_run_at=next_slot, note=None
            ):
                raise ToolError(f"schedule #{schedule.id} is no longer paused")
            schedule.next_run_at = next_slot
            try:
                await self.firing.arm(schedule)
            except Exception:  # not firing: still paused
                await self.store.schedules.update(schedule.stored_id, status=ScheduleStatus.PAUSED)
                raise
            return f"Schedule #{schedule.id} resumed; next run: {when_text(next_slot, self.zone)}."

    async def _pause(self, schedule: Schedule, why: str | None) -> bool:
        moved = await self.store.schedules.move(
            schedule.stored_id, [ScheduleStatus.ACTIVE], ScheduleStatus.PAUSED, note=why, next_run_at=None
        )
        await self.firing.pause(schedule.stored_id)
        return moved

    async def _active_task(self, schedule: Schedule) -> Task | None:
        if schedule.last_task_id is None:
            return None
        task = await self.store.get_task(schedule.last_task_id)
        return task if task is not None and task.status.is_active else None

    # ---- a run --------------------------------------------------------------------------------
    async def _fire(self, schedule_id: int) -> None:
        """APScheduler's job: one run of the schedule; nothing it raises stops the scheduler."""
        try:
            await self.run(schedule_id)
        except Exception:
            log.exception("schedule #%s: the run failed", schedule_id)

    async def run(self, schedule_id: int) -> Task | None:
        """One run, as the maker would start it; the task it started, or None (skipped, paused, refused)."""
        async with self._turn_of(schedule_id):
            return await self._run(schedule_id)

    async def _run(self, schedule_id: int) -> Task | None:
        schedule = await self.store.schedules.get(schedule_id)
        if schedule is None or schedule.status is not ScheduleStatus.ACTIVE:
            await self.firing.remove(schedule_id)
            return None
        now = utcnow()
        upcoming = await self.next_run(schedule.stored_id)  # the firing has moved past this slot before running it
        once = schedule.at is not None
        record = {"next_run_at": upcoming, "last_run_at": now}
        if schedule.user_id is None or schedule.user_id not in self.settings.users.allowed_user_ids:
            # a run acts as its maker: one whose maker is unknown acts as nobody, so it does not run at all
            await self._pause_and_say(schedule, f"{schedule.user_name or 'its maker'} is no longer an allowed user")
            return None
        if schedule.workspace not in {w.name for w in self.workspaces.all()}:
            await self._pause_and_say(schedule, f"its workspace `{schedule.workspace}` no longer exists")
            return None
        if self.workspaces.is_self(schedule.workspace) and not self.crew.is_owner(maker_of(schedule)):
            # members reach none of `self`: refused at every run, it would hand the owners a request each time
            await self._pause_and_say(schedule, "it works on the bot's own code, and its maker is no longer an owner")
            return None
        slot = schedule.next_run_at
        if slot is not None and (started := await self.store.task_of_schedule_since(schedule.stored_id, slot)):
            # this slot's run was started, and the bot stopped before it noted so on the schedule: noted now, once
            await self.store.schedules.update(
                schedule.stored_id, last_task_id=started.stored_id, **record, **done_if(once)
            )
            return None
        if (running := await self._active_task(schedule)) is not None:
            note = f"⏭ skipped {when_text(now, self.zone)}: task #{running.id} still running"
            await self.store.schedules.update(schedule.stored_id, note=note, **record)
            await self._say(
                schedule,
                f"⏭ Schedule #{schedule.id} skipped this run: task #{running.id} of its previous run is still "
                f"{running.status.value.replace('_', ' ')}. Next run: {when_text(upcoming, self.zone)}.",
            )
            return None
        done = done_if(once)
        try:
            task = await self.crew.start_scheduled(maker_of(schedule), schedule)
        except ToolError as err:
            await self.store.schedules.update(schedule.stored_id, note=f"✗ not started: {err}", **record, **done)
            await self._say(schedule, f"✗ Schedule #{schedule.id} could not start its run: {err}.")
            return None
        await self.store.schedules.update(schedule.stored_id, note=None, last_task_id=task.stored_id, **record, **done)
        if once:  # its one run: nothing is left to fire (a Temporal Schedule with no action left is deleted)
            await self.firing.remove(schedule.stored_id)
        return task

    async def _pause_and_say(self, schedule: Schedule, why: str) -> None:
        if await self._pause(schedule, why):  # one message, however often it would have fired
            await self._say(
                schedule,
                f"⏸ Schedule #{schedule.id} is paused: {why}. Resume it when that is fixed, or cancel it (/schedules).",
            )

    async def _say(self, schedule: Schedule, markdown: str) -> None:
        try:
            await self.notifier.send(schedule.chat_id, markdown)
        except Exception as err:  # the chat may be gone; the schedule's record still says what happened
            log.warning("schedule #%s: could not tell its chat: %s", schedule.id, err)


def done_if(once: bool) -> dict[str, ScheduleStatus]:
    """A one-off schedule is done after its one run."""
    return {"status": ScheduleStatus.DONE} if once else {}
