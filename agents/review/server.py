"""The review server: the Mini App's page, its assets and its API on REVIEW_LISTEN (a tornado server on the bot's
event loop, like the GitHub webhook), under REVIEW_URL's path.

The page itself (`/task/N`, or `/` for a t.me link whose start parameter names the task) holds nothing of any task:
its script sends the launch data Telegram put in the URL fragment with each API call (`Authorization: tma …`), and
every API call checks it before anything is read: Telegram's signature with the bot's token, its age
(REVIEW_AUTH_MAX_AGE), an allowed user, in the task's chat (a private chat is its user's; a group's members are asked
of Telegram), and the task theirs or the user an owner (as the Diff button). Refused: one line, nothing of the task,
nothing done. Merge, Discard and Open PR go through the crew like the summary's buttons (the same roles: a member's
request goes to the owners), and the task's chat is told what was done. Every answer forbids loading anything from
another origin (Content-Security-Policy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler, StaticFileHandler

from agents.core.errors import ToolError
from agents.core.http_limits import client_timeouts
from agents.core.models import Caller, Task
from agents.core.protocols import Notifier
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.git.command import GitError
from agents.review import diff_view
from agents.review.launch_data import LaunchDataError, LaunchUser, check
from agents.review.pages import STATIC, TaskPages, templates
from agents.store.conversations import is_topic
from agents.store.database import Store
from agents.work.access import Access
from agents.work.crew import Crew

log = logging.getLogger(__name__)

InChat = Callable[[int, int], Awaitable[bool]]  # (a group's chat id, a user id) -> whether the user is a member there
MAX_BODY_BYTES = 16 * 1024  # the API takes no body; the launch data rides in a header
MAX_HEADER_BYTES = 32 * 1024
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors https://web.telegram.org"  # Telegram Web's frame alone
)
REFUSED = "This page shows nothing: {why}."
# the page's actions, each as its button does it on the summary (the crew's part checks the roles)
ACTIONS: dict[str, Callable[[Crew, Caller, int], Awaitable[str]]] = {
    "merge": lambda crew, caller, task_id: crew.attempts.merge_task(caller, task_id),
    "discard": lambda crew, caller, task_id: crew.branches.discard(caller, task_id),
    "pr": lambda crew, caller, task_id: crew.branches.open_pr(caller, task_id),
}


MARKDOWN_LINK = re.compile(r"\[([^\]\n]{1,200})\]\([^)\s]{1,2000}\)")


def plain(markdown: str) -> str:
    """The crew's answer (Markdown for the chat) as the page's plain line: links as their text, no ** or `."""
    return MARKDOWN_LINK.sub(r"\1", markdown).replace("**", "").replace("`", "")


class Refused(Exception):
    """The request may see nothing of the task; the reason is the page's one line."""


class Viewers:
    """Who may see which task: launch data signed with the bot's token and fresh, an allowed user, in the task's chat,
    and the task theirs or the user an owner, as in the chat (`Access.starter_or_owner`: a task on the bot's own code
    is owners' alone)."""

    def __init__(self, settings: Settings, store: Store, access: Access, in_chat: InChat) -> None:
        self.settings, self.store, self.access, self.in_chat = settings, store, access, in_chat

    def user(self, authorization: str) -> LaunchUser:
        scheme, _, init_data = authorization.partition(" ")
        if scheme.lower() != "tma":
            raise Refused("open it from the bot's Review button in Telegram")
        token = self.settings.telegram.telegram_bot_token.get_secret_value()
        try:
            user = check(init_data.strip(), token, self.settings.review.review_auth_max_age)
        except LaunchDataError as err:
            raise Refused(str(err)) from None
        if user.user_id not in self.settings.users.allowed_user_ids:
            raise Refused("you are not one of this bot's users")
        return user

    async def task(self, user: LaunchUser, task_id: int) -> tuple[Task, Caller]:
        """The task and the caller the crew sees (the user, in the task's conversation), or Refused."""
        task = await self.store.get_task(task_id)
        hidden = Refused(f"task #{task_id} is not yours to see (or there is none)")
        if task is None or not await self._in_chat(task.chat_id, user.user_id):
            raise hidden
        caller = Caller(chat_id=task.chat_id, user_id=user.user_id, user_name=user.name)
        try:
            self.access.starter_or_owner(caller, task, "see")
        except ToolError:
            raise hidden from None
        return task, caller

    async def _in_chat(self, conversation: int, user_id: int) -> bool:
        if not is_topic(conversation) and conversation > 0:  # a private chat: its id is its user's
            return conversation == user_id
        place = await self.store.conversations.place(conversation)
        try:
            return await self.in_chat(place.chat_id, user_id)
        except Exception as err:  # Telegram could not say: nobody is let in on a guess
            log.warning("review page: membership of %s in chat %s unknown: %s", user_id, place.chat_id, err)
            return False


class _Base(RequestHandler):
    def initialize(self, server: ReviewServer) -> None:
        self.server = server

    def set_default_headers(self) -> None:
        self.clear_header("Server")  # tornado names itself and its version: nothing a visitor needs
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")

    def check_xsrf_cookie(self) -> None:  # no cookie is ever used: the launch data in a header is the credential
        return None

    def refuse(self, why: str, status: int = 403) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(REFUSED.format(why=self.server.pages.secrets.mask(why)))  # git's words may quote a file

    async def viewer(self, task_id: str) -> tuple[Task, Caller] | None:
        viewers = self.server.viewers
        try:
            user = viewers.user(self.request.headers.get("Authorization", ""))
            return await viewers.task(user, int(task_id))
        except Refused as err:
            log.info("review page refused for %s: %s", self.request.remote_ip, err)
            self.refuse(str(err))
            return None


class _NotFound(_Base):
    """Any other path: refused with the same headers as every answer (tornado's own 404 page carries none)."""

    def prepare(self) -> None:
        self.refuse("no such page", 404)


class _Shell(_Base):
    def get(self, _task_id: str | None = None) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(templates().load("shell.html").generate(base=self.server.base))


class _HighlightCss(_Base):
    def get(self) -> None:
        self.set_header("Content-Type", "text/css; charset=utf-8")
        self.finish(diff_view.highlight_css())


class _Static(StaticFileHandler):
    def set_default_headers(self) -> None:
        self.clear_header("Server")
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("X-Content-Type-Options", "nosniff")


def _split(handler: RequestHandler) -> bool:
    """The page asks for the side-by-side diff where the screen is wide (`layout=split`); unified otherwise."""
    return handler.get_query_argument("layout", "") == "split"


def _page_number(handler: RequestHandler) -> int:
    raw = handler.get_query_argument("page", "0")
    # ASCII digits only: str.isdigit() also holds for "²" and "①", which int() refuses (a 500 for the page)
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 7 else 0


class _HtmlPart(_Base):
    """A part of a task's page as HTML, for a viewer who may see the task: `part_html` says which part."""

    async def part_html(self, caller: Caller, task: Task, page: int, split: bool) -> bytes:
        raise NotImplementedError

    async def get(self, task_id: str) -> None:
        found = await self.viewer(task_id)
        if found is None:
            return
        task, caller = found
        try:
            body = await self.part_html(caller, task, _page_number(self), _split(self))
        except (ToolError, GitError) as err:
            self.refuse(str(err), 404)
            return
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(body)


class _TaskPage(_HtmlPart):
    async def part_html(self, caller: Caller, task: Task, page: int, split: bool) -> bytes:
        return await self.server.pages.task_html(caller, task, page, split)


class _DiffPage(_HtmlPart):
    async def part_html(self, caller: Caller, task: Task, page: int, split: bool) -> bytes:
        return await self.server.pages.diff_html(caller, task, page, split)


class _Picture(_Base):
    async def get(self, task_id: str, index: str) -> None:
        found = await self.viewer(task_id)
        if found is None:
            return
        png = await self.server.pages.picture(found[0], int(index))
        if png is None:
            self.refuse("there is no such picture", 404)
            return
        self.set_header("Content-Type", "image/png")
        self.finish(png)


class _Action(_Base):
    async def post(self, task_id: str, action: str) -> None:
        found = await self.viewer(task_id)
        if found is None:
            return
        task, caller = found
        text = await self.server.act(caller, task, action)
        self.finish({"text": plain(self.server.pages.secrets.mask(text))})  # masked as the chat's copy is


class ReviewServer:
    """Serves the review page on REVIEW_LISTEN until `stop`."""

    def __init__(
        self, settings: Settings, store: Store, crew: Crew, notifier: Notifier, pages: TaskPages, in_chat: InChat
    ) -> None:
        self.settings, self.crew, self.notifier, self.pages = settings, crew, notifier, pages
        self.viewers = Viewers(settings, store, crew.access, in_chat)
        self.base = urlsplit(settings.review.review_url or "").path.rstrip("/")
        host, _, port = settings.review.review_listen.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        b, kw = self.base, {"server": self}
        app = Application(
            [
                (rf"{b}/?", _Shell, kw),  # the Mini App's own URL (a group's link), with or without a slash
                (rf"{b}/task/(\d+)/?", _Shell, kw),
                (rf"{b}/static/highlight\.css", _HighlightCss, kw),
                (rf"{b}/static/(review\.(?:css|js))", _Static, {"path": str(STATIC)}),
                (rf"{b}/api/task/(\d{{1,12}})", _TaskPage, kw),
                (rf"{b}/api/task/(\d{{1,12}})/diff", _DiffPage, kw),
                (rf"{b}/api/task/(\d{{1,12}})/picture/(\d{{1,4}})", _Picture, kw),
                (rf"{b}/api/task/(\d{{1,12}})/(merge|discard|pr)", _Action, kw),
            ],
            compress_response=True,
            default_handler_class=_NotFound,
            default_handler_args=kw,
        )
        self._server = HTTPServer(
            app, max_body_size=MAX_BODY_BYTES, max_header_size=MAX_HEADER_BYTES, xheaders=True, **client_timeouts()
        )

    async def act(self, caller: Caller, task: Task, action: str) -> str:
        """Merge, Discard or Open PR as the summary's button does it (the crew checks the roles); the task's chat is
        told what was done, as after a press."""
        try:
            text = await ACTIONS[action](self.crew, caller, task.stored_id)
        except (ToolError, GitError) as err:
            text = str(err)[:1].upper() + str(err)[1:]
        with contextlib.suppress(Exception):  # the page has its answer even if the chat cannot be written to
            # the name is the user's own words (Telegram's first name): literal, never formatting or a link
            name = outside_text(caller.user_name, one_line=True) if caller.user_name else ""
            who = f" (from the review page, by {name})" if name else " (from the review page)"
            await self.notifier.send(task.chat_id, text + who)
        return text

    def start(self) -> None:
        self._server.listen(self.port, self.host)
        log.info(
            "review page: http://%s:%s%s/ behind %s", self.host, self.port, self.base, self.settings.review.review_url
        )

    async def stop(self, timeout: float = 5.0) -> None:
        self._server.stop()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(timeout):
                await self._server.close_all_connections()
