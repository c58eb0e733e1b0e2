"""Who may do what to which work: owners and members (OWNER_USER_IDS), a conversation's own tasks, proposals and
workspaces, and the spending budget. Every part of the crew asks here before it acts, whoever asks (a tool call or a
button), so a role is checked next to what it guards and in one way; the task queue asks here last whether a claimed
task's user is still allowed."""

from __future__ import annotations

import contextlib
import time

from agents.core.actions import Buttons
from agents.core.errors import NotAllowed, ToolError
from agents.core.models import Caller, Proposal, Task
from agents.core.protocols import Notifier
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.text import literal_block, outside_text, secret_warning
from agents.git.command import GitIdentity
from agents.llm.usage import budget_exceeded
from agents.store.database import Store
from agents.store.shown import PROPOSAL
from agents.work import crew_texts
from agents.work.own_words import Decision, decided_by_own_words, unless_a_question_waits
from agents.work.turn_scope import current_turn
from agents.workspaces.folders import OwnersOnly, Workspace, WorkspaceNotFound, Workspaces


def git_identity(settings: Settings) -> GitIdentity:
    """The author of the bot's own commits (a merge, a new workspace's first commit)."""
    return GitIdentity(settings.commits.git_author_name, settings.commits.git_author_email)


def task_number(task: Task) -> int:
    """A stored task's number; the store gives every task one, so a task without is a bug, said loudly."""
    if task.id is None:
        raise ValueError(f"task {task.title!r} was never stored")
    return task.id


class StillAllowed:
    """The last check before a claimed task starts, under either engine: its starter is still in ALLOWED_USER_IDS,
    and the daily budget is not spent. A task stored while both held (queued behind others, or pending again after a
    restart) never reaches Claude or a tool once its user is no longer allowed, as a schedule of theirs is paused
    then, nor once the day's budget was spent while it waited; its chat is told why."""

    def __init__(self, settings: Settings, store: Store, notifier: Notifier) -> None:
        self.settings, self.store, self.notifier = settings, store, notifier

    async def refusal(self, task: Task) -> str | None:
        """Why the task may not start (None: it may); said in the task's chat first."""
        why = self._starter_gone(task) or await budget_exceeded(self.store, self.settings)
        if why is None:
            return None
        with contextlib.suppress(Exception):  # the chat may be gone; the task's record still says why
            await self.notifier.send(task.chat_id, f"✖ Task #{task.id} was not started: {why.rstrip('.')}.")
        return why

    def _starter_gone(self, task: Task) -> str | None:
        if task.user_id is None or task.user_id in self.settings.users.allowed_user_ids:
            return None  # None: the bot itself stored it
        who = outside_text(task.user_name) if task.user_name else f"user {task.user_id}"
        return f"the user who asked for it, {who}, is no longer an allowed user"


# A member's same request (same words: the action and its task) is handed to the owners once in this long: a button
# pressed again, or the review page's API called in a loop, posts no flood (a turn asks the owners once anyway)
OWNERS_ASKED_AGAIN_AFTER_S = 600.0


class Access:
    """The roles and the conversation's bounds, checked for the crew's parts; a refusal is a ToolError that says why."""

    def __init__(
        self, settings: Settings, store: Store, workspaces: Workspaces, notifier: Notifier, secrets: SecretsFilter
    ) -> None:
        self.settings, self.store, self.workspaces, self.notifier = settings, store, workspaces, notifier
        self.secrets = secrets  # a request handed to the owners warns when it holds what this filter would mask
        self._asked: dict[tuple[int | None, str], float] = {}  # (member, request) → when the owners were last asked
        self._question_waits = unless_a_question_waits(store)

    def is_owner(self, caller: Caller) -> bool:
        return self.settings.users.is_owner(caller.user_id)

    async def check_budget(self) -> None:
        """New work is refused once the spending budget is used up."""
        refusal = await budget_exceeded(self.store, self.settings)
        if refusal:
            raise ToolError(refusal)

    async def task(self, task_id: int) -> Task:
        """Task #task_id as stored now, wherever it belongs (callers check whose it is)."""
        task = await self.store.get_task(int(task_id))
        if task is None:
            raise ToolError(crew_texts.no_such_task(task_id))
        return task

    async def own_task(self, chat_id: int, task_id: int) -> Task:
        """Task #task_id if it belongs to this chat (another chat's task is as good as absent)."""
        task = await self.store.get_task(int(task_id))
        if task is None or task.chat_id != chat_id:
            raise ToolError(crew_texts.no_such_task(task_id))
        return task

    async def shown_task(self, caller: Caller, task_id: int) -> Task:
        """The conversation's task #task_id, to be shown whole (its report, events, tool calls and their arguments):
        a task on the bot's own code to owners only, as members reach none of `self` (the summary the chat was sent
        stays the chat's)."""
        task = await self.own_task(caller.chat_id, task_id)
        if not self.is_owner(caller) and self.workspaces.is_self(task.workspace):
            raise OwnersOnly(f"task #{task_id} works on the bot's own code: only an owner can see what it did")
        return task

    def may_see_proposal(self, caller: Caller, proposal: Proposal) -> bool:
        """A proposal on the bot's own code is an owner's to read whole, as members reach none of `self`."""
        return self.is_owner(caller) or not self.workspaces.is_self(proposal.workspace)

    async def shown_proposal(self, caller: Caller, proposal_id: int) -> Proposal:
        """The conversation's proposal #proposal_id, to be shown whole: one on the bot's own code to owners only."""
        proposal = await self.chat_proposal(caller.chat_id, proposal_id)
        if not self.may_see_proposal(caller, proposal):
            raise OwnersOnly(f"proposal #{proposal_id} is about the bot's own code: only an owner can read it")
        return proposal

    def hands_nothing_of_the_chat(self, caller: Caller, **handed: object) -> None:
        """A confined request (from outside the chat, answered in public) hands a worker nothing the chat stored: a
        proposal to rework, the attachments the user sent. Its workspace alone is what it reaches (`workspace_for`)."""
        named = [what for what, value in handed.items() if value]
        if caller.confined_to is not None and named:
            raise ToolError(
                f"a request from outside the chat cannot hand a worker the chat's {' or '.join(named)}: "
                "nothing was started"
            )

    async def task_for(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> Task:
        """The caller's conversation's task; with `anywhere` (a button an owner pressed on a request handed to them,
        possibly in their own chat) an owner reaches a task of any conversation."""
        if anywhere and self.is_owner(caller):
            return await self.task(task_id)
        return await self.own_task(caller.chat_id, task_id)

    async def chat_proposal(self, chat_id: int, proposal_id: int) -> Proposal:
        """Proposal #proposal_id if it belongs to this chat."""
        proposal = await self.store.get_proposal(int(proposal_id))
        if proposal is None or proposal.chat_id != chat_id:
            raise ToolError(f"there is no proposal #{proposal_id} in this chat")
        return proposal

    def may_decide(self, caller: Caller, proposal: Proposal) -> bool:
        """Members decide (approve, reject, rework) the proposals they asked for, owners every one; a proposal on
        the bot's own code is owners' alone (members reach none of `self`). A proposal of unknown requester (stored
        by an older bot) is the private chat's user's, and in a group an owner's to decide."""
        if self.is_owner(caller):
            return True
        return proposal.asker == caller.user_id and not self.workspaces.is_self(proposal.workspace)

    def decides(self, caller: Caller, proposal: Proposal, doing: str) -> None:
        """`may_decide`, refused in one sentence."""
        if self.may_decide(caller, proposal):
            return
        if self.workspaces.is_self(proposal.workspace):
            raise OwnersOnly(f"proposal #{proposal.id} is for the bot's own code: only an owner can {doing} it")
        raise ToolError(
            f"proposal #{proposal.id} is another member's: only the member who asked for it or an owner can {doing} it"
        )

    async def owners_only(
        self, caller: Caller, doing: str, asks: str, quoted: str = "", buttons: Buttons | None = None
    ) -> None:
        """A member asking for what only owners may do: refused in one sentence, and the owners get the request
        (with its button), where they see it, once for the same request within OWNERS_ASKED_AGAIN_AFTER_S (a button
        pressed again, a page calling the same action). `asks` is the bot's own words; `quoted` (the member's
        request, a task's title, a name: text the member or the model chose) is shown literally in a block it cannot
        close, never as formatting or a link, and unmasked (with a warning when it looks like it holds a secret)."""
        if self.is_owner(caller):
            return
        turn = current_turn()
        if turn is not None and turn.owners_asked:  # one request a turn: a flood of refused calls posts no flood
            raise ToolError(f"only an owner can {doing}; the owners were asked already in this turn: wait for them")
        if turn is not None:
            turn.owners_asked = True
        now, key = time.monotonic(), (caller.user_id, asks)
        self._asked = {k: at for k, at in self._asked.items() if now - at < OWNERS_ASKED_AGAIN_AFTER_S}
        if key in self._asked:
            raise ToolError(f"only an owner can {doing}; the owners were asked already: wait for them")
        self._asked[key] = now
        who = outside_text(caller.user_name) if caller.user_name else f"user {caller.user_id}"
        text = f"🙋 {who} asks {asks}"
        if quoted:
            text += f"\n{literal_block(quoted)}{secret_warning(quoted, self.secrets, 'request')}"
        with contextlib.suppress(Exception):  # a failed hand-over must not turn the refusal into an error
            await self.notifier.ask_owners(caller.chat_id, text, buttons=buttons, literal=True)
        raise ToolError(f"only an owner can {doing}; I've asked them")

    async def asked_for(self, caller: Caller, decision: Decision, subject: str, buttons: Buttons | None = None) -> None:
        """A decision of the user's that the model calls in a chat turn happens only when the user's own words of
        that turn ask for it (own_words.py), and for this item; otherwise the chat gets the notice and its
        `buttons`, and the call is refused. A button, the review page and the bot itself act outside a turn and are
        never asked."""
        await decided_by_own_words(self.notifier, caller, decision, subject, buttons, self.unclear)

    async def unclear(self, caller: Caller, item: tuple[str, int] | None) -> str | None:
        """Why a bare agreement ("yes", "go ahead"), no reply to the item's message and naming none, may be meant for
        something else than the `item` (own_words.py): a worker's question waits in the conversation (the words may
        answer it), or several proposals are pending that the caller decides (counted as a decision with no number
        counts them: a member's own, when they have some). None when it may not."""
        if waiting := await self._question_waits(caller, item):
            return waiting
        if item is not None and item[0] == PROPOSAL:
            pending = await self.store.pending_proposals(caller.chat_id)
            pending = [p for p in pending if self.may_decide(caller, p)] or pending
            if len(pending) > 1:
                return f"{len(pending)} proposals are pending, and your message named none of them"
        return None

    def starter_or_owner(self, caller: Caller, task: Task, doing: str) -> None:
        """Members act on the tasks they started; owners on every task. A task on the bot's own code is owners' alone
        (members reach none of `self`: a task its starter began while an owner is out of their reach since)."""
        if self.is_owner(caller):
            return
        if self.workspaces.is_self(task.workspace):
            raise OwnersOnly(f"task #{task.id} works on the bot's own code: only an owner can {doing} it")
        if task.user_id is not None and task.user_id == caller.user_id:
            return
        whose = f"{task.user_name}'s" if task.user_name else "not yours"
        raise NotAllowed(f"task #{task.id} is {whose}: only the member who started it or an owner can {doing} it")

    async def workspace_for(
        self, caller: Caller, workspace: str | None, request: str, *, stored: bool = False
    ) -> Workspace:
        """The named workspace, or the conversation's own (a topic bound with /workspace); `self` is owners' only.
        A confined caller (a request from outside the chat) reaches its own workspace alone. `stored`: `workspace`
        is a name the bot stored (a task's, a proposal's, a schedule's), resolved exactly like the binding."""
        name = workspace if workspace and workspace.strip() else None
        if caller.confined_to is not None:
            name = self.workspaces.confined(caller.confined_to, name).name
        if name is None:
            name = await self.store.conversations.bound_workspace(caller.chat_id)
            if name is None:
                raise ToolError(
                    "no workspace named, and this conversation has none of its own (/workspace NAME sets one): "
                    "ask the user which workspace"
                )
            try:  # exactly the folder bound: read tolerantly, a deleted `notes` would be `notes-archive`, `bot` `self`
                ws = self.workspaces.stored(name)
            except WorkspaceNotFound:
                raise ToolError(
                    f"the workspace {name} this conversation is bound to is gone (its folder was removed or "
                    "renamed): ask the user which workspace; /workspace NAME binds another"
                ) from None
        else:
            ws = self.workspaces.stored(name) if stored else self.workspaces.resolve(name)
        if ws.is_self:
            await self.owners_only(caller, "work on the bot's own code", "for work on the bot's own code:", request)
        return ws

    async def tell_task_chat(self, caller: Caller, task: Task, text: str) -> None:
        """An owner decided from another chat (a request handed to them): the task's conversation hears it too."""
        if task.chat_id != caller.chat_id:
            with contextlib.suppress(Exception):
                await self.notifier.send(task.chat_id, f"{text} (decided by an owner)")
