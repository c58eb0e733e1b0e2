"""A conversation's workspace: /workspace NAME binds one, a topic named like a workspace binds itself, and an owner
creates a new one (a git repository with a first commit, indexed for symbol hints at once)."""

from __future__ import annotations

from typing import Annotated

from agents.core.errors import ToolError
from agents.core.models import Caller
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.core.work_tools import Arg, work_tool
from agents.repo_map.maps import RepoMap
from agents.store.database import Store
from agents.work.access import Access, git_identity
from agents.work.own_words import CREATE_WORKSPACE
from agents.work.turn_scope import current_turn
from agents.workspaces.creation import create_workspace
from agents.workspaces.folders import Workspaces

WORKSPACES_PER_TURN = 3  # one message makes a project or two; dozens are a model gone astray


class WorkspaceBinding:
    """Binds conversations to workspaces and creates workspaces (owners only)."""

    def __init__(
        self, settings: Settings, store: Store, workspaces: Workspaces, access: Access, repo_map: RepoMap | None
    ) -> None:
        self.settings, self.store, self.workspaces, self.access = settings, store, workspaces, access
        self.repo_map = repo_map  # a new workspace is indexed in the background at once

    async def bind(self, caller: Caller, name: str) -> str:
        """/workspace NAME: the conversation's messages and tasks default to that workspace."""
        ws = await self.access.workspace_for(caller, name, f"to bind a conversation to the workspace named {name}")
        await self.store.conversations.bind(caller.chat_id, ws.name)
        return f"This conversation now works in **{ws.name}**: tasks started here use it unless another is named."

    async def auto_bind(self, conversation: int, topic_name: str) -> None:
        """A topic named like a workspace binds itself (once, and never over a binding someone made)."""
        if not topic_name or await self.store.conversations.bound_workspace(conversation) is not None:
            return
        try:
            ws = self.workspaces.resolve(topic_name)
        except ToolError:
            return
        if not ws.is_self:
            await self.store.conversations.bind(conversation, ws.name)

    @work_tool(name="create_workspace")
    async def create(
        self, caller: Caller, name: Annotated[str, Arg("folder name: letters, digits, - and _ (e.g. portfolio-site)")]
    ) -> str:
        """Create a new, empty project: a git repository under the workspaces folder (for a new project that has no
        folder yet, e.g. 'build me a portfolio site'); then start work in it."""
        await self.access.owners_only(caller, "create a workspace", "to create a workspace named:", name)
        await self.access.asked_for(
            caller, CREATE_WORKSPACE, f"a workspace named {outside_text(str(name), one_line=True)}"
        )
        turn = current_turn()
        if turn is not None and turn.workspaces_made >= WORKSPACES_PER_TURN:
            raise ToolError(f"{WORKSPACES_PER_TURN} workspaces were created in this turn already: that is the most")
        ws = await create_workspace(self.workspaces, name, git_identity(self.settings))
        if turn is not None:
            turn.workspaces_made += 1
        if self.repo_map is not None:
            self.repo_map.index_in_background(ws.name, ws.path)
        return (
            f"Created workspace {ws.name} (a new git repository with an initial commit); start work in it by that name."
        )
