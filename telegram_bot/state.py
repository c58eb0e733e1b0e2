"""What the Telegram adapter keeps for the life of the process: one typed `BotState` as PTB's `bot_data`.

`build_application` passes `ContextTypes(bot_data=BotState)`, so every handler reads `context.bot_data.runtime`
(an attribute, checked by type checkers) instead of a string key.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from telegram.ext import Application, CallbackContext, ContextTypes, ExtBot, JobQueue

from telegram_bot.strangers import RateLimitArgs, Strangers

if TYPE_CHECKING:
    from telegram import Message
    from tornado.httpserver import HTTPServer

    from agents.core.protocols import SpeechToText
    from agents.core.settings import Settings
    from agents.runtime import Runtime
    from agents.sandbox.bwrap import SandboxProbe


# An album: its chat, topic, sender and media group id (the id is the sender's app's to choose)
AlbumKey = tuple[int, int | None, int | None, str | None]


@dataclass
class BotState:
    settings: Settings | None = None
    runtime: Runtime | None = None  # set by post_init once the store is open and the crew runs
    transcriber: SpeechToText | None = None  # given (tests, benches) or made by the runtime
    sandbox_probe: SandboxProbe | None = None  # given (tests: one per test process) or made by the runtime
    handle_signals: bool = False  # run_polling / run_webhook: our SIGTERM handler interrupts workers first
    stopping: bool = False  # a stop signal arrived: new turns are refused
    stop_task: asyncio.Future[None] | None = None
    webhook: HTTPServer | None = None  # webhook mode: the server Telegram posts updates to, stopped before the rest
    strangers: Strangers = field(default_factory=Strangers)  # who was refused, and when
    albums: dict[AlbumKey, list[Message]] = field(default_factory=dict)  # photos of one album, gathered
    # in a group, the albums whose first item was addressed to the bot ("chat:album id" → when): the others pass too
    addressed_albums: dict[str, float] = field(default_factory=dict)
    turns: set[asyncio.Task[Any]] = field(default_factory=set)  # conversation turns running now
    chat_locks: dict[tuple[int, int], asyncio.Lock] = field(default_factory=dict)  # one turn at a time per chat/topic
    topic_keys: dict[tuple[int, int], int] = field(default_factory=dict)  # (chat, thread) → conversation key
    named_topics: set[tuple[int, int]] = field(default_factory=set)  # (chat, thread) whose name is recorded


Context = CallbackContext[ExtBot[RateLimitArgs], dict[Any, Any], dict[Any, Any], BotState]
# The bot's Application, its type parameters spelled once: the bot, the context, user and chat data, bot data, jobs.
BotApplication = Application[
    ExtBot[RateLimitArgs], Context, dict[Any, Any], dict[Any, Any], BotState, JobQueue[Context]
]
CONTEXT_TYPES = ContextTypes(context=CallbackContext, bot_data=BotState)
