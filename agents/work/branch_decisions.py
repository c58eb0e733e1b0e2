"""What becomes of a task's branch, by its buttons or the tools: Merge, Diff, Discard, Open PR, Fix CI and Resume
(the discard_task and open_pull_request tools are defined here; merge_task in attempt_decisions.py).
Merge, Discard and Open PR are owners' decisions (a member's request goes to the owners with the task's buttons); a
task still running is never merged, whichever way the merge is asked for. A Merge or Discard is on record
(store/open_decisions.py) while its git work runs: one a kill cut short is told to the task's chat at the next start
(`cut_short`), as git shows it ended."""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from pathlib import Path
from typing import BinaryIO

from agents.core.errors import ToolError
from agents.core.models import Caller, Delivery, Task, TaskEvent, TaskStatus
from agents.core.protocols import TaskEngine
from agents.core.settings import Settings
from agents.core.text import human_size
from agents.core.work_tools import TaskId, work_tool
from agents.git import diff as git_diff
from agents.git.command import git_text
from agents.git.merge import MergeResult, branch_merged, merge_ended, merge_task_branch
from agents.git.repository import branch_exists, commits_by_others, rev_parse
from agents.git.worktrees import TaskWorktree, discard_task_worktree
from agents.store.database import Store
from agents.store.delivery import owed
from agents.store.open_decisions import OpenDecision
from agents.work.access import Access, git_identity, task_number
from agents.work.own_words import DISCARD, MERGE, PULL_REQUEST, Decision
from agents.work.pull_requests import PullRequests
from agents.work.steering import READ_EVENT, unread_notes
from agents.work.task_outcome import branch_buttons, pull_request_buttons
from agents.work.work_starts import WorkStarts
from agents.workspaces.folders import Workspaces

MERGED_EVENT = "merged"  # a task event: its branch was merged (detail: "<branch> into <base> (<merge commit>)")


class BranchDecisions:
    """The decisions about a task's work; `anywhere`: an owner pressed the button on a request handed to them, so
    the task may be another conversation's (that conversation hears the decision too)."""

    def __init__(
        self,
        access: Access,
        starts: WorkStarts,
        settings: Settings,
        store: Store,
        workspaces: Workspaces,
        engine: TaskEngine,
        pull_requests: PullRequests | None,
    ) -> None:
        self.settings, self.store, self.workspaces, self.engine = settings, store, workspaces, engine
        self.access, self.starts = access, starts
        self.pull_requests = pull_requests  # GitHub: Open PR and follow-ups on a pull request's branch

    def _worktree(self, task: Task) -> TaskWorktree:
        """The task's branch as a worktree; a task without a branch has nothing to decide on."""
        if not task.branch or not task.base_commit:
            raise ToolError(f"task #{task.id} has no branch")
        repo = self.workspaces.stored(task.workspace).path
        # a task that ran on a runner (TASK_ENGINE=temporal) never had a worktree on this machine: its branch, fetched
        # into the owner's checkout, is all there is; a path where no worktree can be stands for the missing one
        # (the owner's checkout itself is a worktree, which Diff and Discard would take for the task's)
        return TaskWorktree(
            repo=repo,
            path=Path(task.worktree) if task.worktree else self._nowhere(task),
            branch=task.branch,
            base_branch=task.base_branch or "main",
            base_commit=task.base_commit,
        )

    def _nowhere(self, task: Task) -> Path:
        """A path where no worktree can be: the task's branch alone is then what Diff and Discard see."""
        return self.settings.paths.worktrees_dir / "ran-elsewhere" / f"task-{task.id}"

    async def _owner_decision(self, caller: Caller, task: Task, decision: Decision) -> None:
        """Merge and Discard are owners' decisions: a member's request goes to the owners with the task's buttons;
        the model's call, in a turn whose words did not ask for it, gets the user the buttons instead."""
        buttons = branch_buttons(task_number(task), task.status)
        doing = decision.verb
        await self.access.owners_only(caller, doing, f"to {doing} **task #{task.id}**:", task.title, buttons)
        await self.access.asked_for(caller, decision, f"**task #{task.id}**", buttons)

    async def merge(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
        """Merge the task's branch into its base: the one merge of the tool and the button, so both refuse a task
        that is still running (its worker still writes on the branch)."""
        return (await self.merge_result(caller, task_id, anywhere=anywhere)).message

    async def merge_result(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> MergeResult:
        """`merge`, with whether it merged (a group of attempts discards the others only then)."""
        task = await self.access.task_for(caller, task_id, anywhere=anywhere)
        async with self._branch_lock(task):  # one decision at a time on a branch (and no follow-up starting)
            task = await self.access.task(task_number(task))
            if task.status.is_active:
                raise ToolError(f"task #{task.id} is still {task.status.value}; merge it when it has ended")
            await self._owner_decision(caller, task, MERGE)
            await self._alone_on_its_branch(task, "merge")
            task_id, tree = task_number(task), self._worktree(task)
            await self.store.open_decisions.begin(task_id, MERGE.verb)  # a kill from here on is told at the next start
            try:
                result = await merge_task_branch(tree, git_identity(self.settings), self._merge_lock(task_id))
            except Exception:
                await self.store.open_decisions.end(task_id)
                raise
            merged = self._merged_event(task_id, tree, result.sha) if result.ok and result.sha else None
            await self.store.open_decisions.end(task_id, merged)
        await self.access.tell_task_chat(caller, task, result.message)
        return result

    def _merge_lock(self, task_id: int) -> Path:
        """The file the task's merge holds locked while its git runs (git/merge.py `merge_lock`)."""
        return self.settings.paths.data_dir / "merging" / f"task-{task_id}"

    @staticmethod
    def _merged_event(task_id: int, tree: TaskWorktree, sha: str) -> TaskEvent:
        return TaskEvent(task_id=task_id, kind=MERGED_EVENT, detail=f"{tree.branch} into {tree.base_branch} ({sha})")

    async def cut_short(self, decision: OpenDecision, *, tell: bool = True) -> Delivery | None:
        """At start-up: a Merge or Discard a kill cut short (store/open_decisions.py), ended by what git shows (a
        killed bot's merge, which runs on, is waited for first): merged, the task marked so and its chat told as a
        merge tells it; not merged, the chat told so and given the task's buttons again. Nothing is merged or deleted
        here. The notice, stored in the outbox with the record's end, for the caller to send; none without `tell`
        (an attempt of a race whose Merge was cut short: the race's notice says it, attempt_decisions.py)."""
        task = await self.store.get_task(decision.task_id)
        if task is None or not task.branch or not task.base_commit:
            await self.store.open_decisions.end(decision.task_id)
            return None
        async with self._branch_lock(task):  # a press of the old buttons meanwhile waits for this
            if not await self.store.open_decisions.is_open(decision.task_id):
                return None  # a press of the old buttons came first, decided it again and told its chat
            if decision.decision == MERGE.verb:
                return await self._merge_cut_short(task, tell)
            return await self._discard_cut_short(task, tell)

    async def _merge_cut_short(self, task: Task, tell: bool) -> Delivery | None:
        task_id, tree = task_number(task), self._worktree(task)
        ended = await merge_ended(self._merge_lock(task_id))  # the killed bot's git merge outlives it: waited for
        sha = await self.merge_commit(task) if await self.merged_already(task) else None
        if sha is None:
            how = "the merge did not happen" if ended else "its merge has still not ended"
            text = (
                f"⚠️ The bot stopped while merging **task #{task_id}**, and {how}: `{tree.base_branch}` does not "
                f"hold its branch `{tree.branch}`. Merge it again?"
            )
            notice = owed(task.chat_id, text, buttons=branch_buttons(task_id, task.status), task_id=task_id)
            return await self.store.open_decisions.end(task_id, None, notice if tell else None)
        # what a merge that was not cut short says (git/merge.py)
        text = f"merged {tree.branch} into {tree.base_branch} ({sha[:8]})"
        merged = self._merged_event(task_id, tree, sha)
        return await self.store.open_decisions.end(task_id, merged, owed(task.chat_id, text) if tell else None)

    async def merge_commit(self, task: Task) -> str:
        """The commit of the base branch that brought the task's branch in: the first merge after its head."""
        repo, base = self.workspaces.stored(task.workspace).path, f"refs/heads/{task.base_branch or 'main'}"
        head = await rev_parse(repo, f"refs/heads/{task.branch}")
        found = await git_text("rev-list", "--ancestry-path", "--merges", "--reverse", f"{head}..{base}", cwd=repo)
        return (found.split() or [await rev_parse(repo, base)])[0]

    async def _discard_cut_short(self, task: Task, tell: bool) -> Delivery | None:
        task_id, tree = task_number(task), self._worktree(task)
        if not await branch_exists(tree.repo, tree.branch):
            text = f"Task #{task_id} was discarded; its branch `{tree.branch}` was deleted."
            notice = owed(task.chat_id, text)
        else:
            text = (
                f"⚠️ The bot stopped while discarding **task #{task_id}**, and its branch `{tree.branch}` is still "
                "there. Discard it again?"
            )
            notice = owed(task.chat_id, text, buttons=branch_buttons(task_id, task.status), task_id=task_id)
        return await self.store.open_decisions.end(task_id, None, notice if tell else None)

    def _branch_lock(self, task: Task) -> contextlib.AbstractAsyncContextManager[object]:
        """The lock of the task's branch (none to take for a task without one)."""
        if not task.branch:
            return contextlib.nullcontext()
        return self.starts.branch_locks.of((task.workspace, task.branch))

    async def merged_already(self, task: Task) -> bool:
        """Whether the task's branch has commits of its own and every one is in its base branch: a Merge was done (no
        branch left: nothing merged that Discard could misreport)."""
        if not task.branch or not task.base_commit:
            return False
        repo = self.workspaces.stored(task.workspace).path
        return await branch_merged(repo, task.branch, task.base_branch or "main", task.base_commit)

    async def _only_the_bots_commits(self, task: Task) -> None:
        """Discard deletes the branch: one holding commits the bot did not make (the owner's own, by hand) is
        refused, as deleting it would drop them."""
        if not task.branch or not task.base_commit:
            return
        repo = self.workspaces.stored(task.workspace).path
        email = git_identity(self.settings).email
        others = await commits_by_others(repo, task.base_commit, task.branch, email)
        if others:
            raise ToolError(
                f"task #{task.id}'s branch {task.branch} holds commits the bot did not make ({', '.join(others[:3])}"
                f"{' …' if len(others) > 3 else ''}): Discard would drop them. Merge it, or delete the branch "
                "yourself if you mean to"
            )

    async def _alone_on_its_branch(self, task: Task, doing: str) -> None:
        """A follow-up (Fix CI, a mention on its pull request) works on the same branch as the task it continues:
        while one runs, the branch holds work no verdict has judged yet (a Merge would take it) and its worktree is
        in use (a Discard would pull it away)."""
        if others := await self.starts.on_its_branch(task):
            running = ", ".join(f"#{t.id}" for t in others)
            raise ToolError(
                f"task {running} is still working on task #{task.id}'s branch; {doing} it when that has ended "
                "(or cancel it first)"
            )

    async def diff(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> tuple[bytes, str]:
        """The task's capped diff (git_diff) and a caption saying what it leaves out."""
        with tempfile.TemporaryFile() as out:  # git streams into the file; only the capped result is read back
            task, report = await self.write_diff(caller, task_id, out, anywhere=anywhere)
            out.seek(0)
            data = out.read()
        note = report.note()
        return data, f"Diff of task #{task.id}" + (f" ({note})" if note else "")

    async def write_diff(
        self,
        caller: Caller,
        task_id: int,
        out: BinaryIO,
        *,
        anywhere: bool = False,
        max_bytes: int = git_diff.DIFF_MAX_BYTES,
    ) -> tuple[Task, git_diff.DiffReport]:
        """The task's diff streamed into `out` (Diff's document, the review page), under the Diff button's roles."""
        task = await self.access.task_for(caller, task_id, anywhere=anywhere)
        tree = self._worktree(task)
        self.access.starter_or_owner(caller, task, "see the diff of")
        if task.status is TaskStatus.IN_PROGRESS:
            # what it committed so far, never its worktree's files: git reads those by path, outside the sandbox,
            # while a service of the task may swap a folder for a link out of the worktree (that put host files in
            # the diff); each of the worker's turns is committed, and the summary's Diff shows everything
            tree = dataclasses.replace(tree, path=self._nowhere(task))
        return task, await git_diff.write_diff(tree, out, max_bytes)

    @work_tool(name="discard_task")
    async def discard(self, caller: Caller, task_id: TaskId, *, anywhere: bool = False) -> str:
        """Throw a task's work away: stop it if it runs, delete its branch."""
        # the tool and the Discard button: a task still active or interrupted is stopped first
        task = await self.access.task_for(caller, int(task_id), anywhere=anywhere)
        async with self._branch_lock(task):  # one decision at a time on a branch (and no follow-up starting)
            return await self._discard(caller, await self.access.task(task_number(task)))

    async def discard_decided(self, task_id: int) -> str:
        """Discard, by the bot, of a task an owner's decision already dropped (an attempt of a race whose Merge a kill
        cut short: the owner pressed Merge, which discards the others); no one is asked, and the chat is told by
        the caller."""
        task = await self.access.task(task_id)
        async with self._branch_lock(task):
            task = await self.access.task(task_number(task))
            if task.branch and task.base_commit and not await branch_exists(self._worktree(task).repo, task.branch):
                return f"Task #{task.id} was discarded already; its branch `{task.branch}` is gone."
            return await self._discard_now(task)

    async def _discard(self, caller: Caller, task: Task) -> str:
        await self._owner_decision(caller, task, DISCARD)
        text = await self._discard_now(task)
        await self.access.tell_task_chat(caller, task, text)
        return text

    async def _discard_now(self, task: Task) -> str:
        """The Discard decided: refused where it would drop someone's work or undo a merge, else done on record."""
        await self._alone_on_its_branch(task, "discard")
        await self._only_the_bots_commits(task)
        if await self.merged_already(task):
            raise ToolError(
                f"task #{task.id} was merged into {task.base_branch or 'main'} already: there is nothing to discard"
            )
        task_id = task_number(task)
        await self.store.open_decisions.begin(task_id, DISCARD.verb)  # a kill from here on is told at the next start
        try:
            text = await self._discarded(task_id, task)
        except Exception:
            await self.store.open_decisions.end(task_id)
            raise
        await self.store.open_decisions.end(task_id)
        return text

    async def _discarded(self, task_id: int, task: Task) -> str:
        if task.status.is_cancellable:
            await self.engine.cancel(task_id)
            task = await self.access.task(task_id)  # a worker may have made its branch meanwhile
        if not task.branch or not task.base_commit:
            text = f"Task #{task_id} was discarded; it had no branch."
        else:
            tree = self._worktree(task)
            freed = await discard_task_worktree(tree)
            cleaned = f" ({human_size(freed)} of its files removed from `.git`)" if freed else ""
            text = f"Task #{task_id} was discarded; its branch `{tree.branch}` was deleted{cleaned}."
            problem = await self.engine.drop_branch(task)  # where a runner pushed it (TASK_ENGINE=temporal)
            if problem:
                text += f" But {problem}."
        return text

    @work_tool(name="open_pull_request")
    async def open_pr(self, caller: Caller, task_id: TaskId, *, anywhere: bool = False) -> str:
        """Push a finished task's branch to the workspace's GitHub repository and open a pull request against its
        default branch (a draft unless the bot's verdict is ✔); a task that has one gets its new commits pushed
        there. Only for workspaces on GitHub; owners only (a member's request goes to the owners)."""
        # the tool and the Open PR button: owners only, like Merge; a member's request goes to the owners
        task = await self.access.task_for(caller, int(task_id), anywhere=anywhere)
        if self.pull_requests is None or not self.pull_requests.enabled:
            raise ToolError("GitHub is not set up here (GITHUB_TOKEN is empty), so no pull request can be opened")
        await self.access.owners_only(
            caller,
            "open a pull request",
            f"to open a pull request for **task #{task.id}**:",
            task.title,
            pull_request_buttons(task_number(task)),
        )
        await self.access.asked_for(
            caller, PULL_REQUEST, f"**task #{task.id}**", pull_request_buttons(task_number(task))
        )
        text = await self.pull_requests.open_for(task)
        await self.access.tell_task_chat(caller, task, text)
        return text

    async def fix_ci(self, caller: Caller, task_id: int) -> str:
        """The Fix CI button: a follow-up on the task's branch that gets the failed check runs' summaries."""
        task = await self.access.task_for(caller, task_id)
        self.access.starter_or_owner(caller, task, "hand CI failures of")
        if self.pull_requests is None:
            raise ToolError("GitHub is not set up here")
        task_id = task_number(task)
        failures = await self.pull_requests.failed_checks(task_id)
        follow_up = await self.starts.continue_task(caller, task_id, failures)
        return f"Task #{follow_up.id} started on task #{task_id}'s branch to fix CI; its commits go to the same PR."

    async def resume(self, caller: Caller, task_id: int) -> str:
        """Resume an interrupted task on its branch, with the steps it had done before the interruption (the Resume
        button, and a late answer to its worker's question)."""
        task = await self.access.task_for(caller, task_id)
        # a worker put back on the branch takes turns with a Merge's or Discard's git and with follow-ups, as they do
        async with self._branch_lock(task):
            return await self._resume(caller, await self.access.task(task_number(task)))

    async def _resume(self, caller: Caller, task: Task) -> str:
        self.access.starter_or_owner(caller, task, "resume")
        task_id = task_number(task)
        if task.status is not TaskStatus.INTERRUPTED:
            return f"Task #{task_id} is {task.status.value}; only an interrupted task can be resumed."
        await self.access.check_budget()  # a resumed task spends again, as a new one would
        await self._alone_on_its_branch(task, "resume")
        if await self.merged_already(task):  # the owner merged it meanwhile: that decided its branch
            raise ToolError(
                f"task #{task_id} was merged into {task.base_branch or 'main'} already; start a new task for more work"
            )
        events = await self.store.task_events(task_id)
        steps = [e.detail for e in events if e.kind == "step"][-15:]
        notes = "steps done before the interruption: " + "; ".join(steps) if steps else "no steps recorded"
        unread = unread_notes(events)  # posted, and the restart came before the worker took them
        if unread:
            notes += "\nnotes the user sent that the worker had not read yet:\n" + "\n".join(f"- {n}" for n in unread)
        async with self.starts.room_for(task.chat_id, 1):  # it waits or runs again: MAX_WAITING_TASKS counts it
            # compare-and-set: of two presses at once (a task without a branch has no lock to wait on) one resumes it
            moved = await self.store.transition_task(
                task_id, [TaskStatus.INTERRUPTED], TaskStatus.PENDING, result=notes, progress_message_id=None
            )
        if not moved:
            now = await self.access.task(task_id)
            return f"Task #{task_id} is {now.status.value}; only an interrupted task can be resumed."
        if unread:
            await self.store.add_event(TaskEvent(task_id=task_id, kind=READ_EVENT, detail=str(len(unread))))
        await self.store.add_event(TaskEvent(task_id=task_id, kind="status", detail="pending (resumed)"))
        self.engine.wake()
        return f"Task #{task_id} resumed on its branch."
