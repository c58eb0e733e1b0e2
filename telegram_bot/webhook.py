"""Webhook mode beside long polling: Telegram posts updates to WEBHOOK_URL/WEBHOOK_PATH, PTB's tornado server listens.

TLS is the reverse proxy's job (nginx, Caddy, a tunnel): the bot listens on plain HTTP at
WEBHOOK_LISTEN:WEBHOOK_PORT and refuses (403) every request without the X-Telegram-Bot-Api-Secret-Token
header Telegram sends with WEBHOOK_SECRET_TOKEN. Needs `python-telegram-bot[webhooks]` (tornado).
Request bodies are capped at MAX_BODY_BYTES (an update is a few KB): tornado's default would buffer 100 MB of an
unauthenticated body before the secret is even looked at.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import Update
from tornado.httpserver import HTTPServer

from agents.core.settings import Settings
from telegram_bot.app import build_application, start_application, updater_of
from telegram_bot.state import BotApplication

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024  # Telegram's updates are JSON of a few KB (a 4096-character message with a reply)
MAX_HEADER_BYTES = 16 * 1024


def limit_request_sizes() -> None:
    """Every tornado HTTPServer made from now on (PTB's webhook server is one) refuses bigger bodies up front.

    `Configurable.configure` is tornado's way to give an HTTPServer constructor arguments PTB does not pass;
    a Content-Length over the cap is answered 400 before the body is read, a chunked body is cut off there.
    """
    HTTPServer.configure(None, max_body_size=MAX_BODY_BYTES, max_header_size=MAX_HEADER_BYTES)


def public_webhook_url(settings: Settings) -> str:
    """The URL registered with Telegram (setWebhook): WEBHOOK_URL + '/' + WEBHOOK_PATH."""
    if not settings.webhook_url:
        raise ValueError("WEBHOOK_URL is not set: the bot runs in long-polling mode")
    return f"{settings.webhook_url.rstrip('/')}/{settings.webhook_path.strip('/')}"


def _secret(settings: Settings) -> str:
    if settings.webhook_secret_token is None:  # settings refuse this combination; belt and braces
        raise ValueError("WEBHOOK_SECRET_TOKEN is required in webhook mode")
    return settings.webhook_secret_token.get_secret_value()


def _webhook_options(settings: Settings) -> dict[str, Any]:
    limit_request_sizes()
    return dict(
        listen=settings.webhook_listen,
        port=settings.webhook_port,
        url_path=settings.webhook_path,
        webhook_url=public_webhook_url(settings),
        secret_token=_secret(settings),
        allowed_updates=Update.ALL_TYPES,
    )


def run_webhook(settings: Settings) -> None:
    """Serve the webhook until SIGINT/SIGTERM; PTB runs post_init, registers the webhook, and shuts down cleanly."""
    app = build_application(settings)
    app.bot_data.handle_signals = True  # our handler interrupts workers before PTB stops
    log.info(
        "webhook mode: %s, listening on %s:%s",
        public_webhook_url(settings),
        settings.webhook_listen,
        settings.webhook_port,
    )
    app.run_webhook(**_webhook_options(settings), close_loop=False, stop_signals=None)


async def start_webhook(app: BotApplication, settings: Settings) -> None:
    """What run_webhook does, for embedding (tests): start the application, serve the webhook."""
    await start_application(app)
    await updater_of(app).start_webhook(**_webhook_options(settings))
