"""A schedule's run as Temporal sees it (TASK_ENGINE=temporal): the Temporal Schedule starts this workflow at each
slot, and its one activity, on the bot's schedule queue, is the run (agents/work/schedule_book.ScheduleBook.run).

While the bot is down the activity waits on that queue; the schedule's overlap policy (skip) lets no second run
start meanwhile, so the slots missed while the bot was down become one run when it is back.

Temporal re-imports this module in its workflow sandbox: it has no side effects.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

SCHEDULED_RUN = "AgentScheduledRun"
FIRE_SCHEDULE = "agentlab.fire_schedule"
WAIT_FOR_BOT = timedelta(days=7)  # a run the bot has not taken by then is dropped; the next slot starts another


@workflow.defn(name=SCHEDULED_RUN)
class ScheduledRun:
    @workflow.run
    async def run(self, schedule_id: int) -> None:
        await workflow.execute_activity(
            FIRE_SCHEDULE,
            schedule_id,
            schedule_to_close_timeout=WAIT_FOR_BOT,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
