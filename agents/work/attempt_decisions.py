"""What is done to a group of attempts as a whole: Merge (the pick, or the attempt named; the others discarded),
Discard (all), Cancel (all), and notes (to all, or to "attempt 2"). Each goes through the task's own decision
(branch_decisions.py, running_tasks.py), so the roles hold as for any task: members start and steer, owners merge
and discard. A Merge is on record (the group `merging`, with the attempt chosen) from before its merge until the
other attempts are discarded: one a kill cut short is finished at the next start (`merge_cut_short`) from what git
shows, and its chat told."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated

from agents.core.actions import Action, Buttons, button
from agents.core.errors import ToolError
from agents.core.models import AttemptGroup, AttemptState, Caller, Delivery, Task, TaskStatus
from agents.core.protocols import TaskEngine
from agents.core.work_tools import Arg, TaskId, work_tool
from agents.store.database import Store
from agents.store.delivery import owed
from agents.work.access import Access, task_number
from agents.work.branch_decisions import BranchDecisions
from agents.work.own_words import CANCEL_TASK
from agents.work.progress import cancel_button
from agents.work.running_tasks import RunningTasks

ONE_ATTEMPT = re.compile(r"^\s*attempt\s+#?(\d)\b\s*[:,.\-–—]?\s*", re.IGNORECASE)


def decision_buttons(group: AttemptGroup) -> Buttons:
    """Merge the pick and Discard all, as the race's summary offers them."""
    return [
        [
            button("Merge the pick", Action.MERGE_ATTEMPTS, group.stored_id),
            button("✖ Discard all", Action.DISCARD_ATTEMPTS, group.stored_id),
        ]
    ]


def being_merged(group: AttemptGroup) -> ToolError:
    return ToolError(
        f"attempts #{group.id} are being merged (task #{group.merging_task_id}, then the others discarded); "
        "that ends before anything else is done to them"
    )


class AttemptDecisions:
    """Merge, Discard, Cancel and notes for a group; `anywhere` as in BranchDecisions (a request handed to owners).
    The cancel_task, message_task and merge_task tools are here: a task that is an attempt is decided as its group."""

    def __init__(
        self, store: Store, engine: TaskEngine, access: Access, branches: BranchDecisions, running: RunningTasks
    ) -> None:
        self.store, self.engine, self.access, self.branches, self.running = store, engine, access, branches, running
        # one decision at a time per group: Merge reads the group's state, merges, then moves it; two Merges (the
        # button and the tool naming another attempt) must not both pass the read and both merge
        self._deciding: dict[int, asyncio.Lock] = {}

    def _decision_of(self, group_id: int) -> asyncio.Lock:
        return self._deciding.setdefault(group_id, asyncio.Lock())

    # ---- the tools, and the buttons of one task: an attempt's decision is its group's ------------------------------
    @work_tool
    async def cancel_task(self, caller: Caller, task_id: TaskId) -> str:
        """Cancel a running or pending task and kill every process it started."""
        task = await self.access.task_for(caller, task_id)
        self.access.starter_or_owner(caller, task, "cancel")
        await self.access.asked_for(caller, CANCEL_TASK, f"**task #{task.id}**", cancel_button(task_number(task)))
        return await self.cancel(caller, task)  # an attempt: all of them

    @work_tool
    async def message_task(
        self, caller: Caller, task_id: TaskId, text: Annotated[str, Arg("the note, in the user's words")]
    ) -> str:
        """Pass a note to a running task's worker (it reads it before its next step), e.g. 'also update the
        README'. Only running tasks take notes."""
        return await self.message(caller, await self.access.task_for(caller, task_id), text)

    @work_tool
    async def merge_task(self, caller: Caller, task_id: TaskId, *, anywhere: bool = False) -> str:
        """Merge a finished task's branch into the branch it started from."""
        # the tool and the Merge button alike; an attempt's merge is its group's: the others are discarded with it
        task_id = int(task_id)
        group = await self.group_of(task_id)
        # another chat's attempt is answered as any task of another chat is (never its race's number)
        if group is not None and (group.chat_id == caller.chat_id or (anywhere and self.access.is_owner(caller))):
            return await self.merge(caller, group.stored_id, task_id, anywhere=anywhere)
        return await self.branches.merge(caller, task_id, anywhere=anywhere)

    async def group_of(self, task_id: int) -> AttemptGroup | None:
        """The group task #task_id races in, if it is an attempt."""
        task = await self.store.get_task(int(task_id))
        if task is None or task.attempt_group is None:
            return None
        return await self.store.attempts.get(task.attempt_group)

    async def _group_for(self, caller: Caller, group_id: int, anywhere: bool) -> AttemptGroup:
        group = await self.store.attempts.get(int(group_id))
        if group is None or (group.chat_id != caller.chat_id and not (anywhere and self.access.is_owner(caller))):
            raise ToolError(f"there are no attempts #{group_id} in this chat")
        return group

    async def merge(self, caller: Caller, group_id: int, task_id: int | None = None, *, anywhere: bool = False) -> str:
        """Merge the pick (or the attempt `task_id`), then discard every other attempt's branch and worktree."""
        async with self._decision_of(int(group_id)):
            return await self._merge(caller, group_id, task_id, anywhere)

    async def _merge(self, caller: Caller, group_id: int, task_id: int | None, anywhere: bool) -> str:
        group = await self._group_for(caller, group_id, anywhere)
        await self.access.owners_only(
            caller, "merge", f"to merge the pick of **attempts #{group.id}**:", group.title, decision_buttons(group)
        )
        if group.state is AttemptState.RACING:
            raise ToolError(f"attempts #{group.id} are still running; merge when their summary is in")
        if group.state is AttemptState.MERGING:
            raise being_merged(group)
        if group.state is not AttemptState.SUMMARISED:
            return f"Attempts #{group.id} were already {group.state.value}."
        members = await self.store.attempts.members(group.stored_id)
        chosen = task_id if task_id is not None else group.pick_task_id
        if chosen is None or chosen not in {t.id for t in members}:
            raise ToolError(f"attempts #{group.id} have no attempt with a change to merge; Discard drops them all")
        # on record before git is touched: a kill from here on is finished at the next start (`merge_cut_short`)
        if not await self.store.attempts.move(
            group.stored_id, AttemptState.SUMMARISED, AttemptState.MERGING, merging_task_id=chosen
        ):
            return f"Attempts #{group.id} were already decided."
        try:
            result = await self.branches.merge_result(caller, chosen, anywhere=anywhere)
        except Exception:
            await self._unless_merged(group.stored_id, chosen)
            raise
        if not result.ok:  # refused or stopped by a conflict: nothing merged, the race is the owners' again
            await self._back(group.stored_id)
            return result.message
        dropped = [await self._discard_one(caller, t, anywhere) for t in members if t.id != chosen]
        await self.store.attempts.move(group.stored_id, AttemptState.MERGING, AttemptState.MERGED)
        number = next(t.attempt for t in members if t.id == chosen)
        others = f" The other attempts were discarded ({', '.join(d for d in dropped if d)})." if dropped else ""
        return f"Attempt {number} (task #{chosen}) merged: {result.message}{others}"

    async def _back(self, group_id: int) -> None:
        """The Merge ended without merging: the race is summarised again, its buttons good."""
        await self.store.attempts.move(group_id, AttemptState.MERGING, AttemptState.SUMMARISED, merging_task_id=None)

    async def _unless_merged(self, group_id: int, chosen: int) -> None:
        """A Merge that failed with an error: summarised again unless git shows the attempt merged (then the group
        stays `merging`, and the next start discards the others)."""
        task = await self.store.get_task(chosen)
        if task is None or not await self.branches.merged_already(task):
            await self._back(group_id)

    async def merging(self) -> list[AttemptGroup]:
        """The races whose Merge a stop or a kill cut short (at start-up)."""
        return await self.store.attempts.merging()

    async def merge_cut_short(self, group_id: int) -> Delivery | None:
        """At start-up, once the attempts' own cut-short Merges and Discards are ended (branch_decisions.py
        `cut_short`, which waits for a killed bot's git merge): a race's Merge a kill cut short, finished from what git
        shows. The chosen attempt merged: the other attempts' branches still there are discarded (by the bot: an
        owner decided it with the Merge), the race merged, and its chat told what was done. Not merged: the race
        summarised again, its chat told so with Merge the pick / Discard all. The notice is stored in the outbox with
        the move, for the caller to send; None when there is nothing to finish (yet)."""
        async with self._decision_of(int(group_id)):
            group = await self.store.attempts.get(int(group_id))
            if group is None or group.state is not AttemptState.MERGING:
                return None
            members = await self.store.attempts.members(group.stored_id)
            still_open = {d.task_id for d in await self.store.open_decisions.cut_short()}
            if still_open & {t.id for t in members}:
                return None  # what became of an attempt's branch is not known yet: the next start finishes it
            chosen = next((t for t in members if t.id == group.merging_task_id), None)
            if chosen is not None and await self.branches.merged_already(chosen):
                return await self._finish_merged(group, chosen, members)
            branch = f" attempt {chosen.attempt}'s branch `{chosen.branch}`" if chosen is not None else " the attempt"
            text = (
                f"⚠️ The bot stopped while merging **attempts #{group.id}**, and the merge did not happen: "
                f"`{(chosen.base_branch if chosen else None) or 'main'}` does not hold{branch}. "
                "Merge the pick again, or discard them all?"
            )
            notice = owed(group.chat_id, text, buttons=decision_buttons(group))
            return await self.store.attempts.move_telling(
                group.stored_id, AttemptState.MERGING, AttemptState.SUMMARISED, notice, merging_task_id=None
            )

    async def _finish_merged(self, group: AttemptGroup, chosen: Task, members: list[Task]) -> Delivery | None:
        dropped = []
        for task in members:
            if task.id == chosen.id:
                continue
            try:
                await self.branches.discard_decided(task.stored_id)
            except ToolError as err:
                dropped.append(f"#{task.id}: {err}")
            else:
                dropped.append(f"#{task.id}")
        sha = await self.branches.merge_commit(chosen)
        merged = f"merged {chosen.branch} into {chosen.base_branch or 'main'} ({sha[:8]})"
        others = f" The other attempts were discarded ({', '.join(dropped)})." if dropped else ""
        text = (
            f"⚠️ The bot stopped while merging **attempts #{group.id}**; the merge is finished now. "
            f"Attempt {chosen.attempt} (task #{chosen.id}) merged: {merged}.{others}"
        )
        return await self.store.attempts.move_telling(
            group.stored_id, AttemptState.MERGING, AttemptState.MERGED, owed(group.chat_id, text)
        )

    async def _discard_one(self, caller: Caller, task: Task, anywhere: bool) -> str:
        """One attempt's branch and worktree deleted; `#N` or what went wrong."""
        try:
            await self.branches.discard(caller, task.stored_id, anywhere=anywhere)
        except ToolError as err:
            return f"#{task.id}: {err}"
        return f"#{task.id}"

    async def discard(self, caller: Caller, group_id: int, *, anywhere: bool = False) -> str:
        """Every attempt stopped (if still running) and its branch and worktree deleted; no summary follows."""
        async with self._decision_of(int(group_id)):
            return await self._discard(caller, group_id, anywhere)

    async def _discard(self, caller: Caller, group_id: int, anywhere: bool) -> str:
        group = await self._group_for(caller, group_id, anywhere)
        buttons = [[button("✖ Discard all", Action.DISCARD_ATTEMPTS, group.stored_id)]]
        await self.access.owners_only(caller, "discard", f"to discard **attempts #{group.id}**:", group.title, buttons)
        if group.state is AttemptState.MERGED:
            return f"Attempts #{group.id} were merged; the other attempts were discarded then."
        if group.state is AttemptState.MERGING:
            raise being_merged(group)
        moved = await self.store.attempts.move(group.stored_id, AttemptState.RACING, AttemptState.DISCARDED)
        moved = moved or await self.store.attempts.move(
            group.stored_id, AttemptState.SUMMARISED, AttemptState.DISCARDED
        )
        if not moved:
            return f"Attempts #{group.id} were already discarded."
        members = await self.store.attempts.members(group.stored_id)
        dropped = [await self._discard_one(caller, t, anywhere) for t in members]
        return f"Attempts #{group.id} discarded: every attempt's branch and worktree deleted ({', '.join(dropped)})."

    async def cancel(self, caller: Caller, task: Task) -> str:
        """Cancel one attempt = cancel the race: every attempt still active stops; the summary of what they did
        follows."""
        group_id = task.attempt_group
        if group_id is None:
            return await self.running.cancel(caller, task.stored_id)
        self.access.starter_or_owner(caller, task, "cancel")
        members = await self.store.attempts.members(group_id)
        stopped = [t for t in members if t.status.is_cancellable and await self.engine.cancel(t.stored_id)]
        if not stopped:
            return f"Attempts #{group_id} have already ended; nothing to cancel."
        return (
            f"Attempts #{group_id} cancelled ({', '.join(f'#{t.id}' for t in stopped)}); every process they started "
            "was stopped. The summary of what they did follows."
        )

    async def message(self, caller: Caller, task: Task, text: str) -> str:
        """A note to every running attempt of the group, or, starting with "attempt K", to that one only."""
        group_id = task.attempt_group
        if group_id is None:
            return await self.running.message(caller, task.stored_id, text)
        self.access.starter_or_owner(caller, task, "steer")  # before the loop, which reads a refusal as a race ended
        members = await self.store.attempts.members(group_id)
        targets = members
        if matched := ONE_ATTEMPT.match(str(text)):
            number = int(matched.group(1))
            targets = [t for t in members if t.attempt == number]
            if not targets:
                raise ToolError(f"attempts #{group_id} have no attempt {number} (they are 1 to {len(members)})")
            text = str(text)[matched.end() :]
        running = [t for t in targets if t.status is TaskStatus.IN_PROGRESS]
        if not running:
            raise ToolError(f"no attempt of #{group_id} that the note is for is running, so no worker would read it")
        passed = []
        for target in running:
            try:
                await self.running.message(caller, target.stored_id, text)
            except ToolError:
                continue  # ended between the look and the note
            passed.append(f"attempt {target.attempt} (#{target.id})")
        if not passed:
            raise ToolError(f"the attempts of #{group_id} ended before the note reached them")
        return f"Note passed to {', '.join(passed)}; each worker reads it before its next step."
