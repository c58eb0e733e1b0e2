"""A fake Telegram Bot API server on loopback for end-to-end tests.

`FakeTelegram` serves `POST|GET /bot<token>/<method>` and `GET /file/bot<token>/<file_path>`
from a stdlib `ThreadingHTTPServer` in a daemon thread, so it runs independently of the
test's event loop. Point python-telegram-bot at it with
``base_url=f"{fake.url}/bot"`` and ``base_file_url=f"{fake.url}/file/bot"``.

It enforces the real limits that matter to a bot (4096-character text, 1024-character
captions, HTML entity parsing, "message is not modified", unknown message ids, callback
data size, ...), records every API call, stores the bot's messages per chat, lets a test
inject user updates (text, commands, voice, audio, documents, photos, stickers, locations,
button presses), inject faults (429 flood control, 400, 403, 5xx) and upgrade a group to a
supergroup under a new chat id (`migrate_group`), as turning on a group's topics does.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message as _MimeHeader
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from .serve_loop import serve_in_thread, stop_serving
from .telegram_html import EntityParseError, parse_telegram_html_entities, plain_length

T = TypeVar("T")

MAX_TEXT_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
MAX_CALLBACK_DATA_BYTES = 64
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # getFile refuses bigger files
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
POLL_FIRST_SECONDS = 0.005  # `await_for`: the first pause between two checks of a condition
POLL_MAX_SECONDS = 0.05  # ... growing to this

# Parameters whose form value is a raw string (PTB does not JSON-encode str values).
_RAW_STRING_PARAMS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "callback_query_id",
        "file_id",
        "action",
        "url",
        "secret_token",
        "language_code",
        "ip_address",
        "message_effect_id",
        "business_connection_id",
        "inline_message_id",
        "document",
        "photo",
        "audio",
        "voice",
        "sticker",
        "video",
        "animation",
        "thumbnail",
        "filename",
        "description",
        "short_description",
        "name",
        "emoji",
    }
)
_CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)
_INLINE_BUTTON_ACTIONS = (
    "callback_data",
    "url",
    "login_url",
    "switch_inline_query",
    "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat",
    "copy_text",
    "callback_game",
    "pay",
    "web_app",
)
_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


class ApiError(Exception):
    """An error reply of the Bot API: HTTP status = error_code."""

    def __init__(
        self, error_code: int, description: str, retry_after: int | None = None, migrate_to: int | None = None
    ):
        super().__init__(description)
        self.error_code = error_code
        self.description = description
        self.retry_after = retry_after
        self.migrate_to = migrate_to  # a group upgraded to a supergroup: its new chat id

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "ok": False,
            "error_code": self.error_code,
            "description": self.description,
        }
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        if self.migrate_to is not None:
            body["parameters"] = {"migrate_to_chat_id": self.migrate_to}
        return body


def _bad_request(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


class Draft(NamedTuple):
    """One accepted sendMessageDraft frame: what the user's chat showed as the answer being written."""

    chat_id: int
    draft_id: int
    text: str  # plain text after entity parsing ('' shows "Thinking…")
    source: str
    at: float  # time.monotonic() when it was accepted


class Refused(NamedTuple):
    """A Bot API call answered with an error."""

    method: str
    error_code: int
    description: str


class ApiCall(NamedTuple):
    """One recorded Bot API call; `params` are decoded (numbers, dicts, uploaded files)."""

    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class UploadedFile:
    """A file part of a multipart/form-data request."""

    field_name: str
    filename: str | None
    content_type: str | None
    data: bytes


@dataclass(frozen=True)
class BotUser:
    id: int
    username: str
    first_name: str = "Test Bot"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "is_bot": True,
            "first_name": self.first_name,
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }


@dataclass
class StoredFile:
    """A file the fake can hand out via getFile and the download route."""

    file_id: str
    file_unique_id: str
    file_path: str
    data: bytes
    mime_type: str | None = None
    filename: str | None = None

    @property
    def file_size(self) -> int:
        return len(self.data)


@dataclass
class MessageVersion:
    """The editable content of a bot message at one point in time."""

    text: str | None
    source: str | None
    parse_mode: str | None
    entities: list[dict[str, Any]]
    reply_markup: dict[str, Any] | None
    date: int


@dataclass
class BotMessage:
    """A message the bot sent; edits are applied in place and appended to `history`.

    `text` is the plain (entity-parsed) text or caption, `source` what the bot sent
    (the HTML source when parse_mode is HTML), `entities` the MessageEntity dicts Telegram
    would report for it. `data`/`filename`/`mime_type` hold the
    uploaded bytes of a document or photo.
    """

    chat_id: int
    message_id: int
    kind: str  # "text" | "document" | "photo"
    text: str | None
    source: str | None
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    reply_to_message_id: int | None
    date: int
    entities: list[dict[str, Any]] = field(default_factory=list)
    data: bytes | None = None
    filename: str | None = None
    mime_type: str | None = None
    file_id: str | None = None
    edit_date: int | None = None
    deleted: bool = False
    history: list[MessageVersion] = field(default_factory=list)
    thread_id: int | None = None  # the forum topic it was sent in (message_thread_id)

    @property
    def html(self) -> str | None:
        return self.source if (self.parse_mode or "").lower() == "html" else None

    @property
    def caption(self) -> str | None:
        return self.text if self.kind != "text" else None

    @property
    def edits(self) -> list[MessageVersion]:
        """Versions produced by edits, oldest first (the original is `history[0]`)."""
        return self.history[1:]

    @property
    def buttons(self) -> list[dict[str, Any]]:
        """The inline keyboard's buttons, flattened row by row."""
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return [button for row in rows for button in row]

    @property
    def callback_data(self) -> list[str]:
        return [b["callback_data"] for b in self.buttons if "callback_data" in b]

    def _version(self) -> MessageVersion:
        return MessageVersion(
            self.text,
            self.source,
            self.parse_mode,
            copy.deepcopy(self.entities),
            copy.deepcopy(self.reply_markup),
            self.edit_date or self.date,
        )


@dataclass
class _Fault:
    error_code: int
    description: str | None
    retry_after: int
    times: int
    when: Callable[[dict[str, Any]], bool] | None = None  # only calls whose params satisfy this fail


def _decode_value(name: str, value: Any) -> Any:
    if not isinstance(value, str) or name in _RAW_STRING_PARAMS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


class _ClientGone(Exception):
    """The client closed its connection before its request's body was whole."""


def _parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, UploadedFile]]:
    header = _MimeHeader()
    header["content-type"] = content_type
    boundary = header.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise _bad_request("multipart boundary is missing")
    fields: dict[str, str] = {}
    files: dict[str, UploadedFile] = {}
    chunks = (b"\r\n" + body).split(b"\r\n--" + boundary.encode("latin-1"))
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, content = chunk.partition(b"\r\n\r\n")
        part_headers = _MimeHeader()
        for line in head.decode("utf-8", "replace").split("\r\n"):
            if ":" in line:
                key, _, value = line.partition(":")
                part_headers[key.strip()] = value.strip()
        name = part_headers.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        filename = part_headers.get_filename()
        if filename is not None or part_headers.get("content-type", "").startswith("application/octet-stream"):
            files[name] = UploadedFile(name, filename, part_headers.get("content-type"), content)
        else:
            fields[name] = content.decode("utf-8")
    return fields, files


def _image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG/GIF/JPEG/WEBP image; None if not an image we recognise."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return (0, 0)  # dimensions not decoded
    if data.startswith(b"\xff\xd8"):
        index = 2
        while index + 9 < len(data):
            if data[index] != 0xFF:
                return None
            marker = data[index + 1]
            if marker == 0xFF:
                index += 1
                continue
            if marker == 0x01 or 0xD0 <= marker <= 0xD8:
                index += 2
                continue
            (segment_length,) = struct.unpack(">H", data[index + 2 : index + 4])
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[index + 5 : index + 9])
                return width, height
            index += 2 + segment_length
    return None


def _validate_reply_markup(markup: Any, chat_id: int | None = None) -> None:
    if markup is None:
        return
    if not isinstance(markup, dict):
        raise _bad_request("can't parse reply keyboard markup JSON object")
    if "inline_keyboard" not in markup:
        return
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise _bad_request('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays')
    for button in (button for row in rows for button in row):
        if not isinstance(button, dict) or not button.get("text"):
            raise _bad_request("BUTTON_TEXT_INVALID")
        if not any(action in button for action in _INLINE_BUTTON_ACTIONS):
            raise _bad_request("text buttons are unallowed in the inline keyboard")
        if "callback_data" in button:
            data = button["callback_data"]
            if not isinstance(data, str) or not 1 <= len(data.encode("utf-8")) <= MAX_CALLBACK_DATA_BYTES:
                raise _bad_request("BUTTON_DATA_INVALID")
        if "url" in button and not str(button["url"]).startswith(("http://", "https://", "tg://")):
            raise _bad_request("BUTTON_URL_INVALID")
        if "web_app" in button and chat_id is not None and chat_id < 0:  # Mini App buttons: private chats only
            raise _bad_request("BUTTON_TYPE_INVALID")


def _reply_target(params: dict[str, Any]) -> tuple[int | None, bool]:
    """(reply_to_message_id, allow_sending_without_reply) from either parameter style."""
    reply_parameters = params.get("reply_parameters")
    if isinstance(reply_parameters, dict):
        return reply_parameters.get("message_id"), bool(reply_parameters.get("allow_sending_without_reply"))
    return params.get("reply_to_message_id"), bool(params.get("allow_sending_without_reply"))


def _entity_dict(entity: Any) -> dict[str, Any]:
    payload = {"type": entity.type, "offset": entity.offset, "length": entity.length}
    for optional in ("url", "language", "custom_emoji_id"):
        if getattr(entity, optional, None) is not None:
            payload[optional] = getattr(entity, optional)
    return payload


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Topic:
    """A forum topic: its thread id is the id of its creation message, as in Telegram."""

    chat_id: int
    thread_id: int
    name: str
    closed: bool = False
    deleted: bool = False


class FakeTelegram:
    """A loopback Bot API server with an injection, fault and inspection API for tests."""

    def __init__(self, token: str = "123456:TEST", bot_username: str = "test_bot") -> None:
        self.token = token
        self.bot_user = BotUser(id=int(token.split(":", 1)[0]), username=bot_username)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.requests: list[ApiCall] = []
        self.webhook: dict[str, Any] | None = None
        self.commands: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.chat_actions: list[tuple[int | str, str]] = []
        self.callback_answers: dict[str, dict[str, Any]] = {}
        self.drafts: list[Draft] = []
        self.refused: list[Refused] = []
        self._updates: deque[dict[str, Any]] = deque()
        self._update_ids = itertools.count(1000)
        self._allowed_updates: list[str] | None = None
        self._poll_generation = 0
        self._faults: dict[str, deque[_Fault]] = {}
        self._holds: list[tuple[str, Callable[[dict[str, Any]], bool], threading.Event]] = []
        self._bot_messages: dict[int | str, list[BotMessage]] = {}
        self._user_messages: dict[tuple[int | str, int], dict[str, Any]] = {}
        self._next_message_id: dict[int | str, int] = {}
        self._chats: dict[int | str, dict[str, Any]] = {}
        self.chat_members: dict[int, set[int]] = {}  # a group's members (getChatMember); a sender is one
        self.topics: dict[tuple[int, int], Topic] = {}  # (chat, thread) → a forum topic (create_topic)
        self.migrated: dict[int, int] = {}  # a group upgraded to a supergroup → the supergroup's id (migrate_group)
        self._files: dict[str, StoredFile] = {}
        self._files_by_path: dict[str, StoredFile] = {}
        self._file_numbers = itertools.count(1)
        self._callback_numbers = itertools.count(1)
        self._pending_callbacks: set[str] = set()
        self._handlers: dict[str, Callable[[dict[str, Any], dict[str, UploadedFile]], Any]] = {
            name[len("_api_") :].lower(): getattr(self, name) for name in dir(self) if name.startswith("_api_")
        }
        self._method_names = {
            name[len("_api_") :].lower(): name[len("_api_") :] for name in dir(self) if name.startswith("_api_")
        }

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeTelegram is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    def start(self) -> FakeTelegram:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.fake = self
        self._server = server
        self._stopping = False
        self._thread = serve_in_thread(server, "fake-telegram")
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            for _, _, release in self._holds:  # a held answer never keeps the server from stopping
                release.set()
        if self._server is not None:
            stop_serving(self._server)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection
    def messages(self, chat_id: int | str, include_deleted: bool = True) -> list[BotMessage]:
        """The bot's messages in `chat_id` in send order (live records)."""
        with self._lock:
            found = list(self._bot_messages.get(chat_id, []))
        return found if include_deleted else [m for m in found if not m.deleted]

    def message(self, chat_id: int | str, message_id: int) -> BotMessage:
        with self._lock:
            for message in self._bot_messages.get(chat_id, []):
                if message.message_id == message_id:
                    return message
        raise KeyError(f"no bot message {message_id} in chat {chat_id}")

    def calls(self, method: str) -> list[ApiCall]:
        """Recorded calls of one method (case-insensitive name)."""
        wanted = method.lower()
        with self._lock:
            return [call for call in self.requests if call.method.lower() == wanted]

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Queued updates not yet confirmed by a getUpdates offset."""
        with self._lock:
            return list(self._updates)

    def file(self, file_id: str) -> StoredFile:
        with self._lock:
            return self._files[file_id]

    # ------------------------------------------------------------------ waiting
    def wait_for(self, predicate: Callable[[], T], timeout: float = 10.0) -> T:
        """Block (not for use on an event loop) until predicate() is truthy; return it."""
        with self._cond:
            result = self._cond.wait_for(predicate, timeout)
        if not result:
            raise TimeoutError(f"condition not met within {timeout}s")
        return result

    async def await_for(self, predicate: Callable[[], T], timeout: float = 30.0) -> T:
        """Poll predicate() without blocking the event loop; return its first truthy value.

        The first checks come quickly (most conditions hold within milliseconds), then the pause grows to
        POLL_MAX_SECONDS: a predicate may scan /proc or read files, and a long wait polled at 100 Hz spent CPU (and
        held this fake's lock) that the bot under test needed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pause = POLL_FIRST_SECONDS
        while True:
            with self._lock:
                result = predicate()
            if result:
                return result
            if loop.time() >= deadline:
                raise TimeoutError(f"condition not met within {timeout}s")
            await asyncio.sleep(pause)
            pause = min(POLL_MAX_SECONDS, pause * 1.5)

    async def wait_for_message(self, chat_id: int | str, count: int = 1, timeout: float = 10.0) -> list[BotMessage]:
        """Wait until the bot has sent at least `count` messages to chat_id; return them all."""

        def enough() -> list[BotMessage] | None:
            found = self.messages(chat_id)
            return found if len(found) >= count else None

        try:
            return await self.await_for(enough, timeout)
        except TimeoutError:
            texts = [m.text for m in self.messages(chat_id)]
            raise TimeoutError(
                f"expected {count} bot message(s) in chat {chat_id} within {timeout}s, got {texts!r}"
            ) from None

    async def wait_for_request(self, method: str, timeout: float = 10.0, count: int = 1) -> ApiCall:
        """Wait until `method` has been called `count` times; return that (count-th) call."""

        def called() -> ApiCall | None:
            found = self.calls(method)
            return found[count - 1] if len(found) >= count else None

        try:
            return await self.await_for(called, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"{method} not called {count} time(s) within {timeout}s; calls: {[c.method for c in self.requests]}"
            ) from None

    # ------------------------------------------------------------------ faults
    def fail_next(
        self,
        method: str,
        error_code: int = 429,
        retry_after: int = 1,
        description: str | None = None,
        times: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Make the next `times` calls of `method` fail with error_code (429: flood control).

        `when` scripts the fault: only calls whose decoded params satisfy it fail (e.g. the message with a
        given text), the others pass untouched.
        """
        with self._lock:
            self._faults.setdefault(method.lower(), deque()).append(
                _Fault(error_code, description, retry_after, times, when)
            )

    def hold_answer(self, method: str, when: Callable[[dict[str, Any]], bool] = lambda params: True) -> threading.Event:
        """The next `method` call whose params satisfy `when` is carried out (its message is there to see and to
        reply to at once) but its HTTP answer waits until the returned event is set (30 s at most): Telegram's
        answer reaching the bot late."""
        release = threading.Event()
        with self._lock:
            self._holds.append((method.lower(), when, release))
        return release

    def hold_taken(self, release: threading.Event) -> bool:
        """Whether the call `hold_answer` returned `release` for has come (its answer is held now, or was)."""
        with self._lock:
            return not any(held is release for _, _, held in self._holds)

    def _take_hold(self, method: str, params: dict[str, Any]) -> threading.Event | None:
        with self._lock:
            for i, (held, when, release) in enumerate(self._holds):
                if held == method.lower() and when(params):
                    del self._holds[i]
                    return release
        return None

    def clear_faults(self) -> None:
        """Forget every scripted fault that has not fired yet (Telegram is well again)."""
        with self._lock:
            self._faults.clear()

    def _take_fault(self, method: str, params: dict[str, Any] | None = None) -> ApiError | None:
        faults = self._faults.get(method.lower())
        if not faults:
            return None
        fault = next((f for f in faults if f.when is None or f.when(params or {})), None)
        if fault is None:
            return None
        fault.times -= 1
        if fault.times <= 0:
            faults.remove(fault)
        if fault.error_code == 429:
            return ApiError(
                429,
                fault.description or f"Too Many Requests: retry after {fault.retry_after}",
                retry_after=fault.retry_after,
            )
        default = {
            400: "Bad Request: injected failure",
            401: "Unauthorized",
            403: "Forbidden: bot was blocked by the user",
            409: "Conflict: injected failure",
            500: "Internal Server Error",
            502: "Bad Gateway",
        }.get(fault.error_code, "Injected failure")
        return ApiError(fault.error_code, fault.description or default)

    # ------------------------------------------------------------------ injection
    def _user_dict(self, user_id: int, username: str | None, first_name: str) -> dict[str, Any]:
        return {
            "id": user_id,
            "is_bot": False,
            "first_name": first_name,
            "username": username if username is not None else f"user{user_id}",
            "language_code": "en",
        }

    def _chat_for(self, chat_id: int | str, user: dict[str, Any] | None = None) -> dict[str, Any]:
        known = self._chats.get(chat_id)
        if known is not None:
            return known
        if isinstance(chat_id, int) and chat_id > 0:
            chat = {"id": chat_id, "type": "private", "first_name": (user or {}).get("first_name", "User")}
            if user and user.get("username"):
                chat["username"] = user["username"]
        elif isinstance(chat_id, int):
            kind = "supergroup" if str(chat_id).startswith("-100") else "group"
            chat = {"id": chat_id, "type": kind, "title": f"Test {kind} {chat_id}"}
        else:
            chat = {"id": -1001, "type": "channel", "title": str(chat_id), "username": str(chat_id)[1:]}
        if user is not None:
            self._chats[chat_id] = chat
        return chat

    def _new_message_id(self, chat_id: int | str) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _queue_update(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": next(self._update_ids), kind: payload}
        self._updates.append(update)
        self._cond.notify_all()
        return copy.deepcopy(update)

    def _inject_message(
        self,
        user_id: int,
        chat_id: int | None,
        username: str | None,
        first_name: str,
        content: dict[str, Any],
        reply_to_message_id: int | None = None,
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        with self._cond:
            user = self._user_dict(user_id, username, first_name)
            chat_key = user_id if chat_id is None else chat_id
            if chat_key in self.migrated:
                raise ValueError(f"group {chat_key} was upgraded to supergroup {self.migrated[chat_key]}: write there")
            if chat_id is not None and chat_id < 0:  # whoever writes in a group is a member of it
                self.chat_members.setdefault(chat_id, set()).add(user_id)
            message = {
                "message_id": self._new_message_id(chat_key),
                "date": int(time.time()),
                "chat": self._chat_for(chat_key, user),
                "from": user,
                **content,
            }
            if thread_id is not None:  # as Telegram: in a topic, a message that replies to nothing points at its root
                self._open_topic(chat_key, thread_id)
                message["message_thread_id"] = thread_id
                message["is_topic_message"] = True
                reply_to_message_id = reply_to_message_id or thread_id
            if reply_to_message_id is not None:
                message["reply_to_message"] = self._message_payload(chat_key, reply_to_message_id)
            self._user_messages[(chat_key, message["message_id"])] = message
            return self._queue_update("message", message)

    def _store_file(
        self, data: bytes, folder: str, extension: str, mime_type: str | None, filename: str | None
    ) -> StoredFile:
        number = next(self._file_numbers)
        stored = StoredFile(
            file_id=f"fake-file-id-{number}",
            file_unique_id=f"fake-unique-{number}",
            file_path=f"{folder}/file_{number}.{extension.lstrip('.') or 'bin'}",
            data=bytes(data),
            mime_type=mime_type,
            filename=filename,
        )
        self._files[stored.file_id] = stored
        self._files_by_path[stored.file_path] = stored
        return stored

    @staticmethod
    def _file_fields(stored: StoredFile) -> dict[str, Any]:
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
        }

    def send_text(
        self,
        user_id: int,
        text: str,
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
        reply_to_message_id: int | None = None,
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        return self._inject_message(
            user_id, chat_id, username, first_name, {"text": text}, reply_to_message_id, thread_id
        )

    # ------------------------------------------------------------------ forum topics
    def make_forum(self, chat_id: int, title: str = "Team") -> None:
        """Make a supergroup a forum (a group with topics)."""
        with self._cond:
            self._chats[chat_id] = {"id": chat_id, "type": "supergroup", "title": title, "is_forum": True}

    def create_topic(self, chat_id: int, name: str, user_id: int, announce: bool = True) -> int:
        """A user creates a topic: its creation message (a service message the bot receives when `announce`);
        returns the topic's thread id."""
        with self._cond:
            user = self._user_dict(user_id, None, "Tester")
            message_id = self._new_message_id(chat_id)
            message = {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": self._chat_for(chat_id, user),
                "from": user,
                "message_thread_id": message_id,
                "is_topic_message": True,
                "forum_topic_created": {"name": name, "icon_color": 7322096},
            }
            self._user_messages[(chat_id, message_id)] = message
            self.topics[(chat_id, message_id)] = Topic(chat_id, message_id, name)
            if announce:
                self._queue_update("message", message)
            return message_id

    # ------------------------------------------------------------------ a group upgraded to a supergroup
    def migrate_group(
        self, chat_id: int, new_chat_id: int, user_id: int, forum: bool = False, announce: bool = True
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A user upgrades a (basic) group to a supergroup, as Telegram does when its topics are turned on: the group
        gets a new chat id for good. From now on every call naming the old id is refused as Telegram refuses it (400
        "group chat was upgraded to a supergroup chat" with `parameters.migrate_to_chat_id`), and the group's members
        are the supergroup's. Telegram's two service messages, `migrate_to_chat_id` in the old group and
        `migrate_from_chat_id` in the supergroup, reach the bot when `announce` (else the bot missed them: it was
        down); they are returned either way (a test may deliver them later with `deliver_again`)."""
        if chat_id >= 0 or str(chat_id).startswith("-100"):
            raise ValueError(f"only a basic group is upgraded, not chat {chat_id}")
        if not str(new_chat_id).startswith("-100"):
            raise ValueError(f"a supergroup's id starts with -100, not {new_chat_id}")
        with self._cond:
            if chat_id in self.migrated:
                raise ValueError(f"group {chat_id} was upgraded already")
            user = self._user_dict(user_id, None, "Tester")
            old_chat = self._chat_for(chat_id, user)
            title = old_chat.get("title", "Team")
            self._chats[new_chat_id] = {"id": new_chat_id, "type": "supergroup", "title": title}
            if forum:
                self._chats[new_chat_id]["is_forum"] = True
            self.chat_members[new_chat_id] = set(self.chat_members.get(chat_id, set())) | {user_id}
            self.migrated[chat_id] = new_chat_id
            notices = []
            for chat, field, other in (
                (chat_id, "migrate_to_chat_id", new_chat_id),
                (new_chat_id, "migrate_from_chat_id", chat_id),
            ):
                message = {
                    "message_id": self._new_message_id(chat),
                    "date": int(time.time()),
                    "chat": copy.deepcopy(self._chats[chat]),
                    "from": user,
                    field: other,
                }
                self._user_messages[(chat, message["message_id"])] = message
                notices.append(
                    self._queue_update("message", message)
                    if announce
                    else {"update_id": next(self._update_ids), "message": copy.deepcopy(message)}
                )
            return notices[0], notices[1]

    def _migrated_refusal(self, params: dict[str, Any]) -> ApiError | None:
        """Telegram's answer to any call naming a group that was upgraded to a supergroup."""
        chat_id = params.get("chat_id")
        if isinstance(chat_id, str) and chat_id.lstrip("-").isdigit():
            chat_id = int(chat_id)
        new_chat_id = self.migrated.get(chat_id) if isinstance(chat_id, int) else None
        if new_chat_id is None:
            return None
        return ApiError(400, "Bad Request: group chat was upgraded to a supergroup chat", migrate_to=new_chat_id)

    def close_topic(self, chat_id: int, thread_id: int) -> None:
        with self._cond:
            self.topics[(chat_id, thread_id)].closed = True

    def delete_user_message(self, chat_id: int, message_id: int) -> None:
        """The user deleted a message of theirs: a reply quoting it is refused ("message to be replied not found")
        unless it allows sending without the reply."""
        with self._cond:
            del self._user_messages[(chat_id, message_id)]

    def delete_topic(self, chat_id: int, thread_id: int) -> None:
        """The topic and its messages are gone (sending to it: "message thread not found")."""
        with self._cond:
            self.topics[(chat_id, thread_id)].deleted = True
            for message in self._bot_messages.get(chat_id, []):
                if message.thread_id == thread_id:
                    message.deleted = True
            for key, message in list(self._user_messages.items()):
                if key[0] == chat_id and message.get("message_thread_id") == thread_id:
                    del self._user_messages[key]

    def messages_in_topic(self, chat_id: int, thread_id: int | None) -> list[BotMessage]:
        """The bot's messages in one topic (None: outside every topic: the general topic)."""
        with self._lock:
            return [m for m in self._bot_messages.get(chat_id, []) if m.thread_id == thread_id]

    def _open_topic(self, chat_id: int | str, thread_id: int) -> Topic:
        topic = self.topics.get((chat_id, thread_id))
        if topic is None or topic.deleted:
            raise _bad_request("message thread not found")
        if topic.closed:
            raise _bad_request("TOPIC_CLOSED")
        return topic

    def _thread_of(self, chat_id: int | str, params: dict[str, Any]) -> int | None:
        """A send's message_thread_id, checked as Telegram does (only forum groups have topics)."""
        thread_id = params.get("message_thread_id")
        if thread_id in (None, ""):
            return None
        if not self._chats.get(chat_id, {}).get("is_forum"):
            raise _bad_request("message thread not found")
        self._open_topic(chat_id, int(thread_id))
        return int(thread_id)

    def send_command(
        self,
        user_id: int,
        command: str,
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        """Inject "/cmd args" (or "/cmd@botname args") with its bot_command entity."""
        if not command.startswith("/"):
            raise ValueError("a command starts with '/'")
        head = command.split(maxsplit=1)[0] if command.strip() else command
        entity = {"type": "bot_command", "offset": 0, "length": _utf16_length(head)}
        content = {"text": command, "entities": [entity]}
        return self._inject_message(user_id, chat_id, username, first_name, content, thread_id=thread_id)

    def edit_message(self, user_id: int, message_id: int, text: str, chat_id: int | None = None) -> dict[str, Any]:
        """The user edits a message they sent (a command keeps its bot_command entity): an `edited_message` update."""
        chat_key = user_id if chat_id is None else chat_id
        with self._cond:
            message = copy.deepcopy(self._user_messages[(chat_key, message_id)])
            message["text"] = text
            message["edit_date"] = int(time.time())
            if text.startswith("/"):
                head = text.split(maxsplit=1)[0]
                message["entities"] = [{"type": "bot_command", "offset": 0, "length": _utf16_length(head)}]
            self._user_messages[(chat_key, message_id)] = message
            return self._queue_update("edited_message", message)

    def deliver_again(self, update: dict[str, Any]) -> None:
        """Telegram sends `update` again under its own update_id, as it does when the bot never confirmed it (the bot
        crashed or restarted before its next getUpdates moved the offset past it)."""
        with self._cond:
            self._updates.append(copy.deepcopy(update))
            self._cond.notify_all()

    def send_voice(
        self,
        user_id: int,
        data: bytes,
        duration: int = 1,
        mime: str = "audio/ogg",
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
    ) -> dict[str, Any]:
        with self._lock:
            stored = self._store_file(data, "voice", "oga", mime, None)
        voice = {**self._file_fields(stored), "duration": duration, "mime_type": mime}
        return self._inject_message(user_id, chat_id, username, first_name, {"voice": voice})

    def send_audio(
        self,
        user_id: int,
        data: bytes,
        duration: int = 1,
        mime: str = "audio/mpeg",
        filename: str = "audio.mp3",
        title: str | None = None,
        performer: str | None = None,
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
    ) -> dict[str, Any]:
        extension = filename.rsplit(".", 1)[-1] if "." in filename else "mp3"
        with self._lock:
            stored = self._store_file(data, "music", extension, mime, filename)
        audio: dict[str, Any] = {
            **self._file_fields(stored),
            "duration": duration,
            "mime_type": mime,
            "file_name": filename,
        }
        if title is not None:
            audio["title"] = title
        if performer is not None:
            audio["performer"] = performer
        return self._inject_message(user_id, chat_id, username, first_name, {"audio": audio})

    def file_fields(self, data: bytes, folder: str, extension: str, mime: str | None = None) -> dict[str, Any]:
        """The Bot API fields of a file the fake serves (`file_id`, `file_unique_id`, `file_size`), for a message
        built with `send_content` (a video, an album item of any kind)."""
        with self._lock:
            stored = self._store_file(data, folder, extension, mime, None)
        return self._file_fields(stored)

    def send_content(
        self, user_id: int, content: dict[str, Any], chat_id: int | None = None, first_name: str = "Tester"
    ) -> dict[str, Any]:
        """A message from `user_id` with these Bot API fields (what the other `send_*` helpers build): a video, a
        forwarded text (`forward_origin`), an album item of any kind (`media_group_id`)."""
        return self._inject_message(user_id, chat_id, None, first_name, content)

    def send_document(
        self,
        user_id: int,
        data: bytes,
        filename: str,
        mime: str = "application/octet-stream",
        caption: str | None = None,
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
    ) -> dict[str, Any]:
        extension = filename.rsplit(".", 1)[-1] if "." in filename else "bin"
        with self._lock:
            stored = self._store_file(data, "documents", extension, mime, filename)
        content: dict[str, Any] = {"document": {**self._file_fields(stored), "file_name": filename, "mime_type": mime}}
        if caption is not None:
            content["caption"] = caption
        return self._inject_message(user_id, chat_id, username, first_name, content)

    def send_photo(
        self,
        user_id: int,
        data: bytes,
        width: int = 640,
        height: int = 480,
        caption: str | None = None,
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
        smaller: list[tuple[bytes, int, int]] | None = None,
        media_group_id: str | None = None,
    ) -> dict[str, Any]:
        """A photo; `smaller` (data, width, height) are the thumbnails Telegram lists before the full size;
        photos sharing a `media_group_id` form an album."""
        sizes = []
        with self._lock:
            for small, small_width, small_height in smaller or []:
                thumb = self._store_file(small, "photos", "jpg", "image/jpeg", None)
                sizes.append({**self._file_fields(thumb), "width": small_width, "height": small_height})
            stored = self._store_file(data, "photos", "jpg", "image/jpeg", None)
        content: dict[str, Any] = {"photo": [*sizes, {**self._file_fields(stored), "width": width, "height": height}]}
        if media_group_id is not None:
            content["media_group_id"] = media_group_id
        if caption is not None:
            content["caption"] = caption
        return self._inject_message(user_id, chat_id, username, first_name, content)

    def send_sticker(
        self,
        user_id: int,
        emoji: str = "\N{THUMBS UP SIGN}",
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
    ) -> dict[str, Any]:
        with self._lock:
            stored = self._store_file(b"RIFF\x0c\x00\x00\x00WEBPVP8 ", "stickers", "webp", "image/webp", None)
        sticker = {
            **self._file_fields(stored),
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "type": "regular",
            "emoji": emoji,
        }
        return self._inject_message(user_id, chat_id, username, first_name, {"sticker": sticker})

    def send_location(
        self,
        user_id: int,
        latitude: float,
        longitude: float,
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
    ) -> dict[str, Any]:
        location = {"latitude": latitude, "longitude": longitude}
        return self._inject_message(user_id, chat_id, username, first_name, {"location": location})

    def press_button(
        self,
        user_id: int,
        message_id: int,
        data: str,
        chat_id: int | None = None,
        username: str | None = None,
        first_name: str = "Tester",
        strict: bool = True,
    ) -> dict[str, Any]:
        """Inject a callback_query for a button of a bot message.

        With strict=True the message must exist, not be deleted, and currently carry an
        inline button whose callback_data is `data` (what a real user could press).
        """
        chat_key = user_id if chat_id is None else chat_id
        with self._cond:
            message = self.message(chat_key, message_id)
            if strict and message.deleted:
                raise ValueError(f"message {message_id} in chat {chat_key} was deleted")
            if strict and data not in message.callback_data:
                raise ValueError(
                    f"message {message_id} has no button with callback_data {data!r}; it has {message.callback_data!r}"
                )
            user = self._user_dict(user_id, username, first_name)
            query_id = f"cbq-{next(self._callback_numbers)}"
            self._pending_callbacks.add(query_id)
            query = {
                "id": query_id,
                "from": user,
                "message": self._bot_message_payload(message),
                "chat_instance": f"instance-{chat_key}",
                "data": data,
            }
            return self._queue_update("callback_query", query)

    # ------------------------------------------------------------------ dispatch
    def handle_call(
        self, method: str, params: dict[str, Any], files: dict[str, UploadedFile]
    ) -> tuple[int, dict[str, Any]]:
        """Run one Bot API call; returns (http_status, json_body)."""
        name = self._method_names.get(method.lower(), method)
        recorded = dict(params)
        for key, value in list(recorded.items()):
            if isinstance(value, str) and value.startswith("attach://") and value[9:] in files:
                recorded[key] = files[value[9:]]
        for key, upload in files.items():
            recorded.setdefault(key, upload)
        with self._cond:
            self.requests.append(ApiCall(name, recorded))
            self._cond.notify_all()
            fault = self._take_fault(name, params) or self._migrated_refusal(params)
        if fault is not None:
            return self._refuse(name, fault)
        handler = self._handlers.get(method.lower())
        if handler is None:
            return self._refuse(name, ApiError(404, "Not Found: method not found"))
        try:
            result = handler(params, files)
        except ApiError as error:
            return self._refuse(name, error)
        return 200, {"ok": True, "result": result}

    def _refuse(self, method: str, error: ApiError) -> tuple[int, dict[str, Any]]:
        with self._cond:
            self.refused.append(Refused(method, error.error_code, error.description))
        return error.error_code, error.payload()

    def download(self, file_path: str) -> bytes | None:
        with self._lock:
            stored = self._files_by_path.get(file_path)
            return None if stored is None else stored.data

    # ------------------------------------------------------------------ helpers for methods
    def _render(self, source: str, parse_mode: str | None, entities: Any = None) -> tuple[str, list[dict[str, Any]]]:
        """(plain text, entities) of a text or caption as Telegram would store it."""
        if not parse_mode:
            if entities is None:
                return source, []
            if not isinstance(entities, list) or not all(isinstance(e, dict) for e in entities):
                raise _bad_request("can't parse entities JSON object")
            return source, [dict(e) for e in entities]
        if parse_mode.lower() == "html":
            try:
                parsed = parse_telegram_html_entities(source)
            except EntityParseError as error:
                description = str(error)
                if not description.startswith("Bad Request"):
                    description = f"Bad Request: can't parse entities: {description}"
                raise ApiError(400, description) from None
            return parsed.text, [_entity_dict(entity) for entity in parsed.entities]
        if parse_mode.lower() in ("markdown", "markdownv2"):
            raise _bad_request(f"the fake server does not implement parse_mode {parse_mode}")
        raise _bad_request("unsupported parse_mode")

    def _render_text(self, params: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
        source = params.get("text")
        if source is None:
            raise _bad_request("message text is empty")
        source = str(source)
        plain, entities = self._render(source, params.get("parse_mode"), params.get("entities"))
        if not plain.strip():
            raise _bad_request("message text is empty")
        if plain_length(plain) > MAX_TEXT_LENGTH:
            raise _bad_request("message is too long")
        return source, plain, entities

    def _render_caption(self, params: dict[str, Any]) -> tuple[str | None, str | None, list[dict[str, Any]]]:
        source = params.get("caption")
        if source is None or source == "":
            return None, None, []
        source = str(source)
        plain, entities = self._render(source, params.get("parse_mode"), params.get("caption_entities"))
        if plain_length(plain) > MAX_CAPTION_LENGTH:
            raise _bad_request("message caption is too long")
        return source, plain, entities

    def _chat_key(self, params: dict[str, Any]) -> int | str:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise _bad_request("chat_id is empty")
        if isinstance(chat_id, str) and not chat_id.startswith("@"):
            raise _bad_request("chat not found")
        return chat_id

    def _check_reply(self, chat_id: int | str, params: dict[str, Any]) -> int | None:
        reply_to, allow_without = _reply_target(params)
        if reply_to is None:
            return None
        if self._message_exists(chat_id, reply_to):
            return reply_to
        if allow_without:
            return None
        raise _bad_request("message to be replied not found")

    def _reply_thread(self, chat_id: int | str, reply_to: int | None) -> int | None:
        """A reply lands in the topic of the message it replies to (Telegram needs no message_thread_id then)."""
        if reply_to is None:
            return None
        user_message = self._user_messages.get((chat_id, reply_to))
        if user_message is not None:
            return user_message.get("message_thread_id") if user_message.get("is_topic_message") else None
        for message in self._bot_messages.get(chat_id, []):
            if message.message_id == reply_to:
                return message.thread_id
        return None

    def _message_exists(self, chat_id: int | str, message_id: int) -> bool:
        if (chat_id, message_id) in self._user_messages:
            return True
        return any(m.message_id == message_id and not m.deleted for m in self._bot_messages.get(chat_id, []))

    def _message_payload(self, chat_id: int | str, message_id: int) -> dict[str, Any] | None:
        user_message = self._user_messages.get((chat_id, message_id))
        if user_message is not None:
            return {k: v for k, v in user_message.items() if k != "reply_to_message"}
        for message in self._bot_messages.get(chat_id, []):
            if message.message_id == message_id:
                return self._bot_message_payload(message, nested=False)
        return None

    def _bot_message_payload(self, message: BotMessage, nested: bool = True) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "message_id": message.message_id,
            "date": message.date,
            "chat": self._chat_for(message.chat_id),
            "from": self.bot_user.to_dict(),
        }
        if message.kind == "text":
            payload["text"] = message.text
            if message.entities:
                payload["entities"] = copy.deepcopy(message.entities)
        elif message.text is not None:
            payload["caption"] = message.text
            if message.entities:
                payload["caption_entities"] = copy.deepcopy(message.entities)
        if message.kind == "document" and message.file_id is not None:
            stored = self._files[message.file_id]
            payload["document"] = {**self._file_fields(stored), "file_name": message.filename}
            if message.mime_type:
                payload["document"]["mime_type"] = message.mime_type
        if message.kind == "photo" and message.file_id is not None:
            stored = self._files[message.file_id]
            width, height = _image_size(stored.data) or (0, 0)
            payload["photo"] = [{**self._file_fields(stored), "width": width, "height": height}]
        if message.thread_id is not None:
            payload["message_thread_id"] = message.thread_id
            payload["is_topic_message"] = True
        if message.reply_markup is not None:
            payload["reply_markup"] = copy.deepcopy(message.reply_markup)
        if message.edit_date is not None:
            payload["edit_date"] = message.edit_date
        if nested and message.reply_to_message_id is not None:
            replied = self._message_payload(message.chat_id, message.reply_to_message_id)
            if replied is not None:
                payload["reply_to_message"] = replied
        return payload

    def _store_bot_message(self, message: BotMessage) -> dict[str, Any]:
        message.history.append(message._version())
        self._bot_messages.setdefault(message.chat_id, []).append(message)
        self._cond.notify_all()
        return self._bot_message_payload(message)

    def _edit_target(self, params: dict[str, Any]) -> BotMessage:
        if params.get("inline_message_id"):
            raise _bad_request("the fake server does not support inline messages")
        chat_id = self._chat_key(params)
        message_id = params.get("message_id")
        for message in self._bot_messages.get(chat_id, []):
            if message.message_id == message_id and not message.deleted:
                return message
        if (chat_id, message_id) in self._user_messages:
            raise _bad_request("message can't be edited")
        raise _bad_request("message to edit not found")

    def _apply_edit(self, message: BotMessage) -> dict[str, Any]:
        message.edit_date = int(time.time())
        message.history.append(message._version())
        self._cond.notify_all()
        return self._bot_message_payload(message)

    def _upload(
        self, params: dict[str, Any], files: dict[str, UploadedFile], field_name: str
    ) -> tuple[StoredFile | None, UploadedFile | None]:
        """Resolve the file parameter to (existing stored file, new upload)."""
        value = params.get(field_name)
        if isinstance(value, str) and value.startswith("attach://"):
            upload = files.get(value[len("attach://") :])
            if upload is None:
                raise _bad_request(f"file {value} not found in the request")
            return None, upload
        if field_name in files:
            return None, files[field_name]
        if isinstance(value, str) and value in self._files:
            return self._files[value], None
        if value is None or value == "":
            raise _bad_request(f"there is no {field_name} in the request")
        raise _bad_request("wrong file identifier/HTTP URL specified")

    # ------------------------------------------------------------------ Bot API methods
    def _api_getMe(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        return self.bot_user.to_dict()

    def _api_getChatMember(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        chat_id, user_id = int(params["chat_id"]), int(params["user_id"])
        with self._cond:
            member = user_id in self.chat_members.get(chat_id, set())
        user = {"id": user_id, "is_bot": False, "first_name": "Tester"}
        return {"status": "member" if member else "left", "user": user}

    def _api_logOut(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        return True

    def _api_close(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        return True

    def _api_deleteWebhook(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        with self._cond:
            self.webhook = None
            if params.get("drop_pending_updates"):
                self._updates.clear()
            self._cond.notify_all()
        return True

    def _api_setWebhook(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        url = params.get("url") or ""
        with self._cond:
            if not url:
                self.webhook = None
            elif not url.startswith("https://"):
                raise _bad_request("bad webhook: An HTTPS URL must be provided for webhook")
            else:
                self.webhook = dict(params)
            if params.get("drop_pending_updates"):
                self._updates.clear()
            self._cond.notify_all()
        return True

    def _api_getWebhookInfo(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        with self._lock:
            return {
                "url": (self.webhook or {}).get("url", ""),
                "has_custom_certificate": False,
                "pending_update_count": len(self._updates),
            }

    def _api_getUpdates(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        offset = params.get("offset")
        limit = max(1, min(100, int(params.get("limit") or 100)))
        timeout = float(params.get("timeout") or 0)
        allowed = params.get("allowed_updates")
        with self._cond:
            if self.webhook is not None:
                raise ApiError(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; "
                    "use deleteWebhook to delete the webhook first",
                )
            if isinstance(allowed, list):
                self._allowed_updates = allowed or None
            if isinstance(offset, int):
                if offset < 0:
                    while len(self._updates) > -offset:
                        self._updates.popleft()
                else:
                    while self._updates and self._updates[0]["update_id"] < offset:
                        self._updates.popleft()
                self._cond.notify_all()
            self._poll_generation += 1
            generation = self._poll_generation
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            while True:
                if generation != self._poll_generation:
                    raise ApiError(
                        409,
                        "Conflict: terminated by other getUpdates request; "
                        "make sure that only one bot instance is running",
                    )
                ready = [
                    copy.deepcopy(update)
                    for update in self._updates
                    if self._allowed_updates is None or any(kind in update for kind in self._allowed_updates)
                ][:limit]
                remaining = deadline - time.monotonic()
                if ready or self._stopping or remaining <= 0:
                    return ready
                self._cond.wait(remaining)

    def _api_setMyCommands(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        commands = params.get("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise _bad_request("can't parse commands JSON object")
        for command in commands:
            name = command.get("command", "") if isinstance(command, dict) else ""
            description = command.get("description", "") if isinstance(command, dict) else ""
            valid_name = 1 <= len(name) <= 32 and all(
                c.isascii() and (c.islower() or c.isdigit() or c == "_") for c in name
            )
            if not valid_name:
                raise _bad_request("BOT_COMMAND_INVALID")
            if not 1 <= len(description) <= 256:
                raise _bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
        key = (
            json.dumps(params.get("scope") or {"type": "default"}, sort_keys=True),
            params.get("language_code") or "",
        )
        with self._cond:
            self.commands[key] = [dict(c) for c in commands]
            self._cond.notify_all()
        return True

    def _api_getMyCommands(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        key = (
            json.dumps(params.get("scope") or {"type": "default"}, sort_keys=True),
            params.get("language_code") or "",
        )
        with self._lock:
            return copy.deepcopy(self.commands.get(key, []))

    def _api_deleteMyCommands(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        key = (
            json.dumps(params.get("scope") or {"type": "default"}, sort_keys=True),
            params.get("language_code") or "",
        )
        with self._cond:
            self.commands.pop(key, None)
        return True

    def _api_sendMessage(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        chat_id = self._chat_key(params)
        source, plain, entities = self._render_text(params)
        markup = params.get("reply_markup")
        _validate_reply_markup(markup, chat_id if isinstance(chat_id, int) else None)
        with self._cond:
            thread_id = self._thread_of(chat_id, params)
            reply_to = self._check_reply(chat_id, params)
            message = BotMessage(
                chat_id=chat_id,
                message_id=self._new_message_id(chat_id),
                kind="text",
                text=plain,
                source=source,
                parse_mode=params.get("parse_mode"),
                reply_markup=markup,
                reply_to_message_id=reply_to,
                date=int(time.time()),
                entities=entities,
                thread_id=thread_id if thread_id is not None else self._reply_thread(chat_id, reply_to),
            )
            return self._store_bot_message(message)

    def _send_file(self, params: dict[str, Any], files: dict[str, UploadedFile], kind: str) -> dict[str, Any]:
        chat_id = self._chat_key(params)
        existing, upload = self._upload(params, files, kind)
        source, plain, entities = self._render_caption(params)
        markup = params.get("reply_markup")
        _validate_reply_markup(markup)
        if upload is not None:
            if not upload.data:
                raise _bad_request("file must be non-empty")
            if len(upload.data) > MAX_UPLOAD_BYTES:
                raise ApiError(413, "Request Entity Too Large")
        data = existing.data if existing is not None else upload.data
        if kind == "photo":
            size = _image_size(data)
            if size is None:
                raise _bad_request("IMAGE_PROCESS_FAILED")
            width, height = size
            if width and height and (width + height > 10000 or max(width, height) / min(width, height) > 20):
                raise _bad_request("PHOTO_INVALID_DIMENSIONS")
        with self._cond:
            thread_id = self._thread_of(chat_id, params)
            reply_to = self._check_reply(chat_id, params)
            if existing is None:
                assert upload is not None
                filename = upload.filename or ("photo.jpg" if kind == "photo" else "file")
                extension = filename.rsplit(".", 1)[-1] if "." in filename else "bin"
                folder = "photos" if kind == "photo" else "documents"
                existing = self._store_file(upload.data, folder, extension, upload.content_type, filename)
            message = BotMessage(
                chat_id=chat_id,
                message_id=self._new_message_id(chat_id),
                kind=kind,
                text=plain,
                source=source,
                parse_mode=params.get("parse_mode"),
                reply_markup=markup,
                reply_to_message_id=reply_to,
                date=int(time.time()),
                entities=entities,
                data=existing.data,
                filename=existing.filename,
                mime_type=existing.mime_type,
                file_id=existing.file_id,
                thread_id=thread_id if thread_id is not None else self._reply_thread(chat_id, reply_to),
            )
            return self._store_bot_message(message)

    def _api_sendDocument(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        return self._send_file(params, files, "document")

    def _api_sendMediaGroup(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        """An album: 2-10 photos, each sent as its own message (as Telegram shows them), captions per photo."""
        media = params.get("media")
        items = json.loads(media) if isinstance(media, str) else media
        if not isinstance(items, list) or not 2 <= len(items) <= 10:
            raise _bad_request("wrong number of media in the album")
        sent = []
        for item in items:
            if not isinstance(item, dict) or item.get("type") != "photo":
                raise _bad_request("only photos in this fake's albums")
            one = {"chat_id": params.get("chat_id"), "photo": item.get("media"), "caption": item.get("caption")}
            if params.get("message_thread_id") is not None:
                one["message_thread_id"] = params["message_thread_id"]
            sent.append(self._send_file({k: v for k, v in one.items() if v is not None}, files, "photo"))
        return sent

    def _api_sendPhoto(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        return self._send_file(params, files, "photo")

    def _api_sendMessageDraft(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        """Bot API 9.3+: an animated preview of a message being written; private chats only."""
        chat_id = self._chat_key(params)
        if not isinstance(chat_id, int) or chat_id <= 0:
            raise _bad_request("TEXTDRAFT_PEER_INVALID")
        draft_id = params.get("draft_id")
        if not isinstance(draft_id, int) or isinstance(draft_id, bool) or draft_id == 0:
            raise _bad_request("draft_id must be non-zero")
        source = str(params.get("text") or "")
        plain, _entities = (
            self._render(source, params.get("parse_mode"), params.get("entities")) if source else ("", [])
        )
        if plain_length(plain) > MAX_TEXT_LENGTH:
            raise _bad_request("message is too long")
        with self._cond:
            self.drafts.append(Draft(chat_id, draft_id, plain, source, time.monotonic()))
            self._cond.notify_all()
        return True

    def _api_editMessageText(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        source, plain, entities = self._render_text(params)
        markup = params.get("reply_markup")
        _validate_reply_markup(markup)
        with self._cond:
            message = self._edit_target(params)
            if message.kind != "text":
                raise _bad_request("there is no text in the message to edit")
            if (message.text, message.entities, message.reply_markup) == (plain, entities, markup):
                raise _bad_request(_NOT_MODIFIED[len("Bad Request: ") :])
            message.text, message.source, message.entities = plain, source, entities
            message.parse_mode = params.get("parse_mode")
            message.reply_markup = markup
            return self._apply_edit(message)

    def _api_editMessageCaption(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        source, plain, entities = self._render_caption(params)
        markup = params.get("reply_markup")
        _validate_reply_markup(markup)
        with self._cond:
            message = self._edit_target(params)
            if message.kind == "text":
                raise _bad_request("there is no caption in the message to edit")
            if (message.text, message.entities, message.reply_markup) == (plain, entities, markup):
                raise _bad_request(_NOT_MODIFIED[len("Bad Request: ") :])
            message.text, message.source, message.entities = plain, source, entities
            message.parse_mode = params.get("parse_mode")
            message.reply_markup = markup
            return self._apply_edit(message)

    def _api_editMessageReplyMarkup(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        markup = params.get("reply_markup")
        _validate_reply_markup(markup)
        with self._cond:
            message = self._edit_target(params)
            if markup == message.reply_markup:
                raise _bad_request(_NOT_MODIFIED[len("Bad Request: ") :])
            message.reply_markup = markup
            return self._apply_edit(message)

    def _api_deleteMessage(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        chat_id = self._chat_key(params)
        message_id = params.get("message_id")
        with self._cond:
            if self._user_messages.pop((chat_id, message_id), None) is not None:
                self._cond.notify_all()
                return True
            for message in self._bot_messages.get(chat_id, []):
                if message.message_id == message_id and not message.deleted:
                    message.deleted = True
                    self._cond.notify_all()
                    return True
        raise _bad_request("message to delete not found")

    def _api_sendChatAction(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        chat_id = self._chat_key(params)
        action = params.get("action")
        if action not in _CHAT_ACTIONS:
            raise _bad_request("wrong parameter action in request")
        with self._cond:
            self._thread_of(chat_id, params)
            self.chat_actions.append((chat_id, action))
            self._cond.notify_all()
        return True

    def _api_answerCallbackQuery(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        query_id = params.get("callback_query_id")
        with self._cond:
            if query_id not in self._pending_callbacks:
                raise _bad_request("query is too old and response timeout expired or query ID is invalid")
            text = params.get("text")
            if text is not None and len(text) > 200:
                raise _bad_request("MESSAGE_TOO_LONG")
            self._pending_callbacks.discard(query_id)
            self.callback_answers[query_id] = dict(params)
            self._cond.notify_all()
        return True

    def _api_getFile(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> Any:
        file_id = params.get("file_id")
        with self._lock:
            stored = self._files.get(file_id) if isinstance(file_id, str) else None
        if stored is None:
            raise _bad_request("invalid file_id")
        if stored.file_size > MAX_DOWNLOAD_BYTES:
            raise _bad_request("file is too big")
        return {**self._file_fields(stored), "file_path": stored.file_path}


class _Handler(BaseHTTPRequestHandler):
    """Routes /bot<token>/<method> and /file/bot<token>/<path> to the FakeTelegram."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall between a reply's header and body writes
    server_version = "FakeTelegram/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    @property
    def fake(self) -> FakeTelegram:
        return self.server.fake

    def _read_body(self) -> bytes:
        """The request's body; `_ClientGone` when the client went away before sending all of it (a request cancelled
        mid-send, e.g. a typing indicator at the end of a turn), which Telegram would never have received."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                line = self.rfile.readline()
                if not line:
                    raise _ClientGone
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(body)
                chunk = self.rfile.read(size)
                if len(chunk) < size:
                    raise _ClientGone
                body += chunk
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise _ClientGone
        return body

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json")

    def _parse_params(self, query: str, body: bytes) -> tuple[dict[str, Any], dict[str, UploadedFile]]:
        raw: dict[str, Any] = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        files: dict[str, UploadedFile] = {}
        content_type = self.headers.get("Content-Type", "")
        if body:
            if content_type.startswith("multipart/form-data"):
                fields, files = _parse_multipart(content_type, body)
                raw.update(fields)
            elif content_type.startswith("application/json"):
                try:
                    decoded = json.loads(body)
                except ValueError:
                    raise _bad_request("can't parse JSON body") from None
                if not isinstance(decoded, dict):
                    raise _bad_request("JSON body must be an object")
                raw.update(decoded)
            else:
                form = parse_qs(body.decode("utf-8"), keep_blank_values=True)
                raw.update({k: v[-1] for k, v in form.items()})
        return {name: _decode_value(name, value) for name, value in raw.items()}, files

    def _dispatch(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)  # PTB percent-encodes file paths (and the ':' of the token)
        try:
            body = self._read_body()
        except _ClientGone:
            self.close_connection = True
            return
        fake = self.fake
        if path.startswith("/file/bot"):
            token, _, file_path = path[len("/file/bot") :].partition("/")
            data = fake.download(file_path) if token == fake.token else None
            if data is None:
                self._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            else:
                self._send(200, data, "application/octet-stream")
            return
        if not path.startswith("/bot"):
            self._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        token, _, method = path[len("/bot") :].partition("/")
        if token != fake.token:
            self._send_json(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
            return
        try:
            params, files = self._parse_params(parts.query, body)
        except ApiError as error:
            self._send_json(error.error_code, error.payload())
            return
        status, payload = fake.handle_call(method, params, files)
        release = fake._take_hold(method, params)
        if release is not None:
            release.wait(30)
        self._send_json(status, payload)


@pytest.fixture
def fake_telegram() -> Iterator[FakeTelegram]:
    """A started FakeTelegram, stopped after the test."""
    with FakeTelegram() as fake:
        yield fake
