"""Files sent in the chat (`attachments`, stored with their message by messages.py) and those handed to a task
(`task_attachments`): looked up by id for a proposal, refused by the Messages API, mirrored onto a runner."""

from __future__ import annotations

from collections.abc import Iterable

from agents.core.models import Attachment
from agents.store.connection import Connection, insert_sql, to_db
from agents.store.kept_messages import KeptMessages


class AttachmentTable(Connection):
    """The `attachments` and `task_attachments` tables; a part of `Store`, which sets `_kept`."""

    _kept: KeptMessages  # the chat history kept in memory, whose attachments a refusal changes too

    async def chat_attachments(self, chat_id: int, ids: Iterable[int]) -> list[Attachment]:
        """The attachments of this chat among `ids`, in the order asked (unknown ids are left out)."""
        wanted = [int(i) for i in ids]
        if not wanted:
            return []
        found = {
            a.id: a
            for a in await self.fetch(
                Attachment,
                f"SELECT * FROM attachments WHERE chat_id = ? AND id IN ({', '.join('?' for _ in wanted)})",
                (chat_id, *wanted),
            )
        }
        return [found[i] for i in dict.fromkeys(wanted) if i in found]

    async def refuse_attachment(self, attachment_id: int, reason: str) -> None:
        """The Messages API refused this attachment: it is left out of every later request."""
        await self.update("attachments", attachment_id, {"refused": reason})
        self._kept.refuse_attachment(attachment_id, reason)

    async def task_attachments(self, task_id: int) -> list[tuple[Attachment, bool]]:
        """(attachment, save_as_file) of what was handed to the task."""
        rows = await self.rows(
            "SELECT a.*, t.save_as_file FROM task_attachments t JOIN attachments a ON a.id = t.attachment_id "
            "WHERE t.task_id = ? ORDER BY a.id",
            (task_id,),
        )
        handed = []
        for row in rows:
            fields = dict(row)
            save = bool(fields.pop("save_as_file"))
            handed.append((Attachment.model_validate(fields), save))
        return handed

    async def mirror_task_attachments(self, task_id: int, handed: list[tuple[Attachment, bool]]) -> None:
        """A runner's copy of the files handed to a task (their bytes already under its attachments folder), replacing
        what an earlier run of the task mirrored; each under the bot's id (the worktree's copies are named after it,
        as on the bot; a runner's store holds no attachments of its own)."""
        async with self.transaction() as db:
            await db.execute("DELETE FROM task_attachments WHERE task_id = ?", (task_id,))
            for attachment, save in handed:
                data = {k: to_db(v) for k, v in attachment.model_dump().items() if k != "message_id"}
                await db.execute(insert_sql("attachments", data, "INSERT OR REPLACE"), tuple(data.values()))
                await db.execute(
                    "INSERT INTO task_attachments (task_id, attachment_id, save_as_file) VALUES (?, ?, ?)",
                    (task_id, attachment.id, int(save)),
                )
