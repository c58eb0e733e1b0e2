"""The Temporal cluster as agentlab uses it: connecting, the queue names, a task's workflow id, live runners."""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import timedelta

from temporalio.client import Client

from agents.core.settings import Settings
from agents.work.orphans import instance_token

CONNECT_SECONDS = 5.0


def bot_queue(settings: Settings) -> str:
    """The bot's own queue: the chat side of its tasks (NOTIFY). Named after its database, so two bots sharing a
    cluster and a task queue never take each other's chat messages."""
    return f"{settings.engine.temporal_task_queue}.bot.{instance_token(settings.paths.database_path)}"


def runner_queue(settings: Settings, name: str) -> str:
    """A runner's own queue: pokes for the tasks it runs."""
    return f"{settings.engine.temporal_task_queue}.runner.{name}"


def runner_name(settings: Settings) -> str:
    return settings.engine.runner_name or f"{socket.gethostname()}-{os.getpid()}"


def workflow_id(instance: str, task_id: int, run: int = 1) -> str:
    """One id per run of a task of one bot (its database): the first run, and one more for each Resume after a run
    that ended. The cluster refuses a second start under an id (agents/engine/front.py)."""
    return f"agentlab-{instance}-task-{task_id}" + (f"-run-{run}" if run > 1 else "")


async def connect(settings: Settings, timeout: float = CONNECT_SECONDS, identity: str | None = None) -> Client:
    """A client of TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE; raises ConnectionError with one sentence when unreachable."""
    try:
        async with asyncio.timeout(timeout):
            return await Client.connect(
                settings.engine.temporal_address,
                namespace=settings.engine.temporal_namespace,
                identity=identity or runner_name(settings),
            )
    except Exception as err:
        raise ConnectionError(unreachable(settings, err)) from None


def unreachable(settings: Settings, err: BaseException | None = None) -> str:
    why = f" ({type(err).__name__}: {str(err)[:120]})" if err is not None and str(err) else ""
    return f"the Temporal server at {settings.engine.temporal_address} is unreachable{why}"


async def live_runners(client: Client, settings: Settings) -> list[str]:
    """Runners polling the shared queue for tasks in the last minute or so (Temporal keeps recent pollers)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    request = DescribeTaskQueueRequest(
        namespace=settings.engine.temporal_namespace,
        task_queue=TaskQueue(name=settings.engine.temporal_task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    )
    response = await client.workflow_service.describe_task_queue(request, timeout=timedelta(seconds=CONNECT_SECONDS))
    return sorted({p.identity for p in response.pollers})
