"""The Anthropic client as configured from settings, usage accounting, and what an API failure means to a user."""

from __future__ import annotations

import anthropic

from agents.core.models import Usage, UsageRecord
from agents.core.settings import Settings
from agents.core.tls import client_tls

OVERLOADED_REPLY = "Claude is overloaded, try again in a minute."


def make_client(settings: Settings) -> anthropic.AsyncAnthropic:
    """One AsyncAnthropic for the process; the SDK's own retries and timeouts do the retrying."""
    return anthropic.AsyncAnthropic(
        api_key=settings.anthropic.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic.anthropic_base_url,  # None → ANTHROPIC_BASE_URL env or the SDK default
        max_retries=settings.anthropic.anthropic_max_retries,
        timeout=settings.anthropic.anthropic_timeout_seconds,
        http_client=anthropic.DefaultAsyncHttpxClient(verify=client_tls()),  # the SDK's defaults, the shared TLS
    )


def usage_of(response: anthropic.types.Message) -> Usage:
    u = response.usage
    return Usage(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_creation_input_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0,
        cache_read_input_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
    )


def cost_usd(usage: Usage, settings: Settings) -> float:
    """Estimated cost from the price table in settings (USD per million tokens)."""
    return (
        usage.input_tokens * settings.anthropic.price_input_per_mtok
        + usage.output_tokens * settings.anthropic.price_output_per_mtok
        + usage.cache_creation_input_tokens * settings.anthropic.price_cache_write_per_mtok
        + usage.cache_read_input_tokens * settings.anthropic.price_cache_read_per_mtok
    ) / 1_000_000


def usage_record(
    response: anthropic.types.Message,
    agent: str,
    chat_id: int | None,
    task_id: int | None,
    user_id: int | None = None,
) -> UsageRecord:
    return UsageRecord(
        agent=agent,
        model=response.model,
        chat_id=chat_id,
        task_id=task_id,
        user_id=user_id,
        **usage_of(response).model_dump(),
    )


# an `error` event in an answer's stream that had begun (its HTTP status 200): what its type says of the outage
_OUTAGE_TYPES = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate limited",
    "api_error": "a server error",
    "timeout_error": "timed out",
}


def outage(err: anthropic.APIError) -> str | None:
    """What kind of outage an API failure is, in a few words ("overloaded", "rate limited", …), when it is one: a
    failure that passes (the kinds the SDK itself retries: the network, a timeout, 408, 409, 429, 5xx including 529
    overloaded), not a request the API refuses (400, 401, 403, 404, 413…: the same request is refused again)."""
    if isinstance(err, anthropic.APITimeoutError):
        return "timed out"
    if isinstance(err, anthropic.APIConnectionError):
        return "network problem"
    if not isinstance(err, anthropic.APIStatusError):
        return None
    status = err.status_code
    if status == 529:
        return "overloaded"
    if status == 429:
        return "rate limited"
    if status >= 500:
        return f"server error {status}"
    if status in (408, 409):
        return f"error {status}"
    if status < 400:  # an error event mid-stream: its own type says what it is
        body = err.body.get("error", err.body) if isinstance(err.body, dict) else None
        kind = body.get("type") if isinstance(body, dict) else None
        return _OUTAGE_TYPES.get(kind) if isinstance(kind, str) else None
    return None


def explain_api_error(err: anthropic.APIError) -> str:
    """A short, true sentence for the user about an API failure that the SDK's retries did not absorb."""
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        if status in (429, 529) or status >= 500:
            return OVERLOADED_REPLY
        if status in (401, 403):
            return "The Anthropic API key was refused; the bot's owner needs to check ANTHROPIC_API_KEY."
        if status == 400 and "prompt is too long" in str(err).lower():
            return (
                "This grew past what Claude can read at once (its context window). /new starts a fresh "
                "conversation; a task can be split into smaller ones."
            )
        if status == 413:  # not temporary: the same request is refused again
            return (
                "This grew past the size Claude's API takes in one request (32 MB, mostly photos and files). /new "
                "starts a fresh conversation; send fewer or smaller files at once."
            )
        if status == 400:
            return "Claude refused the request as invalid; I've logged it. Try rephrasing, or /new to start afresh."
        return f"Claude answered with an error ({status}); try again in a minute."
    if isinstance(err, anthropic.APITimeoutError):
        return "Claude took too long to answer; try again in a minute."
    if isinstance(err, anthropic.APIConnectionError):
        return "I couldn't reach Claude (network problem); try again in a minute."
    return "Something went wrong talking to Claude; try again in a minute."
