"""Wiring: build the store, client, workspaces, task engine, crew, orchestrator and transcriber from settings; shut them
down.

Start-up work nobody waits on yet (starting the speech process when VOICE_PRELOAD asks for it, indexing every
workspace for symbol hints) is not done
while the bot starts, nor while a user's turn is in flight: it begins once the first turn has its answer (or
START_UP_GRACE_SECONDS passed without a message) and no turn has been in flight for a second, one job after the
other. A message sent the moment the bot polls is answered at warm speed; a voice note sent before the model is
loaded starts the speech process itself (and says so): by default the bot idles without the speech model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anthropic

from agents.chat.orchestrator import Orchestrator
from agents.chat.symbol_hints import SymbolHints
from agents.core.actions import Action, button
from agents.core.models import Task, TaskEvent, TaskStatus
from agents.core.protocols import ModelState, Notifier, SpeechToText, TaskEngine
from agents.core.secrets_filter import SecretsFilter, load_shapes
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.core.user_turns import UserTurns
from agents.github.api import GitHubClient
from agents.github.webhook import WebhookServer
from agents.inbound.github_inbox import GitHubInbox
from agents.inputs.speech_process import SpeechProcess
from agents.llm.client import make_client
from agents.llm.tool_loop import SdkModel
from agents.repo_map.maps import RepoMap
from agents.review.pages import TaskPages
from agents.review.server import InChat, ReviewServer
from agents.sandbox import task_disk
from agents.sandbox.bwrap import NetworkPolicy, SandboxProbe, bwrap_path
from agents.sandbox.network_gate import NetworkGate
from agents.sandbox.task_limits import sandbox_limit_warnings
from agents.sandbox.temp_folders import sweep_leftovers
from agents.store.database import Store
from agents.store.delivery import Deliveries, owed
from agents.work.access import StillAllowed, task_number
from agents.work.chat_actions import ChatActions
from agents.work.chat_queries import ChatQueries
from agents.work.crew import Crew
from agents.work.lookups import task_line
from agents.work.orphans import instance_token, kill_orphans
from agents.work.pull_requests import PullRequests
from agents.work.questions import Questions
from agents.work.schedule_book import Firing, ScheduleBook
from agents.work.steering import Inboxes
from agents.work.task_collaborators import TaskLines
from agents.work.task_execution import TaskExecutor
from agents.work.task_finish import ANNOUNCED_EVENT, announced
from agents.work.task_queue import TaskQueue
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

START_UP_GRACE_SECONDS = 3.0  # with no message by then, start-up work begins anyway


@dataclass
class Runtime:
    settings: Settings
    store: Store
    client: anthropic.AsyncAnthropic
    workspaces: Workspaces
    notifier: Notifier
    engine: TaskEngine
    crew: Crew
    orchestrator: Orchestrator
    repo_map: RepoMap
    hints: SymbolHints
    chat_actions: ChatActions  # what the chat adapter does to running work besides the crew's desk
    chat_queries: ChatQueries  # what the chat adapter's commands read (bounded to the conversation that asks)
    deliveries: Deliveries
    secrets: SecretsFilter  # the bot's one output filter (`bot_secrets`): every part that shows text was given it
    probe: SandboxProbe  # does bwrap confine commands here: every sandbox spec the bot builds carries it
    transcriber: SpeechToText | None = None
    executor: TaskExecutor | None = None  # TASK_ENGINE=local: runs the tasks here (under Temporal, runners do)
    interrupted: list[Task] = field(default_factory=list)
    schedules: ScheduleBook | None = None
    pull_requests: PullRequests | None = None
    github_inbox: GitHubInbox | None = None
    github_webhook: WebhookServer | None = None
    review_server: ReviewServer | None = None
    github_catch_up: asyncio.Future[None] | None = None  # webhook events a stopped bot acknowledged, handled at start
    turns: UserTurns = field(default_factory=UserTurns)
    start_up: asyncio.Task[None] | None = None  # the deferred start-up work (see the module's docstring)
    decisions: asyncio.Task[None] | None = None  # Merges and Discards a kill cut short, told (they may wait on git)
    sandbox_probe: asyncio.Task[None] | None = None  # does bwrap confine commands here? (a warning if not)
    start_up_seconds: dict[str, float] = field(default_factory=dict)  # what each part of it took

    @classmethod
    async def start(
        cls,
        settings: Settings,
        notifier: Notifier,
        secrets: SecretsFilter,
        client: anthropic.AsyncAnthropic | None = None,
        transcriber: SpeechToText | None = None,
        store: Store | None = None,
        chat_lock: Callable[[int], asyncio.Lock] | None = None,
        sandbox_probe: SandboxProbe | None = None,
    ) -> Runtime:
        """Everything built from `settings` and started. `secrets`: the output filter made by `bot_secrets` (the
        adapter's notifier masks with the same one). `store`: the store the adapter opened first (its notifier
        records there which buttons each message carries), else opened here; either way the runtime closes it.
        `chat_lock`: the adapter's one-turn-per-chat lock, which a GitHub request takes for its user's chat.
        `sandbox_probe`: whether bwrap confines commands here, asked once per probe object; a fresh one when not
        given (a process that starts several runtimes, like the test suite, shares one: the machine is the same).

        One long function because it is the start-up order, read top to bottom: each part is given what it needs in
        its constructor, so a part is built only after those it needs."""
        if settings.sandboxing.sandbox == "off":  # only ever set explicitly
            log.warning(
                "SANDBOX=off: workers' commands and test runs are NOT confined (they can read the bot's keys, "
                "your files and use the network); set SANDBOX=bwrap once bubblewrap works here"
            )
        probe = sandbox_probe or SandboxProbe()
        if settings.sandboxing.sandbox != "off":
            if bwrap_path() is None:  # said before polling; the real probe (a sandboxed `true`) follows it
                await _warn_without_sandbox(probe)
            for warning in sandbox_limit_warnings(settings.network.sandbox_network != "off"):
                log.warning("%s", warning)
        if not settings.users.allowed_user_ids:
            log.warning(
                "ALLOWED_USER_IDS is empty: nobody may use the bot, every message is refused; add your Telegram "
                "user id to ALLOWED_USER_IDS in .env (each refused id is logged as it writes)"
            )
        if swept := await asyncio.to_thread(sweep_leftovers):  # the folders of a bot that was killed
            log.info("removed %d temporary folders a killed bot left behind", len(swept))
        # kept worktrees' own file systems after a restart (agents/sandbox/task_disk.py)
        for done in await task_disk.recover(
            settings.paths.worktrees_dir, settings.sandboxing.sandbox_disk_fs == "auto"
        ):
            log.info("task worktree file system: %s", done)
        # what the first answer would otherwise pay on the event loop (detect-secrets' import) is paid before polling
        started = time.perf_counter()
        await asyncio.to_thread(load_shapes)
        before_polling = {"secret shapes": time.perf_counter() - started}
        store = store or await Store.open(settings.paths.database_path)
        client = client or make_client(settings)
        workspaces = Workspaces(
            settings.paths.workspace_path, settings.paths.bot_repository, settings.paths.private_dirs
        )  # the data and worktrees folders are never a workspace
        turns = UserTurns()
        repo_map = RepoMap(store, turns)
        hints = SymbolHints(repo_map, store, workspaces, turns)
        deliveries = Deliveries(store, notifier)
        github = (
            GitHubClient(settings.github.github_token.get_secret_value(), settings.github.github_api_url)
            if settings.github.github_token
            else None
        )
        pull_requests = PullRequests(settings, store, workspaces, notifier, secrets, github)
        engine, lines, executor = _engine(
            settings,
            store,
            client,
            workspaces,
            notifier,
            repo_map,
            deliveries,
            pull_requests if github else None,
            secrets,
            probe,
        )
        crew = Crew(
            settings,
            store,
            workspaces,
            engine,
            notifier,
            secrets,
            lines.inboxes,
            repo_map,
            pull_requests,
            _firing(settings),
            deliveries=deliveries,
            model=SdkModel(client),
        )
        chat_actions = ChatActions(store, notifier, crew, lines.questions, lines.network)
        chat_queries = ChatQueries(store, settings, crew.access)
        orchestrator = Orchestrator(settings, store, client, workspaces, crew, secrets, hints, turns)
        if transcriber is None:  # importing the voice modules takes a while: not on the event loop
            transcriber = await asyncio.to_thread(_make_transcriber, settings)
        github_inbox = (
            GitHubInbox(settings, store, orchestrator, crew, pull_requests, deliveries, chat_lock)
            if github is not None
            else None
        )
        killed_mid_task = await store.interrupt_running_tasks()  # a killed bot left these in_progress
        if killed_mid_task:  # ... and their commands still running, in sessions of their own
            await asyncio.to_thread(
                kill_orphans, instance_token(settings.paths.database_path), {t.id for t in killed_mid_task if t.id}
            )
        if repaired := await store.repair_approvals_without_task():  # approved, then killed before its task existed
            log.warning(
                "proposals approved without a task (the bot was killed in between) are pending again: %s",
                ", ".join(f"#{n}" for n in repaired),
            )
        # all of them, not the newest few: one told at an earlier start and never acted on stays interrupted, and
        # enough of those must not hide an older task this kill interrupted (nor, on Temporal, its running workflow)
        interrupted = await store.list_tasks(statuses=[TaskStatus.INTERRUPTED], limit=None)
        followed = await engine.reattach(interrupted)  # TASK_ENGINE=temporal: their workflows may still run
        runtime = cls(
            settings,
            store,
            client,
            workspaces,
            notifier,
            engine,
            crew,
            orchestrator,
            repo_map,
            hints,
            chat_actions,
            chat_queries,
            deliveries,
            secrets,
            probe,
            transcriber,
            executor,
            # attempts of a race still running are resumed below, not announced one by one
            interrupted=[t for t in interrupted if t.id not in followed and t.attempt_group is None],
            schedules=crew.schedules,
            pull_requests=pull_requests,
            github_inbox=github_inbox,
            turns=turns,
        )
        engine.start()  # pending tasks start again
        await crew.races.resume(followed)  # a race a restart interrupted: every attempt goes on, one summary at its end
        await crew.schedules.start()  # schedules fire from now on; a slot missed while the bot was down runs once, now
        deliveries.start()  # what an earlier run could not deliver goes out now
        runtime.start_up_seconds.update(before_polling)
        runtime.start_up = asyncio.create_task(runtime._start_up_work(), name="start-up-work")
        if (
            settings.sandboxing.sandbox != "off" and bwrap_path() is not None
        ):  # the probe, off the way to the first poll
            runtime.sandbox_probe = asyncio.create_task(_warn_without_sandbox(probe), name="sandbox-probe")
        return runtime

    def start_github_webhook(self) -> None:
        """POST /github on GITHUB_WEBHOOK_LISTEN (polling mode too); webhook events a stopped bot left are handled."""
        s = self.settings
        if self.github_inbox is None or not s.github.github_webhook_listen or s.github.github_webhook_secret is None:
            return
        inbox = self.github_inbox
        server = WebhookServer(
            s.github.github_webhook_listen,
            s.github.github_webhook_secret.get_secret_value(),
            inbox.store_event,
            inbox.handle,
        )
        try:
            server.start()
        except OSError as err:  # the chat still works; `agentlab doctor` says the same
            log.error("GitHub webhook: cannot listen on %s: %s", s.github.github_webhook_listen, err)
        else:
            self.github_webhook = server
        self.github_catch_up = asyncio.ensure_future(inbox.handle_unhandled())

    def start_review_server(self, in_chat: InChat) -> None:
        """The review page on REVIEW_LISTEN, when REVIEW_URL says where phones reach it (polling mode too).
        `in_chat`: the adapter's answer to "is this user in that group" (Telegram knows, the bot does not)."""
        s = self.settings
        if not s.review.review_url:
            return
        pages = TaskPages(self.store, self.crew, self.pull_requests, s.review.review_diff_page_bytes, self.secrets)
        server = ReviewServer(s, self.store, self.crew, self.notifier, pages, in_chat)
        try:
            server.start()
        except OSError as err:  # the chat still works; the Review button then opens a page that does not answer
            log.error("review page: cannot listen on %s: %s", s.review.review_listen, err)
        else:
            self.review_server = server

    async def _start_up_work(self) -> None:
        """Start the speech process (VOICE_PRELOAD), then index the workspaces: once the first turn has its answer
        and none is in flight (the module's docstring)."""
        await self.turns.settled(START_UP_GRACE_SECONDS)
        transcriber = self.transcriber
        if self.settings.voice.voice_preload and transcriber is not None and transcriber.state is ModelState.not_loaded:
            started = time.perf_counter()
            transcriber.start_loading()
            with contextlib.suppress(Exception):  # its state and message say why; voice notes tell the user
                await transcriber.wait_ready()
            self.start_up_seconds["speech model"] = time.perf_counter() - started
            await self.turns.settled(0)
        started = time.perf_counter()
        self.hints.refresh_in_background()
        await self.hints.wait_idle()
        self.start_up_seconds["workspace indexes"] = time.perf_counter() - started
        log.info(
            "start-up work done: %s",
            ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.start_up_seconds.items()),
        )

    async def start_up_done(self) -> None:
        """Let the deferred start-up work begin now and wait for it (benches and tests that time answers)."""
        self.turns.hurry()
        if self.start_up is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self.start_up)

    async def announce_interrupted(self) -> None:
        """Tell each chat which of its questions a stop or a crash left unanswered (a turn cut short: its answer is
        lost, so the user is asked to send it again), and which tasks a restart interrupted, with Resume / Discard
        buttons."""
        for turn_id, turn in await self.store.open_turns.cut_short():
            said = " ".join(turn.asked.split())
            said = said if len(said) <= 120 else said[:119].rstrip() + "…"
            quoted = f" “{outside_text(said)}”" if said else ""
            notice = owed(
                turn.chat_id,
                f"⚠️ The bot stopped before it had answered your {turn.kind}{quoted}, and that answer was lost. "
                "Please send it again if you still want one.",
            )
            await self.deliveries.send_stored(await self.store.open_turns.told(turn_id, notice))
        for task in self.interrupted:  # through the outbox too: a Telegram down at start-up loses none of them
            n = task_number(task)
            if announced(await self.store.task_events(n)):
                continue  # told at an earlier start: the chat has its Resume / Discard already
            notice = owed(
                task.chat_id,
                f"⚠️ The bot stopped while **task #{n}** was running ({task.worker.value} · "
                f"`{task.workspace}`: {task.title}). Resume it on its branch, or discard it?",
                buttons=[[button("▶ Resume", Action.RESUME, n), button("✖ Discard", Action.DISCARD, n)]],
            )
            # the notice owed and the record that it was, in one transaction: told once, and never not at all
            told = TaskEvent(task_id=n, kind=ANNOUNCED_EVENT, detail="interruption announced")
            stored = await self.deliveries.end_owing(n, {"status": TaskStatus.INTERRUPTED.value}, told, notice)
            await self.deliveries.send_stored(stored)
        self.interrupted = []
        self.decisions = asyncio.create_task(self._tell_cut_short_decisions(), name="cut-short-decisions")

    async def _tell_cut_short_decisions(self) -> None:
        """Each Merge or Discard a kill cut short, told to its task's chat as git shows it ended (a killed bot's
        merge is waited for: off the way to the first poll); then each race's Merge a kill cut short, finished and
        told once for the race (its attempts' own records are ended first, untold)."""
        races = await self.crew.attempts.merging()
        in_races = {t.id for group in races for t in await self.store.attempts.members(group.stored_id)}
        for decision in await self.store.open_decisions.cut_short():
            try:
                notice = await self.crew.branches.cut_short(decision, tell=decision.task_id not in in_races)
            except Exception:  # its record stays: the next start tries again
                log.exception("task #%d: the %s a kill cut short was not told", decision.task_id, decision.decision)
                continue
            if notice is not None:
                await self.deliveries.send_stored(notice)
        for group in races:
            try:
                notice = await self.crew.attempts.merge_cut_short(group.stored_id)
            except Exception:  # still merging: the next start tries again
                log.exception("attempts #%d: the merge a kill cut short was not finished", group.stored_id)
                continue
            if notice is not None:
                await self.deliveries.send_stored(notice)

    async def status_text(self, chat_id: int) -> str:
        lines = [
            "**Workspaces:** "
            + (
                ", ".join(f"`{w.name}`" for w in self.workspaces.all())
                or f"none found under {self.settings.paths.workspace_path}"
            )
        ]
        active = await self.store.list_tasks(chat_id, statuses=TaskStatus.cancellable())
        lines.append("**Active tasks:**" if active else "**Active tasks:** none")
        lines += [f"• {task_line(t)}" for t in active]
        pending = await self.store.pending_proposals(chat_id)
        lines.append("**Pending proposals:**" if pending else "**Pending proposals:** none")
        lines += [f"• #{p.id} for `{p.workspace}`: {p.request[:80]}" for p in pending]
        if self.transcriber is not None:
            state = self.transcriber.state
            lines.append(
                f"**Speech model:** {self.settings.voice.whisper_model} on {self.settings.voice.voice_engine}"
                f" ({state.value})"
            )
            if (speeds := self.transcriber.speed_summary()) is not None:
                lines.append(f"**Voice speed:** {speeds}")
        return "\n".join(lines)

    async def stop_workers(self) -> None:
        """First step of a shutdown: running tasks become `interrupted` (resumable), their processes are killed."""
        if self.executor is not None:
            self.executor.begin_stopping()
        self.crew.races.close()  # a restart follows the races still running again
        if self.schedules is not None:  # no run starts while the workers stop
            self.schedules.close()
        try:
            async with asyncio.timeout(6.0):
                await self.engine.shutdown(timeout=4.0)
        except (TimeoutError, Exception) as err:  # never hang the shutdown
            log.warning("task engine shutdown: %s", err)
        if self.executor is not None:
            try:
                await self.executor.close()
            except Exception as err:  # never hang or break the shutdown
                log.warning("base-commit test runs: %s", err)
        if self.schedules is not None and not await self.schedules.stopped(timeout=4.0):
            log.warning("schedules: the firing did not stop within 4 s")

    async def close(self) -> None:
        """SIGTERM path: stop workers (they become interrupted), close the client and the store; bounded in time."""
        if self.github_webhook is not None:
            await self.github_webhook.stop()
        if self.review_server is not None:
            await self.review_server.stop()
        if self.github_catch_up is not None:
            self.github_catch_up.cancel()
        if self.sandbox_probe is not None and not self.sandbox_probe.done():
            self.sandbox_probe.cancel()
        for started in (self.start_up, self.decisions):
            if started is not None and not started.done():
                started.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await started
        await self.stop_workers()
        if self.pull_requests is not None:
            await self.pull_requests.close()
        if self.deliveries is not None:
            await self.deliveries.close()
        await self.hints.close()
        await self.repo_map.close()
        if self.transcriber is not None:
            self.transcriber.close()
            if isinstance(self.transcriber, SpeechProcess):  # reaped before the event loop ends
                await self.transcriber.wait_closed()
        await self.client.close()
        await self.store.close()


def bot_secrets(settings: Settings) -> SecretsFilter:
    """The bot's output filter, with its own secrets added: masked verbatim in everything a model or the chat sees.
    Made once, before the adapter's notifier, which masks with it too; `Runtime.start` passes it on."""
    secrets = SecretsFilter()
    secrets.add(settings.secret_values())
    return secrets


async def _warn_without_sandbox(probe: SandboxProbe) -> None:
    """One warning when bwrap does not confine commands here: every command a task runs is refused then."""
    if reason := await probe.unavailable_reason():
        log.warning(
            "the sandbox does not work here, so every command a task runs is refused (the workers' shell, "
            "test runs and their verdicts, stdio MCP servers, the frontend browser): %s",
            reason,
        )


def _engine(
    settings: Settings,
    store: Store,
    client: anthropic.AsyncAnthropic,
    workspaces: Workspaces,
    notifier: Notifier,
    repo_map: RepoMap,
    deliveries: Deliveries,
    pull_requests: PullRequests | None,
    secrets: SecretsFilter,
    probe: SandboxProbe,
) -> tuple[TaskEngine, TaskLines, TaskExecutor | None]:
    """TASK_ENGINE: tasks in this process (TaskQueue over the executor), or as Temporal workflows run by `agentlab
    runner`s (the bot then runs no task and builds no executor). Either way, the lines that reach running tasks (notes,
    network answers, questions), which the crew and the chat use: under Temporal, versions of the inboxes and the
    network gate that forward notes and answers to the tasks' workflows."""
    s = settings
    questions = Questions(store, notifier, s.tasks.ask_timeout_seconds, s.users.is_owner, s.tasks.ask_max_per_task)
    policy = NetworkPolicy(s.network.sandbox_network)
    if s.engine.task_engine != "temporal":
        gate = NetworkGate(
            policy, store, notifier, s.network.sandbox_network_answer_seconds, s.users.is_owner, secrets=secrets
        )
        lines = TaskLines(Inboxes(), gate, questions)
        executor = TaskExecutor(
            settings,
            store,
            client,
            workspaces,
            notifier,
            repo_map,
            deliveries,
            inboxes=lines.inboxes,
            network=lines.network,
            questions=lines.questions,
            secrets=secrets,
            probe=probe,
            pull_requests=pull_requests,
        )
        refusal = StillAllowed(settings, store, notifier).refusal
        return TaskQueue(store, executor.execute, s.tasks.max_concurrent_tasks, refusal), lines, executor
    from agents.engine.front import (  # temporalio is the optional extra `.[temporal]`
        ForwardedInboxes,
        ForwardedNetworkGate,
        TemporalEngine,
        WorkflowLines,
    )
    from agents.inputs.attachments import Attachments

    followed = WorkflowLines(settings)
    forwarding = ForwardedNetworkGate(
        followed, policy, store, notifier, s.network.sandbox_network_answer_seconds, s.users.is_owner, secrets=secrets
    )
    lines = TaskLines(ForwardedInboxes(followed), forwarding, questions)
    engine = TemporalEngine(
        settings, store, followed, notifier, deliveries, workspaces, Attachments.from_settings(settings), pull_requests
    )
    return engine, lines, None


def _firing(settings: Settings) -> Firing | None:
    """TASK_ENGINE=temporal: schedules are Temporal Schedules (they fire while the bot is down); else APScheduler."""
    if settings.engine.task_engine == "temporal":
        from agents.engine.temporal_schedules import TemporalFiring

        return TemporalFiring(settings)
    return None


def _make_transcriber(settings: Settings) -> SpeechToText | None:
    try:
        from agents.inputs.voice import make_transcriber
    except ImportError as err:  # whisper missing: text still works
        log.warning("voice notes disabled: %s", err)
        return None
    return make_transcriber(settings)  # started by the first voice note (or the start-up work: VOICE_PRELOAD)
