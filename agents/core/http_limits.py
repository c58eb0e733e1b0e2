"""How long each HTTP server of the bot (Telegram's webhook, GitHub's webhook, the review page) waits on a client.

Tornado's defaults keep a connection whose headers never finish for an hour, and one whose body never finishes for
ever: a client on the network could hold connections (and the file descriptors the database, git and the sandboxes
need) without sending anything worth reading. Telegram, GitHub and a phone send a request at once.
"""

from __future__ import annotations

from typing import Any

IDLE_SECONDS = 30.0  # headers not done (or a kept-alive connection idle) this long: closed
BODY_SECONDS = 60.0  # a body not done this long after its headers: closed (GitHub's largest event is ~25 MB)


def client_timeouts() -> dict[str, Any]:
    """The keyword arguments of tornado's HTTPServer that bound a slow client."""
    return {"idle_connection_timeout": IDLE_SECONDS, "body_timeout": BODY_SECONDS}
