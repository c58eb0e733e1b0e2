"""What `agentlab run` does before the bot starts: keep the bot's secrets out of every log record, and prove the two
keys work, each outcome one line.

- A key the service rejects (Telegram's 401/404 for the token, Anthropic's 401/403 for the key) stops the start with
  one sentence saying what to do, exit status 2: the systemd unit's `RestartPreventExitStatus=2` then waits for the
  owner instead of restarting every few seconds.
- A service that cannot be reached (no network yet, DNS down, an outage) is tried again with back-off, one log line per
  attempt, as a long-running service should: the bot starts once both answer.
- Telegram is asked first, and the Anthropic SDK is imported only once it has taken the token: the import alone costs
  about a second of CPU, which a refused token or a Telegram still out of reach does not need to pay (the key is then
  proven the moment Telegram answers).
- PTB and httpx log request URLs, and Telegram's URLs carry the token; exception messages may too. `RedactSecrets`, a
  filter on every log handler, replaces the bot's own secrets in each record (message, arguments, traceback).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from telegram import Bot
from telegram.error import InvalidToken, TelegramError
from telegram.request import HTTPXRequest

from agents.core.settings import Settings
from agents.core.tls import client_tls

log = logging.getLogger(__name__)

FIRST_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 60.0
CHECK_TIMEOUT_SECONDS = 10.0
HIDDEN = "<secret>"

TELEGRAM_REJECTED = "Telegram rejected TELEGRAM_BOT_TOKEN ({code}): copy it again from @BotFather"
ANTHROPIC_REJECTED = (
    "Anthropic rejected ANTHROPIC_API_KEY ({code}): create a key at console.anthropic.com → API keys and put it in .env"
)


class KeyRejected(Exception):
    """A service refused the bot's key: one sentence with what to do; the process exits with status 2."""


def token_refused(err: InvalidToken) -> KeyRejected:
    """What PTB's InvalidToken means for the owner, in one sentence without the token (PTB's own message holds it)."""
    code = 404 if "not found" in str(err).lower() else 401
    return KeyRejected(TELEGRAM_REJECTED.format(code=code))


class RedactSecrets(logging.Filter):
    """Replaces each of the bot's secrets in a record's message, arguments and traceback text by `<secret>`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # longest first, so a secret that contains another is replaced whole; short strings are not secrets
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def hide(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, HIDDEN)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: logging reports it itself
            return True
        record.msg, record.args = self.hide(message), None
        if record.exc_info:
            record.exc_text = self.hide(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = self.hide(record.exc_text)
        if record.stack_info:
            record.stack_info = self.hide(record.stack_info)
        return True


def install_redaction(settings: Settings) -> None:
    """Adds the filter to every handler of the root logger (handler filters see the records of every logger): every
    secret the settings hold (`Settings.secret_values`)."""
    redact = RedactSecrets(settings.secret_values())
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)


def _delays() -> Iterable[float]:
    delay = FIRST_DELAY_SECONDS
    while True:
        yield delay
        delay = min(delay * 2, MAX_DELAY_SECONDS)


async def until_reached(
    what: str,
    attempt_once: Callable[[], Awaitable[str | None]],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Calls `attempt_once` until it returns None (reached); each other result is why not: one log line, a wait."""
    for attempt, delay in enumerate(_delays(), start=1):
        why = await attempt_once()
        if why is None:
            if attempt > 1:
                log.info("%s answered after %d attempts", what, attempt)
            return
        log.warning("cannot reach %s (%s): trying again in %g s (attempt %d)", what, why, delay, attempt)
        await sleep(delay)


async def telegram_reachable(settings: Settings, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> str:
    """getMe until Telegram answers; the bot's @username. Raises KeyRejected when the token is refused."""
    root = settings.telegram.telegram_api_base_url
    username = ""

    async def once() -> str | None:
        nonlocal username
        tls = {"verify": client_tls()}
        bot = Bot(
            settings.telegram.telegram_bot_token.get_secret_value(),
            base_url=f"{root}/bot",
            request=HTTPXRequest(connection_pool_size=1, httpx_kwargs=tls, connect_timeout=CHECK_TIMEOUT_SECONDS),
            get_updates_request=HTTPXRequest(connection_pool_size=1, httpx_kwargs=tls),  # else PTB makes its own TLS
        )
        try:
            me = await bot.get_me()
        except InvalidToken as err:
            raise token_refused(err) from None
        except TelegramError as err:  # NetworkError, TimedOut, RetryAfter, a 5xx: all pass with time
            return f"{type(err).__name__}: {err}"
        finally:
            await bot.shutdown()
        username = me.username or "?"
        return None

    await until_reached(f"Telegram at {root}", once, sleep)
    return username


async def anthropic_reachable(settings: Settings, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """A free `count_tokens` until the API answers. Raises KeyRejected when the key is refused; any other answer
    (a model name the key cannot use, a 400) is left to the first real request and doctor."""
    import anthropic  # here, not at the top: see the module's docstring

    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic.anthropic_base_url,
        max_retries=0,
        timeout=CHECK_TIMEOUT_SECONDS,
        http_client=anthropic.DefaultAsyncHttpxClient(verify=client_tls()),
    )

    async def once() -> str | None:
        try:
            await client.messages.count_tokens(
                model=settings.orchestrator.orchestrator_model, messages=[{"role": "user", "content": "ping"}]
            )
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as err:
            raise KeyRejected(ANTHROPIC_REJECTED.format(code=err.status_code)) from None
        except anthropic.APIConnectionError as err:  # APITimeoutError too; the cause says more than "Connection error."
            cause = err.__cause__
            return f"{type(err).__name__}: {err}" + (f" {type(cause).__name__}: {cause}" if cause else "")
        except anthropic.APIStatusError as err:
            if err.status_code == 429 or err.status_code >= 500:
                return f"HTTP {err.status_code}"
            log.warning("Anthropic count_tokens answered %s; starting anyway (agentlab doctor says more)", err)
        return None

    try:
        await until_reached(f"Anthropic at {client.base_url}", once, sleep)
    finally:
        await client.close()


async def both_reachable(settings: Settings) -> str:
    """Both keys proven, the token first (each service tried until it answers); the bot's @username."""
    username = await telegram_reachable(settings)
    await anthropic_reachable(settings)
    return username
