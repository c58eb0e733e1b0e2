"""What the bot takes on a runner's word (TASK_ENGINE=temporal), and what it does not.

Each test feeds a forged TaskReport / NotifyCall (as a hostile runner, or a worker that took over its runner, could
send through Temporal) to the bot-side code that consumes it (agents/engine/task_reports.py TaskReports.apply,
agents/engine/front.py ChatDesk.notify). No Temporal server is started: every test is unit-level."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from agents.core.models import Task, UsageRecord, WorkerKind, utcnow
from agents.engine.front import ChatDesk, TemporalEngine, WorkflowLines
from agents.engine.payloads import NotifyCall, ShownMessage, TaskReport
from agents.engine.task_reports import RUN_EVENT, TaskReports
from agents.inputs.attachments import Attachments
from agents.llm.usage import cost_today
from agents.store.database import Store
from agents.workspaces.folders import Workspaces
from telegram_bot.render.markdown import markdown_to_html
from tests.conftest import git
from tests.support.git_repos import make_user_repo
from tests.support.settings import offline_settings

EVIL = "https://evil.example/phish"


class Outbox:
    """The bot's outbox: records everything it is asked to deliver."""

    def __init__(self) -> None:
        self.delivered: list[dict] = []

    async def deliver(
        self, chat_id, markdown, *, buttons=None, reply_to=None, kind="notice", task_id=None, shown_record=None
    ):
        self.delivered.append(dict(chat_id=chat_id, text=markdown, buttons=buttons, reply_to=reply_to, kind=kind))
        return len(self.delivered)


class Recorder:
    """A Notifier that records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def send(self, chat_id, markdown, *, buttons=None, reply_to=None, literal=False):
        self.calls.append(("send", chat_id, markdown, literal))
        return 500 + len(self.calls)

    async def edit(self, chat_id, message_id, markdown, *, buttons=None, literal=False):
        self.calls.append(("edit", chat_id, message_id, markdown, literal))

    async def send_document(self, chat_id, filename, data, caption="", *, literal=False):
        self.calls.append(("send_document", chat_id, filename, caption, literal))

    async def send_photo(self, chat_id, data, caption=""):
        self.calls.append(("send_photo", chat_id, caption))

    async def send_album(self, chat_id, pictures):
        self.calls.append(("send_album", chat_id))

    async def ask_owners(self, chat_id, markdown, *, buttons=None, literal=False):
        self.calls.append(("ask_owners", chat_id, markdown, literal))
        return [(1, 1)]


def workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    make_user_repo(tmp_path / "ws" / "calc")
    return tmp_path / "ws"


async def setup(tmp_path: Path, criteria: list[str] | None = None, **settings_values):
    root = workspace(tmp_path)
    store = await Store.open(tmp_path / "db.sqlite")
    task = await store.add_task(
        Task(chat_id=1, user_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i"),
        criteria,
    )
    outbox = Outbox()
    settings = offline_settings(root, runner_remote="origin", **settings_values)
    reports = TaskReports(settings, store, outbox, Workspaces(root))
    return store, task, outbox, reports, settings


def links(markdown: str) -> list[str]:
    return re.findall(r'<a href="([^"]*)"', markdown_to_html(markdown))


# ---- forged run markers in the report's events -----------------------------------------------------------------


async def test_report_events_cannot_forge_the_bots_run_markers(tmp_path: Path) -> None:
    """The bot keeps its workflow runs as task events of kind `workflow` ("started/recorded/ended <id>"), and
    `_open_run` decides from them which workflow the task follows (Resume, reattach at start-up). A report's events
    are stored as they come: a runner sending ["workflow", "started <another task's workflow id>"] makes the bot
    follow that workflow on the next Resume / restart (and apply that other task's report to this task)."""
    store, task, outbox, reports, _ = await setup(tmp_path)
    try:
        foreign = "agentlab-x-task-999"
        report = TaskReport(
            task_id=task.stored_id,
            status="interrupted",
            error="runner stopped",
            events=[[RUN_EVENT, f"started {foreign}"], ["runner", "running on r1"]],
        )
        await reports.apply(task, "agentlab-x-task-1", report)
        opened = await TemporalEngine._open_run(SimpleNamespace(store=store), task.stored_id)  # type: ignore[arg-type]  # the one attribute it reads
        forged = [e.detail for e in await store.task_events(task.stored_id) if e.kind == RUN_EVENT]
    finally:
        await store.close()
    assert opened is None, f"after the run's report, the bot would follow the runner-named workflow {opened!r}"
    assert f"started {foreign}" not in forged, forged


# ---- usage rows: the bot's daily budget ----------------------------------------------------------------------


async def test_report_usage_cannot_lower_the_bots_spending_today(tmp_path: Path) -> None:
    """Negative token counts in a usage row subtract from the bot's cost today (DAILY_BUDGET_USD)."""
    store, task, outbox, reports, settings = await setup(tmp_path)
    try:
        real = UsageRecord(agent="chat", model="m", input_tokens=1_000_000, output_tokens=100_000, chat_id=1)
        await store.record_usage(real)
        before = await cost_today(store, settings)
        forged = UsageRecord(agent="worker", model="m", input_tokens=-50_000_000, output_tokens=-5_000_000)
        report = TaskReport(task_id=task.stored_id, status="completed", usage=[forged.model_dump_json()])
        await reports.apply(task, "run-1", report)
        after = await cost_today(store, settings)
    finally:
        await store.close()
    assert before > 0
    assert after >= before, f"the runner's report lowered today's spending from {before:.2f} to {after:.2f} USD"


async def test_report_usage_cannot_be_dated_before_the_run(tmp_path: Path) -> None:
    """A runner dating its usage rows to last week hides today's spending from the bot's daily budget: the rows
    come from a run the bot started today."""
    store, task, outbox, reports, settings = await setup(tmp_path)
    try:
        usage = UsageRecord(
            agent="worker", model="m", input_tokens=2_000_000, output_tokens=0, created_at=utcnow() - timedelta(days=7)
        )
        report = TaskReport(task_id=task.stored_id, status="completed", usage=[usage.model_dump_json()])
        await reports.apply(task, "run-1", report)
        spent = await cost_today(store, settings)
    finally:
        await store.close()
    assert spent > 0, "the run's usage, dated a week back by its runner, is not counted in today's spending"


# ---- verified criteria --------------------------------------------------------------------------------------


async def test_a_malformed_verified_row_does_not_lose_the_report(tmp_path: Path) -> None:
    """A `verified` row whose number is not a number raises in apply: the report is never recorded nor told (the
    summary is lost, the task is left to the queue's crash handling)."""
    store, task, outbox, reports, _ = await setup(tmp_path, criteria=["it works"])
    try:
        report = TaskReport(
            task_id=task.stored_id,
            status="completed",
            verified=[["one", "forged"]],
            shown=[ShownMessage("✅ **Task done**")],
        )
        raised: Exception | None = None
        try:
            await reports.apply(task, "run-1", report)
        except Exception as err:  # noqa: BLE001
            raised = err
        stored = await store.get_task(task.stored_id)
    finally:
        await store.close()
    assert raised is None, f"apply raised {raised!r} on a malformed verified row"
    assert stored is not None and stored.status.is_final, stored


async def test_verified_rows_name_only_the_tasks_criteria(tmp_path: Path) -> None:
    """Criterion numbers the task does not have are not stored (held: the UPDATE matches no row)."""
    store, task, outbox, reports, _ = await setup(tmp_path, criteria=["it works"])
    try:
        report = TaskReport(task_id=task.stored_id, status="completed", verified=[["7", "forged"], ["-1", "x"]])
        await reports.apply(task, "run-1", report)
        criteria = await store.criteria(task.stored_id)
    finally:
        await store.close()
    assert [c.verified for c in criteria] == [False]


# ---- what the bot itself writes around runner-supplied text ----------------------------------------------------


async def test_an_interrupted_reports_error_cannot_put_a_link_in_the_bots_notice(tmp_path: Path) -> None:
    """`tell_interrupted` writes "⚠️ **Task #N** stopped: {error}" with the runner's error as Markdown: the bot's own
    notice (with Resume / Discard) then carries a runner-written link and bold."""
    store, task, outbox, reports, _ = await setup(tmp_path)
    try:
        error = f"the runner lost its disk. **✅ All tests passed** — [Resume here]({EVIL})"
        await reports.apply(task, "run-1", TaskReport(task_id=task.stored_id, status="interrupted", error=error))
    finally:
        await store.close()
    notice = next(d for d in outbox.delivered if "stopped" in d["text"])
    assert EVIL not in links(notice["text"]), notice["text"]
    assert "<b>✅ All tests passed</b>" not in markdown_to_html(notice["text"]), notice["text"]


async def test_a_status_that_is_no_end_cannot_break_out_of_its_code_span(tmp_path: Path) -> None:
    """`_ending` quotes an unknown status in backticks; a status holding a backtick closes the span."""
    store, task, outbox, reports, _ = await setup(tmp_path)
    try:
        status = f"x` [Merge]({EVIL}) `"
        await reports.apply(task, "run-1", TaskReport(task_id=task.stored_id, status=status))
    finally:
        await store.close()
    notice = next(d for d in outbox.delivered if "stopped" in d["text"])
    assert EVIL not in links(notice["text"]), notice["text"]


async def test_a_push_error_cannot_put_a_link_under_the_summary(tmp_path: Path) -> None:
    """`_fetch` writes "its branch `b` did not reach `origin`: {push_error}", appended by the bot to the summary
    (after the runner's quoted report, as the bot's own ⚠ line)."""
    store, task, outbox, reports, _ = await setup(tmp_path)
    try:
        report = TaskReport(
            task_id=task.stored_id,
            status="completed",
            branch=f"agentlab/task-{task.stored_id}-t",
            pushed=False,
            push_error=f"rejected. **Merged into main ✅** [details]({EVIL})",
            shown=[ShownMessage("✅ **Task done**", buttons=None)],
        )
        await reports.apply(task, "run-1", report)
    finally:
        await store.close()
    summary = outbox.delivered[0]["text"]
    assert "⚠" in summary
    assert EVIL not in links(summary), summary


# ---- the summary's buttons and count, as the runner sends them -------------------------------------------------


async def test_a_runners_summary_cannot_carry_a_foreign_web_app_button(tmp_path: Path) -> None:
    """A summary's buttons come from the runner as they are: a web_app button to any address becomes a Mini App
    button in a private chat (Telegram hands it the user's signed launch data, which the review page takes as a
    login), and it also suppresses the bot's own Review button (`with_review` adds none when one is there)."""
    store, task, outbox, reports, _ = await setup(tmp_path, review_url="https://review.example")
    try:
        merge = f"task:merge:{task.stored_id}"
        report = TaskReport(
            task_id=task.stored_id,
            status="completed",
            shown=[ShownMessage("✅ **Task done**", buttons=[[["✔ Merge", merge]], [["🔍 Review", "", EVIL, "x"]]])],
        )
        await reports.apply(task, "run-1", report)
    finally:
        await store.close()
    buttons = outbox.delivered[0]["buttons"] or []
    web_apps = [b.web_app for row in buttons for b in row if b.web_app]
    assert all(url.startswith("https://review.example/") for url in web_apps), web_apps


async def test_a_runners_summary_buttons_act_on_its_own_task_only(tmp_path: Path) -> None:
    """A summary button labelled for this task whose callback acts on another task (Merge of task #999)."""
    store, task, outbox, reports, _ = await setup(tmp_path)
    try:
        report = TaskReport(
            task_id=task.stored_id,
            status="completed",
            shown=[ShownMessage("✅ **Task done**", buttons=[[["🔍 Diff", "task:merge:999"]]])],
        )
        await reports.apply(task, "run-1", report)
    finally:
        await store.close()
    buttons = outbox.delivered[0]["buttons"] or []
    data = [b.data for row in buttons for b in row if b.data]
    assert all(d.rsplit(":", 1)[-1] == str(task.stored_id) for d in data), data


async def test_a_runners_report_shows_a_bounded_number_of_summaries(tmp_path: Path) -> None:
    """Every ShownMessage of the report is delivered: a report with 200 of them floods the chat."""
    store, task, outbox, reports, _ = await setup(tmp_path)
    try:
        shown = [ShownMessage(f"✅ **Task #{task.stored_id} done** ({i})") for i in range(200)]
        await reports.apply(task, "run-1", TaskReport(task_id=task.stored_id, status="completed", shown=shown))
    finally:
        await store.close()
    assert len(outbox.delivered) <= 5, f"{len(outbox.delivered)} messages delivered for one task's end"


# ---- ChatDesk: what a runner's task shows while it runs ----------------------------------------------------------


async def chat_desk(tmp_path: Path) -> tuple[Store, Task, Recorder, ChatDesk]:
    """The bot's ChatDesk (what a runner's task shows in its chat) over a store holding one code task of chat 1."""
    store = await Store.open(tmp_path / "db.sqlite")
    task = await store.add_task(Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i"))
    notifier = Recorder()
    return (
        store,
        task,
        notifier,
        ChatDesk(store, notifier, WorkflowLines(offline_settings(tmp_path)), Attachments(tmp_path / "a")),
    )


async def test_a_runner_speaks_only_into_its_tasks_chat(tmp_path: Path) -> None:
    """Held: NOTIFY naming another chat is refused (ChatDesk._task_in; the workflow's validator too)."""
    from temporalio.exceptions import ApplicationError

    store, task, notifier, desk = await chat_desk(tmp_path)
    try:
        refused = False
        try:
            await desk.notify(NotifyCall(task.stored_id, 2, "send", "hello other chat"))
        except ApplicationError:
            refused = True
    finally:
        await store.close()
    assert refused and not notifier.calls


async def test_a_runner_edits_its_own_tasks_messages_and_keeps_the_filter_but_for_questions(tmp_path: Path) -> None:
    """A runner could edit any message of its task's chat (another task's summary rewritten to ✔) and send anything
    with `literal`, past the bot's secrets filter. Now: its own messages and its task's progress message only, and
    literal only for a question (a message carrying the network question's buttons) and its edits."""
    store, task, notifier, desk = await chat_desk(tmp_path)
    try:
        said = await desk.notify(NotifyCall(task.stored_id, 1, "send", "plain", literal=True))
        question = [[["Allow once", f"net:once:{task.stored_id}"], ["Deny", f"net:deny:{task.stored_id}"]]]
        asked = await desk.notify(NotifyCall(task.stored_id, 1, "send", "may it?", buttons=question, literal=True))
        await desk.notify(NotifyCall(task.stored_id, 1, "edit", "another task's: ✔", message_id=77))
        await desk.notify(NotifyCall(task.stored_id, 1, "edit", "closed", message_id=asked.message_id, literal=True))
        await desk.notify(NotifyCall(task.stored_id, 1, "edit", "own", message_id=said.message_id, literal=True))
    finally:
        await store.close()
    sends = [call for call in notifier.calls if call[0] == "send"]
    edits = [call for call in notifier.calls if call[0] == "edit"]
    assert [literal for *_, literal in sends] == [False, True], sends
    assert [(call[2], call[-1]) for call in edits] == [(asked.message_id, True), (said.message_id, False)], edits


# ---- the branch the report names -------------------------------------------------------------------------------


async def test_a_report_cannot_name_another_tasks_branch(tmp_path: Path) -> None:
    """Held: a branch of another task (or main, or outside agentlab/*) is not fetched nor stored."""
    store, task, outbox, reports, _ = await setup(tmp_path)
    try:
        for branch in ("main", "agentlab/task-999-x", f"agentlab/task-{task.stored_id}-x/../../main", "refs/heads/x"):
            report = TaskReport(task_id=task.stored_id, status="completed", branch=branch, pushed=True)
            await reports.apply(task, f"run-{branch}", report)
            stored = await store.get_task(task.stored_id)
            assert stored is not None and stored.branch is None, (branch, stored.branch)
    finally:
        await store.close()


async def test_a_research_task_gets_no_branch_from_its_runner(tmp_path: Path) -> None:
    """A research task runs read-only and never has a branch; a report naming one (of the right shape) makes it a
    branch task on the bot (Merge / Discard act on what the runner pushed)."""
    root = workspace(tmp_path)
    shared = tmp_path / "shared.git"
    git(tmp_path, "clone", "-q", "--bare", str(root / "calc"), str(shared))
    git(root / "calc", "remote", "add", "origin", str(shared))
    store = await Store.open(tmp_path / "db.sqlite")
    try:
        task = await store.add_task(
            Task(chat_id=1, workspace="calc", worker=WorkerKind.RESEARCH, title="r", instructions="i")
        )
        branch = f"agentlab/task-{task.stored_id}-r"
        clone = tmp_path / "runner"
        git(tmp_path, "clone", "-q", str(shared), str(clone))
        git(clone, "checkout", "-q", "-b", branch)
        (clone / "app.py").write_text("planted by a research run\n")
        git(clone, "commit", "-q", "-am", "planted")
        git(clone, "push", "-q", "origin", branch)
        reports = TaskReports(offline_settings(root, runner_remote="origin"), store, Outbox(), Workspaces(root))
        report = TaskReport(task_id=task.stored_id, status="completed", branch=branch, pushed=True)
        await reports.apply(task, "run-1", report)
        stored = await store.get_task(task.stored_id)
    finally:
        await store.close()
    assert stored is not None and stored.branch is None, f"a research task got the branch {stored.branch}"


# ---- budgets across runners ------------------------------------------------------------------------------------
