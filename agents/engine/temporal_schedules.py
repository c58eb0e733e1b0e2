"""TASK_ENGINE=temporal: schedules are Temporal Schedules, created, paused, resumed and deleted with the bot's, so
their slots fire on the cluster even while the bot is down.

Each schedule of the store is the Temporal Schedule `agentlab-<db token>-schedule-N`: its spec is the schedule's
cron (in TIMEZONE), its one time (`at`: one action left) or its interval (counted from its making); its action starts
`ScheduledRun` (schedule_workflow.py) on the bot's own schedule queue, whose one activity this bot's worker runs: the
run itself (`ScheduleBook.run`: the maker's role, the skipped overlap, the missing workspace, as in the local firing).
Overlap policy skip: while a run waits for the bot (down), the later slots start nothing; the bot back, that one run
happens. At start the bot makes the cluster match its store: a schedule the cluster lacks (a dev server restarted, a
new namespace, a bot that ran TASK_ENGINE=local until now) is created, paused if it is paused in the store, and run
once at once when its stored slot passed meanwhile (a run missed while the bot was down runs once when it starts, as
under the local engine); a paused one is paused there. Each Temporal Schedule carries the creation time of its row
(a memo): one left on the cluster by an earlier database at the same path (restored, or deleted to start afresh),
whose row number a new schedule has now, is replaced rather than trusted with its old spec.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from datetime import UTC, datetime, timedelta, tzinfo

from temporalio import activity
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleCalendarSpec,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker as TemporalWorker

from agents.core.errors import ToolError
from agents.core.models import Schedule as ScheduleRecord
from agents.core.models import ScheduleStatus
from agents.core.settings import Settings
from agents.engine import cluster
from agents.engine.schedule_workflow import FIRE_SCHEDULE, ScheduledRun
from agents.work.orphans import instance_token
from agents.work.schedule_book import Fire
from agents.work.schedule_timing import crontab_expressions

log = logging.getLogger(__name__)
RECONNECT_SECONDS = 15.0
ROW_MEMO = "agentlab_row"  # the memo naming the store row a Temporal Schedule was made for (its creation time)


def schedule_queue(settings: Settings) -> str:
    """The bot's own queue for its schedules' runs (apart from its chat queue: each queue has one kind of worker)."""
    return f"{cluster.bot_queue(settings)}.schedules"


def zone_name(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or str(zone)


def spec_of(schedule: ScheduleRecord, zone: tzinfo) -> tuple[ScheduleSpec, ScheduleState]:
    """The Temporal spec (and state) of a stored schedule: cron in TIMEZONE (crontab weekdays: 0 = Sunday, as
    Temporal reads them), one calendar time with one action left, or an interval counted from its making."""
    if schedule.cron:
        # the weekdays as names, as the bot reads them (`1/2`: Mon, Wed, Fri); both day fields set: either day
        expressions = crontab_expressions(schedule.cron)
        return ScheduleSpec(cron_expressions=expressions, time_zone_name=zone_name(zone)), ScheduleState()
    if schedule.at is not None:
        at = schedule.at.astimezone(UTC)
        calendar = ScheduleCalendarSpec(
            second=[ScheduleRange(at.second)],
            minute=[ScheduleRange(at.minute)],
            hour=[ScheduleRange(at.hour)],
            day_of_month=[ScheduleRange(at.day)],
            month=[ScheduleRange(at.month)],
            year=[ScheduleRange(at.year)],
            day_of_week=[ScheduleRange(0, 6)],
        )
        return (
            ScheduleSpec(calendars=[calendar], time_zone_name="UTC"),
            ScheduleState(limited_actions=True, remaining_actions=1),
        )
    every = timedelta(minutes=schedule.every_minutes or 1)
    first = schedule.created_at + every
    offset = timedelta(seconds=int(first.timestamp()) % int(every.total_seconds()))
    return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every, offset=offset)]), ScheduleState()


class TemporalFiring:
    """The `Firing` of TASK_ENGINE=temporal: Temporal Schedules, and this bot's worker for their runs."""

    def __init__(self, settings: Settings) -> None:
        self.settings, self.zone = settings, settings.schedules.zone
        self.instance = instance_token(settings.paths.database_path)
        self.client: Client | None = None
        self._fire: Fire | None = None
        self._serving: asyncio.Task[None] | None = None
        self._connecting = asyncio.Lock()
        self._pending: list[ScheduleRecord] = []  # the store's schedules, made to match once the cluster is reached

    def schedule_id(self, schedule_id: int) -> str:
        return f"agentlab-{self.instance}-schedule-{schedule_id}"

    def handle(self, schedule_id: int) -> ScheduleHandle:
        if self.client is None:
            raise ToolError(cluster.unreachable(self.settings))
        return self.client.get_schedule_handle(self.schedule_id(schedule_id))

    # ---- Firing -------------------------------------------------------------------------------
    async def start(self, schedules: list[ScheduleRecord], fire: Fire) -> None:
        self._fire = fire
        self._pending = list(schedules)
        if await self._connect() is None:  # the cluster keeps the schedules meanwhile; their runs wait for the bot
            self._serving = asyncio.create_task(self._reconnect(), name="temporal-schedules-reconnect")

    async def arm(self, schedule: ScheduleRecord) -> None:
        """Create the schedule on the cluster, or unpause it there (a resumed one keeps its spec)."""
        await self._require()
        described = await self._described_or_created(schedule)
        if described is not None and described.schedule.state.paused:
            await self.handle(schedule.stored_id).unpause(note="resumed in the chat")

    async def pause(self, schedule_id: int) -> None:
        """Best effort: a run the cluster still starts finds the schedule paused in the store, and pauses it again."""
        if await self._connect() is not None:
            with contextlib.suppress(RPCError):  # gone there already: nothing fires it
                await self.handle(schedule_id).pause(note="paused by the bot")

    async def remove(self, schedule_id: int) -> None:
        """Best effort, as `pause`: a run of a schedule the store no longer has active removes it again."""
        if await self._connect() is not None:
            with contextlib.suppress(RPCError):
                await self.handle(schedule_id).delete()

    async def next_run(self, schedule_id: int) -> datetime | None:
        if self.client is None:
            return None
        try:
            described = await self.handle(schedule_id).describe()
        except RPCError:
            return None
        if described.schedule.state.paused or not described.info.next_action_times:
            return None
        return described.info.next_action_times[0]

    def close(self) -> None:
        if self._serving is not None:
            self._serving.cancel()

    async def stopped(self, timeout: float) -> bool:
        """`close`, then wait (at most `timeout` seconds) for this bot's schedule worker to have shut down; whether it
        has (left to the event loop's end, a worker cancelled mid-poll was seen to hold that end up)."""
        serving = self._serving
        self.close()
        if serving is None:
            return True
        done, _ = await asyncio.wait({serving}, timeout=timeout)
        return bool(done)

    # ---- the cluster --------------------------------------------------------------------------
    async def _require(self) -> None:
        if await self._connect() is None:
            raise ToolError(f"{cluster.unreachable(self.settings)}: schedules cannot be changed now; try again later")

    async def _connect(self) -> Client | None:
        async with self._connecting:
            if self.client is not None:
                return self.client
            try:
                client = await cluster.connect(self.settings, identity=f"agentlab-bot-{self.instance}-schedules")
            except ConnectionError as err:
                log.warning("schedules: %s", err)
                return None
            self.client = client
            pending, self._pending = self._pending, []
            for schedule in pending:  # the cluster made to match the store
                try:
                    await self._match(schedule)
                except Exception as err:
                    log.warning("schedule #%s could not be set on the cluster: %s", schedule.id, err)
            self._serving = asyncio.create_task(self._serve(client), name="temporal-schedules")
            return client

    async def _reconnect(self) -> None:
        while await self._connect() is None:
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _serve(self, client: Client) -> None:
        """This bot's worker for its schedules' runs (the workflow and the run's activity, on its own queue)."""

        @activity.defn(name=FIRE_SCHEDULE)
        async def fire(schedule_id: int) -> None:
            assert self._fire is not None
            await self._fire(schedule_id)

        worker = TemporalWorker(
            client, task_queue=schedule_queue(self.settings), workflows=[ScheduledRun], activities=[fire]
        )
        async with worker:
            await asyncio.Event().wait()

    async def _match(self, schedule: ScheduleRecord) -> None:
        described = await self._described_or_created(schedule)
        if described is None:  # created now: a slot the store says passed meanwhile runs once, at once
            missed = schedule.next_run_at is not None and schedule.next_run_at <= datetime.now(UTC)
            if schedule.status is ScheduleStatus.ACTIVE and missed:
                await self.handle(schedule.stored_id).trigger()
        elif schedule.status is ScheduleStatus.PAUSED and not described.schedule.state.paused:
            await self.handle(schedule.stored_id).pause(note="paused by the bot")

    async def _described_or_created(self, schedule: ScheduleRecord) -> ScheduleDescription | None:
        """The schedule as the cluster has it, or None after creating it there (it was missing, or was made for
        another row of that number: an earlier database's)."""
        handle = self.handle(schedule.stored_id)
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status is not RPCStatusCode.NOT_FOUND:
                raise
        else:
            made_for = await described.memo_value(ROW_MEMO, None)
            if made_for is None or made_for == _row_stamp(schedule):  # None: made before rows were stamped
                return described
            log.warning("schedule #%s: the cluster's was made for another row (%s): replaced", schedule.id, made_for)
            await handle.delete()
        await self._create(schedule)
        return None

    async def _create(self, schedule: ScheduleRecord) -> None:
        assert self.client is not None
        spec, state = spec_of(schedule, self.zone)
        state = dataclasses.replace(state, paused=schedule.status is ScheduleStatus.PAUSED)
        await self.client.create_schedule(
            self.schedule_id(schedule.stored_id),
            Schedule(
                action=ScheduleActionStartWorkflow(
                    ScheduledRun.run,
                    schedule.stored_id,
                    id=f"{self.schedule_id(schedule.stored_id)}-run",
                    task_queue=schedule_queue(self.settings),
                ),
                spec=spec,
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
                state=state,
            ),
            memo={ROW_MEMO: _row_stamp(schedule)},
        )


def _row_stamp(schedule: ScheduleRecord) -> str:
    """What tells this store row from an earlier database's row of the same number: its creation time."""
    return schedule.created_at.astimezone(UTC).isoformat()
