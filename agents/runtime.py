"""Wiring: build the store, client, workspaces, runner, crew, orchestrator and transcriber from settings; shut them
down."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import anthropic

from agents.chat.orchestrator import Orchestrator
from agents.chat.symbol_hints import SymbolHints
from agents.core.actions import Action, button
from agents.core.models import TaskStatus
from agents.core.protocols import Notifier, SpeechToText, TaskEngine
from agents.core.secrets_filter import remember
from agents.core.settings import Settings
from agents.llm.client import make_client
from agents.repo_map.maps import RepoMap
from agents.sandbox.services import sweep_leftovers
from agents.sandbox.task_limits import sandbox_limit_warnings
from agents.store.database import Store
from agents.store.delivery import Deliveries
from agents.tools.workspaces import Workspaces
from agents.work.crew import Crew, task_line
from agents.work.orphans import instance_token, kill_orphans
from agents.work.task_execution import TaskExecutor
from agents.work.task_runner import TaskRunner

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    store: Store
    client: anthropic.AsyncAnthropic
    workspaces: Workspaces
    notifier: Notifier
    runner: TaskEngine
    crew: Crew
    orchestrator: Orchestrator
    repo_map: RepoMap
    hints: SymbolHints
    executor: TaskExecutor
    transcriber: SpeechToText | None = None
    interrupted: list = field(default_factory=list)
    deliveries: Deliveries | None = None

    @classmethod
    async def start(
        cls,
        settings: Settings,
        notifier: Notifier,
        client: anthropic.AsyncAnthropic | None = None,
        transcriber: SpeechToText | None = None,
    ) -> Runtime:
        if settings.sandbox == "off":  # issue 11: only ever set explicitly
            log.warning(
                "SANDBOX=off: workers' commands and test runs are NOT confined (they can read the bot's keys, "
                "your files and use the network); set SANDBOX=bwrap once bubblewrap works here"
            )
        if settings.sandbox != "off":
            for warning in sandbox_limit_warnings(settings.sandbox_network != "off"):
                log.warning("%s", warning)
        if swept := await asyncio.to_thread(sweep_leftovers):  # the services' logs of a bot that was killed
            log.info("removed %d services folders a killed bot left behind", len(swept))
        # the bot's own secrets are masked verbatim in everything a model or the chat sees (issue 22)
        remember([settings.telegram_bot_token.get_secret_value(), settings.anthropic_api_key.get_secret_value()])
        store = await Store.open(settings.database_path)
        client = client or make_client(settings)
        workspaces = Workspaces(settings.workspace_path, settings.bot_repository)
        repo_map = RepoMap(store)
        hints = SymbolHints(repo_map, store, workspaces)
        deliveries = Deliveries(store, notifier)
        executor = TaskExecutor(settings, store, client, workspaces, notifier, repo_map, deliveries)
        runner = _engine(settings, store, executor, notifier, deliveries)
        crew = Crew(settings, store, workspaces, runner, notifier, executor.inboxes, repo_map)
        orchestrator = Orchestrator(settings, store, client, workspaces, crew, hints)
        if transcriber is None:  # PyAV/numpy imports take a while: not on the event loop
            transcriber = await asyncio.to_thread(_make_transcriber, settings)
        runtime = cls(
            settings,
            store,
            client,
            workspaces,
            notifier,
            runner,
            crew,
            orchestrator,
            repo_map,
            hints,
            executor,
            transcriber,
            deliveries=deliveries,
        )
        killed_mid_task = await store.interrupt_running_tasks()  # a killed bot left these in_progress
        if killed_mid_task:  # ... and their commands still running, in sessions of their own
            await asyncio.to_thread(
                kill_orphans, instance_token(settings.database_path), {t.id for t in killed_mid_task}
            )
        if repaired := await store.repair_approvals_without_task():  # approved, then killed before its task existed
            log.warning(
                "proposals approved without a task (the bot was killed in between) are pending again: %s",
                ", ".join(f"#{n}" for n in repaired),
            )
        interrupted = await store.list_tasks(statuses=[TaskStatus.INTERRUPTED], limit=20)
        followed = await runner.reattach(interrupted)  # TASK_ENGINE=temporal: their workflows may still run
        runtime.interrupted = [t for t in interrupted if t.id not in followed]
        runner.start()  # pending tasks start again
        deliveries.start()  # what an earlier run could not deliver goes out now
        hints.refresh_in_background()  # index the workspaces without delaying start-up
        return runtime

    async def announce_interrupted(self) -> None:
        """Tell each chat which tasks a restart interrupted, with Resume / Discard buttons."""
        for task in self.interrupted:
            try:
                await self.notifier.send(
                    task.chat_id,
                    f"⚠️ The bot stopped while **task #{task.id}** was running ({task.worker.value} · "
                    f"`{task.workspace}`: {task.title}). Resume it on its branch, or discard it?",
                    buttons=[
                        [button("▶ Resume", Action.RESUME, task.id), button("✖ Discard", Action.DISCARD, task.id)]
                    ],
                )
            except Exception as err:
                log.warning("could not announce interrupted task %s: %s", task.id, err)
        self.interrupted = []

    async def status_text(self, chat_id: int) -> str:
        lines = [
            "**Workspaces:** "
            + (
                ", ".join(f"`{w.name}`" for w in self.workspaces.all())
                or f"none found under {self.settings.workspace_path}"
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
                f"**Speech model:** {self.settings.whisper_model} on {self.settings.voice_engine} ({state.value})"
            )
            recent = list(getattr(self.transcriber, "recent", ()))  # a fake transcriber keeps none
            if recent:
                from agents.inputs.speed_log import summary

                lines.append(f"**Voice speed:** {summary(recent)}")
        return "\n".join(lines)

    async def stop_workers(self) -> None:
        """First step of a shutdown: running tasks become `interrupted` (resumable), their processes are killed."""
        self.executor.stopping = True
        try:
            await asyncio.wait_for(self.runner.shutdown(timeout=4.0), timeout=6.0)
        except (TimeoutError, Exception) as err:  # never hang the shutdown
            log.warning("runner shutdown: %s", err)

    async def close(self) -> None:
        """SIGTERM path: stop workers (they become interrupted), close the client and the store; bounded in time."""
        await self.stop_workers()
        if self.deliveries is not None:
            await self.deliveries.close()
        await self.hints.close()
        await self.repo_map.close()
        if self.transcriber is not None:
            self.transcriber.close()
        await self.client.close()
        await self.store.close()


def _engine(
    settings: Settings, store: Store, executor: TaskExecutor, notifier: Notifier, deliveries: Deliveries
) -> TaskEngine:
    """TASK_ENGINE: tasks in this process (TaskRunner), or as Temporal workflows run by `agentlab runner`s."""
    if settings.task_engine == "temporal":
        from agents.engine.front import TemporalEngine  # temporalio is the optional extra `.[temporal]`

        return TemporalEngine(settings, store, executor, notifier, deliveries)
    return TaskRunner(store, executor.execute, settings.max_concurrent_tasks)


def _make_transcriber(settings: Settings) -> SpeechToText | None:
    try:
        from agents.inputs.voice import make_transcriber
    except ImportError as err:  # whisper missing: text still works
        log.warning("voice notes disabled: %s", err)
        return None
    transcriber = make_transcriber(settings)
    transcriber.start_loading()
    return transcriber
