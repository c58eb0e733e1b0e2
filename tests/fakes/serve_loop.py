"""The serve loop of the fake HTTP servers: a daemon thread that sleeps until a request comes, and a stop that wakes it.

socketserver's `serve_forever(poll_interval)` wakes every `poll_interval` to see whether `shutdown()` was asked
for, and `shutdown()` waits for that wake-up. A short interval made teardown fast but woke every fake 100 times a
second for its whole life (idle CPU in every test, taken from the test's own thread through the GIL); a long one
made every teardown wait. Here the loop polls rarely and `stop` wakes it at once with a connection of its own: the
loop, woken, sees the stop first and never reads that connection (were it woken just before, the connection is an
empty request, which `BaseHTTPRequestHandler` ends without calling any handler method)."""

from __future__ import annotations

import contextlib
import socket
import threading
from socketserver import BaseServer

IDLE_POLL_SECONDS = 5.0  # a backstop only: `stop` wakes the loop itself


def serve_in_thread(server: BaseServer, name: str) -> threading.Thread:
    """Run `server.serve_forever` in a daemon thread named `name`, already started."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": IDLE_POLL_SECONDS}, name=name, daemon=True
    )
    thread.start()
    return thread


def stop_serving(server: BaseServer) -> None:
    """`server.shutdown()` without waiting for the loop's next poll, then close its socket."""
    stopper = threading.Thread(target=server.shutdown, name="fake-server-stop", daemon=True)
    stopper.start()
    address = server.server_address[:2]
    while stopper.is_alive():
        with contextlib.suppress(OSError):
            socket.create_connection(address, timeout=1).close()  # wakes the loop's select
        stopper.join(0.005)
    server.server_close()
