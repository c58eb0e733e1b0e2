"""Build the PTB Application: base URL from settings, AIORateLimiter, the allow-list first, then the handlers."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import signal
import ssl
from datetime import timedelta
from typing import cast

import httpx
from telegram import Bot, BotCommand, Update
from telegram.constants import ChatMemberStatus
from telegram.error import NetworkError, TelegramError
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    TypeHandler,
    Updater,
    filters,
)
from telegram.request import HTTPXRequest

from agents.core.models import utcnow
from agents.core.settings import Settings
from agents.runtime import Runtime, bot_secrets
from agents.store.database import Store
from telegram_bot import attachments, buttons, commands, handlers, steering, voice
from telegram_bot.replies import TelegramNotifier
from telegram_bot.state import CONTEXT_TYPES, BotApplication
from telegram_bot.strangers import OwnerFirstRateLimiter

log = logging.getLogger(__name__)

SEEN_KEPT = timedelta(days=2)  # Telegram keeps an undelivered update for a day: an older key can never repeat


@functools.cache
def telegram_tls() -> ssl.SSLContext:
    """The TLS context PTB's httpx client would make itself, made once per process: loading the CA bundle costs
    ~40 ms of CPU per client (two per application), and one SSLContext serves them all."""
    return httpx.create_ssl_context()


async def is_chat_member(bot: Bot, chat_id: int, user_id: int) -> bool:
    """Whether Telegram says the user is in the group now (the review page shows a group's task to its members)."""
    member = await bot.get_chat_member(chat_id, user_id)
    if member.status == ChatMemberStatus.RESTRICTED:
        return bool(getattr(member, "is_member", False))
    return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.MEMBER)


async def _post_init(app: BotApplication) -> None:
    settings = app.bot_data.settings
    if settings is None:
        raise RuntimeError("build_application sets the settings before the application can start")
    store = await Store.open(
        settings.paths.database_path
    )  # the notifier's places and shown buttons, from its first send
    await store.seen_events.forget_before(utcnow() - SEEN_KEPT)
    secrets = bot_secrets(
        settings
    )  # the one output filter, with the bot's own secrets: the notifier's and the runtime's
    notifier = TelegramNotifier(
        app.bot,
        secrets,
        store.conversations,
        store.shown_buttons,
        store.chat_moves,
        settings.users.owners,
        review_app=settings.review.review_app_name,
    )
    locks = app.bot_data.chat_locks  # a GitHub request takes its user's private chat's turn lock
    runtime = await Runtime.start(
        settings,
        notifier,
        secrets,
        store=store,
        transcriber=app.bot_data.transcriber,
        sandbox_probe=app.bot_data.sandbox_probe,
        chat_lock=lambda chat: locks.setdefault((chat, 0), asyncio.Lock()),
    )
    app.bot_data.runtime = runtime
    await app.bot.set_my_commands([BotCommand(name, about) for name, about in commands.menu()])
    await runtime.announce_interrupted()
    runtime.start_github_webhook()
    runtime.start_review_server(functools.partial(is_chat_member, app.bot))
    if app.bot_data.handle_signals:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, _on_stop_signal, app)
    gc.collect()
    gc.freeze()  # the start-up heap (torch, PTB, the SDK) is never garbage: keep full collections off it
    me = app.bot.username or "?"
    log.info("agentlab started as @%s; workspaces: %s", me, ", ".join(w.name for w in runtime.workspaces.all()))


def _raise_system_exit() -> None:
    raise SystemExit  # what PTB's own handler does: run_polling/run_webhook then shut down in order


def _on_stop_signal(app: BotApplication) -> None:
    """SIGTERM/SIGINT: interrupt workers and cancel turns first (PTB's stop would wait for them); a second signal
    quits."""
    if app.bot_data.stopping:
        _raise_system_exit()
    app.bot_data.stopping = True  # new turns are refused from now on
    app.bot_data.stop_task = asyncio.ensure_future(_graceful_stop(app))


async def _graceful_stop(app: BotApplication) -> None:
    log.info("stopping: interrupting running tasks and turns")
    try:
        runtime: Runtime | None = app.bot_data.runtime
        if runtime is not None:
            await runtime.stop_workers()
        for turn in list(app.bot_data.turns):
            turn.cancel()
    finally:
        asyncio.get_running_loop().call_soon(_raise_system_exit)


async def _post_stop(app: BotApplication) -> None:
    runtime: Runtime | None = app.bot_data.runtime
    if runtime is not None:
        await runtime.close()


# seconds a Bot API call may take to upload and to be answered (PTB's default is 5): a send whose answer comes later is
# counted as failed and tried again, but Telegram has taken it, so the chat shows it twice. Long enough for a slow
# Telegram's answer; it does not rule duplicates out (the Bot API has no idempotency key to send a message only once).
# getUpdates has a request of its own: its long poll adds its own timeout to the read timeout.
SEND_TIMEOUT = 30.0


def build_application(settings: Settings) -> BotApplication:
    root = settings.telegram.telegram_api_base_url
    tls = {"verify": telegram_tls()}
    # PTB's builder types its result from the defaults it started with (a plain context, ExtBot[None]), not from the
    # context types and rate limiter given here: the cast states what those calls made.
    app = cast(
        BotApplication,
        ApplicationBuilder()
        .token(settings.telegram.telegram_bot_token.get_secret_value())
        .base_url(f"{root}/bot")
        .base_file_url(f"{root}/file/bot")
        .request(
            HTTPXRequest(
                connection_pool_size=256,
                read_timeout=SEND_TIMEOUT,
                write_timeout=SEND_TIMEOUT,
                httpx_kwargs=tls,  # one TLS context
            )
        )
        .get_updates_request(HTTPXRequest(connection_pool_size=1, httpx_kwargs=tls))
        .rate_limiter(OwnerFirstRateLimiter(max_retries=5))  # AIORateLimiter with a lane for refusals to strangers
        .context_types(CONTEXT_TYPES)
        .concurrent_updates(32)
        .post_init(_post_init)
        .post_stop(_post_stop)
        .build(),
    )
    app.bot_data.settings = settings

    # a chat heard from is one the bot can write to again, whoever wrote: before the allow-list (which drops a group's
    # chatter and the service update that the bot was added back)
    app.add_handler(TypeHandler(Update, handlers.chat_heard), group=-4)
    # Telegram's own word that a group was upgraded to a supergroup, before the allow-list: whoever upgraded it, the
    # group's conversation and work go on in the supergroup
    app.add_handler(MessageHandler(filters.StatusUpdate.MIGRATE, handlers.on_chat_migrated), group=-3)
    app.add_handler(TypeHandler(Update, handlers.guard), group=-2)
    app.add_handler(TypeHandler(Update, handlers.drop_repeats), group=-1)  # after the guard: strangers store nothing
    new = filters.UpdateType.MESSAGE  # edits of old messages are not new requests (an edited /cancel runs nothing)
    app.add_handler(CommandHandler("start", commands.start, filters=new))
    app.add_handler(CommandHandler("help", commands.help_command, filters=new))
    app.add_handler(CommandHandler("status", handlers.status, filters=new))
    for name, callback in commands.COMMANDS.items():
        app.add_handler(CommandHandler(name, callback, filters=new))
    app.add_handler(CallbackQueryHandler(buttons.on_button))
    app.add_handler(MessageHandler(filters.StatusUpdate.FORUM_TOPIC_CREATED, handlers.on_topic_created))
    app.add_handler(MessageHandler(new & (filters.VOICE | filters.AUDIO | filters.Document.AUDIO), voice.on_voice))
    # a video joins them to be refused in one sentence there: its caption (an album's, too) is still answered
    media = filters.PHOTO | filters.Document.ALL | filters.VIDEO | filters.ANIMATION
    app.add_handler(MessageHandler(new & media, attachments.on_attachment))
    app.add_handler(MessageHandler(new & filters.COMMAND, handlers.unknown_command))
    app.add_handler(MessageHandler(new & filters.REPLY & filters.TEXT & ~filters.COMMAND, steering.on_reply))
    app.add_handler(MessageHandler(new & filters.TEXT & ~filters.COMMAND, handlers.on_text))
    app.add_handler(MessageHandler(new & ~filters.StatusUpdate.ALL, handlers.unsupported))
    app.add_error_handler(handlers.on_error)
    updater_log = logging.getLogger("telegram.ext.Updater")
    if not any(isinstance(f, UnreachableAtStop) for f in updater_log.filters):
        updater_log.addFilter(UnreachableAtStop())
    return app


class UnreachableAtStop(logging.Filter):
    """python-telegram-bot's updater, stopping, asks Telegram once more to confirm the updates it has fetched; when
    Telegram cannot be reached then (the outage the bot was riding out when stopped), it logs an error with its
    whole traceback. That record becomes one warning line, as the bot's other polling failures are; every other
    record passes as it came."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, NetworkError) and record.getMessage().startswith("Error while calling `get_updates`"):
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.msg = (
                "Telegram could not be reached to confirm the last updates while stopping (%s): they may come again "
                "at the next start, where the bot ignores those it has seen"
            )
            record.args = (error,)
            record.exc_info, record.exc_text = None, None
        return True


async def start_application(app: BotApplication) -> None:
    """What run_polling and run_webhook do before they listen, for embedding (tests, benches): initialise, post_init
    (the runtime starts), start the handlers."""
    await app.initialize()
    await _post_init(app)
    await app.start()


async def start_polling(app: BotApplication, poll_timeout: int = 10) -> None:
    """What run_polling does, for embedding (tests, benches): start the application, poll; a failed getUpdates
    goes to the application's error handlers, as run_polling sends it."""
    await start_application(app)

    def polling_failed(error: TelegramError) -> None:
        app.create_task(app.process_error(error=error, update=None))

    await updater_of(app).start_polling(
        poll_interval=0.0, timeout=poll_timeout, allowed_updates=Update.ALL_TYPES, error_callback=polling_failed
    )


def updater_of(app: BotApplication) -> Updater:
    """The application's updater: `build_application` always makes one (the builder does unless told not to)."""
    if app.updater is None:
        raise RuntimeError("this application was built without an updater")
    return app.updater


async def stop_application(app: BotApplication) -> None:
    """Stop whichever receives updates (long polling, or the webhook's server), then the application, in PTB's
    order: the handlers, post_stop (the runtime closes), shutdown."""
    if (webhook := app.bot_data.webhook) is not None:  # as PTB stops its own: no new connections, the open closed
        app.bot_data.webhook = None
        webhook.stop()
        await webhook.close_all_connections()
    if app.updater is not None and app.updater.running:
        await app.updater.stop()
    if app.running:
        await app.stop()
    await _post_stop(app)
    await app.shutdown()


def run_polling(settings: Settings) -> None:
    """Long polling until SIGINT/SIGTERM: our own handlers (`stop_signals=None` keeps PTB from installing its own)
    interrupt workers first, then stop PTB, which shuts down cleanly."""
    app = build_application(settings)
    app.bot_data.handle_signals = True  # our handler interrupts workers before PTB stops
    app.run_polling(allowed_updates=Update.ALL_TYPES, close_loop=False, stop_signals=None)
