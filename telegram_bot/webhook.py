"""Webhook mode beside long polling: Telegram posts updates to WEBHOOK_URL/WEBHOOK_PATH, our own tornado server listens.

TLS is the reverse proxy's job (nginx, Caddy, a tunnel): the bot listens on plain HTTP at
WEBHOOK_LISTEN:WEBHOOK_PORT and refuses (403) every request without the X-Telegram-Bot-Api-Secret-Token
header Telegram sends with WEBHOOK_SECRET_TOKEN. Needs `python-telegram-bot[webhooks]` (tornado).
The server is this module's, not PTB's (`run_webhook` builds one with no way to set its limits), so its request
limits are its own constructor arguments and no other server in the process is touched: bodies are capped at
MAX_BODY_BYTES (an update is a few KB), since tornado's default would buffer 100 MB of an unauthenticated body
before the secret is even looked at. The handler does what PTB's own webhook handler did (403 for a body not declared
JSON, 405 for other methods, the update onto the application's update queue), with the secret compared in constant
time and a body that is not a JSON object answered 400 (PTB's answered 500).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
from http import HTTPStatus

from telegram import Update
from telegram.error import BadRequest, NetworkError, TimedOut
from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler

from agents.core.http_limits import client_timeouts
from agents.core.settings import Settings
from telegram_bot.app import build_application, start_application, stop_application
from telegram_bot.startup import until_reached
from telegram_bot.state import BotApplication

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024  # Telegram's updates are JSON of a few KB (a 4096-character message with a reply)
MAX_HEADER_BYTES = 16 * 1024
MAX_CONNECTIONS = 40  # setWebhook's max_connections, what PTB's run_webhook registers by default
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def public_webhook_url(settings: Settings) -> str:
    """The URL registered with Telegram (setWebhook): WEBHOOK_URL + '/' + WEBHOOK_PATH."""
    if not settings.telegram.webhook_url:
        raise ValueError("WEBHOOK_URL is not set: the bot runs in long-polling mode")
    return f"{settings.telegram.webhook_url.rstrip('/')}/{settings.telegram.webhook_path.strip('/')}"


def _secret(settings: Settings) -> str:
    if settings.telegram.webhook_secret_token is None:  # settings refuse this combination; belt and braces
        raise ValueError("WEBHOOK_SECRET_TOKEN is required in webhook mode")
    return settings.telegram.webhook_secret_token.get_secret_value()


class _UpdateHandler(RequestHandler):
    """POST of one update: JSON only (403 otherwise, as PTB), the secret header (403), a JSON object that is an
    update (400), then onto the update queue and 200."""

    SUPPORTED_METHODS = ("POST",)  # anything else is 405

    def initialize(self, app: BotApplication, secret: str) -> None:
        self.app, self.secret = app, secret.encode()

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", 'application/json; charset="utf-8"')

    def _refuse(self, status: HTTPStatus, why: str) -> None:
        log.debug("webhook request from %s refused: %s", self.request.remote_ip, why)
        self.send_error(status, reason=why)

    async def post(self) -> None:
        if self.request.headers.get("Content-Type") != "application/json":
            return self._refuse(HTTPStatus.FORBIDDEN, "not application/json")
        token = self.request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(token, self.secret):
            return self._refuse(HTTPStatus.FORBIDDEN, "missing or wrong secret token")
        try:
            data = json.loads(self.request.body)
        except ValueError:
            return self._refuse(HTTPStatus.BAD_REQUEST, "body is not JSON")
        if not isinstance(data, dict):
            return self._refuse(HTTPStatus.BAD_REQUEST, "an update is a JSON object")
        try:
            update = Update.de_json(data, self.app.bot)
        except Exception:
            log.exception("an update from Telegram could not be read; it was not processed")
            return self._refuse(HTTPStatus.BAD_REQUEST, "Update could not be processed")
        self.app.bot.insert_callback_data(update)  # what PTB's handler does (a no-op without arbitrary callback data)
        runtime = self.app.bot_data.runtime
        user = update.effective_user
        if runtime is not None and user is not None and user.id in runtime.settings.users.allowed_user_ids:
            # kept before Telegram hears 200 (it forgets the update then): a kill before its turn loses nothing
            await runtime.chat_actions.update_arrived(update.update_id, self.request.body.decode())
        await self.app.update_queue.put(update)
        self.set_status(HTTPStatus.OK)


class _QuietApplication(Application):
    def log_request(self, handler: RequestHandler) -> None:
        """No access log line per update (PTB's webhook server keeps quiet too); refusals are logged by the handler."""


def webhook_server(app: BotApplication, settings: Settings) -> HTTPServer:
    """The server Telegram posts updates to, not yet listening: POST /WEBHOOK_PATH (a trailing slash too), with this
    module's request limits."""
    path = re.escape("/" + settings.telegram.webhook_path.strip("/"))
    routes = [(rf"{path}/?", _UpdateHandler, dict(app=app, secret=_secret(settings)))]
    return HTTPServer(
        _QuietApplication(routes),
        max_body_size=MAX_BODY_BYTES,
        max_header_size=MAX_HEADER_BYTES,
        **client_timeouts(),
    )


async def start_webhook(app: BotApplication, settings: Settings) -> None:
    """Start the application, handle again the updates a stopped bot kept but may not have handled, listen, and
    register the webhook with Telegram (setWebhook, with the options PTB's run_webhook sent; a moment of 5xx or a
    timeout is waited out as the start-up checks do); `stop_application` stops it. The server listens before
    Telegram is told where to post."""
    await start_application(app)
    if app.bot_data.runtime is not None:  # handled ones are known (seen_events) and do nothing
        for body in await app.bot_data.runtime.chat_actions.kept_updates():
            with contextlib.suppress(ValueError, TypeError):
                await app.update_queue.put(Update.de_json(json.loads(body), app.bot))
    server = webhook_server(app, settings)
    server.listen(settings.telegram.webhook_port, settings.telegram.webhook_listen)
    app.bot_data.webhook = server

    async def register() -> str | None:
        try:
            await app.bot.set_webhook(
                url=public_webhook_url(settings),
                allowed_updates=Update.ALL_TYPES,
                max_connections=MAX_CONNECTIONS,
                secret_token=_secret(settings),
            )
        except (NetworkError, TimedOut) as err:  # a 5xx, a timeout; a refused URL or token (BadRequest) is raised
            if isinstance(err, BadRequest):
                raise
            return str(err)
        return None

    await until_reached("Telegram's setWebhook", register)


def run_webhook(settings: Settings) -> None:
    """Serve the webhook until SIGINT/SIGTERM, as PTB's run_webhook ran it: our signal handler interrupts workers,
    then stops the loop with SystemExit, and the application stops and shuts down in order on the same loop."""
    app = build_application(settings)
    app.bot_data.handle_signals = True  # our handler interrupts workers before the application stops
    log.info(
        "webhook mode: %s, listening on %s:%s",
        public_webhook_url(settings),
        settings.telegram.webhook_listen,
        settings.telegram.webhook_port,
    )
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(start_webhook(app, settings))
        loop.run_forever()
    except (KeyboardInterrupt, SystemExit):
        log.debug("stop signal: shutting down")
    finally:
        loop.run_until_complete(stop_application(app))
