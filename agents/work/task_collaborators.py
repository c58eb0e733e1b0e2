"""The collaborators every stage of running a task shares, as two records instead of a dozen arguments.

`Collaborators`: the settings, the store, the model, the workspaces, the chat (direct, and through the outbox), the
output filter and the daily budget's check.
`TaskLines`: what reaches a running task from outside it: the user's steering notes, the network gate, questions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anthropic

from agents.core.protocols import Notifier, Outbox
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.sandbox.network_gate import NetworkGate
from agents.store.database import Store
from agents.work.questions import Questions
from agents.work.steering import Inboxes
from agents.workspaces.folders import Workspaces


@dataclass(frozen=True)
class Collaborators:
    settings: Settings
    store: Store
    client: anthropic.AsyncAnthropic
    workspaces: Workspaces
    notifier: Notifier
    deliveries: Outbox  # summaries and proposals: through the outbox, never lost to a failed send
    secrets: SecretsFilter  # the process's output filter: tools' results, notes, credential files' values
    # why a running task stops now that the day's budget is spent (None: it goes on): the bot's store and settings,
    # or on a runner the bot's budget and spending as it offered the task plus what the runner spent since
    spending: Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class TaskLines:
    inboxes: Inboxes  # notes for running workers (steering.py); under Temporal, forwarded to the task's workflow
    network: NetworkGate  # run_command(network=true) and MCP approvals: the owner's Allow
    questions: Questions  # ask_user: questions to the task's starter (local engine only)
