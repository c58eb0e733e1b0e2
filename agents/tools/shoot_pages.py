"""Inside a task's sandbox: one headless Chromium takes every picture of a screenshot (several pages, several sizes).

Run as a plain script by the sandbox's own `python3` (it imports nothing of agentlab):
`shoot_pages.py SHOTS_JSON CHROMIUM [FLAG...]`, SHOTS_JSON a list of {"url", "width", "height", "file"}. Chromium is
driven over its DevTools pipe (file descriptors 3 and 4, JSON messages ended by NUL): each picture is a fresh load of
its page at its size, after the load event, as `chromium --screenshot` takes it, but a browser start (about a second
of CPU) serves them all; a page on the task's loopback where nothing listens is refused before any start. Exit
status 1 and a line on stderr when a picture could not be taken.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

LISTEN_WAIT = 2.0  # seconds a loopback page's port is tried before the page is refused


class DevTools:
    """The browser end of the DevTools pipe: calls answered in order, events kept until asked for."""

    def __init__(self, send: int, receive: int) -> None:
        self.send, self.receive = send, receive
        self.buffer, self.last = b"", 0
        self.events: list[dict[str, Any]] = []

    def _next_message(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            chunk = os.read(self.receive, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium ended before the pictures were taken")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.last += 1
        message: dict[str, Any] = {"id": self.last, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self.send, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._next_message()
            if answer.get("id") != self.last:
                self.events.append(answer)
                continue
            if "error" in answer:
                raise RuntimeError(f"{method}: {answer['error'].get('message', answer['error'])}")
            result: dict[str, Any] = answer.get("result", {})
            return result

    def wait_for(self, event: str, session: str) -> None:
        while True:
            message = self.events.pop(0) if self.events else self._next_message()
            if message.get("method") == event and message.get("sessionId") == session:
                return


def refused(url: str) -> str | None:
    """Why a page on this machine's loopback (the task's own services) cannot load: nothing listens on its port, said
    before a Chromium is started for it (the worker asks while its service still starts); None when it may load."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return None
    try:
        loopback = host in ("localhost", "localhost.") or host.endswith(".localhost") or ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    deadline = time.monotonic() + LISTEN_WAIT
    while True:
        try:
            socket.create_connection((host, port), timeout=5).close()
            return None
        except ConnectionRefusedError:
            if time.monotonic() >= deadline:
                return f"{url}: net::ERR_CONNECTION_REFUSED (nothing listens on {host}:{port} in the task)"
            time.sleep(0.1)  # a service that is still starting gets the time a Chromium start would have given it
        except OSError:
            return None  # Chromium says what it meets


def shoot(devtools: DevTools, shots: list[dict[str, Any]]) -> None:
    targets = devtools.call("Target.getTargets")["targetInfos"]
    page = next(t["targetId"] for t in targets if t["type"] == "page")
    session = devtools.call("Target.attachToTarget", targetId=page, flatten=True)["sessionId"]
    devtools.call("Page.enable", session)
    for shot in shots:
        devtools.call(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=shot["width"],
            height=shot["height"],
            deviceScaleFactor=1,
            mobile=False,  # like --window-size: the page laid out at that width, as a narrow desktop window shows it
        )
        devtools.events.clear()
        navigated = devtools.call("Page.navigate", session, url=shot["url"])
        if "errorText" in navigated:
            raise RuntimeError(f"{shot['url']}: {navigated['errorText']}")
        if "loaderId" not in navigated:  # the page already shown (or it with another #fragment): load it afresh
            devtools.call("Page.reload", session)
        devtools.wait_for("Page.loadEventFired", session)
        picture = devtools.call("Page.captureScreenshot", session, format="png")
        with open(shot["file"], "wb") as out:
            out.write(base64.b64decode(picture["data"]))


def main(shots_json: str, chromium: str, flags: list[str]) -> int:
    shots = json.loads(shots_json)
    for shot in shots:
        if why := refused(shot["url"]):
            print(f"no screenshot: {why}", file=sys.stderr)
            return 1
    to_browser, from_us = os.pipe()
    to_us, from_browser = os.pipe()

    def pipe_fds() -> None:  # in the child: its DevTools pipe on 3 (commands in) and 4 (answers out)
        commands, answers = os.dup(to_browser), os.dup(from_browser)
        os.dup2(commands, 3)
        os.dup2(answers, 4)

    browser = subprocess.Popen(
        [chromium, *flags, "--remote-debugging-pipe", "about:blank"],
        preexec_fn=pipe_fds,
        close_fds=False,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    os.close(to_browser)
    os.close(from_browser)
    devtools = DevTools(from_us, to_us)
    try:
        shoot(devtools, shots)
        devtools.call("Browser.close")
    except (RuntimeError, OSError, ValueError, KeyError, StopIteration) as err:
        print(f"no screenshot: {err}", file=sys.stderr)
        browser.kill()
        return 1
    finally:
        browser.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
