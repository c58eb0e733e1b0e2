"""Sending the model's Markdown so Telegram always accepts it: HTML chunks, plain-text fallback, long answers as
documents; a group Telegram upgraded to a supergroup is followed to its new chat id."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import html
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    InputMediaPhoto,
    Message,
    ReplyParameters,
    WebAppInfo,
)
from telegram.constants import ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter, TelegramError, TimedOut

from agents.core.actions import Button, Buttons
from agents.core.errors import ChatUnreachable, MessageGone, SendTimedOut, SendUnavailable
from agents.core.secrets_filter import SecretsFilter
from agents.core.text import outside_text, utf16_cut
from agents.store.chat_moves import ChatMoves
from agents.store.conversations import Conversations, Place, is_topic
from agents.store.shown_buttons import ShownButtons
from telegram_bot.render.chunks import html_to_text, render_chunks, split_plain, summarize_for_document
from telegram_bot.strangers import floods_raised, seconds

log = logging.getLogger(__name__)

PARTLY_SENT_KEPT = 64  # messages remembered as sent in part, at most
SENT_ELSEWHERE_KEPT = 256  # messages remembered as sent to the new id of a chat addressed by its old one, at most
T = TypeVar("T")

TELEGRAM_LIMIT = 4096
CAPTION_LIMIT = 1024  # a photo's or document's caption, in UTF-16 code units as Telegram counts it
DOCUMENT_THRESHOLD = 3 * TELEGRAM_LIMIT  # longer answers go as a .md document with a short summary


def reply_parameters(reply_to: int | None) -> ReplyParameters | None:
    """Reply to a message, but still send if the user deleted it meanwhile."""
    return ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None


NOTICE_RETRY_SECONDS = 1.0  # a notice Telegram failed to take (a 5xx, a timeout) is tried once more after this
NOTICE_MAX_WAIT_SECONDS = 5.0  # a flood wait longer than this is not waited out for a notice: the turn goes on


async def notice(message: Message, text: str, *, parse_mode: str | None = None) -> bool:
    """A short notice in reply to the user's message (an echo of a voice note, "loading the speech model", why a file
    was refused), sent even if the user deleted their message meanwhile; False when Telegram did not take it.

    A notice is never what the turn is for: a request goes on to the model whether or not its notice got through, so
    a Telegram error here is logged, tried once more when it may pass (a 5xx, a timeout), and never raised."""
    for attempt in range(2):
        try:
            await message.reply_text(
                text, parse_mode=parse_mode, reply_parameters=reply_parameters(message.message_id), do_quote=False
            )
            return True
        except TelegramError as err:
            wait = seconds(err.retry_after) if isinstance(err, RetryAfter) else NOTICE_RETRY_SECONDS
            may_pass = isinstance(err, RetryAfter | TimedOut) or (
                isinstance(err, NetworkError) and not isinstance(err, BadRequest)
            )
            if attempt or not may_pass or wait > NOTICE_MAX_WAIT_SECONDS:
                log.warning("chat %s: a notice was not sent: %s", message.chat_id, err)
                return False
            await asyncio.sleep(wait)
    return False


def inline_button(b: Button, chat_id: int, app_link: str | None) -> InlineKeyboardButton | None:
    """A callback button; a review page button is a Mini App button in a private chat (Telegram signs the launch
    data it opens the page with), a t.me link to the bot's Mini App in a group (Telegram allows no web_app button
    there), and left out in a group when no Mini App is registered (REVIEW_APP_NAME)."""
    if not b.web_app:
        return InlineKeyboardButton(b.label, callback_data=b.data)
    if chat_id > 0:  # Telegram's private chats have positive ids, groups negative ones
        return InlineKeyboardButton(b.label, web_app=WebAppInfo(b.web_app))
    if app_link and b.start_param:
        return InlineKeyboardButton(b.label, url=f"{app_link}?startapp={b.start_param}")
    return None


def keyboard(buttons: Buttons | None, chat_id: int = 0, app_link: str | None = None) -> InlineKeyboardMarkup | None:
    rows = [[k for b in row if (k := inline_button(b, chat_id, app_link)) is not None] for row in buttons or []]
    rows = [row for row in rows if row]
    return InlineKeyboardMarkup(rows) if rows else None


_LINK_TARGET = re.compile(r"\]\([^)\n]*\)")
_MARKUP = re.compile(r"[\\*~|`\[\]]")


def rendering_may_join(markdown: str, secrets: SecretsFilter) -> bool:
    """Whether rendering `markdown` could show a secret its source keeps apart (`shown_masked` then checks each
    chunk as shown): the source without what rendering removes (escapes, emphasis, code and link marks, link
    targets; underscores once kept, once left out) holds something the filter masks. A cheap look at the source:
    reading the rendered text back costs far more (about a millisecond a message)."""
    kept = _MARKUP.sub("", _LINK_TARGET.sub("]", markdown))
    return any(secrets.mask(view) != view for view in (kept, kept.replace("_", "")))


def shown_masked(chunk: str, secrets: SecretsFilter) -> str:
    """An HTML chunk, unless the text it shows holds what the output filter masks: then that text, masked, as plain
    HTML. The filter reads the Markdown before it is rendered, and rendering joins what the source keeps apart: the
    bot's own escaping of text it did not write (`ghp\\_…`), a model's backslash or emphasis inside a token."""
    shown = html_to_text(chunk)
    masked = secrets.mask(shown)
    return chunk if masked == shown else html.escape(masked, quote=False)


def masked_buttons(buttons: Buttons | None, secrets: SecretsFilter) -> Buttons | None:
    """The buttons with their labels masked (an option a worker wrote is a label)."""
    if not buttons:
        return buttons
    return [[dataclasses.replace(b, label=secrets.mask(b.label)) for b in row] for row in buttons]


def html_to_plain(chunk: str) -> str:
    """The plain text an HTML chunk shows (the one HTML-to-text: render.html_to_text)."""
    return html_to_text(chunk)


def is_entity_error(err: BadRequest) -> bool:
    return "can't parse entities" in str(err).lower() or "can't find end" in str(err).lower()


async def send_html_or_plain(
    bot: Bot,
    chat_id: int,
    chunk: str,
    *,
    reply_to: int | None = None,
    markup: InlineKeyboardMarkup | None = None,
    thread_id: int | None = None,
) -> Message:
    """One HTML chunk; if Telegram still refuses the entities, the same text as plain text."""
    try:
        return await bot.send_message(
            chat_id,
            chunk,
            parse_mode=ParseMode.HTML,
            reply_markup=markup,
            reply_parameters=reply_parameters(reply_to),
            disable_web_page_preview=True,
            message_thread_id=thread_id,
        )
    except BadRequest as err:
        if not is_entity_error(err):
            raise
        log.warning("chat %s: Telegram refused HTML (%s); resending as plain text", chat_id, err)
        parts = split_plain(html_to_plain(chunk), TELEGRAM_LIMIT)
        if not parts:  # nothing shows as plain text either: Telegram's refusal stands
            raise
        sent = [
            await bot.send_message(
                chat_id,
                part,
                reply_markup=markup,
                reply_parameters=reply_parameters(reply_to),
                message_thread_id=thread_id,
            )
            for part in parts
        ]
        return sent[-1]


async def send_markdown(
    bot: Bot,
    secrets: SecretsFilter,
    chat_id: int,
    markdown: str,
    *,
    reply_to: int | None = None,
    buttons: Buttons | None = None,
    thread_id: int | None = None,
    literal: bool = False,
    app_link: str | None = None,
    parts_sent: list[int] | None = None,
) -> Message | None:
    """Send an answer of any length; returns the last message (the one carrying the buttons). Known secrets are
    masked (agents/core/secrets_filter.py): the chat sees no token a tool or command printed. `literal`: a question
    to the owner, which shows what will run exactly as it will run (its builder fences it and says when it carries
    what looks like a secret), so the filter is not applied: a mask there would hide part of the command.
    `parts_sent` (one number): how many parts of this answer went out already (a try that failed part-way: they
    are not sent again), counted up as each one goes."""
    if not literal:
        markdown = secrets.mask(markdown)
    markup = keyboard(masked_buttons(buttons, secrets), chat_id, app_link)
    sent = parts_sent if parts_sent is not None else [0]
    document = len(markdown) > DOCUMENT_THRESHOLD
    if document:
        if sent[0] < 1:
            await bot.send_document(
                chat_id,
                InputFile(markdown.encode("utf-8"), filename="answer.md"),
                caption=f"The full answer ({len(markdown):,} characters) is in the file.",
                reply_parameters=reply_parameters(reply_to),
                message_thread_id=thread_id,
            )
            sent[0] = 1
        markdown = summarize_for_document(markdown)
    chunks = render_chunks(markdown.strip() or "(empty)", TELEGRAM_LIMIT)
    if not literal and rendering_may_join(markdown, secrets):
        chunks = [shown_masked(chunk, secrets) for chunk in chunks]
    last = None
    for i, chunk in enumerate(chunks):
        if i + document < sent[0]:
            continue  # went out at an earlier try
        is_last = i == len(chunks) - 1
        last = await send_html_or_plain(
            bot,
            chat_id,
            chunk,
            reply_to=reply_to if i == 0 else None,
            markup=markup if is_last else None,
            thread_id=thread_id,
        )
        sent[0] = i + document + 1
    return last


async def edit_markdown(
    bot: Bot,
    secrets: SecretsFilter,
    chat_id: int,
    message_id: int,
    markdown: str,
    buttons: Buttons | None = None,
    *,
    literal: bool = False,
) -> None:
    """Edit a progress message in place (first chunk only); 'not modified' is not an error. `literal` as for
    `send_markdown` (an owner's question closed with its answer)."""
    if not literal:
        markdown = secrets.mask(markdown)
    chunk = render_chunks(markdown.strip() or "(empty)", TELEGRAM_LIMIT)[0]
    if not literal and rendering_may_join(markdown, secrets):
        chunk = shown_masked(chunk, secrets)
    markup = keyboard(masked_buttons(buttons, secrets), chat_id)
    try:
        await bot.edit_message_text(
            chunk,
            chat_id=chat_id,
            message_id=message_id,
            parse_mode=ParseMode.HTML,
            reply_markup=markup,
            disable_web_page_preview=True,
        )
    except BadRequest as err:
        if "not modified" in str(err).lower():
            return
        if "message to edit not found" in str(err).lower():
            raise MessageGone(str(err)) from err
        if not is_entity_error(err):
            raise
        await bot.edit_message_text(
            html_to_plain(chunk)[:TELEGRAM_LIMIT], chat_id=chat_id, message_id=message_id, reply_markup=markup
        )


TOPIC_GONE = ("message thread not found", "topic_closed", "topic_deleted", "topic_id_invalid")
CHAT_GONE = ("chat not found", "peer_id_invalid")


def is_topic_gone(err: BadRequest) -> bool:
    """Telegram's answer for a message to a topic that was closed or deleted."""
    return any(marker in str(err).lower() for marker in TOPIC_GONE)


@contextlib.asynccontextmanager
async def _unavailable_as_such() -> AsyncIterator[None]:
    """Telegram's "not now" (NetworkError but a BadRequest, TimedOut, RetryAfter) raised as SendUnavailable: the
    outbox waits an outage out, whatever its length, and gives up only a message refused for itself. A timeout is
    SendTimedOut: Telegram may have taken the message, so it is not sent again at once."""
    try:
        yield
    except BadRequest:
        raise
    except TimedOut as err:
        raise SendTimedOut(f"{type(err).__name__}: {err}") from err
    except RetryAfter as err:
        raise SendUnavailable(f"{type(err).__name__}: {err}", retry_after=seconds(err.retry_after)) from err
    except NetworkError as err:
        raise SendUnavailable(f"{type(err).__name__}: {err}") from err


class TelegramNotifier:
    """agents.core.protocols.Notifier over a PTB Bot: a conversation key (a chat, or a forum topic: see
    agents/store/conversations.py) is sent to its chat and thread; a topic that was closed or deleted falls back to
    the group's general topic with a note.

    A group Telegram upgraded to a supergroup (agents/store/chat_moves.py) is followed here, for every send of the
    crew: a message addressed to its old id goes to the new one (work that read its chat before the move; what it
    stored under the old id since follows the chat first), and a send Telegram refuses as "upgraded to a supergroup"
    (the service message was missed: the bot was down) moves the chat and goes again to the new id, so a finished
    task's summary is never lost to the upgrade. A message of the old group stays there and takes no edit any more:
    editing one raises MessageGone (a progress message is then sent anew, in the supergroup)."""

    def __init__(
        self,
        bot: Bot,
        secrets: SecretsFilter,
        conversations: Conversations,
        buttons: ShownButtons,
        moves: ChatMoves,
        owners: frozenset[int] = frozenset(),
        review_app: str | None = None,
    ) -> None:
        self.bot = bot
        self.secrets = secrets  # the bot's output filter: every text sent is masked with it (but a literal question)
        self.owners = owners
        self.review_app = review_app  # the Mini App's short name (REVIEW_APP_NAME): groups' Review link
        self.conversations = conversations  # a forum topic is a place of its own
        self.buttons = buttons  # what each message's buttons are (a press is checked against it)
        self.moves = moves  # groups upgraded to a supergroup: their old chat id → the new one
        # messages sent to the new id of a chat addressed by its old one, by (old id, message id) → the chat they are
        # in: an edit under the old id finds them there (any other message of the old id is in the old group)
        self._sent_elsewhere: dict[tuple[int, int], int] = {}
        # sends and edits with buttons not yet recorded: a press that arrives meanwhile (Telegram delivers it as soon
        # as the message is there, before the send's answer reaches the bot) waits for them (buttons_settled)
        self._recording: set[asyncio.Future[None]] = set()
        # how many parts of a long message went out at a try that then failed (the outbox tries it again: those parts
        # are not sent twice), by chat and message; forgotten once it is sent whole, the oldest past PARTLY_SENT_KEPT
        self._partly_sent: dict[tuple[int, str], list[int]] = {}

    @contextlib.asynccontextmanager
    async def _showing(self, buttons: Buttons | None) -> AsyncIterator[None]:
        """Around a send or edit that shows `buttons`: until they are recorded, buttons_settled waits for it."""
        if not buttons:
            yield
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._recording.add(done)
        try:
            yield
        finally:
            self._recording.discard(done)
            done.set_result(None)

    async def buttons_settled(self, timeout: float = 10.0) -> None:
        """Wait until the buttons being shown now are recorded (at most `timeout` seconds)."""
        if self._recording:
            await asyncio.wait(list(self._recording), timeout=timeout)

    async def _record(self, message: Message | None, buttons: Buttons | None, handed: bool = False) -> None:
        """Remember which buttons `message` carries: a press of anything else on it is refused."""
        if message is None or not buttons:
            return
        data = [b.data for row in buttons for b in row if b.data]
        await self.buttons.record(message.chat_id, message.message_id, data, handed)

    @property
    def app_link(self) -> str | None:
        """t.me/<bot>/<app>: the bot's Mini App, which a group's Review link opens (None without REVIEW_APP_NAME)."""
        if not self.review_app or not self.bot.username:
            return None
        return f"https://t.me/{self.bot.username}/{self.review_app}"

    async def place(self, chat_id: int) -> Place:
        """Where a conversation's messages go now: a chat that moved is sent to under its new id."""
        if is_topic(chat_id):
            return await self.conversations.place(chat_id)
        moved = await self.moves.moved_to(chat_id)
        if moved is None:
            return Place(chat_id)
        # addressed by its old id: by work that read its chat before the move, which may have stored something under
        # that id since (its summary's outbox entry and history record): that follows the chat before it is sent
        await self.moves.move(chat_id, moved)
        return Place(moved)

    async def _chat_moved(self, old: int, new: int) -> None:
        """Telegram refused a call naming `old`: the group was upgraded to the supergroup `new` (the bot missed the
        service message that says so, or the message was the old group's)."""
        if await self.moves.moved_to(old) != new:
            log.warning(
                "chat %s was upgraded to the supergroup %s (its service message was missed): moving it", old, new
            )
        await self.moves.move(old, new)

    async def _in_place(self, chat_id: int, send: Callable[[int, int | None], Awaitable[T]]) -> T:
        """`send(chat, thread)` in the conversation's place; in a group that was upgraded to a supergroup meanwhile, in
        the supergroup (the chat moved there first)."""
        place = await self.place(chat_id)
        try:
            return await self._at(place, chat_id, send)
        except ChatMigrated as err:
            await self._chat_moved(place.chat_id, err.new_chat_id)
        return await self._at(await self.place(chat_id), chat_id, send)

    async def _at(self, place: Place, chat_id: int, send: Callable[[int, int | None], Awaitable[T]]) -> T:
        """`send(chat, thread)` in `place`; in a topic that is gone, in the general topic instead (the message
        remembered as the topic's). A refusal for the chat itself (Forbidden: the bot is blocked or was removed;
        "chat not found") is ChatUnreachable: not the message's fault, and it lasts until the chat is heard from."""
        try:
            return await send(place.chat_id, place.thread_id)
        except Forbidden as err:
            raise ChatUnreachable(f"Forbidden: {err}", place.chat_id) from err
        except BadRequest as err:
            if any(marker in str(err).lower() for marker in CHAT_GONE):
                raise ChatUnreachable(f"BadRequest: {err}", place.chat_id) from err
            if place.thread_id is None or not is_topic_gone(err):
                raise
        log.warning("topic %s of chat %s is gone: posting in the general topic", place.thread_id, place.chat_id)
        name = f" «{outside_text(place.topic_name, one_line=True)}»" if place.topic_name else ""
        await send_markdown(
            self.bot,
            self.secrets,
            place.chat_id,
            f"(The topic{name} is closed or was deleted, so this message goes here.)",
        )
        sent = await send(place.chat_id, None)
        # the message stands in for the topic: a press on it, or a reply to it, acts in the topic's conversation
        for message in sent if isinstance(sent, tuple | list) else [sent]:
            if isinstance(message, Message):
                await self.conversations.moved_here(place.chat_id, message.message_id, chat_id)
        return sent

    async def send(
        self,
        chat_id: int,
        markdown: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        literal: bool = False,
        handed: bool = False,
    ) -> int | None:
        """The message sent (its id); SendUnavailable where Telegram could not take it now (unreachable, a 5xx, a
        timeout, a flood wait that outlasted the rate limiter's retries; ChatUnreachable where the chat refuses the
        bot), any other error for a refusal of it."""
        key = (chat_id, hashlib.sha256(f"{reply_to}|{buttons!r}|{literal}|{markdown}".encode()).hexdigest())
        sent = self._partly_sent.pop(key, [0])
        async with self._showing(buttons), _unavailable_as_such():
            try:
                with floods_raised():  # a chat's flood wait keeps the message for later (the outbox waits it out)
                    message = await self._in_place(
                        chat_id,
                        lambda chat, thread: send_markdown(
                            self.bot,
                            self.secrets,
                            chat,
                            markdown,
                            # a chat that moved numbers its messages afresh: the old id would name another message
                            reply_to=reply_to if is_topic(chat_id) or chat == chat_id else None,
                            buttons=buttons,
                            thread_id=thread,
                            literal=literal,
                            app_link=self.app_link,
                            parts_sent=sent,
                        ),
                    )
            except BaseException:
                if sent[0]:  # part of it is in the chat: the next try of this very message sends the rest
                    self._partly_sent[key] = sent
                    while len(self._partly_sent) > PARTLY_SENT_KEPT:
                        self._partly_sent.pop(next(iter(self._partly_sent)))
                raise
            await self._record(message, buttons, handed)
        if message is not None and not is_topic(chat_id) and message.chat_id != chat_id:
            self._sent_elsewhere[(chat_id, message.message_id)] = message.chat_id
            while len(self._sent_elsewhere) > SENT_ELSEWHERE_KEPT:
                self._sent_elsewhere.pop(next(iter(self._sent_elsewhere)))
        return message.message_id if message else None

    async def edit(
        self, chat_id: int, message_id: int, markdown: str, *, buttons: Buttons | None = None, literal: bool = False
    ) -> None:
        """Edit a message where it is: a chat's own messages stay in it when it moves (a group upgraded to a
        supergroup), so an old message is edited in the old group, which Telegram refuses: MessageGone."""
        chat = self._sent_elsewhere.get((chat_id, message_id))
        if chat is None:
            chat = (await self.conversations.place(chat_id)).chat_id if is_topic(chat_id) else chat_id
        async with self._showing(buttons):
            try:
                with floods_raised():  # in a chat's flood wait an edit (a progress step) is skipped, never waited for
                    await edit_markdown(self.bot, self.secrets, chat, message_id, markdown, buttons, literal=literal)
            except ChatMigrated as err:
                await self._chat_moved(chat, err.new_chat_id)
                raise MessageGone(
                    f"message {message_id} is in chat {chat}, which was upgraded to a supergroup"
                ) from err
            if buttons:
                data = [b.data for row in buttons for b in row if b.data]
                if self.buttons is not None:
                    await self.buttons.record(chat, message_id, data)
            elif self.buttons is not None:
                await self.buttons.forget(chat, message_id)

    def caption(self, text: str) -> str | None:
        """A picture's or document's caption, masked and cut to what Telegram takes (counted as it counts it: a cut
        by Python characters lets an emoji-heavy caption through too long, and the picture is refused with it)."""
        return utf16_cut(self.secrets.mask(text), CAPTION_LIMIT) or None

    async def send_document(
        self, chat_id: int, filename: str, data: bytes, caption: str = "", *, literal: bool = False
    ) -> None:
        # a document (a log, a diff, the history) is masked like every message, but for a literal one (shown as it is,
        # or masked by the caller already); bytes that are not UTF-8 stay as they are and never switch the masking off
        data = data if literal else await self.secrets.mask_bytes_soon(data)
        await self._in_place(
            chat_id,
            lambda chat, thread: self.bot.send_document(
                chat,
                InputFile(data, filename=filename),
                caption=self.caption(caption),
                message_thread_id=thread,
            ),
        )

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        await self._in_place(
            chat_id,
            lambda chat, thread: self.bot.send_photo(
                chat,
                InputFile(data, filename="screenshot.png"),
                caption=self.caption(caption),
                message_thread_id=thread,
            ),
        )

    async def send_album(self, chat_id: int, pictures: list[tuple[str, bytes]]) -> None:
        media = [
            InputMediaPhoto(png, caption=self.caption(caption), filename=f"picture-{n}.png")
            for n, (caption, png) in enumerate(pictures[:10])
        ]
        await self._in_place(
            chat_id, lambda chat, thread: self.bot.send_media_group(chat, media, message_thread_id=thread)
        )

    async def ask_owners(
        self, chat_id: int, markdown: str, *, buttons: Buttons | None = None, literal: bool = False
    ) -> list[tuple[int, int]]:
        """In a group the owners are there: the request goes to the conversation, naming them. From a private chat
        (a member's) it goes to each owner's private chat; an owner who never started the bot cannot be written to,
        and if none can, the request stays in the conversation so it is not lost. `literal`: a request built literal
        by its sender (the quoted text fenced) goes without the output filter, as `send_markdown` says."""
        place = await self.place(chat_id)
        owners = sorted(self.owners)
        if place.chat_id < 0 or not owners:  # Telegram's group ids are negative
            named = ", ".join(f"[owner](tg://user?id={owner})" for owner in owners)
            sent = await self.send(
                chat_id, f"{markdown}\n{named}" if named else markdown, buttons=buttons, literal=literal, handed=True
            )
            return [(chat_id, sent)] if sent else []
        copies: list[tuple[int, int]] = []
        for owner in owners:
            try:
                async with self._showing(buttons):
                    message = await send_markdown(
                        self.bot, self.secrets, owner, markdown, buttons=buttons, literal=literal
                    )
                    await self._record(message, buttons, handed=True)
            except (BadRequest, Forbidden) as err:
                log.warning("owner %s could not be written to (%s): have them send /start to the bot", owner, err)
                continue
            if message is not None:
                copies.append((owner, message.message_id))
        if not copies:
            sent = await self.send(
                chat_id,
                markdown + "\n(I could not reach an owner: ask them to /start me.)",
                literal=literal,
            )
            copies = [(chat_id, sent)] if sent else []
        return copies
