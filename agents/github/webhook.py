"""GitHub's webhook events: `POST /github` on GITHUB_WEBHOOK_LISTEN (a tornado server on the bot's event loop).

A webhook event is checked before anything else: its `X-Hub-Signature-256` must be the HMAC of the body under
GITHUB_WEBHOOK_SECRET (gidgethub's `sansio.Event.from_http` compares in constant time); a missing or wrong one is
answered 401 and nothing is stored. A good one is stored before it is acknowledged, under what it is about
(`event_key`: the comment's, review's, check's or issue's id and the action; the signed body's digest when it names
none), never under its `X-GitHub-Delivery` id, which the signature does not cover: the same signed body sent again
under new ids (a replay, or GitHub's own redelivery) is acknowledged and does nothing. Then it is handled in the
background: GitHub waits 10 s at most for an answer, and a task takes minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import gidgethub
import gidgethub.sansio
from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler

from agents.core.http_limits import client_timeouts
from agents.store.github import WebhookEvent

log = logging.getLogger(__name__)

PATH = "/github"
MAX_BODY_BYTES = 5 * 1024 * 1024  # an issue event with a long body is tens of KB; GitHub caps payloads at 25 MB
MAX_HEADER_BYTES = 16 * 1024

Store = Callable[[WebhookEvent], Awaitable[bool]]  # stores a webhook event; False when its id was stored before
Handle = Callable[[WebhookEvent], Awaitable[None]]


ABOUT = ("comment", "review", "check_run", "check_suite", "issue", "pull_request")  # the most specific first


def event_key(event: str, data: dict[str, Any], body: bytes) -> str:
    """One key per thing a webhook event reports, from its signed body: `issue_comment:comment:<id>:created` (the
    comment's id and the action), else the digest of the body itself."""
    action = str(data.get("action") or "")
    for part in ABOUT:
        about = data.get(part)
        if isinstance(about, dict) and about.get("id") is not None:
            return f"{event}:{part}:{about['id']}:{action}"
    return f"{event}:sha256:{hashlib.sha256(body).hexdigest()}"


def verified_event(headers: dict[str, str], body: bytes, secret: str) -> WebhookEvent:
    """The webhook event, if its X-Hub-Signature-256 is good; raises gidgethub.ValidationFailure otherwise (and
    gidgethub.BadRequest for a signed body that is not a JSON GitHub event). The older SHA-1 header alone is not
    accepted. The signature is checked before anything else of the request: whatever else it lacks, an unsigned or
    forged request is a 401."""
    lowered = {k.lower(): v for k, v in headers.items() if k.lower() != "x-hub-signature"}
    signature = lowered.get("x-hub-signature-256", "")
    if not signature.startswith("sha256="):  # gidgethub would take a `sha1=` MAC in it
        raise gidgethub.ValidationFailure("no SHA-256 signature in X-Hub-Signature-256")
    try:  # gidgethub checks the signature first (ValidationFailure), then the body and the event's headers
        event = gidgethub.sansio.Event.from_http(lowered, body, secret=secret)
    except KeyError:  # signed, but no X-GitHub-Event or X-GitHub-Delivery
        raise gidgethub.BadRequest(HTTPStatus.BAD_REQUEST, "not a GitHub webhook event") from None
    if not event.event or not event.delivery_id:
        raise gidgethub.BadRequest(HTTPStatus.BAD_REQUEST, "not a GitHub webhook event")
    data = event.data if isinstance(event.data, dict) else {}
    key = event_key(event.event, data, body)
    return WebhookEvent(id=key, event=event.event, payload=json.dumps(event.data), delivery_id=event.delivery_id)


class _WebhookHandler(RequestHandler):
    def initialize(self, secret: str, store: Store, handle: Handle, tasks: set[asyncio.Task[None]]) -> None:
        self.secret, self.store_event, self.handle, self.tasks = secret, store, handle, tasks

    async def post(self) -> None:
        try:
            hook = verified_event(dict(self.request.headers), self.request.body, self.secret)
        except gidgethub.ValidationFailure:
            self.set_status(401)
            self.finish({"error": "bad or missing X-Hub-Signature-256"})
            return
        except gidgethub.BadRequest:
            self.set_status(400)
            self.finish({"error": "not a JSON GitHub webhook event"})
            return
        if not await self.store_event(hook):  # what it is about was seen before: a redelivery or a replay
            log.info("GitHub webhook event %s repeats %s: nothing done", hook.delivery_id, hook.id)
            self.set_status(200)
            self.finish({"ok": True, "duplicate": True})
            return
        self.set_status(202)
        self.finish({"ok": True})
        task = asyncio.ensure_future(self.handle(hook))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def check_xsrf_cookie(self) -> None:  # a server-to-server POST
        return None


class WebhookServer:
    """Serves POST /github until `stop`; webhook events handled in the background are awaited (bounded) on stop."""

    def __init__(self, listen: str, secret: str, store: Store, handle: Handle) -> None:
        host, _, port = listen.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.tasks: set[asyncio.Task[None]] = set()
        app = Application([(PATH, _WebhookHandler, dict(secret=secret, store=store, handle=handle, tasks=self.tasks))])
        self._server = HTTPServer(
            app, max_body_size=MAX_BODY_BYTES, max_header_size=MAX_HEADER_BYTES, **client_timeouts()
        )

    def start(self) -> None:
        self._server.listen(self.port, self.host)
        log.info("GitHub webhook: POST http://%s:%s%s", self.host, self.port, PATH)

    async def stop(self, timeout: float = 5.0) -> None:
        self._server.stop()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(timeout):
                await self._server.close_all_connections()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout)
