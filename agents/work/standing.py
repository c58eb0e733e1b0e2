"""Standing notes: what a user wants every time ("in site we use pnpm"), kept and applied to their later requests.

A note belongs to the user who made it, for one workspace or for all. It applies to its author's requests; an
owner's note applies to everyone's (the owner keeps the repositories' conventions), but a note about the bot's own
code (`self`) only to owners, as members reach none of `self`, nor keep notes for it. Owners may forget anyone's note,
members only their own. Bounded: NOTES_MAX_PER_USER notes of NOTE_MAX_CHARS each, said when reached. They apply in
the order they were made (a later note wins over an earlier one), and are listed in that order.

The orchestrator sees the notes that apply to the person asking in each turn's context (after the cached prefix,
so they never change it); a worker's first turn carries the notes of its task's user for its workspace.
"""

from __future__ import annotations

from typing import Annotated

from agents.core.actions import Action, button
from agents.core.errors import ToolError
from agents.core.ids import valid_id
from agents.core.models import Caller
from agents.core.protocols import Notifier
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.core.work_tools import Arg, work_tool
from agents.store.connection import Connection
from agents.store.standing import StandingNote, StandingNotes
from agents.work.own_words import FORGET, REMEMBER, decided_by_own_words, unless_a_question_waits
from agents.workspaces.folders import Workspaces


class Notes:
    """Remember, forget and look up standing notes, with the roles checked here, whoever asks (tool or button)."""

    def __init__(self, settings: Settings, store: Connection, workspaces: Workspaces, notifier: Notifier) -> None:
        self.settings, self.workspaces, self.notifier = settings, workspaces, notifier
        self.table = StandingNotes(store)
        self.unclear = unless_a_question_waits(store)  # a bare "yes" while a worker's question waits may answer it

    def applies_to(self, note: StandingNote, user_id: int | None) -> bool:
        """Whether `user_id` sees `note`, as `applying` gives notes: their own, and the owners' (to a member, none
        about the bot's own code: a member asking for one by number learns no more than of a number with no note)."""
        if note.user_id == user_id:
            return True
        users = self.settings.users
        about_self = note.workspace is not None and self.workspaces.is_self(note.workspace)
        return users.is_owner(note.user_id) and (users.is_owner(user_id) or not about_self)

    async def applying(
        self, user_id: int | None, workspace: str | None = None, *, every: bool = False
    ) -> list[StandingNote]:
        return await self.table.applying(
            user_id, self.settings.users.is_owner, workspace, about_self=self.workspaces.is_self, every=every
        )

    async def listed(self, caller: Caller) -> list[StandingNote]:
        """What /notes shows: every note to an owner in their private chat; to anyone else, and to an owner in a group
        (whose members all read the answer), the notes that apply to them: their own and the owners'. A member's
        note, made in their private chat, is theirs: a group sees it only when they list it there themselves."""
        private = caller.user_id is not None and caller.chat_id == caller.user_id  # Telegram: a private chat's id
        if private and self.settings.users.is_owner(caller.user_id):
            return await self.table.all()
        return await self.applying(caller.user_id, every=True)

    @work_tool
    async def remember(
        self,
        caller: Caller,
        text: Annotated[str, Arg("the note, in the user's words, self-contained (e.g. 'in site we use pnpm')")],
        workspace: Annotated[
            str | None, Arg("the workspace it is about (optional; leave it out for a note that holds everywhere)")
        ] = None,
    ) -> str:
        """Keep a standing note of the user's that applies to their later requests (and to every worker started
        for them), for one workspace or all: when the user says 'remember that…', 'from now on…', 'always…'."""
        cleaned = " ".join(str(text or "").split())
        if not cleaned:
            raise ToolError("the note is empty: say what to remember")
        limit = self.settings.briefing.note_max_chars
        if len(cleaned) > limit:
            raise ToolError(
                f"a standing note holds at most {limit} characters and this one has {len(cleaned)}: "
                "ask the user for a shorter one"
            )
        owner = self.settings.users.is_owner(caller.user_id)
        name = self.workspaces.reach(workspace, owner).name if workspace and str(workspace).strip() else None
        mine = await self.table.of_user(caller.user_id)
        if len(mine) >= self.settings.briefing.notes_max_per_user:
            raise ToolError(
                f"the user already keeps {len(mine)} standing notes, the most one may keep: nothing was stored; "
                "tell them to forget one first (/notes lists them, each with a Forget button)"
            )
        shown = outside_text(cleaned if len(cleaned) <= 120 else cleaned[:119] + "…", one_line=True)
        await decided_by_own_words(self.notifier, caller, REMEMBER, f"a standing note ({shown})", unclear=self.unclear)
        note = await self.table.add(
            StandingNote(user_id=caller.user_id, user_name=caller.user_name, workspace=name, text=cleaned)
        )
        return (
            f"Noted as note #{note.id} ({note.scope}): {cleaned}. It applies to the user's later requests and "
            "workers; /notes lists the notes."
        )

    @work_tool
    async def forget(self, caller: Caller, note_id: Annotated[int, Arg("the note's number (note #N)")]) -> str:
        """Delete a standing note (e.g. 'forget the pnpm note'): its number is in the context's standing notes."""
        note = await self.table.get(int(note_id)) if valid_id(note_id) else None
        # only a note this chat may see (/notes' list): an owner in a group reaches no member's private note, whose
        # text the answer would show to the whole group
        if note is None or note.id not in {n.id for n in await self.listed(caller)}:
            raise ToolError(f"there is no note #{note_id}")
        if note.user_id != caller.user_id and not self.settings.users.is_owner(caller.user_id):
            raise ToolError(
                f"note #{note.id} is {note.user_name or 'an owner'}'s: only its author or an owner can forget it"
            )
        buttons = [[button(f"✖ Forget #{note.id}", Action.NOTE_FORGET, note.id or 0)]]
        await decided_by_own_words(self.notifier, caller, FORGET, f"**note #{note.id}**", buttons, self.unclear)
        if not await self.table.delete(note.id or 0):
            return f"Note #{note.id} was already forgotten."
        return f"Note #{note.id} is forgotten: {outside_text(note.text)}"

    async def for_worker(self, user_id: int | None, workspace: str) -> str:
        """The notes for a worker's first turn ('' when none apply)."""
        notes = await self.applying(user_id, workspace)
        if not notes:
            return ""
        listed = "\n".join(f"- {n.text}" for n in notes)
        return (
            "\n\n## Standing notes of the user who asked (they apply to every task of theirs here; a later note wins "
            f"over an earlier one)\n{listed}"
        )


def notes_markdown(notes: list[StandingNote], caller_id: int | None) -> str:
    """/notes: the notes in the order they apply."""
    if not notes:
        return "No standing notes. Say “remember that …” (for example “remember that in site we use pnpm”) to add one."
    lines = [
        f"• #{n.id} ({n.scope}"
        + (f" · {outside_text(n.user_name)}" if n.user_name and n.user_id != caller_id else "")
        + f"): {outside_text(n.text)}"
        for n in notes
    ]
    return "**Standing notes** (in the order they apply; a later one wins)\n" + "\n".join(lines)
