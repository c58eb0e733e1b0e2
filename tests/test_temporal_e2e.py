"""TASK_ENGINE=temporal end to end: a real `temporal server start-dev` (one per test process, see conftest), runners
with their own workspace folders cloned from a bare repository, the real bot against the fake Telegram and Anthropic
servers. The runners are real `agentlab runner` processes where a test kills one or outlives the bot; elsewhere the
same runner code is served on the test's event loop (`RunnerHere`), which spares a process start each. One test has
the bot restart and then a runner killed, so their real runner process starts once. A test that proves nothing about
verification runs calc with a test command as cheap as `true` (`cheap_tests`, `cheap_check`): a sandboxed pytest run
is spared at each check; the handled-as-local test keeps calc's pytest, whose verdict comes home from the runner."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import threading
from pathlib import Path
from typing import Any

import pytest

from agents.core.models import Caller, TaskStatus
from agents.doctor import Level, check_task_engine
from tests.conftest import USER_ID, BotHarness, git, text_now
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript, last_user_text, role_of
from tests.support.processes import host_pids, own_sleep
from tests.support.tasks import ended, message_with, start_task, until
from tests.support.temporal import (  # noqa: F401  (fixtures)
    MEMBER,
    Runners,
    cheap_check,
    cheap_tests,
    needs_temporal,
    queue,
    remote,
    runner_env,
    runners,
    tbot,
    temporal_bot,
    workspace_root,
)
from tests.temporal_dev import forwarder, free_port

pytestmark = needs_temporal

temporalio = pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
ME = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="owner")
SLEEP = own_sleep("7")  # a command's argument found again in /proc, unique to this test process


@cheap_tests
async def test_a_runner_runs_the_task_asks_for_network_and_the_bot_merges_its_branch(
    tbot: BotHarness, model: RoleScript, runners: Runners, workspace_root: Path, remote: Path
) -> None:
    runners.serve("a")
    model.add(
        "orchestrator", start_task("calc", "Fix add() in calc.py: it subtracts."), claude_says.text("Task #1 started.")
    )
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": "echo fetched-deps", "network": True}),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add() on the runner."),
    )
    tbot.say("fix add in calc")
    question = await tbot.tg.await_for(lambda: message_with(tbot, "asks for network access", "echo fetched-deps"))
    allow = next(d for d in question.callback_data if d.startswith("net:once:"))
    tbot.tg.press_button(USER_ID, question.message_id, allow)
    task = await ended(tbot, 1)
    assert task.status is TaskStatus.COMPLETED, (task.error, runners.log("a"))
    summary = await tbot.tg.await_for(lambda: message_with(tbot, "Task #1", "Fixed add() on the runner."))
    assert summary.callback_data == ["task:merge:1", "task:diff:1", "task:discard:1"]
    events = [e.detail for e in await tbot.runtime.store.task_events(1)]
    assert "running on a" in events and any("allowed once by the owner" in d for d in events)
    audit = [c.tool for c in await tbot.runtime.store.tool_calls(task_id=1)]
    assert audit == ["run_command", "edit_file"], audit  # the runner's audit rows came home (/log 1)
    # no ask_user on a runner (its .env names no TASK_ENGINE): an answer in the bot's chat would never reach it
    assert "ask_user" not in {t["name"] for t in model.requests["code"][0]["tools"]}
    assert sum(u.agent == "code-worker" for u in await tbot.runtime.store.task_usage(1)) == 3
    assert any("fetched-deps" in (m.text or "") for m in tbot.tg.messages(USER_ID)) or "fetched-deps" in str(
        model.requests["code"][-1]
    )
    # the branch came home through the bare repository; the owner's checkout is untouched until Merge
    assert task.branch in git(remote, "branch", "--format=%(refname:short)").split()
    assert "a + b" in git(workspace_root / "calc", "show", f"{task.branch}:calc.py")
    assert "a - b" in (workspace_root / "calc" / "calc.py").read_text()
    tbot.tg.press_button(USER_ID, summary.message_id, "task:merge:1")
    await tbot.tg.await_for(lambda: "a + b" in text_now(workspace_root / "calc" / "calc.py"))
    doctor = await check_task_engine(tbot.settings)
    assert doctor.level is Level.ok and doctor.detail.endswith("live runners: a"), doctor


@cheap_tests
async def test_a_note_and_cancel_reach_the_task_on_its_runner(
    tbot: BotHarness, model: RoleScript, runners: Runners
) -> None:
    runners.serve("a")
    model.add("orchestrator", start_task("calc", "Run the long job."), claude_says.text("Started."))
    model.add("code", claude_says.tool_use("run_command", {"command": f"sleep {SLEEP}"}))
    tbot.say("run the long job in calc")
    await tbot.tg.await_for(lambda: host_pids(SLEEP), timeout=60)
    progress = await tbot.tg.await_for(lambda: message_with(tbot, "Task #1", "code worker"))
    tbot.tg.send_text(USER_ID, "use the fast path instead", reply_to_message_id=progress.message_id)
    await tbot.tg.await_for(lambda: message_with(tbot, "Note passed to task #1"))
    await tbot.tg.await_for(lambda: "note received" in (progress.text or ""), timeout=5)  # the runner's edit
    tbot.tg.send_command(USER_ID, "/cancel")
    await tbot.tg.await_for(lambda: message_with(tbot, "Task #1 cancelled"), timeout=30)
    await tbot.tg.await_for(lambda: not host_pids(SLEEP), timeout=15)
    task = await tbot.runtime.store.get_task(1)
    assert task.status is TaskStatus.CANCELLED
    # the note was never read (the worker was in its command): the user is told, through the workflow
    await tbot.tg.await_for(lambda: message_with(tbot, "ended before its worker read your note", "fast path"))


@cheap_tests
async def test_an_unreachable_cluster_is_one_sentence_and_the_task_waits_for_resume(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, remote, temporal, queue, model: RoleScript
) -> None:
    model.add("orchestrator", start_task("calc", "Fix add()."), claude_says.text("Started."))
    closed = f"127.0.0.1:{free_port()}"
    async with temporal_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, closed, queue) as bot:
        bot.say("fix add in calc")
        told = await bot.tg.await_for(lambda: message_with(bot, "Task #1", "could not start", "unreachable"))
        assert told.callback_data == ["task:resume:1", "task:discard:1"]
        task = await bot.runtime.store.get_task(1)
        assert task.status is TaskStatus.INTERRUPTED
        assert sum("could not start" in (m.text or "") for m in bot.tg.messages(USER_ID)) == 1
        doctor = await check_task_engine(bot.settings)
        assert doctor.level is Level.fail and "unreachable" in doctor.detail
        # the cluster comes up, a runner too: Resume runs the task, once
        model.add(
            "code",
            claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
            claude_says.text("Fixed add()."),
        )
        port = int(closed.rsplit(":", 1)[1])
        runners = Runners(tmp_path, remote, runner_env(closed, queue, fake_anthropic.url))
        async with forwarder(port, temporal):  # the cluster, where nothing listened before
            try:
                from temporalio.exceptions import WorkflowAlreadyStartedError

                # a start that reached the cluster while its answer was lost (the bot saw an error): the run's id
                # was written down before the start was sent, as the bot does before every start
                engine = bot.runtime.engine
                client = await engine.lines.connect()
                start = await engine.start_of(task)
                run = await engine.next_run(task)
                await engine.start_run(client, run, start)
                runners.serve("late")
                bot.tg.press_button(USER_ID, told.message_id, "task:resume:1")
                task = await ended(bot, 1)
                assert task.status is TaskStatus.COMPLETED, task.error

                async def told_too() -> list | None:  # the run ends once its report was told, after its status
                    found = await bot.runtime.store.task_events(1)
                    return found if f"ended {run}" in [e.detail for e in found] else None

                events = await until(told_too)
                assert "running on late" in [e.detail for e in events]
                runs = [r for r in model.requests["code"] if len(r["messages"]) == 1]  # a run's first request
                assert len(runs) == 1, "the task ran once"
                assert [e.detail for e in events if e.kind == "workflow"] == [
                    f"started {run}",
                    f"recorded {run}",
                    f"ended {run}",
                ]
                with pytest.raises(WorkflowAlreadyStartedError):  # that run's id never starts again
                    await engine.start_run(client, run, start)
            finally:
                await runners.close()


@cheap_tests
async def test_an_api_outage_on_a_runner_interrupts_the_task_and_resume_goes_on_from_its_branch(
    tbot: BotHarness, model: RoleScript, runners: Runners, workspace_root: Path
) -> None:
    """As on the local engine: the worker on the runner fixed add(), then its next call got 529 overloaded. The task
    is interrupted, told once (the runner's summary, with Resume and Diff; no second "stopped" notice), its branch
    came home with the fix, and Resume goes on from there on a runner to a normal end."""
    runners.serve("a")
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py: it subtracts."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.overloaded(),
    )
    tbot.say("fix add in calc")
    summary = await tbot.tg.await_for(lambda: message_with(tbot, "Task #1 interrupted", "overloaded"), timeout=60)
    await until(lambda: _events_with(tbot, 1, "ended "))  # the report was told whole
    task = await tbot.runtime.store.get_task(1)
    assert task.status is TaskStatus.INTERRUPTED, (task.status, runners.log("a"))
    assert {"task:resume:1", "task:diff:1", "task:discard:1"} <= set(summary.callback_data), summary.callback_data
    assert message_with(tbot, "Resume it, or discard it?") is None, "the interruption was told twice"
    assert "a + b" in git(workspace_root / "calc", "show", f"{task.branch}:calc.py"), "the fix did not come home"
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "NOTES.md", "content": "add() fixed\n"}),
        claude_says.text("add() was fixed before the outage; I added a note."),
    )
    tbot.tg.press_button(USER_ID, summary.message_id, "task:resume:1")
    task = await ended(tbot, 1)
    assert task.status is TaskStatus.COMPLETED, (task.error, runners.log("a"))
    assert "a + b" in git(workspace_root / "calc", "show", f"{task.branch}:calc.py"), "the work before was lost"
    assert "add() fixed" in git(workspace_root / "calc", "show", f"{task.branch}:NOTES.md")


async def _events_with(bot: BotHarness, task_id: int, start: str) -> bool:
    return any(e.detail.startswith(start) for e in await bot.runtime.store.task_events(task_id))


@cheap_check
async def test_the_bot_restarted_mid_task_reattaches_then_a_runner_killed_mid_task_hands_it_over(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, temporal, queue, runners: Runners, model: RoleScript
) -> None:
    """Runner a is a real `agentlab runner` process, its start paid once for both halves:
    1. Two tasks on two runners (b is served on the test's loop); the bot stops; one task ends while it is away, the
       other after it is back: the runners outlive the bot, and a completes a task end to end.
    2. Then b stops; a, the one runner left, takes a third task and is SIGKILLed in it: runner c, which comes once a
       holds the task, takes it over from its last push."""
    runners.start("a"), runners.serve("b")
    from temporalio.client import Client

    from agents.engine.cluster import workflow_id
    from agents.engine.workflow import AgentTask

    gates = {"alpha": threading.Event(), "beta": threading.Event()}
    reached: set[str] = set()
    model.add(
        "orchestrator",
        claude_says.tool_uses(
            [
                (
                    "start_task",
                    {"workspace": "calc", "worker": "code", "instructions": f"{tag} notes", "background": True},
                )
                for tag in gates
            ]
        ),
        claude_says.text("Started both."),
    )

    def claude(body: dict) -> dict:
        first_turn = str(body["messages"][0]["content"])
        if role_of(body) != "code" or "Fix add()" in first_turn:
            return model(body)  # the orchestrator, and the third task's worker: scripted
        tag = "alpha" if "alpha" in first_turn else "beta"
        if len(body["messages"]) == 1:
            reached.add(tag)
            gates[tag].wait(60)  # the worker's model call is held while the bot is away
            return claude_says.tool_use("write_file", {"path": f"{tag}.md", "content": f"{tag}\n"})
        return claude_says.text(f"Wrote {tag}.md.")

    fake_anthropic.handler = claude
    async with temporal_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, temporal, queue) as first:
        first.say("write the alpha and beta notes in calc")
        await first.tg.await_for(lambda: len(reached) == 2, timeout=60)  # both runners are in their tasks
        instance = first.runtime.engine.instance
    gates["beta"].set()  # task 2 ends while no bot is running
    client = await Client.connect(temporal)
    beta = client.get_workflow_handle(workflow_id(instance, 2))
    await asyncio.wait_for(beta.result(), 60)
    async with temporal_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, temporal, queue) as second:
        assert (await second.runtime.store.get_task(1)).status is TaskStatus.IN_PROGRESS, "re-attached"
        done = await second.runtime.store.get_task(2)
        assert done.status is TaskStatus.COMPLETED, "its report was applied at start-up"
        await second.tg.await_for(lambda: message_with(second, "Task #2", "Wrote beta.md."))
        assert not message_with(second, "Resume it on its branch")
        gates["alpha"].set()
        task = await ended(second, 1)
        assert task.status is TaskStatus.COMPLETED, task.error
        await second.tg.await_for(lambda: message_with(second, "Task #1", "Wrote alpha.md."))
        assert "alpha" in git(workspace_root / "calc", "show", f"{task.branch}:alpha.md")

        # 2. a runner killed mid-task: b stops first, so the task goes to a
        await runners.here.pop("b").close()
        model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started."))
        model.add(
            "code",
            claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a * b"}),
            claude_says.text("Fixed add()."),  # committed and pushed; calc's check fails: a correction starts
            claude_says.tool_use("run_command", {"command": f"sleep {SLEEP}"}),  # its runner is killed in here
            # the other runner resumes on the pushed branch: the file holds the first runner's change
            claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a * b", "new": "a + b"}),
            claude_says.text("Fixed add() after a takeover."),
        )
        second.say("fix add in calc")
        await second.tg.await_for(lambda: host_pids(SLEEP), timeout=60)
        lines = second.runtime.engine.lines
        handle = lines.handle(lines.followed[3].workflow_id)
        for _ in range(100):  # the push of the first commit is polled: the kill waits until the workflow knows of it
            if await handle.query(AgentTask.last_push):
                break
            await asyncio.sleep(0.1)
        holder = await handle.query(AgentTask.runner)
        assert holder == "a"
        runners.serve("c")
        assert host_pids(SLEEP), "the task's command runs on runner a"
        runners.procs[holder].kill()
        # nothing of the dead runner outlives it: its task's sandboxed command dies with it (bwrap dies with its
        # parent, and the command's PID namespace with bwrap), before any other runner takes the task over
        await second.tg.await_for(lambda: not host_pids(SLEEP), timeout=10)
        task = await ended(second, 3, timeout=90)
        assert task.status is TaskStatus.COMPLETED, task.error
        events = [e.detail for e in await second.runtime.store.task_events(3)]
        assert "running on c" in events
        log = git(workspace_root / "calc", "log", "--format=%an %s", f"main..{task.branch}").splitlines()
        assert len(log) == 2 and all(line.startswith("agentlab ") for line in log), log  # nothing lost
        assert "a + b" in git(workspace_root / "calc", "show", f"{task.branch}:calc.py")
        await second.tg.await_for(lambda: message_with(second, "Task #3", "Fixed add() after a takeover."))
        resumed = str(model.requests["code"][-2]["messages"][0])
        assert "resumed on the same branch" in resumed and "runner running this task was lost" in resumed


def jpeg(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(out, "JPEG", quality=90)
    return out.getvalue()


@cheap_tests
async def test_the_bots_step_limit_and_network_off_bind_its_task_on_a_runner_left_at_its_defaults(
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    temporal: str,
    queue: str,
    runners: Runners,
    model: RoleScript,
) -> None:
    """The bot is set to WORKER_MAX_STEPS=2 and SANDBOX_NETWORK=off; its runner's .env sets neither (60 steps, `ask`).
    As on the local engine, the worker stops after two steps and its `network=true` command is refused without a
    question to the owner (a runner built the task from its own settings: six steps, and the owner was asked to allow
    network the bot forbids)."""
    tool_turns: list[int] = []
    results: list[str] = []
    asked: list[str] = []

    def code(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(m["role"] == "assistant" for m in body["messages"])
        if done:
            results.append(str(body["messages"][-1]["content"]))
        if body.get("tool_choice", {}).get("type") == "none":  # the wrap-up after the step limit: no tool use
            return claude_says.text("Stopped at the step limit.")
        tool_turns.append(done)
        if done == 0:
            return claude_says.tool_use("run_command", {"command": "echo net-probe", "network": True})
        if done < 5:
            return claude_says.tool_use("read_file", {"path": "calc.py"})
        return claude_says.text("Done after six steps.")

    fake_anthropic.handler = lambda body: code(body) if role_of(body) == "code" else model(body)
    async with temporal_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        temporal,
        queue,
        worker_max_steps=2,
        sandbox_network="off",
    ) as bot:
        runners.serve("a")
        said = await bot.runtime.crew.starts.start_one(ME, "calc", "code", "Read calc.py a few times.", True)
        assert said.startswith("Task #1"), said

        async def deny_questions() -> None:  # a question asked all the same is denied, so the run goes on to its end
            while True:
                question = message_with(bot, "asks for network access")
                if question is not None and question.text not in asked:
                    asked.append(question.text)
                    deny = next((d for d in question.callback_data if d.startswith("net:deny:")), None)
                    if deny:
                        bot.tg.press_button(USER_ID, question.message_id, deny)
                await asyncio.sleep(0.1)

        denier = asyncio.create_task(deny_questions())
        try:
            task = await ended(bot, 1, timeout=90)
        finally:
            denier.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await denier
    assert not asked, f"SANDBOX_NETWORK=off on the bot, yet the owner was asked to allow network: {asked}"
    assert len(tool_turns) == 2, f"WORKER_MAX_STEPS=2 on the bot, yet the worker took {len(tool_turns)} steps"
    assert "SANDBOX_NETWORK=off" in results[0], f"the network=true command was not refused: {results[0][:300]}"
    assert task.status is TaskStatus.BLOCKED, ("stopped at the step limit, as locally", task.status, task.result)


async def test_a_task_on_a_runner_is_handled_as_a_local_one(
    tbot: BotHarness, model: RoleScript, runners: Runners, workspace_root: Path, remote: Path, tmp_path: Path
) -> None:
    """The bot (its workspaces and data under tmp_path), runners a and b (each under runner-NAME) share no path: a
    photo reaches the worker and its worktree, Diff shows the fetched branch, /log lists the runner's tool calls,
    Discard deletes the branch here and on the shared remote, and research runs on a runner too."""
    runners.serve("a"), runners.serve("b")
    spec = b"%PDF-1.4\n/Type /Page\n" + bytes(range(256)) * 5_000  # 1.3 MB: two parts over the workflow
    model.add("orchestrator", claude_says.text("Got the spec."))
    tbot.tg.send_document(USER_ID, spec, "spec.pdf", "application/pdf", caption="the spec")
    await tbot.tg.await_for(lambda: message_with(tbot, "Got the spec."))
    model.add(
        "orchestrator",
        claude_says.tool_use(
            "start_task",
            {
                "workspace": "calc",
                "worker": "code",
                "instructions": "Fix add() in calc.py, as the picture shows.",
                "background": True,
                "attachments": [1, 2],
                "save_attachments": True,
            },
        ),
        claude_says.text("Task #1 started."),
    )
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": "ls .agentlab/attachments; git status --short"}),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add() as pictured."),
    )
    tbot.tg.send_photo(USER_ID, jpeg(640, 480), width=640, height=480, caption="fix add in calc like this as specified")
    task = await ended(tbot, 1)
    assert task.status is TaskStatus.COMPLETED, (task.error, runners.log("a"), runners.log("b"))
    first = model.requests["code"][0]["messages"][0]["content"]
    image = next(b for b in first if b["type"] == "image")
    kept = {p.suffix: p.read_bytes() for p in (tmp_path / "data" / "attachments" / str(USER_ID)).iterdir()}
    assert base64.b64decode(image["source"]["data"]) == kept[".jpg"]
    document = next(b for b in first if b["type"] == "document")
    assert base64.b64decode(document["source"]["data"]) == spec == kept[".pdf"]
    assert ".agentlab/attachments/2-photo.jpg" in first[-1]["text"]
    listing = last_user_text(model.requests["code"][1])
    assert "2-photo.jpg" in listing and "1-spec.pdf" in listing, listing
    assert "??" not in listing, "the files are in the runner's worktree, ignored by git"
    assert not (tmp_path / "data-worktrees").exists(), "the bot made no worktree of its own"
    summary = await tbot.tg.await_for(lambda: message_with(tbot, "Task #1", "Fixed add() as pictured."))
    assert "Files: calc.py" in summary.text and "1 fixed" in summary.text, summary.text  # the runner's verdict
    review = await tbot.runtime.store.reviews.review(1)  # the review page's record came with the runner's report
    assert review and {"id": "test_calc.py::test_add", "outcome": "fixed"} in review["tests"], review

    tbot.tg.press_button(USER_ID, summary.message_id, "task:diff:1")  # from the fetched branch, not a worktree
    diff = await tbot.tg.await_for(lambda: next((m for m in tbot.tg.messages(USER_ID) if m.kind == "document"), None))
    assert diff.filename == "task-1.diff" and b"+    return a + b" in diff.data, diff.data[:500]
    tbot.tg.send_command(USER_ID, "/log 1")
    log = await tbot.tg.await_for(
        lambda: next((m for m in tbot.tg.messages(USER_ID) if m.filename == "task-1-log.txt"), None)
    )
    assert b"run_command" in log.data and b"edit_file" in log.data
    tbot.tg.send_command(USER_ID, "/task 1")
    detail = await tbot.tg.await_for(lambda: message_with(tbot, "Task #1 · completed", "Tool calls: 2"))
    assert "running on" in detail.text and "Branch: agentlab/" in detail.text, detail.text

    tbot.tg.press_button(USER_ID, summary.message_id, "task:discard:1")
    await tbot.tg.await_for(lambda: message_with(tbot, "Task #1 was discarded", "was deleted"))
    assert not message_with(tbot, "could not be deleted"), runners.log("a")
    assert task.branch not in git(remote, "branch", "--format=%(refname:short)").split(), "gone from the remote"
    assert task.branch not in git(workspace_root / "calc", "branch", "--format=%(refname:short)").split()

    model.add(
        "orchestrator",
        claude_says.tool_use("start_research", {"workspace": "calc", "request": "How could calc be better?"}),
        claude_says.text("Research started."),
    )
    model.add(
        "research",
        claude_says.tool_use("read_file", {"path": "calc.py"}),
        claude_says.text("## Plan\n1. Add a docstring to add()."),
    )
    tbot.say("how could calc be better?")
    proposal = await tbot.tg.await_for(lambda: message_with(tbot, "Proposal #1", "Add a docstring"), timeout=60)
    assert proposal.callback_data == ["proposal:approve:1", "proposal:reject:1"]
    research = await ended(tbot, 2)
    assert research.status is TaskStatus.COMPLETED and research.result == "proposal #1"
    events = [e.detail for e in await tbot.runtime.store.task_events(2)]
    assert "running on a" in events or "running on b" in events, events
    assert (await tbot.runtime.store.get_proposal(1)).body.startswith("## Plan")

    # a member's task on a runner: its network question goes to the owner, as the bot's roles say
    model.add("orchestrator", start_task("calc", "Fetch the data."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": "echo from-the-network", "network": True}),
        claude_says.text("Could not fetch it."),
    )
    tbot.tg.send_text(MEMBER, "fetch the data in calc", username="mia")
    question = await tbot.tg.await_for(lambda: message_with(tbot, "asks for network access", "from-the-network"))
    assert "only an owner can answer" in question.text and "@mia" in question.text
    await tbot.tg.await_for(
        lambda: next((m for m in tbot.tg.messages(MEMBER) if "I've asked an owner" in (m.text or "")), None)
    )
    assert not any(d.startswith("net:") for m in tbot.tg.messages(MEMBER) for d in m.callback_data)
    tbot.tg.press_button(USER_ID, question.message_id, next(d for d in question.callback_data if "deny" in d))
    member_task = await ended(tbot, 3)
    assert member_task.user_id == MEMBER
    decisions = [e.detail for e in await tbot.runtime.store.task_events(3) if e.kind == "network"]
    assert any(d.startswith("denied by the owner") for d in decisions), decisions
